//! Scheduler-level data of a profile: where each thread's wall time went ([`ThreadTime`], per
//! [`TimeClass`]) and who woke whom ([`WakeupRecord`]), recorded by the `offcpu` probe and absent
//! (empty) in profiles without it; and the idle-versus-contended split of waits
//! ([`idle_waits`]), which works on any profile.

use crate::profile::{Profile, StackId, WaitRecord, WaitStats};
use crate::wait::WaitKind;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// What a slice of a thread's wall time went to. The classes of one thread add up to its wall
/// time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeClass {
    /// Running on a CPU.
    OnCpu,
    /// Runnable (woken, or preempted) but waiting for a CPU.
    RunQueue,
    /// Asleep waiting for a mutex or a reader-writer lock (futex waits classified so).
    Lock,
    /// Asleep on a condition variable.
    Condvar,
    /// Asleep in another futex wait (semaphore, join, or one whose purpose is unknown).
    Futex,
    /// Asleep in poll, select or epoll: typically waiting for clients.
    Poll,
    /// Asleep in file or network I/O (read, write, recv, send, accept, fsync, io_uring, ...).
    Io,
    /// Asleep on purpose (nanosleep, clock_nanosleep, pause, sigsuspend, sigtimedwait).
    Sleep,
    /// Asleep anywhere else (other system calls, page faults).
    Other,
}

impl TimeClass {
    /// Every class, in report order.
    pub const ALL: [TimeClass; 9] = [
        TimeClass::OnCpu,
        TimeClass::RunQueue,
        TimeClass::Lock,
        TimeClass::Condvar,
        TimeClass::Futex,
        TimeClass::Poll,
        TimeClass::Io,
        TimeClass::Sleep,
        TimeClass::Other,
    ];

    /// The class's name as printed in reports and stored in profiles.
    pub fn name(self) -> &'static str {
        match self {
            TimeClass::OnCpu => "on-cpu",
            TimeClass::RunQueue => "run-queue",
            TimeClass::Lock => "lock",
            TimeClass::Condvar => "condvar",
            TimeClass::Futex => "futex",
            TimeClass::Poll => "poll",
            TimeClass::Io => "io",
            TimeClass::Sleep => "sleep",
            TimeClass::Other => "other",
        }
    }

    /// True for the classes that are waiting on another thread of the program (lock contention,
    /// not idleness).
    pub fn is_contention(self) -> bool {
        matches!(self, TimeClass::Lock | TimeClass::RunQueue)
    }
}

impl fmt::Display for TimeClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where one thread's wall time went during the recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadTime {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The part of the recording the thread lived through, nanoseconds (from the recording's
    /// start or the thread's creation to its end or the thread's exit).
    pub wall_ns: u64,
    /// Nanoseconds per class; they add up to `wall_ns`.
    pub time_ns: BTreeMap<TimeClass, u64>,
    /// Times the thread blocked (voluntary context switches).
    pub voluntary_switches: u64,
    /// Times the thread was preempted (involuntary context switches).
    pub involuntary_switches: u64,
}

impl ThreadTime {
    /// Nanoseconds spent in `class`.
    pub fn ns(&self, class: TimeClass) -> u64 {
        self.time_ns.get(&class).copied().unwrap_or(0)
    }

    /// Sum of every class (equal to `wall_ns` in a consistent record).
    pub fn accounted_ns(&self) -> u64 {
        self.time_ns
            .values()
            .fold(0u64, |a, &b| a.saturating_add(b))
    }
}

/// Sleeps of one thread ended by one waker, aggregated per (sleeper, sleeper's stacks, waker,
/// waker's stacks): who hands the lock to whom, and from where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeupRecord {
    /// Process id of the sleeper.
    pub pid: u32,
    /// Thread id of the sleeper.
    pub tid: u32,
    /// System call the sleeper slept in (`futex`), when it was in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    /// The sleeper's user stack at switch-out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_stack: Option<StackId>,
    /// The sleeper's kernel stack at switch-out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_stack: Option<StackId>,
    /// Process id of the waker; 0 with thread id 0 for a wakeup from interrupt context (a timer
    /// expiring, I/O completing), whose waker name is then `[interrupt]` and whose only stack is
    /// the kernel one (the handler).
    pub waker_pid: u32,
    /// Thread id of the waker.
    pub waker_tid: u32,
    /// Name of the waker thread.
    pub waker_name: String,
    /// The waker's user stack at the wakeup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker_user_stack: Option<StackId>,
    /// The waker's kernel stack at the wakeup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker_kernel_stack: Option<StackId>,
    /// Number of sleeps and their durations (until the wakeup).
    #[serde(flatten)]
    pub stats: WaitStats,
}

/// A thread is idle at a wait site when that one site holds at least this share of its window.
pub const IDLE_SHARE: f64 = 0.5;

