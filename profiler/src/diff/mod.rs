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
//! workloads) is printed as a `WARNING` line at the top ([`mismatches`]), never silently. What
//! keeps a diff from being drawn or written is a [`DiffError`].

mod rows;
mod table;
mod value;

pub use rows::thread_time_ns;
pub use table::write_diff_table;
pub(crate) use value::{build_diff, Diff, SideValues, StackDiff};
pub use value::{write_diff_json, DIFF_JSON_VERSION};

use crate::analysis::canonical::{canonical_stacks_at, site_depth, SiteDepth};
use crate::analysis::fold::NO_USER_STACK;
use crate::analysis::measure::Measure;
use crate::render::frames::StackStyle;
use crate::render::units::format_ns;
use crate::render::WriteError;
use lockscope_probes::{AttachStatus, Profile, StackWalk, WaitStats};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io;

/// Why two profiles could not be compared, or their comparison not drawn or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiffError {
    /// Per-operation normalization with a count of 0.
    #[error("invalid operation counts {ops_a},{ops_b}: both must be at least 1")]
    InvalidOperationCounts {
        /// Operations of A.
        ops_a: u64,
        /// Operations of B.
        ops_b: u64,
    },
    /// inferno could not pair the two sides' folded stacks.
    #[error("failed to pair the folded stacks")]
    Pair(#[source] io::Error),
    /// inferno paired them into something that is not text.
    #[error("paired folded stacks are not UTF-8")]
    PairedNotUtf8(#[source] std::string::FromUtf8Error),
    /// The side the flamegraph draws has nothing to draw.
    #[error("profile {side} has no {what} to draw (try --negate to draw the other side)")]
    NothingToDraw {
        /// The side's label.
        side: String,
        /// What its records measure, plural (`waits`, `samples`).
        what: &'static str,
    },
    /// inferno could not write the differential flamegraph.
    #[error("failed to render the differential flamegraph")]
    Render(#[source] io::Error),
    /// The output (the table, or the JSON diff) could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
}

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

/// What a normalized value is of, in words (`wait`, `CPU time`, `events`, `samples`, `hold`,
/// `call time`).
fn measured(measure: Measure) -> &'static str {
    match measure {
        Measure::Waits => "wait",
        Measure::Holds => "hold",
        Measure::Calls => "call time",
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
    pub fn validate(self) -> Result<(), DiffError> {
        if let Normalization::PerOperation { ops_a, ops_b } = self {
            if ops_a == 0 || ops_b == 0 {
                return Err(DiffError::InvalidOperationCounts { ops_a, ops_b });
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
    /// How the table names sites: by their telling frame, leaf first, within 100 columns, or by
    /// their whole canonical stack, root first ([`StackStyle::Full`]). The JSON has the whole
    /// stacks whatever this says. Default: [`StackStyle::Readable`].
    pub stack_style: StackStyle,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            normalization: Normalization::PerSecond,
            top: 10,
            title: None,
            negate: false,
            labels: ("A".to_string(), "B".to_string()),
            stack_style: StackStyle::Readable,
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
) -> Result<Vec<String>, DiffError> {
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
    .map_err(DiffError::Pair)?;
    let text = String::from_utf8(paired).map_err(DiffError::PairedNotUtf8)?;
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
) -> Result<(), DiffError> {
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
        return Err(DiffError::NothingToDraw {
            side: side.clone(),
            what: diff_measure(a, b).noun(2),
        });
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
        .map_err(DiffError::Render)
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

/// True when `profile` recorded several processes (its process table, or its records' pids):
/// then the diff compares them by command too.
pub(crate) fn many_processes(profile: &Profile) -> bool {
    if profile.processes.len() > 1 {
        return true;
    }
    let mut pids = profile.waits.iter().map(|w| w.pid);
    pids.next()
        .is_some_and(|first| pids.any(|pid| pid != first))
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
                "{label} lost {} waits while recording ({} map full, {} dropped, {} probe runs \
                 skipped): its totals undercount",
                losses.lost_events(),
                losses.map_full,
                losses.dropped,
                losses.skipped_runs
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
    let (ta, tb) = (&a.metadata.target, &b.metadata.target);
    if (ta.all, &ta.cgroup, ta.tree) != (tb.all, &tb.cgroup, tb.tree) {
        out.push(format!(
            "different targets: {la} recorded {}, {lb} recorded {}",
            ta.describe(),
            tb.describe()
        ));
    }
    if many_processes(a) || many_processes(b) {
        // Processes are matched by command (their pids differ between recordings): one whose
        // waits are on one side only is a different set of processes, not a change.
        let waits_by_command = |p: &Profile| -> BTreeSet<String> {
            crate::analysis::processes::command_groups(p)
                .into_iter()
                .filter(|g| g.waits.count > 0)
                .map(|g| g.command)
                .collect()
        };
        let (wa, wb) = (waits_by_command(a), waits_by_command(b));
        for (label, only, other) in [(la, wa.difference(&wb), lb), (lb, wb.difference(&wa), la)] {
            for command in only {
                out.push(format!(
                    "only {label} has waits of processes running `{command}`: {other} did not \
                     record them"
                ));
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::canonical::canonical_site;
    use lockscope_probes::{WaitKind, WaitRecord};

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
                woken_by: None,
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

    /// A write failure reads the same from the diff and from the export, which share
    /// [`WriteError`]: `failed to write WHAT`, caused by the writer's own error (which the binary
    /// looks for to tell a closed pipe).
    #[test]
    fn write_errors_name_what_failed_to_write() {
        use crate::export::ExportError;
        use std::error::Error as _;
        let closed = || io::Error::from(io::ErrorKind::BrokenPipe);
        let diff = DiffError::from(WriteError::io("the diff table")(closed()));
        let export = ExportError::from(WriteError::io("folded stacks")(closed()));
        assert_eq!(diff.to_string(), "failed to write the diff table");
        assert_eq!(export.to_string(), "failed to write folded stacks");
        for source in [diff.source(), export.source()] {
            let cause = source.and_then(|s| s.downcast_ref::<io::Error>());
            assert_eq!(cause.map(io::Error::kind), Some(io::ErrorKind::BrokenPipe));
        }
    }
}
