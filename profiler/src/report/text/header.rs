//! The report's header as text: what was recorded and how, the host, the probes, what was
//! counted and set apart, what the probes saw too little of, and the losses; each line within
//! [`frames::TEXT_WIDTH`] columns.

use super::plural;
use crate::analysis::measure::Measure;
use crate::render::frames;
use crate::render::units::{format_ns, format_unix_ns};
use crate::report::model::Report;
use std::fmt::Write as _;

/// A header line's label: two spaces, the name in 11 columns.
fn label(name: &str) -> String {
    format!("  {name:<11}")
}

impl Report {
    /// The header, its long lines wrapped by [`fit_header`].
    pub(super) fn header_text(&self) -> String {
        let mut out = String::new();
        self.title_text(&mut out);
        self.host_text(&mut out);
        self.probes_text(&mut out);
        self.counted_text(&mut out);
        self.seen_text(&mut out);
        self.losses_text(&mut out);
        fit_header(&out)
    }

    /// The first lines: what was recorded (the target, or what an imported capture holds), when
    /// and why it ended.
    fn title_text(&self, out: &mut String) {
        let h = &self.header;
        let m = self.measure_kind;
        if m != Measure::Waits && h.imported {
            // An imported capture has no target: say what it holds and where it came from.
            put!(
                out,
                "lockscope report: {} ({})",
                match m {
                    Measure::OnCpu => "sampled CPU time",
                    Measure::Events => "counted events",
                    _ => "samples",
                },
                if h.end_reason.is_empty() {
                    "imported"
                } else {
                    &h.end_reason
                }
            );
            return;
        }
        if h.command.is_empty() || h.target.starts_with("pids ") {
            // Several processes, a cgroup, or all of them: said as such.
            put!(out, "lockscope report: {} (attached)", h.target);
        } else {
            put!(
                out,
                "lockscope report: `{}` (pid {}, {}){}",
                h.command.join(" "),
                h.pid,
                if h.launched {
                    "launched by lockscope"
                } else {
                    "attached"
                },
                if h.target.ends_with(" and its descendants") {
                    " and its descendants"
                } else {
                    ""
                }
            );
        }
        put!(
            out,
            "{}{} for {}, ended: {}",
            label("recorded"),
            format_unix_ns(h.start_unix_ns),
            format_ns(h.duration_ns),
            if h.end_reason.is_empty() {
                "unknown"
            } else {
                &h.end_reason
            }
        );
    }

