//! The profile data model: what one recording saw, independent of OS and backend.
//!
//! A [`Profile`] is metadata, the threads seen, interned stacks and aggregated wait records. Stacks
//! are stored once and referenced by [`StackId`] (their index in [`Profile::stacks`]); frames are
//! symbolized when the profile is recorded, while the target is alive, so a profile can be read on
//! any machine. `docs/FORMAT.md` documents every field.

use crate::bottleneck::{BottleneckAnalysis, WokenBy};
use crate::hist::Log2Histogram;
use crate::sched::{ThreadTime, WakeupRecord};
use crate::wait::WaitKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Index of a stack in [`Profile::stacks`].
pub type StackId = u32;

/// One recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Where, when and how the recording was made.
    pub metadata: Metadata,
    /// Every thread that has at least one record, sorted by (pid, tid).
    pub threads: Vec<ThreadInfo>,
    /// Interned stacks; records refer to them by index.
    pub stacks: Vec<Stack>,
    /// Aggregated waits, one per (probe, pid, tid, object, operation, user stack, kernel stack).
    pub waits: Vec<WaitRecord>,
    /// Where each thread's wall time went (the `offcpu` probe), sorted by (pid, tid); empty
    /// without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thread_times: Vec<ThreadTime>,
    /// Who woke whom (the `offcpu` probe); empty without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wakeups: Vec<WakeupRecord>,
    /// The bottleneck analysis (the `waitfor` probe): where the time of every wait ended. Its
    /// key in the file is the probe's name, `waitfor`, as every probe's data is keyed.
    #[serde(default, rename = "waitfor", skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<BottleneckAnalysis>,
    /// The processes recorded, sorted by pid: every process of the target set (the processes
    /// given, their descendants, a cgroup's, or all), whether it waited or not. Empty in profiles
    /// of versions before it, and in imported captures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ProcessInfo>,
}

/// One process of a recording's target set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// Process id.
    pub pid: u32,
    /// Parent process id when known (`None` for the processes without one, such as pid 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    /// Name (`comm` on Linux, at most 15 bytes): the program's, or a kernel thread's.
    pub name: String,
    /// Command line, `argv[0]` first; empty for a kernel thread, or for a process that exited
    /// before it could be read (`name` is then all there is).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Its cgroup (v2) path from the hierarchy's root (`/system.slice/apache2.service`), when
    /// known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// When it started, nanoseconds since the Unix epoch (clock-tick precision for a process
    /// that existed before the recording), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_unix_ns: Option<u64>,
    /// When it exited, nanoseconds since the Unix epoch; `None` while it still ran at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_unix_ns: Option<u64>,
    /// True for a kernel thread (Linux: PF_KTHREAD).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kernel_thread: bool,
}

impl ProcessInfo {
    /// The name a person reads for this process: `argv[0]`'s file name, else its `name`, else
    /// `[pid N]`.
    pub fn display_name(&self) -> String {
        let argv0 = self
            .command
            .first()
            .map(|a| a.rsplit('/').next().unwrap_or(a))
            .filter(|a| !a.is_empty());
        match argv0 {
            Some(argv0) => argv0.to_string(),
            None if !self.name.is_empty() && self.kernel_thread => format!("[{}]", self.name),
            None if !self.name.is_empty() => self.name.clone(),
            None => format!("[pid {}]", self.pid),
        }
    }
}

/// Where, when and how a profile was recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// Version of the lockscope that recorded it.
    pub lockscope_version: String,
    /// Backend that recorded it (`ebpf`, `dtrace`).
    pub backend: String,
    /// Operating system (`linux`, `macos`, `freebsd`, `illumos`).
    pub os: String,
    /// Kernel release (`uname -r`).
    pub kernel_release: String,
    /// Host name.
    pub hostname: String,
    /// Online CPUs.
    pub cpu_count: u32,
    /// C library and its version (`glibc 2.36`), when known.
    pub libc: Option<String>,
    /// What was recorded.
    pub target: RecordedTarget,
    /// Start of the recording, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// Length of the recording in nanoseconds.
    pub duration_ns: u64,
    /// Every probe that was asked for, with what became of it.
    pub probes: Vec<ProbeAttachment>,
    /// Events the probes saw (one per wait), including those whose record was lost.
    pub events: u64,
    /// What could not be recorded.
    pub losses: Losses,
    /// Why the recording ended (`target exited`, `duration elapsed`, `interrupted (SIGINT)`).
    pub end_reason: String,
    /// What the recording could not do as asked, for the reader (`pid 41 has 2 child processes
    /// that were not recorded: ...`); empty when there is nothing to say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// How a profile's user stacks were walked, which bounds how complete they can be. Not stored:
