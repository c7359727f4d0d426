//! The text of a [`Why`]: the analysed threads, their causes best first, idle, coverage.

use super::{Cause, CauseKind, GroupRow, NamedTime, Site, Why};
use crate::render::frames::{self, StackStyle, TEXT_WIDTH};
use crate::render::units::{format_ns, format_percent};
use lockscope_probes::bottleneck::WaitPart;
use std::fmt::Write as _;

/// Names listed before "and N more".
const MAX_NAMES: usize = 4;
/// Sites listed per cause.
const MAX_SITES: usize = 3;
/// Root stack lines shown (frames, or folded runtime frames).
const MAX_FRAMES: usize = 8;
/// Most columns of a site's stack in an `explains` line.
const SITE_COLUMNS: usize = 48;

impl Why {
    /// The text report, its stacks readable ([`StackStyle::Readable`]).
    pub fn to_text(&self) -> String {
        render(self, StackStyle::Readable)
    }

    /// The text report, its stacks shown per `style` ([`StackStyle::Full`]: every frame whole).
    pub fn to_text_styled(&self, style: StackStyle) -> String {
        render(self, style)
    }
}

/// Appends `text` as lines within [`TEXT_WIDTH`] columns, the first after `first`, the others
/// after `indent`.
fn put_wrapped(out: &mut String, text: &str, first: &str, indent: &str) {
    out.push_str(&frames::wrap(text, first, indent, TEXT_WIDTH));
    out.push('\n');
}

/// The whole text: the header, the causes and idle, the coverage.
fn render(why: &Why, style: StackStyle) -> String {
    let mut out = String::new();
    write_header(&mut out, why);
    out.push('\n');
    write_causes(&mut out, why, style);
    write_coverage(&mut out, why);
    out
}

/// The title, which threads were analysed and why, and how their time went.
fn write_header(out: &mut String, why: &Why) {
    let h = &why.header;
    let a = &why.analysed;
    let title = format!(
        "lockscope why: `{}` (pid {}), {} on {} CPUs, linux {}",
        h.command.join(" "),
        h.pid,
        format_ns(h.duration_ns),
        h.cpu_count,
        h.kernel_release
    );
    put_wrapped(out, &title, "", "  ");
    let chosen = match a.selection {
        "asked" => format!(
            "{} threads matching `{}`",
            a.threads,
            a.pattern.as_deref().unwrap_or("")
        ),
        "waiting" => format!(
            "{} threads of the groups that waited most (threads that wait on each other, with at \
             least a tenth of the most waiting)",
            a.threads
        ),
        _ => format!(
            "{} threads of the groups that did the work (threads that wait on each other, with at \
             least a tenth of the busiest group's CPU time)",
            a.threads
        ),
    };
    let indent = "             ";
    put_wrapped(
        out,
        &format!("{chosen}: {}", groups(&a.groups)),
        "  analysed   ",
        indent,
    );
    if let Some(w) = &a.working {
        let share = |s: f64| format_percent((s * 1e6) as u64, 1_000_000);
        let mut text = format!(
            "the groups that did the work ({}) waited {} of their time on the program's threads: \
             nothing in it held them back",
            w.groups.join(", "),
            share(w.waited_share),
        );
        if w.cpu_waited_share > 0.0 {
            text.push_str(&format!(
                " (and {} waiting for a CPU no thread of the program held: the machine's load; \
                 --threads '{}' shows it)",
                share(w.cpu_waited_share),
                w.groups.join(","),
            ));
        }
        put_wrapped(out, &text, "  why        ", indent);
    }
    if !a.left_out.is_empty() {
        let first = &a.left_out[0].group;
        let text = format!(
            "{} threads: {} (--threads '{first}' to ask about them)",
            a.left_out.iter().map(|g| g.threads).sum::<usize>(),
            groups(&a.left_out),
        );
        put_wrapped(out, &text, "  left out   ", indent);
    }
    if let Some(site) = &a.site {
        let _ = writeln!(out, "  site       only waits at frames containing `{site}`");
    }
    let idle_ns: u64 = why.idle.iter().map(|c| c.total_ns).sum();
    let time = format!(
        "{}: on a CPU {}, waiting {} (for the causes below {}, idle {}), not analysed {}",
        format_ns(a.wall_ns),
        format_percent(a.on_cpu_ns, a.wall_ns),
        format_percent(a.waits_ns, a.wall_ns),
        format_percent(a.waits_ns.saturating_sub(idle_ns), a.wall_ns),
        format_percent(idle_ns, a.wall_ns),
        format_percent(why.coverage.unfinished_ns, a.wall_ns),
    );
    // What "not analysed" is, where it is enough to change the answer.
    let mut time = time;
    if why.coverage.unfinished_ns.saturating_mul(100) >= a.wall_ns && a.wall_ns > 0 {
        time.push_str(
            ": sleeps still going on when the recording ended (the analysis follows a sleep when \
             it ends, so a thread asleep through the recording, a pool waiting for work or a \
             server with no load, is not in it: record while the load runs, or longer)",
        );
    }
    put_wrapped(out, &time, "  their time ", indent);
}

