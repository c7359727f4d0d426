//! The `syscall` probe's section: per system call, calls, errors by errno, total, mean, max and
//! a p99 bound.

use super::*;
use crate::render::tables::{table, Cell, Column};

/// This file's section, for `build.rs`'s list.
pub(super) const SECTION: Entry = Entry::of::<Syscalls>();

/// The system calls, heaviest total first.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct Syscalls(Vec<SyscallRow>);

#[derive(Serialize)]
pub(crate) struct SyscallRow {
    pub(crate) syscall: String,
    pub(crate) calls: u64,
    pub(crate) errors: BTreeMap<String, u64>,
    pub(crate) total_ns: u64,
    pub(crate) mean_ns: u64,
    pub(crate) max_ns: u64,
    pub(crate) p99_upper_ns: u64,
    /// The innermost named user frame of the slowest call's site, when its stack was captured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) slowest_site: Option<String>,
}

fn syscalls(profile: &Profile) -> Option<Vec<SyscallRow>> {
    // Per call: stats, errors by errno, the slowest captured call and its site.
    type CallAcc = (WaitStats, BTreeMap<String, u64>, u64, Option<String>);
    let mut calls: BTreeMap<&str, CallAcc> = BTreeMap::new();
    for w in profile
        .waits
        .iter()
        .filter(|w| w.is_from(&catalog::SYSCALL))
    {
        let (call, errno) = call_and_errno(&w.operation);
        let entry = calls.entry(call).or_default();
        entry.0.merge(&w.stats);
        if let Some(errno) = errno {
            *entry.1.entry(errno.to_string()).or_insert(0) += w.stats.count;
        }
        if w.user_stack.is_some() && w.stats.max_ns >= entry.2 {
            entry.2 = w.stats.max_ns;
            entry.3 = Some(site_frame(profile, w));
        }
    }
    if calls.is_empty() {
        return None;
    }
    let mut rows: Vec<SyscallRow> = calls
        .into_iter()
        .map(|(call, (stats, errors, _, site))| SyscallRow {
            syscall: call.to_string(),
            calls: stats.count,
            errors,
            total_ns: stats.total_ns,
            mean_ns: stats.mean_ns(),
            max_ns: stats.max_ns,
            p99_upper_ns: stats.histogram.quantile_upper_bound(0.99).unwrap_or(0),
            slowest_site: site,
        })
        .collect();
    rows.sort_by_key(|r| (Reverse(r.total_ns), Reverse(r.calls)));
    Some(rows)
}

impl Section for Syscalls {
    const SOURCE: Source = Source::Probe(&catalog::SYSCALL);

    fn build(profile: &Profile) -> Option<Syscalls> {
        syscalls(profile).map(Syscalls)
    }

    fn write_text(&self, out: &mut String, _style: StackStyle) {
        write_syscalls(&self.0, out);
    }

    fn write_html(&self, out: &mut String, heading: &str) {
        let _ = writeln!(out, "<{heading}>System calls</{heading}>");
        let columns: [Column<'_, SyscallRow>; 8] = [
            ("system call", |s| Cell::Code(Some(&s.syscall))),
            ("calls", |s| Cell::Count(s.calls)),
            ("errors", |s| Cell::Counts(&s.errors)),
            ("total", |s| Cell::Ns(s.total_ns)),
            ("mean", |s| Cell::Ns(s.mean_ns)),
            ("max", |s| Cell::Ns(s.max_ns)),
            ("p99≤", |s| Cell::Ns(s.p99_upper_ns)),
            ("slowest call's site", |s| {
                Cell::Code(s.slowest_site.as_deref())
            }),
        ];
        table(out, "section-table", &columns, &self.0);
    }
}

fn write_syscalls(rows: &[SyscallRow], out: &mut String) {
    let _ = writeln!(out);
    let _ = writeln!(out, "System calls (syscall), heaviest total first");
    let _ = writeln!(
        out,
        "  {:<18}{:>8}{:>11}{:>11}{:>11}{:>11}  errors / slowest site",
        "syscall", "calls", "total", "mean", "max", "p99 <"
    );
    for r in rows.iter().take(TOP * 2) {
        let errors: Vec<String> = r.errors.iter().map(|(e, n)| format!("{e} {n}")).collect();
        let mut tail = errors.join(", ");
        if let Some(site) = &r.slowest_site {
            if !tail.is_empty() {
                tail.push_str("; ");
            }
            tail.push_str(&format!("slowest at {site}"));
        }
        let _ = writeln!(
            out,
            "  {:<18}{:>8}{:>11}{:>11}{:>11}{:>11}  {}",
            r.syscall,
            r.calls,
            format_ns(r.total_ns),
            format_ns(r.mean_ns),
            format_ns(r.max_ns),
            format_ns(r.p99_upper_ns),
            tail
        );
    }
    if rows.len() > TOP * 2 {
        let _ = writeln!(out, "  ... and {} more", rows.len() - TOP * 2);
    }
}
