//! The text of a [`WhyDiff`]: both recordings and the basis, the ranked table of changes (with the
//! threads' own CPU time and what was not analysed beneath), then the top changes in detail.

use super::compare::{
    Basis, CauseChange, CauseSide, ChangeKind, ChangeStatus, SideSummary, WhyDiff,
};
use super::compare_table::{explains_text, share_text, signed};
use super::model::Site;
use crate::render::units::{format_fraction, format_ns};
use std::fmt::Write as _;

/// Columns a line may use.
const WIDTH: usize = 100;
/// Changes told in detail after the table.
const DETAILS: usize = 3;
/// Sites listed per side of a detailed change.
const MAX_SITES: usize = 3;
/// Stack frames shown in a detailed change.
const MAX_FRAMES: usize = 8;
/// Width of the table's `where` column.
const WHERE_WIDTH: usize = 30;
/// Width of the kind, change and where columns together.
const LABEL_WIDTH: usize = 14 + 1 + 6 + 1 + WHERE_WIDTH;

impl WhyDiff {
    /// The text report.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        header(&mut out, self);
        table(&mut out, self);
        for change in self.changes.iter().take(DETAILS) {
            out.push('\n');
            detail(&mut out, self, change);
        }
        out.lines().map(|line| fit(line) + "\n").collect()
    }
}

/// `line` cut to [`WIDTH`] columns, `…` marking the cut.
fn fit(line: &str) -> String {
    if line.chars().count() <= WIDTH {
        return line.to_string();
    }
    let mut cut: String = line.chars().take(WIDTH - 1).collect();
    cut.push('…');
    cut
}

/// `text` cut to `width` columns, `…` marking the cut.
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

fn side_lines(out: &mut String, label: &str, side: &SideSummary) {
    let _ = writeln!(out, "  {label:<6} {}", side.path);
    let _ = writeln!(
        out,
        "         `{}` (pid {})",
        side.command.join(" "),
        side.pid
    );
    let ops = side
        .operations
        .map(|n| format!(", {n} operation{}", if n == 1 { "" } else { "s" }))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "         {} {} ({}), {} on {} CPUs{ops}",
        side.os,
        side.kernel_release,
        side.backend,
        format_ns(side.duration_ns),
        side.cpu_count,
    );
    let _ = writeln!(
        out,
        "         analysed {} threads ({}): their time {}, on a CPU {}",
        side.threads,
        side.groups.join(", "),
        format_ns(side.wall_ns),
        format_fraction(crate::render::units::share(side.on_cpu_ns, side.wall_ns)),
    );
}

fn header(out: &mut String, diff: &WhyDiff) {
    out.push_str("lockscope why: the changes in causes from base to other, largest first\n");
    side_lines(out, "base", &diff.base);
    side_lines(out, "other", &diff.other);
    let d = &diff.difference;
    let basis = match diff.basis.basis {
        Basis::PerThreadSecond => format!(
            "per thread-second: shares of the analysed threads' wall time, which sum to 100% on \
             each side, so time moves between parts ({} moved); `explains` is a change's part \
             of what moved (--per-op N_BASE,N_OTHER compares per unit of work)",
            signed(d.moved, diff.basis.basis).trim_start_matches('+'),
        ),
        Basis::PerSecond => format!(
            "per second of each recording: {:.2} analysed threads in base, {:.2} in other; \
             `explains` is a change's part of the time that moved between parts ({} moved)",
            d.base / 1e9,
            d.other / 1e9,
            signed(d.moved, diff.basis.basis).trim_start_matches('+'),
        ),
        Basis::PerOperation { .. } => format!(
            "per operation: each took {} of the analysed threads' time in base, {} in other \
             ({}); `explains` is a change's part of that difference",
            format_ns(d.base.round() as u64),
            format_ns(d.other.round() as u64),
            signed(d.delta, diff.basis.basis),
        ),
    };
    for (i, line) in wrap(&basis, WIDTH - 9).iter().enumerate() {
        let label = if i == 0 { "basis" } else { "" };
        let _ = writeln!(out, "  {label:<6} {line}");
    }
    if diff.matched_at == "leaf" {
        out.push_str(
            "  matched  at the first canonical frame of each cause (the stacks were walked \
             differently)\n",
        );
    }
    for warning in &diff.warnings {
        for (i, line) in wrap(&format!("WARNING: {warning}"), WIDTH - 9)
            .iter()
            .enumerate()
        {
            let indent = if i == 0 { "" } else { "         " };
            let _ = writeln!(out, "{indent}{line}");
        }
    }
}

/// `text` in lines of at most `width` columns, broken at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let last = lines.last_mut().map(|l| l.chars().count()).unwrap_or(0);
        if last > 0 && last + 1 + word.chars().count() > width {
            lines.push(String::new());
        }
        if let Some(line) = lines.last_mut() {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}

/// A side's share in a change's detail: `-` where the cause is absent.
fn share_cell(side: &CauseSide, present: bool) -> String {
    share_text(present.then_some(side.share))
}