/// The causes, best first, then idle.
fn write_causes(out: &mut String, why: &Why, style: StackStyle) {
    if why.causes.is_empty() {
        out.push_str("No cause: the analysed threads waited for nothing in the program.\n");
    } else {
        let _ = writeln!(
            out,
            "Causes of their waiting, best first ({} of {})",
            why.causes.len(),
            why.causes_total
        );
        for cause in &why.causes {
            write_cause(out, cause, style);
        }
    }
    if !why.idle.is_empty() {
        out.push('\n');
        out.push_str("Idle: waiting for work from outside the program (not a bottleneck)\n");
        for cause in &why.idle {
            write_cause(out, cause, style);
        }
    }
}

/// What the analysis followed, and what it did not, with why.
fn write_coverage(out: &mut String, why: &Why) {
    let a = &why.analysed;
    let c = &why.coverage;
    out.push('\n');
    let coverage = format!(
        "Coverage: {} intervals analysed, {} lost, {} spurious wakeups; not followed {}; chains \
         followed {} threads deep over {} of history",
        c.intervals,
        c.lost_intervals,
        c.spurious_wakeups,
        format_percent(c.unexplained_ns, a.wall_ns),
        c.max_depth,
        format_ns(c.history_ns),
    );
    put_wrapped(out, &coverage, "", "  ");
    if c.unexplained_ns > 0 {
        let u = &c.unexplained;
        let parts: Vec<String> = [
            (
                u.past_record_limit_ns,
                "in sleeps kept past the analysis' limit of records (no call, stacks or waker: \
                 what they slept in is not known)",
            ),
            (
                u.no_wakeup_seen_ns,
                "in sleeps whose wakeup was not seen (lost or out of order in the stream)",
            ),
            (
                u.no_timeline_ns,
                "at threads' time the analysis does not know (before their history, or lost \
                 intervals)",
            ),
            (u.depth_limit_ns, "past the depth followed"),
        ]
        .into_iter()
        .filter(|(ns, _)| *ns > 0)
        .map(|(ns, what)| format!("{} {what}", format_percent(ns, a.wall_ns)))
        .collect();
        let text = format!(
            "Not followed: {} of their time ({}): {}",
            format_percent(c.unexplained_ns, a.wall_ns),
            format_ns(c.unexplained_ns),
            parts.join("; ")
        );
        put_wrapped(out, &text, "", "  ");
    }
    if c.stackless_ns > 0 {
        let stackless = format!(
            "Stacks: {} of the threads' waits were analysed without their stacks (the \
             analysis' limit of records was reached): their causes have threads and kinds, not \
             places, calls or locks",
            format_ns(c.stackless_ns),
        );
        put_wrapped(out, &stackless, "", "  ");
    }
}

fn groups(rows: &[GroupRow]) -> String {
    let mut names: Vec<String> = rows
        .iter()
        .take(MAX_NAMES)
        .map(|g| format!("{} ({})", g.group, g.threads))
        .collect();
    if rows.len() > MAX_NAMES {
        names.push(format!("and {} more", rows.len() - MAX_NAMES));
    }
    names.join(", ")
}

fn names(rows: &[NamedTime]) -> String {
    let mut names: Vec<String> = rows
        .iter()
        .take(MAX_NAMES)
        .map(|r| format!("{} ({})", r.name, format_ns(r.total_ns)))
        .collect();
    if rows.len() > MAX_NAMES {
        names.push(format!("and {} more", rows.len() - MAX_NAMES));
    }
    names.join(", ")
}

