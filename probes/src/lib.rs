//! OS-neutral core of lockscope.
//!
//! Everything that both backends (eBPF on Linux, DTrace on macOS, FreeBSD and illumos) share lives
//! here and nowhere else, so that a profile recorded on one kernel compares frame by frame with one
//! recorded on another:
//!
//! - [`catalog`]: one descriptor per probe lockscope knows (name, what it measures and costs, its
//!   records, hooks and report section), and the predicates on its records: the one place that
//!   names a probe;
//! - [`target`]: what a recording records ([`Target`]: processes, a cgroup, every process or a
//!   command), as the command line gives it and both backends take it;
//! - [`wait`]: the wait taxonomy (mutex, condvar, rwlock, ...), one set of names for every OS;
//! - [`hist`]: log2 latency histograms, bucketed exactly like DTrace's `quantize()`;
//! - [`profile`]: the profile data model (metadata with what was recorded, threads, interned
//!   stacks, wait records);
//! - [`overlap`]: the sleeps two probes saw (`futex` or `klock`, and `offcpu`), counted once,
//!   and the kind of an `offcpu` sleep told by its stacks (a kernel lock, a mutex...);
//! - [`kernel_frames`]: the kernel functions lockscope recognizes on a kernel stack (interrupt
//!   context, I/O waits, sleeping kernel locks and their internals), one list per concept, read
//!   by both backends and the analyses;
//! - [`sched`]: per-thread wall-time breakdown and wakeups (the `offcpu` probe);
//! - [`bottleneck`]: the bottleneck analysis (the `waitfor` probe): who each wait waited for, down to
//!   the root of its chain, from a stream of off-CPU intervals;
//! - [`format`](mod@format): the versioned on-disk profile format (`.lsp`);
//! - [`host`]: what both backends ask of the host, written once: `uname`, the online CPUs and
//!   the C library's version (a profile's metadata), and ending a launched process (SIGTERM,
//!   then SIGKILL);
//! - [`symbols`] (Linux): what both backends' Linux symbolizers share (blazesym symbols as
//!   frames, `/proc/PID/maps` lines);
//! - [`procfs`] (Linux): what both backends read of the processes in `/proc` (a `stat` line,
//!   every process, the descendants of some);
//! - [`linux_syscalls`]: x86_64 Linux system call names by number (what both backends decode
//!   calls with), and the sets of calls sleeps are classed by (futex, poll, I/O, sleep, file I/O,
//!   input), written once for the eBPF `offcpu` probe, the DTrace bottleneck stream and the
//!   analyses.
//!
//! Apart from [`host`]'s POSIX calls, [`symbols`]' and [`procfs`]' Linux formats and
//! [`linux_syscalls`]' Linux names, nothing here is specific to an OS: the model never talks to a
//! kernel.

pub mod bottleneck;
pub mod catalog;
pub mod format;
pub mod hist;
pub mod host;
pub mod kernel_frames;
pub mod linux_syscalls;
pub mod overlap;
#[cfg(target_os = "linux")]
pub mod procfs;
pub mod profile;
pub mod sched;
#[cfg(target_os = "linux")]
pub mod symbols;
pub mod target;
pub mod wait;

pub use catalog::{CostClass, Measure, ProbeDescriptor, CATALOG};
pub use format::{read_profile, version_of, write_profile, FormatError, FORMAT_VERSION};
pub use hist::Log2Histogram;
pub use overlap::{MixedMeasures, SeenTwice};
pub use profile::{
    AddressSpace, AttachStatus, Frame, InconsistentProfile, InlinedFrame, Losses, Metadata,
    ProbeAttachment, ProcessInfo, Profile, RecordedTarget, Stack, StackId, StackInterner,
    StackWalk, ThreadInfo, WaitRecord, WaitStats,
};
pub use sched::{
    idle_waits, is_role_candidate, sleep_site_roles, wait_roles, RoleBasis, RoleOf, ThreadTime,
    TimeClass, WaitRole, WakeupRecord,
};
pub use target::Target;
pub use wait::{Quantity, WaitKind};

/// An error with its causes, `: `-separated, as the command line prints them (for messages that
/// hold another error, and for output that shows one whole).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
