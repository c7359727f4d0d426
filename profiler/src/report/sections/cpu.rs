//! The `cpu` probe's section: its samples as CPU time (never wait time), per thread beside the
//! thread's wait time, then the top stacks by CPU time; as text, JSON and tables of
//! `lockscope html`.

use super::*;

/// This file's section, for `build.rs`'s list.
pub(super) const SECTION: Entry = Entry::of::<OnCpu>();

/// Frames shown per stack in the on-CPU section's text (the JSON has them all).
pub(super) const ON_CPU_FRAMES: usize = 24;

/// Frames of the hottest stack shown per thread in the on-CPU table.
pub(super) const HOTTEST_FRAMES: usize = 3;
/// The `cpu` probe's on-CPU profile.
#[derive(Serialize)]
pub(super) struct OnCpu {
    samples: u64,
    cpu_ns: u64,
    /// Every thread sampled on CPU, most CPU time first.
    threads: Vec<OnCpuThread>,
    /// Distinct user stacks sampled (by their functions: samples at other instructions of the
    /// same functions are one stack).
    stacks_total: usize,
    /// The top [`TOP`] of them by CPU time.
    stacks: Vec<OnCpuStack>,
}

#[derive(Serialize)]
pub(super) struct OnCpuThread {
    pid: u32,
    tid: u32,
    name: String,
    samples: u64,
    cpu_ns: u64,
    /// The thread's recorded wait time (its records of the wait probes, without the time it
    /// waited for a CPU: CPU saturation), for comparison.
    wait_ns: u64,
    /// The innermost functions of its hottest user stack, leaf first.
    hottest: Vec<String>,
}

#[derive(Serialize)]
pub(super) struct OnCpuStack {
    samples: u64,
    cpu_ns: u64,
    threads: Vec<String>,
    /// User frames, leaf first (empty when the stack was not captured).
    user: Vec<String>,
    /// The unwinder stopped before the thread's entry.
    truncated: bool,
    /// The kernel frames of its heaviest kernel stack, leaf first (empty: sampled in user mode).
    kernel: Vec<String>,
}

/// Function names of stack `id`, leaf first, inlined functions first within their frame.
pub(super) fn names_leaf_first(profile: &Profile, id: Option<StackId>) -> Vec<String> {
    profile.stack(id).map_or_else(Vec::new, |s| {
        s.frames
            .iter()
            .flat_map(|f| {
                let mut names = f.names_outermost_first();
                names.reverse();
                names
            })
            .collect()
    })
}