/// What a cause is, in words.
fn what(cause: &Cause) -> &'static str {
    match cause.kind {
        CauseKind::Cpu => "on a CPU",
        CauseKind::CpuSaturation => "waiting for a CPU",
        CauseKind::Spin => "on a CPU, spinning for a lock another thread held",
        CauseKind::WakeupLatency => "runnable while the CPU it got was idle",
        CauseKind::Sleep => "asleep on purpose while others waited",
        CauseKind::Io => "in I/O",
        CauseKind::Cycle => "waiting in a cycle",
        CauseKind::DepthLimit => "past the depth followed",
        CauseKind::Unknown => "not known",
        CauseKind::Idle => "waiting for outside input",
    }
}

/// Kernel frames shown under the user stack.
const KERNEL_FRAMES: usize = 4;

/// The root's kernel stack (a few frames past the scheduler's, marked `kernel`), where a root
/// on a CPU let the waiters go in the kernel, and the kernel lock the cause's time was spent
/// under.
fn write_kernel(out: &mut String, cause: &Cause) {
    let past_scheduler = cause
        .kernel_stack
        .iter()
        .position(|f| !(f.starts_with("schedule") || f.starts_with("__schedule")))
        .unwrap_or(0);
    for frame in cause.kernel_stack[past_scheduler..]
        .iter()
        .take(KERNEL_FRAMES)
    {
        let _ = writeln!(out, "       kernel {frame}");
    }
    if !cause.release_stack.is_empty() {
        // As many frames as fit the line, at least the first.
        let line = |frames: usize| {
            let path: Vec<&str> = cause
                .release_stack
                .iter()
                .take(frames)
                .map(String::as_str)
                .collect();
            format!("     released in the kernel at {}", path.join(" <- "))
        };
        let fits = (1..=KERNEL_FRAMES)
            .rev()
            .map(line)
            .find(|l| l.chars().count() <= 100)
            .unwrap_or_else(|| line(1));
        let _ = writeln!(out, "{fits}");
    }
    if let Some(lock) = &cause.kernel_lock {
        let share = format_percent(lock.total_ns, cause.total_ns);
        // The slow path, then who took the lock, as many frames as fit the line.
        let slow = lock.stack.first();
        let callers = lock.callers();
        let line = |frames: usize| {
            let mut path: Vec<&str> = slow.map(String::as_str).into_iter().collect();
            path.extend(callers.iter().take(frames).map(String::as_str));
            if callers.len() > frames {
                path.push("...");
            }
            format!(
                "     under kernel lock {} ({}): {share} of it",
                lock.lock,
                path.join(" <- ")
            )
        };
        let fits = (0..=KERNEL_FRAMES)
            .rev()
            .map(line)
            .find(|l| l.len() <= 100)
            .unwrap_or_else(|| line(0));
        let _ = writeln!(out, "{fits}");
    }
}

/// One cause: its rank, kind and share, who, where, and what it explains.
fn write_cause(out: &mut String, cause: &Cause, style: StackStyle) {
    let call = cause
        .call
        .as_deref()
        .map(|c| format!(" in {c}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "  #{} {}{call}: {:.1}% of their time ({}), in {} {}",
        cause.rank,
        cause.kind.name(),
        cause.share * 100.0,
        format_ns(cause.total_ns),
        cause.waits,
        // A spin is the cpu probe's samples, not off-CPU waits.
        if cause.kind == CauseKind::Spin {
            "samples"
        } else {
            "waits"
        },
    );
    let who = format!("{}: {}", what(cause), names(&cause.threads));
    put_wrapped(out, &who, "     ", "       ");
    if cause.stack.is_empty() {
        out.push_str("       [no stack]\n");
    }
    let lines = frames::shown_names(&cause.stack, style, TEXT_WIDTH - 7);
    for line in lines.iter().take(MAX_FRAMES) {
        let _ = writeln!(out, "       {line}");
    }
    if lines.len() > MAX_FRAMES {
        let _ = writeln!(out, "       ... {} more", lines.len() - MAX_FRAMES);
    }
    write_kernel(out, cause);
    write_ran_at(out, cause, style);
    write_holders(out, cause);
    write_sites(out, cause, style);
    write_chain(out, cause, style);
}

/// What the roots (or the CPUs' holders) ran, from the samples, and where it woke the waiters.
fn write_ran_at(out: &mut String, cause: &Cause, style: StackStyle) {
    if cause.kind == CauseKind::CpuSaturation && !cause.ran_at.is_empty() {
        out.push_str("     (the stack is what held the CPUs, from the cpu probe's samples)\n");
    }
    if cause.ran_at.len() > 1 {
        let others: Vec<String> = cause.ran_at[1..]
            .iter()
            .map(|r| {
                let at = if r.stack.is_empty() {
                    "[no stack]".to_owned()
                } else {
                    let two: Vec<&String> = r.stack.iter().take(2).collect();
                    match style {
                        StackStyle::Full => two
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(" <- "),
                        StackStyle::Readable => frames::leaf_first_line(&two, style, 40),
                    }
                };
                format!("{at} {:.0}%", r.share * 100.0)
            })
            .collect();
        let text = format!(
            "ran there {:.0}% of the samples; elsewhere: {}",
            cause.ran_at[0].share * 100.0,
            others.join(", ")
        );
        put_wrapped(out, &text, "     ", "       ");
    }
    if !cause.ran_at.is_empty() && cause.kind == CauseKind::Cpu {
        if let Some(end) = cause.ended_at.first() {
            let at = match style {
                StackStyle::Full => end
                    .stack
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" <- "),
                StackStyle::Readable => frames::leaf_first_line(&end.stack, style, TEXT_WIDTH - 28),
            };
            let _ = writeln!(out, "     until it woke them at: {at}");
        }
    }
}

