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
//!   the involuntary share;
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

use crate::units::{format_ns, format_percent};
use lockscope_probes::{
    idle_waits, Profile, StackId, ThreadTime, TimeClass, WaitKind, WaitRecord, WaitStats,
};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Rows per ranked table.
const TOP: usize = 10;

/// Kernel functions that are the lock itself, not its caller (for klock's caller column).
const LOCK_INTERNALS: &[&str] = &[
    "__mutex_lock",
    "mutex_lock",
    "__down",
    "down_",
    "rwsem_",
    "osq_lock",
    "mutex_spin_on_owner",
    "queued_",
    "native_queued",
    "pv_queued",
    "pv_wait",
    "lock_acquire",
    "_raw_",
    "do_raw_",
    "rt_mutex",
    "rtlock",
    "percpu_down",
    "percpu_rwsem",
    "schedule",
    "__schedule",
    "preempt_schedule",
    "bpf_",
    "lock_contended",
    "__traceiter",
];

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

/// Threads waiting for a CPU.
#[derive(Serialize)]
struct CpuSaturation {
    cpu_count: u32,
    /// Time in the run queue after a wakeup, and preempted, summed over threads.
    run_queue_ns: u64,
    preempted_ns: u64,
    /// The target's threads waiting for a CPU, on average over the recording.
    waiting_threads: f64,
    /// The target's threads on a CPU, on average (from the per-thread times; absent without).
    #[serde(skip_serializing_if = "Option::is_none")]
    running_threads: Option<f64>,
    /// Heaviest first: `frame` is the site of the sleep a run-queue delay woke from
    /// (`[preempted]` for preemptions, which have no stack).
    sites: Vec<SiteRow>,
    threads: Vec<SaturationThread>,
}

#[derive(Serialize)]
struct SaturationThread {
    pid: u32,
    tid: u32,
    name: String,
    run_queue_ns: u64,
    preempted_ns: u64,
}

/// The `cpu` probe's on-CPU profile.
#[derive(Serialize)]
struct OnCpu {
    samples: u64,
    cpu_ns: u64,
    /// Every thread sampled on CPU, most CPU time first.
    threads: Vec<OnCpuThread>,
    /// Distinct user stacks sampled.
    stacks_total: usize,
    /// The top [`TOP`] of them by CPU time.
    stacks: Vec<OnCpuStack>,
}

#[derive(Serialize)]
struct OnCpuThread {
    pid: u32,
    tid: u32,
    name: String,
    samples: u64,
    cpu_ns: u64,
    /// The thread's recorded wait time (its records of the wait probes), for comparison.
    wait_ns: u64,
    /// The innermost functions of its hottest user stack, leaf first.
    hottest: Vec<String>,
}

