//! Comparisons: each run against the first, and a sweep's knee level against its last, as
//! tables (from the typed diff value `lockscope diff --json` writes), the differential causes
//! (the [`WhyDiff`] of `lockscope why A B`, when both sides have the bottleneck analysis) and the
//! differential flamegraph.

use super::error_chain;
use super::page::{breakdown_bars, iframe_svg};
use super::report::Words;
use super::run::Run;
use crate::diff::{
    build_diff, write_diff_flamegraph, Diff, DiffError, DiffOptions, SideValues, StackDiff,
};
use crate::render::svg::xml_escape;
use crate::render::tables::{num_cell, table_close, table_open, Cell};
use crate::render::units::{format_fraction, format_ns, format_threads};
use crate::sweep::Breakdown;
use crate::why::{explains_text, share_text, WhyDiff, WhyDiffOptions};
use std::fmt::Write as _;

/// The value of one side of a diff row in the page's unit: average threads waiting (on CPU for
/// imported CPU time) per second of wall time, else the normalized value with its unit.
pub(super) fn diff_value(values: &SideValues, unit: &str) -> (f64, String) {
    let normalized = values.normalized as f64;
    if unit == "ns/s" {
        (normalized / 1e9, format_threads(normalized / 1e9))
    } else if unit == RAW_NS {
        (normalized, format_ns(normalized.max(0.0) as u64))
    } else {
        (
            normalized,
            crate::render::units::format_normalized(normalized.max(0.0) as u64, unit),
        )
    }
}

/// The change of a diff row, B − A, in the unit of [`diff_value`].
pub(super) fn diff_change(delta: i128, unit: &str) -> (f64, String) {
    let change = delta as f64;
    let sign = if change < 0.0 { "−" } else { "+" };
    if unit == "ns/s" {
        (
            change / 1e9,
            format!("{sign}{}", format_threads(change.abs() / 1e9)),
        )
    } else if unit == RAW_NS {
        (change, format!("{sign}{}", format_ns(change.abs() as u64)))
    } else {
        (
            change,
            format!(
                "{sign}{}",
                crate::render::units::format_normalized(change.abs() as u64, unit)
            ),
        )
    }
}

/// How a page compares `a` with `b`: every stack, sides named `labels` (`A`, `B`; `at 20`, `at
/// 50` for sweep levels).
pub(super) fn page_diff_options(a: &Run<'_>, b: &Run<'_>, labels: (&str, &str)) -> DiffOptions {
    DiffOptions {
        top: 0,
        labels: (labels.0.to_string(), labels.1.to_string()),
        title: Some(format!("{} → {}", a.label, b.label)),
        ..DiffOptions::default()
    }
}

/// The comparison of `a` with `b` (what `lockscope diff --json` writes, every stack, sides named
/// `labels`), or why there is none.
pub(super) fn page_diff(a: &Run<'_>, b: &Run<'_>, labels: (&str, &str)) -> Result<Diff, DiffError> {
    let options = page_diff_options(a, b, labels);
    build_diff(a.profile, b.profile, (&a.label, &b.label), &options)
}

/// A diff's unit words: the column header of a side's value.
pub(super) fn diff_unit_header(diff: &Diff) -> (String, &'static str) {
    let mut unit = diff.normalization.unit.to_string();
    let no_duration = diff.a.duration_ns == 0 || diff.b.duration_ns == 0;
    if unit == "ns/s" && no_duration {
        // Per second of nothing: `lockscope diff` then compares raw totals (and warns).
        unit = RAW_NS.to_string();
    }
    let header = match (unit.as_str(), diff.measure) {
        (RAW_NS, "on-cpu") => "CPU time (total)",
        (RAW_NS, _) => "wait time (total)",
        ("ns/s", "on-cpu") => "threads on CPU (average)",
        ("ns/s", _) => "threads waiting (average)",
        (_, "events") => "events, normalized",
        (_, "samples") => "samples, normalized",
        _ => "wait, normalized",
    };
    (unit, header)
}

/// The unit of a diff's values when a side has no duration: raw nanoseconds.
pub(super) const RAW_NS: &str = "ns";

/// The canonical stacks of `diff` that grew from A to B, largest growth first.
pub(super) fn growing_stacks(diff: &Diff) -> Vec<&StackDiff> {
    let mut rows: Vec<&StackDiff> = diff
        .stacks
        .iter()
        .filter(|s| s.delta.normalized > 0)
        .collect();
    rows.sort_by_key(|s| std::cmp::Reverse(s.delta.normalized));
    rows
}

