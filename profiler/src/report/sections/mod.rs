//! The report sections after the top groups: contention apart from idle waits, where each
//! thread's wall time went, and one section per probe beyond futex (offcpu, syscall, lifecycle,
//! klock). Each section appears only when the profile has its data, in text and in JSON
//! (`sections` in `docs/REPORT-JSON.md`), and all but cpu_saturation and on_cpu as tables of
//! `lockscope html` (`html/report.rs`, from the fields of this typed value).
//!
//! - **contention**: the waits on other threads of the program ranked on their own, the idle
//!   waits listed apart ([`lockscope_probes::wait_roles`]): a sleep another thread of the program
//!   ended is contention whatever it slept in (a futex, a semaphore, an eventfd or pipe latch,
//!   `epoll_wait`, a signal), one something outside ended (a client, a timer) is idle; without who
//!   ended them (no `offcpu` probe, old profiles, DTrace), mutex, rwlock and kernel-lock waits are
//!   contention and a thread parked most of its window at one condvar, poll or similar site is
//!   idle, so that an idle pool never buries the contention on the request path;
//! - **breakdown**: per thread name (threads of one name summed) and in total, the share of wall
//!   time on CPU, in the run queue, in lock, condvar and other futex waits, in poll, I/O, sleep and
//!   other sleeps (the shares of one thread add up to 100%), with context switches per second and
//!   the involuntary share, with the `cpu` probe the CPU time its samples give beside on-CPU, and
//!   where the profile says, the time asleep by who ended the sleeps (another thread of the
//!   program, or something outside it);
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
//! One file per section, named as the section (its key in `Sections` and in the JSON, which is
//! the `section` of the probes' descriptors in the catalog: `on_cpu` for the cpu probe,
//! `cpu_saturation` for preempt): this file holds what they share (the site rows, thread labels,
//! the wait plumbing skipped when naming a site).

use crate::render::units::{format_ns, format_percent};
use lockscope_probes::catalog;
use lockscope_probes::waitfor::WokenBy;
use lockscope_probes::{
    wait_roles, Profile, RoleBasis, RoleOf, StackId, ThreadTime, TimeClass, WaitKind, WaitRecord,
    WaitRole, WaitStats,
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

pub(crate) use breakdown::{Breakdown, TimeRow};
pub(crate) use contention::Contention;
pub(crate) use klock::KlockRow;
pub(crate) use lifecycle::LifecycleRow;
pub(crate) use offcpu::{OffCpu, OperationRow, WakeupRow};
pub(crate) use syscall::SyscallRow;

use breakdown::breakdown;
use contention::contention;
use cpu_saturation::{cpu_saturation, CpuSaturation};
use klock::{klock, write_klock};
use lifecycle::{lifecycle, write_lifecycle};
use offcpu::offcpu;
use on_cpu::{on_cpu, OnCpu};
use syscall::{syscalls, write_syscalls};

/// Rows per ranked table.
const TOP: usize = 10;

/// Every section the profile has data for.
#[derive(Serialize, Default)]
pub(crate) struct Sections {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) contention: Option<Contention>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) breakdown: Option<Breakdown>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) offcpu: Option<OffCpu>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) syscall: Option<Vec<SyscallRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) lifecycle: Option<Vec<LifecycleRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) klock: Option<Vec<KlockRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_saturation: Option<CpuSaturation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_cpu: Option<OnCpu>,
}

#[derive(Serialize)]
pub(crate) struct SiteRow {
    pub(crate) kind: WaitKind,
    pub(crate) probe: String,
    pub(crate) operation: String,
    pub(crate) count: u64,
    pub(crate) total_ns: u64,
    pub(crate) max_ns: u64,
    pub(crate) threads: Vec<String>,
    /// The innermost named frame of the site.
    pub(crate) frame: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) user_stack: Option<StackId>,
    /// How its role (contention, idle) was told, by its heaviest records (contention and idle
    /// rows only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) basis: Option<RoleBasis>,
    /// Nanoseconds of its waits by who ended their sleeps, where known (contention and idle rows
    /// only).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) woken_ns: BTreeMap<WokenBy, u64>,
    /// Who ended its sleeps in words, as the text's column says it ([`SiteRow::ended_by`];
    /// contention and idle rows only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ended_by: Option<String>,
}

