//! `lockscope html`: one self-contained HTML file for writeups, from runs (`.lsp` profiles) and
//! sweeps (`sweep.json` or its directory).
//!
//! Nothing is fetched from the network: styles are inline, the scaling chart is inline SVG
//! ([`crate::chart`]), and each flamegraph is inferno's interactive SVG (click to zoom, Ctrl-F
//! search) embedded as a `data:` URL in an `<iframe>`, so its script and element ids stay apart
//! from the page's and from the other flamegraphs'.
//!
//! The page has, in order:
//!
//! 0. a summary of the first sweep (else the first run): target, kernel, machine, knee, finding,
//!    losses;
//! 1. per sweep: the finding, the scaling chart (with where the threads' time went beneath), a
//!    table per level (throughput, scaling, threads alive, per wait kind the average threads
//!    waiting and the share of thread time, the top site, losses), the table of where the
//!    threads' time went (share of thread time per class, [`crate::sweep::Breakdown`]), then **every level**: a level selector (one link
//!    per level, the knee marked) and one collapsible `<details>` section per level, open by
//!    default, with the level's run (below); no script is needed to read or switch them;
//! 2. per run (each profile given, and each level of each sweep): the metadata and environment
//!    fingerprint (host, OS, kernel, CPUs, libc, backend, lockscope version, target, probes and
//!    their status, losses), the flamegraph, the report's waits by kind and top sites as tables
//!    ([`crate::report`]'s JSON), and its text, folded, for every frame and the log2 histograms;
//! 3. diffs: each run against the first one (and the last level of each sweep against its
//!    first): the wait kinds and top sites as tables (wait time in average threads waiting, from
//!    `lockscope diff --json`), the text table folded, and the differential flamegraph
//!    ([`crate::diff`]).
//!
//! Level sections start open: a flamegraph laid out while hidden would have no width to fit its
//! labels to until the reader opens it (inferno refits them on resize, but open is simplest).

use crate::chart::{scaling_svg, xml_escape, ChartOptions};
use crate::diff::{write_diff_flamegraph, write_diff_json, write_diff_table, DiffOptions};
use crate::flamegraph::{write_flamegraph, FlamegraphOptions};
use crate::report::{write_report, ReportOptions};
use crate::sweep::{Sweep, NO_BREAKDOWN};
use crate::units::{format_fraction, format_ns, format_threads, format_unix_ns};
use anyhow::Context;
use lockscope_probes::{AttachStatus, Profile, TimeClass};
use std::fmt::Write as _;
use std::path::PathBuf;

/// One input of the report.
#[derive(Clone, Debug)]
pub enum Input {
    /// A recorded profile, with the path it was read from.
    Run {
        /// Where it was read from (shown as its name).
        path: PathBuf,
        /// The profile.
        profile: Box<Profile>,
    },
    /// A sweep, with the directory its files are relative to.
    Sweep {
        /// The sweep file.
        path: PathBuf,
        /// Directory of the sweep's profiles and load outputs.
        dir: PathBuf,
        /// The sweep.
        sweep: Box<Sweep>,
    },
}

/// How to write the HTML report.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HtmlOptions {
    /// Page title. Default: `lockscope report`.
    pub title: String,
    /// Top wait sites per run, with histograms. Default: `5`.
    pub top: usize,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions {
            title: "lockscope report".to_string(),
            top: 5,
        }
    }
}

