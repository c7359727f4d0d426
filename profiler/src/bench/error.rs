//! Why the suite could not run ([`BenchError`], naming the benchmark), why one run of a
//! benchmark failed ([`RunError`]), and why a bench JSON file could not be read (writing one
//! fails with [`WriteError`](crate::render::WriteError), as every writer does).

use std::io;
use std::path::PathBuf;

/// Why `lockscope bench` could not run, or a bench JSON file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// `--only` names a benchmark the suite does not have.
    #[error(
        "unknown benchmark `{name}`; known benchmarks: {}",
        super::benchmark_names().join(", ")
    )]
    UnknownBenchmark {
        /// The name given.
        name: String,
    },
    /// A thread count outside 1 to [`MAX_THREADS`](super::MAX_THREADS).
    #[error(
        "invalid thread count {count}: thread counts must be between 1 and {}",
        super::MAX_THREADS
    )]
    InvalidThreadCount {
        /// The count given.
        count: u32,
    },
    /// The latency benchmarks' scratch file could not be created.
    #[error("failed to create scratch file `{}`", .path.display())]
    ScratchFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The scratch file's path cannot be handed to libc.
    #[error("scratch path `{}` contains a NUL byte", .path.display())]
    ScratchPath {
        /// The path.
        path: PathBuf,
        /// Where the NUL byte is.
        #[source]
        source: std::ffi::NulError,
    },
    /// A benchmark failed.
    #[error(
        "benchmark `{name}`{} failed",
        .threads.map(|n| format!(" with {n} threads")).unwrap_or_default()
    )]
    Failed {
        /// The benchmark.
        name: &'static str,
        /// The thread count of a thread-scaling test's run.
        threads: Option<u32>,
        /// Why.
        #[source]
        source: RunError,
    },
    /// A benchmark measured no valid sample.
    #[error("benchmark `{name}` gave no valid samples")]
    NoValidSamples {
        /// The benchmark.
        name: &'static str,
    },
    /// A bench JSON file could not be read.
    #[error("failed to read `{}`", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The file is not JSON.
    #[error("`{}` is not JSON", .path.display())]
    NotJson {
        /// The file.
        path: PathBuf,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },
    /// The file is JSON, but not bench JSON.
    #[error(
        "`{}` is not lockscope bench JSON (it has no \"format\": \"{}\"); write one with \
         `lockscope bench --json`",
        .path.display(),
        super::FORMAT
    )]
    NotBenchJson {
        /// The file.
        path: PathBuf,
    },
    /// Bench JSON without a schema version.
    #[error("`{}` has no schema_version", .path.display())]
    NoSchemaVersion {
        /// The file.
        path: PathBuf,
    },
    /// Bench JSON written by a newer lockscope.
    #[error(
        "`{}` has bench schema version {version}, newer than this lockscope reads ({}); use a \
         newer lockscope",
        .path.display(),
        super::SCHEMA_VERSION
    )]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        version: u64,
    },
    /// Bench JSON whose fields are not the schema's.
    #[error("`{}` is malformed bench JSON", .path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },
}

/// Why one run of a benchmark failed ([`BenchError::Failed`] names the benchmark).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// A system call failed: ``failed to `fork` `` and the OS error.
    #[error("failed to `{call}`")]
    Call {
        /// The call, with what it was on (`read /dev/zero`).
        call: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A file could not be opened.
    #[error("failed to open {file}")]
    Open {
        /// The file (`` `/dev/zero` ``, `the scratch file for select`).
        file: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A step of a loopback TCP benchmark failed.
    #[error("{step}")]
    Tcp {
        /// The step, as it failed (`cannot connect to 127.0.0.1`, `accept failed`).
        step: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A thread the benchmark needs could not be started.
    #[error("failed to spawn {thread}")]
    Spawn {
        /// The thread (`a thread`, `worker thread 3`).
        thread: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The thread the benchmark runs in (named after it) could not be started.
    #[error("failed to start the benchmark thread")]
    BenchmarkThread(#[source] io::Error),
    /// A thread of the benchmark panicked.
    #[error("{thread} panicked")]
    Panicked {
        /// The thread (`the partner thread`, `a worker thread`).
        thread: &'static str,
    },
    /// A child process exited with a status other than 0.
    #[error("{child} exited with status {status}")]
    ChildExited {
        /// The child (`ring member`, `` `/bin/true` ``).
        child: String,
        /// Its exit status.
        status: i32,
    },
    /// A child process was killed by a signal.
    #[error("{child} was killed by signal {signal}")]
    ChildKilled {
        /// The child.
        child: String,
        /// The signal.
        signal: i32,
    },
    /// A child process ended in a way `waitpid` does not name.
    #[error("{child} ended with wait status {status:#x}")]
    ChildEnded {
        /// The child.
        child: String,
        /// The wait status.
        status: i32,
    },
    /// None of the places a program may be has it.
    #[error("none of {} exists", .candidates.join(", "))]
    NoProgram {
        /// The places looked at.
        candidates: Vec<String>,
    },
    /// More files open than `select()`'s fd_set holds.
    #[error(
        "fd {fd} does not fit in select()'s fd_set (FD_SETSIZE {})",
        libc::FD_SETSIZE
    )]
    FdSetTooSmall {
        /// The highest fd.
        fd: i32,
    },
    /// Signals raised but not caught.
    #[error("raised SIGUSR1 {raised} times but caught it {caught} times (is it blocked?)")]
    SignalsLost {
        /// Signals raised.
        raised: u64,
        /// Signals caught.
        caught: u64,
    },
    /// The ring of processes passed back something other than the byte that ends it.
    #[error("the ring returned a byte other than the quit byte")]
    RingByte,
    /// `sched_yield()` did not switch threads (another scheduler policy), so its time is not a
    /// switch's.
    #[error(
        "sched_yield() did not switch between the two threads ({partner_yields} partner yields \
         for {iterations})"
    )]
    YieldDidNotSwitch {
        /// The partner thread's yields.
        partner_yields: u64,
        /// The timed thread's yields.
        iterations: u64,
    },
    /// A scaling repetition took no time to measure operations per second by.
    #[error("a repetition took no measurable time")]
    NoTime,
}

impl RunError {
    /// The last OS error, with the `call` that failed: ``failed to `fork`: Resource temporarily
    /// unavailable``.
    pub(crate) fn last_os_error(call: &'static str) -> RunError {
        RunError::Call {
            call,
            source: io::Error::last_os_error(),
        }
    }

    /// A [`RunError::Spawn`] of `a thread`, to `map_err` a spawn's error with.
    pub(crate) fn spawn(source: io::Error) -> RunError {
        RunError::Spawn {
            thread: "a thread".to_string(),
            source,
        }
    }

    /// A [`RunError::Tcp`] of `step`, to `map_err` a socket's error with.
    pub(crate) fn tcp(step: &'static str) -> impl FnOnce(io::Error) -> RunError {
        move |source| RunError::Tcp { step, source }
    }
}
