//! The report as one typed value: what `lockscope report` writes as text and JSON, and what
//! `lockscope html` draws its tables from. Field names are the JSON schema (`docs/REPORT-JSON.md`,
//! keep it in step); the fields skipped in the JSON are the text's and the page's.
//!
//! `build.rs` fills it from a profile; `text.rs` writes it for people.

use super::coverage::{Coverage, Quiet};
use super::sections::Sections;
use crate::analysis::measure::Measure;
use lockscope_probes::{Log2Histogram, StackId, WaitKind};
use serde::Serialize;

/// A profile's report.
#[derive(Serialize)]
pub(crate) struct Report {
    pub(crate) schema: &'static str,
    pub(crate) version: u32,
    pub(crate) group_by: &'static str,
    pub(crate) top: usize,
    pub(crate) header: Header,
    /// What the records measure: `waits`, or for an imported capture `on-cpu` (sampled CPU
    /// time), `events` or `samples`.
    pub(crate) measure: &'static str,
    #[serde(skip)]
    pub(crate) measure_kind: Measure,
    pub(crate) totals: Stats,
    /// The waits by role (contention, idle, neither) and the CPU saturation apart, summed over
    /// every wait (not only the top rows): the totals every view prints; absent for imported
    /// captures and profiles without waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) classified: Option<super::Classified>,
    pub(crate) by_kind: Vec<KindRow>,
    pub(crate) groups_total: usize,
    pub(crate) groups: Vec<Group>,
    /// `group_by` `process` of a recording with kernel threads (`record -a`): what they did
    /// together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kernel_threads: Option<KernelThreads>,
    /// Contention apart from idle waits, the time breakdown and the per-probe sections.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sections: Option<Sections>,
}

/// Who and what was recorded, how, and how completely.
#[derive(Serialize)]
pub(crate) struct Header {
    pub(crate) command: Vec<String>,
    pub(crate) pid: u32,
    pub(crate) launched: bool,
    /// What was recorded, in words (`cgroup /system.slice/x.service`, `all processes`).
    pub(crate) target: String,
    /// Processes of the target set (the profile's process table; 0 in profiles without one).
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub(crate) processes: usize,
    /// ... that had exited by the end.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub(crate) processes_exited: usize,
    /// ... that are kernel threads.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub(crate) kernel_threads: usize,
    /// What the recording could not do as asked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
    /// An imported capture (no target at all), for the text's first line.
    #[serde(skip)]
    pub(crate) imported: bool,
    pub(crate) start_unix_ns: u64,
    pub(crate) duration_ns: u64,
    pub(crate) end_reason: String,
    pub(crate) backend: String,
    pub(crate) os: String,
    pub(crate) kernel_release: String,
    pub(crate) hostname: String,
    pub(crate) cpu_count: u32,
    pub(crate) libc: Option<String>,
    pub(crate) threads_seen: usize,
    pub(crate) probes: Vec<ProbeRow>,
    pub(crate) events: u64,
    pub(crate) waits_recorded: u64,
    /// The `cpu` probe's samples, reported apart from the waits (0: none, or only samples).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) on_cpu_samples: u64,
    /// The `offcpu` probe's intervals of threads waiting for a CPU, reported apart (CPU
    /// saturation).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) cpu_wait_intervals: u64,
    pub(crate) losses: LossRow,
    /// Waits whose user stack the unwinder cut short; absent when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) truncated_stacks: Option<TruncatedRow>,
    /// The futex sleeps both the futex and offcpu probes saw, counted once; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merged_sleeps: Option<MergedRow>,
    /// The sleeps under kernel locks both the klock and offcpu probes saw, counted once; absent
    /// when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merged_lock_sleeps: Option<MergedRow>,
    /// How much of the threads' wall time the probes saw; absent for imported captures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) coverage: Option<Coverage>,
    /// Why the recording saw (almost) nothing, and what to do; absent when it saw enough.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) quiet: Option<Quiet>,
}

/// Sleeps that the offcpu probe and another both recorded: futex sleeps with the futex probe,
/// sleeps under kernel locks with the klock probe. The other probe's waits count, the offcpu
/// probe's sleeps are left out of every total, kind and group.
#[derive(Serialize)]
pub(crate) struct MergedRow {
    /// Threads whose sleeps both probes saw.
    pub(crate) threads: usize,
    /// The offcpu probe's sleeps of those threads, left out.
    pub(crate) offcpu_sleeps: u64,
    pub(crate) offcpu_ns: u64,
    /// The futex probe's waits of those threads, which count (futex sleeps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) futex_waits: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) futex_ns: Option<u64>,
    /// The klock probe's waits of those threads, which count (sleeps under kernel locks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) klock_waits: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) klock_ns: Option<u64>,
    /// The text report's sentence.
    pub(crate) text: String,
}

/// Waits recorded on user stacks that stop before the thread's entry point.
#[derive(Serialize)]
pub(crate) struct TruncatedRow {
    /// Distinct truncated user stacks.
    pub(crate) stacks: usize,
    /// Waits recorded on them.
    pub(crate) waits: u64,
    /// Their wait time.
    pub(crate) total_ns: u64,
    /// Share of all wait time (0 to 1).
    pub(crate) share: f64,
}

