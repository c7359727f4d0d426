//! One run's section: its metadata and environment fingerprint, its flamegraphs (waits; CPU time
//! with the `cpu` probe), `lockscope why`'s causes (with the bottleneck analysis) and its report.

use super::page::iframe_svg;
use super::report::report_tables;
use super::{error_chain, HtmlOptions};
use crate::analysis::measure::{Measure, Weight};
use crate::render::flamegraph::{write_flamegraph, FlamegraphOptions};
use crate::render::svg::xml_escape;
use crate::render::units::{format_ns, format_unix_ns};
use crate::report::{build_report, ReportOptions};
use lockscope_probes::{catalog, AttachStatus, Profile, WaitKind};
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
            // The report's counts: each sleep once, CPU waits and samples apart.
            let report = build_report(profile, &ReportOptions::default());
            let header = &report.header;
            let count = header.waits_recorded;
            let mut text = format!(
                "{} seen, {count} {} recorded",
                m.events,
                report.measure_kind.noun(count)
            );
            if header.cpu_wait_intervals > 0 {
                let _ = write!(
                    text,
                    ", {} intervals of threads waiting for a CPU (CPU saturation, not waits)",
                    header.cpu_wait_intervals
                );
            }
            if header.on_cpu_samples > 0 {
                let _ = write!(
                    text,
                    ", {} samples of the cpu probe (CPU time, not waits)",
                    header.on_cpu_samples
                );
            }
            text
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
    key_value_table(out, None, &rows);
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

/// A run's metadata, flamegraphs (its waits; with the `cpu` probe, its CPU time), what `lockscope
/// why` traces its waits back to, and its report, under `heading` (`h3`, or `h4` inside a level).
pub(super) fn run_body(out: &mut String, run: &Run<'_>, options: &HtmlOptions, heading: &str) {
    metadata_table(out, run.profile);
    // Imported counts (events, samples) have no times: their widths are the counts.
    let measure = Measure::of_records(&run.profile.waits);
    let mut flamegraph = FlamegraphOptions::default();
    if !measure.is_timed() {
        flamegraph.fold.weight = Weight::Count;
    }
    let samples_apart = measure == Measure::Waits && has_cpu_samples(run.profile);
    if samples_apart {
        // The title names the probes whose records this graph draws, not the cpu probe's.
        flamegraph.title = Some(drawn_title(run.profile));
    }
    let _ = writeln!(
        out,
        "<{heading}>Flamegraph ({})</{heading}>",
        xml_escape(measure.width(flamegraph.fold.weight))
    );
    // The waits the report counts: the intervals of threads waiting for a CPU are CPU saturation
    // (the report's section), not waits, whatever the probes.
    let waits = crate::report::waits_only(run.profile);
    draw(out, &waits, &run.label, &flamegraph, "flamegraph");
    if samples_apart {
        let mut cpu = FlamegraphOptions::default();
        cpu.fold.probe = Some(catalog::CPU.name.to_string());
        let _ = writeln!(
            out,
            "<{heading}>CPU flamegraph (CPU time, the cpu probe's samples)</{heading}>"
        );
        draw(out, run.profile, &run.label, &cpu, "CPU flamegraph");
    }
    if measure == Measure::Waits {
        // Imported captures hold no waits to explain.
        super::why::why_section(out, run.profile, heading);
    }
    report_tables(out, run.profile, options, heading);
}

/// True when `profile` has the `cpu` probe's on-CPU samples.
fn has_cpu_samples(profile: &Profile) -> bool {
    profile
        .waits
        .iter()
        .any(|w| w.is_from(&catalog::CPU) && w.kind == WaitKind::OnCpu)
}

/// The wait flamegraph's title beside a CPU flamegraph: the probes of the waits it draws.
fn drawn_title(profile: &Profile) -> String {
    let mut probes: Vec<&str> = profile
        .waits
        .iter()
        .filter(|w| !w.is_from(&catalog::CPU))
        .map(|w| w.probe.as_str())
        .collect();
    probes.sort_unstable();
    probes.dedup();
    let target = &profile.metadata.target;
    format!(
        "lockscope: {} waits of `{}` (pid {}), {}",
        probes.join("+"),
        target.command.join(" "),
        target.pid,
        format_ns(profile.metadata.duration_ns)
    )
}

/// Draws one flamegraph of `profile` (the run `label`) in an iframe, or says why there is none.
fn draw(out: &mut String, profile: &Profile, label: &str, options: &FlamegraphOptions, what: &str) {
    let mut svg = Vec::new();
    match write_flamegraph(profile, options, &mut svg) {
        Ok(()) => iframe_svg(out, &svg, &format!("{what} of {label}")),
        Err(e) => {
            let _ = writeln!(
                out,
                r#"<p class="muted">No {what}: {}</p>"#,
                xml_escape(&error_chain(&e))
            );
        }
    }
}

/// A table of (key, value) rows, each a header cell and its value, escaped; `class` names the
/// table for the page's style.
pub(super) fn key_value_table<K: AsRef<str>>(
    out: &mut String,
    class: Option<&str>,
    rows: &[(K, String)],
) {
    match class {
        Some(class) => {
            let _ = writeln!(out, "<table class=\"{}\">", xml_escape(class));
        }
        None => out.push_str("<table>\n"),
    }
    for (key, value) in rows {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            xml_escape(key.as_ref()),
            xml_escape(value)
        );
    }
    out.push_str("</table>\n");
}
