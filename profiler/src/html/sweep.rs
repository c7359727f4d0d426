//! A sweep's section: the finding, the scaling chart, the table per level, where the threads'
//! time went, and every level's run behind a selector; and two sweeps compared
//! ([`sweeps_compared`]: both curves on one chart, both per level, the differential causes where
//! the curves part).

use super::diff::why_diff_table;
use super::page::anchor;
use super::report::NO_STACK_NOTE;
use super::run::{run_body, Run};
use super::HtmlOptions;
use crate::render::svg::xml_escape;
use crate::render::units::{format_fraction, format_ns, format_threads};
use crate::sweep::chart::{compare_svg, scaling_svg, shared_axis, ChartOptions};
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
            xml_escape(&crate::render::sites::site_label(
                &top,
                crate::render::frames::TEXT_WIDTH
            )),
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
            .map(|s| crate::render::sites::site_label(&s.name, crate::render::frames::TEXT_WIDTH))
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

/// One sweep of a comparison: its label (`A`, `B`), the sweep and its levels' runs.
pub(super) type SweepSide<'s, 'r, 'p> = (&'s str, &'s Sweep, &'r [Run<'p>]);

/// The concurrency level, of those both sweeps have, where their scaling differs most (the
/// curves part), with each sweep's level index there.
pub(super) fn parting_level(a: &Sweep, b: &Sweep) -> Option<(u32, usize, usize)> {
    a.levels
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let j = b
                .levels
                .iter()
                .position(|m| m.concurrency == l.concurrency)?;
            Some((l.concurrency, i, j, (l.scaling - b.levels[j].scaling).abs()))
        })
        .max_by(|x, y| x.3.total_cmp(&y.3).then(y.0.cmp(&x.0)))
        .map(|(c, i, j, _)| (c, i, j))
}

/// Two sweeps compared (`lockscope html SWEEP_A SWEEP_B`): both throughput curves on one chart,
/// a table of both per concurrency level, and the differential causes (`lockscope why`) at the
/// level where the scaling differs most, when both sweeps recorded the bottleneck analysis there.
pub(super) fn sweeps_compared(
    out: &mut String,
    id: &str,
    a: SweepSide<'_, '_, '_>,
    b: SweepSide<'_, '_, '_>,
) {
    let _ = writeln!(out, r#"<h2 id="{id}">Two sweeps compared</h2>"#);
    let _ = writeln!(
        out,
        "<p class=\"muted\">A: {}; B: {}.</p>",
        xml_escape(a.0),
        xml_escape(b.0)
    );
    out.push_str(r#"<div class="chart">"#);
    out.push_str(&compare_svg(("A", a.1), ("B", b.1)));
    out.push_str("</div>\n");
    out.push_str(
        "<table class=\"levels-table sweeps-table\">\n<tr><th>concurrency</th><th>A throughput</th>\
         <th>B throughput</th><th>A scaling (first=100%)</th><th>B scaling (first=100%)</th></tr>\n",
    );
    for c in shared_axis(a.1, b.1) {
        let cells = |f: &dyn Fn(&crate::sweep::Level) -> String| {
            [a.1, b.1].map(|sweep| {
                sweep
                    .levels
                    .iter()
                    .find(|l| l.concurrency == c)
                    .map_or_else(|| "-".to_string(), f)
            })
        };
        let [tp_a, tp_b] = cells(&|l| format!("{:.1}", l.throughput));
        let [sc_a, sc_b] = cells(&|l| format!("{:.0}%", l.scaling * 100.0));
        let _ = writeln!(
            out,
            "<tr><td class=\"num\">{c}</td><td class=\"num\">{tp_a}</td><td class=\"num\">{tp_b}</td>\
             <td class=\"num scaling\">{sc_a}</td><td class=\"num scaling\">{sc_b}</td></tr>"
        );
    }
    out.push_str("</table>\n");
    let Some((c, i, j)) = parting_level(a.1, b.1) else {
        out.push_str("<p class=\"muted\">The sweeps share no concurrency level.</p>\n");
        return;
    };
    let _ = writeln!(
        out,
        "<h3 id=\"{id}-parting\">Where the curves part: concurrency {c} (scaling {:.0}% in A, {:.0}% in B)</h3>",
        a.1.levels[i].scaling * 100.0,
        b.1.levels[j].scaling * 100.0
    );
    match (a.2.get(i), b.2.get(j)) {
        (Some(run_a), Some(run_b))
            if run_a.profile.bottleneck.is_some() && run_b.profile.bottleneck.is_some() =>
        {
            why_diff_table(out, run_a, run_b, ("A", "B"));
        }
        _ => out.push_str(
            "<p class=\"muted\">No differential causes: both levels need the bottleneck analysis \
             (record the sweeps with <code>--probes bottleneck</code>).</p>\n",
        ),
    }
}
