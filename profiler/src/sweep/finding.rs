//! One sentence for a writeup ([`finding`]): how throughput scales, the knee, and what grows
//! across it.

use super::{short_site, Knee, Level, Share, KNEE_MIN_GAIN};
use crate::analysis::fold::NO_USER_STACK;
use crate::render::units::{format_fraction, format_threads};
use std::fmt::Write as _;

fn percent(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// The average threads waiting of the share named `name` in `shares`, 0 when absent.
fn avg_threads_of(shares: &[Share], name: &str) -> f64 {
    shares
        .iter()
        .find(|s| s.name == name)
        .map_or(0.0, |s| s.avg_threads)
}

/// The share of `level`'s thread time of the entry named `name` in `shares` (0 when absent), or
/// `None` when the level has no breakdown.
fn thread_share_of(level: &Level, shares: &[Share], name: &str) -> Option<f64> {
    level.breakdown.as_ref()?;
    Some(
        shares
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.share_of_thread_time)
            .unwrap_or(0.0),
    )
}

/// The entry whose average threads waiting grows most from `from` to `to`, with both values.
fn grows_most<'a>(from: &[Share], to: &'a [Share]) -> Option<(&'a str, f64, f64)> {
    to.iter()
        .map(|s| {
            (
                s.name.as_str(),
                avg_threads_of(from, &s.name),
                s.avg_threads,
            )
        })
        .filter(|(_, a, b)| b > a)
        .max_by(|x, y| (x.2 - x.1).total_cmp(&(y.2 - y.1)))
}

/// How a wait kind grew from `from` to `to`, in words: `20.4 → 50.3 threads waiting on average`,
/// with `, 41.3% → 63.0% of thread time` when both levels have a breakdown.
fn growth(from: &Level, to: &Level, kind: &str, a: f64, b: f64) -> String {
    let mut text = format!(
        "{} → {} waiting on average",
        format_threads(a).trim_end_matches(" threads"),
        format_threads(b)
    );
    if let (Some(x), Some(y)) = (
        thread_share_of(from, &from.kinds, kind),
        thread_share_of(to, &to.kinds, kind),
    ) {
        let _ = write!(
            text,
            ", {} → {} of thread time",
            format_fraction(x),
            format_fraction(y)
        );
    }
    text
}

/// One sentence for a writeup: how throughput scales, the knee, and the wait kind and site whose
/// average threads waiting grows most across it (from the knee to the last level; from the first
/// to the last when there is no knee), with its share of thread time when both levels have a
/// breakdown, and then the class of thread time whose share grows most.
pub fn finding(levels: &[Level], knee: Option<&Knee>) -> String {
    let (Some(first), Some(last)) = (levels.first(), levels.last()) else {
        return "No levels were run.".to_string();
    };
    if levels.len() == 1 {
        return format!(
            "Only concurrency {} was run: no scaling to compare.",
            first.concurrency
        );
    }
    let (from, head) = match knee {
        Some(knee) => {
            let from = levels
                .iter()
                .find(|l| l.concurrency == knee.concurrency)
                .unwrap_or(first);
            let falls = last.scaling < knee.scaling * (1.0 - KNEE_MIN_GAIN);
            let head = match (knee.concurrency == first.concurrency, falls) {
                (true, true) => format!(
                    "Throughput peaks at concurrency {} and falls to {} of it at {}",
                    knee.concurrency,
                    percent(last.scaling),
                    last.concurrency
                ),
                (true, false) => format!(
                    "Throughput stays flat from concurrency {} ({} of it at {})",
                    knee.concurrency,
                    percent(last.scaling),
                    last.concurrency
                ),
                (false, falls) => format!(
                    "Throughput rises to {} of concurrency {} at {}, then {} ({} at {})",
                    percent(knee.scaling),
                    first.concurrency,
                    knee.concurrency,
                    if falls { "falls" } else { "stays flat" },
                    percent(last.scaling),
                    last.concurrency
                ),
            };
            (from, head)
        }
        None => (
            first,
            format!(
                "Throughput is highest at the last level, concurrency {} ({} of concurrency {}), so there is no knee",
                last.concurrency,
                percent(last.scaling),
                first.concurrency
            ),
        ),
    };
    if std::ptr::eq(from, last) {
        return format!("{head}.");
    }
    let kind = grows_most(&from.kinds, &last.kinds);
    let site = grows_most(&from.top_sites, &last.top_sites);
    let waits = match (kind, site) {
        (Some((kind, a, b)), Some((site, _, _))) => format!(
            "{head}; from {} to {}, `{kind}` wait grows most ({}), led by {}",
            from.concurrency,
            last.concurrency,
            growth(from, last, kind, a, b),
            site_words(site)
        ),
        (Some((kind, a, b)), None) => format!(
            "{head}; from {} to {}, `{kind}` wait grows most ({})",
            from.concurrency,
            last.concurrency,
            growth(from, last, kind, a, b)
        ),
        _ => format!(
            "{head}; no wait kind grows from {} to {}",
            from.concurrency, last.concurrency
        ),
    };
    match class_grows_most(from, last) {
        Some((class, a, b)) => format!(
            "{waits}; of the threads' time, {class} grows most ({} → {}).",
            format_fraction(a),
            format_fraction(b)
        ),
        None => format!("{waits}."),
    }
}

/// A site for a sentence: its last four frames in backquotes; off-CPU time without a user stack
/// said for what it is (the offcpu probe takes no stack for a preempted or runnable thread).
fn site_words(site: &str) -> String {
    if site.ends_with(&format!("{NO_USER_STACK};[off-cpu]")) {
        "off-CPU time without a user stack (threads preempted or in the run queue)".to_string()
    } else {
        format!("`{}`", short_site(site))
    }
}

/// The class of thread time whose share grows most from `from` to `to`, with both shares; `None`
/// unless both levels have a breakdown and some class grows.
fn class_grows_most(from: &Level, to: &Level) -> Option<(String, f64, f64)> {
    let (a, b) = (from.breakdown.as_ref()?, to.breakdown.as_ref()?);
    b.classes
        .iter()
        .map(|c| {
            let before = a.class(&c.name).map_or(0.0, |x| x.share_of_thread_time);
            (c.name.clone(), before, c.share_of_thread_time)
        })
        .filter(|(_, x, y)| y > x)
        .max_by(|x, y| (x.2 - x.1).total_cmp(&(y.2 - y.1)))
}
