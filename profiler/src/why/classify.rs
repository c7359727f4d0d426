//! What kind of cause a wait-for record's root is: on a CPU, waiting for one (saturation or
//! wakeup latency), a cycle, a sleep, I/O, or idle (the program waiting for outside input), as
//! `lockscope_probes::waitfor::cause_kind` tells it for every view.

use lockscope_probes::waitfor::{cause_kind, Blame, CauseKind, ThreadRef};
use lockscope_probes::{Profile, StackId};
use std::collections::BTreeSet;

pub(super) use lockscope_probes::waitfor::waited_on_sleeps;

/// What kind of cause a record's root is ([`cause_kind`], which the report's contention and
/// idle waits read too).
pub(super) fn classify(
    profile: &Profile,
    b: &Blame,
    waited_on: &BTreeSet<(ThreadRef, Option<StackId>)>,
) -> CauseKind {
    cause_kind(profile, b, waited_on)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockscope_probes::waitfor::{RootKind, WaitPart};

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
            root: lockscope_probes::waitfor::Root {
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
            classify(&profile, &blame(0), &none),
            CauseKind::WakeupLatency
        );
        assert_eq!(
            classify(&profile, &blame(12), &none),
            CauseKind::CpuSaturation
        );
    }
}