/// A canonical stack cell: its name leaf first from its telling frame, with every frame folded
/// behind `<details>`.
pub(super) fn canonical_stack_cell(stack: &str) -> String {
    let frames: Vec<&str> = stack.split(';').collect();
    let mut cell = format!(
        "<td><details class=\"stack\"><summary><code>{}</code></summary><ol class=\"frames\">",
        xml_escape(&crate::render::sites::site_label(
            stack,
            crate::render::frames::TEXT_WIDTH
        ))
    );
    for frame in frames {
        let _ = write!(cell, "<li><code>{}</code></li>", xml_escape(frame));
    }
    cell.push_str("</ol></details></td>");
    cell
}

/// Which rows a diff's site table shows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum SiteRows {
    /// The top 10 by absolute change.
    LargestChange,
    /// The top 10 that grew, largest growth first.
    Growing,
}

/// A diff's warnings, its kinds and its sites as tables, in average threads waiting when
/// normalized per second.
pub(super) fn diff_tables(out: &mut String, diff: &Diff, rows: SiteRows) {
    for warning in &diff.warnings {
        let _ = writeln!(
            out,
            r#"<p class="warning">WARNING: {}</p>"#,
            xml_escape(warning)
        );
    }
    let (unit, header) = diff_unit_header(diff);
    let (la, lb) = (diff.a.label.as_str(), diff.b.label.as_str());
    let noun = Words::of(diff.measure).noun;
    let row = |out: &mut String,
               name_cell: String,
               (a, b, delta): (&SideValues, &SideValues, i128)| {
        let cell = |(v, text): (f64, String)| num_cell(v, &text);
        // A share of nothing (NaN) shows as unknown, as the page always drew it (JSON has no NaN).
        let share = |side: &SideValues| match side.share_of_thread_time.filter(|f| f.is_finite()) {
            Some(f) => num_cell(f, &format_fraction(f)),
            None => "<td class=\"num muted\">-</td>".to_string(),
        };
        let _ = writeln!(
            out,
            "<tr>{name_cell}{}{}{}{}{}{}{}</tr>",
            Cell::Count(a.count).html(),
            Cell::Count(b.count).html(),
            cell(diff_value(a, &unit)),
            cell(diff_value(b, &unit)),
            share(a),
            share(b),
            cell(diff_change(delta, &unit))
        );
    };
    let headers = |what: &str| {
        vec![
            what.to_string(),
            format!("{la} {noun}"),
            format!("{lb} {noun}"),
            format!("{la} {header}"),
            format!("{lb} {header}"),
            format!("{la} share of thread time"),
            format!("{lb} share of thread time"),
            format!("change ({lb} − {la})"),
        ]
    };
    let kinds = &diff.by_kind;
    let h = headers("kind");
    table_open(
        out,
        "diff-table",
        &h.iter().map(String::as_str).collect::<Vec<_>>(),
        kinds.len(),
    );
    for kind in kinds {
        row(
            out,
            format!("<td>{}</td>", xml_escape(kind.kind.name())),
            (&kind.a, &kind.b, kind.delta.normalized),
        );
    }
    table_close(out);
    let sites: Vec<&StackDiff> = match rows {
        SiteRows::LargestChange => diff.stacks.iter().take(10).collect(),
        SiteRows::Growing => growing_stacks(diff).into_iter().take(10).collect(),
    };
    let what = match rows {
        SiteRows::LargestChange => "site (canonical stack; largest change first)",
        SiteRows::Growing => "growing site (canonical stack; largest growth first)",
    };
    let h = headers(what);
    table_open(
        out,
        "diff-table",
        &h.iter().map(String::as_str).collect::<Vec<_>>(),
        sites.len(),
    );
    for site in &sites {
        let mut cell = canonical_stack_cell(&site.stack);
        if site.cpu_saturation {
            // Threads waiting for a CPU: CPU saturation, in no wait total (the diff's kinds).
            if let Some(open) = cell.strip_suffix("</td>") {
                cell = format!(
                    "{open}<span class=\"muted\">threads waiting for a CPU (CPU saturation, not waits)</span></td>"
                );
            }
        }
        row(out, cell, (&site.a, &site.b, site.delta.normalized));
    }
    table_close(out);
    if sites.is_empty() {
        let _ = writeln!(out, "<p class=\"muted\">No site grew.</p>");
    }
}

/// Two runs compared, their sides named `labels`.
pub(super) struct Comparison<'r, 'p> {
    pub(super) a: &'r Run<'p>,
    pub(super) b: &'r Run<'p>,
    pub(super) labels: (&'r str, &'r str),
    /// Say which run each label names (`A: a.lsp; B: b.lsp`): labels that do not say it.
    pub(super) name_sides: bool,
}

/// Where both sides' threads' time went, one stacked bar per side (all threads); empty when
/// neither side has the offcpu probe's per-thread times.
pub(super) fn sides_time_bars(comparison: &Comparison<'_, '_>) -> String {
    let sides = [
        (comparison.labels.0, comparison.a),
        (comparison.labels.1, comparison.b),
    ];
    let breakdowns: Vec<(String, Breakdown)> = sides
        .iter()
        .filter_map(|(label, run)| Some((label.to_string(), Breakdown::of(run.profile)?)))
        .collect();
    breakdown_bars(
        breakdowns.iter().map(|(label, b)| (label.clone(), b)),
        "Where the threads' time went on each side (share of thread time):",
    )
}

