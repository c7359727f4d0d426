//! `lockscope diff`: two profiles compared frame by frame, as a differential flamegraph and a
//! side-by-side table.
//!
//! Both profiles are first folded into **canonical stacks** ([`crate::analysis::canonical`]:
//! thread groups with digits merged, user frames down to the synchronization entry point, then
//! `[kernel wait]` and the wait kind), so that a DTrace profile from macOS and an eBPF profile
//! from Linux of the same server line up.
//!
//! Values are wait time **normalized** ([`Normalization`]): nanoseconds of wait per second of
//! wall time (the default), or per operation when the load tool's operation counts are given, so
//! that a run twice as long at the same rate diffs to zero.
//!
//! The differential flamegraph is inferno's: [`inferno::differential`] pairs the two folded
//! profiles into `stack before after` lines, widths are B's values (A's with
//! [`DiffOptions::negate`], which swaps the columns and negates inferno's differentials so the
//! colors keep their meaning), red frames grew from A to B and blue ones shrank.
//!
//! The table ([`write_diff_table`]) shows, for each side, the wait kinds, the thread groups and
//! the top sites (canonical stacks, ranked by the absolute change) with count, total, mean,
//! p50/p99 (upper bounds from the log2 histograms), the average threads waiting (wait time over
//! wall time, never a percentage of one clock), the share of thread time (with the `offcpu`
//! probe's per-thread times) and the normalized value. Imported captures ([`Measure`]: sampled
//! CPU time, events, samples) are compared by what they hold and never called waits.
//! Anything that makes the comparison unfair (lost events, different probes, different
//! workloads) is printed as a `WARNING` line at the top ([`mismatches`]), never silently.

use crate::analysis::canonical::{
    canonical_site, canonical_stack, canonical_stacks_at, canonical_thread, site_depth, SiteDepth,
};
use crate::analysis::fold::{Measure, NO_USER_STACK};
use crate::render::units::{format_fraction, format_ns, share};
use anyhow::{bail, Context};
use lockscope_probes::{AttachStatus, Profile, StackWalk, WaitKind, WaitRecord, WaitStats};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// What the records of both sides measure: waits, or (both sides imported captures, `lockscope
/// import`) sampled CPU time, events or samples, which are never called waits.
pub fn diff_measure(a: &Profile, b: &Profile) -> Measure {
    Measure::of_records(a.waits.iter().chain(&b.waits))
}

/// The value compared for `stats`: its time when `measure` is timed (waits, CPU time), else its
/// count (events, samples).
fn measured_value(stats: &WaitStats, measure: Measure) -> u64 {
    if measure.is_timed() {
        stats.total_ns
    } else {
        stats.count
    }
}

/// What a normalized value is of, in words (`wait`, `CPU time`, `events`, `samples`).
fn measured(measure: Measure) -> &'static str {
    match measure {
        Measure::Waits => "wait",
        Measure::OnCpu => "CPU time",
        Measure::Events => "events",
        Measure::Samples => "samples",
    }
}

/// How the two sides' wait times are made comparable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Normalization {
    /// Nanoseconds of wait per second of the recording's wall time (the default).
    #[default]
    PerSecond,
    /// Nanoseconds of wait per operation, given each side's number of operations.
    PerOperation {
        /// Operations done during recording A (at least 1).
        ops_a: u64,
        /// Operations done during recording B (at least 1).
        ops_b: u64,
    },
}