fn table(out: &mut String, diff: &WhyDiff) {
    out.push('\n');
    if diff.changes.is_empty() {
        out.push_str("No cause on either side: the analysed threads waited for nothing.\n");
        return;
    }
    let _ = writeln!(
        out,
        "Changes in causes ({} of {}; base and other: share of the analysed threads' time)",
        diff.changes.len(),
        diff.changes_total
    );
    let _ = writeln!(
        out,
        "  {:>3} {:<14} {:<6} {:<WHERE_WIDTH$} {:>7} {:>7} {:>13} {:>8}",
        "#", "kind", "change", "where", "base", "other", "delta", "explains"
    );
    let table = diff.table();
    for row in &table.rows {
        let _ = writeln!(
            out,
            "  {:>3} {:<14} {:<6} {:<WHERE_WIDTH$} {:>7} {:>7} {:>13} {:>8}",
            row.rank,
            row.kind,
            row.status.name(),
            cut(&row.place, WHERE_WIDTH),
            share_text(row.base),
            share_text(row.other),
            row.delta.text,
            explains_text(row.explains),
        );
    }
    for p in &table.rest {
        let _ = writeln!(
            out,
            "  {:>3} {:<LABEL_WIDTH$} {:>7} {:>7} {:>13} {:>8}",
            "-",
            p.what,
            format_fraction(p.base),
            format_fraction(p.other),
            p.delta.text,
            explains_text(p.explains),
        );
    }
}

/// One change in full: its line, where (stacks, kernel lock, release), and each side.
fn detail(out: &mut String, diff: &WhyDiff, c: &CauseChange) {
    let call = c
        .call
        .as_deref()
        .map(|call| format!(" in {call}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "#{} {}{call} at {}: {}, {} -> {} ({}, explains {})",
        c.rank,
        c.kind.name(),
        c.place,
        c.status.name(),
        share_cell(&c.base, c.status != ChangeStatus::New),
        share_cell(&c.other, c.status != ChangeStatus::Gone),
        signed(c.delta_normalized, diff.basis.basis),
        explains_text(c.explains),
    );
    if c.kind == ChangeKind::KernelLock {
        out.push_str(
            "   matched by its kernel lock and the kernel's entry to it (the causes it gathers \
             below)\n",
        );
    } else if c.stack.is_empty() {
        out.push_str("   matched by kind (one cause per kind on each side)\n");
    } else {
        out.push_str("   stack, leaf first (canonical)\n");
        for frame in c.stack.iter().take(MAX_FRAMES) {
            let _ = writeln!(out, "     {frame}");
        }
        if c.stack.len() > MAX_FRAMES {
            let _ = writeln!(out, "     ... {} more", c.stack.len() - MAX_FRAMES);
        }
    }
    if let Some(lock) = &c.kernel_lock {
        let whose = if lock.slept == "root" {
            "its root"
        } else {
            "the waits"
        };
        let _ = writeln!(
            out,
            "   under kernel lock {}: {whose} slept in {}",
            lock.lock,
            lock.stack
                .first()
                .into_iter()
                .chain(lock.callers().first())
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(" <- "),
        );
    }
    if !c.release_stack.is_empty() {
        let _ = writeln!(
            out,
            "   released in the kernel at {}",
            c.release_stack
                .iter()
                .take(3)
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(" <- ")
        );
    }
    if !c.kernel_stack.is_empty() {
        out.push_str("   kernel stack, leaf first\n");
        for frame in c.kernel_stack.iter().take(MAX_FRAMES) {
            let _ = writeln!(out, "     {frame}");
        }
    }
    for (label, side) in [("base", &c.base), ("other", &c.other)] {
        side_detail(out, label, side);
    }
}

/// One side of a change: its time and waits, its roots, the causes and waits it explains, and
/// who held the CPUs meanwhile.
fn side_detail(out: &mut String, label: &str, side: &CauseSide) {
    if side.waits == 0 && side.total_ns == 0 {
        let _ = writeln!(out, "   {label}: none");
        return;
    }
    let roots: Vec<String> = side
        .threads
        .iter()
        .take(MAX_SITES)
        .map(|t| format!("{} ({})", t.name, format_ns(t.total_ns)))
        .collect();
    let _ = writeln!(
        out,
        "   {label}: {} in {} wait{}, roots {}; explains:",
        format_ns(side.total_ns),
        side.waits,
        if side.waits == 1 { "" } else { "s" },
        roots.join(", "),
    );
    for part in side.parts.iter().take(MAX_SITES) {
        let at = part
            .stack
            .iter()
            .take(2)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" <- ");
        let _ = writeln!(
            out,
            "     {:>8}  as {} at {}",
            format_ns(part.total_ns),
            part.kind.name(),
            if at.is_empty() { "[no stack]" } else { &at },
        );
    }
    if side.parts.len() > MAX_SITES {
        let _ = writeln!(out, "     and {} more causes", side.parts.len() - MAX_SITES);
    }
    if !side.parts.is_empty() {
        out.push_str("     the waits:\n");
    }
    for site in side.sites.iter().take(MAX_SITES) {
        let _ = writeln!(out, "     {}", site_line(site));
    }
    if side.sites.len() > MAX_SITES {
        let _ = writeln!(out, "     and {} more sites", side.sites.len() - MAX_SITES);
    }
    if !side.holders.is_empty() {
        let held: Vec<String> = side
            .holders
            .iter()
            .take(MAX_SITES)
            .map(|t| format!("{} ({})", t.name, format_ns(t.total_ns)))
            .collect();
        let _ = writeln!(out, "     the CPUs meanwhile held by {}", held.join(", "));
    }
}

/// A waiting site: its time, what it waited in, the lock word, who, and where (last, as the
/// part a line too long loses).
fn site_line(site: &Site) -> String {
    let what = super::text::site_what(site);
    let at = if site.stack.is_empty() {
        "[no stack]".to_owned()
    } else {
        site.stack.join(" <- ")
    };
    format!(
        "{:>8}  {what} by {} at {at}",
        format_ns(site.total_ns),
        site.threads.join(", "),
    )
}
