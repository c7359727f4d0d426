//! The page's opening summary: for the first sweep, the knee and what grows across it; without
//! a sweep, the first run's waits and where its threads' time went.

use super::diff::{diff_change, diff_unit_header, diff_value, growing_stacks};
use super::page::breakdown_bars;
use super::run::key_value_table;
use crate::analysis::measure::Measure;
use crate::diff::Diff;
use crate::render::svg::{time_bars_svg, TimeBar};
use crate::render::units::{format_fraction, format_ns, format_threads};
use crate::report::{build_report, ReportOptions};
use crate::sweep::{LevelWhy, Sweep, NO_BREAKDOWN};
use lockscope_probes::{Profile, TimeClass};
use std::fmt::Write as _;

/// The summary row of `lockscope why`'s causes (profiles and levels recorded with `waitfor`).
const WHY_ROW: &str =
    "what the waits come down to (lockscope why, share of the working threads' time)";

/// The summary row of the waits' classification ([`crate::report::Classified`]).
pub(super) const CLASSIFIED_ROW: &str =
    "waits by role (as the report's contention section tells them)";

/// The rows every summary starts with: the input, the target, its kernel and machine.
pub(super) fn summary_head(label: &str, profile: &Profile) -> Vec<(String, String)> {
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
pub(super) fn largest_classes(breakdown: &crate::sweep::Breakdown, n: usize) -> String {
    let mut classes: Vec<&crate::sweep::ClassTime> = breakdown.classes.iter().collect();
    classes.sort_by(|a, b| b.share_of_thread_time.total_cmp(&a.share_of_thread_time));
    classes
        .iter()
        .take(n)
        .map(|c| format!("{} {}", c.name, format_fraction(c.share_of_thread_time)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A breakdown's contention and idle waits (the report's classification,
/// [`crate::report::Classified`]), in words: `contention (waiting on other threads of the
/// program) 59.9% (mostly in epoll_wait), idle (waiting for something outside it) 23.7%`; `None`
/// when the profile does not say who ended its sleeps.
pub(super) fn woken_words(breakdown: &crate::sweep::Breakdown) -> Option<String> {
    use lockscope_probes::WaitRole;
    let program = breakdown.role_share(WaitRole::Contention)?;
    let outside = breakdown.role_share(WaitRole::Idle).unwrap_or(0.0);
    let mut text = format!(
        "contention (waiting on other threads of the program) {}",
        format_fraction(program)
    );
    if let Some(call) = breakdown.program_calls.first() {
        let _ = write!(text, " (mostly in {})", call.name);
    }
    let _ = write!(
        text,
        ", idle (waiting for something outside it: clients, timers, devices) {}",
        format_fraction(outside)
    );
    Some(text)
}

/// The growing sites of a diff, in words: `…;f;[kernel wait];[mutex] +0.92 threads waiting
/// (0.10 → 1.02)`, the first `n`.
pub(super) fn growth_words(diff: &Diff, n: usize) -> String {
    let (unit, _) = diff_unit_header(diff);
    let grown: Vec<String> = growing_stacks(diff)
        .into_iter()
        .take(n)
        .map(|s| {
            let stack = s.stack.as_str();
            let (_, from) = diff_value(&s.a, &unit);
            let (_, to) = diff_value(&s.b, &unit);
            let (_, change) = diff_change(s.delta.normalized, &unit);
            let mut text = format!(
                "{} {change} ({} → {to})",
                crate::render::sites::site_label(stack, crate::render::frames::TEXT_WIDTH),
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
pub(super) fn sweep_summary(sweep: &Sweep, knee_diff: Option<&Diff>) -> Vec<(String, String)> {
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
    let knee_level = crate::sweep::knee_level(&sweep.levels, sweep.knee.as_ref());
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
    let woken: Vec<String> = shown
        .iter()
        .filter_map(|level| {
            let words = woken_words(level.breakdown.as_ref()?)?;
            Some(format!("at {}: {words}", level.concurrency))
        })
        .collect();
    if !woken.is_empty() {
        rows.push((CLASSIFIED_ROW.into(), woken.join("; ")));
    }
    let why: Vec<String> = shown
        .iter()
        .filter_map(|level| {
            Some(format!(
                "at {}: {}",
                level.concurrency,
                level.why.as_ref()?.words()
            ))
        })
        .collect();
    if !why.is_empty() {
        rows.push((WHY_ROW.into(), why.join("; ")));
    }
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

/// The summary rows of a single run: its records and where its threads' time went. The waits,
/// their kinds and their classification are the report's ([`crate::report`]'s value, so the
/// same numbers as `lockscope report`): each sleep two probes saw counted once, the intervals of
/// threads waiting for a CPU apart as CPU saturation.
pub(super) fn run_summary(profile: &Profile) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let report = build_report(profile, &ReportOptions::default());
    let measure = report.measure_kind;
    let count = report.totals.count;
    let wall_ns = profile.metadata.duration_ns;
    let mut text = format!(
        "{count} {} over {}",
        measure.noun(count),
        format_ns(wall_ns)
    );
    if measure.is_timed() && wall_ns > 0 {
        let doing = match measure {
            Measure::Waits => "waiting",
            Measure::Holds => "holding a lock",
            Measure::Calls => "in a system call",
            _ => "on CPU",
        };
        let mut kinds: Vec<_> = report.by_kind.iter().collect();
        kinds.sort_by_key(|k| std::cmp::Reverse(k.stats.total_ns));
        let parts: Vec<String> = kinds
            .iter()
            .take(3)
            .map(|k| {
                format!(
                    "{}: {} {doing} on average",
                    k.kind.name(),
                    format_threads(k.stats.total_ns as f64 / wall_ns as f64)
                )
            })
            .collect();
        let _ = write!(text, "; {}", parts.join(", "));
    }
    if let Some(c) = report.classified.filter(|c| c.cpu_saturation_intervals > 0) {
        let _ = write!(
            text,
            "; apart, {} intervals of threads waiting for a CPU (CPU saturation, not waits)",
            c.cpu_saturation_intervals
        );
    }
    if report.header.on_cpu_samples > 0 {
        let _ = write!(
            text,
            "; {} samples of the cpu probe (CPU time, not waits)",
            report.header.on_cpu_samples
        );
    }
    rows.push((measure.noun(2).to_string(), text));
    if measure == Measure::Waits && wall_ns > 0 {
        let waits = crate::report::waits_only(profile);
        let mut sites: Vec<(String, u64)> = crate::analysis::canonical::canonical_sites(&waits)
            .into_iter()
            .map(|(site, stats)| (site, stats.total_ns))
            .collect();
        sites.sort_by_key(|(site, ns)| (std::cmp::Reverse(*ns), site.clone()));
        let top: Vec<String> = sites
            .iter()
            .take(3)
            .map(|(site, ns)| {
                format!(
                    "{} {}",
                    crate::render::sites::site_label(site, crate::render::frames::TEXT_WIDTH),
                    format_threads(*ns as f64 / wall_ns as f64)
                )
            })
            .collect();
        rows.push(("top wait sites (threads waiting)".into(), top.join("; ")));
    }
    if let Some(c) = &report.classified {
        rows.push((CLASSIFIED_ROW.into(), c.words(true)));
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
    if let Some(why) = LevelWhy::of(profile) {
        rows.push((WHY_ROW.into(), why.words()));
    }
    rows
}

/// Where each thread group's time went (threads named alike, digits merged: `worker-*`), as
/// stacked bars for the summary; empty without the offcpu probe's per-thread times.
pub(super) fn thread_group_bars(profile: &Profile) -> String {
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
pub(super) fn losses_row(profiles: &[&Profile], warnings: &[String]) -> (String, String) {
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
pub(super) fn level_time_bars(sweep: &Sweep) -> String {
    breakdown_bars(
        sweep.levels.iter().filter_map(|level| {
            let b = level.breakdown.as_ref()?;
            Some((format!("concurrency {}", level.concurrency), b))
        }),
        "Where the threads' time went at each level (share of thread time):",
    )
}

/// The summary at the top of the page: what a reader of a writeup looks at before anything
/// else; `after` follows the table (the levels' time bars of a sweep).
pub(super) fn summary_section(out: &mut String, rows: &[(String, String)], after: &str) {
    out.push_str("<section class=\"summary\" id=\"summary\">\n<h2>Summary</h2>\n");
    key_value_table(out, Some("summary-table"), rows);
    out.push_str(after);
    out.push_str("</section>\n");
}
