//! `lockscope report`: a profile summarized for people (text) or programs (JSON).
//!
//! Both outputs come from one report value, so they always carry the same data:
//!
//! 1. a header: target command and pid, when and how long, why the recording ended, host, threads
//!    seen, each probe with its attach status, events, how much of the threads' wall time the
//!    probes saw (`report/coverage.rs`, with what to record when they missed most of it), the
//!    sleeps two probes saw and that count once, and loss counters (flagged with `WARNING` when
//!    any is non-zero, since then every total undercounts);
//! 2. totals per wait kind;
//! 3. the top groups by total wait time, grouped by [`GroupBy`], each with count, total, mean,
//!    max, kinds, threads, locks, its heaviest stacks (leaf first) and a log2 histogram in the
//!    layout of DTrace's `quantize()` ([`crate::render::histogram`]).
//!
//! A recording with the `cpu` probe beside wait probes keeps the two apart: everything above is
//! about waits, and the on-CPU samples are CPU time in a section of their own
//! (`report/sections/on_cpu.rs`), with each thread's CPU time beside its waits under `--by thread`. The
//! `offcpu` probe's intervals of threads waiting for a CPU (run queue, preempted) are CPU
//! saturation, not waits: they have their section too, and are not among the waits above. With
//! the `futex` and `offcpu` probes together, a futex sleep is both probes' record: it counts once,
//! as the futex probe's wait ([`lockscope_probes::SeenTwice`]), in every total, kind and group.
//!
//! Times in the text use the convention of [`crate::render::units`]; the JSON keeps raw nanoseconds and
//! is documented in `docs/REPORT-JSON.md` (version [`REPORT_JSON_VERSION`]).

mod coverage;
pub(crate) mod sections;

use crate::analysis::fold::Measure;
use crate::render::histogram;
use crate::render::units::{format_ns, format_percent, format_unix_ns, share};
use lockscope_probes::{
    AttachStatus, Frame, Log2Histogram, Profile, SeenTwice, Stack, StackId, WaitKind, WaitRecord,
    WaitStats,
};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};
use std::str::FromStr;

/// Version of the JSON report schema (`docs/REPORT-JSON.md`); bumped on incompatible changes.
pub const REPORT_JSON_VERSION: u32 = 1;

/// Stacks shown per group when a group spans several (thread and lock groupings).
const MAX_STACKS_PER_GROUP: usize = 3;
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

/// What the top list of a report groups waits by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GroupBy {
    /// User stack and wait kind: where in the code threads waited (the default).
    #[default]
    Stack,
    /// Thread (pid, tid, name): who waited.
    Thread,
    /// Waited-on object address and operation (and pid): what was waited for.
    Lock,
    /// Process (pid, with its command from the profile's process table): which program of a
    /// recording of many.
    Process,
}

impl GroupBy {
    /// Name on the command line and in the JSON (`stack`, `thread`, `lock`).
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Stack => "stack",
            GroupBy::Thread => "thread",
            GroupBy::Lock => "lock",
            GroupBy::Process => "process",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            GroupBy::Stack => "wait sites (stack and kind)",
            GroupBy::Thread => "threads",
            GroupBy::Lock => "locks (object and operation)",
            GroupBy::Process => "processes",
        }
    }
}

impl fmt::Display for GroupBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GroupBy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "stack" => Ok(GroupBy::Stack),
            "thread" => Ok(GroupBy::Thread),
            "lock" => Ok(GroupBy::Lock),
            "process" => Ok(GroupBy::Process),
            other => Err(format!(
                "unknown grouping `{other}` (expected `stack`, `thread`, `lock` or `process`)"
            )),
        }
    }
}

/// How to write a report.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReportOptions {
    /// What the top list groups by. Default: [`GroupBy::Stack`].
    pub group_by: GroupBy,
    /// How many groups to show, heaviest first; `0` shows all. Default: `10`.
    pub top: usize,
    /// Write JSON (`docs/REPORT-JSON.md`) instead of text. Default: `false`.
    pub json: bool,
    /// Show the kernel stack under each user stack (text and JSON). Default: `false`.
    pub show_kernel_stacks: bool,
    /// Only this probe's records (`cpu`: the on-CPU samples alone, ranked by CPU time).
    /// Default: `None`, every probe.
    pub probe: Option<String>,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            group_by: GroupBy::Stack,
            top: 10,
            json: false,
            show_kernel_stacks: false,
            probe: None,
        }
    }
}

