//! `lockscope why`: the causes of the analysed threads' wait time, best first, from the bottleneck
//! analysis a recording with the `waitfor` probe holds (`--probes bottleneck`).
//!
//! Each [`lockscope_probes::bottleneck::Blame`] record says where some of a thread's waiting ended:
//! on a CPU, waiting for a CPU, asleep in something outside the program, in a cycle. This module
//! turns them into causes a person can act on:
//!
//! 1. **which threads**: by default the groups of threads that did the work: threads that wait
//!    on each other are one group (idle consumers belong with the busy supplier they wait for),
//!    and the groups whose CPU time is at least a tenth of the busiest group's are analysed
//!    (`select::working_threads`): throughput is the work they do, and a group that only sleeps
//!    holds none back (a dozen background threads parked on their own lock can have the most
//!    wait time and no effect on throughput); `--threads` asks about any threads;
//! 2. **what kind**: a root on a CPU is `cpu`, one waiting for a CPU `cpu-saturation` (or
//!    `wakeup-latency` when the CPU it got was idle until then), one asleep
//!    in something outside the program `sleep` or `io` (by its system call and kernel stack), or
//!    **idle** when the program was waiting for work: a wait the thread itself slept without any
//!    other thread of the program involved (a client, a timer), unless other threads waited on
//!    that very sleep, and every chain that ends in an outside input (`classify::classify`);
//! 3. **which cause**: records of one kind, root stack, call and sleeping kernel lock are one
//!    cause, whatever thread was the root (waiting for a CPU, a cycle and what the analysis
//!    could not follow are one cause each, wherever the threads were, and one more under each
//!    kernel lock); a record's kernel lock is the root's sleep on one, else the waiting
//!    thread's, which also holds for its wait for a CPU right after that sleep (the lock's
//!    release woke it: `cause::record_lock`); its share is of the analysed threads' wall time,
//!    and it lists the waits it explains (site, kind, lock word) and one chain that leads there.
//!
//! One [`Why`] value renders as text ([`Why::to_text`]) and JSON (`docs/WHY-JSON.md`, schema
//! version [`WHY_JSON_VERSION`]).
//!
//! One file per job: this one holds the options, the errors and the shared constants; `model`
//! the [`Why`] value and its parts; `build` [`Why::build`], which groups the records into
//! causes; `select` the analysed threads (1); `classify` the kind of a record's root (2);
//! `cause` one cause summed from its records (3); `stacks` how stacks are named; `text` the
//! text; `compare` and `compare_text` two recordings' causes compared (`why BASE OTHER`).

mod build;
mod cause;
mod classify;
mod compare;
mod compare_table;
mod compare_text;
mod model;
mod select;
mod spin;
mod stacks;
mod text;

pub use compare::{
    Basis, CauseChange, CauseSide, ChangeKind, ChangeStatus, LockPart, WhyDiff, WhyDiffError,
    WhyDiffOptions, WHY_DIFF_JSON_VERSION,
};
pub use compare_table::{explains_text, share_text, ChangeRow, ChangeTable, RestRow, Signed};
use lockscope_probes::catalog;
pub use model::{
    Analysed, Cause, CauseKind, Coverage, GroupRow, Header, HopRow, KernelLock, NamedTime, Site,
    StackShare, Unexplained, Why, WorkingWaited,
};
use thiserror::Error;

/// Version of the JSON schema (`docs/WHY-JSON.md`); bumped on incompatible changes.
pub const WHY_JSON_VERSION: u32 = 1;

/// By default, the groups of threads that ran at least this share of the busiest group's CPU
/// time are analysed (`select::working_threads`).
pub const WORKING_SHARE: f64 = 0.1;

/// Why there is no answer.
#[derive(Debug, Error)]
pub enum WhyError {
    /// The profile was recorded without the `waitfor` probe.
    #[error(
        "this profile has no bottleneck analysis: record it with `--probes {}` (or add `{}` to its \
         probes)",
        catalog::BOTTLENECK.name,
        catalog::WAITFOR.name
    )]
    NoBottleneck,
    /// A DTrace profile without the bottleneck analysis: recorded without `waitfor`, imported, or
    /// from macOS, where the DTrace backend cannot record it.
    #[error("this profile has no bottleneck analysis: {}", dtrace_hint(.0))]
    NoBottleneckDtrace(String),
    /// `--threads` matched none of the profile's threads.
    #[error("no thread matches `{0}` (the profile's threads: {1})")]
    NoThreads(String, String),
    /// `--threads` is not a valid pattern.
    #[error("invalid thread pattern `{0}`: {1}")]
    BadPattern(String, String),
}

/// What a DTrace profile of `os` lacks for `why`, and what to record.
fn dtrace_hint(os: &str) -> String {
    if os == "macos" {
        format!(
            "the DTrace backend does not record one on macOS ({}); record on illumos, FreeBSD or \
             Linux (DTrace for Linux) with `--probes {}`, or with the eBPF backend",
            lockscope_dtrace::catalog::WAIT_FOR_MISSING_MACOS,
            catalog::BOTTLENECK.name
        )
    } else {
        format!(
            "record it with `--probes {}` (the DTrace backend streams who woke each sleeping \
             thread on illumos, FreeBSD and Linux), or add `{}` to its probes",
            catalog::BOTTLENECK.name,
            catalog::WAITFOR.name
        )
    }
}

/// What to explain and how.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WhyOptions {
    /// Thread names to analyse, comma-separated globs (`*`, `?`) or thread ids; `None`: the
    /// groups that did the work (`select::working_threads`). Default: `None`.
    pub threads: Option<String>,
    /// Only waits whose site (the waiting thread's user stack) has a frame containing this.
    /// Default: `None`.
    pub site: Option<String>,
    /// Causes shown, best first; `0` shows all. Default: 5.
    pub top: usize,
    /// Write JSON instead of text. Default: `false`.
    pub json: bool,
}

impl Default for WhyOptions {
    fn default() -> Self {
        WhyOptions {
            threads: None,
            site: None,
            top: 5,
            json: false,
        }
    }
}