/// it follows from [`Metadata::backend`] (see [`Metadata::user_stack_walk`]), so profiles of
/// every version have it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StackWalk {
    /// Unwind tables (`.eh_frame`, DWARF CFI; the eBPF backend's unwinder): complete through
    /// code built without frame pointers.
    UnwindTables,
    /// Frame pointers (DTrace's `ustack()` on every OS): the walk stops, or goes astray, at
    /// the first function built without them (Debian's libc, Rust's default build), so stacks
    /// through such code end early.
    FramePointers,
}

impl StackWalk {
    /// Short name (`unwind-tables`, `frame-pointers`).
    pub fn name(self) -> &'static str {
        match self {
            StackWalk::UnwindTables => "unwind-tables",
            StackWalk::FramePointers => "frame-pointers",
        }
    }
}

impl Metadata {
    /// How this profile's user stacks were walked: by frame pointers for the `dtrace` backend
    /// (recorded or imported), by unwind tables otherwise.
    pub fn user_stack_walk(&self) -> StackWalk {
        if self.backend == "dtrace" {
            StackWalk::FramePointers
        } else {
            StackWalk::UnwindTables
        }
    }
}

/// What a profile was recorded from, as stored in it: a launched command, running processes
/// (`pid` and `pids`, with `tree` their descendants too), a cgroup's processes, or every process
/// (`all`). The backend fills it in from the [`Target`](crate::Target) it was given and what it
/// found (a launched command's pid, the cgroup's path from its hierarchy's root).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedTarget {
    /// Process id (of the launched command, or the first one attached to); 0 for a cgroup or
    /// all processes.
    pub pid: u32,
    /// Its command line, `argv[0]` first (empty for a cgroup or all processes).
    pub command: Vec<String>,
    /// True when lockscope launched it, false when it attached to a running process.
    pub launched: bool,
    /// Every process given (`-p 12,34`), `pid` first; empty when only `pid` was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pids: Vec<u32>,
    /// The descendants of the processes given were recorded too (`--tree`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tree: bool,
    /// The cgroup (v2) whose processes were recorded, its path from the hierarchy's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// Every process of the machine was recorded (`-a`), lockscope's own left out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
}

impl RecordedTarget {
    /// What was recorded, in words: `` `CMD` (pid N) ``, `pids 12, 34 and their descendants`,
    /// `cgroup /system.slice/x.service`, `all processes`.
    pub fn describe(&self) -> String {
        if self.all {
            return "all processes".to_string();
        }
        if let Some(cgroup) = &self.cgroup {
            return format!("cgroup {cgroup}");
        }
        let tree = if self.tree {
            " and its descendants"
        } else {
            ""
        };
        if self.pids.len() > 1 {
            let pids: Vec<String> = self.pids.iter().map(u32::to_string).collect();
            let tree = if self.tree {
                " and their descendants"
            } else {
                ""
            };
            return format!("pids {}{tree}", pids.join(", "));
        }
        if self.command.is_empty() {
            format!("pid {}{tree}", self.pid)
        } else {
            format!("`{}` (pid {}){tree}", self.command.join(" "), self.pid)
        }
    }
}

/// What became of one probe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeAttachment {
    /// Catalog name of the probe (`futex`).
    pub probe: String,
    /// Kernel hook(s) used or tried (`tp_btf/sys_enter`).
    pub hook: String,
    /// Outcome.
    pub status: AttachStatus,
}

/// Outcome of attaching one probe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum AttachStatus {
    /// Attached as planned.
    Attached,
    /// Attached through another hook than the preferred one.
    FellBack {
        /// Hook used instead of the preferred one.
        hook: String,
        /// Why the preferred hook failed.
        reason: String,
    },
    /// Not attached: its data is missing from the profile.
    Failed {
        /// Why.
        reason: String,
    },
}

/// Counters of what could not be recorded. All zero but `out_of_order` in a complete profile:
/// out-of-order scheduler events lose no wait (their sleeps are recovered), only who woke them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Losses {
    /// Waits whose user stack could not be captured (recorded without it).
    pub user_stack_failures: u64,
    /// Waits whose kernel stack could not be captured (recorded without it).
    pub kernel_stack_failures: u64,
    /// Waits dropped because an aggregation or in-flight map was full.
    pub map_full: u64,
    /// Events dropped for any other reason (buffers overrun, unreadable arguments).
    pub dropped: u64,
    /// Runs of a probe's programs the kernel skipped: it never runs a BPF program while the
    /// same program is running on that CPU, so an event in an interrupt of it (a timer waking
    /// a thread) goes unseen. Each may have lost a wait.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped_runs: u64,
    /// Scheduler events that did not fit a thread's state (a switch-in of a thread already on a
    /// CPU, a switch-out of one asleep): an event was missed before them. The time is kept, in
    /// the state the thread was in, but the wait it ended may be missing from the records.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub out_of_order: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Losses {
    /// Waits that are missing from the profile altogether (saturating at `u64::MAX`).
    pub fn lost_events(&self) -> u64 {
        self.map_full
            .saturating_add(self.dropped)
            .saturating_add(self.skipped_runs)
    }

    /// True when no wait, stack or probe run was lost (out-of-order scheduler events lose none:
    /// their sleeps are recovered, without their waker).
    pub fn is_zero(&self) -> bool {
        Losses {
            out_of_order: 0,
            ..*self
        } == Losses::default()
    }
}