    /// The host, the processes and threads seen, and the recording's warnings.
    fn host_text(&self, out: &mut String) {
        let h = &self.header;
        let mut host = format!(
            "{}, {} {}, {} CPUs",
            h.hostname, h.os, h.kernel_release, h.cpu_count
        );
        if let Some(libc) = &h.libc {
            host.push_str(&format!(", {libc}"));
        }
        host.push_str(&format!(", backend {}", h.backend));
        put!(out, "{}{host}", label("host"));
        if h.processes > 0 {
            let mut parts = Vec::new();
            if h.processes_exited > 0 {
                parts.push(format!("{} exited before the end", h.processes_exited));
            }
            if h.kernel_threads > 0 {
                parts.push(plural(
                    h.kernel_threads as u64,
                    "kernel thread",
                    "kernel threads",
                ));
            }
            put!(
                out,
                "{}{} recorded{}",
                label("processes"),
                h.processes,
                if parts.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", parts.join(", "))
                }
            );
        }
        put!(out, "{}{} seen", label("threads"), h.threads_seen);
        for (i, warning) in h.warnings.iter().enumerate() {
            let name = if i == 0 { label("warnings") } else { label("") };
            wrap_text(out, &name, &format!("WARNING: {warning}"));
        }
    }

    /// Each probe with its hook and what became of it (attached, fell back, failed).
    fn probes_text(&self, out: &mut String) {
        let h = &self.header;
        if h.probes.is_empty() {
            put!(out, "{}none", label("probes"));
        }
        let probe_width = h.probes.iter().map(|p| p.probe.len()).max().unwrap_or(0);
        for (i, p) in h.probes.iter().enumerate() {
            let status = match p.status {
                "attached" => format!("attached ({})", p.hook),
                "fell-back" => format!(
                    "attached via {} ({} failed: {})",
                    p.fallback_hook.as_deref().unwrap_or("?"),
                    p.hook,
                    p.reason.as_deref().unwrap_or("?")
                ),
                _ => format!(
                    "FAILED ({}: {}); its waits are missing",
                    p.hook,
                    p.reason.as_deref().unwrap_or("?")
                ),
            };
            let name = if i == 0 { label("probes") } else { label("") };
            put!(out, "{name}{:<probe_width$}  {status}", p.probe);
        }
    }

    /// The events seen and records counted, and the samples and CPU waits set apart.
    fn counted_text(&self, out: &mut String) {
        let h = &self.header;
        let m = self.measure_kind;
        put!(
            out,
            "{}{} seen, {} {} recorded{}",
            label("events"),
            h.events,
            h.waits_recorded,
            m.noun(h.waits_recorded),
            if h.on_cpu_samples > 0 {
                format!(
                    ", and {} of the cpu probe (CPU time, not waits: \"On CPU\" below)",
                    plural(h.on_cpu_samples, "sample", "samples")
                )
            } else {
                String::new()
            }
        );
        if h.cpu_wait_intervals > 0 {
            put!(
                out,
                "{}and {} of threads waiting for a CPU (not waits: \"CPU saturation\" below)",
                label(""),
                plural(h.cpu_wait_intervals, "interval", "intervals")
            );
        }
    }

    /// How much of the threads' time the probes saw, what they saw too little of, and the
    /// sleeps two probes saw that count once.
    fn seen_text(&self, out: &mut String) {
        let h = &self.header;
        if let Some(c) = &h.coverage {
            c.write_text(out, &label);
        }
        if let Some(quiet) = &h.quiet {
            for (i, warning) in quiet.warnings.iter().enumerate() {
                let name = if i == 0 { label("quiet") } else { label("") };
                wrap_text(out, &name, &format!("WARNING: {warning}"));
            }
        }
        for m in [&h.merged_sleeps, &h.merged_lock_sleeps]
            .into_iter()
            .flatten()
        {
            put!(out, "{}{}", label("merged"), m.text);
        }
    }

    /// The scheduler events seen out of order, the losses (a warning when any), and the waits
    /// on stacks the unwinder cut short.
    fn losses_text(&self, out: &mut String) {
        let h = &self.header;
        let l = &h.losses;
        if l.out_of_order > 0 {
            put!(
                out,
                "{}{} out of order: a wakeup or switch went unseen (their sleeps are kept, \
                 split by the kernel's own clocks of each thread; who woke them is unknown)",
                label("unseen"),
                plural(l.out_of_order, "scheduler event", "scheduler events")
            );
        }
        if l.complete {
            put!(out, "{}none", label("losses"));
        } else {
            self.incomplete_text(out);
        }
        if let Some(t) = &h.truncated_stacks {
            let m = self.measure_kind;
            put!(
                out,
                "{}{} {} ({:.1}% of the {}) on {} cut short by the unwinder: their \
                 outer callers are missing",
                label("stacks"),
                t.waits,
                m.noun(t.waits),
                t.share * 100.0,
                m.time_name(),
                plural(t.stacks as u64, "user stack", "user stacks")
            );
        }
    }

    /// The warning of an incomplete profile: the waits lost and those without a stack.
    fn incomplete_text(&self, out: &mut String) {
        let l = &self.header.losses;
        put!(
            out,
            "{}WARNING: this profile is incomplete",
            label("losses")
        );
        if l.lost_events > 0 {
            put!(
                out,
                "{}  {} lost, missing from every total below (map full: {}, dropped: {}{})",
                label(""),
                plural(l.lost_events, "wait", "waits"),
                l.map_full,
                l.dropped,
                if l.skipped_runs > 0 {
                    format!(", probe runs the kernel skipped: {}", l.skipped_runs)
                } else {
                    String::new()
                }
            );
        }
        for (n, what) in [
            (l.user_stack_failures, "user"),
            (l.kernel_stack_failures, "kernel"),
        ] {
            if n > 0 {
                put!(
                    out,
                    "{}  {} recorded without a {what} stack",
                    label(""),
                    plural(n, "wait", "waits")
                );
            }
        }
    }
}

/// The header's lines within [`frames::TEXT_WIDTH`] columns: a longer line (a command line, a
/// probe's hooks) goes on under its label's value; a line without a label under two spaces.
fn fit_header(header: &str) -> String {
    const LABEL: usize = 13;
    let mut out = String::new();
    for line in header.lines() {
        if line.chars().count() <= frames::TEXT_WIDTH {
            put!(out, "{line}");
            continue;
        }
        let lead = line.len() - line.trim_start().len();
        let (first, rest, indent) = match lead {
            0 => ("", line, 2),
            2 if line.is_char_boundary(LABEL) && line.len() > LABEL => {
                let (first, rest) = line.split_at(LABEL);
                (first, rest, LABEL)
            }
            _ => {
                let (first, rest) = line.split_at(lead);
                (first, rest, lead)
            }
        };
        put!(
            out,
            "{}",
            frames::wrap(
                rest.trim_start(),
                first,
                &" ".repeat(indent),
                frames::TEXT_WIDTH
            )
        );
    }
    out
}

/// `text` after `first` (a label), in lines of at most [`frames::TEXT_WIDTH`] columns, the
/// lines after the first indented as far as the label.
fn wrap_text(out: &mut String, first: &str, text: &str) {
    let indent = " ".repeat(first.chars().count());
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    put!(
        out,
        "{}",
        frames::wrap(&text, first, &indent, frames::TEXT_WIDTH)
    );
}