/// Who held the CPUs or the lock, and who ended the sleeps.
fn write_holders(out: &mut String, cause: &Cause) {
    if cause.kind == CauseKind::Spin {
        // Only `pthread_spin_lock` is recognised (docs/BOTTLENECK.md), whose holder no probe
        // sees.
        let holder = "the lock's holder: not recorded (a spinlock never enters the kernel, so no \
                      probe sees who holds it)";
        put_wrapped(out, holder, "     ", "       ");
    } else if !cause.holders.is_empty() {
        put_wrapped(
            out,
            &format!("CPUs held by: {}", names(&cause.holders)),
            "     ",
            "       ",
        );
    }
    if !cause.ended_by.is_empty() {
        put_wrapped(
            out,
            &format!("ended by: {}", names(&cause.ended_by)),
            "     ",
            "       ",
        );
    }
}

/// The wait sites the cause explains.
fn write_sites(out: &mut String, cause: &Cause, style: StackStyle) {
    if !cause.sites.is_empty() {
        out.push_str("     explains:\n");
    }
    for site in cause.sites.iter().take(MAX_SITES) {
        match style {
            StackStyle::Full => {
                let _ = writeln!(out, "       {}", site_line(site, style));
            }
            StackStyle::Readable => {
                put_wrapped(out, &site_line(site, style), "       ", "         ")
            }
        }
    }
    if cause.sites.len() > MAX_SITES {
        let _ = writeln!(
            out,
            "       and {} more sites",
            cause.sites.len() - MAX_SITES
        );
    }
}

/// The heaviest chain of waits that leads to the cause, one thread per hop.
fn write_chain(out: &mut String, cause: &Cause, style: StackStyle) {
    let chain: Vec<String> = cause
        .chain
        .iter()
        .map(|hop| match frames::site_name(&hop.stack, style, 40) {
            Some(frame) => format!("{} at {frame}", hop.thread),
            None => hop.thread.clone(),
        })
        .collect();
    let chain = format!("chain: {}", chain.join(" -> "));
    match style {
        StackStyle::Full => {
            let _ = writeln!(out, "     {chain}");
        }
        StackStyle::Readable => put_wrapped(out, &chain, "     ", "       "),
    }
}

/// A site a cause explains: what its threads waited in, on what, at its stack from the telling
/// frame up, who and how long.
fn site_line(site: &Site, style: StackStyle) -> String {
    let what = site_what(site);
    let at = if site.stack.is_empty() {
        "[no stack]".to_owned()
    } else {
        frames::leaf_first_line(&site.stack, style, SITE_COLUMNS)
    };
    let threads = match style {
        StackStyle::Full => site.threads.join(", "),
        StackStyle::Readable => frames::thread_list(&site.threads, 40),
    };
    format!("{what} at {at}: {threads} ({})", format_ns(site.total_ns))
}

/// What a site's threads waited in (`runnable`, the call, else the wait's kind) and on what (the
/// lock word), as `why` and `why A B` say it.
pub(super) fn site_what(site: &Site) -> String {
    let what = match (site.part, &site.call) {
        (WaitPart::Runnable, _) => "runnable".to_owned(),
        (_, Some(call)) if !call.starts_with("futex") => call.clone(),
        _ => site.kind.to_string(),
    };
    match &site.object {
        Some(object) => format!("{what} {object}"),
        None => what,
    }
}
