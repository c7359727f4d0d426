//! The probe catalog: one descriptor per probe lockscope can attach, the one place that names it.
//!
//! A [`ProbeDescriptor`] says what a probe is, identical on every OS: its name (on the command
//! line and in profiles' records), what it measures and costs, the record kinds it produces and
//! what their values measure, its hooks on Linux, and its report section. `lockscope probes`
//! lists the catalog, `--probes` selects from it, the eBPF backend registers one loader per
//! descriptor (`lockscope_ebpf`'s `probes::all`) and the DTrace backend one entry per OS
//! (`lockscope_dtrace::DTRACE_CATALOG`, keyed on the descriptors' names). Code that acts on one
//! probe's records names its descriptor ([`OFFCPU`], [`WaitRecord::is_from`]) or a predicate
//! written here ([`WaitRecord::is_cpu_wait`]), never its name as a string.
//!
//! A new probe is: its BPF files (`ebpf/src/bpf/NAME.bpf.c`, `NAME.h`), its Rust loader
//! (`ebpf/src/probes/NAME.rs`, which registers itself: the eBPF build finds the file), its
//! descriptor here (a constant and a line in [`CATALOG`]), its DTrace entry or stated absence,
//! and its report section (`profiler/src/report/sections/NAME.rs`) when it has one.

use crate::profile::WaitRecord;
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

/// What the values (count, total and max time) of a probe's records measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Time blocked waiting for something the thread asked for (a lock, a condvar, a futex).
    WaitTime,
    /// Time a lock was held, acquire to release: not a wait.
    HoldTime,
    /// Time switched off the CPU, by state and system call (some of it waiting for a CPU).
    OffCpuTime,
    /// Time inside system calls or lifecycle calls.
    CallTime,
    /// CPU time: samples times the sampling period, never wait time.
    CpuTime,
}

/// One probe: everything lockscope says and decides about it, written once.
#[derive(Clone, Copy, Debug)]
pub struct ProbeDescriptor {
    /// Name used on the command line and in profiles (`futex`).
    pub name: &'static str,
    /// What it measures, one line.
    pub description: &'static str,
    /// Wait kinds its records can carry.
    pub kinds: &'static [WaitKind],
    /// What its records' values measure.
    pub measures: Measure,
    /// Cost class.
    pub cost: CostClass,
    /// Enabled when the user names no probes.
    pub default: bool,
    /// Kernel hooks it attaches to on Linux (eBPF backend): listed by `lockscope probes` and
    /// stored in profiles when the loaded probe says no more (fallbacks, measured costs).
    pub ebpf_hooks: &'static str,
    /// Key of its report section (`sections` in the JSON report), when it has its own.
    pub section: Option<&'static str>,
    /// Why the DTrace backend offers it on no OS, when it does not: the reason its scripts give
    /// when it is asked for. `None` for a probe the DTrace catalog implements (or states absent
    /// OS by OS).
    pub dtrace_absence: Option<&'static str>,
}

impl WaitRecord {
    /// True when `probe` recorded this record.
    pub fn is_from(&self, probe: &ProbeDescriptor) -> bool {
        self.probe == probe.name
    }

    /// True for an [`OFFCPU`] interval of a thread waiting for a CPU ([`offcpu_operation::RUN_QUEUE`]:
    /// woken, not yet running; [`offcpu_operation::PREEMPTED`]): CPU saturation, not a wait for
    /// anything the thread asked for.
    pub fn is_cpu_wait(&self) -> bool {
        self.is_from(&OFFCPU) && offcpu_operation::is_cpu_wait(&self.operation)
    }
}

/// The operations of [`OFFCPU`] records: the thread's state, or the system call it slept in.
pub mod offcpu_operation {
    /// Woken, waiting in the run queue for a CPU.
    pub const RUN_QUEUE: &str = "run-queue";
    /// Switched out while runnable.
    pub const PREEMPTED: &str = "preempted";
    /// Asleep outside any system call the probe could name.
    pub const SLEEPING: &str = "sleeping";
    /// Prefix of a sleep in a named system call (`sleeping in nanosleep`).
    pub const SLEEPING_IN: &str = "sleeping in ";