/// True for waits that can be a thread waiting for work rather than for another thread's lock:
/// condition variables, semaphores, unclassified futex waits, and off-CPU sleeps in poll, epoll,
/// select, reads and receives, accept, nanosleep and signal waits.
pub fn may_be_idle(record: &WaitRecord) -> bool {
    match record.kind {
        WaitKind::Condvar | WaitKind::Semaphore | WaitKind::Wait => true,
        WaitKind::OffCpu => {
            const IDLE_CALLS: &[&str] = &[
                "poll",
                "ppoll",
                "select",
                "pselect6",
                "epoll_wait",
                "epoll_pwait",
                "epoll_pwait2",
                "read",
                "readv",
                "recvfrom",
                "recvmsg",
                "recvmmsg",
                "accept",
                "accept4",
                "nanosleep",
                "clock_nanosleep",
                "pause",
                "rt_sigtimedwait",
                "rt_sigsuspend",
                "io_getevents",
                "io_uring_enter",
            ];
            record
                .operation
                .strip_prefix("sleeping in ")
                .is_some_and(|call| IDLE_CALLS.contains(&call))
        }
        _ => false,
    }
}

/// Indexes (into `profile.waits`) of the idle waits: a thread spent at least [`IDLE_SHARE`] of its
/// window (its wall time when the profile has per-thread times, else the recording) in one site
/// (probe, kind, operation and user stack) of a kind that [`may_be_idle`]. What remains of the
/// mutex, rwlock and kernel-lock waits is contention on the threads' work path.
pub fn idle_waits(profile: &Profile) -> BTreeSet<usize> {
    let window = |pid: u32, tid: u32| {
        profile
            .thread_times
            .iter()
            .find(|t| t.pid == pid && t.tid == tid)
            .map_or(profile.metadata.duration_ns, |t| t.wall_ns)
    };
    type Site<'a> = (u32, u32, &'a str, WaitKind, &'a str, Option<StackId>);
    let mut sites: BTreeMap<Site<'_>, (u64, Vec<usize>)> = BTreeMap::new();
    for (i, w) in profile.waits.iter().enumerate() {
        if !may_be_idle(w) {
            continue;
        }
        let site = (
            w.pid,
            w.tid,
            w.probe.as_str(),
            w.kind,
            w.operation.as_str(),
            w.user_stack,
        );
        let entry = sites.entry(site).or_default();
        entry.0 = entry.0.saturating_add(w.stats.total_ns);
        entry.1.push(i);
    }
    let mut idle = BTreeSet::new();
    for ((pid, tid, ..), (total, indexes)) in sites {
        let window = window(pid, tid);
        if window > 0 && total as f64 >= IDLE_SHARE * window as f64 {
            idle.extend(indexes);
        }
    }
    idle
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Class names round-trip through serde as the names the reports print, also as map keys.
    #[test]
    fn class_names_match_serde() {
        for class in TimeClass::ALL {
            let json = serde_json::to_string(&class).expect("serialize");
            assert_eq!(json, format!("\"{}\"", class.name()));
        }
        let mut time = ThreadTime::default();
        time.time_ns.insert(TimeClass::OnCpu, 5);
        time.time_ns.insert(TimeClass::RunQueue, 7);
        let json = serde_json::to_string(&time).expect("serialize");
        assert!(json.contains("\"on-cpu\":5"), "{json}");
        let back: ThreadTime = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, time);
        assert_eq!(back.accounted_ns(), 12);
    }

    fn wait(tid: u32, kind: WaitKind, operation: &str, total_ns: u64) -> WaitRecord {
        WaitRecord {
            probe: "futex".into(),
            kind,
            pid: 1,
            tid,
            object: 0,
            operation: operation.into(),
            user_stack: None,
            kernel_stack: None,
            stats: WaitStats {
                count: 1,
                total_ns,
                ..WaitStats::default()
            },
        }
    }

    /// A pool thread parked in one condvar site for most of the window is idle; a mutex wait,
    /// however long, and a short condvar wait are not.
    #[test]
    fn idle_sites() {
        let mut profile = Profile::default();
        profile.metadata.duration_ns = 1000;
        profile.waits = vec![
            wait(2, WaitKind::Condvar, "FUTEX_WAIT_PRIVATE", 900),
            wait(3, WaitKind::Mutex, "FUTEX_WAIT_PRIVATE", 900),
            wait(4, WaitKind::Condvar, "FUTEX_WAIT_PRIVATE", 100),
            wait(5, WaitKind::OffCpu, "sleeping in epoll_wait", 800),
            wait(6, WaitKind::OffCpu, "sleeping in futex", 800),
        ];
        assert_eq!(idle_waits(&profile), BTreeSet::from([0, 3]));
    }
}
