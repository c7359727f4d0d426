//! The changes from the two sides' matched causes: each side's part on the basis, the status,
//! the difference they make up and each one's part of it ([`rank`]), the order they are listed
//! in, and the place each is named by.

use super::matching::{MatchKey, SideCause};
use super::{
    Basis, CauseChange, CauseSide, ChangeKind, ChangeStatus, Difference, PartChange, PartSide,
    SideSummary,
};
use std::collections::BTreeMap;

/// The two sides' summaries, base first.
pub(super) type Sides<'a> = (&'a SideSummary, &'a SideSummary);

/// Rounds a value for the JSON: fractions to 6 decimals, nanoseconds to 0.01.
pub(super) fn round(value: f64, unit: &str) -> f64 {
    let scale = if unit == "share" { 1e6 } else { 1e2 };
    (value * scale).round() / scale
}

/// Names where each change is: its telling frame in the stack of the side where it weighs more
/// (as every report names a site: [`site_name_index`](crate::render::frames::site_name_index)),
/// with the frame's caller when another change of its kind has the same frame (`spin <-
/// critical_section`, `spin <- outside_work`).
pub(super) fn name_places(changes: &mut [CauseChange]) {
    let at = |c: &CauseChange, frames: usize| {
        let side = if c.other.total_ns >= c.base.total_ns {
            &c.other
        } else {
            &c.base
        };
        // The wrapper of the system call the root slept in is plumbing that only this cause
        // knows of; past it, the frame is named as every report names a site.
        let call = side
            .stack
            .iter()
            .take_while(|f| Some(f.as_str()) == c.call.as_deref())
            .count();
        let past_call = &side.stack[call.min(side.stack.len().saturating_sub(1))..];
        let telling = crate::render::frames::site_name_index(past_call)
            .map(|i| i + (side.stack.len() - past_call.len()));
        match telling {
            Some(i) => side.stack[i..]
                .iter()
                .take(frames)
                .cloned()
                .collect::<Vec<_>>()
                .join(" <- "),
            None => "[no stack]".to_string(),
        }
    };
    let short: Vec<(ChangeKind, String)> = changes.iter().map(|c| (c.kind, at(c, 1))).collect();
    for (i, c) in changes.iter_mut().enumerate() {
        let shared = short.iter().filter(|p| **p == short[i]).count() > 1;
        c.place = if c.kind == ChangeKind::KernelLock {
            // Where the kernel took the lock: its first caller past the lock's entry points.
            c.kernel_lock
                .as_ref()
                .and_then(|lock| lock.callers().first().or(lock.stack.first()).cloned())
                .unwrap_or_else(|| "[no stack]".to_string())
        } else if shared {
            at(c, 2)
        } else {
            short[i].1.clone()
        };
        if let Some(lock) = &c.kernel_lock {
            c.place = format!("{} [{}]", c.place, lock.lock);
        }
    }
}

/// One change per match key of either side, in the keys' order, not yet ranked, named or
/// given their part of the difference.
pub(super) fn changes(
    mut base: BTreeMap<MatchKey, SideCause>,
    mut other: BTreeMap<MatchKey, SideCause>,
    sides: Sides,
    basis: Basis,
) -> Vec<CauseChange> {
    let keys: Vec<MatchKey> = {
        let mut keys: Vec<MatchKey> = base.keys().chain(other.keys()).cloned().collect();
        keys.sort();
        keys.dedup();
        keys
    };
    keys.into_iter()
        .map(|key| {
            let (b, o) = (base.remove(&key), other.remove(&key));
            change(key, b, o, sides, basis)
        })
        .collect()
}

/// A cause on one side (zeros when absent), on the basis.
fn cause_side(
    cause: Option<SideCause>,
    summary: &SideSummary,
    first: bool,
    basis: Basis,
) -> CauseSide {
    match cause {
        Some(SideCause { cause: c, parts }) => CauseSide {
            total_ns: c.total_ns,
            share: crate::render::units::share(c.total_ns, summary.wall_ns),
            normalized: basis.normalize(c.total_ns, summary, first),
            waits: c.waits,
            stack: c.stack,
            threads: c.threads,
            holders: c.holders,
            sites: c.sites,
            parts,
        },
        None => CauseSide::default(),
    }
}

