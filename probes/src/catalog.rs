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
}

impl CostClass {
    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            CostClass::OnContention => "on-contention",
            CostClass::PerSyscall => "per-syscall",
            CostClass::PerContextSwitch => "per-context-switch",
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
}

/// Every probe lockscope knows, in listing order.
pub const CATALOG: &[ProbeInfo] = &[ProbeInfo {
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
}];

/// Looks a probe up by name.
pub fn find(name: &str) -> Option<&'static ProbeInfo> {
    CATALOG.iter().find(|p| p.name == name)
}

/// The probes enabled when the user names none.
pub fn defaults() -> impl Iterator<Item = &'static ProbeInfo> {
    CATALOG.iter().filter(|p| p.default)
}
