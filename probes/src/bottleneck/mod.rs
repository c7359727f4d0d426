//! The bottleneck analysis: who each wait of the recorded program waited for, what that thread was
//! doing meanwhile, and where the time of a chain of waits ends.
//!
//! A backend streams every off-CPU interval of the program's threads into an [`Engine`], with
//! who ended each sleep ([`WokenBy`], and the waker thread when it was one of the program). The
//! engine follows each interval the way wPerf's cascaded re-distribution does: the time thread A
//! slept until thread B woke it is B's, split by what B was doing meanwhile; where B itself slept
//! until C woke it, that part is C's, and so on down to a root ([`RootKind`]): a thread on a CPU,
//! a thread waiting for a CPU, a thread asleep in something no thread of the program ended (a
//! timer, a device, a client), a cycle, or a stretch the engine does not know. The parts of one
//! wait always add up to the wait (the engine's conservation invariant, tested).
//!
//! The result, [`BottleneckAnalysis`] in the profile, holds [`Blame`] records: per waiting thread and wait
//! site, per root. `lockscope why` ranks them; `docs/FORMAT.md` documents every field.

mod cause;
mod chunked;
mod engine;
mod timeline;

pub use cause::{cause_kind, is_idle_cpu, is_io_frame, waited_on_sleeps, CauseKind};

pub use engine::{
    Engine, EngineCounts, EngineLimits, Interval, IntervalKind, RawBlame, RawRoot, RawSampled,
    RawWait,
};

use crate::profile::StackId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Who ended a sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WokenBy {
    /// A thread of the recorded program: the sleep waited for that thread.
    Program,
    /// A thread outside the recorded program (a client, another process, a kernel thread).
    Outside,
    /// Interrupt context: a timer, a device, the network.
    Interrupt,
}

impl WokenBy {
    /// Its name in reports (`program`, `outside`, `interrupt`).
    pub fn name(self) -> &'static str {
        match self {
            WokenBy::Program => "program",
            WokenBy::Outside => "outside",
            WokenBy::Interrupt => "interrupt",
        }
    }
}

impl fmt::Display for WokenBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a chain of waits ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootKind {
    /// The root thread was running on a CPU; its stack is where that stretch of running ended
    /// (where it woke the next thread of the chain, or where it next blocked).
    Cpu,
    /// The root thread was runnable but waiting for a CPU (preempted, or woken and queued).
    CpuSaturation,
    /// The root thread was asleep in something no thread of the program ended (a timer, a device,
    /// the network, another process): its call, stacks and [`Root::woken_by`] say what.
    Blocked,
    /// The chain came back to a thread already in it: threads waiting on each other.
    Cycle,
    /// The chain was longer than the engine follows ([`BottleneckAnalysis::max_depth`]).
    DepthLimit,
    /// The root thread's timeline is not known there: before its creation or the kept history,
    /// or where intervals were lost.
    Unknown,
}

impl RootKind {
    /// Its name in reports (`cpu`, `cpu-saturation`, `blocked`, `cycle`, `depth-limit`,
    /// `unknown`).
    pub fn name(self) -> &'static str {
        match self {
            RootKind::Cpu => "cpu",
            RootKind::CpuSaturation => "cpu-saturation",
            RootKind::Blocked => "blocked",
            RootKind::Cycle => "cycle",
            RootKind::DepthLimit => "depth-limit",
            RootKind::Unknown => "unknown",
        }
    }
}

/// Which part of a waiting thread's off-CPU interval a [`Blame`] covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitPart {
    /// Asleep, until the wakeup.
    Asleep,
    /// Runnable, waiting for a CPU: after its wakeup, or preempted, or new.
    Runnable,
}

/// The bottleneck analysis of a recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BottleneckAnalysis {
    /// Chains were followed at most this many threads deep.
    pub max_depth: u32,
    /// How far back each thread's timeline was kept to follow waits into, nanoseconds.
    pub history_ns: u64,
    /// Off-CPU intervals analysed.
    pub intervals: u64,
    /// Intervals the stream lost (gaps in the threads' interval numbers): the time around them
    /// is `unknown`.
    pub lost_intervals: u64,
    /// Sleeps on a word (a futex) that began again on the same word at the same site within
    /// [`SPURIOUS_WAKEUP_NS`] of the thread getting a CPU after a wakeup: wakeups that ended no
    /// wait.
    pub spurious_wakeups: u64,
    /// Their sleeps' time before the wakeup, nanoseconds (included in the blame).
    pub spurious_wakeup_ns: u64,
    /// Time blamed without its stacks, calls and locks because the analysis reached its limit
    /// of records (a long recording of many busy threads), nanoseconds; 0 in profiles older
    /// than this field.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stackless_ns: u64,
    /// Where the time of every analysed interval went.
    pub blame: Vec<Blame>,
    /// What `cpu` roots ran while others waited on them, and what held the CPUs `cpu-saturation`
    /// roots waited for, from `cpu` probe samples (empty without that probe).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sampled: Vec<SampledCpu>,
}

