//! The diff as one typed value ([`Diff`]): `lockscope diff --json` writes it ([`write_diff_json`],
//! schema in `docs/DIFF.md`) and `lockscope html` draws its comparison tables from its fields.

use super::rows::{grouped, rank_by_change, Records, SideRow};
use super::{diff_measure, mismatches, DiffError, DiffOptions, Normalization};
use crate::analysis::canonical::{canonical_stack, site_depth};
use crate::analysis::measure::Measure;
use crate::analysis::processes::{command_groups, command_of};
use crate::render::WriteError;
use lockscope_probes::{Profile, WaitKind};
use serde::Serialize;
use std::collections::BTreeMap;

/// Version of the JSON diff schema (`docs/DIFF.md`); bumped on incompatible changes.
pub const DIFF_JSON_VERSION: u32 = 1;

// The diff model. Field names are the JSON schema: keep docs/DIFF.md in step.

/// Two profiles compared: both sides, the normalization, the warnings, per kind, per command
/// and per canonical stack.
#[derive(Serialize)]
pub(crate) struct Diff {
    pub(crate) schema: &'static str,
    pub(crate) version: u32,
    pub(crate) a: DiffSide,
    pub(crate) b: DiffSide,
    pub(crate) normalization: DiffNormalization,
    pub(crate) measure: &'static str,
    pub(crate) rates: bool,
    pub(crate) comparable: bool,
    pub(crate) warnings: Vec<String>,
    pub(crate) top: usize,
    pub(crate) by_kind: Vec<KindDiff>,
    /// Per command, when either side recorded several processes (matched by command: pids
    /// differ between recordings).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) by_command: Vec<CommandDiff>,
    pub(crate) stacks_total: usize,
    pub(crate) stacks: Vec<StackDiff>,
}

/// One side of a diff: its profile's target, host and totals.
#[derive(Serialize)]
pub(crate) struct DiffSide {
    pub(crate) label: String,
    pub(crate) path: String,
    pub(crate) command: Vec<String>,
    pub(crate) pid: u32,
    pub(crate) backend: String,
    pub(crate) os: String,
    pub(crate) kernel_release: String,
    pub(crate) start_unix_ns: u64,
    pub(crate) duration_ns: u64,
    /// Its waits and their time, as every view counts them (`classified.waits`, `wait_ns`).
    pub(crate) waits: u64,
    pub(crate) total_ns: u64,
    /// Its waits by role and its CPU saturation, the report's `classified` (absent for imported
    /// captures).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) classified: Option<crate::report::Classified>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) operations: Option<u64>,
}

/// How the sides' values are made comparable, and their unit.
#[derive(Serialize)]
pub(crate) struct DiffNormalization {
    pub(crate) mode: &'static str,
    pub(crate) unit: &'static str,
}

/// A row's values on one side.
#[derive(Serialize)]
pub(crate) struct SideValues {
    pub(crate) count: u64,
    pub(crate) total_ns: u64,
    pub(crate) mean_ns: u64,
    pub(crate) max_ns: u64,
    pub(crate) normalized: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) avg_threads: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) share_of_thread_time: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) count_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total_ns_per_s: Option<u64>,
}

/// A row's change, B − A.
#[derive(Serialize)]
pub(crate) struct Delta {
    pub(crate) count: i128,
    pub(crate) total_ns: i128,
    pub(crate) normalized: i128,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) count_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total_ns_per_s: Option<i128>,
}

/// A wait kind on both sides.
#[derive(Serialize)]
pub(crate) struct KindDiff {
    pub(crate) kind: WaitKind,
    pub(crate) a: SideValues,
    pub(crate) b: SideValues,
    pub(crate) delta: Delta,
}

/// A command's processes on both sides.
#[derive(Serialize)]
pub(crate) struct CommandDiff {
    pub(crate) command: String,
    /// Processes of this command in A's and B's process tables.
    pub(crate) processes: [usize; 2],
    pub(crate) a: SideValues,
    pub(crate) b: SideValues,
    pub(crate) delta: Delta,
}

