//! `lockscope export`: a profile in a format other tools read.
//!
//! - [`ExportFormat::Folded`]: the folded stacks of [`crate::analysis::fold`], one per line, for
//!   `flamegraph.pl`, inferno, speedscope and friends.
//! - [`ExportFormat::Json`]: the profile itself as pretty-printed JSON, the same document a `.lsp`
//!   file holds gzip-compressed (`docs/FORMAT.md`), so nothing is lost. With a probe filter, only
//!   that probe's records are kept, with the threads and stacks they refer to (stack ids are
//!   renumbered); the `offcpu` filter keeps the per-thread times and the wakeups too
//!   ([`filter_profile`]); the metadata is unchanged. For aggregated, ranked data use
//!   `lockscope report --json` instead (`docs/REPORT-JSON.md`).
//! - [`write_wakeup_chains`]: the wakeups as folded chains (`export --format folded --wakeups`).
//! - [`pprof`]: pprof's `profile.proto`, gzip-compressed (`export --format pprof`).
//! - [`speedscope`]: speedscope's JSON file format (`export --format speedscope`).
//!
//! Every format fails the same ways, with an [`ExportError`].

pub mod pprof;
pub mod speedscope;

use crate::analysis::fold::{check_probe, folded_lines, selects, FoldError, FoldOptions};
use crate::render::WriteError;
use lockscope_probes::catalog;
use lockscope_probes::{Profile, StackId};
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::str::FromStr;

/// Why a profile could not be exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The fold options do not fit the profile (a probe it does not have, the wall-clock view
    /// without its probes' records).
    #[error(transparent)]
    Fold(#[from] FoldError),
    /// The wakeup chains of a profile (or a probe filter) without wakeups.
    #[error(
        "no wakeups to export (they are recorded by --probes {})",
        catalog::OFFCPU.name
    )]
    NoWakeups,
    /// A folded line whose value is not a number (speedscope reads the folded lines back).
    #[error("bad folded value in `{line}`")]
    FoldedValue {
        /// The line.
        line: String,
        /// Why its value does not parse.
        #[source]
        source: std::num::ParseIntError,
    },
    /// The output could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The output could not be flushed.
    #[error("failed to flush the export")]
    Flush(#[source] io::Error),
}

/// Output format of `lockscope export`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExportFormat {
    /// Folded stacks (the default).
    #[default]
    Folded,
    /// The profile as JSON.
    Json,
}

impl ExportFormat {
    /// Name on the command line (`folded`, `json`).
    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Folded => "folded",
            ExportFormat::Json => "json",
        }
    }
}

impl fmt::Display for ExportFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ExportFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "folded" => Ok(ExportFormat::Folded),
            "json" => Ok(ExportFormat::Json),
            other => Err(format!(
                "unknown export format `{other}` (expected `folded` or `json`)"
            )),
        }
    }
}

/// The records of `profile` that pass the probe filter of `fold`, with only the threads and
/// stacks they use. Without a filter the profile is returned unchanged.
///
/// Per-thread times and wakeups are the `offcpu` probe's data: they are kept, with their stacks
/// renumbered like the waits', when the filter is `offcpu`, and left out for any other probe.
pub fn filter_profile(profile: &Profile, fold: &FoldOptions) -> Profile {
    if fold.probe.is_none() {
        return profile.clone();
    }
    let mut renumbered: BTreeMap<StackId, StackId> = BTreeMap::new();
    let mut stacks = Vec::new();
    let mut renumber = |id: &mut Option<StackId>| {
        *id = id.and_then(|old| {
            let stack = profile.stacks.get(old as usize)?;
            Some(*renumbered.entry(old).or_insert_with(|| {
                stacks.push(stack.clone());
                (stacks.len() - 1) as StackId
            }))
        });
    };
    let mut waits = Vec::new();
    for record in profile.waits.iter().filter(|r| selects(fold, r)) {
        let mut record = record.clone();
        renumber(&mut record.user_stack);
        renumber(&mut record.kernel_stack);
        waits.push(record);
    }
    let offcpu = fold.probe.as_deref() == Some(catalog::OFFCPU.name);
    let mut wakeups = Vec::new();
    if offcpu {
        for wakeup in &profile.wakeups {
            let mut wakeup = wakeup.clone();
            renumber(&mut wakeup.user_stack);
            renumber(&mut wakeup.kernel_stack);
            renumber(&mut wakeup.waker_user_stack);
            renumber(&mut wakeup.waker_kernel_stack);
            wakeups.push(wakeup);
        }
    }
    let thread_times = if offcpu {
        profile.thread_times.clone()
    } else {
        Vec::new()
    };
    // Keep every thread something kept refers to: waiters, threads with times, sleepers and
    // wakers (whose names the wakeup chains print).
    let threads = profile
        .threads
        .iter()
        .filter(|t| {
            let is = |pid: u32, tid: u32| t.pid == pid && t.tid == tid;
            waits.iter().any(|w| is(w.pid, w.tid))
                || thread_times.iter().any(|w| is(w.pid, w.tid))
                || wakeups
                    .iter()
                    .any(|w| is(w.pid, w.tid) || is(w.waker_pid, w.waker_tid))
        })
        .cloned()
        .collect();
    Profile {
        metadata: profile.metadata.clone(),
        threads,
        stacks,
        waits,
        thread_times,
        wakeups,
        // The bottleneck analysis is of the whole program, not of one probe's records.
        bottleneck: None,
        // The target set, whatever the records kept: a process recorded stays recorded.
        processes: profile.processes.clone(),
    }
}

/// Writes the wakeup chains of `profile` (the `offcpu` probe's who-woke-whom,
/// [`crate::analysis::wakeup`]) as folded lines, weighted and with kernel frames as `fold` says. A probe
/// filter other than `offcpu` selects no wakeups. Fails when there is nothing to write, so an
/// empty file never passes for a result.
pub fn write_wakeup_chains(
    profile: &Profile,
    fold: &FoldOptions,
    out: &mut dyn std::io::Write,
) -> Result<(), ExportError> {
    check_probe(profile, fold)?;
    let lines = crate::analysis::wakeup::wakeup_lines(&filter_profile(profile, fold), fold);
    if lines.is_empty() {
        return Err(ExportError::NoWakeups);
    }
    for line in lines {
        writeln!(out, "{line}").map_err(WriteError::io("the wakeup chains"))?;
    }
    out.flush().map_err(ExportError::Flush)
}

/// Writes `profile` to `out` in `format`; `fold` selects the probe (both formats) and the weight
/// and kernel frames (folded only).
pub fn write_export(
    profile: &Profile,
    format: ExportFormat,
    fold: &FoldOptions,
    out: &mut dyn std::io::Write,
) -> Result<(), ExportError> {
    check_probe(profile, fold)?;
    if fold.wall {
        crate::analysis::fold::check_wall(profile)?;
    }
    match format {
        ExportFormat::Folded => {
            for line in folded_lines(profile, fold) {
                writeln!(out, "{line}").map_err(WriteError::io("folded stacks"))?;
            }
        }
        ExportFormat::Json => {
            const WHAT: &str = "the profile as JSON";
            serde_json::to_writer_pretty(&mut *out, &filter_profile(profile, fold))
                .map_err(WriteError::json(WHAT))?;
            writeln!(out).map_err(WriteError::io(WHAT))?;
        }
    }
    out.flush().map_err(ExportError::Flush)
}
