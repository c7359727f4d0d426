//! Each side's causes merged by what they are matched by on the other side ([`MatchKey`]): a
//! kernel lock's change, or a cause's kind with, for the kinds that are one cause per root
//! stack, its canonical stack, call and kernel lock.

use super::kernel_lock::{lock_key, lock_part, lock_sleep, LockPart};
use super::ChangeKind;
use crate::analysis::canonical::{canonical_place, SiteDepth};
use crate::why::model::{Cause, CauseKind, NamedTime};
use crate::why::Why;
use std::collections::BTreeMap;

/// What one cause is matched by.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct MatchKey {
    /// What the change is.
    pub(super) kind: ChangeKind,
    /// The canonical user stack; for `kernel-lock`, the lock's kernel caller.
    pub(super) stack: Vec<String>,
    /// The system call the root slept in.
    pub(super) call: Option<String>,
    /// The kernel lock's slow path (`rwsem_down_read_slowpath`), as the kernel names it across
    /// builds (without a `.constprop.0`).
    pub(super) kernel_lock: Option<&'static str>,
}

/// Whether causes of `kind` are one per root stack (else one per kind, whose stack is only the
/// heaviest root's and must not split the match).
fn by_stack(kind: CauseKind) -> bool {
    matches!(
        kind,
        CauseKind::Cpu | CauseKind::Sleep | CauseKind::Io | CauseKind::Idle
    )
}

/// What `cause` is matched by on the other side: its kernel lock's change when most of its time
/// was spent under one, else its kind, and for the kinds that are one cause per root stack its
/// canonical stack, call and kernel lock.
fn match_key(cause: &Cause, depth: SiteDepth) -> MatchKey {
    if let Some(key) = lock_key(cause) {
        return key;
    }
    let keep = by_stack(cause.kind);
    MatchKey {
        kind: ChangeKind::Cause(cause.kind),
        stack: if keep {
            canonical_place(&cause.stack, depth)
        } else {
            Vec::new()
        },
        call: cause.call.clone().filter(|_| keep),
        kernel_lock: cause
            .kernel_lock
            .as_ref()
            .filter(|_| keep)
            .and_then(|lock| lock_sleep(&lock.stack)),
    }
}

/// A change's cause on one side: the causes merged under one match key, and for `kernel-lock`
/// the parts they were.
pub(super) struct SideCause {
    /// The merged cause.
    pub(super) cause: Cause,
    /// For `kernel-lock`, the causes it gathers, heaviest first.
    pub(super) parts: Vec<LockPart>,
}

/// One side's causes (idle too) merged by their match key.
pub(super) fn side_causes(why: Why, depth: SiteDepth) -> BTreeMap<MatchKey, SideCause> {
    let mut out: BTreeMap<MatchKey, SideCause> = BTreeMap::new();
    for cause in why.causes.into_iter().chain(why.idle) {
        let key = match_key(&cause, depth);
        let part = (key.kind == ChangeKind::KernelLock).then(|| lock_part(&cause));
        match out.get_mut(&key) {
            // Two causes of one side that only their OS-specific frames told apart are one.
            Some(into) => {
                merge(&mut into.cause, cause);
                into.parts.extend(part);
            }
            None => {
                let parts = part.into_iter().collect();
                out.insert(key, SideCause { cause, parts });
            }
        }
    }
    for entry in out.values_mut() {
        entry
            .parts
            .sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.kind.cmp(&b.kind)));
    }
    out
}

/// Adds `from` to `into`: their times, waits, threads, holders of the CPUs and sites; the
/// stacks, kernel lock and release of the heavier (the release of the heaviest part that has one).
fn merge(into: &mut Cause, from: Cause) {
    let lock_ns = [&into.kernel_lock, &from.kernel_lock]
        .iter()
        .filter_map(|lock| lock.as_ref().map(|l| l.total_ns))
        .sum();
    // The release of the heaviest part that has one.
    let heavier = from.total_ns > into.total_ns;
    if !from.release_stack.is_empty() && (heavier || into.release_stack.is_empty()) {
        into.release_stack = from.release_stack;
    }
    if heavier {
        into.stack = from.stack;
        into.kernel_stack = from.kernel_stack;
        into.kernel_lock = from.kernel_lock;
    }
    if let Some(lock) = &mut into.kernel_lock {
        lock.total_ns = lock_ns;
    }
    into.total_ns += from.total_ns;
    into.share += from.share;
    into.waits += from.waits;
    add_times(&mut into.threads, from.threads);
    add_times(&mut into.holders, from.holders);
    into.sites.extend(from.sites);
    into.sites.sort_by_key(|s| std::cmp::Reverse(s.total_ns));
}

/// Adds `from`'s times to `into`'s by name, heaviest first.
fn add_times(into: &mut Vec<NamedTime>, from: Vec<NamedTime>) {
    for named in from {
        match into.iter_mut().find(|t| t.name == named.name) {
            Some(t) => t.total_ns += named.total_ns,
            None => into.push(named),
        }
    }
    into.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
}
