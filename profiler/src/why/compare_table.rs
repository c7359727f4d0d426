//! The table of a [`WhyDiff`]'s changes as one value: the rows and cells that the text
//! (`compare_text`) and the HTML page (`html::diff`) both lay out, in the same words.

use super::compare::{Basis, CauseChange, ChangeStatus, WhyDiff};
use crate::render::units::{format_fraction, format_ns};

/// The changes, largest first, then the parts of the threads' time that are not causes.
#[derive(Debug)]
pub struct ChangeTable {
    /// One row per change.
    pub rows: Vec<ChangeRow>,
    /// The threads' own CPU time, and what was not analysed.
    pub rest: Vec<RestRow>,
}

/// One change as its cells.
#[derive(Debug)]
pub struct ChangeRow {
    /// Rank, 1 first.
    pub rank: usize,
    /// `cpu`, `kernel-lock`, ...
    pub kind: &'static str,
    /// New, gone, grew, shrank or same.
    pub status: ChangeStatus,
    /// Where (the change's telling frame, with its kernel lock).
    pub place: String,
    /// Its kernel lock and the path that slept on it (`rwsem (rwsem_down_read_slowpath <-
    /// lock_mm_and_find_vma)`), else its kernel stack's leaf, else empty.
    pub kernel: String,
    /// Base's share of the analysed threads' time; `None` where the cause is absent.
    pub base: Option<f64>,
    /// Other's.
    pub other: Option<f64>,
    /// Other minus base, on the basis.
    pub delta: Signed,
    /// Its part of the difference.
    pub explains: Option<f64>,
}

/// A part of the threads' time that is not a cause, as its cells.
#[derive(Debug)]
pub struct RestRow {
    /// What it is, in words.
    pub what: &'static str,
    /// Base's share.
    pub base: f64,
    /// Other's share.
    pub other: f64,
    /// Other minus base, on the basis.
    pub delta: Signed,
    /// Its part of the difference.
    pub explains: Option<f64>,
}

/// A delta on the comparison's basis and its text with the sign (`+20.3 pt`, `+1.20 ms/op`,
/// `-210 ms/s`).
#[derive(Debug)]
pub struct Signed {
    /// On the basis.
    pub value: f64,
    /// As shown.
    pub text: String,
}

impl Signed {
    fn new(value: f64, basis: Basis) -> Signed {
        Signed {
            value,
            text: signed(value, basis),
        }
    }
}

/// A share cell's text: `-` where the cause is absent.
pub fn share_text(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_string(), format_fraction)
}

/// An `explains` cell's text: `-` when there is nothing to explain.
pub fn explains_text(explains: Option<f64>) -> String {
    match explains {
        // Rounded first, so that a tiny negative part is `0.0%`, not `-0.0%`.
        Some(e) => format!("{:.1}%", (e * 1000.0).round() / 10.0 + 0.0),
        None => "-".to_string(),
    }
}

/// A delta on `basis` with its sign: `+20.3 pt` (shares), `+1.20 ms/op`, `-210 ms/s`; one that
/// rounds to zero is `+`.
pub fn signed(value: f64, basis: Basis) -> String {
    let (magnitude, rounded_away) = match basis {
        Basis::PerThreadSecond => {
            let points = (value.abs() * 1000.0).round() / 10.0;
            (format!("{points:.1} pt"), points == 0.0)
        }
        Basis::PerSecond | Basis::PerOperation { .. } => {
            let ns = value.abs().round() as u64;
            let per = if basis == Basis::PerSecond { "s" } else { "op" };
            (format!("{}/{per}", format_ns(ns)), ns == 0)
        }
    };
    let sign = if value < 0.0 && !rounded_away {
        "-"
    } else {
        "+"
    };
    format!("{sign}{magnitude}")
}

/// The kernel cell of a change: its lock with the path that slept on it, else its kernel
/// stack's leaf.
fn kernel_cell(c: &CauseChange) -> String {
    match (&c.kernel_lock, c.kernel_stack.first()) {
        (Some(lock), _) => format!(
            "{} ({})",
            lock.lock,
            lock.stack
                .first()
                .into_iter()
                .chain(lock.callers().first())
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(" <- ")
        ),
        (None, Some(frame)) => frame.clone(),
        (None, None) => String::new(),
    }
}

impl WhyDiff {
    /// Its table of changes, as the text and the HTML page show it.
    pub fn table(&self) -> ChangeTable {
        let basis = self.basis.basis;
        let rows = self
            .changes
            .iter()
            .map(|c| ChangeRow {
                rank: c.rank,
                kind: c.kind.name(),
                status: c.status,
                place: c.place.clone(),
                kernel: kernel_cell(c),
                base: (c.status != ChangeStatus::New).then_some(c.base.share),
                other: (c.status != ChangeStatus::Gone).then_some(c.other.share),
                delta: Signed::new(c.delta_normalized, basis),
                explains: c.explains,
            })
            .collect();
        let rest = self
            .rest
            .iter()
            .map(|p| RestRow {
                what: match p.part {
                    "on-cpu" => "their own CPU time",
                    _ => "not analysed (sleeps going on at the end)",
                },
                base: p.base.share,
                other: p.other.share,
                delta: Signed::new(p.delta_normalized, basis),
                explains: p.explains,
            })
            .collect();
        ChangeTable { rows, rest }
    }
}
