//! The DTrace probe catalog: which kernel hooks each lockscope probe uses on each OS.
//!
//! Catalog names are lockscope's (`psynch`, `umtx`, `offcpu`); categories are the OS-neutral
//! [`WaitKind`]s, identical on every OS (the Linux backend calls its kernel wait primitive
//! `futex`). Where the kernel primitive differs, the name differs (`psynch`/`ulock` on macOS,
//! `umtx` on FreeBSD, `lwp-park`/`lwp-mutex` on illumos); where it is the same idea everywhere,
//! the name is shared (`plockstat`, and with the Linux backend `offcpu`, `klock`, `lifecycle`,
//! `syscall`: a probe with a Linux namesake records the same categories, so profiles compare).
//!
//! A probe with a Linux namesake is the DTrace implementation of that probe's descriptor
//! (`lockscope_probes::catalog`) and takes its name from it; a test checks that every descriptor
//! has, on every OS, an entry here or a stated reason why not. What each OS's wait operations
//! (by number or name) stand for is in `operations`.

mod operations;
#[cfg(test)]
mod tests;

pub use operations::{
    decode_ulock_op, decode_umtx_op, futex_kind, futex_op_name, kind_of_operation,
    FUTEX_ENTRY_POINTS, FUTEX_WAIT_CMDS, UMTX_WAIT_OPS,
};

use crate::script::family::Family;
use crate::script::ScriptOptions;
use lockscope_probes::{CostClass, WaitKind};
use std::fmt;

/// The operating system a D script is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TargetOs {
    /// macOS (XNU): psynch/ulock syscalls, plockstat only with the introspection libpthread.
    MacOs,
    /// FreeBSD: `_umtx_op`, lockstat, FreeBSD's own sched provider.
    FreeBsd,
    /// illumos (and Solaris): plockstat in libc, `lwp_park`, lockstat.
    Illumos,
    /// Linux with Oracle's DTrace for Linux (DTrace 2.0 on eBPF): `futex`, `sched`, `proc`,
    /// `syscall` and `pid$target`; no `fbt`, so no `lockstat`, `sched:::on-cpu` or plockstat.
    Linux,
}

impl TargetOs {
    /// Every supported OS.
    pub const ALL: [TargetOs; 4] = [
        TargetOs::MacOs,
        TargetOs::FreeBsd,
        TargetOs::Illumos,
        TargetOs::Linux,
    ];

    /// The name used on the command line and in profiles' metadata (`macos`, `freebsd`,
    /// `illumos`, `linux`).
    pub fn name(self) -> &'static str {
        match self {
            TargetOs::MacOs => "macos",
            TargetOs::FreeBsd => "freebsd",
            TargetOs::Illumos => "illumos",
            TargetOs::Linux => "linux",
        }
    }

    /// Parses [`TargetOs::name`] (also accepts `darwin` and `solaris`).
    pub fn from_name(name: &str) -> Option<TargetOs> {
        match name.to_ascii_lowercase().as_str() {
            "macos" | "darwin" | "osx" => Some(TargetOs::MacOs),
            "freebsd" => Some(TargetOs::FreeBsd),
            "illumos" | "solaris" | "smartos" | "omnios" => Some(TargetOs::Illumos),
            "linux" => Some(TargetOs::Linux),
            _ => None,
        }
    }

    /// The OS lockscope runs on, when the DTrace backend has a catalog for it (Linux too: its
    /// default backend stays eBPF, DTrace is chosen with `--backend dtrace`).
    pub fn host() -> Option<TargetOs> {
        match std::env::consts::OS {
            "macos" => Some(TargetOs::MacOs),
            "freebsd" => Some(TargetOs::FreeBsd),
            "illumos" | "solaris" => Some(TargetOs::Illumos),
            "linux" => Some(TargetOs::Linux),
            _ => None,
        }
    }

    /// DTrace providers a lockscope script may use on this OS (`plockstat` stands for
    /// `plockstat$target`).
    pub fn providers(self) -> &'static [&'static str] {
        match self {
            TargetOs::MacOs => &["dtrace", "profile", "syscall", "plockstat", "proc", "sched"],
            TargetOs::FreeBsd => &["dtrace", "profile", "syscall", "lockstat", "proc", "sched"],
            TargetOs::Illumos => &[
                "dtrace",
                "profile",
                "syscall",
                "plockstat",
                "lockstat",
                "proc",
                "sched",
            ],
            TargetOs::Linux => &[
                "dtrace", "profile", "syscall", "pid", "proc", "sched", "rawtp",
            ],
        }
    }
}

