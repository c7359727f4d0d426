//! The answer `why` gives, as one value that renders as text and JSON (`docs/WHY-JSON.md`):
//! the recording, the analysed threads, their causes best first, idle, and the analysis'
//! coverage. [`Why::build`](super::Why::build) fills it in.

use super::cause::LockKey;
use lockscope_probes::bottleneck::WaitPart;
use lockscope_probes::WaitKind;
use serde::Serialize;

/// The answer: the causes of the analysed threads' waits.
#[derive(Debug, Serialize)]
pub struct Why {
    pub(super) schema: &'static str,
    pub(super) version: u32,
    /// The recording.
    pub header: Header,
    /// Which threads were analysed, and where their time went.
    pub analysed: Analysed,
    /// The causes of their waits, best first (idle left out).
    pub causes: Vec<Cause>,
    /// Causes that exist before the `top` cut.
    pub causes_total: usize,
    /// What the program waited for from outside (idle: not a bottleneck), heaviest first.
    pub idle: Vec<Cause>,
    /// How complete the analysis is.
    pub coverage: Coverage,
}

/// The recording a `why` explains.
#[derive(Debug, Serialize)]
pub struct Header {
    /// Target command line.
    pub command: Vec<String>,
    /// Target pid.
    pub pid: u32,
    /// Length of the recording.
    pub duration_ns: u64,
    /// Online CPUs.
    pub cpu_count: u32,
    /// Kernel release.
    pub kernel_release: String,
    /// Threads with per-thread times.
    pub threads_recorded: usize,
}

/// The analysed threads.
#[derive(Debug, Serialize)]
pub struct Analysed {
    /// How they were chosen: by default `working` (the groups that did the work) or `waiting`
    /// (the groups that waited most, where the working groups barely waited); `asked`
    /// (`--threads`).
    pub selection: &'static str,
    /// With `waiting`: the groups that did the work, and how little they waited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working: Option<WorkingWaited>,
    /// The pattern of `--threads`, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The `--site` filter, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// Their groups (names with digits as `*`), with counts.
    pub groups: Vec<GroupRow>,
    /// Threads analysed.
    pub threads: usize,
    /// Their wall time together (the whole shares are of).
    pub wall_ns: u64,
    /// Their own time on a CPU.
    pub on_cpu_ns: u64,
    /// Their waits that the analysis followed (every cause and idle).
    pub waits_ns: u64,
    /// Thread groups left out, with counts (`working` selection).
    pub left_out: Vec<GroupRow>,
}

/// The groups that did the work, when they barely waited (the `waiting` selection).
#[derive(Debug, Serialize)]
pub struct WorkingWaited {
    /// Their groups' names.
    pub groups: Vec<String>,
    /// The share of their time they waited on the program's threads (idle waits apart), under
    /// [`super::WORKING_SHARE`].
    pub waited_share: f64,
    /// The share of their time they waited for CPUs that other processes held (or that were
    /// idle: wakeup latency): the machine's load, not counted above.
    pub cpu_waited_share: f64,
}

/// A thread group and how many threads it has.
#[derive(Debug, Serialize)]
pub struct GroupRow {
    /// The group name (`worker-*`).
    pub group: String,
    /// Threads in it.
    pub threads: usize,
    /// Their CPU time.
    pub on_cpu_ns: u64,
}

pub use lockscope_probes::bottleneck::CauseKind;

/// One cause of the analysed threads' waiting.
#[derive(Debug, Serialize)]
pub struct Cause {
    /// Rank, 1 first.
    pub rank: usize,
    /// What it is.
    pub kind: CauseKind,
    /// The root's user stack by function, leaf first (empty when unknown): where it ran (what it
    /// ran, where sampled), slept or did I/O; for `cpu-saturation`, what held the CPUs where
    /// sampled; for the causes that are one per kind (`cpu-saturation` without samples, `cycle`,
    /// `depth-limit`, `unknown`), the heaviest root's (the `sites` say where the threads were).
    pub stack: Vec<String>,
    /// The root's kernel stack where it slept, leaf first (the heaviest of its records', as
    /// `stack` is chosen); absent when the root ran or waited for a CPU, or none was recorded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kernel_stack: Vec<String>,
    /// For `cpu`: the root's kernel stack at the wakeup that ended its running, leaf first, from
    /// the release on (past the wakeup's own frames): what the holder was doing as it let the
    /// waiters go (`up_write` from `__vm_munmap` for a kernel lock, `futex_wake` for a futex),
    /// the heaviest; absent without the `wakeup` probe's kernel stacks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub release_stack: Vec<String>,
    /// The sleeping kernel lock (rwsem, mutex, ...) most of its time was spent under: the root's
    /// sleep, or else the waits it explains (their kernel stacks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_lock: Option<KernelLock>,
    /// The system call the root slept in (`sleep`, `io`, `idle`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// Share of the analysed threads' wall time (0 to 1).
    pub share: f64,
    /// Its time, nanoseconds.
    pub total_ns: u64,
    /// Waits (off-CPU intervals of the analysed threads) it explains part of.
    pub waits: u64,
    /// The root threads, by group, heaviest first.
    pub threads: Vec<NamedTime>,
    /// The waits it explains: sites of the analysed threads, heaviest first.
    pub sites: Vec<Site>,
    /// For `cpu-saturation`: who had the CPUs, heaviest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<NamedTime>,
    /// For `sleep`, `io` and `idle`: who ended the root's sleep (`interrupt`, or a thread outside
    /// the program by name).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ended_by: Vec<NamedTime>,
    /// With the `cpu` probe: for `cpu`, what the roots ran while the waits lasted; for
    /// `cpu-saturation`, what the holders of the CPUs ran while threads waited for them; from
    /// its samples weighted by the waits that covered them (`stack` is the first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ran_at: Vec<StackShare>,
    /// For `cpu`: where those stretches of running ended (where the root woke the next thread of
    /// the chain, or blocked), by time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ended_at: Vec<StackShare>,
    /// One chain that leads there (the heaviest), from a waiting thread to the root.
    pub chain: Vec<HopRow>,
    #[serde(skip)]
    pub(super) key: CauseKey,
}

