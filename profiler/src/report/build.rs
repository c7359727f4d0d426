//! Builds the [`Report`] of a profile: the waits apart from CPU samples, CPU waits and sleeps two
//! probes saw, totals per kind, the groups (heaviest first, the top ones with their threads,
//! locks, heaviest stacks and histogram; grouped by stack, stacks that show the same frames at
//! other addresses are one group), the kernel threads together, the header and the
//! sections.

use super::coverage::{Coverage, Quiet};
use super::model::{
    FrameRow, Group, GroupKey, Header, HistogramBucket, InlinedRow, KernelThreads, KindRow,
    LockRow, LossRow, MergedRow, OnCpuRow, ProbeRow, Report, StackRow, StackTrace, Stats,
    ThreadRow, TruncatedRow,
};
use super::sections::Sections;
use super::text::plural;
use super::{GroupBy, ReportOptions, REPORT_JSON_VERSION};
use crate::analysis::measure::Measure;
use crate::render::units::{format_ns, share};
use lockscope_probes::catalog;
use lockscope_probes::overlap::Merged;
use lockscope_probes::{
    AttachStatus, Frame, Log2Histogram, Losses, MixedMeasures, ProbeAttachment, ProbeDescriptor,
    Profile, SeenTwice, Stack, StackId, WaitKind, WaitRecord, WaitStats,
};
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// Stacks shown per group when a group spans several (thread and lock groupings).
const MAX_STACKS_PER_GROUP: usize = 3;

/// The whole a share is of: nanoseconds, or counts for records without times (imported events
/// and samples).
#[derive(Clone, Copy)]
enum Whole {
    Ns(u64),
    Count(u64),
}

impl Whole {
    fn of(stats: &WaitStats, measure: Measure) -> Whole {
        if measure.is_timed() {
            Whole::Ns(stats.total_ns)
        } else {
            Whole::Count(stats.count)
        }
    }

    fn share(self, stats: &WaitStats) -> f64 {
        match self {
            Whole::Ns(ns) => share(stats.total_ns, ns),
            Whole::Count(count) => share(stats.count, count),
        }
    }
}

impl Stats {
    fn new(stats: &WaitStats, whole: Whole) -> Self {
        Stats {
            count: stats.count,
            total_ns: stats.total_ns,
            mean_ns: stats.mean_ns(),
            max_ns: stats.max_ns,
            share: whole.share(stats),
        }
    }
}

impl TruncatedRow {
    /// `None` when no wait of `profile` has a truncated user stack.
    fn of(profile: &Profile, all_ns: u64) -> Option<Self> {
        let mut stacks = std::collections::BTreeSet::new();
        let (mut waits, mut total_ns) = (0u64, 0u64);
        for w in &profile.waits {
            if profile.stack(w.user_stack).is_some_and(|s| s.truncated) {
                stacks.insert(w.user_stack);
                waits += w.stats.count;
                total_ns = total_ns.saturating_add(w.stats.total_ns);
            }
        }
        (waits > 0).then(|| TruncatedRow {
            stacks: stacks.len(),
            waits,
            total_ns,
            share: if all_ns == 0 {
                0.0
            } else {
                total_ns as f64 / all_ns as f64
            },
        })
    }
}

/// Grouping key while aggregating; its order breaks ties between equally heavy groups.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Stack(Option<StackId>, WaitKind),
    Thread(u32, u32),
    Lock(u32, u64, String),
    Process(u32),
}

/// A user stack's waits in a group while aggregating, with their time per kernel stack.
#[derive(Default)]
struct StackAcc {
    count: u64,
    total_ns: u64,
    kernel_ns: BTreeMap<Option<StackId>, u64>,
}

/// A group's waits while aggregating: totals, kinds, threads, locks and stacks.
#[derive(Default)]
struct Acc {
    stats: WaitStats,
    kinds: BTreeMap<WaitKind, WaitStats>,
    threads: BTreeSet<(u32, u32)>,
    locks: BTreeSet<(u32, u64, String)>,
    stacks: BTreeMap<Option<StackId>, StackAcc>,
}

