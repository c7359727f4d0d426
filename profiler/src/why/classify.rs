//! What kind of cause a wait-for record's root is: on a CPU, waiting for one (saturation or
//! wakeup latency), a cycle, a sleep, I/O, or idle (the program waiting for outside input), as
//! `lockscope_probes::bottleneck::cause_kind` tells it for every view.

use lockscope_probes::bottleneck::{cause_kind, Blame, CauseKind, ThreadRef, WaitPart};
use lockscope_probes::{Profile, RoleBasis, RoleOf, StackId, WaitRole};
use std::collections::{BTreeMap, BTreeSet};

pub(super) use lockscope_probes::bottleneck::waited_on_sleeps;

/// The roles of the program's sleeps, by (pid, tid, user stack), as the report tells them.
pub(super) type SiteRoles = BTreeMap<(u32, u32, Option<StackId>), RoleOf>;

/// What kind of cause a record's root is: [`cause_kind`] (which the report's chain rule reads
/// too), as the report's role of the waiting sleep has it: a sleep the report calls idle (a
/// pool parked for the recording, a sleep a client ended) is idle here, whatever the thread it
/// was parked on did; and a lock wait, contention whatever its holder slept in, has a cause: the
/// holder's sleep (`sleep`), not idleness.
pub(super) fn classify(
    profile: &Profile,
    b: &Blame,
    waited_on: &BTreeSet<(ThreadRef, Option<StackId>)>,
    roles: &SiteRoles,
) -> CauseKind {
    let kind = cause_kind(profile, b, waited_on);
    if b.part != WaitPart::Asleep {
        return kind;
    }
    match roles.get(&(b.thread.pid, b.thread.tid, b.user_stack)) {
        Some(r) if r.role == WaitRole::Idle => CauseKind::Idle,
        Some(r) if r.basis == RoleBasis::Lock && kind == CauseKind::Idle => CauseKind::Sleep,
        _ => kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockscope_probes::bottleneck::RootKind;

    /// Waiting for a CPU is saturation when a thread held the CPU meanwhile, and the wakeup's
    /// latency when the CPU was idle until the waiting thread got it (the idle task gave it back).
    #[test]
    fn an_idle_cpu_is_wakeup_latency_not_saturation() {
        let thread = ThreadRef { pid: 10, tid: 11 };
        let blame = |holder: u32| Blame {
            thread,
            part: WaitPart::Runnable,
            call: None,
            object: 0,
            user_stack: None,
            kernel_stack: None,
            woken_by: None,
            waker: None,
            root: lockscope_probes::bottleneck::Root {
                kind: RootKind::CpuSaturation,
                thread,
                call: None,
                user_stack: None,
                kernel_stack: None,
                woken_by: None,
                waker_name: None,
                holder: Some(ThreadRef {
                    pid: holder,
                    tid: holder,
                }),
                holder_name: None,
            },
            depth: 0,
            chain: Vec::new(),
            waits: 1,
            total_ns: 1_000,
        };
        let profile = Profile::default();
        let none = BTreeSet::new();
        assert_eq!(
            classify(&profile, &blame(0), &none, &SiteRoles::new()),
            CauseKind::WakeupLatency
        );
        assert_eq!(
            classify(&profile, &blame(12), &none, &SiteRoles::new()),
            CauseKind::CpuSaturation
        );
    }
}
