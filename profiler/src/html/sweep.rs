//! A sweep's section: the finding, the scaling chart, the table per level, where the threads'
//! time went, and every level's run behind a selector.

use super::page::anchor;
use super::report::NO_STACK_NOTE;
use super::run::{run_body, Run};
use super::HtmlOptions;
use crate::render::svg::xml_escape;
use crate::render::units::{format_fraction, format_ns, format_threads};
use crate::sweep::chart::{scaling_svg, ChartOptions};
use crate::sweep::{Sweep, NO_BREAKDOWN};
use lockscope_probes::TimeClass;
use std::fmt::Write as _;

pub(super) fn sweep_section(out: &mut String, id: &str, path: &str, sweep: &Sweep) {
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
pub(super) fn time_table(out: &mut String, sweep: &Sweep) {
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

/// The id of the section of level number `index` (in run order) of sweep input `sweep`.
pub(super) fn level_anchor(sweep: usize, index: usize) -> String {
    format!("{}-level-{index}", anchor("sweep", sweep))
}

/// Every level of a sweep: a selector (one link per level) and one collapsible section per level
/// with its run. `runs` are the levels' runs, in the sweep's order.
pub(super) fn levels_section(
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
pub(super) fn knee_pair(sweep: &Sweep) -> Option<(usize, usize)> {
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