/// A sleeping kernel lock a cause's time was spent under, from the kernel stacks of the sleeps.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelLock {
    /// What lock: `rwsem`, `mutex`, `rt-mutex`, `percpu-rwsem` or `semaphore`.
    pub lock: &'static str,
    /// The kernel path that slept on it, leaf first, from the lock's slow path
    /// (`rwsem_down_read_slowpath`, `down_read`, `lock_mm_and_find_vma`, ...) out.
    pub stack: Vec<String>,
    /// Whose sleep it was: `root` (the root slept on it) or `waits` (the waits it explains).
    pub slept: &'static str,
    /// The cause's time under it, nanoseconds.
    pub total_ns: u64,
}

/// A stack's share of a cause.
#[derive(Debug, Serialize)]
pub struct StackShare {
    /// Function names, leaf first.
    pub stack: Vec<String>,
    /// Share of the cause (0 to 1).
    pub share: f64,
    /// Weighted samples (`ran_at`) or nanoseconds (`ended_at`).
    pub weight: u64,
}

/// A name (a thread group, an outside thread) and its time.
#[derive(Debug, Serialize)]
pub struct NamedTime {
    /// The name.
    pub name: String,
    /// Nanoseconds.
    pub total_ns: u64,
}

/// Where analysed threads waited, as part of one cause.
#[derive(Debug, Serialize)]
pub struct Site {
    /// The waiting threads' user stack by function, leaf first, from the synchronization
    /// call up (at most a few frames).
    pub stack: Vec<String>,
    /// The wait kind its stack tells (`mutex`, `condvar`, ...), or `off-cpu` outside futex.
    pub kind: WaitKind,
    /// The system call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// The lock word (futex), hexadecimal, when one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// Waiting (asleep) or waiting for a CPU (runnable).
    pub part: WaitPart,
    /// The waiting thread groups.
    pub threads: Vec<String>,
    /// This cause's time at this site.
    pub total_ns: u64,
}

/// One hop of a chain.
#[derive(Debug, Serialize)]
pub struct HopRow {
    /// The thread's name.
    pub thread: String,
    /// Its stack where it waited (or, for the root, where it ran), leaf first, a few frames.
    pub stack: Vec<String>,
}

/// How much the analysis saw.
#[derive(Debug, Serialize)]
pub struct Coverage {
    /// Off-CPU intervals analysed (all threads).
    pub intervals: u64,
    /// Intervals lost by the stream.
    pub lost_intervals: u64,
    /// Wakeups that ended no wait.
    pub spurious_wakeups: u64,
    /// Time of all threads blamed without its stacks, calls and locks (the analysis' limit of
    /// records was reached), nanoseconds.
    pub stackless_ns: u64,
    /// The analysed threads' wait time the analysis could not follow (`unknown`, depth limit).
    pub unexplained_ns: u64,
    /// Why: `unexplained_ns` by reason.
    pub unexplained: Unexplained,
    /// The analysed threads' wall time neither on a CPU nor in an analysed wait (sleeps still
    /// going on when the recording ended).
    pub unfinished_ns: u64,
    /// How deep chains were followed, and how far back.
    pub max_depth: u32,
    /// Nanoseconds of each thread's past kept.
    pub history_ns: u64,
}

/// Why the analysis could not follow some of the time: the parts of
/// [`Coverage::unexplained_ns`], which add up to it.
#[derive(Debug, Default, Serialize)]
pub struct Unexplained {
    /// Chains that ended in a sleep the analysis kept without its call, stacks and waker (past
    /// its limit of records: [`Coverage::stackless_ns`]), so what it slept in is not known.
    pub past_record_limit_ns: u64,
    /// Chains that ended in a sleep (with its call or stacks) whose wakeup was not seen: a
    /// wakeup the stream lost, saw out of order, or that came from where no probe looks.
    pub no_wakeup_seen_ns: u64,
    /// Chains that reached a thread's time the analysis does not know: before its kept history,
    /// before its creation, or at lost intervals.
    pub no_timeline_ns: u64,
    /// Chains longer than the analysis follows ([`Coverage::max_depth`]).
    pub depth_limit_ns: u64,
}

/// What one cause is: everything its records share.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub(super) struct CauseKey {
    pub(super) kind: Option<CauseKind>,
    pub(super) stack: Vec<String>,
    pub(super) call: Option<String>,
    /// The sleeping kernel lock its time was spent under (`cause::record_lock`): the same kind
    /// of cause under a kernel lock and not is two causes, since one kernel may take the lock
    /// and another not (waiting for a CPU after the lock's release is the lock's cost; waiting
    /// for one after a preemption is not).
    pub(super) kernel_lock: Option<LockKey>,
}