impl Normalization {
    /// The unit of a normalized wait time (`ns/s`, `ns/op`).
    pub fn unit(self) -> &'static str {
        self.unit_of(Measure::Waits)
    }

    /// The unit of a normalized value of what `measure` counts: `ns/s` or `ns/op` for times
    /// (waits, CPU time), `events/s`, `samples/op`... for an imported capture's counts.
    pub fn unit_of(self, measure: Measure) -> &'static str {
        match (self, measure.is_timed(), measure) {
            (Normalization::PerSecond, true, _) => "ns/s",
            (Normalization::PerOperation { .. }, true, _) => "ns/op",
            (Normalization::PerSecond, false, Measure::Events) => "events/s",
            (Normalization::PerOperation { .. }, false, Measure::Events) => "events/op",
            (Normalization::PerSecond, false, _) => "samples/s",
            (Normalization::PerOperation { .. }, false, _) => "samples/op",
        }
    }

    /// Checks the operation counts.
    pub fn validate(self) -> anyhow::Result<()> {
        if let Normalization::PerOperation { ops_a, ops_b } = self {
            if ops_a == 0 || ops_b == 0 {
                bail!("invalid operation counts {ops_a},{ops_b}: both must be at least 1");
            }
        }
        Ok(())
    }

    /// Normalizes `value` (wait nanoseconds, or samples or events for an imported capture)
    /// recorded by side A (`first`) or B of a profile.
    fn apply(self, value: u64, profile: &Profile, first: bool) -> u64 {
        let divisor = match self {
            Normalization::PerSecond => profile.metadata.duration_ns as f64 / 1e9,
            Normalization::PerOperation { ops_a, ops_b } => {
                if first {
                    ops_a as f64
                } else {
                    ops_b as f64
                }
            }
        };
        if divisor <= 0.0 {
            return value;
        }
        (value as f64 / divisor).round() as u64
    }

    fn describe(self, a: &Profile, b: &Profile, measure: Measure) -> String {
        let what = measured(measure);
        match self {
            Normalization::PerSecond => format!(
                "{what} per second of wall time (A {}, B {})",
                format_ns(a.metadata.duration_ns),
                format_ns(b.metadata.duration_ns)
            ),
            Normalization::PerOperation { ops_a, ops_b } => {
                format!("{what} per operation (A {ops_a} ops, B {ops_b} ops)")
            }
        }
    }
}

/// How to compare two profiles.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiffOptions {
    /// How values are normalized. Default: [`Normalization::PerSecond`].
    pub normalization: Normalization,
    /// Top sites shown in the table, ranked by absolute change; `0` shows all. Default: `10`.
    pub top: usize,
    /// Title of the flamegraph. Default: `None`, which names both targets.
    pub title: Option<String>,
    /// Draw widths from A instead of B (inferno's negated differentials), so frames that
    /// vanished in B are visible. Default: `false`.
    pub negate: bool,
    /// Names of the two sides in the table and the graph. Default: `("A", "B")`.
    pub labels: (String, String),
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            normalization: Normalization::PerSecond,
            top: 10,
            title: None,
            negate: false,
            labels: ("A".to_string(), "B".to_string()),
        }
    }
}
/// Normalized folded lines (`stack value`) of one side, sorted, zero values dropped.
fn normalized_lines(
    profile: &Profile,
    normalization: Normalization,
    first: bool,
    depth: SiteDepth,
    measure: Measure,
) -> String {
    let mut text = String::new();
    for (stack, stats) in canonical_stacks_at(profile, depth) {
        let value = normalization.apply(measured_value(&stats, measure), profile, first);
        if value > 0 {
            let _ = writeln!(text, "{stack} {value}");
        }
    }
    text
}

/// The differential folded lines (`stack A B`, normalized, sorted), as inferno's differential
/// mode writes them and its flamegraph reads them.
pub fn differential_lines(
    a: &Profile,
    b: &Profile,
    options: &DiffOptions,
) -> anyhow::Result<Vec<String>> {
    options.normalization.validate()?;
    let depth = site_depth(a, b);
    let measure = diff_measure(a, b);
    let before = normalized_lines(a, options.normalization, true, depth, measure);
    let after = normalized_lines(b, options.normalization, false, depth, measure);
    let mut paired = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        before.as_bytes(),
        after.as_bytes(),
        &mut paired,
    )
    .context("failed to pair the folded stacks")?;
    let text = String::from_utf8(paired).context("paired folded stacks are not UTF-8")?;
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    Ok(lines)
}