    /// True for the states of a thread waiting for a CPU ([`RUN_QUEUE`], [`PREEMPTED`]).
    pub fn is_cpu_wait(operation: &str) -> bool {
        operation == RUN_QUEUE || operation == PREEMPTED
    }

    /// `sleeping in CALL`.
    pub fn sleeping_in(call: &str) -> String {
        format!("{SLEEPING_IN}{call}")
    }
}

/// The kinds of the waits under user-space locks (a futex wait, or a DTrace backend's lock or
/// kernel wait primitive): the futex probe's, and the DTrace probes' that see the same waits.
pub const USER_LOCK_KINDS: &[WaitKind] = &[
    WaitKind::Mutex,
    WaitKind::Condvar,
    WaitKind::RwlockRead,
    WaitKind::RwlockWrite,
    WaitKind::Semaphore,
    WaitKind::Join,
    WaitKind::Wait,
];

/// The `futex` probe.
pub const FUTEX: ProbeDescriptor = ProbeDescriptor {
    name: "futex",
    description: "kernel wait primitive under pthread locks: every futex wait of the target \
              (FUTEX_WAIT, WAIT_BITSET, LOCK_PI, LOCK_PI2, WAIT_REQUEUE_PI, futex_waitv, \
              futex_wait) with duration, address, op, thread and stacks",
    kinds: USER_LOCK_KINDS,
    measures: Measure::WaitTime,
    cost: CostClass::PerSyscall,
    default: true,
    ebpf_hooks: "tracepoint/syscalls/sys_{enter,exit}_futex{,_waitv,_wait} with tracefs mounted \
                  (else tp_btf or raw_tp sys_enter, sys_exit), sched_process_exit",
    section: None,
    dtrace_absence: None,
};

/// The `offcpu` probe.
pub const OFFCPU: ProbeDescriptor = ProbeDescriptor {
    name: "offcpu",
    description: "time each thread spends off the CPU, with stacks at switch-out, the state \
              (sleeping or preempted) and the system call it slept in; run-queue delay; \
              the per-thread wall-time breakdown and context switch counts",
    kinds: &[WaitKind::OffCpu],
    measures: Measure::OffCpuTime,
    cost: CostClass::PerContextSwitch,
    default: false,
    ebpf_hooks: "tp_btf/sched_switch, tp_btf/sched_waking, tp_btf/sched_wakeup_new, \
                  tp_btf/{irq_handler,softirq,hrtimer_expire}_{entry,exit}",
    section: Some("offcpu"),
    dtrace_absence: None,
};

/// The `wakeup` probe.
pub const WAKEUP: ProbeDescriptor = ProbeDescriptor {
    name: "wakeup",
    description: "who woke each sleep and from where: the waker's thread and stacks with the \
              sleeper's (offwaketime); implies offcpu, and doubles its stack cost",
    kinds: &[WaitKind::OffCpu],
    measures: Measure::OffCpuTime,
    cost: CostClass::PerContextSwitch,
    default: false,
    ebpf_hooks: "tp_btf/sched_waking (with offcpu's hooks)",
    section: Some("offcpu"),
    dtrace_absence: Some("no DTrace script records who ended a sleep"),
};

/// The `preempt` probe.
pub const PREEMPT: ProbeDescriptor = ProbeDescriptor {
    name: "preempt",
    description: "where threads lose the CPU: the user stack a preempted thread was \
              running, so that CPU saturation's preempted time has a site; implies offcpu \
              and adds one user-stack unwinding per preemption, sampled: at most one per \
              thread per 10 ms of its preemptions (the others keep their time, stackless)",
    kinds: &[WaitKind::OffCpu],
    measures: Measure::OffCpuTime,
    cost: CostClass::PerContextSwitch,
    default: false,
    ebpf_hooks: "tp_btf/sched_switch (with offcpu's hooks)",
    section: Some("cpu_saturation"),
    dtrace_absence: Some("no DTrace script takes the stacks of preempted threads"),
};

