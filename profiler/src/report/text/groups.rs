//! The report's top groups as text: the list's title, the kernel threads together, then each
//! group with its totals, kinds, threads, locks, heaviest stacks (leaf first) and histogram.

use super::plural;
use crate::analysis::measure::Measure;
use crate::render::frames::{self, StackStyle};
use crate::render::histogram;
use crate::render::units::{format_ns, format_percent};
use crate::report::model::{Group, GroupKey, Report, StackTrace};
use crate::report::{GroupBy, ReportOptions};
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

/// A group's detail line's label: indented, the name in [`LABEL_WIDTH`] columns.
fn label(name: &str) -> String {
    format!("{INDENT}{name:<LABEL_WIDTH$}")
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

/// A stack as the text shows it, with the waits of every stack of the group shown alike.
struct ShownStack {
    count: u64,
    total_ns: u64,
    /// Its lines: the user stack, then the kernel stack when asked for.
    body: String,
}

impl Report {
    /// The top groups: the list's title, the kernel threads together, then each group.
    pub(super) fn groups_text(&self, out: &mut String, options: &ReportOptions) {
        if self.groups.is_empty() {
            return;
        }
        put!(out);
        self.top_title_text(out, options.group_by);
        self.kernel_threads_text(out);
        for g in &self.groups {
            self.group_text(out, g, options);
        }
    }

    /// `Top N of M <groups> by <measure>`.
    fn top_title_text(&self, out: &mut String, group_by: GroupBy) {
        let m = self.measure_kind;
        put!(
            out,
            "Top {} of {} {} by {}",
            self.groups.len(),
            self.groups_total,
            match (m, group_by) {
                (Measure::Holds, GroupBy::Stack) => "hold sites (stack)",
                (Measure::Calls, GroupBy::Stack) => "call sites (stack and kind)",
                (Measure::Waits, _) | (_, GroupBy::Thread | GroupBy::Lock | GroupBy::Process) => {
                    group_by.plural()
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
    }

    /// The kernel threads' records together (`--by process`), when the recording has any.
    fn kernel_threads_text(&self, out: &mut String) {
        let Some(k) = &self.kernel_threads else {
            return;
        };
        let m = self.measure_kind;
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

    /// One group: its title, totals, the lists its grouping does not say, its stacks and
    /// (durations only: sampled CPU time and counts have no distribution to show) histogram.
    fn group_text(&self, out: &mut String, g: &Group, options: &ReportOptions) {
        put!(out);
        put!(out, "#{:<3}{}", g.rank, group_title(&g.key));
        command_text(out, &g.key);
        self.group_stats_text(out, g);
        if options.group_by != GroupBy::Stack {
            kinds_line(out, g);
        }
        if options.group_by != GroupBy::Thread {
            self.threads_line(out, g, options.stack_style);
        }
        // Imported samples have no lock (their operation is the sampled command).
        if options.group_by != GroupBy::Lock && self.measure_kind.has_durations() {
            self.locks_line(out, g, options.stack_style);
        }
        self.stacks_text(out, g, options.stack_style);
        if self.measure_kind.has_durations() {
            out.push_str(&histogram::render(&g.log2, INDENT));
        }
    }

    /// The group's count and time (as the measure has them) and its on-CPU samples.
    fn group_stats_text(&self, out: &mut String, g: &Group) {
        let m = self.measure_kind;
        let whole = self.totals.total_ns;
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
    }

    /// The group's threads (pid only when not the target's), as many as fit.
    fn threads_line(&self, out: &mut String, g: &Group, style: StackStyle) {
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
            fit_list(threads, MAX_THREADS_LISTED, style)
        );
    }

    /// The group's locks (object and operation, pid only when not the target's), as many as
    /// fit.
    fn locks_line(&self, out: &mut String, g: &Group, style: StackStyle) {
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
            fit_list(locks, MAX_LOCKS_LISTED, style)
        );
    }

    /// The group's stacks as shown, each under its heading, and how many more it has.
    fn stacks_text(&self, out: &mut String, g: &Group, style: StackStyle) {
        let shown = shown_stacks(g, style);
        let merged = g.stacks.len() - shown.len();
        let stacks_total = g.stacks_total - merged;
        for (i, stack) in shown.iter().enumerate() {
            let heading = if stacks_total == 1 {
                "leaf first".to_string()
            } else {
                self.stack_heading(g, i + 1, stacks_total, stack)
            };
            put!(out, "{}{heading}", label("user stack"));
            out.push_str(&stack.body);
        }
        if stacks_total > shown.len() {
            put!(
                out,
                "{}{} more stacks not shown",
                label(""),
                stacks_total - shown.len()
            );
        }
    }

    /// `N of M: <count> <noun>, <time> (<share> of this group), leaf first`.
    fn stack_heading(
        &self,
        g: &Group,
        n: usize,
        stacks_total: usize,
        stack: &ShownStack,
    ) -> String {
        let m = self.measure_kind;
        let (count, total_ns) = (stack.count, stack.total_ns);
        match m {
            Measure::Waits | Measure::OnCpu | Measure::Holds | Measure::Calls => {
                format!(
                    "{} of {}: {} {}, {} ({} of this group), leaf first",
                    n,
                    stacks_total,
                    count,
                    m.noun(count),
                    format_ns(total_ns),
                    format_percent(total_ns, g.stats.total_ns)
                )
            }
            _ => format!(
                "{} of {}: {} {} ({} of this group), leaf first",
                n,
                stacks_total,
                count,
                m.noun(count),
                format_percent(count, g.stats.count)
            ),
        }
    }
}

/// The group's title: what it is keyed by.
fn group_title(key: &GroupKey) -> String {
    match key {
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
    }
}

/// A process group's command line (cut at [`MAX_COMMAND_CHARS`]), or that it is a kernel
/// thread.
fn command_text(out: &mut String, key: &GroupKey) {
    let GroupKey::Process {
        command,
        kernel_thread,
        ..
    } = key
    else {
        return;
    };
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

/// The group's kinds with their counts and times.
fn kinds_line(out: &mut String, g: &Group) {
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

/// Each stack of the group as shown, heaviest first; stacks shown alike (they differ in folded
/// or elided frames, or at instructions of the same functions) are one, their waits summed.
fn shown_stacks(g: &Group, style: StackStyle) -> Vec<ShownStack> {
    let mut shown: Vec<ShownStack> = Vec::new();
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
        match shown.iter_mut().find(|s| s.body == body) {
            Some(alike) => {
                alike.count += row.count;
                alike.total_ns += row.total_ns;
            }
            None => shown.push(ShownStack {
                count: row.count,
                total_ns: row.total_ns,
                body,
            }),
        }
    }
    shown.sort_by_key(|s| std::cmp::Reverse((s.total_ns, s.count)));
    shown
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