/// Writes the differential flamegraph (SVG) of A → B to `out`.
pub fn write_diff_flamegraph(
    a: &Profile,
    b: &Profile,
    options: &DiffOptions,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let mut lines = differential_lines(a, b, options)?;
    if options.negate {
        // inferno draws the second column's widths: swap the columns so they are A's, and negate
        // the differentials so red still means more wait in B (Brendan Gregg's `-n` recipe).
        lines = lines
            .iter()
            .filter_map(|line| {
                let mut parts = line.rsplitn(3, ' ');
                let (after, before, stack) = (parts.next()?, parts.next()?, parts.next()?);
                Some(format!("{stack} {after} {before}"))
            })
            .collect();
    }
    // The drawn widths are the last column (B's, or A's once swapped).
    let drawn_side_empty = lines
        .iter()
        .all(|line| line.rsplit(' ').next().unwrap_or("0") == "0");
    if lines.is_empty() || drawn_side_empty {
        let side = if options.negate {
            &options.labels.0
        } else {
            &options.labels.1
        };
        bail!(
            "profile {side} has no {} to draw (try --negate to draw the other side)",
            diff_measure(a, b).noun(2)
        );
    }
    let mut inferno_options = inferno::flamegraph::Options::default();
    inferno_options.title = options.title.clone().unwrap_or_else(|| {
        format!(
            "lockscope diff: {} → {}",
            short_command(a),
            short_command(b)
        )
    });
    let (drawn, other) = if options.negate {
        (&options.labels.0, &options.labels.1)
    } else {
        (&options.labels.1, &options.labels.0)
    };
    let measure = diff_measure(a, b);
    let mut subtitle = format!(
        "width: {drawn}'s {}; red: more {} in {drawn} than {other}, blue: less",
        options.normalization.describe(a, b, measure),
        measured(measure)
    );
    let warnings = mismatches(a, b, options);
    if !warnings.is_empty() {
        let _ = write!(
            subtitle,
            " (WARNING: {} mismatches, see the table)",
            warnings.len()
        );
    }
    inferno_options.subtitle = Some(subtitle);
    inferno_options.count_name = options.normalization.unit_of(measure).to_string();
    inferno_options.negate_differentials = options.negate;
    inferno_options.hash = true;
    inferno::flamegraph::from_lines(&mut inferno_options, lines.iter().map(String::as_str), out)
        .context("failed to render the differential flamegraph")
}

fn short_command(profile: &Profile) -> String {
    let command = profile.metadata.target.command.join(" ");
    if command.chars().count() > 40 {
        let mut cut: String = command.chars().take(39).collect();
        cut.push('…');
        cut
    } else {
        command
    }
}

/// Probes that delivered data (attached or fell back), sorted.
fn attached_probes(profile: &Profile) -> BTreeSet<String> {
    let mut probes: BTreeSet<String> = profile
        .metadata
        .probes
        .iter()
        .filter(|p| !matches!(p.status, AttachStatus::Failed { .. }))
        .map(|p| p.probe.clone())
        .collect();
    probes.extend(profile.recorded_probes().into_iter().map(str::to_string));
    probes
}

/// The basename of a command's program.
fn program(profile: &Profile) -> Option<&str> {
    let argv0 = profile.metadata.target.command.first()?;
    Some(argv0.rsplit('/').next().unwrap_or(argv0))
}