impl Acc {
    /// Adds wait `w` to the group.
    fn add(&mut self, w: &WaitRecord) {
        self.stats.merge(&w.stats);
        self.kinds.entry(w.kind).or_default().merge(&w.stats);
        self.threads.insert((w.pid, w.tid));
        self.locks.insert((w.pid, w.object, w.operation.clone()));
        let stack = self.stacks.entry(w.user_stack).or_default();
        stack.count += w.stats.count;
        stack.total_ns = stack.total_ns.saturating_add(w.stats.total_ns);
        let kernel = stack.kernel_ns.entry(w.kernel_stack).or_default();
        *kernel = kernel.saturating_add(w.stats.total_ns);
    }
}

/// Rows sorted heaviest first: by total, then count, then their natural order.
impl MergedRow {
    /// The row of the sleeps `counted`'s waits hold (the futex or klock probe's).
    fn of(m: &Merged, counted: &ProbeDescriptor) -> MergedRow {
        let waits = |n: u64| if n == 1 { "wait" } else { "waits" };
        let (sleep, sleeps, others) = if counted.name == catalog::KLOCK.name {
            (
                "sleep under a kernel lock",
                "sleeps under kernel locks",
                "other sleeps",
            )
        } else {
            (
                "futex sleep",
                "futex sleeps",
                "sleeps in other system calls",
            )
        };
        let text = format!(
            "{} and {} both saw {} of {} ({}): counted once, as {} {} {} {} ({}); {}'s {others} \
             are kept",
            counted.name,
            catalog::OFFCPU.name,
            plural(m.offcpu.count, sleep, sleeps),
            plural(m.threads as u64, "thread", "threads"),
            format_ns(m.offcpu.total_ns),
            if m.threads == 1 {
                "that thread's"
            } else {
                "those threads'"
            },
            m.counted.count,
            counted.name,
            waits(m.counted.count),
            format_ns(m.counted.total_ns),
            catalog::OFFCPU.name,
        );
        let is = |probe: &ProbeDescriptor, n: u64| (counted.name == probe.name).then_some(n);
        MergedRow {
            threads: m.threads,
            offcpu_sleeps: m.offcpu.count,
            offcpu_ns: m.offcpu.total_ns,
            futex_waits: is(&catalog::FUTEX, m.counted.count),
            futex_ns: is(&catalog::FUTEX, m.counted.total_ns),
            klock_waits: is(&catalog::KLOCK, m.counted.count),
            klock_ns: is(&catalog::KLOCK, m.counted.total_ns),
            text,
        }
    }
}

fn kind_rows(kinds: &BTreeMap<WaitKind, WaitStats>, whole: Whole) -> Vec<KindRow> {
    let mut rows: Vec<(&WaitKind, &WaitStats)> = kinds.iter().collect();
    rows.sort_by_key(|(kind, s)| (Reverse(s.total_ns), Reverse(s.count), **kind));
    rows.into_iter()
        .map(|(&kind, s)| KindRow {
            kind,
            stats: Stats::new(s, whole),
        })
        .collect()
}

fn hex(value: u64) -> String {
    format!("{value:#x}")
}

fn frame_row(frame: &Frame) -> FrameRow {
    FrameRow {
        address: hex(frame.address),
        function: frame.display_name(),
        module: frame.module.clone(),
        module_offset: frame.module_offset.map(hex),
        file: frame.file.clone(),
        line: frame.line,
        inlined: frame
            .inlined
            .iter()
            .map(|i| InlinedRow {
                function: i.function.clone(),
                file: i.file.clone(),
                line: i.line,
            })
            .collect(),
    }
}

/// What a frame shows in the report: its name, source location and inlined calls, and its module
/// offset where it has no source file (its address is left out).
type ShownFrame = (
    String,
    Option<String>,
    Option<u32>,
    Vec<(String, Option<String>, Option<u32>)>,
    Option<(Option<String>, Option<u64>)>,
);

