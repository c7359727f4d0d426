//! `lockscope html`: one self-contained HTML file for writeups, from runs (`.lsp` profiles) and
//! sweeps (`sweep.json` or its directory).
//!
//! Nothing is fetched from the network: styles are inline, the scaling chart is inline SVG
//! ([`crate::chart`]), and each flamegraph is inferno's interactive SVG (click to zoom, Ctrl-F
//! search) embedded as a `data:` URL in an `<iframe>`, so its script and element ids stay apart
//! from the page's and from the other flamegraphs'.
//!
//! The page is a document, readable without its one script (which only sorts long tables on a
//! click and opens folded sections before printing), with print styles, and has, in order:
//!
//! 0. a summary: for the first sweep, the target, kernel and machine, where throughput stops (the
//!    knee, with scaling against the first level), how the threads' time redistributes (the
//!    largest classes of thread time at the first level, the knee and the last), which sites grow
//!    across the knee (in average threads waiting), the finding and the losses; without a sweep,
//!    the first run's waits in threads waiting, where its threads' time went and what grew in the
//!    second run;
//! 1. per sweep: the finding, the scaling chart (with where the threads' time went beneath), a
//!    table per level (throughput, scaling, threads alive, per wait kind the average threads
//!    waiting and the share of thread time, the top site, losses), the table of where the
//!    threads' time went ([`crate::sweep::Breakdown`]), **what changed across the knee** (the knee
//!    level against the last: wait kinds, the growing sites and the differential flamegraph,
//!    [`crate::diff`]), then every level: a selector and one collapsible `<details>` section per
//!    level, open by default, with the level's run (below);
//! 2. diffs: each run against the first one (before the runs: a diff page opens on it), as tables (wait time in average threads waiting
//!    and shares of thread time, from `lockscope diff --json`) and the differential flamegraph;
//! 3. per run (each profile given, and each level of each sweep): the metadata and environment
//!    fingerprint, the flamegraph, and the report ([`crate::report`]'s JSON) as tables: records
//!    by kind, the top sites with their log2 histograms as small SVG bar charts and their stacks
//!    folded behind `<details>`, and each section the profile has (contention, where each thread
//!    group's time went as stacked bars and a table, off-CPU states, system calls, lifecycle,
//!    kernel locks). No `<pre>` text dump.
//!
//! Imported captures (`lockscope import`: sampled CPU time, events, samples) are labelled with
//! what they hold, never as waits.
//!
//! Level sections start open: a flamegraph laid out while hidden would have no width to fit its
//! labels to until the reader opens it (inferno refits them on resize, but open is simplest).