#[derive(Serialize)]
struct OnCpuStack {
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

#[derive(Serialize)]
struct Contention {
    /// Contended sites: kind, operation and user stack, heaviest first.
    sites: Vec<SiteRow>,
    /// Idle sites: a thread parked most of its window there.
    idle: Vec<SiteRow>,
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

#[derive(Serialize)]
struct Breakdown {
    /// Per thread name (threads of one name summed), heaviest wall time first.
    by_name: Vec<TimeRow>,
    /// Per thread, heaviest wall time first (at most the top rows).
    by_thread: Vec<TimeRow>,
    /// All threads.
    total: TimeRow,
}

#[derive(Serialize)]
struct TimeRow {
    name: String,
    threads: usize,
    wall_ns: u64,
    time_ns: BTreeMap<TimeClass, u64>,
    voluntary_switches: u64,
    involuntary_switches: u64,
    /// Context switches per second of wall time (summed over the row's threads).
    switches_per_s: f64,
    /// Involuntary share of the context switches.
    involuntary_share: f64,
}

#[derive(Serialize)]
struct OffCpu {
    /// Off-CPU time by state and system call (`sleeping in futex`, `preempted`, `run-queue`).
    by_operation: Vec<OperationRow>,
    /// Heaviest waker → sleeper pairs (by thread name).
    wakeups: Vec<WakeupRow>,
    /// Why there are no wakeups, when there are none (text report only).
    #[serde(skip)]
    no_wakeups: Option<&'static str>,
}

#[derive(Serialize)]
struct OperationRow {
    operation: String,
    count: u64,
    total_ns: u64,
    max_ns: u64,
}

#[derive(Serialize)]
struct WakeupRow {
    waker: String,
    sleeper: String,
    count: u64,
    total_ns: u64,
}

#[derive(Serialize)]
struct SyscallRow {
    syscall: String,
    calls: u64,
    errors: BTreeMap<String, u64>,
    total_ns: u64,
    mean_ns: u64,
    max_ns: u64,
    p99_upper_ns: u64,
    /// The innermost named user frame of the slowest call's site, when its stack was captured.
    #[serde(skip_serializing_if = "Option::is_none")]
    slowest_site: Option<String>,
}

#[derive(Serialize)]
struct LifecycleRow {
    operation: String,
    count: u64,
    per_second: f64,
    failed: u64,
    total_ns: u64,
    mean_ns: u64,
    max_ns: u64,
    /// The innermost named user frame of the heaviest caller site.
    #[serde(skip_serializing_if = "Option::is_none")]
    top_site: Option<String>,
}

#[derive(Serialize)]
struct KlockRow {
    lock_type: String,
    address: String,
    count: u64,
    total_ns: u64,
    max_ns: u64,
    caller: String,
    threads: Vec<String>,
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

/// The first frame of a kernel-lock record's kernel stack outside the lock implementation.
fn lock_caller(profile: &Profile, record: &WaitRecord) -> String {
    profile
        .stack(record.kernel_stack)
        .and_then(|stack| {
            stack.frames.iter().map(|f| f.display_name()).find(|name| {
                !LOCK_INTERNALS.iter().any(|p| {
                    name.trim_start_matches('_')
                        .starts_with(p.trim_start_matches('_'))
                })
            })
        })
        .unwrap_or_else(|| "[unknown]".to_string())
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

fn contention(profile: &Profile) -> Option<Contention> {
    let idle = idle_waits(profile);
    // `mutex-hold` records are hold times, not waits.
    let contended = profile.waits.iter().enumerate().filter(|(i, w)| {
        !idle.contains(i)
            && w.probe != "mutex-hold"
            && matches!(
                w.kind,
                WaitKind::Mutex
                    | WaitKind::RwlockRead
                    | WaitKind::RwlockWrite
                    | WaitKind::KernelLock
            )
    });
    let sites = site_rows(profile, contended.map(|(_, w)| w), TOP);
    let idle_rows = site_rows(
        profile,
        idle.iter().filter_map(|&i| profile.waits.get(i)),
        TOP,
    );
    (!sites.is_empty() || !idle_rows.is_empty()).then_some(Contention {
        sites,
        idle: idle_rows,
    })
}

impl Contention {
    fn write_text(&self, out: &mut String) {
        let _ = writeln!(out);
        let _ = writeln!(out, "Lock contention (idle waits excluded)");
        if self.sites.is_empty() {
            let _ = writeln!(out, "  (no mutex, rwlock or kernel-lock waits)");
        } else {
            let _ = writeln!(
                out,
                "  {:<13}{:>8}{:>11}{:>11}  {:<28} threads",
                "kind", "waits", "total", "max", "site"
            );
            for r in &self.sites {
                let _ = writeln!(
                    out,
                    "  {:<13}{:>8}{:>11}{:>11}  {:<28} {}",
                    r.kind.name(),
                    r.count,
                    format_ns(r.total_ns),
                    format_ns(r.max_ns),
                    r.frame,
                    r.threads.join(", ")
                );
            }
        }
        if !self.idle.is_empty() {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "Idle waits (a thread parked most of its window in one site: waiting for work)"
            );
            for r in &self.idle {
                let _ = writeln!(
                    out,
                    "  {:<13}{:>8}{:>11}  {:<28} {} ({})",
                    r.kind.name(),
                    r.count,
                    format_ns(r.total_ns),
                    r.frame,
                    r.threads.join(", "),
                    r.operation
                );
            }
        }
    }
}

fn time_row(name: String, times: &[&ThreadTime]) -> TimeRow {
    let mut row = TimeRow {
        name,
        threads: times.len(),
        wall_ns: 0,
        time_ns: BTreeMap::new(),
        voluntary_switches: 0,
        involuntary_switches: 0,
        switches_per_s: 0.0,
        involuntary_share: 0.0,
    };
    for t in times {
        row.wall_ns = row.wall_ns.saturating_add(t.wall_ns);
        for (&class, &ns) in &t.time_ns {
            *row.time_ns.entry(class).or_insert(0) += ns;
        }
        row.voluntary_switches += t.voluntary_switches;
        row.involuntary_switches += t.involuntary_switches;
    }
    let switches = row.voluntary_switches + row.involuntary_switches;
    if row.wall_ns > 0 {
        // Per second of one thread's wall time, averaged over the row's threads.
        let seconds = row.wall_ns as f64 / 1e9 / times.len().max(1) as f64;
        row.switches_per_s = (switches as f64 / seconds * 10.0).round() / 10.0;
    }
    if switches > 0 {
        row.involuntary_share =
            (row.involuntary_switches as f64 / switches as f64 * 1e4).round() / 1e4;
    }
    row
}

fn breakdown(profile: &Profile) -> Option<Breakdown> {
    if profile.thread_times.is_empty() {
        return None;
    }
    let mut by_name: BTreeMap<String, Vec<&ThreadTime>> = BTreeMap::new();
    for t in &profile.thread_times {
        by_name
            .entry(thread_label(profile, t.pid, t.tid))
            .or_default()
            .push(t);
    }
    let mut names: Vec<TimeRow> = by_name
        .into_iter()
        .map(|(name, times)| time_row(name, &times))
        .collect();
    names.sort_by_key(|r| Reverse(r.wall_ns));
    let mut threads: Vec<TimeRow> = profile
        .thread_times
        .iter()
        .map(|t| {
            time_row(
                format!("{} ({})", thread_label(profile, t.pid, t.tid), t.tid),
                &[t],
            )
        })
        .collect();
    threads.sort_by_key(|r| Reverse(r.wall_ns));
    threads.truncate(TOP);
    let all: Vec<&ThreadTime> = profile.thread_times.iter().collect();
    Some(Breakdown {
        by_name: names,
        by_thread: threads,
        total: time_row("all threads".to_string(), &all),
    })
}

impl Breakdown {
    fn write_text(&self, out: &mut String) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Where the time went (share of each row's wall time; a thread's shares add up to 100%)"
        );
        let mut header = format!("  {:<24}{:>4}{:>10}", "threads", "n", "wall");
        for class in TimeClass::ALL {
            let _ = write!(header, "{:>10}", class.name());
        }
        let _ = write!(header, "{:>10}{:>7}", "csw/s", "invol");
        let _ = writeln!(out, "{header}");
        let row = |out: &mut String, r: &TimeRow| {
            let mut line = format!(
                "  {:<24}{:>4}{:>10}",
                truncate(&r.name, 23),
                r.threads,
                format_ns(r.wall_ns)
            );
            for class in TimeClass::ALL {
                let ns = r.time_ns.get(&class).copied().unwrap_or(0);
                let _ = write!(line, "{:>10}", format_percent(ns, r.wall_ns));
            }
            let _ = write!(
                line,
                "{:>10.1}{:>7}",
                r.switches_per_s,
                format!("{:.0}%", r.involuntary_share * 100.0)
            );
            let _ = writeln!(out, "{line}");
        };
        for r in &self.by_name {
            row(out, r);
        }
        row(out, &self.total);
        if self.by_thread.len() > 1 {
            let _ = writeln!(out, "  by thread (heaviest wall time first):");
            for r in &self.by_thread {
                row(out, r);
            }
        }
    }
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

fn offcpu(profile: &Profile) -> Option<OffCpu> {
    let records: Vec<&WaitRecord> = profile
        .waits
        .iter()
        .filter(|w| w.probe == "offcpu")
        .collect();
    if records.is_empty() && profile.wakeups.is_empty() {
        return None;
    }
    let mut ops: BTreeMap<&str, WaitStats> = BTreeMap::new();
    for w in &records {
        ops.entry(w.operation.as_str()).or_default().merge(&w.stats);
    }
    let mut by_operation: Vec<OperationRow> = ops
        .into_iter()
        .map(|(operation, s)| OperationRow {
            operation: operation.to_string(),
            count: s.count,
            total_ns: s.total_ns,
            max_ns: s.max_ns,
        })
        .collect();
    by_operation.sort_by_key(|r| Reverse(r.total_ns));
    by_operation.truncate(TOP);
    let mut pairs: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for w in &profile.wakeups {
        let waker = w.waker_name.clone();
        let entry = pairs
            .entry((waker, thread_label(profile, w.pid, w.tid)))
            .or_default();
        entry.0 += w.stats.count;
        entry.1 = entry.1.saturating_add(w.stats.total_ns);
    }
    let mut wakeups: Vec<WakeupRow> = pairs
        .into_iter()
        .map(|((waker, sleeper), (count, total_ns))| WakeupRow {
            waker,
            sleeper,
            count,
            total_ns,
        })
        .collect();
    wakeups.sort_by_key(|r| Reverse(r.total_ns));
    wakeups.truncate(TOP);
    let wakeup_probe = profile.metadata.probes.iter().any(|p| p.probe == "wakeup");
    let no_wakeups = if !wakeups.is_empty() {
        None
    } else if wakeup_probe {
        Some("none recorded (no sleep of at least --min-block ended)")
    } else if profile.metadata.backend == "ebpf" {
        Some("not recorded (the `wakeup` probe takes the wakers' stacks)")
    } else {
        Some("not recorded")
    };
    Some(OffCpu {
        by_operation,
        wakeups,
        no_wakeups,
    })
}

impl OffCpu {
    fn write_text(&self, out: &mut String) {
        let _ = writeln!(out);
        let _ = writeln!(out, "Off-CPU time (offcpu), by state and system call");
        let _ = writeln!(
            out,
            "  {:<32}{:>8}{:>11}{:>11}",
            "state", "count", "total", "max"
        );
        for r in &self.by_operation {
            let _ = writeln!(
                out,
                "  {:<32}{:>8}{:>11}{:>11}",
                r.operation,
                r.count,
                format_ns(r.total_ns),
                format_ns(r.max_ns)
            );
        }
        if let Some(why) = self.no_wakeups {
            let _ = writeln!(out, "  who woke whom: {why}");
        } else {
            let _ = writeln!(out, "  who woke whom (sleep time ended by each waker):");
            for r in &self.wakeups {
                let _ = writeln!(
                    out,
                    "    {:<24} -> {:<24}{:>8}{:>11}",
                    r.waker,
                    r.sleeper,
                    r.count,
                    format_ns(r.total_ns)
                );
            }
        }
    }
}

/// Splits `openat ENOENT` into the call and the errno.
fn call_and_errno(operation: &str) -> (&str, Option<&str>) {
    match operation.split_once(' ') {
        Some((call, errno)) => (call, Some(errno)),
        None => (operation, None),
    }
}

fn syscalls(profile: &Profile) -> Option<Vec<SyscallRow>> {
    // Per call: stats, errors by errno, the slowest captured call and its site.
    type CallAcc = (WaitStats, BTreeMap<String, u64>, u64, Option<String>);
    let mut calls: BTreeMap<&str, CallAcc> = BTreeMap::new();
    for w in profile.waits.iter().filter(|w| w.probe == "syscall") {
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

fn lifecycle(profile: &Profile) -> Option<Vec<LifecycleRow>> {
    let mut ops: BTreeMap<&str, (WaitStats, u64, u64, Option<String>)> = BTreeMap::new();
    for w in profile.waits.iter().filter(|w| w.probe == "lifecycle") {
        let (op, errno) = call_and_errno(&w.operation);
        let entry = ops.entry(op).or_default();
        if errno.is_some() {
            entry.1 += w.stats.count;
            continue;
        }
        entry.0.merge(&w.stats);
        if w.stats.total_ns >= entry.2 {
            entry.2 = w.stats.total_ns;
            entry.3 = Some(site_frame(profile, w));
        }
    }
    if ops.is_empty() {
        return None;
    }
    let seconds = profile.metadata.duration_ns as f64 / 1e9;
    let mut rows: Vec<LifecycleRow> = ops
        .into_iter()
        .map(|(op, (stats, failed, _, site))| LifecycleRow {
            operation: op.to_string(),
            count: stats.count,
            per_second: if seconds > 0.0 {
                (stats.count as f64 / seconds * 10.0).round() / 10.0
            } else {
                0.0
            },
            failed,
            total_ns: stats.total_ns,
            mean_ns: stats.mean_ns(),
            max_ns: stats.max_ns,
            top_site: site,
        })
        .collect();
    rows.sort_by_key(|r| Reverse(r.count));
    Some(rows)
}

fn write_lifecycle(rows: &[LifecycleRow], out: &mut String) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Process and thread lifecycle (lifecycle); time is the caller's time in the call"
    );
    let _ = writeln!(
        out,
        "  {:<14}{:>8}{:>9}{:>8}{:>11}{:>11}  heaviest site",
        "event", "count", "per s", "failed", "mean", "max"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<14}{:>8}{:>9.1}{:>8}{:>11}{:>11}  {}",
            r.operation,
            r.count,
            r.per_second,
            r.failed,
            format_ns(r.mean_ns),
            format_ns(r.max_ns),
            r.top_site.as_deref().unwrap_or("")
        );
    }
}