/// Writes the report of `profile` to `out`, as text or JSON per `options`.
pub fn write_report(
    profile: &Profile,
    options: &ReportOptions,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let selected;
    let profile = match &options.probe {
        Some(probe) => {
            selected = Profile {
                waits: profile
                    .waits
                    .iter()
                    .filter(|w| &w.probe == probe)
                    .cloned()
                    .collect(),
                ..profile.clone()
            };
            &selected
        }
        None => profile,
    };
    let report = Report::build(profile, options);
    if options.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        out.write_all(report.to_text(options).as_bytes())?;
    }
    out.flush()
}

// ----------------------------------------------------------------------------------------------
// The report model. Field names are the JSON schema: keep docs/REPORT-JSON.md in step.

#[derive(Serialize)]
struct Report {
    schema: &'static str,
    version: u32,
    group_by: &'static str,
    top: usize,
    header: Header,
    /// What the records measure: `waits`, or for an imported capture `on-cpu` (sampled CPU
    /// time), `events` or `samples`.
    measure: &'static str,
    #[serde(skip)]
    measure_kind: Measure,
    totals: Stats,
    by_kind: Vec<KindRow>,
    groups_total: usize,
    groups: Vec<Group>,
    /// `group_by` `process` of a recording with kernel threads (`record -a`): what they did
    /// together.
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_threads: Option<KernelThreads>,
    /// Contention apart from idle waits, the time breakdown and the per-probe sections.
    #[serde(skip_serializing_if = "Option::is_none")]
    sections: Option<sections::Sections>,
}

#[derive(Serialize)]
struct Header {
    command: Vec<String>,
    pid: u32,
    launched: bool,
    /// What was recorded, in words (`cgroup /system.slice/x.service`, `all processes`).
    target: String,
    /// Processes of the target set (the profile's process table; 0 in profiles without one).
    #[serde(skip_serializing_if = "is_zero_usize")]
    processes: usize,
    /// ... that had exited by the end.
    #[serde(skip_serializing_if = "is_zero_usize")]
    processes_exited: usize,
    /// ... that are kernel threads.
    #[serde(skip_serializing_if = "is_zero_usize")]
    kernel_threads: usize,
    /// What the recording could not do as asked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
    /// An imported capture (no target at all), for the text's first line.
    #[serde(skip)]
    imported: bool,
    start_unix_ns: u64,
    duration_ns: u64,
    end_reason: String,
    backend: String,
    os: String,
    kernel_release: String,
    hostname: String,
    cpu_count: u32,
    libc: Option<String>,
    threads_seen: usize,
    probes: Vec<ProbeRow>,
    events: u64,
    waits_recorded: u64,
    /// The `cpu` probe's samples, reported apart from the waits (0: none, or only samples).
    #[serde(skip_serializing_if = "is_zero")]
    on_cpu_samples: u64,
    /// The `offcpu` probe's intervals of threads waiting for a CPU, reported apart (CPU
    /// saturation).
    #[serde(skip_serializing_if = "is_zero")]
    cpu_wait_intervals: u64,
    losses: LossRow,
    /// Waits whose user stack the unwinder cut short; absent when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    truncated_stacks: Option<TruncatedRow>,
    /// The futex sleeps both the futex and offcpu probes saw, counted once; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    merged_sleeps: Option<MergedRow>,
    /// How much of the threads' wall time the probes saw; absent for imported captures.
    #[serde(skip_serializing_if = "Option::is_none")]
    coverage: Option<coverage::Coverage>,
}