const STYLE: &str = r#"
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1240px; color: #222; }
h1 { font-size: 24px; } h2 { font-size: 20px; border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 36px; }
h3 { font-size: 16px; margin-top: 20px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f3f3f3; }
pre { background: #f8f8f8; border: 1px solid #e3e3e3; padding: 8px; overflow-x: auto; font-size: 12px; line-height: 1.3; }
.finding { background: #eef6ff; border-left: 4px solid #0072b2; padding: 8px 12px; font-size: 15px; }
.warning { background: #fff4e5; border-left: 4px solid #d55e00; padding: 6px 12px; }
iframe.flame { width: 100%; height: 520px; border: 1px solid #ddd; }
nav li { margin: 2px 0; }
.levels { margin: 8px 0; font-size: 14px; }
.levels a { margin-right: 10px; }
details.level { border: 1px solid #ddd; border-radius: 4px; margin: 10px 0; padding: 0 12px 8px; }
details.level > summary { cursor: pointer; font-weight: bold; padding: 8px 0; }
details.level h4 { font-size: 14px; margin: 14px 0 6px; }
.muted { color: #666; }
section.summary { background: #f7f9fb; border: 1px solid #d8e0e8; border-radius: 4px; padding: 4px 14px 10px; }
section.summary h2 { margin-top: 8px; }
table.summary-table th { width: 90px; }
details.text-report > summary { cursor: pointer; color: #444; margin: 6px 0; }
"#;

/// Standard base64 (RFC 4648, with padding), for `data:` URLs.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `height` attribute of an SVG's root element, in pixels.
fn svg_height(svg: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(svg).ok()?;
    let root = &text[text.find("<svg")?..];
    let root = &root[..root.find('>')?];
    let start = root.find(" height=\"")? + " height=\"".len();
    let value = &root[start..];
    value[..value.find('"')?]
        .trim_end_matches("px")
        .parse::<f64>()
        .ok()
        .map(|h| h.ceil() as u32)
}

/// Embeds an SVG in an iframe as a `data:` URL, as tall as the SVG (at most 900 px).
fn iframe_svg(out: &mut String, svg: &[u8], title: &str) {
    let height = svg_height(svg).map_or(520, |h| (h + 24).min(900));
    let _ = writeln!(
        out,
        r#"<iframe class="flame" style="height: {height}px" title="{}" src="data:image/svg+xml;base64,{}"></iframe>"#,
        xml_escape(title),
        base64(svg)
    );
}

fn anchor(prefix: &str, i: usize) -> String {
    format!("{prefix}-{i}")
}

/// A run to show: a label, its profile, and its section anchor.
struct Run<'a> {
    label: String,
    profile: &'a Profile,
}

fn metadata_table(out: &mut String, profile: &Profile) {
    let m = &profile.metadata;
    let mut rows: Vec<(&str, String)> = vec![
        (
            "target",
            format!(
                "{} (pid {}, {})",
                m.target.command.join(" "),
                m.target.pid,
                if m.target.launched {
                    "launched by lockscope"
                } else {
                    "attached"
                }
            ),
        ),
        (
            "recorded",
            format!(
                "{} for {}, ended: {}",
                format_unix_ns(m.start_unix_ns),
                format_ns(m.duration_ns),
                m.end_reason
            ),
        ),
        ("host", m.hostname.clone()),
        ("os / kernel", format!("{} {}", m.os, m.kernel_release)),
        ("CPUs", m.cpu_count.to_string()),
        ("libc", m.libc.clone().unwrap_or_else(|| "unknown".into())),
        (
            "backend",
            format!("{} (lockscope {})", m.backend, m.lockscope_version),
        ),
        ("threads seen", profile.threads.len().to_string()),
        (
            "events",
            format!(
                "{} seen, {} waits recorded",
                m.events,
                profile.waits.iter().map(|w| w.stats.count).sum::<u64>()
            ),
        ),
    ];
    let probes: Vec<String> = m
        .probes
        .iter()
        .map(|p| match &p.status {
            AttachStatus::Attached => format!("{} attached ({})", p.probe, p.hook),
            AttachStatus::FellBack { hook, reason } => {
                format!("{} fell back to {hook} ({reason})", p.probe)
            }
            AttachStatus::Failed { reason } => format!("{} FAILED ({reason})", p.probe),
        })
        .collect();
    rows.push(("probes", probes.join("; ")));
    let l = &m.losses;
    rows.push((
        "losses",
        if l.is_zero() {
            "none".to_string()
        } else {
            format!(
                "{} lost waits ({} map full, {} dropped), {} user / {} kernel stack failures",
                l.lost_events(),
                l.map_full,
                l.dropped,
                l.user_stack_failures,
                l.kernel_stack_failures
            )
        },
    ));
    out.push_str("<table>\n");
    for (key, value) in rows {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            xml_escape(key),
            xml_escape(&value)
        );
    }
    out.push_str("</table>\n");
    if l.lost_events() > 0 {
        let _ = writeln!(
            out,
            r#"<p class="warning">WARNING: {} waits were lost while recording: every total undercounts.</p>"#,
            l.lost_events()
        );
    }
}

fn run_section(out: &mut String, id: &str, run: &Run<'_>, options: &HtmlOptions) {
    let _ = writeln!(out, r#"<h2 id="{id}">Run: {}</h2>"#, xml_escape(&run.label));
    run_body(out, run, options, "h3");
}

/// A run's metadata, flamegraph and top sites, under `heading` (`h3`, or `h4` inside a level).
fn run_body(out: &mut String, run: &Run<'_>, options: &HtmlOptions, heading: &str) {
    metadata_table(out, run.profile);
    let _ = writeln!(out, "<{heading}>Flamegraph (wait time)</{heading}>");
    let mut svg = Vec::new();
    match write_flamegraph(run.profile, &FlamegraphOptions::default(), &mut svg) {
        Ok(()) => iframe_svg(out, &svg, &format!("flamegraph of {}", run.label)),
        Err(e) => {
            let _ = writeln!(
                out,
                r#"<p class="muted">No flamegraph: {}</p>"#,
                xml_escape(&format!("{e:#}"))
            );
        }
    }
    report_tables(out, run.profile, options, heading);
}

/// A JSON number as `u64`, 0 when absent (the report always writes the fields read here).
fn json_u64(value: &serde_json::Value, key: &str) -> u64 {
    value
        .get(key)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0)
}

/// A JSON share (0 to 1) as a percentage with one decimal.
fn json_share(value: &serde_json::Value) -> String {
    format_fraction(
        value
            .get("share")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0),
    )
}

/// The waits by kind and the top sites of a run's report as HTML tables (from the JSON report, so
/// the page shows the same numbers as `lockscope report`), then the text report, folded, for the
/// sites' full stacks and log2 histograms.
fn report_tables(out: &mut String, profile: &Profile, options: &HtmlOptions, heading: &str) {
    let mut report_options = ReportOptions {
        top: options.top,
        ..ReportOptions::default()
    };
    report_options.json = true;
    let mut json = Vec::new();
    let report: Option<serde_json::Value> = write_report(profile, &report_options, &mut json)
        .ok()
        .and_then(|()| serde_json::from_slice(&json).ok());
    if let Some(report) = &report {
        let _ = writeln!(out, "<{heading}>Waits by kind</{heading}>");
        out.push_str(
            "<table class=\"report-table\">\n<tr><th>kind</th><th>waits</th><th>total</th><th>mean</th><th>max</th><th>share of wait time</th></tr>\n",
        );
        let kinds = report
            .get("by_kind")
            .and_then(serde_json::Value::as_array)
            .cloned()
            .unwrap_or_default();
        for kind in &kinds {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                xml_escape(kind.get("kind").and_then(serde_json::Value::as_str).unwrap_or("?")),
                json_u64(kind, "count"),
                format_ns(json_u64(kind, "total_ns")),
                format_ns(json_u64(kind, "mean_ns")),
                format_ns(json_u64(kind, "max_ns")),
                json_share(kind)
            );
        }
        out.push_str("</table>\n");
        let groups = report
            .get("groups")
            .and_then(serde_json::Value::as_array)
            .cloned()
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<{heading}>Top {} of {} wait sites</{heading}>",
            groups.len(),
            json_u64(report, "groups_total")
        );
        out.push_str(
            "<table class=\"report-table\">\n<tr><th>#</th><th>kind</th><th>waits</th><th>total</th><th>share of wait time</th><th>mean</th><th>max</th><th>threads</th><th>user stack (leaf first)</th></tr>\n",
        );
        for group in &groups {
            let kind = group
                .pointer("/key/kind")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("-");
            let threads: Vec<String> = group
                .get("threads")
                .and_then(serde_json::Value::as_array)
                .map(|threads| {
                    threads
                        .iter()
                        .map(|t| {
                            format!(
                                "{} ({})",
                                t.get("name")
                                    .and_then(serde_json::Value::as_str)
                                    .unwrap_or("?"),
                                json_u64(t, "tid")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let frames: Vec<String> = group
                .pointer("/stacks/0/user/frames")
                .and_then(serde_json::Value::as_array)
                .map(|frames| {
                    frames
                        .iter()
                        .take(6)
                        .map(|f| {
                            f.get("function")
                                .and_then(serde_json::Value::as_str)
                                .or_else(|| f.get("address").and_then(serde_json::Value::as_str))
                                .unwrap_or("?")
                                .to_string()
                        })
                        .collect()
                })
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "<tr><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td><code>{}</code></td></tr>",
                json_u64(group, "rank"),
                xml_escape(kind),
                json_u64(group, "count"),
                format_ns(json_u64(group, "total_ns")),
                json_share(group),
                format_ns(json_u64(group, "mean_ns")),
                format_ns(json_u64(group, "max_ns")),
                xml_escape(&threads.join(", ")),
                if frames.is_empty() {
                    "[no user stack]".to_string()
                } else {
                    frames
                        .iter()
                        .map(|f| xml_escape(f))
                        .collect::<Vec<_>>()
                        .join("<br>")
                }
            );
        }
        out.push_str("</table>\n");
    }
    let mut text_options = report_options;
    text_options.json = false;
    let mut text = Vec::new();
    if write_report(profile, &text_options, &mut text).is_ok() {
        // Folded: the tables above carry the numbers; this has every frame and the histograms.
        let _ = writeln!(
            out,
            "<details class=\"text-report\"{}><summary>Full stacks and log2 histograms (the text report)</summary>\n<pre>{}</pre></details>",
            // Without the tables (the JSON report failed) the text is all there is: open.
            if report.is_some() { "" } else { " open" },
            xml_escape(&String::from_utf8_lossy(&text))
        );
    }
}

fn diff_section(out: &mut String, id: &str, a: &Run<'_>, b: &Run<'_>) {
    let _ = writeln!(
        out,
        r#"<h2 id="{id}">Diff: {} → {}</h2>"#,
        xml_escape(&a.label),
        xml_escape(&b.label)
    );
    let options = DiffOptions::default();
    let mut table = Vec::new();
    if let Err(e) = write_diff_table(
        a.profile,
        b.profile,
        (&a.label, &b.label),
        &options,
        &mut table,
    ) {
        let _ = writeln!(
            out,
            "<p class=\"muted\">{}</p>",
            xml_escape(&format!("{e:#}"))
        );
        return;
    }
    let mut json = Vec::new();
    let diff: Option<serde_json::Value> = write_diff_json(
        a.profile,
        b.profile,
        (&a.label, &b.label),
        &options,
        &mut json,
    )
    .ok()
    .and_then(|()| serde_json::from_slice(&json).ok());
    if let Some(diff) = &diff {
        diff_tables(out, diff);
    }
    // Folded when the tables carry the numbers; the whole text is there for the mismatch notes
    // and every column.
    let _ = writeln!(
        out,
        "<details class=\"text-report\"{}><summary>The diff as text (lockscope diff)</summary>\n<pre>{}</pre></details>",
        if diff.is_some() { "" } else { " open" },
        xml_escape(&String::from_utf8_lossy(&table))
    );
    let mut svg = Vec::new();
    match write_diff_flamegraph(a.profile, b.profile, &options, &mut svg) {
        Ok(()) => iframe_svg(out, &svg, "differential flamegraph"),
        Err(e) => {
            let _ = writeln!(
                out,
                r#"<p class="muted">No differential flamegraph: {}</p>"#,
                xml_escape(&format!("{e:#}"))
            );
        }
    }
}

/// One side's wait time of a diff row: average threads waiting when the diff is normalized per
/// second (wait nanoseconds per second of wall time over 1e9 is threads), else per operation.
fn diff_value(values: &serde_json::Value, per_second: bool) -> String {
    let normalized = values
        .get("normalized")
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0);
    if per_second {
        format_threads(normalized / 1e9)
    } else {
        format!("{}/op", format_ns(normalized.max(0.0) as u64))
    }
}

/// The change of a diff row, B − A, in the unit of [`diff_value`].
fn diff_change(delta: &serde_json::Value, per_second: bool) -> String {
    let change = delta
        .get("normalized")
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0);
    let sign = if change < 0.0 { "−" } else { "+" };
    if per_second {
        format!("{sign}{}", format_threads(change.abs() / 1e9))
    } else {
        format!("{sign}{}/op", format_ns(change.abs() as u64))
    }
}

/// The diff's warnings, wait kinds and top canonical stacks as tables (from `lockscope diff
/// --json`, so the numbers are the command's).
fn diff_tables(out: &mut String, diff: &serde_json::Value) {
    for warning in diff
        .get("warnings")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
    {
        let _ = writeln!(
            out,
            r#"<p class="warning">WARNING: {}</p>"#,
            xml_escape(warning)
        );
    }
    let per_second = diff
        .pointer("/normalization/unit")
        .and_then(serde_json::Value::as_str)
        == Some("ns/s");
    let unit = if per_second {
        "threads waiting (average)"
    } else {
        "wait per operation"
    };
    let sections = [
        ("by_kind", "wait kind"),
        ("stacks", "wait site (canonical stack)"),
    ];
    for (field, what) in sections {
        let rows = diff
            .get(field)
            .and_then(serde_json::Value::as_array)
            .cloned()
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<table class=\"diff-table\">\n<tr><th>{what}</th><th>A waits</th><th>A total</th><th>B waits</th><th>B total</th><th>A {unit}</th><th>B {unit}</th><th>change (B − A)</th></tr>"
        );
        for row in &rows {
            let name = row
                .get("kind")
                .or_else(|| row.get("stack"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?");
            let (a, b, delta) = (
                row.get("a").cloned().unwrap_or_default(),
                row.get("b").cloned().unwrap_or_default(),
                row.get("delta").cloned().unwrap_or_default(),
            );
            let _ = writeln!(
                out,
                "<tr><td title=\"{}\"><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                xml_escape(name),
                xml_escape(&crate::sweep::short_site(name)),
                json_u64(&a, "count"),
                format_ns(json_u64(&a, "total_ns")),
                json_u64(&b, "count"),
                format_ns(json_u64(&b, "total_ns")),
                diff_value(&a, per_second),
                diff_value(&b, per_second),
                diff_change(&delta, per_second)
            );
        }
        out.push_str("</table>\n");
    }
}

fn sweep_section(out: &mut String, id: &str, path: &str, sweep: &Sweep) {
    let _ = writeln!(out, r#"<h2 id="{id}">Sweep: {}</h2>"#, xml_escape(path));
    let _ = writeln!(
        out,
        r#"<p class="finding">{}</p>"#,
        xml_escape(&sweep.finding)
    );
    for warning in &sweep.warnings {
        let _ = writeln!(
            out,
            r#"<p class="warning">WARNING: {}</p>"#,
            xml_escape(warning)
        );
    }
    let _ = writeln!(
        out,
        "<p>Load: <code>{}</code>; {} per level; throughput parsed by {} ({}).</p>",
        xml_escape(&sweep.load),
        format_ns(sweep.duration_ns),
        xml_escape(&sweep.throughput_parser),
        xml_escape(&sweep.throughput_unit)
    );
    out.push_str(r#"<div class="chart">"#);
    out.push_str(&scaling_svg(sweep, &ChartOptions::default()));
    out.push_str("</div>\n");
    let mut kinds: Vec<String> = Vec::new();
    for level in &sweep.levels {
        for share in &level.kinds {
            if !kinds.contains(&share.name) {
                kinds.push(share.name.clone());
            }
        }
    }
    out.push_str(
        "<table class=\"levels-table\">\n<tr><th>concurrency</th><th>throughput</th><th>scaling (first=100%)</th><th>threads alive (average)</th>",
    );
    for kind in &kinds {
        let _ = write!(
            out,
            "<th>{} wait: threads waiting (average), share of thread time</th>",
            xml_escape(kind)
        );
    }
    out.push_str("<th>top wait site</th><th>lost</th></tr>\n");
    for level in &sweep.levels {
        let knee = sweep
            .knee
            .as_ref()
            .is_some_and(|k| k.concurrency == level.concurrency);
        let _ = write!(
            out,
            "<tr><td class=\"num\">{}{}</td><td class=\"num\">{:.1}</td><td class=\"num\">{:.0}%</td><td class=\"num\">{}</td>",
            level.concurrency,
            if knee { " (knee)" } else { "" },
            level.throughput,
            level.scaling * 100.0,
            level
                .breakdown
                .as_ref()
                .map_or_else(|| "-".to_string(), |b| format_threads(b.avg_threads))
        );
        for kind in &kinds {
            let share = level.kinds.iter().find(|s| &s.name == kind);
            let waiting = format_threads(share.map_or(0.0, |s| s.avg_threads));
            let of_thread_time = match (&level.breakdown, share) {
                (None, _) => "-".to_string(),
                (Some(_), share) => {
                    format_fraction(share.and_then(|s| s.share_of_thread_time).unwrap_or(0.0))
                }
            };
            let _ = write!(out, "<td class=\"num\">{waiting}, {of_thread_time}</td>");
        }
        let top = level
            .top_sites
            .first()
            .map(|s| s.name.clone())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<td title=\"{}\"><code>{}</code></td><td class=\"num\">{}</td></tr>",
            xml_escape(&top),
            xml_escape(&crate::sweep::short_site(&top)),
            level.lost_events
        );
    }
    out.push_str("</table>\n");
    time_table(out, sweep);
}

/// Where the threads' time went per level, as shares of thread time per class (the numbers of
/// the chart's bottom panel); a level without a breakdown says so.
fn time_table(out: &mut String, sweep: &Sweep) {
    out.push_str("<h3>Where the threads' time went (share of thread time)</h3>\n");
    out.push_str(
        "<table class=\"time-table\">\n<tr><th>concurrency</th><th>threads alive (average)</th>",
    );
    for class in TimeClass::ALL {
        let _ = write!(out, "<th>{}</th>", class.name());
    }
    out.push_str("</tr>\n");
    for level in &sweep.levels {
        let _ = write!(out, "<tr><td class=\"num\">{}</td>", level.concurrency);
        match &level.breakdown {
            Some(b) => {
                let _ = write!(
                    out,
                    "<td class=\"num\">{}</td>",
                    format_threads(b.avg_threads)
                );
                for class in TimeClass::ALL {
                    let (fraction, avg) = b
                        .class(class.name())
                        .map_or((0.0, 0.0), |c| (c.share_of_thread_time, c.avg_threads));
                    let _ = write!(
                        out,
                        "<td class=\"num\" title=\"{}\">{}</td>",
                        xml_escape(&format!("{} on average", format_threads(avg))),
                        format_fraction(fraction)
                    );
                }
            }
            None => {
                let _ = write!(
                    out,
                    "<td class=\"muted\" colspan=\"{}\">{}</td>",
                    TimeClass::ALL.len() + 1,
                    xml_escape(NO_BREAKDOWN)
                );
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// The summary at the top of the page, for the first sweep (else the first run): the target, its
/// kernel and machine, and for a sweep the knee and the finding; the losses of every level or of
/// the run. `profile` is the sweep's first level's or the run's.
fn summary_section(out: &mut String, label: &str, sweep: Option<&Sweep>, profiles: &[&Profile]) {
    let Some(profile) = profiles.first() else {
        return;
    };
    let m = &profile.metadata;
    let mut rows: Vec<(&str, String)> = vec![
        ("input", label.to_string()),
        (
            "target",
            format!("{} (pid {})", m.target.command.join(" "), m.target.pid),
        ),
        ("kernel", format!("{} {}", m.os, m.kernel_release)),
        (
            "machine",
            format!(
                "{}, {} CPUs, {}",
                m.hostname,
                m.cpu_count,
                m.libc.clone().unwrap_or_else(|| "libc unknown".into())
            ),
        ),
    ];
    if let Some(sweep) = sweep {
        rows.push((
            "knee",
            match &sweep.knee {
                Some(knee) => format!(
                    "concurrency {}: {:.1} {}, {:.0}% of the first level",
                    knee.concurrency,
                    knee.throughput,
                    sweep.throughput_unit,
                    knee.scaling * 100.0
                ),
                None => "none: throughput still rises at the last level".to_string(),
            },
        ));
        rows.push(("finding", sweep.finding.clone()));
    }
    let lost: u64 = profiles
        .iter()
        .map(|p| p.metadata.losses.lost_events())
        .sum();
    let stack_failures: u64 = profiles
        .iter()
        .map(|p| p.metadata.losses.user_stack_failures + p.metadata.losses.kernel_stack_failures)
        .sum();
    let mut losses = if lost == 0 && stack_failures == 0 {
        "none".to_string()
    } else {
        format!("{lost} waits lost, {stack_failures} stacks not walked")
    };
    if let Some(sweep) = sweep {
        if !sweep.warnings.is_empty() {
            let _ = write!(losses, "; warnings: {}", sweep.warnings.join("; "));
        }
    }
    rows.push(("losses", losses));
    out.push_str("<section class=\"summary\" id=\"summary\">\n<h2>Summary</h2>\n<table class=\"summary-table\">\n");
    for (key, value) in rows {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            xml_escape(key),
            xml_escape(&value)
        );
    }
    out.push_str("</table>\n</section>\n");
}

/// The id of the section of level number `index` (in run order) of sweep input `sweep`.
fn level_anchor(sweep: usize, index: usize) -> String {
    format!("{}-level-{index}", anchor("sweep", sweep))
}

/// Every level of a sweep: a selector (one link per level) and one collapsible section per level
/// with its run. `runs` are the levels' runs, in the sweep's order.
fn levels_section(
    out: &mut String,
    sweep_index: usize,
    sweep: &Sweep,
    runs: &[Run<'_>],
    options: &HtmlOptions,
) {
    let is_knee = |c: u32| sweep.knee.as_ref().is_some_and(|k| k.concurrency == c);
    let _ = writeln!(
        out,
        r#"<h3 id="{}-levels">Every level ({})</h3>"#,
        anchor("sweep", sweep_index),
        sweep.levels.len()
    );
    out.push_str(r#"<p class="levels">Level (concurrency): "#);
    for (k, level) in sweep.levels.iter().enumerate() {
        let _ = write!(
            out,
            r##"<a href="#{}">{}{}</a>"##,
            level_anchor(sweep_index, k),
            level.concurrency,
            if is_knee(level.concurrency) {
                " (knee)"
            } else {
                ""
            }
        );
    }
    out.push_str("</p>\n");
    for (k, (level, run)) in sweep.levels.iter().zip(runs).enumerate() {
        let top = level
            .top_sites
            .first()
            .map(|s| crate::sweep::short_site(&s.name))
            .unwrap_or_else(|| "-".to_string());
        let _ = writeln!(
            out,
            r#"<details class="level" id="{}" open>
<summary>Concurrency {}{}: {:.1} {}, scaling {:.0}%, top wait site <code>{}</code></summary>"#,
            level_anchor(sweep_index, k),
            level.concurrency,
            if is_knee(level.concurrency) {
                " (knee)"
            } else {
                ""
            },
            level.throughput,
            xml_escape(&sweep.throughput_unit),
            level.scaling * 100.0,
            xml_escape(&top)
        );
        run_body(out, run, options, "h4");
        out.push_str("</details>\n");
    }
}

/// Renders the report page.
pub fn render_html(inputs: &[Input], options: &HtmlOptions) -> anyhow::Result<String> {
    // Profiles of every sweep level, loaded once, in each sweep's order: (input index, runs).
    let mut sweep_profiles: Vec<(usize, Vec<(String, Profile)>)> = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        if let Input::Sweep { path, dir, sweep } = input {
            let mut profiles = Vec::new();
            for level in &sweep.levels {
                let file = dir.join(&level.profile);
                let profile = lockscope_probes::read_profile(&file).with_context(|| {
                    format!(
                        "failed to read profile `{}` of sweep `{}`",
                        file.display(),
                        path.display()
                    )
                })?;
                profiles.push((
                    format!("{} level {}", path.display(), level.concurrency),
                    profile,
                ));
            }
            sweep_profiles.push((i, profiles));
        }
    }
    let level_runs: Vec<(usize, Vec<Run<'_>>)> = sweep_profiles
        .iter()
        .map(|(i, profiles)| {
            let runs = profiles
                .iter()
                .map(|(label, profile)| Run {
                    label: label.clone(),
                    profile,
                })
                .collect();
            (*i, runs)
        })
        .collect();
    let runs: Vec<Run<'_>> = inputs
        .iter()
        .filter_map(|input| match input {
            Input::Run { path, profile } => Some(Run {
                label: path.display().to_string(),
                profile,
            }),
            Input::Sweep { .. } => None,
        })
        .collect();

    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>",
        xml_escape(&options.title)
    );
    let _ = writeln!(out, "<h1>{}</h1>", xml_escape(&options.title));
    let _ = writeln!(
        out,
        "<p class=\"muted\">Written by lockscope {}. Flamegraphs: click a frame to zoom, Ctrl-F to search; widths are wait time.</p>",
        env!("CARGO_PKG_VERSION")
    );

    // The summary first: what a reader of a writeup looks at before anything else.
    let first_sweep = inputs
        .iter()
        .enumerate()
        .find_map(|(i, input)| match input {
            Input::Sweep { path, sweep, .. } => Some((i, path, sweep)),
            Input::Run { .. } => None,
        });
    match first_sweep {
        Some((i, path, sweep)) => {
            let profiles: Vec<&Profile> = level_runs
                .iter()
                .find(|(index, _)| *index == i)
                .map(|(_, runs)| runs.iter().map(|r| r.profile).collect())
                .unwrap_or_default();
            summary_section(
                &mut out,
                &format!("sweep {}", path.display()),
                Some(sweep),
                &profiles,
            );
        }
        None => {
            if let Some(run) = runs.first() {
                summary_section(
                    &mut out,
                    &format!("run {}", run.label),
                    None,
                    &[run.profile],
                );
            }
        }
    }

    // Contents.
    out.push_str("<nav><ul>\n");
    for (i, input) in inputs.iter().enumerate() {
        if let Input::Sweep { path, sweep, .. } = input {
            let _ = write!(
                out,
                r##"<li><a href="#{}">Sweep: {}</a>; levels:"##,
                anchor("sweep", i),
                xml_escape(&path.display().to_string())
            );
            for (k, level) in sweep.levels.iter().enumerate() {
                let _ = write!(
                    out,
                    r##" <a href="#{}">{}</a>"##,
                    level_anchor(i, k),
                    level.concurrency
                );
            }
            out.push_str("</li>\n");
        }
    }
    for (i, run) in runs.iter().enumerate() {
        let _ = writeln!(
            out,
            r##"<li><a href="#{}">Run: {}</a></li>"##,
            anchor("run", i),
            xml_escape(&run.label)
        );
    }
    out.push_str("</ul></nav>\n");

    for (i, input) in inputs.iter().enumerate() {
        if let Input::Sweep { path, sweep, .. } = input {
            sweep_section(
                &mut out,
                &anchor("sweep", i),
                &path.display().to_string(),
                sweep,
            );
            if let Some((_, runs)) = level_runs.iter().find(|(index, _)| *index == i) {
                levels_section(&mut out, i, sweep, runs, options);
            }
        }
    }
    for (i, run) in runs.iter().enumerate() {
        run_section(&mut out, &anchor("run", i), run, options);
    }
    let mut diff_index = 0;
    if let Some((first, rest)) = runs.split_first() {
        for run in rest {
            diff_section(&mut out, &anchor("diff", diff_index), first, run);
            diff_index += 1;
        }
    }
    for (_, runs) in &level_runs {
        if let (Some(first), Some(last)) = (runs.first(), runs.last()) {
            if runs.len() > 1 {
                diff_section(&mut out, &anchor("diff", diff_index), first, last);
                diff_index += 1;
            }
        }
    }
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// base64 matches RFC 4648's test vectors.
    #[test]
    fn base64_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected);
        }
    }
}
