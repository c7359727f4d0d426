//! The probe catalog: every probe lockscope can attach, with what it measures and what it costs.
//!
//! Backends decide how to attach a probe on their kernel; the catalog is what `lockscope probes`
//! lists and what `--probes` selects from, identical on every OS.

use crate::wait::WaitKind;

/// How expensive a probe is, so users can pick a probe set for a production server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostClass {
    /// Fires only when a thread already blocks (a wait that costs microseconds anyway).
    OnContention,
    /// Fires on every system call of the target (filtered early in the kernel).
    PerSyscall,
    /// Fires on every context switch of the machine.
    PerContextSwitch,
    /// Fires on process and thread creation, exec and exit only.
    PerLifecycleEvent,
    /// Fires on every lock and unlock call of the target, through uprobes (microseconds each).
    PerLockCall,
    /// Fires at a fixed rate on every CPU, whatever the target does (`--frequency`).
    PerSample,
}

impl CostClass {
    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            CostClass::OnContention => "on-contention",
            CostClass::PerSyscall => "per-syscall",
            CostClass::PerContextSwitch => "per-context-switch",
            CostClass::PerLifecycleEvent => "per-lifecycle-event",
            CostClass::PerLockCall => "per-lock-call",
            CostClass::PerSample => "per-sample",
        }
    }
}

/// One probe of the catalog.
#[derive(Clone, Copy, Debug)]
pub struct ProbeInfo {
    /// Name used on the command line and in profiles (`futex`).
    pub name: &'static str,
    /// What it measures, one line.
    pub description: &'static str,
    /// Wait kinds its records can carry.
    pub kinds: &'static [WaitKind],
    /// Cost class.
    pub cost: CostClass,
    /// Enabled when the user names no probes.
    pub default: bool,
    /// Kernel hooks it attaches to on Linux (eBPF backend), for `lockscope probes`.
    pub linux_hooks: &'static str,
}