/// Futex sleeps that the futex and offcpu probes both recorded: the futex probe's waits count,
/// the offcpu probe's sleeps in futex are left out of every total, kind and group.
#[derive(Serialize)]
struct MergedRow {
    /// Threads whose futex sleeps both probes saw.
    threads: usize,
    /// The offcpu probe's futex sleeps of those threads, left out.
    offcpu_sleeps: u64,
    offcpu_ns: u64,
    /// The futex probe's waits of those threads, which count.
    futex_waits: u64,
    futex_ns: u64,
    /// The text report's sentence.
    text: String,
}

/// Waits recorded on user stacks that stop before the thread's entry point.
#[derive(Serialize)]
struct TruncatedRow {
    /// Distinct truncated user stacks.
    stacks: usize,
    /// Waits recorded on them.
    waits: u64,
    /// Their wait time.
    total_ns: u64,
    /// Share of all wait time (0 to 1).
    share: f64,
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

#[derive(Serialize)]
struct ProbeRow {
    probe: String,
    hook: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    fallback_hook: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

#[derive(Serialize)]
struct LossRow {
    complete: bool,
    lost_events: u64,
    user_stack_failures: u64,
    kernel_stack_failures: u64,
    map_full: u64,
    dropped: u64,
}

#[derive(Serialize)]
struct Stats {
    count: u64,
    total_ns: u64,
    mean_ns: u64,
    max_ns: u64,
    /// Fraction of the enclosing total (all waits, or the group for a group's parts).
    share: f64,
}

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

#[derive(Serialize)]
struct KindRow {
    kind: WaitKind,
    #[serde(flatten)]
    stats: Stats,
}

#[derive(Serialize)]
struct Group {
    rank: usize,
    key: GroupKey,
    #[serde(flatten)]
    stats: Stats,
    kinds: Vec<KindRow>,
    threads: Vec<ThreadRow>,
    locks: Vec<LockRow>,
    stacks_total: usize,
    stacks: Vec<StackRow>,
    histogram: Vec<Bucket>,
    #[serde(skip)]
    log2: Log2Histogram,
    /// A thread's on-CPU samples and their CPU time, beside its waits (`--by thread` of a
    /// recording with the `cpu` probe and wait probes).
    #[serde(skip_serializing_if = "Option::is_none")]
    on_cpu: Option<OnCpuRow>,
}

/// The kernel threads of a recording, together.
#[derive(Serialize)]
struct KernelThreads {
    /// Kernel threads in the process table.
    recorded: usize,
    /// ... with records.
    with_records: usize,
    /// Their records' statistics (waits, or samples and CPU time), and the share of all.
    #[serde(flatten)]
    stats: Stats,
    /// Their `cpu` probe samples beside their waits (a recording of both).
    #[serde(skip_serializing_if = "Option::is_none")]
    on_cpu: Option<OnCpuRow>,
}

/// A thread's samples of the `cpu` probe.
#[derive(Serialize, Clone, Copy, Default)]
struct OnCpuRow {
    samples: u64,
    cpu_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

#[derive(Serialize)]
#[serde(untagged)]
enum GroupKey {
    Stack {
        user_stack: Option<StackId>,
        kind: WaitKind,
    },
    Thread {
        pid: u32,
        tid: u32,
        name: String,
    },
    Lock {
        pid: u32,
        object: String,
        operation: String,
    },
    Process {
        pid: u32,
        /// argv[0]'s file name, else the process's name.
        process: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent: Option<u32>,
        /// Its command line (empty: unknown, or a kernel thread).
        command: Vec<String>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        kernel_thread: bool,
    },
}

#[derive(Serialize)]
struct ThreadRow {
    pid: u32,
    tid: u32,
    name: String,
}

#[derive(Serialize)]
struct LockRow {
    pid: u32,
    object: String,
    operation: String,
}

#[derive(Serialize)]
struct StackRow {
    count: u64,
    total_ns: u64,
    share: f64,
    user: Option<StackJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel: Option<StackJson>,
    #[serde(skip)]
    kernel_wanted: bool,
}

#[derive(Serialize)]
struct StackJson {
    id: StackId,
    truncated: bool,
    frames: Vec<FrameJson>,
}

#[derive(Serialize)]
struct FrameJson {
    address: String,
    function: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    module_offset: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    inlined: Vec<InlinedJson>,
}

#[derive(Serialize)]
struct InlinedJson {
    function: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

#[derive(Serialize)]
struct Bucket {
    lower_ns: u64,
    upper_ns: u64,
    count: u64,
}

// ----------------------------------------------------------------------------------------------
// Building.

/// Grouping key while aggregating; its order breaks ties between equally heavy groups.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Stack(Option<StackId>, WaitKind),
    Thread(u32, u32),
    Lock(u32, u64, String),
    Process(u32),
}

#[derive(Default)]
struct StackAcc {
    count: u64,
    total_ns: u64,
    kernel_ns: BTreeMap<Option<StackId>, u64>,
}

#[derive(Default)]
struct Acc {
    stats: WaitStats,
    kinds: BTreeMap<WaitKind, WaitStats>,
    threads: BTreeSet<(u32, u32)>,
    locks: BTreeSet<(u32, u64, String)>,
    stacks: BTreeMap<Option<StackId>, StackAcc>,
}

/// Rows sorted heaviest first: by total, then count, then their natural order.
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

fn frame_json(frame: &Frame) -> FrameJson {
    FrameJson {
        address: hex(frame.address),
        function: frame.display_name(),
        module: frame.module.clone(),
        module_offset: frame.module_offset.map(hex),
        file: frame.file.clone(),
        line: frame.line,
        inlined: frame
            .inlined
            .iter()
            .map(|i| InlinedJson {
                function: i.function.clone(),
                file: i.file.clone(),
                line: i.line,
            })
            .collect(),
    }
}

fn stack_json(profile: &Profile, id: Option<StackId>) -> Option<StackJson> {
    let stack: &Stack = profile.stack(id)?;
    Some(StackJson {
        id: id?,
        truncated: stack.truncated,
        frames: stack.frames.iter().map(frame_json).collect(),
    })
}

impl Report {
    fn build(full: &Profile, options: &ReportOptions) -> Report {
        // With waits beside the `cpu` probe's samples, everything but the on-CPU section is
        // about the waits: the samples are CPU time, never added to wait time.
        let waits_only;
        let mut on_cpu_by_thread: BTreeMap<(u32, u32), OnCpuRow> = BTreeMap::new();
        let drop_samples = crate::analysis::fold::mixes_samples(full);
        if drop_samples {
            for w in full.waits.iter().filter(|w| w.kind == WaitKind::OnCpu) {
                let row = on_cpu_by_thread.entry((w.pid, w.tid)).or_default();
                row.samples += w.stats.count;
                row.cpu_ns = row.cpu_ns.saturating_add(w.stats.total_ns);
            }
        }
        // A futex sleep both the futex and offcpu probes saw counts once, as the futex wait.
        let twice = SeenTwice::of(full);
        let apart = |w: &WaitRecord| {
            (drop_samples && w.kind.is_sampled()) || sections::is_cpu_wait(w) || twice.contains(w)
        };
        let cpu_wait_intervals: u64 = full
            .waits
            .iter()
            .filter(|w| sections::is_cpu_wait(w))
            .map(|w| w.stats.count)
            .sum();
        let profile = if full.waits.iter().any(apart) {
            waits_only = Profile {
                waits: full.waits.iter().filter(|w| !apart(w)).cloned().collect(),
                ..full.clone()
            };
            &waits_only
        } else {
            full
        };
        let on_cpu_samples: u64 = on_cpu_by_thread.values().map(|r| r.samples).sum();
        let meta = &profile.metadata;
        let mut all = WaitStats::default();
        for w in &profile.waits {
            all.merge(&w.stats);
        }
        let measure = Measure::of_records(&profile.waits);
        let whole = Whole::of(&all, measure);

        let mut accs: BTreeMap<Key, Acc> = BTreeMap::new();
        for w in &profile.waits {
            let key = match options.group_by {
                GroupBy::Stack => Key::Stack(w.user_stack, w.kind),
                GroupBy::Thread => Key::Thread(w.pid, w.tid),
                GroupBy::Lock => Key::Lock(w.pid, w.object, w.operation.clone()),
                GroupBy::Process => Key::Process(w.pid),
            };
            let acc = accs.entry(key).or_default();
            acc.stats.merge(&w.stats);
            acc.kinds.entry(w.kind).or_default().merge(&w.stats);
            acc.threads.insert((w.pid, w.tid));
            acc.locks.insert((w.pid, w.object, w.operation.clone()));
            let stack = acc.stacks.entry(w.user_stack).or_default();
            stack.count += w.stats.count;
            stack.total_ns = stack.total_ns.saturating_add(w.stats.total_ns);
            let kernel = stack.kernel_ns.entry(w.kernel_stack).or_default();
            *kernel = kernel.saturating_add(w.stats.total_ns);
        }
        let mut accs: Vec<(Key, Acc)> = accs.into_iter().collect();
        accs.sort_by(|(ka, a), (kb, b)| {
            (Reverse(a.stats.total_ns), Reverse(a.stats.count), ka).cmp(&(
                Reverse(b.stats.total_ns),
                Reverse(b.stats.count),
                kb,
            ))
        });
        let groups_total = accs.len();
        let shown = if options.top == 0 {
            groups_total
        } else {
            options.top.min(groups_total)
        };

        let thread_name = |pid: u32, tid: u32| {
            profile
                .thread_name(pid, tid)
                .unwrap_or("[unknown thread]")
                .to_string()
        };
        let groups = accs
            .into_iter()
            .take(shown)
            .enumerate()
            .map(|(i, (key, acc))| {
                let on_cpu = match key {
                    Key::Thread(pid, tid) => on_cpu_by_thread.get(&(pid, tid)).copied(),
                    Key::Process(pid) => on_cpu_by_thread
                        .range((pid, 0)..=(pid, u32::MAX))
                        .map(|(_, row)| *row)
                        .reduce(|a, b| OnCpuRow {
                            samples: a.samples + b.samples,
                            cpu_ns: a.cpu_ns.saturating_add(b.cpu_ns),
                        }),
                    _ => None,
                };
                let key = match key {
                    Key::Stack(user_stack, kind) => GroupKey::Stack { user_stack, kind },
                    Key::Thread(pid, tid) => GroupKey::Thread {
                        pid,
                        tid,
                        name: thread_name(pid, tid),
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
                };
                let group_whole = Whole::of(&acc.stats, measure);
                let stacks_total = acc.stacks.len();
                let mut stacks: Vec<(Option<StackId>, StackAcc)> = acc.stacks.into_iter().collect();
                stacks.sort_by_key(|(id, s)| (Reverse(s.total_ns), Reverse(s.count), *id));
                let stacks = stacks
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
                            user: stack_json(profile, id),
                            kernel: if options.show_kernel_stacks {
                                stack_json(profile, heaviest_kernel)
                            } else {
                                None
                            },
                            kernel_wanted: options.show_kernel_stacks,
                        }
                    })
                    .collect();
                Group {
                    rank: i + 1,
                    key,
                    stats: Stats::new(&acc.stats, whole),
                    kinds: kind_rows(&acc.kinds, group_whole),
                    threads: acc
                        .threads
                        .iter()
                        .map(|&(pid, tid)| ThreadRow {
                            pid,
                            tid,
                            name: thread_name(pid, tid),
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
                    stacks,
                    histogram: acc
                        .stats
                        .histogram
                        .buckets()
                        .map(|(slot, count)| Bucket {
                            lower_ns: Log2Histogram::slot_lower_bound(slot),
                            upper_ns: Log2Histogram::slot_upper_bound(slot),
                            count,
                        })
                        .collect(),
                    log2: acc.stats.histogram,
                    on_cpu,
                }
            })
            .collect();

        let kernel_threads = (options.group_by == GroupBy::Process)
            .then(|| {
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
                for w in profile.waits.iter().filter(|w| kernel.contains(&w.pid)) {
                    stats.merge(&w.stats);
                    with_records.insert(w.pid);
                }
                let mut cpu = OnCpuRow::default();
                for (&(pid, _), row) in &on_cpu_by_thread {
                    if kernel.contains(&pid) {
                        cpu.samples += row.samples;
                        cpu.cpu_ns = cpu.cpu_ns.saturating_add(row.cpu_ns);
                        with_records.insert(pid);
                    }
                }
                Some(KernelThreads {
                    recorded: kernel.len(),
                    with_records: with_records.len(),
                    stats: Stats::new(&stats, whole),
                    on_cpu: (cpu.samples > 0).then_some(cpu),
                })
            })
            .flatten();
        let probes = meta
            .probes
            .iter()
            .map(|p| {
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
            })
            .collect();
        let losses = &meta.losses;
        Report {
            schema: "lockscope-report",
            version: REPORT_JSON_VERSION,
            group_by: options.group_by.name(),
            top: options.top,
            header: Header {
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
                imported: meta.target == lockscope_probes::Target::default(),
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
                probes,
                events: meta.events,
                waits_recorded: all.count,
                on_cpu_samples,
                cpu_wait_intervals,
                losses: LossRow {
                    complete: losses.is_zero(),
                    lost_events: losses.lost_events(),
                    user_stack_failures: losses.user_stack_failures,
                    kernel_stack_failures: losses.kernel_stack_failures,
                    map_full: losses.map_full,
                    dropped: losses.dropped,
                },
                truncated_stacks: TruncatedRow::of(profile, all.total_ns),
                coverage: if measure == Measure::Waits {
                    coverage::Coverage::of(full, all.total_ns, profile.threads.len())
                } else {
                    None
                },
                merged_sleeps: twice.merged(full).map(|m| MergedRow {
                    threads: m.threads,
                    offcpu_sleeps: m.offcpu.count,
                    offcpu_ns: m.offcpu.total_ns,
                    futex_waits: m.futex.count,
                    futex_ns: m.futex.total_ns,
                    text: format!(
                        "futex and offcpu both saw {} of {} ({}): counted once, as {} {} \
                         futex {} ({}); offcpu's sleeps in other system calls are kept",
                        plural(m.offcpu.count, "futex sleep", "futex sleeps"),
                        plural(m.threads as u64, "thread", "threads"),
                        format_ns(m.offcpu.total_ns),
                        if m.threads == 1 {
                            "that thread's"
                        } else {
                            "those threads'"
                        },
                        m.futex.count,
                        if m.futex.count == 1 { "wait" } else { "waits" },
                        format_ns(m.futex.total_ns)
                    ),
                }),
            },
            measure: measure.name(),
            measure_kind: measure,
            totals: Stats::new(&all, whole),
            by_kind: kind_rows(&profile.totals_by_kind(), whole),
            groups_total,
            groups,
            kernel_threads,
            sections: sections::Sections::build(full),
        }
    }
}

// ----------------------------------------------------------------------------------------------
// Text.

/// Appends one line; writing to a String cannot fail.
macro_rules! put {
    ($out:expr) => {{
        $out.push('\n');
    }};
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

fn plural(n: u64, one: &str, many: &str) -> String {
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

impl Report {
    fn to_text(&self, options: &ReportOptions) -> String {
        let mut out = String::new();
        self.header_text(&mut out);
        self.kinds_text(&mut out);
        self.groups_text(&mut out, options);
        if let Some(sections) = &self.sections {
            sections.write_text(&mut out);
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
            put!(out, "{name}WARNING: {warning}");
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
        if let Some(m) = &h.merged_sleeps {
            put!(out, "{}{}", label("merged"), m.text);
        }
        let l = &h.losses;
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
                    "{}  {} lost, missing from every total below (map full: {}, dropped: {})",
                    label(""),
                    plural(l.lost_events, "wait", "waits"),
                    l.map_full,
                    l.dropped
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
                if m == Measure::OnCpu {
                    "CPU time"
                } else {
                    "wait time"
                },
                plural(t.stacks as u64, "user stack", "user stacks")
            );
        }
    }

    fn kinds_text(&self, out: &mut String) {
        let m = self.measure_kind;
        put!(out);
        if m != Measure::Waits {
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
        put!(out, "Waits by kind");
        if self.by_kind.is_empty() {
            put!(out, "  (no waits recorded)");
            return;
        }
        put!(
            out,
            "  {:<13}{:>8}{:>11}{:>11}{:>11}{:>8}",
            "kind",
            "waits",
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
            if m == Measure::Waits || options.group_by != GroupBy::Stack {
                options.group_by.plural()
            } else {
                "stacks"
            },
            match m {
                Measure::Waits => "total wait time",
                Measure::OnCpu => "CPU time",
                Measure::Events => "events",
                Measure::Samples => "samples",
            }
        );
        if let Some(k) = &self.kernel_threads {
            let what = match m {
                Measure::Waits => format!(
                    "{} waits, {} ({} of all)",
                    k.stats.count,
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
            put!(
                out,
                "  kernel threads: {} of the {} recorded have records: {what}{cpu}",
                k.with_records,
                k.recorded
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
                Measure::Waits => put!(
                    out,
                    "{}{}, total {} ({} of all), mean {}, max {}",
                    label("waits"),
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
                    list_limited(threads, MAX_THREADS_LISTED)
                );
            }
            // Imported samples have no lock (their operation is the sampled command).
            if options.group_by != GroupBy::Lock && m == Measure::Waits {
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
                    list_limited(locks, MAX_LOCKS_LISTED)
                );
            }
            for (i, row) in g.stacks.iter().enumerate() {
                let heading = if g.stacks_total == 1 {
                    "leaf first".to_string()
                } else {
                    match m {
                        Measure::Waits | Measure::OnCpu => format!(
                            "{} of {}: {} {}, {} ({} of this group), leaf first",
                            i + 1,
                            g.stacks_total,
                            row.count,
                            m.noun(row.count),
                            format_ns(row.total_ns),
                            format_percent(row.total_ns, s.total_ns)
                        ),
                        _ => format!(
                            "{} of {}: {} {} ({} of this group), leaf first",
                            i + 1,
                            g.stacks_total,
                            row.count,
                            m.noun(row.count),
                            format_percent(row.count, s.count)
                        ),
                    }
                };
                put!(out, "{}{heading}", label("user stack"));
                stack_text(out, row.user.as_ref(), &label(""), false);
                if row.kernel_wanted {
                    let indent = format!("{}  ", label(""));
                    put!(out, "{}kernel stack, leaf first", label(""));
                    match &row.kernel {
                        Some(kernel) => stack_text(out, Some(kernel), &indent, true),
                        None => put!(out, "{indent}(not captured)"),
                    }
                }
            }
            if g.stacks_total > g.stacks.len() {
                put!(
                    out,
                    "{}{} more stacks not shown",
                    label(""),
                    g.stacks_total - g.stacks.len()
                );
            }
            // Durations only: sampled CPU time and counts have no distribution to show.
            if m == Measure::Waits {
                out.push_str(&histogram::render(&g.log2, INDENT));
            }
        }
    }
}

/// Writes a stack leaf first, one function per line: inlined functions (innermost first) before
/// the function they were inlined into, each with its source location or module offset (kernel
/// frames: source location only, their module is always the kernel).
fn stack_text(out: &mut String, stack: Option<&StackJson>, indent: &str, kernel: bool) {
    let Some(stack) = stack else {
        put!(out, "{indent}{}", crate::analysis::fold::NO_USER_STACK);
        return;
    };
    let mut rows: Vec<(String, String)> = Vec::new();
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
            rows.push((inlined.function.clone(), location));
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
        rows.push((frame.function.clone(), own));
    }
    if rows.is_empty() {
        put!(out, "{indent}(empty stack)");
    }
    let width = rows
        .iter()
        .map(|(name, _)| name.chars().count())
        .max()
        .unwrap_or(0)
        .min(MAX_NAME_COLUMN);
    for (name, location) in rows {
        if location.is_empty() {
            put!(out, "{indent}{name}");
        } else {
            put!(out, "{indent}{name:<width$}  {location}");
        }
    }
    if stack.truncated {
        put!(out, "{indent}... (truncated: the unwinder stopped here)");
    }
}