/// Everything that makes comparing `a` with `b` unfair, one sentence each; empty when the two
/// recordings are comparable.
pub fn mismatches(a: &Profile, b: &Profile, options: &DiffOptions) -> Vec<String> {
    let (la, lb) = (&options.labels.0, &options.labels.1);
    let mut out = Vec::new();
    for (label, p) in [(la, a), (lb, b)] {
        let losses = &p.metadata.losses;
        if losses.lost_events() > 0 {
            out.push(format!(
                "{label} lost {} waits while recording ({} map full, {} dropped): its totals undercount",
                losses.lost_events(),
                losses.map_full,
                losses.dropped
            ));
        }
        let stack_failures = losses.user_stack_failures + losses.kernel_stack_failures;
        if stack_failures > 0 {
            out.push(format!(
                "{label} failed to capture {stack_failures} stacks: those waits fold under `{NO_USER_STACK}`"
            ));
        }
        for probe in &p.metadata.probes {
            if let AttachStatus::Failed { reason } = &probe.status {
                out.push(format!(
                    "{label}: probe `{}` failed to attach ({reason}): its waits are missing",
                    probe.probe
                ));
            }
        }
        if p.metadata.duration_ns == 0 && options.normalization == Normalization::PerSecond {
            out.push(format!(
                "{label} has no recorded duration: per-second values are raw totals"
            ));
        }
    }
    let (wa, wb) = (a.metadata.user_stack_walk(), b.metadata.user_stack_walk());
    if wa != wb {
        let (fp, other) = if wa == StackWalk::FramePointers {
            (la, lb)
        } else {
            (lb, la)
        };
        out.push(format!(
            "stack depth differs by method, not by code: {fp} walked its user stacks by frame \
             pointers (DTrace's ustack()), which stop at the first function built without them \
             (Debian's libc, Rust's default build), {other} unwound them with unwind tables; \
             wait sites are compared at their leaf frame (where the thread entered the kernel) \
             and kind"
        ));
    }
    let (ma, mb) = (Measure::of_records(&a.waits), Measure::of_records(&b.waits));
    if ma != mb && !a.waits.is_empty() && !b.waits.is_empty() {
        out.push(format!(
            "different measures: {la} holds {}, {lb} holds {}: their values are not comparable",
            measured(ma),
            measured(mb)
        ));
    }
    let (pa, pb) = (attached_probes(a), attached_probes(b));
    if pa != pb {
        let list = |s: &BTreeSet<String>| {
            if s.is_empty() {
                "none".to_string()
            } else {
                s.iter().cloned().collect::<Vec<_>>().join(", ")
            }
        };
        out.push(format!(
            "different probes: {la} has {}, {lb} has {}",
            list(&pa),
            list(&pb)
        ));
    }
    let (ca, cb) = (&a.metadata.target.command, &b.metadata.target.command);
    if program(a) != program(b) {
        out.push(format!(
            "different workloads: {la} ran `{}`, {lb} ran `{}`",
            ca.join(" "),
            cb.join(" ")
        ));
    } else if ca[1.min(ca.len())..] != cb[1.min(cb.len())..] {
        out.push(format!(
            "same program, different arguments: {la} ran `{}`, {lb} ran `{}`",
            ca.join(" "),
            cb.join(" ")
        ));
    }
    out
}

/// One row of a side of the table.
#[derive(Clone, Debug, Default)]
struct SideRow {
    stats: WaitStats,
    normalized: u64,
    /// Time over the recording's wall time: average threads waiting (on CPU for sampled CPU
    /// time); `None` for counts (events, samples) and without a duration.
    avg_threads: Option<f64>,
    /// Wait time over the side's thread time (the `offcpu` probe's per-thread wall times
    /// summed), 0 to 1; `None` without them, and for imported captures.
    share_of_thread_time: Option<f64>,
}

/// The threads' wall times summed (each the part of the recording it lived through): the whole
/// that shares of thread time are taken of; `None` without the `offcpu` probe's breakdown.
pub fn thread_time_ns(profile: &Profile) -> Option<u64> {
    let total = profile
        .thread_times
        .iter()
        .fold(0u64, |sum, t| sum.saturating_add(t.wall_ns));
    (total > 0).then_some(total)
}

/// The context one side's rows are computed in.
#[derive(Clone, Copy)]
struct Side<'a> {
    profile: &'a Profile,
    first: bool,
    normalization: Normalization,
    measure: Measure,
}

impl Side<'_> {
    fn row(&self, stats: WaitStats) -> SideRow {
        let normalized = self.normalization.apply(
            measured_value(&stats, self.measure),
            self.profile,
            self.first,
        );
        let wall_ns = self.profile.metadata.duration_ns;
        let avg_threads = (self.measure.is_timed() && wall_ns > 0)
            .then(|| stats.total_ns as f64 / wall_ns as f64);
        let share_of_thread_time = if self.measure == Measure::Waits {
            thread_time_ns(self.profile).map(|whole| share(stats.total_ns, whole))
        } else {
            None
        };
        SideRow {
            stats,
            normalized,
            avg_threads,
            share_of_thread_time,
        }
    }
}

