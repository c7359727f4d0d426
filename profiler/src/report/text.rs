//! The [`Report`] as text for people: the header, the records by kind, the top groups with their
//! stacks (leaf first) and histograms, then the sections. Times in the convention of
//! [`crate::render::units`].

use super::model::{GroupKey, Report, StackTrace, Stats};
use super::{GroupBy, ReportOptions};
use crate::analysis::measure::Measure;
use crate::render::frames::{self, StackStyle};
use crate::render::histogram;
use crate::render::units::{format_ns, format_percent, format_unix_ns};
use std::fmt::Write as _;

/// Threads named per group in the text before "and N more".
const MAX_THREADS_LISTED: usize = 4;
/// Locks named per group in the text before "and N more".
const MAX_LOCKS_LISTED: usize = 3;
/// Most characters of a process's command line in the text (`--by process`).
const MAX_COMMAND_CHARS: usize = 160;
/// Widest function-name column in a text stack; longer names push their location right.
const MAX_NAME_COLUMN: usize = 40;
/// Indentation of a group's detail lines, and width of their labels.
const INDENT: &str = "    ";
const LABEL_WIDTH: usize = 13;

/// Appends one line; writing to a String cannot fail.
macro_rules! put {
    ($out:expr) => {{
        $out.push('\n');
    }};
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// `1 wait`, `2 waits`.
pub(super) fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `a, b, c and 2 more`.
fn list_limited(items: Vec<String>, limit: usize) -> String {
    let extra = items.len().saturating_sub(limit);
    let mut text = items.into_iter().take(limit).collect::<Vec<_>>().join(", ");
    if extra > 0 {
        text.push_str(&format!(" and {extra} more"));
    }
    text
}

/// A detail line's list: at most `limit` items and, unless stacks are shown whole, what fits
/// in the line after its label (`and N more` for the rest).
fn fit_list(items: Vec<String>, limit: usize, style: StackStyle) -> String {
    let room = frames::TEXT_WIDTH - INDENT.len() - LABEL_WIDTH;
    if style == StackStyle::Full {
        return list_limited(items, limit);
    }
    let total = items.len();
    let mut shown = items.len().min(limit);
    while shown > 1 {
        let text = list_limited(items[..shown].to_vec(), shown);
        let more = total - shown;
        let len = text.chars().count() + if more > 0 { 14 } else { 0 };
        if len <= room {
            break;
        }
        shown -= 1;
    }
    let mut text = list_limited(items[..shown.min(total)].to_vec(), shown);
    if total > shown {
        text.push_str(&format!(" and {} more", total - shown));
    }
    frames::cut_end(&text, room)
}

impl Report {
    /// The whole report as text.
    pub(super) fn to_text(&self, options: &ReportOptions) -> String {
        let mut out = String::new();
        let mut header = String::new();
        self.header_text(&mut header);
        out.push_str(&fit_header(&header));
        self.kinds_text(&mut out);
        self.groups_text(&mut out, options);
        if let Some(sections) = &self.sections {
            sections.write_text(&mut out, options.stack_style);
        }
        out
    }

    fn header_text(&self, out: &mut String) {
        let h = &self.header;
        let label = |name: &str| format!("  {name:<11}");
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
        } else {
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
        if let Some(t) = &h.truncated_stacks {
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

    fn kinds_text(&self, out: &mut String) {
        let m = self.measure_kind;
        put!(out);
        if !m.has_durations() {
            let noun = m.noun(2);
            put!(out, "{}{} by kind", noun[..1].to_uppercase(), &noun[1..]);
            put!(out, "  {:<13}{:>12}{:>8}", "kind", noun, "share");
            let time = |s: &Stats| {
                if m.is_timed() {
                    format!("  {} on CPU", format_ns(s.total_ns))
                } else {
                    String::new()
                }
            };
            for k in &self.by_kind {
                put!(
                    out,
                    "  {:<13}{:>12}{:>7.1}%{}",
                    k.kind.name(),
                    k.stats.count,
                    k.stats.share * 100.0,
                    time(&k.stats)
                );
            }
            let all = &self.totals;
            put!(
                out,
                "  {:<13}{:>12}{:>7.1}%{}",
                "all",
                all.count,
                all.share * 100.0,
                time(all)
            );
            return;
        }
        let noun = m.noun(2);
        put!(out, "{}{} by kind", noun[..1].to_uppercase(), &noun[1..]);
        if self.by_kind.is_empty() {
            put!(out, "  (no {noun} recorded)");
            return;
        }
        put!(
            out,
            "  {:<13}{:>8}{:>11}{:>11}{:>11}{:>8}",
            "kind",
            noun,
            "total",
            "mean",
            "max",
            "share"
        );
        let row = |out: &mut String, name: &str, s: &Stats, whole: u64| {
            put!(
                out,
                "  {name:<13}{:>8}{:>11}{:>11}{:>11}{:>8}",
                s.count,
                format_ns(s.total_ns),
                format_ns(s.mean_ns),
                format_ns(s.max_ns),
                format_percent(s.total_ns, whole)
            );
        };
        let whole = self.totals.total_ns;
        for k in &self.by_kind {
            row(out, k.kind.name(), &k.stats, whole);
        }
        row(out, "all", &self.totals, whole);
    }

    fn groups_text(&self, out: &mut String, options: &ReportOptions) {
        if self.groups.is_empty() {
            return;
        }
        put!(out);
        let m = self.measure_kind;
        put!(
            out,
            "Top {} of {} {} by {}",
            self.groups.len(),
            self.groups_total,
            match (m, options.group_by) {
                (Measure::Holds, GroupBy::Stack) => "hold sites (stack)",
                (Measure::Calls, GroupBy::Stack) => "call sites (stack and kind)",
                (Measure::Waits, _) | (_, GroupBy::Thread | GroupBy::Lock | GroupBy::Process) => {
                    options.group_by.plural()
                }
                _ => "stacks",
            },
            match m {
                Measure::Waits => "total wait time",
                Measure::Holds => "total time held",
                Measure::Calls => "total time in calls",
                Measure::OnCpu => "CPU time",
                Measure::Events => "events",
                Measure::Samples => "samples",
            }
        );
        if let Some(k) = &self.kernel_threads {
            let what = match m {
                Measure::Waits | Measure::Holds | Measure::Calls => format!(
                    "{} {}, {} ({} of all)",
                    k.stats.count,
                    m.noun(k.stats.count),
                    format_ns(k.stats.total_ns),
                    format_percent(k.stats.total_ns, self.totals.total_ns)
                ),
                Measure::OnCpu => format!(
                    "{} on CPU ({:.1}% of all) in {}",
                    format_ns(k.stats.total_ns),
                    k.stats.share * 100.0,
                    plural(k.stats.count, "sample", "samples")
                ),
                _ => format!("{} ({:.1}% of all)", k.stats.count, k.stats.share * 100.0),
            };
            let cpu = k.on_cpu.map_or(String::new(), |c| {
                format!(", and {} on CPU (cpu probe)", format_ns(c.cpu_ns))
            });
            let line = format!(
                "kernel threads: {} of the {} recorded have records: {what}{cpu}",
                k.with_records, k.recorded
            );
            put!(
                out,
                "{}",
                frames::wrap(&line, "  ", "    ", frames::TEXT_WIDTH)
            );
        }
        let label = |name: &str| format!("{INDENT}{name:<LABEL_WIDTH$}");
        let whole = self.totals.total_ns;
        for g in &self.groups {
            put!(out);
            let title = match &g.key {
                GroupKey::Stack {
                    user_stack: Some(id),
                    kind,
                } => format!("user stack {id}, kind {kind}"),
                GroupKey::Stack {
                    user_stack: None,
                    kind,
                } => format!("no user stack, kind {kind}"),
                GroupKey::Thread { pid, tid, name } => {
                    format!("thread {name} (pid {pid}, tid {tid})")
                }
                GroupKey::Lock {
                    pid,
                    object,
                    operation,
                } => format!("lock {object} {operation} (pid {pid})"),
                GroupKey::Process {
                    pid,
                    process,
                    parent,
                    ..
                } => match parent {
                    Some(parent) => format!("process {process} (pid {pid}, parent {parent})"),
                    None => format!("process {process} (pid {pid})"),
                },
            };
            put!(out, "#{:<3}{title}", g.rank);
            if let GroupKey::Process {
                command,
                kernel_thread,
                ..
            } = &g.key
            {
                if *kernel_thread {
                    put!(out, "{}kernel thread", label("command"));
                } else if !command.is_empty() {
                    // A compiler's command line runs to pages: the JSON has it whole.
                    let line = command.join(" ");
                    let shown: String = line.chars().take(MAX_COMMAND_CHARS).collect();
                    let cut = if shown.len() < line.len() { "…" } else { "" };
                    put!(out, "{}{shown}{cut}", label("command"));
                }
            }
            let s = &g.stats;
            match m {
                Measure::Waits | Measure::Holds | Measure::Calls => put!(
                    out,
                    "{}{}, total {} ({} of all), mean {}, max {}",
                    label(m.noun(2)),
                    s.count,
                    format_ns(s.total_ns),
                    format_percent(s.total_ns, whole),
                    format_ns(s.mean_ns),
                    format_ns(s.max_ns)
                ),
                Measure::OnCpu => put!(
                    out,
                    "{}{}, CPU time {} ({:.1}% of all)",
                    label("samples"),
                    s.count,
                    format_ns(s.total_ns),
                    s.share * 100.0
                ),
                _ => put!(
                    out,
                    "{}{} ({:.1}% of all)",
                    label(m.noun(2)),
                    s.count,
                    s.share * 100.0
                ),
            }
            if let Some(c) = &g.on_cpu {
                put!(
                    out,
                    "{}{} in {} (cpu probe; CPU time, not a wait)",
                    label("on CPU"),
                    format_ns(c.cpu_ns),
                    plural(c.samples, "sample", "samples")
                );
            }
            if options.group_by != GroupBy::Stack {
                let kinds = g
                    .kinds
                    .iter()
                    .map(|k| {
                        format!(
                            "{} {} ({})",
                            k.kind,
                            k.stats.count,
                            format_ns(k.stats.total_ns)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                put!(out, "{}{kinds}", label("kinds"));
            }
            if options.group_by != GroupBy::Thread {
                let threads = g
                    .threads
                    .iter()
                    .map(|t| {
                        if t.pid == self.header.pid {
                            format!("{} (tid {})", t.name, t.tid)
                        } else {
                            format!("{} (pid {}, tid {})", t.name, t.pid, t.tid)
                        }
                    })
                    .collect();
                put!(
                    out,
                    "{}{}",
                    label("threads"),
                    fit_list(threads, MAX_THREADS_LISTED, options.stack_style)
                );
            }
            // Imported samples have no lock (their operation is the sampled command).
            if options.group_by != GroupBy::Lock && m.has_durations() {
                let locks = g
                    .locks
                    .iter()
                    .map(|l| {
                        let object = if l.object == "0x0" {
                            "no object"
                        } else {
                            &l.object
                        };
                        if l.pid == self.header.pid {
                            format!("{object} {}", l.operation)
                        } else {
                            format!("{object} {} (pid {})", l.operation, l.pid)
                        }
                    })
                    .collect();
                put!(
                    out,
                    "{}{}",
                    label("locks"),
                    fit_list(locks, MAX_LOCKS_LISTED, options.stack_style)
                );
            }
            // Each stack as shown; stacks shown alike (they differ in folded or elided frames,
            // or at instructions of the same functions) are one, their waits summed.
            let style = options.stack_style;
            let mut shown: Vec<(u64, u64, String)> = Vec::new();
            for row in &g.stacks {
                let mut body = String::new();
                stack_text(&mut body, row.user.as_ref(), &label(""), false, style);
                if row.kernel_wanted {
                    let indent = format!("{}  ", label(""));
                    put!(body, "{}kernel stack, leaf first", label(""));
                    match &row.kernel {
                        Some(kernel) => stack_text(&mut body, Some(kernel), &indent, true, style),
                        None => put!(body, "{indent}(not captured)"),
                    }
                }
                match shown.iter_mut().find(|(.., b)| *b == body) {
                    Some((count, total_ns, _)) => {
                        *count += row.count;
                        *total_ns += row.total_ns;
                    }
                    None => shown.push((row.count, row.total_ns, body)),
                }
            }
            shown.sort_by_key(|(count, total_ns, _)| std::cmp::Reverse((*total_ns, *count)));
            let merged = g.stacks.len() - shown.len();
            let stacks_total = g.stacks_total - merged;
            for (i, (count, total_ns, body)) in shown.iter().enumerate() {
                let (count, total_ns) = (*count, *total_ns);
                let heading = if stacks_total == 1 {
                    "leaf first".to_string()
                } else {
                    match m {
                        Measure::Waits | Measure::OnCpu | Measure::Holds | Measure::Calls => {
                            format!(
                                "{} of {}: {} {}, {} ({} of this group), leaf first",
                                i + 1,
                                stacks_total,
                                count,
                                m.noun(count),
                                format_ns(total_ns),
                                format_percent(total_ns, s.total_ns)
                            )
                        }
                        _ => format!(
                            "{} of {}: {} {} ({} of this group), leaf first",
                            i + 1,
                            stacks_total,
                            count,
                            m.noun(count),
                            format_percent(count, s.count)
                        ),
                    }
                };
                put!(out, "{}{heading}", label("user stack"));
                out.push_str(body);
            }
            if stacks_total > shown.len() {
                put!(
                    out,
                    "{}{} more stacks not shown",
                    label(""),
                    stacks_total - shown.len()
                );
            }
            // Durations only: sampled CPU time and counts have no distribution to show.
            if m.has_durations() {
                out.push_str(&histogram::render(&g.log2, INDENT));
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

/// Writes a stack leaf first, one function per line: inlined functions (innermost first) before
/// the function they were inlined into, each with its source location or module offset (kernel
/// frames: source location only, their module is always the kernel). Shown per `style`
/// ([`frames`]): by default runtime frames folded into one marked line, generic parameters
/// elided, and each line within [`frames::TEXT_WIDTH`] columns, the location on a line of its own
/// under a name too long to share one; [`StackStyle::Full`]: every frame whole.
fn stack_text(
    out: &mut String,
    stack: Option<&StackTrace>,
    indent: &str,
    kernel: bool,
    style: StackStyle,
) {
    let Some(stack) = stack else {
        put!(out, "{indent}{}", crate::analysis::fold::NO_USER_STACK);
        return;
    };
    // (function, location, source file).
    let mut rows: Vec<(String, String, Option<&str>)> = Vec::new();
    for frame in &stack.frames {
        let location = |file: &Option<String>, line: Option<u32>| match (file, line) {
            (Some(file), Some(line)) => Some(format!("{file}:{line}")),
            (Some(file), None) => Some(file.clone()),
            _ => None,
        };
        for inlined in frame.inlined.iter().rev() {
            let location = match location(&inlined.file, inlined.line) {
                Some(location) => format!("{location} (inlined)"),
                None => "(inlined)".to_string(),
            };
            rows.push((inlined.function.clone(), location, inlined.file.as_deref()));
        }
        let own = location(&frame.file, frame.line)
            .or_else(|| match (&frame.module, &frame.module_offset) {
                _ if kernel => None,
                // Without a function name, display_name already shows module+offset.
                (Some(module), Some(offset)) if !frame.function.starts_with(module) => {
                    Some(format!("{module}+{offset}"))
                }
                (Some(module), None) => Some(module.clone()),
                _ => None,
            })
            .unwrap_or_default();
        rows.push((frame.function.clone(), own, frame.file.as_deref()));
    }
    if rows.is_empty() {
        put!(out, "{indent}(empty stack)");
    }
    let refs: Vec<frames::FrameRef<'_>> = rows
        .iter()
        .map(|(name, _, file)| frames::FrameRef { name, file: *file })
        .collect();
    // Kernel stacks have no runtime to fold: every frame is shown.
    let lines = if kernel {
        frames::lines(&refs, StackStyle::Full)
    } else {
        frames::lines(&refs, style)
    };
    let room = frames::TEXT_WIDTH.saturating_sub(indent.chars().count());
    let shown: Vec<(String, &str)> = lines
        .iter()
        .map(|line| match line {
            frames::Line::Frame(i) => (
                frames::show_name(&rows[*i].0, style, room),
                rows[*i].1.as_str(),
            ),
            folded => (folded.folded_text(room).unwrap_or_default(), ""),
        })
        .collect();
    let width = shown
        .iter()
        .filter(|(_, location)| !location.is_empty())
        .map(|(name, _)| name.chars().count())
        .max()
        .unwrap_or(0)
        .min(MAX_NAME_COLUMN);
    for (name, location) in shown {
        let name_len = name.chars().count();
        if location.is_empty() {
            put!(out, "{indent}{name}");
        } else if style == StackStyle::Full
            || name_len.max(width) + 2 + location.chars().count() <= room
        {
            put!(out, "{indent}{name:<width$}  {location}");
        } else if name_len <= width && width + 2 + 20 <= room {
            // The location's middle gives way: its file name and line are at its end.
            let location = frames::cut_middle(location, room - width - 2);
            put!(out, "{indent}{name:<width$}  {location}");
        } else {
            put!(out, "{indent}{name}");
            put!(
                out,
                "{indent}    {}",
                frames::cut_middle(location, room.saturating_sub(4))
            );
        }
    }
    if stack.truncated {
        put!(out, "{indent}... (truncated: the unwinder stopped here)");
    }
}