fn on_cpu(profile: &Profile) -> Option<OnCpu> {
    let samples: Vec<&WaitRecord> = profile
        .waits
        .iter()
        .filter(|w| w.is_from(&catalog::CPU) && w.kind == WaitKind::OnCpu)
        .collect();
    if samples.is_empty() {
        return None;
    }
    // Per thread: samples, CPU time, CPU time per user stack.
    type ThreadAcc = (WaitStats, BTreeMap<Option<StackId>, u64>);
    let mut threads: BTreeMap<(u32, u32), ThreadAcc> = BTreeMap::new();
    // Per user stack: stats, threads, CPU time per kernel stack.
    type StackAcc = (WaitStats, Vec<String>, BTreeMap<Option<StackId>, u64>);
    let mut stacks: BTreeMap<Option<StackId>, StackAcc> = BTreeMap::new();
    let mut all = WaitStats::default();
    for w in &samples {
        all.merge(&w.stats);
        let thread = threads.entry((w.pid, w.tid)).or_default();
        thread.0.merge(&w.stats);
        *thread.1.entry(w.user_stack).or_insert(0) += w.stats.total_ns;
        let stack = stacks.entry(w.user_stack).or_default();
        stack.0.merge(&w.stats);
        let name = thread_label(profile, w.pid, w.tid);
        if !stack.1.contains(&name) {
            stack.1.push(name);
        }
        *stack.2.entry(w.kernel_stack).or_insert(0) += w.stats.total_ns;
    }
    let heaviest = |by: &BTreeMap<Option<StackId>, u64>| {
        by.iter()
            .max_by_key(|&(id, ns)| (*ns, Reverse(*id)))
            .and_then(|(id, _)| *id)
    };
    let mut thread_rows: Vec<OnCpuThread> = threads
        .into_iter()
        .map(|((pid, tid), (stats, by_stack))| OnCpuThread {
            pid,
            tid,
            name: thread_label(profile, pid, tid),
            samples: stats.count,
            cpu_ns: stats.total_ns,
            wait_ns: profile
                .counted_waits()
                .filter(|w| w.kind.is_wait() && !w.is_cpu_wait() && (w.pid, w.tid) == (pid, tid))
                .map(|w| w.stats.total_ns)
                .sum(),
            hottest: names_leaf_first(profile, heaviest(&by_stack))
                .into_iter()
                .take(HOTTEST_FRAMES)
                .collect(),
        })
        .collect();
    thread_rows.sort_by_key(|t| (Reverse(t.cpu_ns), t.pid, t.tid));
    let mut stack_rows: Vec<(Option<StackId>, OnCpuStack)> = stacks
        .into_iter()
        .map(|(id, (stats, threads, by_kernel))| {
            let stack = OnCpuStack {
                samples: stats.count,
                cpu_ns: stats.total_ns,
                threads,
                user: names_leaf_first(profile, id),
                truncated: profile.stack(id).is_some_and(|s| s.truncated),
                kernel: names_leaf_first(profile, heaviest(&by_kernel)),
            };
            (id, stack)
        })
        .collect();
    // Stacks of the same functions (samples at other instructions of them) are one stack.
    let mut merged: Vec<(Option<StackId>, OnCpuStack, u64)> = Vec::new();
    stack_rows.sort_by_key(|(id, s)| (Reverse(s.cpu_ns), *id));
    for (id, stack) in stack_rows {
        match merged
            .iter_mut()
            .find(|(_, m, _)| m.user == stack.user && m.truncated == stack.truncated)
        {
            Some((_, into, heaviest_ns)) => {
                into.samples += stack.samples;
                into.cpu_ns += stack.cpu_ns;
                for thread in stack.threads {
                    if !into.threads.contains(&thread) {
                        into.threads.push(thread);
                    }
                }
                if stack.cpu_ns > *heaviest_ns {
                    into.kernel = stack.kernel;
                    *heaviest_ns = stack.cpu_ns;
                }
            }
            None => {
                let ns = stack.cpu_ns;
                merged.push((id, stack, ns));
            }
        }
    }
    let stacks_total = merged.len();
    merged.sort_by_key(|(id, s, _)| (Reverse(s.cpu_ns), *id));
    merged.truncate(TOP);
    Some(OnCpu {
        samples: all.count,
        cpu_ns: all.total_ns,
        threads: thread_rows,
        stacks_total,
        stacks: merged.into_iter().map(|(_, s, _)| s).collect(),
    })
}

impl Section for OnCpu {
    const SOURCE: Source = Source::Cpu(&catalog::CPU);

    fn build(profile: &Profile) -> Option<OnCpu> {
        on_cpu(profile)
    }

