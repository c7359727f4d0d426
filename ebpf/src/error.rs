//! The errors of the eBPF backend: one line each, lowercase, naming the object.
//!
//! An error that wraps another exposes it as its `source` and does not repeat it in its own
//! message, so a chain printed with anyhow's `{:#}` names each cause once.

use std::io;

/// Why recording could not start, continue or finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The process lacks capabilities the recording needs: each with what needs it and why,
    /// and the setcap line that grants what the recording uses.
    #[error("{0}")]
    MissingCapabilities(crate::environment::MissingCapabilities),
    /// The kernel exposes no BTF, which CO-RE programs need.
    #[error(
        "kernel BTF not found at {path}: lockscope needs a kernel built with \
         CONFIG_DEBUG_INFO_BTF=y"
    )]
    NoKernelBtf {
        /// Where BTF was looked for.
        path: String,
    },
    /// The pid to attach to does not exist.
    #[error("no process with pid {0}")]
    NoSuchProcess(u32),
    /// The cgroup to record is not a cgroup v2 this host has.
    #[error("cannot record cgroup `{cgroup}`: {reason}")]
    Cgroup {
        /// The cgroup as given.
        cgroup: String,
        /// Why (`no such cgroup in the v2 hierarchy mounted at /sys/fs/cgroup`).
        reason: String,
    },
    /// No process was given to record.
    #[error("no process to record")]
    NoTargets,
    /// The command line to launch is empty.
    #[error("no command to launch")]
    EmptyCommand,
    /// The command could not be started.
    #[error("failed to start `{command}`")]
    Launch {
        /// `argv[0]` of the command.
        command: String,
        /// Why (from fork, or errno of the failed exec).
        source: io::Error,
    },
    /// A probe name is not in the catalog (every probe of the catalog has a loader here).
    #[error(transparent)]
    UnknownProbe(#[from] lockscope_probes::catalog::UnknownProbe),
    /// A `--syscalls` name is not an x86_64 system call.
    #[error("unknown system call `{name}`")]
    UnknownSyscall {
        /// The name asked for.
        name: String,
    },
    /// The BPF object could not be opened or loaded into the kernel.
    #[error("failed to load BPF object `{object}`{}", reason_suffix(.reason))]
    Load {
        /// Object name (`futex`).
        object: &'static str,
        /// What the verifier or libbpf said, when it said something.
        reason: Option<String>,
        /// libbpf's error.
        source: libbpf_rs::Error,
    },
    /// Not one of the requested probes could be loaded and attached.
    #[error("no probe attached: {reasons}")]
    NothingAttached {
        /// Each probe with why it failed, `; `-separated.
        reasons: String,
    },
    /// A BPF program could not be attached to its hook.
    #[error("failed to attach `{hook}`")]
    Attach {
        /// Kernel hook (`sys_enter`).
        hook: &'static str,
        /// libbpf's error (for the fallback hook when there was one).
        source: libbpf_rs::Error,
    },
    /// A BPF map could not be read or written.
    #[error("failed to access BPF map `{map}`")]
    Map {
        /// Map name (`waits`).
        map: &'static str,
        /// libbpf's error.
        source: libbpf_rs::Error,
    },
    /// A file or system call needed by the recorder failed.
    #[error("failed to {action}")]
    Io {
        /// What was being done (``read `/proc/self/status` ``).
        action: String,
        /// The underlying error.
        source: io::Error,
    },
}

/// ` (reason)`, or nothing.
fn reason_suffix(reason: &Option<String>) -> String {
    reason
        .as_ref()
        .map(|reason| format!(" ({reason})"))
        .unwrap_or_default()
}

impl Error {
    /// An [`Error::Io`] for `action`.
    pub(crate) fn io(action: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            action: action.into(),
            source,
        }
    }
}

/// Why one probe of a recording could not be loaded or attached. The recording goes on without
/// it, and the profile keeps this error's text as the probe's failure
/// ([`lockscope_probes::AttachStatus::Failed`]), so each message carries its cause in itself:
/// the profile names the probe (`probe `offcpu` failed to attach (REASON)`), the message does
/// not repeat it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    /// The kernel lacks what the probe hooks.
    #[error("absent: {0}")]
    Absent(String),
    /// Its BPF object was refused: the verifier's or libbpf's last word, else libbpf's error.
    #[error("failed to load: {}", .reason.clone().unwrap_or_else(|| .source.to_string()))]
    Load {
        /// What the verifier or libbpf logged, when it said why.
        reason: Option<String>,
        /// libbpf's error.
        source: libbpf_rs::Error,
    },
    /// A hook refused one of its programs.
    #[error("failed to attach `{hook}`: {source}")]
    Attach {
        /// The hook: the program's section (`tp_btf/sched_switch`), or the function a uprobe
        /// goes into (`libc.so.6:pthread_mutex_lock`).
        hook: String,
        /// libbpf's error.
        source: libbpf_rs::Error,
    },
    /// The fail-attach setting named it (tests, or a user checking their monitoring).
    #[error("simulated failure (asked for by the fail-attach setting)")]
    Simulated,
    /// The `cpu` probe's sampling frequency is out of range.
    #[error("sampling frequency {hz} Hz is not between 1 and {max}")]
    Frequency {
        /// The frequency asked for.
        hz: u32,
        /// The highest one taken.
        max: u32,
    },
    /// The list of online CPUs could not be read.
    #[error("failed to read `{path}`: {source}")]
    OnlineCpus {
        /// Its sysfs file.
        path: &'static str,
        /// The I/O error.
        source: io::Error,
    },
    /// The list of online CPUs is not one sysfs writes.
    #[error("unexpected CPU list `{list}` in `{path}`")]
    CpuList {
        /// Its sysfs file.
        path: &'static str,
        /// What it holds, trimmed.
        list: String,
    },
    /// The `cpu` probe's perf event of one CPU could not be opened.
    #[error("failed to open the cpu-clock event of CPU {cpu}: {source}")]
    OpenCpuClock {
        /// The CPU.
        cpu: u32,
        /// perf_event_open's error.
        source: io::Error,
    },
    /// The `cpu` probe's program could not be attached to one CPU's perf event.
    #[error("failed to attach to the cpu-clock event of CPU {cpu}: {source}")]
    AttachCpuClock {
        /// The CPU.
        cpu: u32,
        /// libbpf's error.
        source: libbpf_rs::Error,
    },
    /// The `syscall` probe's filter map could not be written.
    #[error("failed to set the syscall filter: {0}")]
    SyscallFilter(libbpf_rs::Error),
    /// A backend error, with its causes (`: `-separated).
    #[error("{}", crate::probe::error_chain(.0))]
    Backend(#[from] Error),
}
