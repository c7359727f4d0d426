//! The wait taxonomy: one set of category names for every OS and backend.
//!
//! A futex wait on Linux, a `psynch_mutexwait` on macOS, an `_umtx_op(UMTX_OP_MUTEX_WAIT)` on
//! FreeBSD and an `lwp_park` on illumos all end up as one of these kinds, so that profiles from
//! different kernels line up category by category.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What the records of a kind measure, in the order a profile that has several shows them: its
/// waits when it has any, else its system calls, else its holds, else its samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Quantity {
    /// Waits: time blocked (locks, condvars, futex words, kernel locks, sleeps off the CPU).
    Waits,
    /// Time in system calls (the `syscall` and `lifecycle` probes), which holds the waits and
    /// sleeps inside them.
    Calls,
    /// Time a lock was held (the `mutex-hold` probe).
    Holds,
    /// Samples or counted events: CPU time, events, samples.
    Samples,
}

/// What a thread was waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitKind {
    /// Acquiring a mutex (pthread_mutex_lock, std::sync::Mutex, ...).
    Mutex,
    /// Waiting on a condition variable (pthread_cond_wait, ...).
    Condvar,
    /// Acquiring a reader-writer lock for reading.
    RwlockRead,
    /// Acquiring a reader-writer lock for writing.
    RwlockWrite,
    /// Waiting on a semaphore or a barrier.
    Semaphore,
    /// Waiting for a thread to exit (pthread_join).
    Join,
    /// A kernel wait primitive whose user-level purpose could not be told.
    Wait,
    /// Contention on a lock inside the kernel.
    KernelLock,
    /// Time switched off the CPU.
    OffCpu,
    /// Process and thread lifecycle (fork, clone, exec, exit).
    Lifecycle,
    /// Time inside a system call.
    Syscall,
    /// Not a wait: sampled CPU time, from the `cpu` probe or imported from a profiler (perf's
    /// `cpu-clock` and `task-clock` samples with their periods). `count` is the number of
    /// samples, `total_ns` the CPU time they stand for (the sum of their periods; the eBPF `cpu`
    /// probe's, the CPU time the kernel charged the thread, docs/FORMAT.md).
    OnCpu,
    /// Not a wait: events counted by an imported capture (perf samples of `cycles`, page faults,
    /// `sched:sched_switch`... with their periods). `count` is the number of events (the sum of
    /// the periods); there are no times.
    Event,
    /// Not a wait: samples imported without a period (folded stacks, DTrace `count()`
    /// aggregations, perf headers without a period). `count` is the number of samples; there are
    /// no times.
    Sample,
    /// Not a wait: how long a lock was held, from its acquisition to its release (the
    /// `mutex-hold` probe). `count` is the number of holds, `total_ns` the time held.
    Hold,
}

impl WaitKind {
    /// Every kind, in report order.
    pub const ALL: [WaitKind; 15] = [
        WaitKind::Mutex,
        WaitKind::Condvar,
        WaitKind::RwlockRead,
        WaitKind::RwlockWrite,
        WaitKind::Semaphore,
        WaitKind::Join,
        WaitKind::Wait,
        WaitKind::KernelLock,
        WaitKind::OffCpu,
        WaitKind::Lifecycle,
        WaitKind::Syscall,
        WaitKind::OnCpu,
        WaitKind::Event,
        WaitKind::Sample,
        WaitKind::Hold,
    ];

