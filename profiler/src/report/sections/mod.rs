//! The report sections after the top groups: lock contention apart from idle waits, where each
//! thread's wall time went, and one section per probe beyond futex (offcpu, syscall, lifecycle,
//! klock). Each section appears only when the profile has its data, in text and in JSON
//! (`sections` in `docs/REPORT-JSON.md`).
//!
//! - **contention**: mutex, rwlock and kernel-lock waits ranked on their own, with the idle waits
//!   ([`lockscope_probes::idle_waits`]: a thread parked most of its window in one condvar, poll or
//!   similar site, a pool waiting for work) listed apart, so that an idle pool never buries the
//!   contention on the request path;
//! - **breakdown**: per thread name (threads of one name summed) and in total, the share of wall
//!   time on CPU, in the run queue, in lock, condvar and other futex waits, in poll, I/O, sleep and
//!   other sleeps (the shares of one thread add up to 100%), with context switches per second and
//!   the involuntary share, and with the `cpu` probe the CPU time its samples give beside on-CPU;
//! - **offcpu**: off-CPU time by state and system call, and the heaviest waker → sleeper pairs;
//! - **syscall**: per system call: calls, errors by errno, total, mean, max and a p99 bound;
//! - **lifecycle**: forks, vforks, threads, execs and exits with rates and call times;
//! - **klock**: kernel locks by type and address with their caller;
//! - **cpu_saturation**: the `offcpu` probe's intervals of threads waiting for a CPU (woken and
//!   in the run queue, or preempted), which the report keeps out of its waits: their time per
//!   site (a run-queue delay points at the sleep it woke from) and per thread, and how many of
//!   the target's threads waited for a CPU and ran on one on average, against the CPUs;
//! - **on_cpu**: the `cpu` probe's samples as CPU time (never wait time): per thread, its CPU
//!   time beside its recorded wait time and its hottest stack, then the top stacks by CPU time.
//!
//! One file per section, named as the section (and, for a probe's, as the probe): this file holds
//! what they share (the site rows, thread labels, the wait plumbing skipped when naming a site).

use crate::render::units::{format_ns, format_percent};
use lockscope_probes::{
    idle_waits, Profile, StackId, ThreadTime, TimeClass, WaitKind, WaitRecord, WaitStats,
};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt::Write as _;

mod breakdown;
mod contention;
mod cpu_saturation;
mod klock;
mod lifecycle;
mod offcpu;
mod on_cpu;
mod syscall;

use breakdown::{breakdown, Breakdown};
use contention::{contention, Contention};
use cpu_saturation::{cpu_saturation, CpuSaturation};
use klock::{klock, write_klock, KlockRow};
use lifecycle::{lifecycle, write_lifecycle, LifecycleRow};
use offcpu::{offcpu, OffCpu};
use on_cpu::{on_cpu, OnCpu};
use syscall::{syscalls, write_syscalls, SyscallRow};

/// Rows per ranked table.
const TOP: usize = 10;

/// Every section the profile has data for.
#[derive(Serialize, Default)]
pub(crate) struct Sections {
    #[serde(skip_serializing_if = "Option::is_none")]
    contention: Option<Contention>,
    #[serde(skip_serializing_if = "Option::is_none")]
    breakdown: Option<Breakdown>,
    #[serde(skip_serializing_if = "Option::is_none")]
    offcpu: Option<OffCpu>,
    #[serde(skip_serializing_if = "Option::is_none")]
    syscall: Option<Vec<SyscallRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lifecycle: Option<Vec<LifecycleRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    klock: Option<Vec<KlockRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_saturation: Option<CpuSaturation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_cpu: Option<OnCpu>,
}

/// True for an `offcpu` interval of a thread waiting for a CPU (`run-queue`: woken, not yet
/// running; `preempted`): CPU saturation, not a wait for anything the thread asked for.
pub(crate) fn is_cpu_wait(record: &WaitRecord) -> bool {
    record.probe == "offcpu" && matches!(record.operation.as_str(), "run-queue" | "preempted")
}

#[derive(Serialize)]
struct SiteRow {
    kind: WaitKind,
    probe: String,
    operation: String,
    count: u64,
    total_ns: u64,
    max_ns: u64,
    threads: Vec<String>,
    /// The innermost named frame of the site.
    frame: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_stack: Option<StackId>,
}

/// Prefixes (after leading underscores and glibc's `GI_`) of the library frames between a wait
/// and the code that asked for it: a site is named by the first frame past them.
const WAIT_PLUMBING: &[&str] = &[
    "pthread_",
    "lll_",
    "futex",
    "sem_",
    "new_sem_",
    "clock_nanosleep",
    "nanosleep",
    "syscall",
    "poll",
    "ppoll",
    "epoll_",
    "select",
    "pselect",
    "libc_",
    "std::sys::",
    "std::sync::",
    "std::thread::sleep",
    "std::thread::JoinInner",
    "core::",
];