fn klock(profile: &Profile) -> Option<Vec<KlockRow>> {
    // Per (type, address): stats, time per caller, thread names.
    type LockAcc = (WaitStats, BTreeMap<String, u64>, Vec<String>);
    let mut locks: BTreeMap<(&str, u64), LockAcc> = BTreeMap::new();
    for w in profile.waits.iter().filter(|w| w.probe == "klock") {
        let entry = locks.entry((w.operation.as_str(), w.object)).or_default();
        entry.0.merge(&w.stats);
        *entry.1.entry(lock_caller(profile, w)).or_insert(0) += w.stats.total_ns;
        let name = thread_label(profile, w.pid, w.tid);
        if !entry.2.contains(&name) {
            entry.2.push(name);
        }
    }
    if locks.is_empty() {
        return None;
    }
    let mut rows: Vec<KlockRow> = locks
        .into_iter()
        .map(|((kind, address), (stats, callers, threads))| KlockRow {
            lock_type: kind.to_string(),
            address: format!("{address:#x}"),
            count: stats.count,
            total_ns: stats.total_ns,
            max_ns: stats.max_ns,
            caller: callers
                .into_iter()
                .max_by_key(|(name, ns)| (*ns, Reverse(name.clone())))
                .map(|(name, _)| name)
                .unwrap_or_default(),
            threads,
        })
        .collect();
    rows.sort_by_key(|r| (Reverse(r.total_ns), Reverse(r.count)));
    rows.truncate(TOP);
    Some(rows)
}

