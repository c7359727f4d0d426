//! DTrace backend of lockscope, for macOS, FreeBSD and illumos, and for Linux with Oracle's
//! DTrace for Linux (where it is checked against a real dtrace and against the eBPF backend).
//!
//! Nothing here links against libdtrace: lockscope writes one D script per recording, runs
//! `dtrace(1)` as a child process and parses its text output. All of that is plain,
//! platform-independent Rust, so it is built and tested on any host:
//!
//! - [`catalog`]: the DTrace probes lockscope knows per OS ([`TargetOs`]), mapped onto the
//!   OS-neutral wait taxonomy ([`lockscope_probes::WaitKind`]), plus the decoders of `_umtx_op`
//!   and `ulock_wait` operations ([`canonical_wait_frame`], which lines stacks of every OS up
//!   for comparisons, lives in [`lockscope_probes::wait`] and is re-exported here);
//! - `probes`: one file per probe, each its catalog entry and the D clauses it adds to a script;
//! - [`script`]: [`generate_script`] builds the D script from the probes' clauses (in-kernel
//!   aggregations, record framing that the parser owns);
//! - [`parse`]: DTrace text output (lockscope's own records and generic `printa` output) into
//!   [`parse::Output`];
//! - [`recorder`]: [`Recorder`] records a [`lockscope_probes::Target`] (resolved into the
//!   [`ScriptTarget`] a D script can name) by running `dtrace -q -s SCRIPT -p PID` (or
//!   `-c CMD`), stops it, and turns its complaints into clear [`Error`]s and its drop reports
//!   into [`lockscope_probes::Losses`];
//! - `symbolize` (Linux): the target's mappings snapshotted while it lives, and its user frames
//!   symbolized from them after dtrace printed (DTrace for Linux leaves bare addresses for a
//!   target that has exited);
//! - [`bottleneck`]: the bottleneck stream (`waitfor`, `--probes bottleneck`): the per-event lines
//!   of the script read as dtrace prints them, assembled into off-CPU intervals and fed to the
//!   OS-neutral bottleneck engine ([`lockscope_probes::bottleneck::Engine`]) for `lockscope why`;
//! - [`import_capture`]: a profile from DTrace output captured elsewhere
//!   (`dtrace -n 'profile-997 { @[ustack()] = count(); }'` and the like), whose generic
//!   aggregations' records carry the probe name [`GENERIC_PROBE`].
//!
//! Frames are stored the way Brendan Gregg's `stackcollapse.pl` prints them: [`Frame::function`]
//! holds ``module`symbol`` without the `+0x..` offset (which goes to `function_offset`), so a
//! folded export of an imported capture matches `stackcollapse.pl` line for line. See
//! [`parse::parse_frame`] for the exact rules and the one documented difference.
//!
//! [`Frame::function`]: lockscope_probes::Frame::function

pub mod bottleneck;
pub mod catalog;
pub mod parse;
mod probes;
mod profile;
pub mod recorder;
pub mod script;
#[cfg(target_os = "linux")]
pub mod symbolize;

pub use catalog::{canonical_wait_frame, DtraceProbe, TargetOs, DTRACE_CATALOG};
pub use profile::{import_capture, to_profile, to_profile_with, FrameResolver, GENERIC_PROBE};
pub use recorder::{Launcher, RecordOptions, Recorder, Recording};
pub use script::{generate_script, ScriptOptions, ScriptTarget};

use std::path::PathBuf;

