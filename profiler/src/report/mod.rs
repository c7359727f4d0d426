//! `lockscope report`: a profile summarized for people (text) or programs (JSON), and the tables
//! of `lockscope html`.
//!
//! All three come from one typed report value (`build_report`; the page shows part of it), so
//! they never disagree. It holds:
//!
//! 1. a header: target command and pid, when and how long, why the recording ended, host, threads
//!    seen, each probe with its attach status, events, how much of the threads' wall time the
//!    probes saw (`report/coverage.rs`, with what to record when they missed most of it), the
//!    sleeps two probes saw and that count once, and loss counters (flagged with `WARNING` when
//!    any is non-zero, since then every total undercounts);
//! 2. totals per wait kind;
//! 3. the top groups by total wait time, grouped by [`GroupBy`], each with count, total, mean,
//!    max, kinds, threads, locks, its heaviest stacks (leaf first) and a log2 histogram in the
//!    layout of DTrace's `quantize()` ([`crate::render::histogram`]).
//!
//! A recording with the `cpu` probe beside wait probes keeps the two apart: everything above is
//! about waits, and the on-CPU samples are CPU time in a section of their own
//! (`report/sections/cpu.rs`), with each thread's CPU time beside its waits under `--by thread`;
//! so are the `syscall` and `lifecycle` probes' time in system calls and the `mutex-hold` probe's
//! holds ([`lockscope_probes::MixedMeasures`]). The
//! `offcpu` probe's intervals of threads waiting for a CPU (run queue, preempted) are CPU
//! saturation, not waits: they have their section too, and are not among the waits above. With
//! the `futex` and `offcpu` probes together, a futex sleep is both probes' record: it counts once,
//! as the futex probe's wait ([`lockscope_probes::SeenTwice`]), in every total, kind and group;
//! with `klock` and `offcpu`, a sleep under a kernel lock counts once, as the klock probe's wait.
//!
//! Times in the text use the convention of [`crate::render::units`]; the JSON keeps raw nanoseconds and
//! is documented in `docs/REPORT-JSON.md` (version [`REPORT_JSON_VERSION`]).
//!
//! One file per job: `model.rs` the report value (its fields are the JSON schema), `build.rs` the
//! value of a profile, `text.rs` the text (its header and top groups in `text/`); `coverage.rs`
//! and `sections/` the header's coverage and the sections, each built and written as text (and a
//! section as HTML tables) where it is defined.

mod build;
mod classified;
mod coverage;
mod model;
pub(crate) mod sections;
mod text;

pub use classified::{waits_only, Classified};
pub use coverage::{quiet_warnings, Activity};
pub(crate) use model::{FrameRow, Group, GroupKey, KindRow, Report};

pub use crate::render::frames::StackStyle;
use crate::render::WriteError;
use lockscope_probes::Profile;
use std::fmt;
use std::str::FromStr;

/// Version of the JSON report schema (`docs/REPORT-JSON.md`); bumped on incompatible changes.
pub const REPORT_JSON_VERSION: u32 = 1;

/// What the top list of a report groups waits by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GroupBy {
    /// User stack and wait kind: where in the code threads waited (the default).
    #[default]
    Stack,
    /// Thread (pid, tid, name): who waited.
    Thread,
    /// Waited-on object address and operation (and pid): what was waited for.
    Lock,
    /// Process (pid, with its command from the profile's process table): which program of a
    /// recording of many.
    Process,
}

impl GroupBy {
    /// Name on the command line and in the JSON (`stack`, `thread`, `lock`).
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Stack => "stack",
            GroupBy::Thread => "thread",
            GroupBy::Lock => "lock",
            GroupBy::Process => "process",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            GroupBy::Stack => "wait sites (stack and kind)",
            GroupBy::Thread => "threads",
            GroupBy::Lock => "locks (object and operation)",
            GroupBy::Process => "processes",
        }
    }
}

impl fmt::Display for GroupBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GroupBy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "stack" => Ok(GroupBy::Stack),
            "thread" => Ok(GroupBy::Thread),
            "lock" => Ok(GroupBy::Lock),
            "process" => Ok(GroupBy::Process),
            other => Err(format!(
                "unknown grouping `{other}` (expected `stack`, `thread`, `lock` or `process`)"
            )),
        }
    }
}

/// How to write a report.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReportOptions {
    /// What the top list groups by. Default: [`GroupBy::Stack`].
    pub group_by: GroupBy,
    /// How many groups to show, heaviest first; `0` shows all. Default: `10`.
    pub top: usize,
    /// Write JSON (`docs/REPORT-JSON.md`) instead of text. Default: `false`.
    pub json: bool,
    /// Show the kernel stack under each user stack (text and JSON). Default: `false`.
    pub show_kernel_stacks: bool,
    /// Only this probe's records (`cpu`: the on-CPU samples alone, ranked by CPU time).
    /// Default: `None`, every probe.
    pub probe: Option<String>,
    /// How the text shows stacks: the program's frames (runtime folded, generics elided, lines
    /// within 100 columns) or every frame whole ([`StackStyle::Full`]). The JSON has every frame
    /// whatever this says. Default: [`StackStyle::Readable`].
    pub stack_style: StackStyle,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            group_by: GroupBy::Stack,
            top: 10,
            json: false,
            show_kernel_stacks: false,
            probe: None,
            stack_style: StackStyle::Readable,
        }
    }
}

/// The report of `profile` per `options` (what it groups by, how many groups, kernel stacks or
/// not, and only `options.probe`'s records when it names one); `options.json` is the writer's.
pub(crate) fn build_report(profile: &Profile, options: &ReportOptions) -> Report {
    match &options.probe {
        Some(probe) => {
            let selected = Profile {
                waits: profile
                    .waits
                    .iter()
                    .filter(|w| &w.probe == probe)
                    .cloned()
                    .collect(),
                ..profile.clone()
            };
            let mut report = Report::build(&selected, options);
            // What the recording saw too little of is the whole recording's, not the probe's.
            report.header.quiet = coverage::Quiet::of(profile);
            report
        }
        None => Report::build(profile, options),
    }
}

/// Writes the report of `profile` to `out`, as text or JSON per `options`.
pub fn write_report(
    profile: &Profile,
    options: &ReportOptions,
    out: &mut dyn std::io::Write,
) -> Result<(), WriteError> {
    const WHAT: &str = "the report";
    let report = build_report(profile, options);
    if options.json {
        serde_json::to_writer_pretty(&mut *out, &report).map_err(WriteError::json(WHAT))?;
        writeln!(out).map_err(WriteError::io(WHAT))?;
    } else {
        out.write_all(report.to_text(options).as_bytes())
            .map_err(WriteError::io(WHAT))?;
    }
    out.flush().map_err(WriteError::io(WHAT))
}