fn write_klock(rows: &[KlockRow], out: &mut String) {
    let _ = writeln!(out);
    let _ = writeln!(out, "Kernel lock contention (klock)");
    let _ = writeln!(
        out,
        "  {:<20}{:>20}{:>8}{:>11}{:>11}  caller",
        "type", "lock", "waits", "total", "max"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<20}{:>20}{:>8}{:>11}{:>11}  {}",
            r.lock_type,
            r.address,
            r.count,
            format_ns(r.total_ns),
            format_ns(r.max_ns),
            r.caller
        );
    }
}

/// Frames of the hottest stack shown per thread in the on-CPU table.
const HOTTEST_FRAMES: usize = 3;
/// Frames shown per stack in the on-CPU section's text (the JSON has them all).
const ON_CPU_FRAMES: usize = 24;

/// Function names of stack `id`, leaf first, inlined functions first within their frame.
fn names_leaf_first(profile: &Profile, id: Option<StackId>) -> Vec<String> {
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
        .filter(|w| w.probe == "cpu" && w.kind == WaitKind::OnCpu)
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
                .waits
                .iter()
                .filter(|w| !w.kind.is_sampled() && (w.pid, w.tid) == (pid, tid))
                .map(|w| w.stats.total_ns)
                .sum(),
            hottest: names_leaf_first(profile, heaviest(&by_stack))
                .into_iter()
                .take(HOTTEST_FRAMES)
                .collect(),
        })
        .collect();
    thread_rows.sort_by_key(|t| (Reverse(t.cpu_ns), t.pid, t.tid));
    let stacks_total = stacks.len();
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
    stack_rows.sort_by_key(|(id, s)| (Reverse(s.cpu_ns), *id));
    stack_rows.truncate(TOP);
    Some(OnCpu {
        samples: all.count,
        cpu_ns: all.total_ns,
        threads: thread_rows,
        stacks_total,
        stacks: stack_rows.into_iter().map(|(_, s)| s).collect(),
    })
}