    /// The kind's name as printed in reports and stored in profiles.
    pub fn name(self) -> &'static str {
        match self {
            WaitKind::Mutex => "mutex",
            WaitKind::Condvar => "condvar",
            WaitKind::RwlockRead => "rwlock-read",
            WaitKind::RwlockWrite => "rwlock-write",
            WaitKind::Semaphore => "semaphore",
            WaitKind::Join => "join",
            WaitKind::Wait => "wait",
            WaitKind::KernelLock => "kernel-lock",
            WaitKind::OffCpu => "off-cpu",
            WaitKind::Lifecycle => "lifecycle",
            WaitKind::Syscall => "syscall",
            WaitKind::OnCpu => "on-cpu",
            WaitKind::Event => "event",
            WaitKind::Sample => "sample",
            WaitKind::Hold => "hold",
        }
    }

    /// True for the kinds of imported samples ([`WaitKind::OnCpu`], [`WaitKind::Event`],
    /// [`WaitKind::Sample`]): their records measure CPU time, events or samples, not waits.
    pub fn is_sampled(self) -> bool {
        matches!(self, WaitKind::OnCpu | WaitKind::Event | WaitKind::Sample)
    }

    /// What records of this kind measure: waits, or something never added to wait time.
    pub fn quantity(self) -> Quantity {
        match self {
            WaitKind::Mutex
            | WaitKind::Condvar
            | WaitKind::RwlockRead
            | WaitKind::RwlockWrite
            | WaitKind::Semaphore
            | WaitKind::Join
            | WaitKind::Wait
            | WaitKind::KernelLock
            | WaitKind::OffCpu => Quantity::Waits,
            WaitKind::Syscall | WaitKind::Lifecycle => Quantity::Calls,
            WaitKind::Hold => Quantity::Holds,
            WaitKind::OnCpu | WaitKind::Event | WaitKind::Sample => Quantity::Samples,
        }
    }

    /// True for the kinds whose records are waits (a thread's time blocked).
    pub fn is_wait(self) -> bool {
        self.quantity() == Quantity::Waits
    }

    /// Classifies a user-level wait from the function names of its user stack, leaf first.
    ///
    /// The first frame that names a known synchronization entry point decides; `fallback` is used
    /// when none does (for example a one-frame stack that stops in a libc-internal helper). The
    /// names are those of glibc, musl, macOS libpthread, FreeBSD libthr, illumos libc and Rust's
    /// std, so the same function classifies the same way on every OS.
    pub fn classify_user_wait<'a>(
        functions: impl IntoIterator<Item = &'a str>,
        fallback: WaitKind,
    ) -> WaitKind {
        for function in functions {
            if let Some(kind) = Self::from_function_name(function) {
                return kind;
            }
        }
        fallback
    }

    fn from_function_name(name: &str) -> Option<WaitKind> {
        // glibc's internal aliases carry a `__GI_` prefix (`__GI___lll_lock_wait`), and public
        // names come with any number of leading underscores (`__pthread_cond_wait`).
        let name = name.trim_start_matches('_');
        let name = name
            .strip_prefix("GI_")
            .map_or(name, |n| n.trim_start_matches('_'));
        // Order matters: "pthread_cond_wait" mentions no mutex, but "__pthread_mutex_cond_lock"
        // (the mutex re-acquire inside a condvar wait) is a mutex wait.
        const TABLE: &[(&str, WaitKind)] = &[
            ("pthread_mutex_cond_lock", WaitKind::Mutex),
            ("pthread_cond_", WaitKind::Condvar),
            ("futex_abstimed_wait", WaitKind::Wait),
            ("pthread_rwlock_rdlock", WaitKind::RwlockRead),
            ("pthread_rwlock_timedrdlock", WaitKind::RwlockRead),
            ("pthread_rwlock_clockrdlock", WaitKind::RwlockRead),
            ("pthread_rwlock_wrlock", WaitKind::RwlockWrite),
            ("pthread_rwlock_timedwrlock", WaitKind::RwlockWrite),
            ("pthread_rwlock_clockwrlock", WaitKind::RwlockWrite),
            ("pthread_mutex_", WaitKind::Mutex),
            ("lll_lock_wait", WaitKind::Mutex),
            ("lll_lock_wake", WaitKind::Mutex),
            ("pthread_join", WaitKind::Join),
            ("pthread_timedjoin", WaitKind::Join),
            ("pthread_clockjoin", WaitKind::Join),
            ("pthread_barrier_wait", WaitKind::Semaphore),
            ("sem_wait", WaitKind::Semaphore),
            ("sem_timedwait", WaitKind::Semaphore),
            ("sem_clockwait", WaitKind::Semaphore),
            ("new_sem_wait", WaitKind::Semaphore),
            ("semwait_signal", WaitKind::Semaphore),
        ];
        // `futex_abstimed_wait` is shared by condvars, semaphores and joins in glibc: it names no
        // purpose, so it must not decide; skip it and look further up the stack.
        TABLE
            .iter()
            .find(|(prefix, _)| name.starts_with(prefix))
            .map(|&(_, kind)| kind)
            .filter(|&kind| kind != WaitKind::Wait)
            .or_else(|| rust_std_kind(name))
    }
}

/// Rust's std synchronization types, matched on their demangled paths.
fn rust_std_kind(name: &str) -> Option<WaitKind> {
    const TABLE: &[(&str, WaitKind)] = &[
        ("std::sys::sync::mutex::", WaitKind::Mutex),
        ("std::sync::mutex::", WaitKind::Mutex),
        ("std::sys::sync::condvar::", WaitKind::Condvar),
        ("std::sync::condvar::", WaitKind::Condvar),
        (
            "std::sys::sync::rwlock::futex::RwLock::read",
            WaitKind::RwlockRead,
        ),
        (
            "std::sys::sync::rwlock::futex::RwLock::write",
            WaitKind::RwlockWrite,
        ),
        ("std::thread::JoinInner", WaitKind::Join),
    ];
    TABLE
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|&(_, kind)| kind)
}

impl fmt::Display for WaitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name [`canonical_wait_frame`] returns: one frame that stands for "entered the kernel to
/// wait" on every OS.
pub const CANONICAL_KERNEL_WAIT: &str = "[kernel wait]";