    fn write_text(&self, out: &mut String, style: StackStyle) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "On CPU (cpu probe): {} of CPU time in {} samples; CPU time, not wait time",
            format_ns(self.cpu_ns),
            self.samples
        );
        let _ = writeln!(
            out,
            "  {:<28}{:>11}{:>9}{:>11}  hottest stack, leaf first",
            "thread", "CPU time", "samples", "waits"
        );
        for t in &self.threads {
            let _ = writeln!(
                out,
                "  {:<28}{:>11}{:>9}{:>11}  {}",
                truncate(&format!("{} (tid {})", t.name, t.tid), 27),
                format_ns(t.cpu_ns),
                t.samples,
                if t.wait_ns == 0 {
                    "-".to_string()
                } else {
                    format_ns(t.wait_ns)
                },
                if t.hottest.is_empty() {
                    crate::analysis::fold::NO_USER_STACK.to_string()
                } else {
                    let line = frames::leaf_first_line(&t.hottest, style, frames::TEXT_WIDTH - 63);
                    match style {
                        StackStyle::Readable => frames::cut_end(&line, frames::TEXT_WIDTH - 63),
                        StackStyle::Full => line,
                    }
                }
            );
        }
        // Stacks that show the same lines (they differ in folded or elided frames) are one.
        let mut shown: Vec<(Vec<String>, u64, u64, Vec<String>)> = Vec::new();
        for s in &self.stacks {
            let no_user = [crate::analysis::fold::NO_USER_STACK.to_string()];
            let user = if s.user.is_empty() {
                no_user.to_vec()
            } else {
                frames::shown_names(&s.user, style, frames::TEXT_WIDTH - 8)
            };
            let mut lines: Vec<String> = s
                .kernel
                .iter()
                .map(|n| format!("{}  [kernel]", frames::show_name(n, style, 80)))
                .chain(user)
                .collect();
            if lines.len() > ON_CPU_FRAMES {
                let more = lines.len() - ON_CPU_FRAMES;
                lines.truncate(ON_CPU_FRAMES);
                lines.push(format!("... {more} more frames"));
            }
            if s.truncated {
                lines.push("... (truncated: the unwinder stopped here)".to_string());
            }
            match shown.iter_mut().find(|(l, ..)| *l == lines) {
                Some((_, ns, samples, threads)) => {
                    *ns += s.cpu_ns;
                    *samples += s.samples;
                    for thread in &s.threads {
                        if !threads.contains(thread) {
                            threads.push(thread.clone());
                        }
                    }
                }
                None => shown.push((lines, s.cpu_ns, s.samples, s.threads.clone())),
            }
        }
        shown.sort_by_key(|(_, ns, ..)| Reverse(*ns));
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  Top {} of {} stacks by CPU time",
            shown.len(),
            self.stacks_total
        );
        for (i, (lines, cpu_ns, samples, threads)) in shown.iter().enumerate() {
            let _ = writeln!(out);
            let head = format!(
                "  #{:<3}{} ({} of all CPU time), {} samples, ",
                i + 1,
                format_ns(*cpu_ns),
                format_percent(*cpu_ns, self.cpu_ns),
                samples,
            );
            let threads = match style {
                StackStyle::Readable => frames::thread_list(
                    threads,
                    frames::TEXT_WIDTH.saturating_sub(head.chars().count()),
                ),
                StackStyle::Full => threads.join(", "),
            };
            let _ = writeln!(out, "{head}{threads}");
            for line in lines {
                let _ = writeln!(out, "        {line}");
            }
        }
    }

    fn write_html(&self, out: &mut String, heading: &str) {
        use crate::render::svg::xml_escape;
        use crate::render::tables::{table_close, table_open, Cell};
        let _ = writeln!(
            out,
            "<{heading}>On CPU (cpu probe): {} of CPU time in {} samples</{heading}>",
            format_ns(self.cpu_ns),
            self.samples
        );
        let _ = writeln!(
            out,
            "<p class=\"muted\">CPU time, not wait time: never added to the waits. Per thread, \
             beside its wait time (without the time it waited for a CPU).</p>"
        );
        let names = |names: &[String]| {
            if names.is_empty() {
                crate::analysis::fold::NO_USER_STACK.to_string()
            } else {
                names.join(" <- ")
            }
        };
        table_open(
            out,
            "section-table on-cpu",
            &[
                "thread",
                "CPU time",
                "samples",
                "waits",
                "hottest stack, leaf first",
            ],
            self.threads.len(),
        );
        for t in &self.threads {
            let _ = writeln!(
                out,
                "<tr><td>{}</td>{}{}{}<td><code>{}</code></td></tr>",
                xml_escape(&format!("{} (tid {})", t.name, t.tid)),
                Cell::Ns(t.cpu_ns).html(),
                Cell::Count(t.samples).html(),
                Cell::Ns(t.wait_ns).html(),
                xml_escape(&names(&t.hottest))
            );
        }
        table_close(out);
        let _ = writeln!(
            out,
            "<p>Top {} of {} stacks by CPU time:</p>",
            self.stacks.len(),
            self.stacks_total
        );
        table_open(
            out,
            "section-table on-cpu-stacks",
            &[
                "#",
                "CPU time",
                "share",
                "samples",
                "threads",
                "stack (leaf first; open for every frame)",
            ],
            self.stacks.len(),
        );
        for (i, s) in self.stacks.iter().enumerate() {
            let frames: Vec<String> = s
                .kernel
                .iter()
                .map(|n| format!("{n}  [kernel]"))
                .chain(s.user.iter().cloned())
                .collect();
            let headline = frames
                .first()
                .cloned()
                .unwrap_or_else(|| crate::analysis::fold::NO_USER_STACK.to_string());
            let mut cell = format!(
                "<details class=\"stack\"><summary><code>{}</code> <span class=\"muted\">{} frames{}</span></summary><ol class=\"frames\">",
                xml_escape(&headline),
                frames.len(),
                if s.truncated { ", cut short" } else { "" }
            );
            for name in &frames {
                let _ = write!(cell, "<li><code>{}</code></li>", xml_escape(name));
            }
            cell.push_str("</ol></details>");
            let share = if self.cpu_ns == 0 {
                0.0
            } else {
                s.cpu_ns as f64 / self.cpu_ns as f64
            };
            let _ = writeln!(
                out,
                "<tr>{}{}{}{}<td>{}</td><td>{cell}</td></tr>",
                Cell::Count(i as u64 + 1).html(),
                Cell::Ns(s.cpu_ns).html(),
                Cell::Fraction(share).html(),
                Cell::Count(s.samples).html(),
                xml_escape(&s.threads.join(", "))
            );
        }
        table_close(out);
    }
}