impl fmt::Display for TargetOs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One DTrace probe of lockscope's catalog.
#[derive(Clone, Copy, Debug)]
pub struct DtraceProbe {
    /// Catalog name, used by `--probes` and stored in records (`psynch`).
    pub name: &'static str,
    /// What it measures, one line.
    pub description: &'static str,
    /// Wait kinds its records can carry.
    pub kinds: &'static [WaitKind],
    /// Cost class.
    pub cost: CostClass,
    /// `(os, probe descriptions)`: the DTrace probes used on each OS where it exists.
    pub hooks: &'static [(TargetOs, &'static [&'static str])],
    /// Enabled when the user names no probes.
    pub default: bool,
    /// On macOS, only usable when lockscope launches the target (see [`MACOS_INTROSPECTION`]);
    /// not a default when attaching to a running process.
    pub macos_needs_launch: bool,
    /// `(os, reason)`: OSes whose dtrace accepts the probe's hooks (or lacks its provider) but
    /// where they never fire, measured on a real dtrace. Selecting the probe there records it
    /// as failed with the reason instead of an empty profile.
    pub absent: &'static [(TargetOs, &'static str)],
    /// Writes the probe's D clauses for a script and the aggregation families they fill.
    pub(crate) clauses: Clauses,
}

/// What writes a probe's D clauses: into the script text, the families whose `printa()`s
/// `END` prints, for the script's options.
pub(crate) type Clauses = fn(&mut String, &mut Vec<Family>, &ScriptOptions);

impl DtraceProbe {
    /// True when the probe exists on `os`.
    pub fn supports(&self, os: TargetOs) -> bool {
        self.hooks.iter().any(|(o, _)| *o == os)
    }

    /// Why the probe cannot fire on `os`, when it is known to be absent there.
    pub fn absent_on(&self, os: TargetOs) -> Option<&'static str> {
        self.absent
            .iter()
            .find(|(o, _)| *o == os)
            .map(|(_, reason)| *reason)
    }

    /// The DTrace probe descriptions used on `os` (empty when unsupported).
    pub fn hooks_on(&self, os: TargetOs) -> &'static [&'static str] {
        self.hooks
            .iter()
            .find(|(o, _)| *o == os)
            .map_or(&[], |(_, hooks)| hooks)
    }
}

/// The directory of macOS's introspection libpthread, the only one with plockstat probes
/// (`DYLD_LIBRARY_PATH=/usr/lib/system/introspection`).
pub const MACOS_INTROSPECTION: &str = "/usr/lib/system/introspection";

/// Every DTrace probe lockscope knows, in listing order (one file each under `crate::probes`).
pub const DTRACE_CATALOG: &[DtraceProbe] = crate::probes::ALL;

/// The `cpu` probe's sampling probe: DTrace's customary 997 Hz (a prime, out of step with
/// periodic work), on every CPU.
pub const PROFILE_PROBE: &str = "profile:::profile-997";
/// Nanoseconds of CPU time one `profile-997` sample stands for.
pub const PROFILE_PERIOD_NS: u64 = 1_000_000_000 / 997;

/// True when the bottleneck analysis (`waitfor`, `--probes bottleneck`) can be recorded on `os`:
/// where the sched provider has a wakeup probe whose arguments say which thread of which
/// process it woke (illumos, FreeBSD; Linux, through the `sched_waking` tracepoint). Not macOS:
/// its `sched:::wakeup` (XNU's `thread_unblock`) passes as `args[1]` the process of the thread
/// calling it on current kernels (`current_proc()`), so a predicate cannot select the wakeups of
/// the target's threads, and the analysis there is not written (see [`WAIT_FOR_MISSING_MACOS`]).
pub fn has_wait_for(os: TargetOs) -> bool {
    os != TargetOs::MacOs
}

/// What the bottleneck analysis lacks on macOS, for error messages.
pub const WAIT_FOR_MISSING_MACOS: &str = "macOS's sched:::wakeup passes the waker's process, not \
    the woken thread's, as args[1] (XNU's thread_unblock on current kernels), so a D predicate \
    cannot select the wakeups of the target's threads";

/// Looks a probe up by catalog name.
pub fn find(name: &str) -> Option<&'static DtraceProbe> {
    DTRACE_CATALOG.iter().find(|p| p.name == name)
}

/// The probes that exist on `os`, in listing order.
pub fn probes_for(os: TargetOs) -> impl Iterator<Item = &'static DtraceProbe> {
    DTRACE_CATALOG.iter().filter(move |p| p.supports(os))
}

/// The probes enabled when the user names none: the catalog defaults that exist on `os`,
/// without the macOS plockstat probes when attaching to a running process (`launched` false).
pub fn defaults_for(os: TargetOs, launched: bool) -> impl Iterator<Item = &'static DtraceProbe> {
    probes_for(os)
        .filter(move |p| p.default && (launched || os != TargetOs::MacOs || !p.macos_needs_launch))
}

/// Moved to [`lockscope_probes::wait`] (the Linux side uses it too); re-exported here so
/// existing callers keep compiling.
pub use lockscope_probes::wait::{canonical_wait_frame, CANONICAL_KERNEL_WAIT};