/// A thread that appears in the profile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// Process id.
    pub pid: u32,
    /// Thread id (equal to `pid` for the main thread).
    pub tid: u32,
    /// Thread name (`comm`, at most 15 bytes on Linux) when it was last seen waiting.
    pub name: String,
}

/// Which address space a stack belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AddressSpace {
    /// User space of the target.
    User,
    /// The kernel.
    Kernel,
}

/// One interned call stack, leaf (innermost frame) first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stack {
    /// User or kernel stack.
    pub space: AddressSpace,
    /// Frames, leaf first.
    pub frames: Vec<Frame>,
    /// True when the unwinder stopped before the outermost frame (the stack is a suffix).
    pub truncated: bool,
}

#[cfg(test)]
impl Stack {
    /// A complete stack of named frames, leaf first, for the crate's tests.
    pub(crate) fn named(space: AddressSpace, functions: &[&str]) -> Stack {
        Stack {
            space,
            frames: functions
                .iter()
                .map(|f| Frame {
                    function: Some((*f).into()),
                    ..Frame::unsymbolized(0x1000)
                })
                .collect(),
            truncated: false,
        }
    }
}

/// One frame of a stack, symbolized at record time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// Address as captured (an instruction pointer, or a return address for non-leaf frames).
    pub address: u64,
    /// Function name, demangled, when symbolization found one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Offset of `address` from the start of `function`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_offset: Option<u64>,
    /// File name of the module (`libc.so.6`, `mariadbd`, `[kernel]`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// Offset of `address` in the module's file, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_offset: Option<u64>,
    /// Source file, when debug info has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Source line, when debug info has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Functions inlined at this address, outermost first (the last one holds `address`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inlined: Vec<InlinedFrame>,
    /// Text a runtime attached to this frame: the line a DTrace ustack helper prints under it
    /// (`[ foo.js:42 ]`, without the brackets). Never part of the frame's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation: Option<String>,
}

/// A function inlined into a [`Frame`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlinedFrame {
    /// Function name, demangled.
    pub function: String,
    /// Source file of the call site, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Source line of the call site, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl Frame {
    /// A frame known only by its address.
    pub fn unsymbolized(address: u64) -> Self {
        Frame {
            address,
            function: None,
            function_offset: None,
            module: None,
            module_offset: None,
            file: None,
            line: None,
            inlined: Vec::new(),
            annotation: None,
        }
    }

    /// The name a person reads: the function, else `module+0xoffset`, else `0xaddress`.
    pub fn display_name(&self) -> String {
        match (&self.function, &self.module, self.module_offset) {
            (Some(function), _, _) => function.clone(),
            (None, Some(module), Some(offset)) => format!("{module}+{offset:#x}"),
            (None, Some(module), None) => format!("{module}@{:#x}", self.address),
            (None, None, _) => format!("{:#x}", self.address),
        }
    }

    /// Names of this frame's functions from outermost to innermost: the frame's own function,
    /// then the functions inlined into it. Flamegraphs draw these as separate frames.
    pub fn names_outermost_first(&self) -> Vec<String> {
        let mut names = vec![self.display_name()];
        names.extend(self.inlined.iter().map(|i| i.function.clone()));
        names
    }
}

/// Aggregated statistics of a group of waits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitStats {
    /// Number of waits.
    pub count: u64,
    /// Sum of their durations, nanoseconds.
    pub total_ns: u64,
    /// Longest one, nanoseconds.
    pub max_ns: u64,
    /// Log2 histogram of the durations, nanoseconds.
    pub histogram: Log2Histogram,
}

impl WaitStats {
    /// Adds another group's statistics to this one.
    pub fn merge(&mut self, other: &WaitStats) {
        self.count += other.count;
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.histogram.merge(&other.histogram);
    }