impl OnCpu {
    fn write_text(&self, out: &mut String) {
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
                    crate::fold::NO_USER_STACK.to_string()
                } else {
                    t.hottest
                        .iter()
                        .map(|n| truncate(n, 40))
                        .collect::<Vec<_>>()
                        .join(" <- ")
                }
            );
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  Top {} of {} stacks by CPU time",
            self.stacks.len(),
            self.stacks_total
        );
        for (i, s) in self.stacks.iter().enumerate() {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "  #{:<3}{} ({} of all CPU time), {} samples, {}",
                i + 1,
                format_ns(s.cpu_ns),
                format_percent(s.cpu_ns, self.cpu_ns),
                s.samples,
                s.threads.join(", ")
            );
            let no_user = [crate::fold::NO_USER_STACK.to_string()];
            let user = if s.user.is_empty() {
                &no_user[..]
            } else {
                &s.user[..]
            };
            let frames: Vec<String> = s
                .kernel
                .iter()
                .map(|n| format!("{n}  [kernel]"))
                .chain(user.iter().cloned())
                .collect();
            for name in frames.iter().take(ON_CPU_FRAMES) {
                let _ = writeln!(out, "        {name}");
            }
            if frames.len() > ON_CPU_FRAMES {
                let _ = writeln!(
                    out,
                    "        ... {} more frames",
                    frames.len() - ON_CPU_FRAMES
                );
            }
            if s.truncated {
                let _ = writeln!(out, "        ... (truncated: the unwinder stopped here)");
            }
        }
    }
}

