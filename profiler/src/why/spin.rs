//! Spinning as a cause: the analysed threads' `cpu` probe samples in a recognised spin primitive
//! ([`spin_samples`], the rule every view reads) are time they waited for a lock's holder, on a
//! CPU. The bottleneck engine follows off-CPU intervals only, so these are causes of their own
//! (`spin`), one per primitive and place, with what the recording says of the holder: for
//! `pthread_spin_lock`, nothing (a spinlock never enters the kernel, so no probe sees it).

use super::cause::named_times;
use super::model::{Cause, CauseKey, CauseKind, HopRow};
use super::select::ThreadNames;
use super::stacks::{place_names, HOP_FRAMES};
use lockscope_probes::bottleneck::ThreadRef;
use lockscope_probes::sched::{spin_samples, SpinPrimitive};
use lockscope_probes::Profile;
use std::collections::{BTreeMap, BTreeSet};

/// Each thread's CPU time spinning (its spin samples' time), for the selection and the share of
/// time on a CPU.
pub(super) fn spin_ns_by_thread(profile: &Profile) -> BTreeMap<ThreadRef, u64> {
    let mut out: BTreeMap<ThreadRef, u64> = BTreeMap::new();
    for (w, spin) in profile.waits.iter().zip(spin_samples(profile)) {
        if spin.is_some() {
            let ns = out
                .entry(ThreadRef {
                    pid: w.pid,
                    tid: w.tid,
                })
                .or_default();
            *ns = ns.saturating_add(w.stats.total_ns);
        }
    }
    out
}

/// The spin causes of `threads`: their spin samples by primitive and place, heaviest first
/// (unranked). `wall_ns` is the analysed threads' wall time, the whole of the shares.
pub(super) fn spin_causes(
    profile: &Profile,
    names: &ThreadNames,
    threads: &BTreeSet<ThreadRef>,
    wall_ns: u64,
) -> Vec<Cause> {
    struct Acc {
        primitive: SpinPrimitive,
        total_ns: u64,
        samples: u64,
        spinners: BTreeMap<String, u64>,
    }
    let mut places: BTreeMap<Vec<String>, Acc> = BTreeMap::new();
    for (w, spin) in profile.waits.iter().zip(spin_samples(profile)) {
        let Some(primitive) = spin else { continue };
        let thread = ThreadRef {
            pid: w.pid,
            tid: w.tid,
        };
        if !threads.contains(&thread) {
            continue;
        }
        let stack = place_names(profile, w.user_stack);
        let acc = places.entry(stack.clone()).or_insert_with(|| Acc {
            primitive,
            total_ns: 0,
            samples: 0,
            spinners: BTreeMap::new(),
        });
        acc.total_ns = acc.total_ns.saturating_add(w.stats.total_ns);
        acc.samples += w.stats.count;
        *acc.spinners.entry(names.group(thread)).or_default() += w.stats.total_ns;
    }
    let mut out: Vec<Cause> = places
        .into_iter()
        .map(|(stack, acc)| {
            let spinner = acc
                .spinners
                .iter()
                .max_by_key(|(_, ns)| **ns)
                .map(|(name, _)| name.clone())
                .unwrap_or_default();
            Cause {
                rank: 0,
                kind: CauseKind::Spin,
                stack: stack.clone(),
                kernel_stack: Vec::new(),
                release_stack: Vec::new(),
                kernel_lock: None,
                call: Some(acc.primitive.function().to_owned()),
                share: if wall_ns == 0 {
                    0.0
                } else {
                    acc.total_ns as f64 / wall_ns as f64
                },
                total_ns: acc.total_ns,
                waits: acc.samples,
                threads: named_times(acc.spinners),
                sites: Vec::new(),
                holders: Vec::new(),
                ended_by: Vec::new(),
                ran_at: Vec::new(),
                ended_at: Vec::new(),
                chain: vec![HopRow {
                    thread: spinner,
                    stack: stack.iter().take(HOP_FRAMES).cloned().collect(),
                }],
                key: CauseKey {
                    kind: Some(CauseKind::Spin),
                    stack,
                    call: Some(acc.primitive.function().to_owned()),
                    kernel_lock: None,
                },
            }
        })
        .collect();
    out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.key.cmp(&b.key)));
    out
}