/// Every probe lockscope knows, in listing order.
pub const CATALOG: &[ProbeInfo] = &[
    ProbeInfo {
        name: "futex",
        description: "kernel wait primitive under pthread locks: every futex wait of the target \
                  (FUTEX_WAIT, WAIT_BITSET, LOCK_PI, LOCK_PI2, WAIT_REQUEUE_PI, futex_waitv, \
                  futex_wait) with duration, address, op, thread and stacks",
        kinds: &[
            WaitKind::Mutex,
            WaitKind::Condvar,
            WaitKind::RwlockRead,
            WaitKind::RwlockWrite,
            WaitKind::Semaphore,
            WaitKind::Join,
            WaitKind::Wait,
        ],
        cost: CostClass::PerSyscall,
        default: true,
        linux_hooks: "tracepoint/syscalls/sys_{enter,exit}_futex{,_waitv,_wait} with tracefs \
                      mounted, else tp_btf/sys_enter, tp_btf/sys_exit; tp_btf/sched_process_exit \
                      (raw_tp fallback)",
    },
    ProbeInfo {
        name: "offcpu",
        description: "time each thread spends off the CPU, with stacks at switch-out, the state \
                  (sleeping or preempted) and the system call it slept in; run-queue delay; \
                  the per-thread wall-time breakdown and context switch counts",
        kinds: &[WaitKind::OffCpu],
        cost: CostClass::PerContextSwitch,
        default: false,
        linux_hooks: "tp_btf/sched_switch, tp_btf/sched_waking, tp_btf/sched_wakeup_new",
    },
    ProbeInfo {
        name: "wakeup",
        description: "who woke each sleep and from where: the waker's thread and stacks with the \
                  sleeper's (offwaketime); implies offcpu, and doubles its stack cost",
        kinds: &[WaitKind::OffCpu],
        cost: CostClass::PerContextSwitch,
        default: false,
        linux_hooks: "tp_btf/sched_waking (with offcpu's hooks)",
    },
    ProbeInfo {
        name: "preempt",
        description: "where threads lose the CPU: the user stack a preempted thread was \
                  running, so that CPU saturation's preempted time has a site; implies offcpu \
                  and adds one user-stack unwinding per preemption, sampled: at most one per \
                  thread per 10 ms of its preemptions (the others keep their time, stackless)",
        kinds: &[WaitKind::OffCpu],
        cost: CostClass::PerContextSwitch,
        default: false,
        linux_hooks: "tp_btf/sched_switch (with offcpu's hooks)",
    },
    ProbeInfo {
        name: "waitfor",
        description: "who each wait waited for: every off-CPU interval of the target's threads \
                      with who ended it (a thread of the program, one outside it, an interrupt) \
                      and the lock word's owner, streamed to the wait-for analysis that follows \
                      each wait down to its root (`lockscope why`); implies offcpu",
        kinds: &[WaitKind::OffCpu],
        cost: CostClass::PerContextSwitch,
        default: false,
        linux_hooks: "tp_btf/sched_switch, tp_btf/sched_waking (with offcpu's hooks), a ring \
                      buffer read at every poll",
    },
    ProbeInfo {
        name: "syscall",
        description: "every system call of the target: count, errors by errno, log2 latency, and \
                  the stacks of slow calls (--syscalls to select some)",
        kinds: &[WaitKind::Syscall],
        cost: CostClass::PerSyscall,
        default: false,
        linux_hooks: "tp_btf/sys_enter, tp_btf/sys_exit",
    },
    ProbeInfo {
        name: "lifecycle",
        description: "fork, vfork, clone (process or thread), exec and exit, with the time spent \
                  in each call and the stacks of who forks, creates threads and execs",
        kinds: &[WaitKind::Lifecycle],
        cost: CostClass::PerLifecycleEvent,
        default: false,
        linux_hooks: "tp_btf/sys_enter, tp_btf/sys_exit, tp_btf/sched_process_exit",
    },
    ProbeInfo {
        name: "klock",
        description: "kernel lock contention (spinlock, mutex, rwsem, rwlock, rtmutex, \
                  percpu-rwsem): wait time, lock type, address, caller and kernel stacks",
        kinds: &[WaitKind::KernelLock],
        cost: CostClass::OnContention,
        default: false,
        linux_hooks: "tp_btf/contention_begin, tp_btf/contention_end",
    },
    ProbeInfo {
        name: "mutex-hold",
        description: "opt-in: pthread mutex hold times (acquire to release) per lock and \
                      acquisition site, and how each acquisition went (free, spun, blocked); \
                      records carry hold time, not wait time (operation `hold ...`); a uprobe \
                      hit costs microseconds, measured when the probe attaches",
        kinds: &[WaitKind::Mutex],
        cost: CostClass::PerLockCall,
        default: false,
        linux_hooks: "uprobe libc pthread_mutex_lock (entry, return), pthread_mutex_unlock",
    },
    ProbeInfo {
        name: "cpu",
        description: "on-CPU profile: samples each thread of the target on CPU at --frequency \
                      (default 99 Hz) with complete user stacks and kernel stacks, aggregated \
                      in the kernel per thread and stack; records carry CPU time (samples x \
                      period), not wait time",
        kinds: &[WaitKind::OnCpu],
        cost: CostClass::PerSample,
        default: false,
        linux_hooks: "perf_event software cpu-clock, one per CPU",
    },
];

/// A named set of probes, selected on the command line like one probe.
#[derive(Clone, Copy, Debug)]
pub struct ProbeSetInfo {
    /// Name used on the command line (`bottleneck`).
    pub name: &'static str,
    /// What it is for, one line.
    pub description: &'static str,
    /// Its probes, in catalog order.
    pub probes: &'static [&'static str],
}

/// Every probe set, in listing order.
pub const SETS: &[ProbeSetInfo] = &[ProbeSetInfo {
    name: "bottleneck",
    description: "what `lockscope why` needs to follow every wait to its root: off-CPU \
                  intervals with who ended them, the wakers' stacks, where threads were \
                  preempted, and on-CPU samples of what the threads others waited on ran",
    probes: &["offcpu", "wakeup", "preempt", "waitfor", "cpu"],
}];

/// Looks a probe set up by name.
pub fn find_set(name: &str) -> Option<&'static ProbeSetInfo> {
    SETS.iter().find(|s| s.name == name)
}

/// Looks a probe up by name.
pub fn find(name: &str) -> Option<&'static ProbeInfo> {
    CATALOG.iter().find(|p| p.name == name)
}

/// The probes enabled when the user names none.
pub fn defaults() -> impl Iterator<Item = &'static ProbeInfo> {
    CATALOG.iter().filter(|p| p.default)
}