/// The change of the causes matched by `key` on each side: its kernel stacks and lock from the
/// side where it weighs more, its status.
fn change(
    key: MatchKey,
    b: Option<SideCause>,
    o: Option<SideCause>,
    sides: Sides,
    basis: Basis,
) -> CauseChange {
    let present = (b.is_some(), o.is_some());
    let heavier = match (&b, &o) {
        (Some(b), Some(o)) if b.cause.total_ns > o.cause.total_ns => Some(&b.cause),
        (_, Some(o)) => Some(&o.cause),
        (b, None) => b.as_ref().map(|b| &b.cause),
    };
    let kernel_lock = heavier.and_then(|c| c.kernel_lock.clone());
    let release_stack = heavier.map(|c| c.release_stack.clone()).unwrap_or_default();
    let kernel_stack = match heavier {
        Some(c) if !c.kernel_stack.is_empty() && key.kind != ChangeKind::KernelLock => {
            c.kernel_stack.clone()
        }
        _ => kernel_lock
            .as_ref()
            .map(|lock| lock.stack.clone())
            .unwrap_or_default(),
    };
    let (b, o) = (
        cause_side(b, sides.0, true, basis),
        cause_side(o, sides.1, false, basis),
    );
    let status = match present {
        (false, _) => ChangeStatus::New,
        (_, false) => ChangeStatus::Gone,
        _ if o.normalized > b.normalized => ChangeStatus::Grew,
        _ if o.normalized < b.normalized => ChangeStatus::Shrank,
        _ => ChangeStatus::Same,
    };
    CauseChange {
        rank: 0,
        kind: key.kind,
        status,
        place: String::new(),
        // A kernel lock's change is matched by its lock, not a user stack.
        stack: if key.kind == ChangeKind::KernelLock {
            Vec::new()
        } else {
            key.stack
        },
        kernel_stack,
        release_stack,
        kernel_lock,
        call: key.call,
        delta_share: o.share - b.share,
        delta_normalized: o.normalized - b.normalized,
        explains: None,
        base: b,
        other: o,
    }
}

/// A part of the threads' time that is not a cause (`on-cpu`, `not-analysed`), on both sides.
pub(super) fn part(
    part: &'static str,
    (base_ns, other_ns): (u64, u64),
    sides: Sides,
    basis: Basis,
) -> PartChange {
    let side = |ns: u64, summary: &SideSummary, first: bool| PartSide {
        total_ns: ns,
        share: crate::render::units::share(ns, summary.wall_ns),
        normalized: basis.normalize(ns, summary, first),
    };
    let (b, o) = (side(base_ns, sides.0, true), side(other_ns, sides.1, false));
    PartChange {
        part,
        delta_share: o.share - b.share,
        delta_normalized: o.normalized - b.normalized,
        explains: None,
        base: b,
        other: o,
    }
}

/// The changes and the other parts, ranked: what [`rank`] makes of them.
pub(super) struct Ranked {
    /// The analysed threads' time on each side, and its change.
    pub(super) difference: Difference,
    /// The parts that are not causes.
    pub(super) rest: Vec<PartChange>,
    /// The changes before the `top` cut.
    pub(super) changes_total: usize,
    /// The changes, largest absolute delta first, at most `top` (all with 0).
    pub(super) changes: Vec<CauseChange>,
}

/// The difference the parts make up, each one's part of it, the changes largest absolute delta
/// first (at most `top`), ranked and named, and every value rounded for the JSON.
pub(super) fn rank(
    mut changes: Vec<CauseChange>,
    mut rest: Vec<PartChange>,
    sides: Sides,
    basis: Basis,
    top: usize,
) -> Ranked {
    let unit = basis.unit();
    let difference = {
        let (b, o) = (
            basis.normalize(sides.0.wall_ns, sides.0, true),
            basis.normalize(sides.1.wall_ns, sides.1, false),
        );
        let moved: f64 = changes
            .iter()
            .map(|c| c.delta_normalized)
            .chain(rest.iter().map(|p| p.delta_normalized))
            .filter(|d| *d > 0.0)
            .sum();
        Difference {
            base: b,
            other: o,
            delta: o - b,
            moved,
        }
    };
    let whole = if basis.is_net() {
        difference.delta
    } else {
        difference.moved
    };
    // A whole below a nanosecond (per operation or second), or a millionth of the threads'
    // time, is no difference to explain.
    let explains = |delta: f64| (round(whole, unit) != 0.0).then(|| round(delta / whole, "share"));
    for c in &mut changes {
        c.explains = explains(c.delta_normalized);
    }
    for p in &mut rest {
        p.explains = explains(p.delta_normalized);
    }
    changes.sort_by(|a, b| {
        b.delta_normalized
            .abs()
            .total_cmp(&a.delta_normalized.abs())
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| a.stack.cmp(&b.stack))
    });
    let changes_total = changes.len();
    if top > 0 {
        changes.truncate(top);
    }
    name_places(&mut changes);
    for (i, c) in changes.iter_mut().enumerate() {
        c.rank = i + 1;
        for side in [&mut c.base, &mut c.other] {
            side.normalized = round(side.normalized, unit);
        }
        c.delta_normalized = round(c.delta_normalized, unit);
        c.delta_share = round(c.delta_share, "share");
    }
    for p in &mut rest {
        for side in [&mut p.base, &mut p.other] {
            side.normalized = round(side.normalized, unit);
        }
        p.delta_normalized = round(p.delta_normalized, unit);
        p.delta_share = round(p.delta_share, "share");
    }
    Ranked {
        difference: Difference {
            base: round(difference.base, unit),
            other: round(difference.other, unit),
            delta: round(difference.delta, unit),
            moved: round(difference.moved, unit),
        },
        rest,
        changes_total,
        changes,
    }
}