impl SiteRow {
    /// Who ended the site's sleeps, in words for a column: `program 98%` (the largest share of
    /// the time whose waker is known), else `holder` for a lock told by its kind; `parked` for a
    /// thread parked most of its window there (one sleep, or no waker known).
    fn ended_by(&self) -> String {
        let known: u64 = self.woken_ns.values().sum();
        match self
            .woken_ns
            .iter()
            .max_by_key(|&(by, ns)| (*ns, Reverse(*by)))
        {
            _ if self.basis == Some(RoleBasis::Parked) => "parked".to_string(),
            Some((by, ns)) if known > 0 => {
                format!("{} {}", by.name(), format_percent(*ns, known))
            }
            _ => match self.basis {
                Some(RoleBasis::Lock) => "holder".to_string(),
                Some(RoleBasis::Window) => "parked".to_string(),
                _ => "-".to_string(),
            },
        }
    }
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

/// Why a profile does not say who ended its sleeps, and what would.
pub(crate) fn no_wakers_reason(profile: &Profile) -> String {
    let offcpu = profile.waits.iter().any(|w| w.is_from(&catalog::OFFCPU))
        || profile
            .metadata
            .probes
            .iter()
            .any(|p| p.probe == catalog::OFFCPU.name);
    let offcpu_name = catalog::OFFCPU.name;
    match (profile.metadata.backend.as_str(), offcpu) {
        ("dtrace", _) => "the DTrace backend does not record who ended a sleep".to_string(),
        (_, true) => {
            format!("not in this profile: its {offcpu_name} records predate who ended each sleep")
        }
        _ => format!(
            "not recorded: record with --probes {},{offcpu_name}",
            catalog::FUTEX.name
        ),
    }
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

/// What [`site_rows`] gathers per site.
#[derive(Default)]
struct SiteAcc {
    stats: WaitStats,
    threads: Vec<String>,
    frame: String,
    basis_ns: BTreeMap<RoleBasis, u64>,
    woken_ns: BTreeMap<WokenBy, u64>,
}

/// `records` (each with its role, when it has one) merged per site, heaviest first, the first
/// `limit`.
fn site_rows<'a>(
    profile: &Profile,
    records: impl Iterator<Item = (&'a WaitRecord, Option<&'a RoleOf>)>,
    limit: usize,
) -> Vec<SiteRow> {
    let mut sites: BTreeMap<SiteKey, SiteAcc> = BTreeMap::new();
    for (w, role) in records {
        let key = (w.probe.clone(), w.kind, w.operation.clone(), w.user_stack);
        let entry = sites.entry(key).or_insert_with(|| SiteAcc {
            frame: site_frame(profile, w),
            ..SiteAcc::default()
        });
        entry.stats.merge(&w.stats);
        let name = thread_label(profile, w.pid, w.tid);
        if !entry.threads.contains(&name) {
            entry.threads.push(name);
        }
        if let Some(role) = role {
            *entry.basis_ns.entry(role.basis).or_default() += w.stats.total_ns;
            for (&by, &ns) in &role.woken_ns {
                *entry.woken_ns.entry(by).or_default() += ns;
            }
        }
    }
    let mut rows: Vec<SiteRow> = sites
        .into_iter()
        .map(|((probe, kind, operation, user_stack), acc)| SiteRow {
            kind,
            probe,
            operation,
            count: acc.stats.count,
            total_ns: acc.stats.total_ns,
            max_ns: acc.stats.max_ns,
            threads: acc.threads,
            frame: acc.frame,
            user_stack,
            basis: acc
                .basis_ns
                .iter()
                .max_by_key(|&(basis, ns)| (*ns, Reverse(*basis)))
                .map(|(basis, _)| *basis),
            woken_ns: acc.woken_ns,
            ended_by: None,
        })
        .map(|mut row| {
            if row.basis.is_some() {
                row.ended_by = Some(row.ended_by());
            }
            row
        })
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