/// The `waitfor` probe.
pub const WAITFOR: ProbeDescriptor = ProbeDescriptor {
    name: "waitfor",
    description: "who each wait waited for: every off-CPU interval of the target's threads \
                  with who ended it (a thread of the program, one outside it, an interrupt) \
                  and the lock word's owner, streamed to the bottleneck analysis that follows \
                  each wait down to its root (`lockscope why`); implies offcpu",
    kinds: &[WaitKind::OffCpu],
    measures: Measure::OffCpuTime,
    cost: CostClass::PerContextSwitch,
    default: false,
    ebpf_hooks: "tp_btf/sched_switch, tp_btf/sched_waking (with offcpu's hooks), a ring \
                  buffer read at every poll",
    section: None,
    dtrace_absence: None,
};

/// The `syscall` probe.
pub const SYSCALL: ProbeDescriptor = ProbeDescriptor {
    name: "syscall",
    description: "every system call of the target: count, errors by errno, log2 latency, and \
              the stacks of slow calls (--syscalls to select some)",
    kinds: &[WaitKind::Syscall],
    measures: Measure::CallTime,
    cost: CostClass::PerSyscall,
    default: false,
    ebpf_hooks: "tp_btf/sys_enter, tp_btf/sys_exit",
    section: Some("syscall"),
    dtrace_absence: None,
};

/// The `lifecycle` probe.
pub const LIFECYCLE: ProbeDescriptor = ProbeDescriptor {
    name: "lifecycle",
    description: "fork, vfork, clone (process or thread), exec and exit, with the time spent \
              in each call and the stacks of who forks, creates threads and execs",
    kinds: &[WaitKind::Lifecycle],
    measures: Measure::CallTime,
    cost: CostClass::PerLifecycleEvent,
    default: false,
    ebpf_hooks: "tp_btf/sys_enter, tp_btf/sys_exit, tp_btf/sched_process_exit",
    section: Some("lifecycle"),
    dtrace_absence: None,
};

/// The `klock` probe.
pub const KLOCK: ProbeDescriptor = ProbeDescriptor {
    name: "klock",
    description: "kernel lock contention (spinlock, mutex, rwsem, rwlock, rtmutex, \
              percpu-rwsem): wait time, lock type, address, caller and kernel stacks",
    kinds: &[WaitKind::KernelLock],
    measures: Measure::WaitTime,
    cost: CostClass::OnContention,
    default: false,
    ebpf_hooks: "tp_btf/contention_begin, tp_btf/contention_end",
    section: Some("klock"),
    dtrace_absence: None,
};

/// The `mutex-hold` probe.
pub const MUTEX_HOLD: ProbeDescriptor = ProbeDescriptor {
    name: "mutex-hold",
    description: "opt-in: pthread mutex hold times (acquire to release) per lock and \
                  acquisition site, and how each acquisition went (free, spun, blocked); \
                  records carry hold time, not wait time (operation `hold ...`); a uprobe \
                  hit costs microseconds, measured when the probe attaches",
    kinds: &[WaitKind::Hold],
    measures: Measure::HoldTime,
    cost: CostClass::PerLockCall,
    default: false,
    ebpf_hooks: "uprobe libc.so.6:pthread_mutex_lock (entry, return), pthread_mutex_unlock",
    section: Some("holds"),
    dtrace_absence: None,
};

/// The `cpu` probe.
pub const CPU: ProbeDescriptor = ProbeDescriptor {
    name: "cpu",
    description: "on-CPU profile: samples each thread of the target on CPU at --frequency \
                  (default 99 Hz) with complete user stacks and kernel stacks, aggregated \
                  in the kernel per thread and stack; records carry CPU time (samples x \
                  period), not wait time",
    kinds: &[WaitKind::OnCpu],
    measures: Measure::CpuTime,
    cost: CostClass::PerSample,
    default: false,
    ebpf_hooks: "perf_event software cpu-clock on each CPU",
    section: Some("on_cpu"),
    dtrace_absence: None,
};