fn cpu_saturation(profile: &Profile) -> Option<CpuSaturation> {
    let waits: Vec<&WaitRecord> = profile.waits.iter().filter(|w| is_cpu_wait(w)).collect();
    if waits.is_empty() {
        return None;
    }
    let (mut run_queue_ns, mut preempted_ns) = (0u64, 0u64);
    let mut threads: BTreeMap<(u32, u32), (u64, u64)> = BTreeMap::new();
    for w in &waits {
        let entry = threads.entry((w.pid, w.tid)).or_default();
        if w.operation == "preempted" {
            preempted_ns += w.stats.total_ns;
            entry.1 += w.stats.total_ns;
        } else {
            run_queue_ns += w.stats.total_ns;
            entry.0 += w.stats.total_ns;
        }
    }
    let seconds = profile.metadata.duration_ns as f64 / 1e9;
    let per_second = |ns: u64| {
        if seconds > 0.0 {
            (ns as f64 / 1e9 / seconds * 100.0).round() / 100.0
        } else {
            0.0
        }
    };
    let on_cpu: u64 = profile
        .thread_times
        .iter()
        .map(|t| t.ns(TimeClass::OnCpu))
        .sum();
    let mut sites = site_rows(profile, waits.iter().copied(), TOP);
    for site in &mut sites {
        if site.operation == "preempted" {
            site.frame = "[preempted]".to_string();
        }
    }
    let mut thread_rows: Vec<SaturationThread> = threads
        .into_iter()
        .map(
            |((pid, tid), (run_queue_ns, preempted_ns))| SaturationThread {
                pid,
                tid,
                name: thread_label(profile, pid, tid),
                run_queue_ns,
                preempted_ns,
            },
        )
        .collect();
    thread_rows.sort_by_key(|t| (Reverse(t.run_queue_ns + t.preempted_ns), t.pid, t.tid));
    thread_rows.truncate(TOP);
    Some(CpuSaturation {
        cpu_count: profile.metadata.cpu_count,
        run_queue_ns,
        preempted_ns,
        waiting_threads: per_second(run_queue_ns + preempted_ns),
        running_threads: (!profile.thread_times.is_empty()).then(|| per_second(on_cpu)),
        sites,
        threads: thread_rows,
    })
}

impl CpuSaturation {
    fn write_text(&self, out: &mut String) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "CPU saturation (offcpu): {} waiting for a CPU ({} in the run queue after a wakeup, \
             {} preempted)",
            format_ns(self.run_queue_ns + self.preempted_ns),
            format_ns(self.run_queue_ns),
            format_ns(self.preempted_ns)
        );
        let running = self
            .running_threads
            .map_or(String::new(), |r| format!(", {r:.2} running"));
        let _ = writeln!(
            out,
            "  threads of the target on average: {:.2} waiting for a CPU{running}, on {} CPUs",
            self.waiting_threads, self.cpu_count
        );
        let _ = writeln!(
            out,
            "  {:<11}{:>8}{:>11}{:>11}  {:<28} threads",
            "wait", "count", "total", "max", "site (the sleep woken from)"
        );
        for r in &self.sites {
            let _ = writeln!(
                out,
                "  {:<11}{:>8}{:>11}{:>11}  {:<28} {}",
                r.operation,
                r.count,
                format_ns(r.total_ns),
                format_ns(r.max_ns),
                truncate(&r.frame, 28),
                r.threads.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "  {:<28}{:>12}{:>12}",
            "thread", "run-queue", "preempted"
        );
        for t in &self.threads {
            let _ = writeln!(
                out,
                "  {:<28}{:>12}{:>12}",
                truncate(&format!("{} (tid {})", t.name, t.tid), 27),
                format_ns(t.run_queue_ns),
                format_ns(t.preempted_ns)
            );
        }
    }
}
