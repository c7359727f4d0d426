//! `lockscope diff`'s side-by-side table ([`write_diff_table`]).

use super::rows::{grouped, rank_by_change, Records, SideRow};
use super::{diff_measure, measured, mismatches, DiffError, DiffOptions};
use crate::analysis::canonical::{canonical_site, canonical_thread, site_depth};
use crate::analysis::measure::Measure;
use crate::analysis::processes::{command_groups, command_of};
use crate::render::frames::{self, StackStyle};
use crate::render::sites;
use crate::render::units::{format_fraction, format_normalized, format_ns, format_unix_ns};
use crate::render::WriteError;
use lockscope_probes::{Profile, WaitStats};
use std::fmt::Write as _;

fn quantile(stats: &WaitStats, q: f64) -> String {
    stats
        .histogram
        .quantile_upper_bound(q)
        .map_or_else(|| "-".to_string(), format_ns)
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
        "    {:<4} {:>7} {:>9} {:>9} {:>8} {:>8} {:>7} {:>11} {:>11} {:>10}",
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

/// A row's name (cut to fit) and its two sides.
fn write_rows(out: &mut String, name: &str, rows: [(&str, &SideRow); 2], unit: &str) {
    let _ = writeln!(out, "  {}", frames::cut_end(name, frames::TEXT_WIDTH - 2));
    write_side_rows(out, rows, unit);
}

/// The two sides of a row, and the change.
fn write_side_rows(out: &mut String, rows: [(&str, &SideRow); 2], unit: &str) {
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
            "    {label:<4} {:>7} {:>9} {:>9} {:>8} {:>8} {:>7} {:>11} {:>11}",
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
    let classified = crate::report::Classified::of(p);
    let count = if measure == Measure::Waits {
        classified.waits
    } else {
        p.counted_waits().map(|w| w.stats.count).sum()
    };
    let target = if measure == Measure::Waits {
        m.target.describe()
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
        format_unix_ns(m.start_unix_ns),
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
        Measure::Holds => "threads: average threads holding a lock (time held / wall time)",
        Measure::Calls => "threads: average threads in a system call (call time / wall time)",
        Measure::Events | Measure::Samples => "counts only: no times",
    };
    format!("{threads}; change: {lb} - {la}, normalized")
}

/// Writes the side-by-side table of A (`paths.0`) and B to `out`: the sides and how they are
/// normalized, then the waits by kind, by command (with many processes), by thread, and the
/// sites that changed most.
pub fn write_diff_table(
    a: &Profile,
    b: &Profile,
    paths: (&str, &str),
    options: &DiffOptions,
    out: &mut dyn std::io::Write,
) -> Result<(), DiffError> {
    options.normalization.validate()?;
    let measure = diff_measure(a, b);
    let mut table = Table {
        text: String::new(),
        options,
        measure,
        unit: options.normalization.unit_of(measure),
        what: if measure == Measure::Waits {
            "Wait"
        } else {
            "Sample"
        },
    };
    table.head(a, b, paths);
    table.kinds(a, b);
    if super::many_processes(a) || super::many_processes(b) {
        table.commands(a, b);
    }
    table.threads(a, b);
    table.sites(a, b);
    out.write_all(table.text.as_bytes())
        .map_err(WriteError::io("the diff table"))?;
    Ok(())
}

/// The diff table being written, with what every part of it needs.
struct Table<'o> {
    /// The text so far.
    text: String,
    options: &'o DiffOptions,
    /// What the records measure.
    measure: Measure,
    /// The unit of the normalized numbers.
    unit: &'static str,
    /// `Wait` or `Sample`, for titles.
    what: &'static str,
}

impl<'o> Table<'o> {
    /// The sides' labels.
    fn labels(&self) -> (&'o str, &'o str) {
        (
            self.options.labels.0.as_str(),
            self.options.labels.1.as_str(),
        )
    }

    /// A line of text, wrapped to the text width (at `indent`) unless full stacks are asked.
    fn wide(&mut self, line: &str, indent: &str) {
        match self.options.stack_style {
            StackStyle::Full => {
                let _ = writeln!(self.text, "{line}");
            }
            StackStyle::Readable => {
                let first = line.len() - line.trim_start().len();
                let _ = writeln!(
                    self.text,
                    "{}",
                    frames::wrap(
                        line.trim_start(),
                        &line[..first],
                        indent,
                        frames::TEXT_WIDTH
                    )
                );
            }
        }
    }