    /// Mean wait in nanoseconds (0 for no waits).
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

/// Waits aggregated per (probe, pid, tid, object, operation, user stack, kernel stack).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitRecord {
    /// Catalog name of the probe that saw them (`futex`).
    pub probe: String,
    /// Wait category.
    pub kind: WaitKind,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Address of the waited-on object (futex word, lock), 0 when not applicable.
    pub object: u64,
    /// Backend-specific operation, decoded (`FUTEX_WAIT_PRIVATE`, `psynch_mutexwait`).
    pub operation: String,
    /// User stack, when captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_stack: Option<StackId>,
    /// Kernel stack, when captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_stack: Option<StackId>,
    /// Who ended these sleeps (`offcpu` records; for a run-queue record, the sleep it woke
    /// from), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woken_by: Option<WokenBy>,
    /// Counts, times and histogram.
    #[serde(flatten)]
    pub stats: WaitStats,
}

impl Profile {
    /// The stack with this id, if it exists.
    pub fn stack(&self, id: Option<StackId>) -> Option<&Stack> {
        id.and_then(|id| self.stacks.get(id as usize))
    }

    /// The name of a thread, if it was seen.
    pub fn thread_name(&self, pid: u32, tid: u32) -> Option<&str> {
        self.threads
            .iter()
            .find(|t| t.pid == pid && t.tid == tid)
            .map(|t| t.name.as_str())
    }

    /// Names of the probes that appear in the records, sorted.
    pub fn recorded_probes(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.waits.iter().map(|w| w.probe.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Checks internal consistency: every stack reference resolves. A profile read from a file
    /// passes this before anyone uses it, so readers may index stacks without checking.
    pub fn validate(&self) -> Result<(), InconsistentProfile> {
        for (i, w) in self.wakeups.iter().enumerate() {
            let ids = [
                w.user_stack,
                w.kernel_stack,
                w.waker_user_stack,
                w.waker_kernel_stack,
            ];
            for id in ids.into_iter().flatten() {
                if id as usize >= self.stacks.len() {
                    return Err(InconsistentProfile::MissingStack {
                        record: "wakeup",
                        index: i,
                        stack: id,
                        stacks: self.stacks.len(),
                    });
                }
            }
        }
        for (i, w) in self.waits.iter().enumerate() {
            for id in [w.user_stack, w.kernel_stack].into_iter().flatten() {
                if id as usize >= self.stacks.len() {
                    return Err(InconsistentProfile::MissingStack {
                        record: "wait",
                        index: i,
                        stack: id,
                        stacks: self.stacks.len(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Total statistics per wait kind, each sleep counted once ([`Profile::counted_waits`]).
    pub fn totals_by_kind(&self) -> BTreeMap<WaitKind, WaitStats> {
        let mut totals: BTreeMap<WaitKind, WaitStats> = BTreeMap::new();
        for w in self.counted_waits() {
            totals.entry(w.kind).or_default().merge(&w.stats);
        }
        totals
    }
}

/// Why a [`Profile`] does not hold together ([`Profile::validate`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InconsistentProfile {
    /// A record names a stack the profile does not have.
    #[error(
        "{record} record {index} refers to stack {stack}, but the profile has {stacks} stacks"
    )]
    MissingStack {
        /// `wait` or `wakeup`.
        record: &'static str,
        /// Its index among its kind's records.
        index: usize,
        /// The stack it names.
        stack: StackId,
        /// How many stacks the profile has.
        stacks: usize,
    },
}

/// Interns stacks while a backend builds a [`Profile`]: equal stacks get the same id.
#[derive(Debug, Default)]
pub struct StackInterner {
    stacks: Vec<Stack>,
    index: std::collections::HashMap<StackKey, StackId>,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct StackKey {
    space: AddressSpace,
    /// Each frame's address and where it is (module and offset): processes that map different
    /// files at the same addresses (two non-PIE programs) have different stacks there.
    frames: Vec<(u64, Option<String>, Option<u64>)>,
    truncated: bool,
}

impl StackInterner {
    /// An empty interner.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns the id of `stack`, adding it if it is new. Stacks are equal when they have the
    /// same address space, addresses in the same modules at the same offsets, and truncation.
    pub fn intern(&mut self, stack: Stack) -> StackId {
        let key = StackKey {
            space: stack.space,
            frames: stack
                .frames
                .iter()
                .map(|f| (f.address, f.module.clone(), f.module_offset))
                .collect(),
            truncated: stack.truncated,
        };
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = self.stacks.len() as StackId;
        self.stacks.push(stack);
        self.index.insert(key, id);
        id
    }

    /// The stacks interned so far, in id order.
    pub fn stacks(&self) -> &[Stack] {
        &self.stacks
    }

    /// The interned stacks, in id order.
    pub fn into_stacks(self) -> Vec<Stack> {
        self.stacks
    }
}
