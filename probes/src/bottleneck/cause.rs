//! What the end of a wait-for chain is, told once for every view: `lockscope why` groups its
//! causes by it, and the report's contention and idle waits ([`crate::sched::wait_roles`]) read
//! it, so the two never disagree on whether a wait was contention or idle.

use super::{Blame, BottleneckAnalysis, RootKind, ThreadRef};
pub use crate::kernel_frames::is_io_frame;
use crate::linux_syscalls::FILE_IO_CALLS;
use crate::profile::{Profile, StackId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What kind of cause the root of a chain is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CauseKind {
    /// A thread on a CPU: its work (in a critical section, or what a waiter waits for).
    Cpu,
    /// Threads waiting for a CPU: the CPUs were saturated.
    CpuSaturation,
    /// A thread on a CPU spinning in a recognised spin primitive (`pthread_spin_lock`, a
    /// contended `pthread_mutex_lock`: [`crate::sched::spin_samples`]) while another thread
    /// held the lock: a wait on the holder, from the `cpu` probe's samples (the engine's
    /// intervals are off-CPU only, so no chain ends here).
    Spin,
    /// Threads runnable (woken, or preempted) while the CPU they then ran on was idle: the time
    /// the kernel (or a hypervisor waking a halted virtual CPU) took to run them, not a lack of
    /// CPUs.
    WakeupLatency,
    /// A thread asleep on purpose (nanosleep, a timed wait) that others waited on.
    Sleep,
    /// A thread in I/O (disk, fsync) that others, or itself, waited on.
    Io,
    /// Threads waiting on each other in a ring.
    Cycle,
    /// A chain longer than the analysis follows.
    DepthLimit,
    /// Where the analysis had no data (lost intervals, before the history, no wakeup seen).
    Unknown,
    /// Waiting for work from outside the program (a client, a timer nobody waited on).
    Idle,
}

impl CauseKind {
    /// Its name in the text and JSON.
    pub fn name(self) -> &'static str {
        match self {
            CauseKind::Cpu => "cpu",
            CauseKind::CpuSaturation => "cpu-saturation",
            CauseKind::Spin => "spin",
            CauseKind::WakeupLatency => "wakeup-latency",
            CauseKind::Sleep => "sleep",
            CauseKind::Io => "io",
            CauseKind::Cycle => "cycle",
            CauseKind::DepthLimit => "depth-limit",
            CauseKind::Unknown => "unknown",
            CauseKind::Idle => "idle",
        }
    }
}

/// The sleeps other threads waited on (the roots of `blocked` chains of depth 1 and more), by
/// (thread, user stack): a thread's own sleep there is no idleness but part of the cause.
pub fn waited_on_sleeps(bottleneck: &BottleneckAnalysis) -> BTreeSet<(ThreadRef, Option<StackId>)> {
    bottleneck
        .blame
        .iter()
        .filter(|b| b.root.kind == RootKind::Blocked && b.depth > 0)
        .map(|b| (b.root.thread, b.root.user_stack))
        .collect()
}

/// System calls that sleep on purpose.
const ON_PURPOSE_CALLS: &[&str] = &["nanosleep", "clock_nanosleep", "pause"];

/// The idle task (tid 0), which the engine names as the holder of a CPU nobody held.
pub fn is_idle_cpu(thread: ThreadRef) -> bool {
    thread.tid == 0
}

/// What kind of cause a record's root is. A sleep no thread of the program ended is `io` when
/// its call or kernel stack says a device (seen ended or not); else `unknown` when its wakeup was
/// not seen; `sleep` when it slept on purpose (nanosleep,
/// clock_nanosleep, pause: not a timed futex wait that timed out, which waited for time to
/// pass) and someone waited on it; otherwise the program waited for outside input or for a
/// timer: `idle`. A thread's own such sleep (depth 0) is idle unless others waited on that
/// sleep.
pub fn cause_kind(
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
            let call = b.root.call.as_deref().unwrap_or("");
            let io = FILE_IO_CALLS.contains(&call)
                || profile.stack(b.root.kernel_stack).is_some_and(|s| {
                    s.frames
                        .iter()
                        .flat_map(|f| f.names_outermost_first())
                        .any(|name| is_io_frame(&name))
                });
            // A device wait is I/O whoever ended it: its call or kernel stack says so even where
            // its wakeup was not seen (an I/O completion the stream missed).
            if io {
                return CauseKind::Io;
            }
            if b.root.woken_by.is_none() {
                return CauseKind::Unknown;
            }
            // A timed futex wait that timed out waited for time to pass (a pool's worker, a
            // timer thread), not for work it chose to do slowly: idle, even where others waited
            // on the thread it woke (InnoDB's tpool workers waking each other on timeouts).
            let on_purpose = ON_PURPOSE_CALLS.contains(&call);
            let waited = b.depth > 0 || waited_on.contains(&(b.root.thread, b.root.user_stack));
            if on_purpose && waited {
                CauseKind::Sleep
            } else {
                CauseKind::Idle
            }
        }
    }
}
