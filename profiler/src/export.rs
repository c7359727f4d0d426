//! `lockscope export`: a profile in a format other tools read.
//!
//! - [`ExportFormat::Folded`]: the folded stacks of [`crate::fold`], one per line, for
//!   `flamegraph.pl`, inferno, speedscope and friends.
//! - [`ExportFormat::Json`]: the profile itself as pretty-printed JSON, the same document a `.lsp`
//!   file holds gzip-compressed (`docs/FORMAT.md`), so nothing is lost. With a probe filter, only
//!   that probe's records are kept, with the threads and stacks they refer to (stack ids are
//!   renumbered); the metadata is unchanged. For aggregated, ranked data use
//!   `lockscope report --json` instead (`docs/REPORT-JSON.md`).

use crate::fold::{check_probe, folded_lines, selects, FoldOptions};
use anyhow::Context;
use lockscope_probes::{Profile, StackId};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

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
pub fn filter_profile(profile: &Profile, fold: &FoldOptions) -> Profile {
    if fold.probe.is_none() {
        return profile.clone();
    }
    let mut renumbered: BTreeMap<StackId, StackId> = BTreeMap::new();
    let mut stacks = Vec::new();
    let mut waits = Vec::new();
    for record in profile.waits.iter().filter(|r| selects(fold, r)) {
        let mut record = record.clone();
        for id in [&mut record.user_stack, &mut record.kernel_stack] {
            *id = id.and_then(|old| {
                let stack = profile.stacks.get(old as usize)?;
                Some(*renumbered.entry(old).or_insert_with(|| {
                    stacks.push(stack.clone());
                    (stacks.len() - 1) as StackId
                }))
            });
        }
        waits.push(record);
    }
    let threads = profile
        .threads
        .iter()
        .filter(|t| waits.iter().any(|w| w.pid == t.pid && w.tid == t.tid))
        .cloned()
        .collect();
    // Per-thread times are not stack-based: they go with the probe that measures them. Wakeups
    // refer to stacks this filter renumbers, so a filtered export leaves them out.
    let thread_times = if fold.probe.as_deref() == Some("offcpu") {
        profile.thread_times.clone()
    } else {
        Vec::new()
    };
    Profile {
        metadata: profile.metadata.clone(),
        threads,
        stacks,
        waits,
        thread_times,
        wakeups: Vec::new(),
    }
}

/// Writes `profile` to `out` in `format`; `fold` selects the probe (both formats) and the weight
/// and kernel frames (folded only).
pub fn write_export(
    profile: &Profile,
    format: ExportFormat,
    fold: &FoldOptions,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    check_probe(profile, fold).map_err(anyhow::Error::msg)?;
    match format {
        ExportFormat::Folded => {
            for line in folded_lines(profile, fold) {
                writeln!(out, "{line}").context("failed to write folded stacks")?;
            }
        }
        ExportFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &filter_profile(profile, fold))
                .context("failed to write the profile as JSON")?;
            writeln!(out).context("failed to write the profile as JSON")?;
        }
    }
    out.flush().context("failed to flush the export")
}
