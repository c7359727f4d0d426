//! What kind of cause a wait-for record's root is: on a CPU, waiting for one (saturation or
//! wakeup latency), a cycle, a sleep, I/O, or idle (the program waiting for outside input).

use super::model::CauseKind;
use super::select::is_idle_cpu;
use super::stacks::stack_names;
use lockscope_probes::linux_syscalls::FILE_IO_CALLS;
use lockscope_probes::waitfor::{Blame, RootKind, ThreadRef, WaitFor, WokenBy};
use lockscope_probes::{Profile, StackId};
use std::collections::BTreeSet;

/// The sleeps other threads waited on (the roots of `blocked` chains of depth 1 and more), by
/// (thread, user stack): a thread's own sleep there is no idleness but part of the cause.
pub(super) fn waited_on_sleeps(waitfor: &WaitFor) -> BTreeSet<(ThreadRef, Option<StackId>)> {
    waitfor
        .blame
        .iter()
        .filter(|b| b.root.kind == RootKind::Blocked && b.depth > 0)
        .map(|b| (b.root.thread, b.root.user_stack))
        .collect()
}

/// System calls that sleep on purpose.
const ON_PURPOSE_CALLS: &[&str] = &["nanosleep", "clock_nanosleep", "pause"];

/// Kernel functions under which a sleep waits for a device or a file system.
fn is_io_frame(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "io_schedule",
        "folio_wait",
        "wait_on_page",
        "__lock_page",
        "blk_",
        "jbd2_",
        "ext4_",
        "xfs_",
        "btrfs_",
        "nfs_",
        "submit_bio",
        "bit_wait_io",
        "wait_on_buffer",
        "__wait_on_buffer",
        "filemap_fault",
        "do_read_cache",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// What kind of cause a record's root is. A sleep no thread of the program ended is `io` when
/// its call or kernel stack says a device; `sleep` when it slept on purpose (or a timed futex
/// wait timed out) and someone waited on it; otherwise the program waited for outside input:
/// `idle`. A thread's own such sleep (depth 0) is idle unless others waited on that sleep.
pub(super) fn classify(
    profile: &Profile,
    b: &Blame,
    waited_on: &BTreeSet<(ThreadRef, Option<StackId>)>,
) -> CauseKind {
    match b.root.kind {
        RootKind::Cpu => CauseKind::Cpu,
        // The task that gave the CPU back was the idle task: no thread held the CPU meanwhile.
        RootKind::CpuSaturation if b.root.holder.is_some_and(is_idle_cpu) => {
            CauseKind::WakeupLatency
        }
        RootKind::CpuSaturation => CauseKind::CpuSaturation,
        RootKind::Cycle => CauseKind::Cycle,
        RootKind::DepthLimit => CauseKind::DepthLimit,
        RootKind::Unknown => CauseKind::Unknown,
        RootKind::Blocked => {
            let Some(woken_by) = b.root.woken_by else {
                return CauseKind::Unknown;
            };
            let call = b.root.call.as_deref().unwrap_or("");
            let io = FILE_IO_CALLS.contains(&call)
                || stack_names(profile, b.root.kernel_stack)
                    .iter()
                    .any(|f| is_io_frame(f));
            if io {
                return CauseKind::Io;
            }
            let on_purpose = ON_PURPOSE_CALLS.contains(&call)
                || (call.starts_with("futex") && woken_by == WokenBy::Interrupt);
            let waited = b.depth > 0 || waited_on.contains(&(b.root.thread, b.root.user_stack));
            if on_purpose && waited {
                CauseKind::Sleep
            } else {
                CauseKind::Idle
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockscope_probes::waitfor::WaitPart;

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