/// Each stack's id to the first id of the stacks that show the same frames ([`ShownFrame`]):
/// stacks that differ only by their addresses (samples or sleeps at other instructions of the
/// same lines) are one site of the top list.
fn shown_alike(profile: &Profile) -> BTreeMap<StackId, StackId> {
    let mut first: BTreeMap<(bool, Vec<ShownFrame>), StackId> = BTreeMap::new();
    let mut alike = BTreeMap::new();
    for (id, stack) in profile.stacks.iter().enumerate() {
        let Ok(id) = StackId::try_from(id) else {
            break;
        };
        let shown = stack
            .frames
            .iter()
            .map(|f| {
                (
                    f.display_name(),
                    f.file.clone(),
                    f.line,
                    f.inlined
                        .iter()
                        .map(|i| (i.function.clone(), i.file.clone(), i.line))
                        .collect(),
                    f.file
                        .is_none()
                        .then(|| (f.module.clone(), f.module_offset)),
                )
            })
            .collect();
        alike.insert(id, *first.entry((stack.truncated, shown)).or_insert(id));
    }
    alike
}

fn stack_trace(profile: &Profile, id: Option<StackId>) -> Option<StackTrace> {
    let stack: &Stack = profile.stack(id)?;
    Some(StackTrace {
        id: id?,
        truncated: stack.truncated,
        frames: stack.frames.iter().map(frame_row).collect(),
    })
}

/// The profile's waits alone, and what was set apart from them: with waits beside the `cpu`
/// probe's samples or the `mutex-hold` probe's holds, everything but the on-CPU section is about
/// the waits (samples are CPU time and holds hold time, never added to wait time); a sleep two
/// probes saw counts once, as the futex (or klock) wait.
struct Waits<'a> {
    /// The profile with its waits alone (the whole profile when nothing was set apart).
    profile: Cow<'a, Profile>,
    /// The `cpu` probe's samples set apart, per thread (pid, tid).
    on_cpu_by_thread: BTreeMap<(u32, u32), OnCpuRow>,
    /// Intervals of threads waiting for a CPU, set apart.
    cpu_wait_intervals: u64,
    /// The sleeps two probes saw.
    twice: SeenTwice,
    /// Every wait of `profile` together.
    all: WaitStats,
    /// What the waits measure.
    measure: Measure,
    /// What the shares of the whole report are of.
    whole: Whole,
}