/// Everything that can go wrong in the DTrace backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A probe of the OS-neutral catalog that the DTrace backend offers on no OS, with why
    /// ([`lockscope_probes::ProbeDescriptor::dtrace_absence`]).
    #[error("`{probe}` is not recorded by the DTrace backend: {reason}")]
    NotOffered {
        /// The name asked for.
        probe: String,
        /// Why.
        reason: &'static str,
    },
    /// A probe name that the catalog does not know for this OS.
    #[error("unknown probe `{probe}` on {os}: known probes are {known}")]
    UnknownProbe {
        /// The name asked for.
        probe: String,
        /// The OS the script is for.
        os: TargetOs,
        /// Comma-separated names valid on that OS.
        known: String,
    },
    /// The bottleneck analysis (`waitfor`, `--probes bottleneck`) on an OS whose sched provider
    /// gives no usable wakeup probe (macOS, [`catalog::has_wait_for`]).
    #[error(
        "`{probe}` is not recorded by the DTrace backend on {os}: the bottleneck analysis that \
         `lockscope why` reads follows every sleep to the thread that woke it, and {}; record \
         with the DTrace backend on illumos, FreeBSD or Linux (DTrace for Linux), or with the \
         eBPF backend on Linux",
        catalog::WAIT_FOR_MISSING_MACOS
    )]
    NoBottleneck {
        /// The name asked for.
        probe: String,
        /// The OS the script is for.
        os: TargetOs,
    },
    /// A cgroup to record ([`lockscope_probes::Target::Cgroup`]), which D cannot select.
    #[error(
        "--cgroup needs the ebpf backend: D has no variable for a process's cgroup (neither \
         DTrace on macOS, FreeBSD and illumos, whose kernels have none of Linux's cgroups, nor \
         Oracle's DTrace for Linux names one), so a predicate cannot select a cgroup's processes"
    )]
    NoCgroup,
    /// A command to launch with an argument that is not UTF-8: `dtrace -c` takes one string.
    #[error("command argument {argument:?} is not UTF-8, which dtrace -c needs")]
    NonUtf8Argument {
        /// The argument.
        argument: std::ffi::OsString,
    },
    /// An option outside its valid range.
    #[error("invalid option `{option}`: {reason}")]
    InvalidOption {
        /// Option name.
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The script could not be written for dtrace(1) to read.
    #[error("failed to write the D script to `{path}`")]
    WriteScript {
        /// Where it was to be written.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// dtrace(1) could not be started.
    #[error("failed to start `{program}` (set LOCKSCOPE_DTRACE to the dtrace binary)")]
    Spawn {
        /// The binary tried.
        program: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The command to trace could not be started (by the recorder's own launcher).
    #[error("failed to launch `{command}`")]
    Launch {
        /// `argv[0]`.
        command: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Stopping or resuming the command the recorder launched failed.
    #[error("failed to {action} the launched command (pid {pid})")]
    Signal {
        /// `stop` or `resume`.
        action: &'static str,
        /// Its pid.
        pid: u32,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Waiting for or signalling dtrace(1) failed.
    #[error("failed to {action} dtrace(1)")]
    Process {
        /// What was being done (`wait for`, `stop`).
        action: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// dtrace(1) refused to run for lack of privileges.
    #[error("dtrace(1) needs root privileges (run lockscope with sudo): {message}")]
    NotPrivileged {
        /// dtrace's own message.
        message: String,
    },
    /// macOS System Integrity Protection keeps DTrace from tracing.
    #[error(
        "system integrity protection is on, so dtrace(1) cannot trace this: {message}; with SIP \
         on, the syscall, proc and sched probes still work on processes that are not Apple-signed \
         or restricted (your own builds), but the pid and fbt providers and restricted targets do \
         not; to lift it, boot into recovery mode and run `csrutil enable --without dtrace`"
    )]
    SipRestricted {
        /// dtrace's own message.
        message: String,
    },
    /// A probe description in the script matches no probe on this system.
    #[error("{message}{hint}")]
    ProbeNotFound {
        /// dtrace's own message.
        message: String,
        /// Why, and what to do, when lockscope knows (starts with `: `), else empty.
        hint: String,
    },
    /// macOS refuses to let dtrace control the target.
    #[error(
        "dtrace(1) cannot control the target: {message}; macOS does not let DTrace attach to \
         executables signed with restricted entitlements (Apple's own binaries, hardened \
         runtime without the get-task-allow entitlement): trace a copy you signed yourself or \
         a debug build"
    )]
    RestrictedEntitlements {
        /// dtrace's own message.
        message: String,
    },
    /// dtrace(1) failed for another reason.
    #[error("dtrace(1) failed ({status}): {stderr}")]
    DtraceFailed {
        /// Its exit status, as printed.
        status: String,
        /// What it wrote to stderr (its error lines).
        stderr: String,
    },
    /// The kernel's BPF verifier refused a program DTrace for Linux generated for the script.
    #[error(
        "the kernel's BPF verifier rejected a program of the D script ({message}): {reason}; {}",
        match log {
            Some(path) => format!("dtrace's output with the verifier log ({lines} lines) is in {}", path.display()),
            None => format!("the verifier log ({lines} lines) could not be saved"),
        }
    )]
    VerifierRejected {
        /// dtrace's "BPF program load for 'PROBE' failed: ..." line.
        message: String,
        /// The verifier's last line that says why.
        reason: String,
        /// Where dtrace's whole stderr was saved, when it could be.
        log: Option<PathBuf>,
        /// Number of verifier log lines.
        lines: usize,
    },
    /// The thread that reads dtrace's output panicked: what it had read is lost.
    #[error("failed to read dtrace's output: its reader thread panicked")]
    OutputReaderPanicked,
    /// The input of [`import_capture`] has nothing DTrace would print.
    #[error("not DTrace output: {reason}")]
    NotDtraceOutput {
        /// What was found instead.
        reason: String,
    },
}