/// Groups each side's records by `key`, returning rows for both sides over the union of keys.
/// Sorts `rows` by absolute normalized change, largest first (ties by key), and cuts them at `top`
/// (0: no cut); returns how many there were before the cut.
fn rank_by_change<K: Ord + Clone>(rows: &mut Vec<(K, SideRow, SideRow)>, top: usize) -> usize {
    rows.sort_by_key(|(key, ra, rb)| {
        (
            Reverse((rb.normalized as i128 - ra.normalized as i128).unsigned_abs()),
            key.clone(),
        )
    });
    let total = rows.len();
    if top > 0 {
        rows.truncate(top);
    }
    total
}

fn grouped<K: Ord + Clone>(
    a: &Profile,
    b: &Profile,
    normalization: Normalization,
    key: impl Fn(&Profile, &WaitRecord) -> K,
) -> Vec<(K, SideRow, SideRow)> {
    let measure = diff_measure(a, b);
    let side = |profile, first| Side {
        profile,
        first,
        normalization,
        measure,
    };
    let (side_a, side_b) = (side(a, true), side(b, false));
    let mut sums: BTreeMap<K, (WaitStats, WaitStats)> = BTreeMap::new();
    for record in &a.waits {
        sums.entry(key(a, record))
            .or_default()
            .0
            .merge(&record.stats);
    }
    for record in &b.waits {
        sums.entry(key(b, record))
            .or_default()
            .1
            .merge(&record.stats);
    }
    sums.into_iter()
        .map(|(k, (sa, sb))| (k, side_a.row(sa), side_b.row(sb)))
        .collect()
}

fn quantile(stats: &WaitStats, q: f64) -> String {
    stats
        .histogram
        .quantile_upper_bound(q)
        .map_or_else(|| "-".to_string(), format_ns)
}

/// A normalized value with its unit: `827 ms/op`, `1.20 s/s`, `3400 samples/s`.
pub(crate) fn format_normalized(value: u64, unit: &str) -> String {
    match unit.strip_prefix("ns/") {
        Some(per) => format!("{}/{per}", format_ns(value)),
        None => format!("{value} {unit}"),
    }
}

/// A signed change with its unit, as [`format_normalized`].
fn signed(value: i128, unit: &str) -> String {
    let sign = if value < 0 { "-" } else { "+" };
    let magnitude = value.unsigned_abs().min(u64::MAX as u128) as u64;
    format!("{sign}{}", format_normalized(magnitude, unit))
}

/// The header of the side rows, aligned with [`write_rows`]: the count column is named for what
/// the records count (`waits`, `samples`, `events`).
fn row_header(measure: Measure) -> String {
    format!(
        "    {:<4} {:>7} {:>10} {:>10} {:>8} {:>8} {:>8} {:>11} {:>12} {:>10}",
        "side",
        measure.noun(2),
        "total",
        "mean",
        "p50≤",
        "p99≤",
        "threads",
        "thread time",
        "normalized",
        "change"
    )
}

fn write_rows(out: &mut String, name: &str, rows: [(&str, &SideRow); 2], unit: &str) {
    let _ = writeln!(out, "  {name}");
    let change = rows[1].1.normalized as i128 - rows[0].1.normalized as i128;
    let timed = unit.starts_with("ns/");
    for (i, (label, row)) in rows.into_iter().enumerate() {
        let s = &row.stats;
        let time = |ns: u64| {
            if timed {
                format_ns(ns)
            } else {
                "-".to_string()
            }
        };
        let _ = write!(
            out,
            "    {label:<4} {:>7} {:>10} {:>10} {:>8} {:>8} {:>8} {:>11} {:>12}",
            s.count,
            time(s.total_ns),
            time(s.mean_ns()),
            if timed { quantile(s, 0.5) } else { "-".into() },
            if timed { quantile(s, 0.99) } else { "-".into() },
            row.avg_threads
                .map_or_else(|| "-".to_string(), |t| format!("{t:.2}")),
            row.share_of_thread_time
                .map_or_else(|| "-".to_string(), format_fraction),
            format_normalized(row.normalized, unit),
        );
        if i == 1 {
            let _ = write!(out, " {:>10}", signed(change, unit));
        }
        out.push('\n');
    }
}