/// A probe and how it attached.
#[derive(Serialize)]
pub(crate) struct ProbeRow {
    pub(crate) probe: String,
    pub(crate) hook: String,
    pub(crate) status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fallback_hook: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

/// What the recording lost; `complete` when nothing.
#[derive(Serialize)]
pub(crate) struct LossRow {
    pub(crate) complete: bool,
    pub(crate) lost_events: u64,
    pub(crate) user_stack_failures: u64,
    pub(crate) kernel_stack_failures: u64,
    pub(crate) map_full: u64,
    pub(crate) dropped: u64,
    pub(crate) skipped_runs: u64,
    pub(crate) out_of_order: u64,
}

/// Count, times and share of some records.
#[derive(Serialize)]
pub(crate) struct Stats {
    pub(crate) count: u64,
    pub(crate) total_ns: u64,
    pub(crate) mean_ns: u64,
    pub(crate) max_ns: u64,
    /// Fraction of the enclosing total (all waits, or the group for a group's parts).
    pub(crate) share: f64,
}

/// The records of one wait kind.
#[derive(Serialize)]
pub(crate) struct KindRow {
    pub(crate) kind: WaitKind,
    #[serde(flatten)]
    pub(crate) stats: Stats,
}

/// One group of the top list (by [`super::GroupBy`]), with what it holds.
#[derive(Serialize)]
pub(crate) struct Group {
    pub(crate) rank: usize,
    pub(crate) key: GroupKey,
    #[serde(flatten)]
    pub(crate) stats: Stats,
    pub(crate) kinds: Vec<KindRow>,
    pub(crate) threads: Vec<ThreadRow>,
    pub(crate) locks: Vec<LockRow>,
    pub(crate) stacks_total: usize,
    pub(crate) stacks: Vec<StackRow>,
    pub(crate) histogram: Vec<HistogramBucket>,
    #[serde(skip)]
    pub(crate) log2: Log2Histogram,
    /// A thread's on-CPU samples and their CPU time, beside its waits (`--by thread` of a
    /// recording with the `cpu` probe and wait probes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) on_cpu: Option<OnCpuRow>,
}

/// The kernel threads of a recording, together.
#[derive(Serialize)]
pub(crate) struct KernelThreads {
    /// Kernel threads in the process table.
    pub(crate) recorded: usize,
    /// ... with records.
    pub(crate) with_records: usize,
    /// Their records' statistics (waits, or samples and CPU time), and the share of all.
    #[serde(flatten)]
    pub(crate) stats: Stats,
    /// Their `cpu` probe samples beside their waits (a recording of both).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) on_cpu: Option<OnCpuRow>,
}

/// A thread's samples of the `cpu` probe.
#[derive(Serialize, Clone, Copy, Default)]
pub(crate) struct OnCpuRow {
    pub(crate) samples: u64,
    pub(crate) cpu_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

/// What a group is: its key under each grouping.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum GroupKey {
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
        /// `argv[0]`'s file name, else the process's name.
        process: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent: Option<u32>,
        /// Its command line (empty: unknown, or a kernel thread).
        command: Vec<String>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        kernel_thread: bool,
    },
}

/// A thread of a group.
#[derive(Serialize)]
pub(crate) struct ThreadRow {
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) name: String,
}

/// A waited-on object and operation of a group.
#[derive(Serialize)]
pub(crate) struct LockRow {
    pub(crate) pid: u32,
    pub(crate) object: String,
    pub(crate) operation: String,
}

/// One of a group's heaviest user stacks, with its heaviest kernel stack when asked for.
#[derive(Serialize)]
pub(crate) struct StackRow {
    pub(crate) count: u64,
    pub(crate) total_ns: u64,
    pub(crate) share: f64,
    pub(crate) user: Option<StackTrace>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kernel: Option<StackTrace>,
    #[serde(skip)]
    pub(crate) kernel_wanted: bool,
}

/// A stack's frames, leaf first.
#[derive(Serialize)]
pub(crate) struct StackTrace {
    pub(crate) id: StackId,
    pub(crate) truncated: bool,
    pub(crate) frames: Vec<FrameRow>,
}

/// A frame, symbolized where possible, with the functions inlined into it.
#[derive(Serialize)]
pub(crate) struct FrameRow {
    pub(crate) address: String,
    pub(crate) function: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) module: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) module_offset: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) inlined: Vec<InlinedRow>,
}

/// A function inlined into a frame.
#[derive(Serialize)]
pub(crate) struct InlinedRow {
    pub(crate) function: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u32>,
}

/// A log2 histogram bucket: the records from `lower_ns` to `upper_ns`.
#[derive(Serialize)]
pub(crate) struct HistogramBucket {
    pub(crate) lower_ns: u64,
    pub(crate) upper_ns: u64,
    pub(crate) count: u64,
}