/// A canonical stack on both sides.
#[derive(Serialize)]
pub(crate) struct StackDiff {
    pub(crate) rank: usize,
    pub(crate) stack: String,
    pub(crate) frames: Vec<String>,
    /// True when its records are intervals of threads waiting for a CPU (CPU saturation), not
    /// waits: counted in no wait total.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) cpu_saturation: bool,
    pub(crate) a: SideValues,
    pub(crate) b: SideValues,
    pub(crate) delta: Delta,
}

/// Rounds a rate to 4 decimals, as shares are rounded in the JSON report.
fn round4(value: f64) -> f64 {
    (value * 1e4).round() / 1e4
}

/// True when both sides have a duration and the durations differ: only then are per-second
/// rates printed next to the raw totals.
fn rates_apply(a: &Profile, b: &Profile) -> bool {
    let (da, db) = (a.metadata.duration_ns, b.metadata.duration_ns);
    da > 0 && db > 0 && da != db
}

fn side_values(row: &SideRow, profile: &Profile, rates: bool) -> SideValues {
    let s = &row.stats;
    let seconds = profile.metadata.duration_ns as f64 / 1e9;
    SideValues {
        count: s.count,
        total_ns: s.total_ns,
        mean_ns: s.mean_ns(),
        max_ns: s.max_ns,
        normalized: row.normalized,
        avg_threads: row.avg_threads.map(round4),
        share_of_thread_time: row.share_of_thread_time,
        count_per_s: rates.then(|| round4(s.count as f64 / seconds)),
        total_ns_per_s: rates.then(|| (s.total_ns as f64 / seconds).round() as u64),
    }
}

/// B - A; the count rate's delta comes from the unrounded rates.
fn delta_of(a: &SideValues, b: &SideValues, seconds: (f64, f64)) -> Delta {
    Delta {
        count: b.count as i128 - a.count as i128,
        total_ns: b.total_ns as i128 - a.total_ns as i128,
        normalized: b.normalized as i128 - a.normalized as i128,
        count_per_s: a
            .count_per_s
            .zip(b.count_per_s)
            .map(|_| round4(b.count as f64 / seconds.1 - a.count as f64 / seconds.0)),
        total_ns_per_s: a
            .total_ns_per_s
            .zip(b.total_ns_per_s)
            .map(|(ra, rb)| rb as i128 - ra as i128),
    }
}

fn diff_side(label: &str, path: &str, profile: &Profile, operations: Option<u64>) -> DiffSide {
    let m = &profile.metadata;
    let classified = crate::report::Classified::of(profile);
    let measure = Measure::of_records(&profile.waits);
    DiffSide {
        label: label.to_string(),
        path: path.to_string(),
        command: m.target.command.clone(),
        pid: m.target.pid,
        backend: m.backend.clone(),
        os: m.os.clone(),
        kernel_release: m.kernel_release.clone(),
        start_unix_ns: m.start_unix_ns,
        duration_ns: m.duration_ns,
        waits: classified.waits,
        total_ns: classified.wait_ns,
        classified: (measure == Measure::Waits).then_some(classified),
        operations,
    }
}

/// Writes the diff of A (`paths.0`) and B as one pretty-printed JSON object (schema
/// `lockscope-diff`, version [`DIFF_JSON_VERSION`], documented in `docs/DIFF.md`): both sides,
/// the normalization, the mismatch warnings, per-kind rows and the canonical stacks ranked by
/// absolute normalized change (cut at [`DiffOptions::top`]).
pub fn write_diff_json(
    a: &Profile,
    b: &Profile,
    paths: (&str, &str),
    options: &DiffOptions,
    out: &mut dyn std::io::Write,
) -> Result<(), DiffError> {
    const WHAT: &str = "the diff as JSON";
    let diff = build_diff(a, b, paths, options)?;
    serde_json::to_writer_pretty(&mut *out, &diff).map_err(WriteError::json(WHAT))?;
    writeln!(out).map_err(WriteError::io(WHAT))?;
    Ok(())
}