/// Whose samples a [`SampledCpu`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SampleRole {
    /// A `cpu` root's, taken while waits were blamed on its running.
    Root,
    /// The holder's of a CPU a `cpu-saturation` root waited for, taken while it waited.
    Holder,
}

/// Samples of a thread on a CPU taken while others' waits ended in its running (a `cpu` root)
/// or waited for the CPU it held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampledCpu {
    /// Whose samples.
    pub role: SampleRole,
    /// The sampled thread.
    pub thread: ThreadRef,
    /// For a `cpu` root, where those stretches of running ended ([`Root::user_stack`] of the
    /// `cpu` roots they belong to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_stack: Option<StackId>,
    /// What it ran: the samples' user stack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_stack: Option<StackId>,
    /// The samples, each counted once per wait that covered it: an estimate, in sampling periods,
    /// of the blamed running (or holding) spent at `user_stack`.
    pub weight: u64,
}

/// A sleep that starts again this soon after its thread got a CPU, at the same stack and word, is
/// the same wait: the wakeup before it ended nothing (wPerf's false-wakeup filter).
pub const SPURIOUS_WAKEUP_NS: u64 = 50_000;

/// A thread of the program, or outside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ThreadRef {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
}

/// Where a chain of waits ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Root {
    /// What the root thread was doing.
    pub kind: RootKind,
    /// The root thread.
    pub thread: ThreadRef,
    /// The system call it slept in (`blocked`), when it was in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// Its user stack: for `cpu`, where its running ended; for `cpu-saturation`, where it was
    /// preempted or the sleep it woke from; for `blocked`, where it slept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_stack: Option<StackId>,
    /// Its kernel stack: for `blocked`, where it slept; for `cpu`, where its running ended at
    /// the wakeup that led here (the waker's kernel stack, with the `wakeup` probe: what it did
    /// as it released the waiter, a kernel lock's `up_write`). Profiles written before the
    /// latter have none for `cpu`, and read as such.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_stack: Option<StackId>,
    /// Who ended the root's sleep (`blocked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woken_by: Option<WokenBy>,
    /// The name of the thread outside the program that ended it (`blocked`, woken by `outside`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker_name: Option<String>,
    /// The thread that had the CPU until the root got it back (`cpu-saturation`; tid 0: the CPU
    /// was idle, and the wait was the wakeup's latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<ThreadRef>,
    /// Its name (`cpu-saturation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_name: Option<String>,
}

/// One hop of a chain: a thread, and the user stack it waited at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hop {
    /// The thread.
    pub thread: ThreadRef,
    /// Where it slept, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_stack: Option<StackId>,
}

/// Time of one waiting thread at one wait site that ended in one root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blame {
    /// The waiting thread.
    pub thread: ThreadRef,
    /// Asleep or runnable.
    pub part: WaitPart,
    /// The system call it slept in, when it was in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// The word it slept on (a futex word: the lock), 0 when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub object: u64,
    /// Its user stack where it slept (or, runnable, where it was preempted or the sleep it woke
    /// from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_stack: Option<StackId>,
    /// Its kernel stack where it slept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_stack: Option<StackId>,
    /// Who ended its sleep (asleep part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woken_by: Option<WokenBy>,
    /// The thread of the program whose wakeup ended its sleep (the chain's first hop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker: Option<ThreadRef>,
    /// Where the time ended.
    pub root: Root,
    /// Threads between the waiting one and the root (0: the waiting thread is the root).
    pub depth: u32,
    /// One chain that leads there, from the waiting thread to the root (the first seen).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<Hop>,
    /// Intervals of the waiting thread that contributed.
    pub waits: u64,
    /// Their time that ended in `root`, nanoseconds.
    pub total_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