/// The OS-neutral name of the user-space frame that enters the kernel to wait, or `None`.
///
/// macOS's `__psynch_mutexwait` (and the other psynch/ulock stubs), FreeBSD's `_umtx_op_err`,
/// illumos' `__lwp_park`, glibc's `__lll_lock_wait` (also as its `__GI_` alias) and the futex
/// wrappers of glibc and musl all become [`CANONICAL_KERNEL_WAIT`], so stacks from different
/// kernels line up at the same frame when compared (`lockscope diff`). Accepts a bare symbol or
/// a DTrace ``module`symbol`` (with or without a `+0x..` offset). Keep the real frame beside it:
/// this is for comparisons, not for display.
pub fn canonical_wait_frame(name: &str) -> Option<&'static str> {
    let symbol = name.rsplit_once('`').map_or(name, |(_, symbol)| symbol);
    let symbol = match symbol.rsplit_once("+0x") {
        Some((base, offset)) if offset.chars().all(|c| c.is_ascii_hexdigit()) => base,
        _ => symbol,
    };
    let symbol = symbol.strip_prefix("__GI_").unwrap_or(symbol);
    const WAIT_ENTRIES: &[&str] = &[
        // macOS libsystem_kernel syscall stubs.
        "__psynch_mutexwait",
        "__psynch_cvwait",
        "__psynch_rw_rdlock",
        "__psynch_rw_wrlock",
        "__ulock_wait",
        "__ulock_wait2",
        "__semwait_signal",
        // FreeBSD libc/libthr.
        "_umtx_op_err",
        "_umtx_op",
        "__umtx_op",
        // illumos libc.
        "__lwp_park",
        "___lwp_mutex_timedlock",
        "__lwp_mutex_timedlock",
        // glibc, musl and the raw syscall.
        "__lll_lock_wait",
        "__lll_lock_wait_private",
        "__futex_abstimed_wait_common",
        "__futex_abstimed_wait_common64",
        "futex_wait",
        "__futexwait",
    ];
    WAIT_ENTRIES
        .contains(&symbol)
        .then_some(CANONICAL_KERNEL_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// glibc's internal wait helpers classify by the pthread entry point above them.
    #[test]
    fn classify_glibc_stacks() {
        let mutex = ["__lll_lock_wait", "pthread_mutex_lock", "worker"];
        assert_eq!(
            WaitKind::classify_user_wait(mutex, WaitKind::Wait),
            WaitKind::Mutex
        );
        let cond = [
            "__futex_abstimed_wait_common",
            "__pthread_cond_wait",
            "worker",
        ];
        assert_eq!(
            WaitKind::classify_user_wait(cond, WaitKind::Wait),
            WaitKind::Condvar
        );
        let reacquire = [
            "__lll_lock_wait",
            "__pthread_mutex_cond_lock",
            "pthread_cond_wait",
        ];
        assert_eq!(
            WaitKind::classify_user_wait(reacquire, WaitKind::Wait),
            WaitKind::Mutex
        );
        let alias = ["futex_wait", "__GI___lll_lock_wait", "start_thread"];
        assert_eq!(
            WaitKind::classify_user_wait(alias, WaitKind::Wait),
            WaitKind::Mutex
        );
        let one_frame = ["__futex_abstimed_wait_common"];
        assert_eq!(
            WaitKind::classify_user_wait(one_frame, WaitKind::Wait),
            WaitKind::Wait
        );
        let rd = ["__futex_abstimed_wait_common", "pthread_rwlock_rdlock"];
        assert_eq!(
            WaitKind::classify_user_wait(rd, WaitKind::Wait),
            WaitKind::RwlockRead
        );
    }

    /// The kernel wait entries of every OS map to one canonical frame; other frames do not.
    #[test]
    fn canonical_frames_line_up() {
        let mac = canonical_wait_frame("libsystem_kernel.dylib`__psynch_mutexwait+0xa");
        let bsd = canonical_wait_frame("libthr.so.3`_umtx_op_err+0xa");
        let linux = canonical_wait_frame("__lll_lock_wait");
        assert_eq!(mac, Some(CANONICAL_KERNEL_WAIT));
        assert_eq!(mac, bsd);
        assert_eq!(bsd, linux);
        assert_eq!(canonical_wait_frame("libc.so.1`__lwp_park"), mac);
        assert_eq!(canonical_wait_frame("__GI___lll_lock_wait"), mac);
        assert_eq!(canonical_wait_frame("rg`main"), None);
        assert_eq!(canonical_wait_frame("pthread_mutex_lock"), None);
        assert_eq!(canonical_wait_frame("a.out`__lll_lock_wait+0xzz"), None);
    }

    /// Kind names round-trip through serde as the names the reports print.
    #[test]
    fn names_match_serde() {
        for kind in WaitKind::ALL {
            let json = serde_json::to_string(&kind).expect("serialize");
            assert_eq!(json, format!("\"{}\"", kind.name()));
        }
    }
}