/// The diff of A (`paths.0`) and B per `options`; an error when its normalization is invalid.
pub(crate) fn build_diff(
    a: &Profile,
    b: &Profile,
    paths: (&str, &str),
    options: &DiffOptions,
) -> Result<Diff, DiffError> {
    options.normalization.validate()?;
    let n = options.normalization;
    let rates = rates_apply(a, b);
    let (ops_a, ops_b) = match n {
        Normalization::PerSecond => (None, None),
        Normalization::PerOperation { ops_a, ops_b } => (Some(ops_a), Some(ops_b)),
    };
    let row = |ra: &SideRow, rb: &SideRow| {
        let va = side_values(ra, a, rates);
        let vb = side_values(rb, b, rates);
        let seconds = (
            a.metadata.duration_ns as f64 / 1e9,
            b.metadata.duration_ns as f64 / 1e9,
        );
        let delta = delta_of(&va, &vb, seconds);
        (va, vb, delta)
    };
    let by_kind = grouped(a, b, n, Records::Waits, |_, r| r.kind)
        .into_iter()
        .map(|(kind, ra, rb)| {
            let (a, b, delta) = row(&ra, &rb);
            KindDiff { kind, a, b, delta }
        })
        .collect();
    let by_command = if super::many_processes(a) || super::many_processes(b) {
        let count = |p: &Profile, command: &str| {
            command_groups(p)
                .into_iter()
                .find(|g| g.command == command)
                .map_or(0, |g| g.processes)
        };
        grouped(a, b, n, Records::Waits, |p, r| command_of(p, r.pid))
            .into_iter()
            .map(|(command, ra, rb)| {
                let (va, vb, delta) = row(&ra, &rb);
                CommandDiff {
                    processes: [count(a, &command), count(b, &command)],
                    command,
                    a: va,
                    b: vb,
                    delta,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let depth = site_depth(a, b);
    let mut stacks = grouped(a, b, n, Records::WaitsAndCpuWaits, |p, r| {
        canonical_stack(p, r, depth)
    });
    // The stacks whose records (on either side) are all intervals of threads waiting for a CPU.
    let mut cpu_only: BTreeMap<String, bool> = BTreeMap::new();
    for p in [a, b] {
        for r in p.counted_waits() {
            let all = cpu_only.entry(canonical_stack(p, r, depth)).or_insert(true);
            *all &= r.is_cpu_wait();
        }
    }
    let stacks_total = rank_by_change(&mut stacks, options.top);
    let stacks = stacks
        .into_iter()
        .enumerate()
        .map(|(i, (stack, ra, rb))| {
            let (a, b, delta) = row(&ra, &rb);
            StackDiff {
                rank: i + 1,
                cpu_saturation: cpu_only.get(&stack).copied().unwrap_or(false),
                frames: stack.split(';').map(str::to_string).collect(),
                stack,
                a,
                b,
                delta,
            }
        })
        .collect();
    let warnings = mismatches(a, b, options);
    Ok(Diff {
        schema: "lockscope-diff",
        version: DIFF_JSON_VERSION,
        a: diff_side(&options.labels.0, paths.0, a, ops_a),
        b: diff_side(&options.labels.1, paths.1, b, ops_b),
        normalization: DiffNormalization {
            mode: match n {
                Normalization::PerSecond => "per-second",
                Normalization::PerOperation { .. } => "per-operation",
            },
            unit: n.unit_of(diff_measure(a, b)),
        },
        measure: diff_measure(a, b).name(),
        rates,
        comparable: warnings.is_empty(),
        warnings,
        top: options.top,
        by_kind,
        by_command,
        stacks_total,
        stacks,
    })
}
