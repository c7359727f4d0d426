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
        /// argv[0] of the command.
        command: String,
        /// Why (from fork, or errno of the failed exec).
        source: io::Error,
    },
    /// A probe name is not in the catalog or not implemented by this backend.
    #[error("unknown probe `{name}` (the eBPF backend provides: {known})")]
    UnknownProbe {
        /// The name asked for.
        name: String,
        /// Names this backend knows, comma-separated.
        known: String,
    },
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