/// True for a frame of the synchronization or system-call plumbing rather than the caller's code.
pub(crate) fn is_wait_plumbing(name: &str) -> bool {
    if lockscope_probes::wait::canonical_wait_frame(name).is_some() {
        return true;
    }
    let trimmed = name.trim_start_matches('_');
    let trimmed = trimmed
        .strip_prefix("GI_")
        .map_or(trimmed, |n| n.trim_start_matches('_'));
    WAIT_PLUMBING.iter().any(|p| trimmed.starts_with(p))
}

/// The name of `record`'s site: the innermost user frame past the wait plumbing (else the
/// innermost user frame), else its innermost kernel frame.
fn site_frame(profile: &Profile, record: &WaitRecord) -> String {
    let user = profile.stack(record.user_stack).and_then(|s| {
        let names: Vec<String> = s.frames.iter().map(|f| f.display_name()).collect();
        names
            .iter()
            .find(|n| !is_wait_plumbing(n))
            .or(names.first())
            .cloned()
    });
    let kernel = || {
        profile
            .stack(record.kernel_stack)
            .and_then(|s| s.frames.first())
            .map(|f| format!("{}_[k]", f.display_name()))
    };
    user.or_else(kernel)
        .unwrap_or_else(|| "[no stack]".to_string())
}

fn thread_label(profile: &Profile, pid: u32, tid: u32) -> String {
    profile
        .thread_name(pid, tid)
        .map_or_else(|| format!("[{tid}]"), str::to_string)
}

impl Sections {
    /// The sections of `profile`; `None` when it has none (no waits at all).
    pub(crate) fn build(profile: &Profile) -> Option<Sections> {
        let sections = Sections {
            contention: contention(profile),
            breakdown: breakdown(profile),
            offcpu: offcpu(profile),
            syscall: syscalls(profile),
            lifecycle: lifecycle(profile),
            klock: klock(profile),
            cpu_saturation: cpu_saturation(profile),
            on_cpu: on_cpu(profile),
        };
        let empty = sections.contention.is_none()
            && sections.breakdown.is_none()
            && sections.offcpu.is_none()
            && sections.syscall.is_none()
            && sections.lifecycle.is_none()
            && sections.klock.is_none()
            && sections.cpu_saturation.is_none()
            && sections.on_cpu.is_none();
        (!empty).then_some(sections)
    }

    /// Appends the sections as text.
    pub(crate) fn write_text(&self, out: &mut String) {
        if let Some(c) = &self.contention {
            c.write_text(out);
        }
        if let Some(b) = &self.breakdown {
            b.write_text(out);
        }
        if let Some(o) = &self.offcpu {
            o.write_text(out);
        }
        if let Some(rows) = &self.syscall {
            write_syscalls(rows, out);
        }
        if let Some(rows) = &self.lifecycle {
            write_lifecycle(rows, out);
        }
        if let Some(rows) = &self.klock {
            write_klock(rows, out);
        }
        if let Some(saturation) = &self.cpu_saturation {
            saturation.write_text(out);
        }
        if let Some(on_cpu) = &self.on_cpu {
            on_cpu.write_text(out);
        }
    }
}

/// Sites keyed by (probe, kind, operation, user stack).
type SiteKey = (String, WaitKind, String, Option<StackId>);

fn site_rows<'a>(
    profile: &Profile,
    records: impl Iterator<Item = &'a WaitRecord>,
    limit: usize,
) -> Vec<SiteRow> {
    let mut sites: BTreeMap<SiteKey, (WaitStats, Vec<String>, String)> = BTreeMap::new();
    for w in records {
        let key = (w.probe.clone(), w.kind, w.operation.clone(), w.user_stack);
        let entry = sites
            .entry(key)
            .or_insert_with(|| (WaitStats::default(), Vec::new(), site_frame(profile, w)));
        entry.0.merge(&w.stats);
        let name = thread_label(profile, w.pid, w.tid);
        if !entry.1.contains(&name) {
            entry.1.push(name);
        }
    }
    let mut rows: Vec<SiteRow> = sites
        .into_iter()
        .map(
            |((probe, kind, operation, user_stack), (stats, threads, frame))| SiteRow {
                kind,
                probe,
                operation,
                count: stats.count,
                total_ns: stats.total_ns,
                max_ns: stats.max_ns,
                threads,
                frame,
                user_stack,
            },
        )
        .collect();
    rows.sort_by_key(|r| (Reverse(r.total_ns), Reverse(r.count)));
    rows.truncate(limit);
    rows
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(max - 1).collect();
        cut.push('…');
        cut
    }
}

/// Splits `openat ENOENT` into the call and the errno.
fn call_and_errno(operation: &str) -> (&str, Option<&str>) {
    match operation.split_once(' ') {
        Some((call, errno)) => (call, Some(errno)),
        None => (operation, None),
    }
}
