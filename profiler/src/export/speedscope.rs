//! `lockscope export --format speedscope`: a profile in speedscope's JSON file format
//! (`https://www.speedscope.app/file-format-schema.json`), for the speedscope viewer and the
//! tools that read its files.
//!
//! The document has two sampled profiles over the same shared frames: `wait time` (unit
//! `nanoseconds`, weights are total wait times) and `waits` (unit `none`, weights are numbers of
//! waits), so the viewer can switch between them. An imported capture's are named for what it
//! measures ([`Measure`]): `CPU time` and `samples` for sampled CPU time, and one profile,
//! `events` or `samples`, for bare counts. Each sample is one folded stack of
//! [`crate::analysis::fold`] (thread name first, then the frames root to leaf, the order speedscope wants),
//! so speedscope shows the same stacks as the flamegraph. `docs/EXPORTS.md` has an example.

use super::ExportError;
use crate::analysis::fold::{check_probe, folded_lines, FoldOptions};
use crate::analysis::measure::{Measure, Weight};
use crate::render::WriteError;
use lockscope_probes::Profile;
use serde::Serialize;
use std::collections::HashMap;

/// The schema URL speedscope files name.
pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

#[derive(Serialize)]
struct File {
    #[serde(rename = "$schema")]
    schema: &'static str,
    shared: Shared,
    profiles: Vec<SampledProfile>,
    name: String,
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: usize,
    exporter: String,
}

#[derive(Serialize)]
struct Shared {
    frames: Vec<FrameRef>,
}

#[derive(Serialize)]
struct FrameRef {
    name: String,
}

#[derive(Serialize)]
struct SampledProfile {
    #[serde(rename = "type")]
    kind: &'static str,
    name: String,
    unit: &'static str,
    #[serde(rename = "startValue")]
    start_value: u64,
    #[serde(rename = "endValue")]
    end_value: u64,
    samples: Vec<Vec<usize>>,
    weights: Vec<u64>,
}

/// Writes `profile` as a speedscope JSON document; `fold` selects the probe and kernel frames
/// (its weight is ignored: both weights are written).
pub fn write_speedscope(
    profile: &Profile,
    fold: &FoldOptions,
    out: &mut dyn std::io::Write,
) -> Result<(), ExportError> {
    check_probe(profile, fold)?;
    let mut frames: Vec<FrameRef> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut profiles = Vec::new();
    // Imported samples are named for what they measure; bare counts have no time profile.
    let kinds: &[(Weight, &str, &str)] = match Measure::of(profile, fold) {
        Measure::Waits => &[
            (Weight::Nanoseconds, "wait time", "nanoseconds"),
            (Weight::Count, "waits", "none"),
        ],
        Measure::OnCpu => &[
            (Weight::Nanoseconds, "CPU time", "nanoseconds"),
            (Weight::Count, "samples", "none"),
        ],
        Measure::Holds => &[
            (Weight::Nanoseconds, "time held", "nanoseconds"),
            (Weight::Count, "holds", "none"),
        ],
        Measure::Calls => &[
            (Weight::Nanoseconds, "time in calls", "nanoseconds"),
            (Weight::Count, "calls", "none"),
        ],
        Measure::Events => &[(Weight::Count, "events", "none")],
        Measure::Samples => &[(Weight::Count, "samples", "none")],
    };
    for &(weight, name, unit) in kinds {
        let mut options = fold.clone();
        options.weight = weight;
        let mut samples = Vec::new();
        let mut weights = Vec::new();
        for line in folded_lines(profile, &options) {
            let Some((stack, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let value: u64 = value.parse().map_err(|source| ExportError::FoldedValue {
                line: line.clone(),
                source,
            })?;
            let stack = stack
                .split(';')
                .map(|frame| {
                    *index.entry(frame.to_string()).or_insert_with(|| {
                        frames.push(FrameRef {
                            name: frame.to_string(),
                        });
                        frames.len() - 1
                    })
                })
                .collect();
            samples.push(stack);
            weights.push(value);
        }
        profiles.push(SampledProfile {
            kind: "sampled",
            name: name.to_string(),
            unit,
            start_value: 0,
            end_value: weights.iter().sum(),
            samples,
            weights,
        });
    }
    let meta = &profile.metadata;
    let file = File {
        schema: SCHEMA,
        shared: Shared { frames },
        profiles,
        name: match Measure::of(profile, fold) {
            Measure::Waits | Measure::Holds | Measure::Calls => format!(
                "lockscope: {} of `{}` (pid {})",
                Measure::of(profile, fold).noun(2),
                meta.target.command.join(" "),
                meta.target.pid
            ),
            // The `cpu` probe's samples of a recorded target.
            Measure::OnCpu if !meta.target.command.is_empty() => format!(
                "lockscope: CPU time of `{}` (pid {})",
                meta.target.command.join(" "),
                meta.target.pid
            ),
            measure => format!("lockscope: {}, {}", measure.noun(2), meta.end_reason),
        },
        active_profile_index: 0,
        exporter: format!("lockscope {}", env!("CARGO_PKG_VERSION")),
    };
    const WHAT: &str = "the speedscope JSON";
    serde_json::to_writer(&mut *out, &file).map_err(WriteError::json(WHAT))?;
    writeln!(out).map_err(WriteError::io(WHAT))?;
    Ok(())
}