fn describe_side(label: &str, path: &str, p: &Profile) -> String {
    let m = &p.metadata;
    let measure = Measure::of_records(&p.waits);
    let count: u64 = p.waits.iter().map(|w| w.stats.count).sum();
    let target = if measure == Measure::Waits {
        format!("`{}` (pid {})", m.target.command.join(" "), m.target.pid)
    } else {
        // An imported capture has no target: say what it holds.
        format!("imported {}", measured(measure))
    };
    format!(
        "  {label:<4} {path}: {target}, {} {} ({}), {} over {}, {count} {}",
        if m.os.is_empty() { "unknown-os" } else { &m.os },
        m.kernel_release,
        if m.backend.is_empty() {
            "?"
        } else {
            &m.backend
        },
        crate::render::units::format_unix_ns(m.start_unix_ns),
        format_ns(m.duration_ns),
        measure.noun(count)
    )
}

/// The legend of the rows' columns under a block title, in the words of `measure`.
fn columns_legend(measure: Measure, la: &str, lb: &str) -> String {
    let threads = match measure {
        Measure::Waits => {
            "threads: average threads waiting (wait time / wall time); thread time: share of \
             the threads' time (- without the offcpu probe's per-thread times)"
        }
        Measure::OnCpu => "threads: average threads on CPU (CPU time / wall time)",
        Measure::Events | Measure::Samples => "counts only: no times",
    };
    format!("{threads}; change: {lb} - {la}, normalized")
}

/// Writes the side-by-side table of A (`paths.0`) and B to `out`.
pub fn write_diff_table(
    a: &Profile,
    b: &Profile,
    paths: (&str, &str),
    options: &DiffOptions,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    options.normalization.validate()?;
    let n = options.normalization;
    let measure = diff_measure(a, b);
    let (la, lb) = (options.labels.0.as_str(), options.labels.1.as_str());
    let mut text = String::new();
    let _ = writeln!(text, "lockscope diff");
    let _ = writeln!(text, "{}", describe_side(la, paths.0, a));
    let _ = writeln!(text, "{}", describe_side(lb, paths.1, b));
    let _ = writeln!(text, "  normalized as {}", n.describe(a, b, measure));
    let warnings = mismatches(a, b, options);
    if warnings.is_empty() {
        let _ = writeln!(text, "  comparable: same program and probes, nothing lost");
    }
    for warning in &warnings {
        let _ = writeln!(text, "WARNING: {warning}");
    }
    let unit = n.unit_of(measure);
    let what = if measure == Measure::Waits {
        "Wait"
    } else {
        "Sample"
    };

    let _ = writeln!(text, "\n{what} kinds ({})", columns_legend(measure, la, lb));
    let _ = writeln!(text, "{}", row_header(measure));
    for (kind, ra, rb) in grouped(a, b, n, |_, r| r.kind) {
        write_rows(&mut text, kind.name(), [(la, &ra), (lb, &rb)], unit);
    }

    let _ = writeln!(text, "\nThreads (digits in names merged as `*`)");
    let _ = writeln!(text, "{}", row_header(measure));
    for (thread, ra, rb) in grouped(a, b, n, canonical_thread) {
        write_rows(&mut text, &thread, [(la, &ra), (lb, &rb)], unit);
    }

    let depth = site_depth(a, b);
    let mut sites = grouped(a, b, n, |p, r| canonical_site(p, r, depth).join(";"));
    let total_sites = rank_by_change(&mut sites, options.top);
    let _ = writeln!(
        text,
        "\nTop {} of {total_sites} {} sites (canonical stack, root first) by change",
        sites.len(),
        what.to_lowercase()
    );
    let _ = writeln!(text, "{}", row_header(measure));
    for (site, ra, rb) in &sites {
        write_rows(&mut text, site, [(la, ra), (lb, rb)], unit);
    }
    out.write_all(text.as_bytes())
        .context("failed to write the diff table")?;
    Ok(())
}

/// Version of the JSON diff schema (`docs/DIFF.md`); bumped on incompatible changes.
pub const DIFF_JSON_VERSION: u32 = 1;