/// A comparison of two runs: its tables (from the diff value) and the differential
/// flamegraph, under an `<h2>` or `<h3>` heading.
pub(super) fn diff_section(
    out: &mut String,
    (id, title, heading): (&str, &str, &str),
    comparison: &Comparison<'_, '_>,
    rows: SiteRows,
) {
    let Comparison {
        a,
        b,
        labels,
        name_sides,
    } = *comparison;
    let _ = writeln!(
        out,
        r#"<{heading} id="{id}">{}</{heading}>"#,
        xml_escape(title)
    );
    if name_sides {
        let _ = writeln!(
            out,
            "<p class=\"muted\">{}: {}; {}: {}.</p>",
            xml_escape(labels.0),
            xml_escape(&a.label),
            xml_escape(labels.1),
            xml_escape(&b.label)
        );
    }
    out.push_str(&sides_time_bars(comparison));
    match page_diff(a, b, labels) {
        Ok(diff) => diff_tables(out, &diff, rows),
        Err(e) => {
            let _ = writeln!(
                out,
                "<p class=\"muted\">No comparison: {}</p>",
                xml_escape(&error_chain(&e))
            );
            return;
        }
    }
    why_diff_table(out, a, b, labels);
    let options = page_diff_options(a, b, labels);
    let mut svg = Vec::new();
    match write_diff_flamegraph(a.profile, b.profile, &options, &mut svg) {
        Ok(()) => {
            let _ = writeln!(
                out,
                "<p class=\"muted\">Differential flamegraph: widths are {}'s, red frames grew from {} to {}, blue ones shrank.</p>",
                xml_escape(labels.1),
                xml_escape(labels.0),
                xml_escape(labels.1)
            );
            iframe_svg(out, &svg, "differential flamegraph");
        }
        Err(e) => {
            let _ = writeln!(
                out,
                r#"<p class="muted">No differential flamegraph: {}</p>"#,
                xml_escape(&error_chain(&e))
            );
        }
    }
}

/// The differential causes of two runs (`lockscope why A B`, its working threads, per analysed
/// thread-second), as the text's table: nothing when either side lacks the bottleneck analysis.
pub(super) fn why_diff_table(out: &mut String, a: &Run<'_>, b: &Run<'_>, labels: (&str, &str)) {
    if a.profile.bottleneck.is_none() || b.profile.bottleneck.is_none() {
        return;
    }
    let diff = match WhyDiff::build(
        a.profile,
        b.profile,
        (&a.label, &b.label),
        &WhyDiffOptions::default(),
    ) {
        Ok(diff) => diff,
        Err(e) => {
            let _ = writeln!(
                out,
                "<p class=\"muted\">No differential causes: {}</p>",
                xml_escape(&error_chain(&e))
            );
            return;
        }
    };
    why_diff_rows(out, &diff, labels);
}

/// The table of a [`WhyDiff`]'s changes, its sides named `labels`.
pub(super) fn why_diff_rows(out: &mut String, diff: &WhyDiff, labels: (&str, &str)) {
    let (la, lb) = labels;
    let _ = writeln!(
        out,
        "<p>Differential causes (<code>lockscope why {} {}</code>): the changes in the causes of \
         the working threads' waiting, largest first; shares of the analysed threads' time, \
         <em>explains</em> the change's part of the time that moved.</p>",
        xml_escape(la),
        xml_escape(lb)
    );
    let headers = [
        "#".to_string(),
        "kind".to_string(),
        "change".to_string(),
        "where".to_string(),
        "kernel".to_string(),
        format!("{la} share"),
        format!("{lb} share"),
        format!("change ({lb} − {la})"),
        "explains".to_string(),
    ];
    table_open(
        out,
        "diff-table why-diff",
        &headers.iter().map(String::as_str).collect::<Vec<_>>(),
        diff.changes.len(),
    );
    for row in diff.table().rows {
        let share = |share: Option<f64>| match share {
            Some(value) => num_cell(value, &share_text(share)),
            None => "<td class=\"num muted\">-</td>".to_string(),
        };
        let _ = writeln!(
            out,
            "<tr>{}<td>{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td>{}{}{}{}</tr>",
            Cell::Count(row.rank as u64).html(),
            xml_escape(row.kind),
            row.status.name(),
            xml_escape(&row.place),
            xml_escape(&row.kernel),
            share(row.base),
            share(row.other),
            num_cell(row.delta.value, &row.delta.text),
            num_cell(row.explains.unwrap_or(0.0), &explains_text(row.explains)),
        );
    }
    table_close(out);
}