    /// The sides, their waits by role, the normalization and what makes them incomparable.
    fn head(&mut self, a: &Profile, b: &Profile, paths: (&str, &str)) {
        let (la, lb) = self.labels();
        let _ = writeln!(self.text, "lockscope diff");
        self.wide(&describe_side(la, paths.0, a), "         ");
        self.wide(&describe_side(lb, paths.1, b), "         ");
        if self.measure == Measure::Waits {
            for (label, p) in [(la, a), (lb, b)] {
                let words = crate::report::Classified::of(p).words(false);
                self.wide(&format!("  {label:<4} {words}"), "       ");
            }
        }
        let _ = writeln!(
            self.text,
            "  normalized as {}",
            self.options.normalization.describe(a, b, self.measure)
        );
        let warnings = mismatches(a, b, self.options);
        if warnings.is_empty() {
            let _ = writeln!(
                self.text,
                "  comparable: same program and probes, nothing lost"
            );
        }
        for warning in &warnings {
            self.wide(&format!("WARNING: {warning}"), "  ");
        }
    }

    /// The waits (or samples) by kind.
    fn kinds(&mut self, a: &Profile, b: &Profile) {
        let (la, lb) = self.labels();
        self.text.push('\n');
        let title = format!(
            "{} kinds ({})",
            self.what,
            columns_legend(self.measure, la, lb)
        );
        self.wide(&title, "  ");
        let _ = writeln!(self.text, "{}", row_header(self.measure));
        let n = self.options.normalization;
        for (kind, ra, rb) in grouped(a, b, n, Records::Waits, |_, r| r.kind) {
            write_rows(
                &mut self.text,
                kind.name(),
                [(la, &ra), (lb, &rb)],
                self.unit,
            );
        }
    }

    /// The waits by command, processes matched by command.
    fn commands(&mut self, a: &Profile, b: &Profile) {
        let (la, lb) = self.labels();
        let groups = |p: &Profile| -> std::collections::BTreeMap<String, (usize, usize)> {
            command_groups(p)
                .into_iter()
                .map(|g| (g.command, (g.processes, g.threads)))
                .collect()
        };
        let (ga, gb) = (groups(a), groups(b));
        self.text.push('\n');
        self.wide(
            &format!(
                "Processes by command (matched by command, not pid: {la} {} processes, {lb} {})",
                ga.values().map(|g| g.0).sum::<usize>(),
                gb.values().map(|g| g.0).sum::<usize>()
            ),
            "  ",
        );
        let _ = writeln!(self.text, "{}", row_header(self.measure));
        let n = self.options.normalization;
        for (command, ra, rb) in grouped(a, b, n, Records::Waits, |p, r| command_of(p, r.pid)) {
            let count = |g: &std::collections::BTreeMap<String, (usize, usize)>| {
                g.get(&command).map_or(0, |c| c.0)
            };
            let name = format!(
                "{command} ({la}: {}, {lb}: {} processes)",
                count(&ga),
                count(&gb)
            );
            write_rows(&mut self.text, &name, [(la, &ra), (lb, &rb)], self.unit);
        }
    }

    /// The waits by thread, digits in names merged.
    fn threads(&mut self, a: &Profile, b: &Profile) {
        let (la, lb) = self.labels();
        let _ = writeln!(self.text, "\nThreads (digits in names merged as `*`)");
        let _ = writeln!(self.text, "{}", row_header(self.measure));
        let n = self.options.normalization;
        for (thread, ra, rb) in grouped(a, b, n, Records::Waits, canonical_thread) {
            write_rows(&mut self.text, &thread, [(la, &ra), (lb, &rb)], self.unit);
        }
    }

    /// The sites that changed most.
    fn sites(&mut self, a: &Profile, b: &Profile) {
        let (la, lb) = self.labels();
        let depth = site_depth(a, b);
        let n = self.options.normalization;
        // The sites keep the intervals of threads waiting for a CPU, said so in their title.
        let mut sites = grouped(a, b, n, Records::WaitsAndCpuWaits, |p, r| {
            canonical_site(p, r, depth).join(";")
        });
        let total_sites = rank_by_change(&mut sites, self.options.top);
        let title = format!(
            "Top {} of {total_sites} {} sites ({}) by change{}",
            sites.len(),
            self.what.to_lowercase(),
            match self.options.stack_style {
                StackStyle::Readable => "telling frame and its callers, leaf first, then the kind",
                StackStyle::Full => "canonical stack, root first",
            },
            if self.measure == Measure::Waits {
                ", waits for a CPU (CPU saturation) included"
            } else {
                ""
            }
        );
        self.text.push('\n');
        self.wide(&title, "  ");
        let _ = writeln!(self.text, "{}", row_header(self.measure));
        let keys: Vec<&str> = sites.iter().map(|(site, ..)| site.as_str()).collect();
        let names = sites::site_names(&keys, self.options.stack_style, frames::TEXT_WIDTH - 2);
        for ((_, ra, rb), name) in sites.iter().zip(names) {
            match self.options.stack_style {
                StackStyle::Readable => {
                    write_rows(&mut self.text, &name, [(la, ra), (lb, rb)], self.unit)
                }
                StackStyle::Full => {
                    let _ = writeln!(self.text, "  {name}");
                    write_side_rows(&mut self.text, [(la, ra), (lb, rb)], self.unit);
                }
            }
        }
    }
}