impl<'a> Waits<'a> {
    /// The waits of `full`, the samples, CPU waits and sleeps seen twice set apart.
    fn of(full: &'a Profile) -> Waits<'a> {
        let mut on_cpu_by_thread: BTreeMap<(u32, u32), OnCpuRow> = BTreeMap::new();
        let mixed = MixedMeasures::of(full);
        for w in full
            .waits
            .iter()
            .filter(|w| w.kind == WaitKind::OnCpu && mixed.leaves_out(w))
        {
            let row = on_cpu_by_thread.entry((w.pid, w.tid)).or_default();
            row.samples += w.stats.count;
            row.cpu_ns = row.cpu_ns.saturating_add(w.stats.total_ns);
        }
        let twice = SeenTwice::of(full);
        let apart = |w: &WaitRecord| mixed.leaves_out(w) || w.is_cpu_wait() || twice.contains(w);
        let cpu_wait_intervals: u64 = full
            .waits
            .iter()
            .filter(|w| w.is_cpu_wait())
            .map(|w| w.stats.count)
            .sum();
        let profile = if full.waits.iter().any(apart) {
            Cow::Owned(Profile {
                waits: full.waits.iter().filter(|w| !apart(w)).cloned().collect(),
                ..full.clone()
            })
        } else {
            Cow::Borrowed(full)
        };
        let mut all = WaitStats::default();
        for w in &profile.waits {
            all.merge(&w.stats);
        }
        let measure = Measure::of_records(&profile.waits);
        let whole = Whole::of(&all, measure);
        Waits {
            profile,
            on_cpu_by_thread,
            cpu_wait_intervals,
            twice,
            all,
            measure,
            whole,
        }
    }

    /// The on-CPU samples of the group keyed `key` (a thread's, or a process's threads' summed).
    fn on_cpu_of(&self, key: &Key) -> Option<OnCpuRow> {
        match *key {
            Key::Thread(pid, tid) => self.on_cpu_by_thread.get(&(pid, tid)).copied(),
            Key::Process(pid) => self
                .on_cpu_by_thread
                .range((pid, 0)..=(pid, u32::MAX))
                .map(|(_, row)| *row)
                .reduce(|a, b| OnCpuRow {
                    samples: a.samples + b.samples,
                    cpu_ns: a.cpu_ns.saturating_add(b.cpu_ns),
                }),
            _ => None,
        }
    }

    /// The name of thread `tid` of `pid`, or `[unknown thread]`.
    fn thread_name(&self, pid: u32, tid: u32) -> String {
        self.profile
            .thread_name(pid, tid)
            .unwrap_or("[unknown thread]")
            .to_string()
    }
}

/// Every group of `profile`'s waits per `group_by`, heaviest first (ties in key order).
fn accumulated_groups(profile: &Profile, group_by: GroupBy) -> Vec<(Key, Acc)> {
    let alike = match group_by {
        GroupBy::Stack => shown_alike(profile),
        _ => BTreeMap::new(),
    };
    let mut accs: BTreeMap<Key, Acc> = BTreeMap::new();
    for w in &profile.waits {
        let key = match group_by {
            // Stacks shown alike are one group, keyed by the first of them.
            GroupBy::Stack => Key::Stack(
                w.user_stack.map(|id| alike.get(&id).copied().unwrap_or(id)),
                w.kind,
            ),
            GroupBy::Thread => Key::Thread(w.pid, w.tid),
            GroupBy::Lock => Key::Lock(w.pid, w.object, w.operation.clone()),
            GroupBy::Process => Key::Process(w.pid),
        };
        accs.entry(key).or_default().add(w);
    }
    let mut accs: Vec<(Key, Acc)> = accs.into_iter().collect();
    accs.sort_by(|(ka, a), (kb, b)| {
        (Reverse(a.stats.total_ns), Reverse(a.stats.count), ka).cmp(&(
            Reverse(b.stats.total_ns),
            Reverse(b.stats.count),
            kb,
        ))
    });
    accs
}

/// The report's key of the group keyed `key`: names of its thread or process, the lock's
/// object in hex.
fn group_key(waits: &Waits, key: Key) -> GroupKey {
    let profile = &waits.profile;
    match key {
        Key::Stack(user_stack, kind) => GroupKey::Stack { user_stack, kind },
        Key::Thread(pid, tid) => GroupKey::Thread {
            pid,
            tid,
            name: waits.thread_name(pid, tid),
        },
        Key::Lock(pid, object, operation) => GroupKey::Lock {
            pid,
            object: hex(object),
            operation,
        },
        Key::Process(pid) => {
            let info = profile.processes.iter().find(|p| p.pid == pid);
            GroupKey::Process {
                pid,
                process: info.map_or_else(
                    || {
                        // No table (older profiles): the main thread's name.
                        profile
                            .thread_name(pid, pid)
                            .map_or_else(|| format!("[pid {pid}]"), str::to_string)
                    },
                    |p| p.display_name(),
                ),
                parent: info.and_then(|p| p.parent),
                command: info.map(|p| p.command.clone()).unwrap_or_default(),
                kernel_thread: info.is_some_and(|p| p.kernel_thread),
            }
        }
    }
}

/// A group's heaviest [`MAX_STACKS_PER_GROUP`] user stacks, each with its heaviest kernel
/// stack when `options` shows kernel stacks; shares of `group_whole`.
fn stack_rows(
    profile: &Profile,
    stacks: BTreeMap<Option<StackId>, StackAcc>,
    group_whole: Whole,
    options: &ReportOptions,
) -> Vec<StackRow> {
    let mut stacks: Vec<(Option<StackId>, StackAcc)> = stacks.into_iter().collect();
    stacks.sort_by_key(|(id, s)| (Reverse(s.total_ns), Reverse(s.count), *id));
    stacks
        .into_iter()
        .take(MAX_STACKS_PER_GROUP)
        .map(|(id, s)| {
            let heaviest_kernel = s
                .kernel_ns
                .iter()
                .min_by_key(|&(kid, ns)| (Reverse(*ns), *kid))
                .and_then(|(kid, _)| *kid);
            StackRow {
                count: s.count,
                total_ns: s.total_ns,
                share: group_whole.share(&WaitStats {
                    count: s.count,
                    total_ns: s.total_ns,
                    ..WaitStats::default()
                }),
                user: stack_trace(profile, id),
                kernel: if options.show_kernel_stacks {
                    stack_trace(profile, heaviest_kernel)
                } else {
                    None
                },
                kernel_wanted: options.show_kernel_stacks,
            }
        })
        .collect()
}

/// The group ranked `rank` of the report: its key, totals, kinds, threads, locks, heaviest
/// stacks, histogram and on-CPU samples.
fn group(waits: &Waits, options: &ReportOptions, rank: usize, key: Key, acc: Acc) -> Group {
    let on_cpu = waits.on_cpu_of(&key);
    let group_whole = Whole::of(&acc.stats, waits.measure);
    let stacks_total = acc.stacks.len();
    Group {
        rank,
        key: group_key(waits, key),
        stats: Stats::new(&acc.stats, waits.whole),
        kinds: kind_rows(&acc.kinds, group_whole),
        threads: acc
            .threads
            .iter()
            .map(|&(pid, tid)| ThreadRow {
                pid,
                tid,
                name: waits.thread_name(pid, tid),
            })
            .collect(),
        locks: acc
            .locks
            .into_iter()
            .map(|(pid, object, operation)| LockRow {
                pid,
                object: hex(object),
                operation,
            })
            .collect(),
        stacks_total,
        stacks: stack_rows(&waits.profile, acc.stacks, group_whole, options),
        histogram: acc
            .stats
            .histogram
            .buckets()
            .map(|(slot, count)| HistogramBucket {
                lower_ns: Log2Histogram::slot_lower_bound(slot),
                upper_ns: Log2Histogram::slot_upper_bound(slot),
                count,
            })
            .collect(),
        log2: acc.stats.histogram,
        on_cpu,
    }
}

/// The kernel threads of `full`'s process table together (`--by process`), `None` without any.
fn kernel_threads(full: &Profile, waits: &Waits) -> Option<KernelThreads> {
    let kernel: BTreeSet<u32> = full
        .processes
        .iter()
        .filter(|p| p.kernel_thread)
        .map(|p| p.pid)
        .collect();
    if kernel.is_empty() {
        return None;
    }
    let mut stats = WaitStats::default();
    let mut with_records = BTreeSet::new();
    for w in &waits.profile.waits {
        if !kernel.contains(&w.pid) {
            continue;
        }
        stats.merge(&w.stats);
        with_records.insert(w.pid);
    }
    let mut cpu = OnCpuRow::default();
    for (&(pid, _), row) in &waits.on_cpu_by_thread {
        if kernel.contains(&pid) {
            cpu.samples += row.samples;
            cpu.cpu_ns = cpu.cpu_ns.saturating_add(row.cpu_ns);
            with_records.insert(pid);
        }
    }
    Some(KernelThreads {
        recorded: kernel.len(),
        with_records: with_records.len(),
        stats: Stats::new(&stats, waits.whole),
        on_cpu: (cpu.samples > 0).then_some(cpu),
    })
}

impl ProbeRow {
    /// The row of a probe's attach status.
    fn of(p: &ProbeAttachment) -> ProbeRow {
        let (status, fallback_hook, reason) = match &p.status {
            AttachStatus::Attached => ("attached", None, None),
            AttachStatus::FellBack { hook, reason } => {
                ("fell-back", Some(hook.clone()), Some(reason.clone()))
            }
            AttachStatus::Failed { reason } => ("failed", None, Some(reason.clone())),
        };
        ProbeRow {
            probe: p.probe.clone(),
            hook: p.hook.clone(),
            status,
            fallback_hook,
            reason,
        }
    }
}

impl LossRow {
    /// The row of a profile's loss counters.
    fn of(losses: &Losses) -> LossRow {
        LossRow {
            complete: losses.is_zero(),
            lost_events: losses.lost_events(),
            user_stack_failures: losses.user_stack_failures,
            kernel_stack_failures: losses.kernel_stack_failures,
            map_full: losses.map_full,
            dropped: losses.dropped,
            skipped_runs: losses.skipped_runs,
            out_of_order: losses.out_of_order,
        }
    }
}

/// The report's header: the target, the recording, the host, the probes, what was counted and
/// set apart, what the probes saw too little of, and the losses.
fn header(full: &Profile, waits: &Waits) -> Header {
    let meta = &full.metadata;
    let profile = &waits.profile;
    let all = &waits.all;
    Header {
        command: meta.target.command.clone(),
        pid: meta.target.pid,
        launched: meta.target.launched,
        target: meta.target.describe(),
        processes: full.processes.len(),
        processes_exited: full
            .processes
            .iter()
            .filter(|p| p.exit_unix_ns.is_some())
            .count(),
        kernel_threads: full.processes.iter().filter(|p| p.kernel_thread).count(),
        warnings: meta.warnings.clone(),
        imported: meta.target == lockscope_probes::RecordedTarget::default(),
        start_unix_ns: meta.start_unix_ns,
        duration_ns: meta.duration_ns,
        end_reason: meta.end_reason.clone(),
        backend: meta.backend.clone(),
        os: meta.os.clone(),
        kernel_release: meta.kernel_release.clone(),
        hostname: meta.hostname.clone(),
        cpu_count: meta.cpu_count,
        libc: meta.libc.clone(),
        threads_seen: profile.threads.len(),
        probes: meta.probes.iter().map(ProbeRow::of).collect(),
        events: meta.events,
        waits_recorded: all.count,
        on_cpu_samples: waits.on_cpu_by_thread.values().map(|r| r.samples).sum(),
        cpu_wait_intervals: waits.cpu_wait_intervals,
        losses: LossRow::of(&meta.losses),
        truncated_stacks: TruncatedRow::of(profile, all.total_ns),
        coverage: if waits.measure == Measure::Waits {
            Coverage::of(full, all.total_ns, profile.threads.len())
        } else {
            None
        },
        quiet: Quiet::of(full),
        merged_sleeps: waits
            .twice
            .merged(full)
            .map(|m| MergedRow::of(&m, &catalog::FUTEX)),
        merged_lock_sleeps: waits
            .twice
            .merged_kernel_locks(full)
            .map(|m| MergedRow::of(&m, &catalog::KLOCK)),
    }
}

impl Report {
    /// The report of `full` per `options`.
    pub(super) fn build(full: &Profile, options: &ReportOptions) -> Report {
        let waits = Waits::of(full);
        let accs = accumulated_groups(&waits.profile, options.group_by);
        let groups_total = accs.len();
        let shown = if options.top == 0 {
            groups_total
        } else {
            options.top.min(groups_total)
        };
        let groups = accs
            .into_iter()
            .take(shown)
            .enumerate()
            .map(|(i, (key, acc))| group(&waits, options, i + 1, key, acc))
            .collect();
        let kernel_threads = (options.group_by == GroupBy::Process)
            .then(|| kernel_threads(full, &waits))
            .flatten();
        let measure = waits.measure;
        Report {
            schema: "lockscope-report",
            version: REPORT_JSON_VERSION,
            group_by: options.group_by.name(),
            top: options.top,
            header: header(full, &waits),
            measure: measure.name(),
            measure_kind: measure,
            totals: Stats::new(&waits.all, waits.whole),
            classified: (measure == Measure::Waits).then(|| super::Classified::of(full)),
            by_kind: kind_rows(&waits.profile.totals_by_kind(), waits.whole),
            groups_total,
            groups,
            kernel_threads,
            sections: Sections::build(full),
        }
    }
}