use crate::analysis::fold::{Measure, Weight};
use crate::diff::{write_diff_flamegraph, write_diff_json, DiffOptions};
use crate::render::flamegraph::{write_flamegraph, FlamegraphOptions};
use crate::render::svg::{histogram_svg, time_bars_svg, xml_escape, Bucket, TimeBar};
use crate::render::units::{format_fraction, format_ns, format_threads, format_unix_ns};
use crate::report::{write_report, ReportOptions};
use crate::sweep::chart::{scaling_svg, ChartOptions};
use crate::sweep::{Sweep, NO_BREAKDOWN};
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
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1240px; padding: 0 12px; color: #222; }
h1 { font-size: 24px; } h2 { font-size: 20px; border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 36px; }
h3 { font-size: 16px; margin-top: 20px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #f3f3f3; }
table.sortable th { cursor: pointer; }
table.sortable th[data-order="asc"]::after { content: " ▲"; }
table.sortable th[data-order="desc"]::after { content: " ▼"; }
td.histogram { padding: 2px 6px; }
svg.histogram { display: block; }
details.stack > summary { cursor: pointer; }
ol.frames { margin: 4px 0; padding-left: 22px; font-size: 12px; }
ol.frames li { margin: 1px 0; }
code { font-size: 12px; word-break: break-word; }
.finding { background: #eef6ff; border-left: 4px solid #0072b2; padding: 8px 12px; font-size: 15px; }
.warning { background: #fff4e5; border-left: 4px solid #d55e00; padding: 6px 12px; }
.note { background: #f5f5f5; border-left: 4px solid #999; padding: 6px 12px; font-size: 13px; }
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
table.summary-table { font-size: 14px; }
table.summary-table th { width: 150px; }
@media print {
  body { max-width: none; margin: 0; font-size: 11px; }
  nav, .levels { display: none; }
  h2, h3, h4 { break-after: avoid; }
  tr, svg, section.summary, .finding { break-inside: avoid; }
  iframe.flame { height: 420px; break-inside: avoid; }
  details.level { border: none; padding: 0; }
  a { color: inherit; text-decoration: none; }
  table.sortable th::after { content: none; }
}
"#;

/// The page's only script, and nothing needs it to be read: long tables sort on a click on a
/// header (numbers by their `data-v` value), and printing opens every folded section first.
const SCRIPT: &str = r#"
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('thead th').forEach(function (th, col) {
    th.title = 'sort by this column';
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      var desc = th.getAttribute('data-order') !== 'desc';
      table.querySelectorAll('thead th').forEach(function (h) { h.removeAttribute('data-order'); });
      th.setAttribute('data-order', desc ? 'desc' : 'asc');
      var key = function (row) {
        var cell = row.cells[col];
        if (!cell) { return ''; }
        var v = cell.getAttribute('data-v');
        return v === null ? cell.textContent : parseFloat(v);
      };
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var order = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
        return desc ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
window.addEventListener('beforeprint', function () {
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
});
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
        ("events", {
            let count = profile.waits.iter().map(|w| w.stats.count).sum::<u64>();
            let noun = Measure::of_records(&profile.waits).noun(count);
            format!("{} seen, {count} {noun} recorded", m.events)
        }),
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
    // Imported counts (events, samples) have no times: their widths are the counts.
    let measure = Measure::of_records(&run.profile.waits);
    let mut flamegraph = FlamegraphOptions::default();
    if !measure.is_timed() {
        flamegraph.fold.weight = Weight::Count;
    }
    let _ = writeln!(
        out,
        "<{heading}>Flamegraph ({})</{heading}>",
        xml_escape(measure.width(flamegraph.fold.weight))
    );
    let mut svg = Vec::new();
    match write_flamegraph(run.profile, &flamegraph, &mut svg) {
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

/// A JSON number as `f64`, 0 when absent.
fn json_f64(value: &serde_json::Value, key: &str) -> f64 {
    value
        .get(key)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0)
}

/// A JSON string, `""` when absent.
fn json_str<'a>(value: &'a serde_json::Value, key: &str) -> &'a str {
    value
        .get(key)
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
}

/// A JSON array's elements, none when absent.
fn json_list<'a>(value: &'a serde_json::Value, key: &str) -> &'a [serde_json::Value] {
    value
        .get(key)
        .and_then(serde_json::Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// How a table cell shows a JSON value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cell {
    /// A string as text.
    Text,
    /// A string as code (a function, a lock address).
    Code,
    /// An integer.
    Count,
    /// Nanoseconds (`134 ms`).
    Ns,
    /// A fraction 0 to 1 as a percentage.
    Fraction,
    /// A rate with one decimal.
    Rate,
    /// A list of strings, the first few named.
    List,
    /// An object of counts (`ENOENT 3, EAGAIN 1`).
    Counts,
}

/// Tables with more rows than this get clickable (sortable) headers.
const SORTABLE_ROWS: usize = 8;

/// Opens a table with `headers`; sortable (click a header; readable without the script) when it
/// will hold more than [`SORTABLE_ROWS`] rows.
fn table_open(out: &mut String, class: &str, headers: &[&str], rows: usize) {
    let sortable = if rows > SORTABLE_ROWS {
        " sortable"
    } else {
        ""
    };
    let _ = write!(out, "<table class=\"{class}{sortable}\">\n<thead><tr>");
    for header in headers {
        let _ = write!(out, "<th>{}</th>", xml_escape(header));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
}

fn table_close(out: &mut String) {
    out.push_str("</tbody></table>\n");
}

/// A number cell: `shown`, sorted by `value`.
fn num_cell(value: f64, shown: &str) -> String {
    format!(
        "<td class=\"num\" data-v=\"{value}\">{}</td>",
        xml_escape(shown)
    )
}

/// The cell of `row[key]` shown as `cell`.
fn json_cell(row: &serde_json::Value, key: &str, cell: Cell) -> String {
    let value = row.get(key).unwrap_or(&serde_json::Value::Null);
    match cell {
        Cell::Text => format!("<td>{}</td>", xml_escape(value.as_str().unwrap_or("-"))),
        Cell::Code => format!(
            "<td><code>{}</code></td>",
            xml_escape(value.as_str().unwrap_or("-"))
        ),
        Cell::Count => {
            let n = value.as_u64().unwrap_or(0);
            num_cell(n as f64, &n.to_string())
        }
        Cell::Ns => {
            let ns = value.as_u64().unwrap_or(0);
            num_cell(ns as f64, &format_ns(ns))
        }
        Cell::Fraction => {
            let f = value.as_f64().unwrap_or(0.0);
            num_cell(f, &format_fraction(f))
        }
        Cell::Rate => {
            let r = value.as_f64().unwrap_or(0.0);
            num_cell(r, &format!("{r:.1}"))
        }
        Cell::List => {
            let items: Vec<&str> = value
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
                .unwrap_or_default();
            format!("<td>{}</td>", xml_escape(&named_few(&items, 4)))
        }
        Cell::Counts => {
            let items: Vec<String> = value
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| format!("{k} {}", v.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "<td>{}</td>",
                if items.is_empty() {
                    "-".to_string()
                } else {
                    xml_escape(&items.join(", "))
                }
            )
        }
    }
}

/// `a, b, c and 4 more`.
fn named_few(items: &[&str], few: usize) -> String {
    if items.is_empty() {
        return "-".to_string();
    }
    let mut text = items
        .iter()
        .take(few)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > few {
        let _ = write!(text, " and {} more", items.len() - few);
    }
    text
}

/// A table of JSON `rows`, one column per `(key, header, cell)`; a line saying so when there are
/// none.
fn json_table(
    out: &mut String,
    class: &str,
    columns: &[(&str, &str, Cell)],
    rows: &[serde_json::Value],
) {
    if rows.is_empty() {
        out.push_str("<p class=\"muted\">None.</p>\n");
        return;
    }
    let headers: Vec<&str> = columns.iter().map(|c| c.1).collect();
    table_open(out, class, &headers, rows.len());
    for row in rows {
        out.push_str("<tr>");
        for (key, _, cell) in columns {
            out.push_str(&json_cell(row, key, *cell));
        }
        out.push_str("</tr>\n");
    }
    table_close(out);
}

/// What a report's records measure (`report --json`'s `measure`), in the page's words.
#[derive(Clone, Copy)]
struct Words {
    /// The count's noun, plural (`waits`, `samples`, `events`).
    noun: &'static str,
    /// What the total is (`wait time`, `CPU time`), or `None` for bare counts.
    time: Option<&'static str>,
    /// A site's name (`wait site`, `stack`).
    site: &'static str,
}

impl Words {
    fn of(measure: &str) -> Words {
        match measure {
            "on-cpu" => Words {
                noun: "samples",
                time: Some("CPU time"),
                site: "stack",
            },
            "events" => Words {
                noun: "events",
                time: None,
                site: "stack",
            },
            "samples" => Words {
                noun: "samples",
                time: None,
                site: "stack",
            },
            _ => Words {
                noun: "waits",
                time: Some("wait time"),
                site: "wait site",
            },
        }
    }

    /// What a share is of (`wait time`, `samples`).
    fn whole(self) -> &'static str {
        self.time.unwrap_or(self.noun)
    }
}

/// One frame of `report --json` as a list item: the function (or address), then where.
fn frame_item(frame: &serde_json::Value) -> String {
    let function = frame
        .get("function")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_else(|| json_str(frame, "address"));
    let mut place = String::new();
    let (module, offset) = (json_str(frame, "module"), json_str(frame, "module_offset"));
    if !module.is_empty() {
        let _ = write!(place, "{module}+{offset}");
    }
    let file = json_str(frame, "file");
    if !file.is_empty() {
        let _ = write!(place, " {file}:{}", json_u64(frame, "line"));
    }
    let mut item = String::new();
    for inlined in json_list(frame, "inlined").iter().rev() {
        let _ = write!(
            item,
            "<li><code>{}</code> <span class=\"muted\">inlined, {}:{}</span></li>",
            xml_escape(json_str(inlined, "function")),
            xml_escape(json_str(inlined, "file")),
            json_u64(inlined, "line")
        );
    }
    let _ = write!(
        item,
        "<li><code>{}</code> <span class=\"muted\">{}</span></li>",
        xml_escape(function),
        xml_escape(place.trim())
    );
    item
}

/// What the offcpu probe's stackless states mean, said once beneath a table that has them.
const NO_STACK_NOTE: &str = "Off-CPU time with no user stack is threads preempted or waiting in \
     the run queue for a CPU: the offcpu probe takes no stack there (where a thread runs is a CPU \
     profile's business). It is queueing for a CPU, not waiting for a lock; \"where the time \
     went\" splits it.";

/// A site's stack cell: the first frame past the wait plumbing (else the leaf) with the frame
/// count, and every frame (user, then kernel) folded behind `<details>`. A site without a user
/// stack names its states (`preempted`, `run-queue`) instead.
fn stack_cell(group: &serde_json::Value) -> String {
    let stack = group
        .pointer("/stacks/0")
        .unwrap_or(&serde_json::Value::Null);
    let user = stack
        .pointer("/user/frames")
        .and_then(serde_json::Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let kernel = stack
        .pointer("/kernel/frames")
        .and_then(serde_json::Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let name = |f: &serde_json::Value| {
        f.get("function")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_else(|| json_str(f, "address"))
            .to_string()
    };
    let headline = user
        .iter()
        .map(name)
        .find(|n| !crate::report::sections::is_wait_plumbing(n))
        .or_else(|| user.first().map(name));
    let Some(headline) = headline else {
        let states: Vec<&str> = json_list(group, "locks")
            .iter()
            .map(|l| json_str(l, "operation"))
            .filter(|o| !o.is_empty())
            .collect();
        let mut cell = format!(
            "<td><code>{}</code>",
            xml_escape(crate::analysis::fold::NO_USER_STACK)
        );
        if !states.is_empty() {
            let _ = write!(
                cell,
                " <span class=\"muted\">({})</span>",
                xml_escape(&named_few(&states, 4))
            );
        }
        if !kernel.is_empty() {
            let _ = write!(
                cell,
                "<details class=\"stack\"><summary>kernel stack, {} frames</summary><ol class=\"frames\">",
                kernel.len()
            );
            for frame in kernel {
                cell.push_str(&frame_item(frame));
            }
            cell.push_str("</ol></details>");
        }
        cell.push_str("</td>");
        return cell;
    };
    let mut cell = format!(
        "<td><details class=\"stack\"><summary><code>{}</code> <span class=\"muted\">{} frames{}</span></summary><ol class=\"frames\">",
        xml_escape(&headline),
        user.len() + kernel.len(),
        if stack.pointer("/user/truncated") == Some(&serde_json::Value::Bool(true)) {
            ", cut short"
        } else {
            ""
        }
    );
    for frame in user {
        cell.push_str(&frame_item(frame));
    }
    if !kernel.is_empty() {
        cell.push_str("<li class=\"muted\">kernel:</li>");
        for frame in kernel {
            cell.push_str(&frame_item(frame));
        }
    }
    cell.push_str("</ol></details></td>");
    cell
}

/// Thread names with how many threads have each (`mariadbd ×53, main`).
fn threads_cell(group: &serde_json::Value) -> String {
    let mut names: Vec<(&str, usize)> = Vec::new();
    for thread in json_list(group, "threads") {
        let name = json_str(thread, "name");
        match names.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 += 1,
            None => names.push((name, 1)),
        }
    }
    let items: Vec<String> = names
        .iter()
        .map(|&(name, n)| {
            if n > 1 {
                format!("{name} ×{n}")
            } else {
                name.to_string()
            }
        })
        .collect();
    let items: Vec<&str> = items.iter().map(String::as_str).collect();
    format!("<td>{}</td>", xml_escape(&named_few(&items, 3)))
}

/// A group's log2 histogram as an inline SVG bar chart cell.
fn histogram_cell(group: &serde_json::Value, noun: &str) -> String {
    let buckets: Vec<Bucket> = json_list(group, "histogram")
        .iter()
        .map(|b| Bucket {
            lower_ns: json_u64(b, "lower_ns"),
            count: json_u64(b, "count"),
        })
        .collect();
    format!(
        "<td class=\"histogram\">{}</td>",
        histogram_svg(&buckets, noun)
    )
}

/// A run's report as a document (from `report --json`, so the page shows `lockscope report`'s
/// numbers): the records by kind, the top sites with their distributions as small SVG bar charts
/// and their stacks folded behind `<details>`, then every section the profile has data for
/// (contention, where each thread group's time went, off-CPU states, system calls, lifecycle,
/// kernel locks) as tables. No text dump.
fn report_tables(out: &mut String, profile: &Profile, options: &HtmlOptions, heading: &str) {
    let mut report_options = ReportOptions {
        top: options.top,
        ..ReportOptions::default()
    };
    report_options.json = true;
    let mut json = Vec::new();
    let report: serde_json::Value = match write_report(profile, &report_options, &mut json)
        .map_err(anyhow::Error::from)
        .and_then(|()| serde_json::from_slice(&json).context("the JSON report does not parse"))
    {
        Ok(report) => report,
        Err(e) => {
            let _ = writeln!(
                out,
                r#"<p class="warning">No report: {}</p>"#,
                xml_escape(&format!("{e:#}"))
            );
            return;
        }
    };
    let words = Words::of(json_str(&report, "measure"));
    let capitalized = |s: &str| {
        let mut c = s.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    };
    let _ = writeln!(
        out,
        "<{heading}>{} by kind</{heading}>",
        capitalized(words.noun)
    );
    let share = format!("share of {}", words.whole());
    let mut columns: Vec<(&str, &str, Cell)> = vec![
        ("kind", "kind", Cell::Text),
        ("count", words.noun, Cell::Count),
    ];
    if words.time.is_some() {
        columns.extend([
            ("total_ns", "total", Cell::Ns),
            ("mean_ns", "mean", Cell::Ns),
            ("max_ns", "max", Cell::Ns),
        ]);
    }
    columns.push(("share", &share, Cell::Fraction));
    json_table(out, "report-table", &columns, json_list(&report, "by_kind"));

    let groups = json_list(&report, "groups");
    let _ = writeln!(
        out,
        "<{heading}>Top {} of {} {}s</{heading}>",
        groups.len(),
        json_u64(&report, "groups_total"),
        words.site
    );
    let mut headers = vec!["#", "kind", words.noun];
    if words.time.is_some() {
        headers.extend(["total", &share, "mean", "max", "distribution (log2)"]);
    } else {
        headers.push(&share);
    }
    headers.extend(["threads", "stack (leaf first; open for every frame)"]);
    table_open(out, "report-table sites", &headers, groups.len());
    let mut stackless_offcpu = false;
    for group in groups {
        let kind = group
            .pointer("/key/kind")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("-");
        if group
            .pointer("/stacks/0/user")
            .is_none_or(serde_json::Value::is_null)
            && kind == "off-cpu"
        {
            stackless_offcpu = true;
        }
        let _ = write!(
            out,
            "<tr>{}<td>{}</td>{}",
            json_cell(group, "rank", Cell::Count),
            xml_escape(kind),
            json_cell(group, "count", Cell::Count)
        );
        if words.time.is_some() {
            let _ = write!(
                out,
                "{}{}{}{}{}",
                json_cell(group, "total_ns", Cell::Ns),
                json_cell(group, "share", Cell::Fraction),
                json_cell(group, "mean_ns", Cell::Ns),
                json_cell(group, "max_ns", Cell::Ns),
                histogram_cell(group, words.noun)
            );
        } else {
            out.push_str(&json_cell(group, "share", Cell::Fraction));
        }
        let _ = writeln!(out, "{}{}</tr>", threads_cell(group), stack_cell(group));
    }
    table_close(out);
    if stackless_offcpu {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", xml_escape(NO_STACK_NOTE));
    }
    if let Some(sections) = report.get("sections") {
        section_tables(out, sections, heading);
    }
}

/// The report's sections (`report --json`'s `sections`) as tables, and where each thread
/// group's time went as stacked bars.
fn section_tables(out: &mut String, sections: &serde_json::Value, heading: &str) {
    if let Some(contention) = sections.get("contention") {
        let columns = [
            ("kind", "kind", Cell::Text),
            (
                "frame",
                "site (first frame past the lock plumbing)",
                Cell::Code,
            ),
            ("operation", "operation", Cell::Code),
            ("count", "waits", Cell::Count),
            ("total_ns", "total", Cell::Ns),
            ("max_ns", "max", Cell::Ns),
            ("threads", "threads", Cell::List),
        ];
        let _ = writeln!(out, "<{heading}>Lock contention</{heading}>");
        json_table(
            out,
            "section-table",
            &columns,
            json_list(contention, "sites"),
        );
        let idle = json_list(contention, "idle");
        if !idle.is_empty() {
            let _ = writeln!(
                out,
                "<p class=\"muted\">Idle waits, apart: a thread parked most of its window at one site (a pool waiting for work).</p>"
            );
            json_table(out, "section-table", &columns, idle);
        }
    }
    if let Some(breakdown) = sections.get("breakdown") {
        let _ = writeln!(
            out,
            "<{heading}>Where the time went, per thread group (share of thread time)</{heading}>"
        );
        let mut rows: Vec<&serde_json::Value> =
            json_list(breakdown, "by_name").iter().take(12).collect();
        if let Some(total) = breakdown.get("total") {
            rows.push(total);
        }
        let bars: Vec<TimeBar> = rows
            .iter()
            .map(|row| TimeBar {
                label: match json_u64(row, "threads") {
                    1 => format!("{} (1 thread)", json_str(row, "name")),
                    n => format!("{} ({n} threads)", json_str(row, "name")),
                },
                time_ns: TimeClass::ALL
                    .iter()
                    .map(|&class| {
                        (
                            class,
                            row.pointer(&format!("/time_ns/{}", class.name()))
                                .and_then(serde_json::Value::as_u64)
                                .unwrap_or(0),
                        )
                    })
                    .collect(),
                whole_ns: json_u64(row, "wall_ns"),
            })
            .collect();
        let _ = writeln!(
            out,
            "<div class=\"time-bars\">{}</div>",
            time_bars_svg(&bars)
        );
        let mut headers = vec!["thread group", "threads", "thread time"];
        headers.extend(TimeClass::ALL.iter().map(|c| c.name()));
        headers.extend(["switches/s", "involuntary"]);
        table_open(out, "section-table breakdown-table", &headers, rows.len());
        for (row, bar) in rows.iter().zip(&bars) {
            let _ = write!(
                out,
                "<tr><td>{}</td>{}{}",
                xml_escape(json_str(row, "name")),
                json_cell(row, "threads", Cell::Count),
                json_cell(row, "wall_ns", Cell::Ns)
            );
            for (_, ns) in &bar.time_ns {
                let fraction = if bar.whole_ns == 0 {
                    0.0
                } else {
                    *ns as f64 / bar.whole_ns as f64
                };
                out.push_str(&num_cell(fraction, &format_fraction(fraction)));
            }
            let _ = writeln!(
                out,
                "{}{}</tr>",
                json_cell(row, "switches_per_s", Cell::Rate),
                json_cell(row, "involuntary_share", Cell::Fraction)
            );
        }
        table_close(out);
    }
    if let Some(offcpu) = sections.get("offcpu") {
        let _ = writeln!(
            out,
            "<{heading}>Off-CPU time by state and system call</{heading}>"
        );
        json_table(
            out,
            "section-table",
            &[
                ("operation", "state", Cell::Code),
                ("count", "intervals", Cell::Count),
                ("total_ns", "total", Cell::Ns),
                ("max_ns", "max", Cell::Ns),
            ],
            json_list(offcpu, "by_operation"),
        );
        let wakeups = json_list(offcpu, "wakeups");
        if !wakeups.is_empty() {
            let _ = writeln!(out, "<p>Heaviest wakers of sleeping threads:</p>");
            json_table(
                out,
                "section-table",
                &[
                    ("waker", "waker", Cell::Text),
                    ("sleeper", "sleeper", Cell::Text),
                    ("count", "wakeups", Cell::Count),
                    ("total_ns", "sleep ended", Cell::Ns),
                ],
                wakeups,
            );
        }
    }
    let simple = [
        (
            "syscall",
            "System calls",
            &[
                ("syscall", "system call", Cell::Code),
                ("calls", "calls", Cell::Count),
                ("errors", "errors", Cell::Counts),
                ("total_ns", "total", Cell::Ns),
                ("mean_ns", "mean", Cell::Ns),
                ("max_ns", "max", Cell::Ns),
                ("p99_upper_ns", "p99≤", Cell::Ns),
                ("slowest_site", "slowest call's site", Cell::Code),
            ][..],
        ),
        (
            "lifecycle",
            "Processes and threads",
            &[
                ("operation", "operation", Cell::Code),
                ("count", "count", Cell::Count),
                ("per_second", "per second", Cell::Rate),
                ("failed", "failed", Cell::Count),
                ("total_ns", "total", Cell::Ns),
                ("mean_ns", "mean", Cell::Ns),
                ("max_ns", "max", Cell::Ns),
                ("top_site", "heaviest caller", Cell::Code),
            ][..],
        ),
        (
            "klock",
            "Kernel locks",
            &[
                ("lock_type", "type", Cell::Text),
                ("address", "address", Cell::Code),
                ("count", "waits", Cell::Count),
                ("total_ns", "total", Cell::Ns),
                ("max_ns", "max", Cell::Ns),
                ("caller", "caller", Cell::Code),
                ("threads", "threads", Cell::List),
            ][..],
        ),
    ];
    for (key, title, columns) in simple {
        if let Some(rows) = sections.get(key).and_then(serde_json::Value::as_array) {
            let _ = writeln!(out, "<{heading}>{title}</{heading}>");
            json_table(out, "section-table", columns, rows);
        }
    }
}

/// The value of one side of a diff row in the page's unit: average threads waiting (on CPU for
/// imported CPU time) per second of wall time, else the normalized value with its unit.
fn diff_value(values: &serde_json::Value, unit: &str) -> (f64, String) {
    let normalized = json_f64(values, "normalized");
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
fn diff_change(delta: &serde_json::Value, unit: &str) -> (f64, String) {
    let change = json_f64(delta, "normalized");
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
fn page_diff_options(a: &Run<'_>, b: &Run<'_>, labels: (&str, &str)) -> DiffOptions {
    DiffOptions {
        top: 0,
        labels: (labels.0.to_string(), labels.1.to_string()),
        title: Some(format!("{} → {}", a.label, b.label)),
        ..DiffOptions::default()
    }
}

/// The JSON comparison of `a` with `b` (`lockscope diff --json`, every stack, sides named
/// `labels`), or why there is none.
fn diff_json(a: &Run<'_>, b: &Run<'_>, labels: (&str, &str)) -> anyhow::Result<serde_json::Value> {
    let options = page_diff_options(a, b, labels);
    let mut json = Vec::new();
    write_diff_json(
        a.profile,
        b.profile,
        (&a.label, &b.label),
        &options,
        &mut json,
    )?;
    serde_json::from_slice(&json).context("the JSON diff does not parse")
}

/// A diff's unit words: the column header of a side's value.
fn diff_unit_header(diff: &serde_json::Value) -> (String, &'static str) {
    let mut unit = diff
        .pointer("/normalization/unit")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("ns/s")
        .to_string();
    let no_duration = ["/a/duration_ns", "/b/duration_ns"]
        .iter()
        .any(|side| diff.pointer(side).and_then(serde_json::Value::as_u64) == Some(0));
    if unit == "ns/s" && no_duration {
        // Per second of nothing: `lockscope diff` then compares raw totals (and warns).
        unit = RAW_NS.to_string();
    }
    let header = match (unit.as_str(), json_str(diff, "measure")) {
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
const RAW_NS: &str = "ns";

/// The canonical stacks of `diff` that grew from A to B, largest growth first.
fn growing_stacks(diff: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut rows: Vec<&serde_json::Value> = json_list(diff, "stacks")
        .iter()
        .filter(|s| {
            s.pointer("/delta/normalized")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0)
                > 0
        })
        .collect();
    rows.sort_by_key(|s| {
        std::cmp::Reverse(
            s.pointer("/delta/normalized")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0),
        )
    });
    rows
}

/// A canonical stack cell: its last four frames, with every frame folded behind `<details>`.
fn canonical_stack_cell(stack: &str) -> String {
    let frames: Vec<&str> = stack.split(';').collect();
    let mut cell = format!(
        "<td><details class=\"stack\"><summary><code>{}</code></summary><ol class=\"frames\">",
        xml_escape(&crate::sweep::short_site(stack))
    );
    for frame in frames {
        let _ = write!(cell, "<li><code>{}</code></li>", xml_escape(frame));
    }
    cell.push_str("</ol></details></td>");
    cell
}

/// Which rows a diff's site table shows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SiteRows {
    /// The top 10 by absolute change.
    LargestChange,
    /// The top 10 that grew, largest growth first.
    Growing,
}

/// A diff's warnings, its kinds and its sites as tables, in average threads waiting when
/// normalized per second.
fn diff_tables(out: &mut String, diff: &serde_json::Value, rows: SiteRows) {
    for warning in json_list(diff, "warnings")
        .iter()
        .filter_map(serde_json::Value::as_str)
    {
        let _ = writeln!(
            out,
            r#"<p class="warning">WARNING: {}</p>"#,
            xml_escape(warning)
        );
    }
    let (unit, header) = diff_unit_header(diff);
    let (la, lb) = (
        diff.pointer("/a/label")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("A"),
        diff.pointer("/b/label")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("B"),
    );
    let noun = Words::of(json_str(diff, "measure")).noun;
    let row = |out: &mut String, name_cell: String, row: &serde_json::Value| {
        let (a, b, delta) = (
            row.get("a").cloned().unwrap_or_default(),
            row.get("b").cloned().unwrap_or_default(),
            row.get("delta").cloned().unwrap_or_default(),
        );
        let cell = |(v, text): (f64, String)| num_cell(v, &text);
        let share = |side: &serde_json::Value| match side
            .get("share_of_thread_time")
            .and_then(serde_json::Value::as_f64)
        {
            Some(f) => num_cell(f, &format_fraction(f)),
            None => "<td class=\"num muted\">-</td>".to_string(),
        };
        let _ = writeln!(
            out,
            "<tr>{name_cell}{}{}{}{}{}{}{}</tr>",
            json_cell(&a, "count", Cell::Count),
            json_cell(&b, "count", Cell::Count),
            cell(diff_value(&a, &unit)),
            cell(diff_value(&b, &unit)),
            share(&a),
            share(&b),
            cell(diff_change(&delta, &unit))
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
    let kinds = json_list(diff, "by_kind");
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
            format!("<td>{}</td>", xml_escape(json_str(kind, "kind"))),
            kind,
        );
    }
    table_close(out);
    let sites: Vec<&serde_json::Value> = match rows {
        SiteRows::LargestChange => json_list(diff, "stacks").iter().take(10).collect(),
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
        row(out, canonical_stack_cell(json_str(site, "stack")), site);
    }
    table_close(out);
    if sites.is_empty() {
        let _ = writeln!(out, "<p class=\"muted\">No site grew.</p>");
    }
}

/// Two runs compared, their sides named `labels`.
struct Comparison<'r, 'p> {
    a: &'r Run<'p>,
    b: &'r Run<'p>,
    labels: (&'r str, &'r str),
    /// Say which run each label names (`A: a.lsp; B: b.lsp`): labels that do not say it.
    name_sides: bool,
}

/// Where both sides' threads' time went, one stacked bar per side (all threads); empty when
/// neither side has the offcpu probe's per-thread times.
fn sides_time_bars(comparison: &Comparison<'_, '_>) -> String {
    let sides = [
        (comparison.labels.0, comparison.a),
        (comparison.labels.1, comparison.b),
    ];
    let bars: Vec<TimeBar> = sides
        .iter()
        .filter_map(|(label, run)| {
            let b = crate::sweep::Breakdown::of(run.profile)?;
            Some(TimeBar {
                label: format!(
                    "{label} ({} alive)",
                    format_threads(b.avg_threads).trim_end_matches(" threads")
                ),
                time_ns: TimeClass::ALL
                    .iter()
                    .map(|&class| (class, b.class(class.name()).map_or(0, |c| c.total_ns)))
                    .collect(),
                whole_ns: b.thread_ns,
            })
        })
        .collect();
    if bars.is_empty() {
        return String::new();
    }
    format!(
        "<p class=\"muted\">Where the threads' time went on each side (share of thread time):</p>\n<div class=\"time-bars\">{}</div>\n",
        time_bars_svg(&bars)
    )
}

/// A comparison of two runs: its tables (from `lockscope diff --json`) and the differential
/// flamegraph, under an `<h2>` or `<h3>` heading.
fn diff_section(
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
    match diff_json(a, b, labels) {
        Ok(diff) => diff_tables(out, &diff, rows),
        Err(e) => {
            let _ = writeln!(
                out,
                "<p class=\"muted\">No comparison: {}</p>",
                xml_escape(&format!("{e:#}"))
            );
            return;
        }
    }
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
                xml_escape(&format!("{e:#}"))
            );
        }
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
            "<tr><td class=\"num\">{}{}</td><td class=\"num\">{:.1}</td><td class=\"num scaling\">{:.0}%</td><td class=\"num\">{}</td>",
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
    let stackless = format!("{};[off-cpu]", crate::analysis::fold::NO_USER_STACK);
    if sweep
        .levels
        .iter()
        .any(|l| l.top_sites.first().is_some_and(|s| s.name == stackless))
    {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", xml_escape(NO_STACK_NOTE));
    }
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

/// The rows every summary starts with: the input, the target, its kernel and machine.
fn summary_head(label: &str, profile: &Profile) -> Vec<(String, String)> {
    let m = &profile.metadata;
    let target = if m.target.command.is_empty() {
        format!("imported ({})", m.end_reason)
    } else {
        format!("{} (pid {})", m.target.command.join(" "), m.target.pid)
    };
    vec![
        ("input".into(), label.to_string()),
        ("target".into(), target),
        ("kernel".into(), format!("{} {}", m.os, m.kernel_release)),
        (
            "machine".into(),
            format!(
                "{}, {} CPUs, {}",
                m.hostname,
                m.cpu_count,
                m.libc.clone().unwrap_or_else(|| "libc unknown".into())
            ),
        ),
    ]
}

/// The largest classes of a breakdown, in words: `run-queue 77.0%, futex 6.8%, poll 5.3%`.
fn largest_classes(breakdown: &crate::sweep::Breakdown, n: usize) -> String {
    let mut classes: Vec<&crate::sweep::ClassTime> = breakdown.classes.iter().collect();
    classes.sort_by(|a, b| b.share_of_thread_time.total_cmp(&a.share_of_thread_time));
    classes
        .iter()
        .take(n)
        .map(|c| format!("{} {}", c.name, format_fraction(c.share_of_thread_time)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The growing sites of a diff, in words: `…;f;[kernel wait];[mutex] +0.92 threads waiting
/// (0.10 → 1.02)`, the first `n`.
fn growth_words(diff: &serde_json::Value, n: usize) -> String {
    let (unit, _) = diff_unit_header(diff);
    let grown: Vec<String> = growing_stacks(diff)
        .into_iter()
        .take(n)
        .map(|s| {
            let stack = json_str(s, "stack");
            let (_, from) = diff_value(s.get("a").unwrap_or(&serde_json::Value::Null), &unit);
            let (_, to) = diff_value(s.get("b").unwrap_or(&serde_json::Value::Null), &unit);
            let (_, change) =
                diff_change(s.get("delta").unwrap_or(&serde_json::Value::Null), &unit);
            let mut text = format!(
                "{} {change} ({} → {to})",
                crate::sweep::short_site(stack),
                from.trim_end_matches(" threads")
            );
            if stack.ends_with(&format!(
                "{};[off-cpu]",
                crate::analysis::fold::NO_USER_STACK
            )) {
                text.push_str(" [preempted or in the run queue: waiting for a CPU]");
            }
            text
        })
        .collect();
    if grown.is_empty() {
        "no site grew".to_string()
    } else {
        grown.join("; ")
    }
}

/// The summary rows of a sweep: where throughput stops, how the threads' time redistributes
/// (first level, knee, last level), which sites grow across the knee (`knee_diff`: the knee
/// level against the last), and the finding.
fn sweep_summary(sweep: &Sweep, knee_diff: Option<&serde_json::Value>) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let (Some(first), Some(last)) = (sweep.levels.first(), sweep.levels.last()) else {
        return rows;
    };
    let unit = &sweep.throughput_unit;
    rows.push((
        "throughput stops".into(),
        match &sweep.knee {
            Some(knee) => format!(
                "at concurrency {}: {:.1} {unit}, {:.0}% of concurrency {} (scaling: concurrency {} = 100%); at {}: {:.1} {unit}, {:.0}% of concurrency {}",
                knee.concurrency,
                knee.throughput,
                knee.scaling * 100.0,
                first.concurrency,
                first.concurrency,
                last.concurrency,
                last.throughput,
                last.scaling * 100.0,
                first.concurrency
            ),
            None => format!(
                "it does not: throughput still rises at concurrency {} ({:.1} {unit}, {:.0}% of concurrency {})",
                last.concurrency,
                last.throughput,
                last.scaling * 100.0,
                first.concurrency
            ),
        },
    ));
    let knee_level = sweep
        .knee
        .as_ref()
        .and_then(|k| sweep.levels.iter().find(|l| l.concurrency == k.concurrency));
    let mut shown: Vec<&crate::sweep::Level> = vec![first];
    shown.extend(knee_level);
    shown.push(last);
    shown.dedup_by_key(|l| l.concurrency);
    let time: Vec<String> = shown
        .iter()
        .map(|level| match &level.breakdown {
            Some(b) => format!(
                "at {}{} ({} alive): {}",
                level.concurrency,
                if knee_level.is_some_and(|k| k.concurrency == level.concurrency) {
                    " (knee)"
                } else {
                    ""
                },
                format_threads(b.avg_threads),
                largest_classes(b, 3)
            ),
            None => format!("at {}: {NO_BREAKDOWN}", level.concurrency),
        })
        .collect();
    rows.push((
        "threads' time (share of thread time)".into(),
        time.join("; "),
    ));
    if let Some(diff) = knee_diff {
        let from = knee_level.unwrap_or(first).concurrency;
        rows.push((
            format!(
                "grows from {from} to {} (threads waiting)",
                last.concurrency
            ),
            growth_words(diff, 3),
        ));
    }
    rows.push(("finding".into(), sweep.finding.clone()));
    rows
}

/// The summary rows of a single run: its records and where its threads' time went.
fn run_summary(profile: &Profile) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let measure = Measure::of_records(&profile.waits);
    let totals = profile.totals_by_kind();
    let count: u64 = totals.values().map(|s| s.count).sum();
    let wall_ns = profile.metadata.duration_ns;
    let mut kinds: Vec<_> = totals.iter().collect();
    kinds.sort_by_key(|(_, s)| std::cmp::Reverse(s.total_ns));
    let mut text = format!(
        "{count} {} over {}",
        measure.noun(count),
        format_ns(wall_ns)
    );
    if measure.is_timed() && wall_ns > 0 {
        let doing = if measure == Measure::Waits {
            "waiting"
        } else {
            "on CPU"
        };
        let parts: Vec<String> = kinds
            .iter()
            .take(3)
            .map(|(kind, s)| {
                format!(
                    "{kind}: {} {doing} on average",
                    format_threads(s.total_ns as f64 / wall_ns as f64)
                )
            })
            .collect();
        let _ = write!(text, "; {}", parts.join(", "));
    }
    rows.push((measure.noun(2).to_string(), text));
    if measure == Measure::Waits && wall_ns > 0 {
        let mut sites: Vec<(String, u64)> = crate::analysis::canonical::canonical_sites(profile)
            .into_iter()
            .map(|(site, stats)| (site, stats.total_ns))
            .collect();
        sites.sort_by_key(|(site, ns)| (std::cmp::Reverse(*ns), site.clone()));
        let top: Vec<String> = sites
            .iter()
            .take(3)
            .map(|(site, ns)| {
                let mut text = format!(
                    "{} {}",
                    crate::sweep::short_site(site),
                    format_threads(*ns as f64 / wall_ns as f64)
                );
                if site.ends_with(&format!(
                    "{};[off-cpu]",
                    crate::analysis::fold::NO_USER_STACK
                )) {
                    text.push_str(" [preempted or in the run queue: waiting for a CPU]");
                }
                text
            })
            .collect();
        rows.push(("top wait sites (threads waiting)".into(), top.join("; ")));
    }
    if let Some(b) = crate::sweep::Breakdown::of(profile) {
        rows.push((
            "threads' time (share of thread time)".into(),
            format!(
                "{} alive on average: {}",
                format_threads(b.avg_threads),
                largest_classes(&b, 4)
            ),
        ));
    }
    rows
}

/// Where each thread group's time went (threads named alike, digits merged: `worker-*`), as
/// stacked bars for the summary; empty without the offcpu probe's per-thread times.
fn thread_group_bars(profile: &Profile) -> String {
    let mut groups: Vec<(String, u64, TimeBar)> = Vec::new();
    for time in &profile.thread_times {
        let name = crate::analysis::canonical::thread_group(
            profile
                .thread_name(time.pid, time.tid)
                .unwrap_or(crate::analysis::fold::UNKNOWN_THREAD),
        );
        let index = match groups.iter().position(|(n, _, _)| *n == name) {
            Some(i) => i,
            None => {
                groups.push((
                    name.clone(),
                    0,
                    TimeBar {
                        label: String::new(),
                        time_ns: TimeClass::ALL.iter().map(|&c| (c, 0)).collect(),
                        whole_ns: 0,
                    },
                ));
                groups.len() - 1
            }
        };
        let (_, threads, bar) = &mut groups[index];
        *threads += 1;
        bar.whole_ns = bar.whole_ns.saturating_add(time.wall_ns);
        for (class, ns) in &mut bar.time_ns {
            *ns = ns.saturating_add(time.ns(*class));
        }
    }
    if groups.is_empty() {
        return String::new();
    }
    groups.sort_by_key(|(name, _, bar)| (std::cmp::Reverse(bar.whole_ns), name.clone()));
    let bars: Vec<TimeBar> = groups
        .into_iter()
        .take(8)
        .map(|(name, threads, mut bar)| {
            bar.label = match threads {
                1 => format!("{name} (1 thread)"),
                n => format!("{name} ({n} threads)"),
            };
            bar
        })
        .collect();
    format!(
        "<p class=\"muted\">Where each thread group's time went (share of thread time):</p>\n<div class=\"time-bars\">{}</div>\n",
        time_bars_svg(&bars)
    )
}

/// The losses row: waits lost and stacks not walked over `profiles`, and the sweep's warnings.
fn losses_row(profiles: &[&Profile], warnings: &[String]) -> (String, String) {
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
    if !warnings.is_empty() {
        let _ = write!(losses, "; warnings: {}", warnings.join("; "));
    }
    ("losses".into(), losses)
}

/// Each level's thread time stacked by class, one bar per level (the chart's bottom panel,
/// small enough for the summary); empty when no level has a breakdown.
fn level_time_bars(sweep: &Sweep) -> String {
    let bars: Vec<TimeBar> = sweep
        .levels
        .iter()
        .filter_map(|level| {
            let b = level.breakdown.as_ref()?;
            Some(TimeBar {
                label: format!(
                    "concurrency {} ({} alive)",
                    level.concurrency,
                    format_threads(b.avg_threads).trim_end_matches(" threads")
                ),
                time_ns: TimeClass::ALL
                    .iter()
                    .map(|&class| (class, b.class(class.name()).map_or(0, |c| c.total_ns)))
                    .collect(),
                whole_ns: b.thread_ns,
            })
        })
        .collect();
    if bars.is_empty() {
        return String::new();
    }
    format!(
        "<p class=\"muted\">Where the threads' time went at each level (share of thread time):</p>\n<div class=\"time-bars\">{}</div>\n",
        time_bars_svg(&bars)
    )
}

/// The summary at the top of the page: what a reader of a writeup looks at before anything
/// else; `after` follows the table (the levels' time bars of a sweep).
fn summary_section(out: &mut String, rows: &[(String, String)], after: &str) {
    out.push_str("<section class=\"summary\" id=\"summary\">\n<h2>Summary</h2>\n<table class=\"summary-table\">\n");
    for (key, value) in rows {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            xml_escape(key),
            xml_escape(value)
        );
    }
    out.push_str("</table>\n");
    out.push_str(after);
    out.push_str("</section>\n");
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

/// The indexes (in the sweep's order) of the levels compared across the knee: the knee and the
/// last level, or the first and the last when there is no knee; `None` with fewer than two.
fn knee_pair(sweep: &Sweep) -> Option<(usize, usize)> {
    let last = sweep.levels.len().checked_sub(1).filter(|&l| l > 0)?;
    let from = sweep
        .knee
        .as_ref()
        .and_then(|k| {
            sweep
                .levels
                .iter()
                .position(|l| l.concurrency == k.concurrency)
        })
        .unwrap_or(0);
    (from < last).then_some((from, last))
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
                profiles.push((format!("concurrency {}", level.concurrency), profile));
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
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>",
        xml_escape(&options.title)
    );
    let _ = writeln!(out, "<h1>{}</h1>", xml_escape(&options.title));
    let recorded_waits = runs
        .iter()
        .chain(level_runs.iter().flat_map(|(_, runs)| runs))
        .any(|r| Measure::of_records(&r.profile.waits) == Measure::Waits);
    let _ = writeln!(
        out,
        "<p class=\"muted\">Written by lockscope {}. {}Flamegraphs: click a frame to zoom, Ctrl-F to search. Long tables sort by a click on their headers.</p>",
        env!("CARGO_PKG_VERSION"),
        if recorded_waits {
            "Wait time is in average threads waiting (wait time over wall time) and shares of thread time (0 to 100%); scaling is throughput against the first level (100% = one). "
        } else {
            "Imported captures: their records are samples of CPU time, counted events or bare samples. "
        }
    );

    // The summary first: the first sweep's (with what grew across its knee), else the first
    // run's (with what grew in the second run, when there is one).
    let first_sweep = inputs
        .iter()
        .enumerate()
        .find_map(|(i, input)| match input {
            Input::Sweep { path, sweep, .. } => Some((i, path, sweep)),
            Input::Run { .. } => None,
        });
    match first_sweep {
        Some((i, path, sweep)) => {
            let level_runs: &[Run<'_>] = level_runs
                .iter()
                .find(|(index, _)| *index == i)
                .map_or(&[], |(_, runs)| runs.as_slice());
            let profiles: Vec<&Profile> = level_runs.iter().map(|r| r.profile).collect();
            let knee_diff = knee_pair(sweep).and_then(|(from, to)| {
                let labels = (
                    format!("at {}", sweep.levels[from].concurrency),
                    format!("at {}", sweep.levels[to].concurrency),
                );
                diff_json(&level_runs[from], &level_runs[to], (&labels.0, &labels.1)).ok()
            });
            let mut rows = profiles
                .first()
                .map(|p| summary_head(&format!("sweep {}", path.display()), p))
                .unwrap_or_default();
            rows.extend(sweep_summary(sweep, knee_diff.as_ref()));
            rows.push(losses_row(&profiles, &sweep.warnings));
            summary_section(&mut out, &rows, &level_time_bars(sweep));
        }
        None => {
            if let Some(run) = runs.first() {
                let input = match runs.get(1) {
                    Some(second) => format!("A: run {}; B: run {}", run.label, second.label),
                    None => format!("run {}", run.label),
                };
                let mut rows = summary_head(&input, run.profile);
                let after = match runs.get(1) {
                    None => {
                        rows.extend(run_summary(run.profile));
                        thread_group_bars(run.profile)
                    }
                    Some(second) => {
                        // Both sides' waits and time, then what grew: the top sites are the
                        // comparison's.
                        for (label, side) in [("A", run), ("B", second)] {
                            rows.extend(
                                run_summary(side.profile)
                                    .into_iter()
                                    .filter(|(key, _)| !key.starts_with("top "))
                                    .map(|(key, value)| (format!("{key} in {label}"), value)),
                            );
                        }
                        if let Ok(diff) = diff_json(run, second, ("A", "B")) {
                            let (unit, header) = diff_unit_header(&diff);
                            let unit = if unit == "ns/s" || unit == RAW_NS {
                                header.replace(" (average)", "")
                            } else {
                                unit
                            };
                            rows.push((
                                format!("grows from A to B ({unit})"),
                                growth_words(&diff, 3),
                            ));
                        }
                        sides_time_bars(&Comparison {
                            a: run,
                            b: second,
                            labels: ("A", "B"),
                            name_sides: true,
                        })
                    }
                };
                let profiles: Vec<&Profile> = runs.iter().map(|r| r.profile).collect();
                rows.push(losses_row(&profiles, &[]));
                summary_section(&mut out, &rows, &after);
            }
        }
    }

    // Contents.
    out.push_str("<nav><ul>\n");
    for (i, input) in inputs.iter().enumerate() {
        if let Input::Sweep { path, sweep, .. } = input {
            let _ = write!(
                out,
                r##"<li><a href="#{}">Sweep: {}</a>; <a href="#{}-knee">across the knee</a>; levels:"##,
                anchor("sweep", i),
                xml_escape(&path.display().to_string()),
                anchor("sweep", i)
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
    for (i, run) in runs.iter().enumerate().skip(1) {
        let _ = writeln!(
            out,
            r##"<li><a href="#{}">Diff: {} → {}</a></li>"##,
            anchor("diff", i - 1),
            xml_escape(&runs[0].label),
            xml_escape(&run.label)
        );
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
            let id = anchor("sweep", i);
            sweep_section(&mut out, &id, &path.display().to_string(), sweep);
            let Some((_, runs)) = level_runs.iter().find(|(index, _)| *index == i) else {
                continue;
            };
            if let Some((from, to)) = knee_pair(sweep) {
                let title = format!(
                    "What changed across the knee: concurrency {} → {}",
                    sweep.levels[from].concurrency, sweep.levels[to].concurrency
                );
                let title = if sweep.knee.is_some() {
                    title
                } else {
                    title.replace(
                        "across the knee",
                        "from the first level to the last (no knee)",
                    )
                };
                let labels = (
                    format!("at {}", sweep.levels[from].concurrency),
                    format!("at {}", sweep.levels[to].concurrency),
                );
                let comparison = Comparison {
                    a: &runs[from],
                    b: &runs[to],
                    labels: (&labels.0, &labels.1),
                    name_sides: false,
                };
                diff_section(
                    &mut out,
                    (&format!("{id}-knee"), &title, "h3"),
                    &comparison,
                    SiteRows::Growing,
                );
            }
            levels_section(&mut out, i, sweep, runs, options);
        }
    }
    // The comparisons before the runs they compare: what a reader of a diff looks for first.
    if let Some((first, rest)) = runs.split_first() {
        for (i, run) in rest.iter().enumerate() {
            let comparison = Comparison {
                a: first,
                b: run,
                labels: ("A", "B"),
                name_sides: true,
            };
            diff_section(
                &mut out,
                (
                    &anchor("diff", i),
                    &format!("Diff: {} → {}", first.label, run.label),
                    "h2",
                ),
                &comparison,
                SiteRows::LargestChange,
            );
        }
    }
    for (i, run) in runs.iter().enumerate() {
        run_section(&mut out, &anchor("run", i), run, options);
    }
    let _ = writeln!(out, "<script>{SCRIPT}</script>\n</body>\n</html>");
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