// The JSON diff model. Field names are the schema: keep docs/DIFF.md in step.

#[derive(Serialize)]
struct DiffJson {
    schema: &'static str,
    version: u32,
    a: SideJson,
    b: SideJson,
    normalization: NormalizationJson,
    measure: &'static str,
    rates: bool,
    comparable: bool,
    warnings: Vec<String>,
    top: usize,
    by_kind: Vec<KindDiffJson>,
    stacks_total: usize,
    stacks: Vec<StackDiffJson>,
}

#[derive(Serialize)]
struct SideJson {
    label: String,
    path: String,
    command: Vec<String>,
    pid: u32,
    backend: String,
    os: String,
    kernel_release: String,
    start_unix_ns: u64,
    duration_ns: u64,
    waits: u64,
    total_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    operations: Option<u64>,
}

#[derive(Serialize)]
struct NormalizationJson {
    mode: &'static str,
    unit: &'static str,
}

#[derive(Serialize)]
struct ValuesJson {
    count: u64,
    total_ns: u64,
    mean_ns: u64,
    max_ns: u64,
    normalized: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    avg_threads: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    share_of_thread_time: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_ns_per_s: Option<u64>,
}

#[derive(Serialize)]
struct DeltaJson {
    count: i128,
    total_ns: i128,
    normalized: i128,
    #[serde(skip_serializing_if = "Option::is_none")]
    count_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_ns_per_s: Option<i128>,
}

#[derive(Serialize)]
struct KindDiffJson {
    kind: WaitKind,
    a: ValuesJson,
    b: ValuesJson,
    delta: DeltaJson,
}

