//! The DTrace backend's probes, one file each (as the eBPF backend has them under
//! `ebpf/src/probes/`): each holds the probe's catalog entry ([`DtraceProbe`]: the hooks it
//! uses on each OS) and the D clauses it adds to a script ([`DtraceProbe::clauses`]).
//! [`ALL`] lists them in the catalog's order.

mod cpu;
mod futex;
mod klock;
mod lifecycle;
mod lwp_mutex;
mod lwp_park;
mod mutex_hold;
mod offcpu;
mod plockstat;
mod psynch;
mod semwait;
mod syscall;
mod ulock;
mod umtx;
mod waitfor;

pub use waitfor::WAKER_KERNEL_FRAMES;

use crate::catalog::DtraceProbe;

/// Every probe, in listing order: the catalog ([`crate::DTRACE_CATALOG`]).
pub(crate) const ALL: &[DtraceProbe] = &[
    futex::PROBE,
    psynch::PROBE,
    ulock::PROBE,
    semwait::PROBE,
    umtx::PROBE,
    lwp_park::PROBE,
    lwp_mutex::PROBE,
    plockstat::PROBE,
    mutex_hold::PROBE,
    klock::PROBE,
    offcpu::PROBE,
    waitfor::PROBE,
    lifecycle::PROBE,
    syscall::PROBE,
    cpu::PROBE,
];