/// Every probe lockscope knows, in listing order.
pub const CATALOG: &[ProbeDescriptor] = &[
    FUTEX, OFFCPU, WAKEUP, PREEMPT, WAITFOR, SYSCALL, LIFECYCLE, KLOCK, MUTEX_HOLD, CPU,
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

/// The probe set of `lockscope why`.
pub const BOTTLENECK: ProbeSetInfo = ProbeSetInfo {
    name: "bottleneck",
    description: "what `lockscope why` needs to follow every wait to its root: off-CPU \
                  intervals with who ended them, the wakers' stacks, where threads were \
                  preempted, and on-CPU samples of what the threads others waited on ran",
    probes: &[
        OFFCPU.name,
        WAKEUP.name,
        PREEMPT.name,
        WAITFOR.name,
        CPU.name,
    ],
};

/// Every probe set, in listing order.
pub const SETS: &[ProbeSetInfo] = &[BOTTLENECK];

/// Looks a probe set up by name.
pub fn find_set(name: &str) -> Option<&'static ProbeSetInfo> {
    SETS.iter().find(|s| s.name == name)
}

/// Looks a probe up by name.
pub fn find(name: &str) -> Option<&'static ProbeDescriptor> {
    CATALOG.iter().find(|p| p.name == name)
}

/// A name that is neither a probe of the catalog nor a probe set: the one message the command
/// line, `sweep` and the eBPF backend give for it (the DTrace backend names the probes of the OS
/// its script is for, which are not the catalog's).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown probe `{name}`: known probes are {}", known_names())]
pub struct UnknownProbe {
    /// The name given.
    pub name: String,
}

/// The catalog's probes, then its probe sets: `futex, offcpu, ..., cpu (sets: bottleneck)`.
pub fn known_names() -> String {
    let probes: Vec<&str> = CATALOG.iter().map(|p| p.name).collect();
    let sets: Vec<&str> = SETS.iter().map(|s| s.name).collect();
    format!("{} (sets: {})", probes.join(", "), sets.join(", "))
}

/// Looks a probe up by name, or says it is unknown.
pub fn lookup(name: &str) -> Result<&'static ProbeDescriptor, UnknownProbe> {
    find(name).ok_or_else(|| UnknownProbe {
        name: name.to_owned(),
    })
}

/// The probes `names` select (each trimmed: a probe, or a set standing for its probes), each
/// once, in the order given; no names select the [`defaults`].
pub fn select(names: &[String]) -> Result<Vec<&'static str>, UnknownProbe> {
    if names.is_empty() {
        return Ok(defaults().map(|p| p.name).collect());
    }
    let mut selected: Vec<&'static str> = Vec::new();
    for name in names {
        let name = name.trim();
        let probes: Vec<&'static str> = match find_set(name) {
            Some(set) => set.probes.to_vec(),
            None => vec![lookup(name)?.name],
        };
        for probe in probes {
            if !selected.contains(&probe) {
                selected.push(probe);
            }
        }
    }
    Ok(selected)
}

/// The probes enabled when the user names none.
pub fn defaults() -> impl Iterator<Item = &'static ProbeDescriptor> {
    CATALOG.iter().filter(|p| p.default)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A selection names probes and sets, each probe once in the order given, the defaults when
    /// empty; an unknown name is refused with the one message that lists the catalog.
    #[test]
    fn select_and_unknown_probe() {
        assert_eq!(select(&[]), Ok(vec![FUTEX.name]));
        let names = [
            " offcpu ".to_owned(),
            "bottleneck".to_owned(),
            "cpu".to_owned(),
        ];
        assert_eq!(
            select(&names),
            Ok(vec![
                OFFCPU.name,
                WAKEUP.name,
                PREEMPT.name,
                WAITFOR.name,
                CPU.name
            ])
        );
        assert_eq!(lookup("klock").map(|p| p.name), Ok(KLOCK.name));
        let err = select(&["futex".to_owned(), "nosuch".to_owned()]).expect_err("unknown");
        assert_eq!(err.name, "nosuch");
        // The catalog's names from the catalog: a new probe needs no line here.
        let probes: Vec<&str> = CATALOG.iter().map(|p| p.name).collect();
        assert_eq!(
            err.to_string(),
            format!(
                "unknown probe `nosuch`: known probes are {} (sets: bottleneck)",
                probes.join(", ")
            )
        );
    }
}