#[derive(Serialize)]
struct StackDiffJson {
    rank: usize,
    stack: String,
    frames: Vec<String>,
    a: ValuesJson,
    b: ValuesJson,
    delta: DeltaJson,
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

fn values_json(row: &SideRow, profile: &Profile, rates: bool) -> ValuesJson {
    let s = &row.stats;
    let seconds = profile.metadata.duration_ns as f64 / 1e9;
    ValuesJson {
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
fn delta_json(a: &ValuesJson, b: &ValuesJson, seconds: (f64, f64)) -> DeltaJson {
    DeltaJson {
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

fn side_json(label: &str, path: &str, profile: &Profile, operations: Option<u64>) -> SideJson {
    let m = &profile.metadata;
    SideJson {
        label: label.to_string(),
        path: path.to_string(),
        command: m.target.command.clone(),
        pid: m.target.pid,
        backend: m.backend.clone(),
        os: m.os.clone(),
        kernel_release: m.kernel_release.clone(),
        start_unix_ns: m.start_unix_ns,
        duration_ns: m.duration_ns,
        waits: profile.waits.iter().map(|w| w.stats.count).sum(),
        total_ns: profile
            .waits
            .iter()
            .fold(0u64, |sum, w| sum.saturating_add(w.stats.total_ns)),
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
) -> anyhow::Result<()> {
    options.normalization.validate()?;
    let n = options.normalization;
    let rates = rates_apply(a, b);
    let (ops_a, ops_b) = match n {
        Normalization::PerSecond => (None, None),
        Normalization::PerOperation { ops_a, ops_b } => (Some(ops_a), Some(ops_b)),
    };
    let row = |ra: &SideRow, rb: &SideRow| {
        let va = values_json(ra, a, rates);
        let vb = values_json(rb, b, rates);
        let seconds = (
            a.metadata.duration_ns as f64 / 1e9,
            b.metadata.duration_ns as f64 / 1e9,
        );
        let delta = delta_json(&va, &vb, seconds);
        (va, vb, delta)
    };
    let by_kind = grouped(a, b, n, |_, r| r.kind)
        .into_iter()
        .map(|(kind, ra, rb)| {
            let (a, b, delta) = row(&ra, &rb);
            KindDiffJson { kind, a, b, delta }
        })
        .collect();
    let depth = site_depth(a, b);
    let mut stacks = grouped(a, b, n, |p, r| canonical_stack(p, r, depth));
    let stacks_total = rank_by_change(&mut stacks, options.top);
    let stacks = stacks
        .into_iter()
        .enumerate()
        .map(|(i, (stack, ra, rb))| {
            let (a, b, delta) = row(&ra, &rb);
            StackDiffJson {
                rank: i + 1,
                frames: stack.split(';').map(str::to_string).collect(),
                stack,
                a,
                b,
                delta,
            }
        })
        .collect();
    let warnings = mismatches(a, b, options);
    let report = DiffJson {
        schema: "lockscope-diff",
        version: DIFF_JSON_VERSION,
        a: side_json(&options.labels.0, paths.0, a, ops_a),
        b: side_json(&options.labels.1, paths.1, b, ops_b),
        normalization: NormalizationJson {
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
        stacks_total,
        stacks,
    };
    serde_json::to_writer_pretty(&mut *out, &report).context("failed to write the diff as JSON")?;
    writeln!(out).context("failed to write the diff as JSON")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One mutex wait of `mutex-waiter-1`, with the user stack `frames` (leaf first), recorded
    /// by `backend`.
    fn one_wait(backend: &str, frames: &[&str]) -> Profile {
        use lockscope_probes::{AddressSpace, Frame, Metadata, Stack, ThreadInfo};
        Profile {
            metadata: Metadata {
                backend: backend.to_string(),
                duration_ns: 1_000_000_000,
                ..Metadata::default()
            },
            threads: vec![ThreadInfo {
                pid: 1,
                tid: 2,
                name: "mutex-waiter-1".to_string(),
            }],
            stacks: vec![Stack {
                space: AddressSpace::User,
                frames: frames
                    .iter()
                    .map(|f| Frame {
                        function: Some(f.to_string()),
                        ..Frame::unsymbolized(0x1000)
                    })
                    .collect(),
                truncated: false,
            }],
            waits: vec![WaitRecord {
                probe: "futex".to_string(),
                kind: WaitKind::Mutex,
                pid: 1,
                tid: 2,
                object: 0,
                operation: "FUTEX_WAIT_PRIVATE".to_string(),
                user_stack: Some(0),
                kernel_stack: None,
                stats: WaitStats {
                    count: 1,
                    total_ns: 200_000_000,
                    ..WaitStats::default()
                },
            }],
            ..Profile::default()
        }
    }

    /// A full eBPF stack and a DTrace stack cut short by the frame-pointer walk compare at
    /// their leaf (one site, no phantom change) with the stack-depth warning; two profiles
    /// walked alike keep whole stacks.
    #[test]
    fn stacks_walked_differently_compare_at_the_leaf() {
        let ebpf = one_wait(
            "ebpf",
            &[
                "__GI___lll_lock_wait",
                "___pthread_mutex_lock",
                "take_order_lock",
                "start_thread",
            ],
        );
        let dtrace = one_wait("dtrace", &["__GI___lll_lock_wait", "start_thread"]);
        assert_eq!(site_depth(&ebpf, &dtrace), SiteDepth::Leaf);
        assert_eq!(site_depth(&ebpf, &ebpf), SiteDepth::Full);
        let site = |p: &Profile, depth| canonical_site(p, &p.waits[0], depth).join(";");
        assert_eq!(site(&ebpf, SiteDepth::Leaf), "[kernel wait];[mutex]");
        assert_eq!(site(&dtrace, SiteDepth::Leaf), "[kernel wait];[mutex]");
        assert_eq!(
            site(&ebpf, SiteDepth::Full),
            "start_thread;take_order_lock;pthread_mutex_lock;[kernel wait];[mutex]"
        );
        let warnings = mismatches(&ebpf, &dtrace, &DiffOptions::default());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("stack depth differs by method, not by code: B walked"),
            "{warnings:?}"
        );
        let mut out = Vec::new();
        write_diff_table(
            &ebpf,
            &dtrace,
            ("a.lsp", "b.lsp"),
            &DiffOptions::default(),
            &mut out,
        )
        .expect("table");
        let table = String::from_utf8(out).expect("utf-8");
        assert!(table.contains("Top 1 of 1 wait sites"), "{table}");
    }
}
