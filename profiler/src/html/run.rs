//! One run's section: its metadata and environment fingerprint, its flamegraph and its report.

use super::page::iframe_svg;
use super::report::report_tables;
use super::{error_chain, HtmlOptions};
use crate::analysis::measure::{Measure, Weight};
use crate::render::flamegraph::{write_flamegraph, FlamegraphOptions};
use crate::render::svg::xml_escape;
use crate::render::units::{format_ns, format_unix_ns};
use lockscope_probes::{AttachStatus, Profile};
use std::fmt::Write as _;

/// A run to show: a label, its profile, and its section anchor.
pub(super) struct Run<'a> {
    pub(super) label: String,
    pub(super) profile: &'a Profile,
}

pub(super) fn metadata_table(out: &mut String, profile: &Profile) {
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
            let count = profile.counted_waits().map(|w| w.stats.count).sum::<u64>();
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
                "{} lost waits ({} map full, {} dropped, {} probe runs skipped), {} user / {} \
                 kernel stack failures",
                l.lost_events(),
                l.map_full,
                l.dropped,
                l.skipped_runs,
                l.user_stack_failures,
                l.kernel_stack_failures
            )
        },
    ));
    if l.out_of_order > 0 {
        rows.push((
            "unseen",
            format!(
                "{} scheduler events out of order: a wakeup or switch went unseen (their sleeps \
                 are kept; who woke them is unknown)",
                l.out_of_order
            ),
        ));
    }
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

pub(super) fn run_section(out: &mut String, id: &str, run: &Run<'_>, options: &HtmlOptions) {
    let _ = writeln!(out, r#"<h2 id="{id}">Run: {}</h2>"#, xml_escape(&run.label));
    run_body(out, run, options, "h3");
}

/// A run's metadata, flamegraph and top sites, under `heading` (`h3`, or `h4` inside a level).
pub(super) fn run_body(out: &mut String, run: &Run<'_>, options: &HtmlOptions, heading: &str) {
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
                xml_escape(&error_chain(&e))
            );
        }
    }
    report_tables(out, run.profile, options, heading);
}
