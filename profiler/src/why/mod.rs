//! `lockscope why`: the causes of the analysed threads' wait time, best first, from the wait-for
//! analysis a recording with the `waitfor` probe holds (`--probes bottleneck`).
//!
//! Each [`lockscope_probes::waitfor::Blame`] record says where some of a thread's waiting ended:
//! on a CPU, waiting for a CPU, asleep in something outside the program, in a cycle. This module
//! turns them into causes a person can act on:
//!
//! 1. **which threads**: by default the groups of threads that did the work: threads that wait
//!    on each other are one group (idle consumers belong with the busy supplier they wait for),
//!    and the groups whose CPU time is at least a tenth of the busiest group's are analysed
//!    ([`working_threads`]): throughput is the work they do, and a group that only sleeps holds
//!    none back (a dozen background threads parked on their own lock can have the most wait time
//!    and no effect on throughput); `--threads` asks about any threads;
//! 2. **what kind**: a root on a CPU is `cpu`, one waiting for a CPU `cpu-saturation` (or
//!    `wakeup-latency` when the CPU it got was idle until then), one asleep
//!    in something outside the program `sleep` or `io` (by its system call and kernel stack), or
//!    **idle** when the program was waiting for work: a wait the thread itself slept without any
//!    other thread of the program involved (a client, a timer), unless other threads waited on
//!    that very sleep, and every chain that ends in an outside input ([`classify`]);
//! 3. **which cause**: records of one kind, root stack and call are one cause, whatever thread
//!    was the root (waiting for a CPU, a cycle and what the analysis could not follow are one
//!    cause each, wherever the threads were); its share is of the analysed threads' wall time,
//!    and it lists the waits it explains (site, kind, lock word) and one chain that leads there.
//!
//! One [`Why`] value renders as text ([`Why::to_text`]) and JSON (`docs/WHY-JSON.md`, schema
//! version [`WHY_JSON_VERSION`]).

mod text;

use crate::analysis::canonical::thread_group;
use lockscope_probes::waitfor::{
    Blame, RootKind, SampleRole, ThreadRef, WaitFor, WaitPart, WokenBy,
};
use lockscope_probes::{Profile, StackId, TimeClass, WaitKind};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use thiserror::Error;

/// Version of the JSON schema (`docs/WHY-JSON.md`); bumped on incompatible changes.
pub const WHY_JSON_VERSION: u32 = 1;

/// By default, the groups of threads that ran at least this share of the busiest group's CPU
/// time are analysed ([`working_threads`]).
pub const WORKING_SHARE: f64 = 0.1;

/// Frames of a stack shown in the text and in a chain's hops.
const HOP_FRAMES: usize = 4;
/// Stacks listed in a cause's `ran_at` and `ended_at`.
const MAX_STACK_SHARES: usize = 5;

/// Why there is no answer.
#[derive(Debug, Error)]
pub enum WhyError {
    /// The profile was recorded without the `waitfor` probe.
    #[error(
        "this profile has no wait-for analysis: record it with `--probes bottleneck` (or add \
         `waitfor` to its probes)"
    )]
    NoWaitFor,
    /// A DTrace profile without the wait-for analysis: recorded without `waitfor`, imported, or
    /// from macOS, where the DTrace backend cannot record it.
    #[error("this profile has no wait-for analysis: {}", dtrace_hint(.0))]
    NoWaitForDtrace(String),
    /// `--threads` matched none of the profile's threads.
    #[error("no thread matches `{0}` (the profile's threads: {1})")]
    NoThreads(String, String),
    /// `--threads` is not a valid pattern.
    #[error("invalid thread pattern `{0}`: {1}")]
    BadPattern(String, String),
}

/// What a DTrace profile of `os` lacks for `why`, and what to record.
fn dtrace_hint(os: &str) -> String {
    if os == "macos" {
        format!(
            "the DTrace backend does not record one on macOS ({}); record on illumos, FreeBSD or \
             Linux (DTrace for Linux) with `--probes bottleneck`, or with the eBPF backend",
            lockscope_dtrace::catalog::WAIT_FOR_MISSING_MACOS
        )
    } else {
        "record it with `--probes bottleneck` (the DTrace backend streams who woke each sleeping \
         thread on illumos, FreeBSD and Linux), or add `waitfor` to its probes"
            .to_string()
    }
}

/// What to explain and how.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WhyOptions {
    /// Thread names to analyse, comma-separated globs (`*`, `?`) or thread ids; `None`: the
    /// groups that did the work ([`working_threads`]). Default: `None`.
    pub threads: Option<String>,
    /// Only waits whose site (the waiting thread's user stack) has a frame containing this.
    /// Default: `None`.
    pub site: Option<String>,
    /// Causes shown, best first; `0` shows all. Default: 5.
    pub top: usize,
    /// Write JSON instead of text. Default: `false`.
    pub json: bool,
}

impl Default for WhyOptions {
    fn default() -> Self {
        WhyOptions {
            threads: None,
            site: None,
            top: 5,
            json: false,
        }
    }
}

/// The answer: the causes of the analysed threads' waits.
#[derive(Debug, Serialize)]
pub struct Why {
    schema: &'static str,
    version: u32,
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
    /// How they were chosen: `working` (the default) or `asked` (`--threads`).
    pub selection: &'static str,
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

/// What kind of cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CauseKind {
    /// A thread on a CPU: its work (in a critical section, or what a waiter waits for).
    Cpu,
    /// Threads waiting for a CPU: the CPUs were saturated.
    CpuSaturation,
    /// Threads runnable (woken, or preempted) while the CPU they then ran on was idle: the time
    /// the kernel (or a hypervisor waking a halted virtual CPU) took to run them, not a lack of
    /// CPUs.
    WakeupLatency,
    /// A thread asleep on purpose (nanosleep, a timed wait) that others waited on.
    Sleep,
    /// A thread in I/O (disk, fsync) that others, or itself, waited on.
    Io,
    /// Threads waiting on each other in a ring.
    Cycle,
    /// A chain longer than the analysis follows.
    DepthLimit,
    /// Where the analysis had no data (lost intervals, before the history, no wakeup seen).
    Unknown,
    /// Waiting for work from outside the program (a client, a timer nobody waited on).
    Idle,
}

impl CauseKind {
    /// Its name in the text and JSON.
    pub fn name(self) -> &'static str {
        match self {
            CauseKind::Cpu => "cpu",
            CauseKind::CpuSaturation => "cpu-saturation",
            CauseKind::WakeupLatency => "wakeup-latency",
            CauseKind::Sleep => "sleep",
            CauseKind::Io => "io",
            CauseKind::Cycle => "cycle",
            CauseKind::DepthLimit => "depth-limit",
            CauseKind::Unknown => "unknown",
            CauseKind::Idle => "idle",
        }
    }
}

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
    key: CauseKey,
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
    /// The analysed threads' wall time neither on a CPU nor in an analysed wait (sleeps still
    /// going on when the recording ended).
    pub unfinished_ns: u64,
    /// How deep chains were followed, and how far back.
    pub max_depth: u32,
    /// Nanoseconds of each thread's past kept.
    pub history_ns: u64,
}

/// What one cause is: everything its records share.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
struct CauseKey {
    kind: Option<CauseKind>,
    stack: Vec<String>,
    call: Option<String>,
}

impl Why {
    /// Explains `profile` as `options` ask.
    pub fn build(profile: &Profile, options: &WhyOptions) -> Result<Why, WhyError> {
        let waitfor = profile.waitfor.as_ref().ok_or_else(|| {
            if profile.metadata.backend == "dtrace" {
                WhyError::NoWaitForDtrace(profile.metadata.os.clone())
            } else {
                WhyError::NoWaitFor
            }
        })?;
        let names = ThreadNames::of(profile, waitfor);
        let selection = Selection::choose(profile, waitfor, &names, options)?;
        let waited_on = waited_on_sleeps(waitfor);
        let sampled = Sampled::of(profile, waitfor);
        let mut causes: BTreeMap<CauseKey, Vec<&Blame>> = BTreeMap::new();
        for b in &waitfor.blame {
            if !selection.threads.contains(&b.thread) {
                continue;
            }
            if let Some(site) = &options.site {
                if !stack_names(profile, b.user_stack)
                    .iter()
                    .any(|f| f.contains(site.as_str()))
                {
                    continue;
                }
            }
            let kind = classify(profile, b, &waited_on);
            // Where a thread ran, slept or did I/O is the cause; waiting for a CPU, in a cycle
            // or where the analysis stopped is one cause each, wherever the threads were.
            let by_stack = matches!(
                kind,
                CauseKind::Cpu | CauseKind::Sleep | CauseKind::Io | CauseKind::Idle
            );
            // Running is known by what it ran where the cpu probe sampled it, else by where it
            // ended (where the root woke the next thread of the chain, or blocked).
            let stack = match kind {
                CauseKind::Cpu => sampled
                    .dominant(b.root.thread, b.root.user_stack)
                    .unwrap_or_else(|| place_names(profile, b.root.user_stack)),
                _ if by_stack => place_names(profile, b.root.user_stack),
                _ => Vec::new(),
            };
            let key = CauseKey {
                kind: Some(kind),
                stack,
                call: b.root.call.clone().filter(|_| by_stack),
            };
            causes.entry(key).or_default().push(b);
        }
        let wall_ns = selection.wall_ns;
        let mut all: Vec<Cause> = causes
            .into_iter()
            .map(|(key, records)| cause(profile, &names, &sampled, key, &records, wall_ns))
            .collect();
        all.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.key.cmp(&b.key)));
        let waits_ns: u64 = all.iter().map(|c| c.total_ns).sum();
        let unexplained_ns = all
            .iter()
            .filter(|c| matches!(c.kind, CauseKind::Unknown | CauseKind::DepthLimit))
            .map(|c| c.total_ns)
            .sum();
        let (idle, mut causes): (Vec<Cause>, Vec<Cause>) =
            all.into_iter().partition(|c| c.kind == CauseKind::Idle);
        let causes_total = causes.len();
        if options.top > 0 {
            causes.truncate(options.top);
        }
        for (i, c) in causes.iter_mut().enumerate() {
            c.rank = i + 1;
        }
        let mut idle = idle;
        for (i, c) in idle.iter_mut().enumerate() {
            c.rank = i + 1;
        }
        if options.top > 0 {
            idle.truncate(options.top);
        }
        let md = &profile.metadata;
        Ok(Why {
            schema: "lockscope-why",
            version: WHY_JSON_VERSION,
            header: Header {
                command: md.target.command.clone(),
                pid: md.target.pid,
                duration_ns: md.duration_ns,
                cpu_count: md.cpu_count,
                kernel_release: md.kernel_release.clone(),
                threads_recorded: profile.thread_times.len(),
            },
            coverage: Coverage {
                intervals: waitfor.intervals,
                lost_intervals: waitfor.lost_intervals,
                spurious_wakeups: waitfor.spurious_wakeups,
                stackless_ns: waitfor.stackless_ns,
                unexplained_ns,
                unfinished_ns: wall_ns
                    .saturating_sub(selection.on_cpu_ns)
                    .saturating_sub(waits_ns),
                max_depth: waitfor.max_depth,
                history_ns: waitfor.history_ns,
            },
            analysed: Analysed {
                selection: if options.threads.is_some() {
                    "asked"
                } else {
                    "working"
                },
                pattern: options.threads.clone(),
                site: options.site.clone(),
                groups: selection.groups,
                threads: selection.threads.len(),
                wall_ns,
                on_cpu_ns: selection.on_cpu_ns,
                waits_ns,
                left_out: selection.left_out,
            },
            causes,
            causes_total,
            idle,
        })
    }

    /// The text report.
    pub fn to_text(&self) -> String {
        text::render(self)
    }
}

/// Thread names by thread, from the profile's threads and the recording's outside names.
struct ThreadNames {
    names: HashMap<u32, String>,
}

impl ThreadNames {
    fn of(profile: &Profile, waitfor: &WaitFor) -> Self {
        let mut names: HashMap<u32, String> = profile
            .threads
            .iter()
            .map(|t| (t.tid, t.name.clone()))
            .collect();
        // Holders outside the program are known only by the name the probe read.
        for b in &waitfor.blame {
            if let (Some(holder), Some(name)) = (b.root.holder, &b.root.holder_name) {
                names.entry(holder.tid).or_insert_with(|| name.clone());
            }
        }
        ThreadNames { names }
    }

    fn name(&self, thread: ThreadRef) -> String {
        if is_idle_cpu(thread) {
            return "[idle CPU]".to_owned();
        }
        self.names
            .get(&thread.tid)
            .cloned()
            .unwrap_or_else(|| format!("tid {}", thread.tid))
    }

    fn group(&self, thread: ThreadRef) -> String {
        thread_group(&self.name(thread))
    }
}

/// True for the idle task (tid 0), which the engine names as the holder of a CPU nobody held.
fn is_idle_cpu(thread: ThreadRef) -> bool {
    thread.tid == 0
}

/// The analysed threads.
struct Selection {
    threads: BTreeSet<ThreadRef>,
    wall_ns: u64,
    on_cpu_ns: u64,
    groups: Vec<GroupRow>,
    left_out: Vec<GroupRow>,
}

impl Selection {
    fn choose(
        profile: &Profile,
        waitfor: &WaitFor,
        names: &ThreadNames,
        options: &WhyOptions,
    ) -> Result<Selection, WhyError> {
        // Every thread of the program: those with times, and any the analysis names.
        let mut times: BTreeMap<ThreadRef, (u64, u64)> = profile
            .thread_times
            .iter()
            .map(|t| {
                (
                    ThreadRef {
                        pid: t.pid,
                        tid: t.tid,
                    },
                    (t.wall_ns, t.ns(TimeClass::OnCpu)),
                )
            })
            .collect();
        for b in &waitfor.blame {
            times.entry(b.thread).or_insert((0, 0));
        }
        let chosen: BTreeSet<ThreadRef> = match &options.threads {
            Some(pattern) => {
                let matcher = ThreadPattern::parse(pattern)?;
                let chosen: BTreeSet<ThreadRef> = times
                    .keys()
                    .copied()
                    .filter(|&t| matcher.matches(t.tid, &names.name(t)))
                    .collect();
                if chosen.is_empty() {
                    let mut all: Vec<String> = times.keys().map(|&t| names.group(t)).collect();
                    all.sort();
                    all.dedup();
                    return Err(WhyError::NoThreads(pattern.clone(), all.join(", ")));
                }
                chosen
            }
            None => working_threads(waitfor, &times),
        };
        let mut groups: BTreeMap<String, (usize, u64)> = BTreeMap::new();
        let mut left_out: BTreeMap<String, (usize, u64)> = BTreeMap::new();
        let (mut wall_ns, mut on_cpu_ns) = (0u64, 0u64);
        for (&t, &(wall, cpu)) in &times {
            let row = if chosen.contains(&t) {
                wall_ns += wall;
                on_cpu_ns += cpu;
                groups.entry(names.group(t)).or_default()
            } else {
                left_out.entry(names.group(t)).or_default()
            };
            row.0 += 1;
            row.1 += cpu;
        }
        let rows = |map: BTreeMap<String, (usize, u64)>| {
            let mut rows: Vec<GroupRow> = map
                .into_iter()
                .map(|(group, (threads, on_cpu_ns))| GroupRow {
                    group,
                    threads,
                    on_cpu_ns,
                })
                .collect();
            rows.sort_by(|a, b| b.on_cpu_ns.cmp(&a.on_cpu_ns).then(a.group.cmp(&b.group)));
            rows
        };
        Ok(Selection {
            threads: chosen,
            wall_ns,
            on_cpu_ns,
            groups: rows(groups),
            left_out: rows(left_out),
        })
    }
}

/// A thread waits on another when at least this share of its wall time ended in that thread's
/// wakeups (a join at the end of a run does not tie a thread to a group).
const LINK_SHARE: f64 = 0.01;

/// The default selection: the threads of the groups that did the work. Threads that wait on each
/// other (one's sleeps ended by the other's wakeups, [`LINK_SHARE`]) form a group, whatever
/// their own CPU time: idle consumers of a busy supplier belong with it. Groups whose threads
/// together ran at least [`WORKING_SHARE`] of the busiest group's CPU time are analysed; a group
/// that barely ran (background threads parked on their own lock) holds no work back.
fn working_threads(
    waitfor: &WaitFor,
    times: &BTreeMap<ThreadRef, (u64, u64)>,
) -> BTreeSet<ThreadRef> {
    let threads: Vec<ThreadRef> = times.keys().copied().collect();
    let index: HashMap<ThreadRef, usize> =
        threads.iter().enumerate().map(|(i, &t)| (t, i)).collect();
    let mut waited: HashMap<(usize, usize), u64> = HashMap::new();
    for b in &waitfor.blame {
        let (Some(&a), Some(&w)) = (index.get(&b.thread), b.waker.and_then(|w| index.get(&w)))
        else {
            continue;
        };
        *waited.entry((a, w)).or_default() += b.total_ns;
    }
    // Union-find over the threads.
    let mut parent: Vec<usize> = (0..threads.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for ((a, w), ns) in waited {
        let wall = times[&threads[a]].0;
        if wall > 0 && ns as f64 >= LINK_SHARE * wall as f64 {
            let (ra, rw) = (root(&mut parent, a), root(&mut parent, w));
            parent[ra] = rw;
        }
    }
    let mut group_cpu: HashMap<usize, u64> = HashMap::new();
    for (i, t) in threads.iter().enumerate() {
        *group_cpu.entry(root(&mut parent, i)).or_default() += times[t].1;
    }
    let busiest = group_cpu.values().copied().max().unwrap_or(0);
    let floor = ((busiest as f64 * WORKING_SHARE) as u64).max(1);
    (0..threads.len())
        .filter(|&i| busiest == 0 || group_cpu[&root(&mut parent, i)] >= floor)
        .map(|i| threads[i])
        .collect()
}

/// `--threads`: comma-separated name globs or thread ids.
struct ThreadPattern {
    names: Vec<regex::Regex>,
    tids: Vec<u32>,
}

impl ThreadPattern {
    fn parse(pattern: &str) -> Result<ThreadPattern, WhyError> {
        let mut names = Vec::new();
        let mut tids = Vec::new();
        for part in pattern.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if let Ok(tid) = part.parse::<u32>() {
                tids.push(tid);
                continue;
            }
            let mut re = String::from("^");
            for c in part.chars() {
                match c {
                    '*' => re.push_str(".*"),
                    '?' => re.push('.'),
                    c => re.push_str(&regex::escape(&c.to_string())),
                }
            }
            re.push('$');
            names.push(
                regex::Regex::new(&re)
                    .map_err(|e| WhyError::BadPattern(pattern.to_owned(), e.to_string()))?,
            );
        }
        if names.is_empty() && tids.is_empty() {
            return Err(WhyError::BadPattern(
                pattern.to_owned(),
                "give thread names (globs with * and ?) or thread ids, comma-separated".into(),
            ));
        }
        Ok(ThreadPattern { names, tids })
    }

    fn matches(&self, tid: u32, name: &str) -> bool {
        self.tids.contains(&tid) || self.names.iter().any(|re| re.is_match(name))
    }
}

/// The sleeps other threads waited on (the roots of `blocked` chains of depth 1 and more), by
/// (thread, user stack): a thread's own sleep there is no idleness but part of the cause.
fn waited_on_sleeps(waitfor: &WaitFor) -> BTreeSet<(ThreadRef, Option<StackId>)> {
    waitfor
        .blame
        .iter()
        .filter(|b| b.root.kind == RootKind::Blocked && b.depth > 0)
        .map(|b| (b.root.thread, b.root.user_stack))
        .collect()
}

/// System calls whose sleeps are I/O the program waits on (not input it waits for).
const IO_CALLS: &[&str] = &[
    "fsync",
    "fdatasync",
    "sync_file_range",
    "sync",
    "syncfs",
    "pread64",
    "pwrite64",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "io_getevents",
    "io_pgetevents",
    "openat",
    "open",
    "fallocate",
    "ftruncate",
    "msync",
];

/// System calls that sleep on purpose.
const SLEEP_CALLS: &[&str] = &["nanosleep", "clock_nanosleep", "pause"];

/// Kernel functions under which a sleep waits for a device or a file system.
fn is_io_frame(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "io_schedule",
        "folio_wait",
        "wait_on_page",
        "__lock_page",
        "blk_",
        "jbd2_",
        "ext4_",
        "xfs_",
        "btrfs_",
        "nfs_",
        "submit_bio",
        "bit_wait_io",
        "wait_on_buffer",
        "__wait_on_buffer",
        "filemap_fault",
        "do_read_cache",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// What kind of cause a record's root is. A sleep no thread of the program ended is `io` when
/// its call or kernel stack says a device; `sleep` when it slept on purpose (or a timed futex
/// wait timed out) and someone waited on it; otherwise the program waited for outside input:
/// `idle`. A thread's own such sleep (depth 0) is idle unless others waited on that sleep.
fn classify(
    profile: &Profile,
    b: &Blame,
    waited_on: &BTreeSet<(ThreadRef, Option<StackId>)>,
) -> CauseKind {
    match b.root.kind {
        RootKind::Cpu => CauseKind::Cpu,
        // The task that gave the CPU back was the idle task: no thread held the CPU meanwhile.
        RootKind::CpuSaturation if b.root.holder.is_some_and(is_idle_cpu) => {
            CauseKind::WakeupLatency
        }
        RootKind::CpuSaturation => CauseKind::CpuSaturation,
        RootKind::Cycle => CauseKind::Cycle,
        RootKind::DepthLimit => CauseKind::DepthLimit,
        RootKind::Unknown => CauseKind::Unknown,
        RootKind::Blocked => {
            let Some(woken_by) = b.root.woken_by else {
                return CauseKind::Unknown;
            };
            let call = b.root.call.as_deref().unwrap_or("");
            let io = IO_CALLS.contains(&call)
                || stack_names(profile, b.root.kernel_stack)
                    .iter()
                    .any(|f| is_io_frame(f));
            if io {
                return CauseKind::Io;
            }
            let on_purpose = SLEEP_CALLS.contains(&call)
                || (call.starts_with("futex") && woken_by == WokenBy::Interrupt);
            let waited = b.depth > 0 || waited_on.contains(&(b.root.thread, b.root.user_stack));
            if on_purpose && waited {
                CauseKind::Sleep
            } else {
                CauseKind::Idle
            }
        }
    }
}

/// A stack's function names, leaf first (inlined functions expanded, innermost first).
fn stack_names(profile: &Profile, id: Option<StackId>) -> Vec<String> {
    profile
        .stack(id)
        .map(|s| s.frames.iter().flat_map(frame_names).collect())
        .unwrap_or_default()
}

/// A frame's function names, innermost (inlined) first.
fn frame_names(frame: &lockscope_probes::Frame) -> Vec<String> {
    let mut names = frame.names_outermost_first();
    names.reverse();
    names
}

/// A stack as a place where time went, leaf first: [`stack_names`], except that frames no symbol
/// names (a stripped library's inner functions: `libz.so.1.2.13+0x4a08`) are their module in
/// brackets, one for a run of them (`[libz.so.1.2.13]`), as stackcollapse-perf folds them. Two
/// samples a few instructions apart in an unnamed function are then one place, and so one cause,
/// instead of one cause per instruction.
fn place_names(profile: &Profile, id: Option<StackId>) -> Vec<String> {
    let Some(stack) = profile.stack(id) else {
        return Vec::new();
    };
    let mut names: Vec<String> = Vec::new();
    for frame in &stack.frames {
        if frame.function.is_some() {
            names.extend(frame_names(frame));
            continue;
        }
        let module = format!("[{}]", frame.module.as_deref().unwrap_or("unknown"));
        if names.last() != Some(&module) {
            names.push(module);
        }
    }
    names
}

/// The frames of a waiting site worth showing: from the outermost synchronization entry point
/// (or the leaf) up, a few.
fn site_frames(names: &[String]) -> Vec<String> {
    let entry = names
        .iter()
        .rposition(|n| crate::analysis::canonical::sync_entry(n).is_some())
        .unwrap_or(0);
    names.iter().skip(entry).take(HOP_FRAMES).cloned().collect()
}

/// Sums `records` of one cause into a [`Cause`].
fn cause(
    profile: &Profile,
    names: &ThreadNames,
    sampled: &Sampled,
    key: CauseKey,
    records: &[&Blame],
    wall_ns: u64,
) -> Cause {
    let total_ns: u64 = records.iter().map(|b| b.total_ns).sum();
    let waits = records.iter().map(|b| b.waits).sum();
    let mut threads: BTreeMap<String, u64> = BTreeMap::new();
    let mut holders: BTreeMap<String, u64> = BTreeMap::new();
    let mut ended_by: BTreeMap<String, u64> = BTreeMap::new();
    type SiteKey = (Vec<String>, WaitKind, Option<String>, u64, WaitPart);
    let mut sites: BTreeMap<SiteKey, (BTreeSet<String>, u64)> = BTreeMap::new();
    for b in records {
        *threads.entry(names.group(b.root.thread)).or_default() += b.total_ns;
        if let Some(holder) = b.root.holder {
            *holders.entry(names.group(holder)).or_default() += b.total_ns;
        }
        if b.root.kind == RootKind::Blocked {
            let by = match (b.root.woken_by, &b.root.waker_name) {
                (Some(WokenBy::Outside), Some(name)) => name.clone(),
                (Some(by), _) => format!("[{by}]"),
                (None, _) => "[no wakeup seen]".to_owned(),
            };
            *ended_by.entry(by).or_default() += b.total_ns;
        }
        let stack = stack_names(profile, b.user_stack);
        let kind = if b.call.as_deref().is_some_and(|c| c.starts_with("futex")) {
            WaitKind::classify_user_wait(stack.iter().map(String::as_str), WaitKind::Wait)
        } else {
            WaitKind::OffCpu
        };
        let site = sites
            .entry((site_frames(&stack), kind, b.call.clone(), b.object, b.part))
            .or_default();
        site.0.insert(names.group(b.thread));
        site.1 += b.total_ns;
    }
    let heaviest = records
        .iter()
        .max_by_key(|b| b.total_ns)
        .map(|b| chain(profile, names, b))
        .unwrap_or_default();
    // What the roots ran (samples), and where those stretches ended.
    let mut ran_at: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    let mut ended_at: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    if key.kind == Some(CauseKind::CpuSaturation) {
        let holders: BTreeSet<ThreadRef> = records.iter().filter_map(|b| b.root.holder).collect();
        for holder in holders {
            for (stack, weight) in sampled.of_holder(holder) {
                *ran_at.entry(stack.clone()).or_default() += weight;
            }
        }
    }
    if key.kind == Some(CauseKind::Cpu) {
        let mut seen = BTreeSet::new();
        for b in records {
            *ended_at
                .entry(place_names(profile, b.root.user_stack))
                .or_default() += b.total_ns;
            if seen.insert((b.root.thread, b.root.user_stack)) {
                for (stack, weight) in sampled.of_root(b.root.thread, b.root.user_stack) {
                    *ran_at.entry(stack.clone()).or_default() += weight;
                }
            }
        }
    }
    let stack_shares = |map: BTreeMap<Vec<String>, u64>| {
        let whole: u64 = map.values().sum();
        let mut rows: Vec<StackShare> = map
            .into_iter()
            .map(|(stack, weight)| StackShare {
                share: crate::render::units::share(weight, whole),
                weight,
                stack,
            })
            .collect();
        rows.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.stack.cmp(&b.stack)));
        rows.truncate(MAX_STACK_SHARES);
        rows
    };
    let mut sites: Vec<Site> = sites
        .into_iter()
        .map(
            |((stack, kind, call, object, part), (threads, total_ns))| Site {
                stack,
                kind,
                call,
                object: (object != 0).then(|| format!("{object:#x}")),
                part,
                threads: threads.into_iter().collect(),
                total_ns,
            },
        )
        .collect();
    sites.sort_by_key(|s| std::cmp::Reverse(s.total_ns));
    // Waiting for a CPU is known by what held the CPUs, where sampled; a cause grouped by kind
    // alone otherwise shows its heaviest root stack.
    let held_at = (key.kind == Some(CauseKind::CpuSaturation))
        .then(|| {
            ran_at
                .iter()
                .filter(|(stack, _)| !stack.is_empty())
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .map(|(stack, _)| stack.clone())
        })
        .flatten();
    let stack = if let Some(held_at) = held_at {
        held_at
    } else if key.stack.is_empty() {
        records
            .iter()
            .max_by_key(|b| b.total_ns)
            .map(|b| place_names(profile, b.root.user_stack))
            .unwrap_or_default()
    } else {
        key.stack.clone()
    };
    Cause {
        rank: 0,
        kind: key.kind.unwrap_or(CauseKind::Unknown),
        stack,
        call: key.call.clone(),
        share: if wall_ns == 0 {
            0.0
        } else {
            total_ns as f64 / wall_ns as f64
        },
        total_ns,
        waits,
        threads: named_times(threads),
        sites,
        holders: named_times(holders),
        ended_by: named_times(ended_by),
        ran_at: stack_shares(ran_at),
        ended_at: if key.kind == Some(CauseKind::Cpu) {
            stack_shares(ended_at)
        } else {
            Vec::new()
        },
        chain: heaviest,
        key,
    }
}

/// A `cpu` root: its thread and the stack where its stretches of running ended.
type CpuRoot = (ThreadRef, Option<StackId>);

/// The weighted samples of `cpu` roots and of CPU holders: what they ran, by function names.
struct Sampled {
    by_root: HashMap<CpuRoot, Vec<(Vec<String>, u64)>>,
    by_holder: HashMap<ThreadRef, Vec<(Vec<String>, u64)>>,
}

impl Sampled {
    fn of(profile: &Profile, waitfor: &WaitFor) -> Self {
        let mut by_root: HashMap<CpuRoot, BTreeMap<Vec<String>, u64>> = HashMap::new();
        let mut by_holder: HashMap<ThreadRef, BTreeMap<Vec<String>, u64>> = HashMap::new();
        for s in &waitfor.sampled {
            let stacks = match s.role {
                SampleRole::Root => by_root.entry((s.thread, s.end_stack)).or_default(),
                SampleRole::Holder => by_holder.entry(s.thread).or_default(),
            };
            *stacks
                .entry(place_names(profile, s.user_stack))
                .or_default() += s.weight;
        }
        fn lists<K: std::hash::Hash + Eq>(
            map: HashMap<K, BTreeMap<Vec<String>, u64>>,
        ) -> HashMap<K, Vec<(Vec<String>, u64)>> {
            map.into_iter()
                .map(|(k, v)| (k, v.into_iter().collect()))
                .collect()
        }
        Sampled {
            by_root: lists(by_root),
            by_holder: lists(by_holder),
        }
    }

    fn of_holder(&self, thread: ThreadRef) -> &[(Vec<String>, u64)] {
        self.by_holder.get(&thread).map_or(&[], Vec::as_slice)
    }

    fn of_root(&self, thread: ThreadRef, end_stack: Option<StackId>) -> &[(Vec<String>, u64)] {
        self.by_root
            .get(&(thread, end_stack))
            .map_or(&[], Vec::as_slice)
    }

    /// The stack the root's samples were at most, in the stretches that ended at `end_stack`.
    fn dominant(&self, thread: ThreadRef, end_stack: Option<StackId>) -> Option<Vec<String>> {
        self.of_root(thread, end_stack)
            .iter()
            .filter(|(stack, _)| !stack.is_empty())
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(stack, _)| stack.clone())
    }
}

fn named_times(map: BTreeMap<String, u64>) -> Vec<NamedTime> {
    let mut rows: Vec<NamedTime> = map
        .into_iter()
        .map(|(name, total_ns)| NamedTime { name, total_ns })
        .collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    rows
}

/// A record's chain as names and short stacks; the root's hop shows the root's stack.
fn chain(profile: &Profile, names: &ThreadNames, b: &Blame) -> Vec<HopRow> {
    let mut hops: Vec<HopRow> = b
        .chain
        .iter()
        .map(|hop| HopRow {
            thread: names.name(hop.thread),
            stack: site_frames(&stack_names(profile, hop.user_stack)),
        })
        .collect();
    let root = HopRow {
        thread: names.name(b.root.thread),
        stack: stack_names(profile, b.root.user_stack)
            .into_iter()
            .take(HOP_FRAMES)
            .collect(),
    };
    match hops.last_mut() {
        Some(last) if b.depth == 0 || last.thread == root.thread => {
            if last.stack.is_empty() {
                last.stack = root.stack;
            }
        }
        _ => hops.push(root),
    }
    hops
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--threads` takes name globs and thread ids, comma-separated; an empty one is refused.
    #[test]
    fn thread_patterns() {
        let p = ThreadPattern::parse("worker-*, 17 ,io?").expect("pattern");
        assert!(p.matches(1, "worker-12"));
        assert!(p.matches(17, "main"));
        assert!(p.matches(2, "io1"));
        assert!(!p.matches(2, "io12"));
        assert!(!p.matches(2, "aworker-1"));
        assert!(ThreadPattern::parse(" , ").is_err());
    }

    /// A stack as a place: named frames by function (inlined ones too), a run of unnamed frames
    /// of one module as that module once, so that samples in one stripped function are one place.
    #[test]
    fn places_fold_unnamed_frames_by_module() {
        let frame = |function: Option<&str>, module: &str, offset: u64| lockscope_probes::Frame {
            function: function.map(str::to_owned),
            module: Some(module.to_owned()),
            module_offset: Some(offset),
            ..lockscope_probes::Frame::unsymbolized(offset)
        };
        let stack = |leaf: u64| lockscope_probes::Stack {
            space: lockscope_probes::AddressSpace::User,
            frames: vec![
                frame(None, "libz.so.1", leaf),
                frame(None, "libz.so.1", 0x627c),
                frame(Some("deflate"), "libz.so.1", 0x6300),
                frame(None, "pigz", 0x5f05),
                frame(None, "pigz", 0x734e),
                frame(Some("start_thread"), "libc.so.6", 0x8000),
            ],
            truncated: false,
        };
        let profile = Profile {
            stacks: vec![stack(0x4a08), stack(0x4a0e)],
            ..Profile::default()
        };
        let (a, b) = (0, 1);
        let place = place_names(&profile, Some(a));
        assert_eq!(
            place,
            ["[libz.so.1]", "deflate", "[pigz]", "start_thread"].map(String::from)
        );
        assert_eq!(place_names(&profile, Some(b)), place);
        assert_eq!(stack_names(&profile, Some(a))[0], "libz.so.1+0x4a08");
        assert!(place_names(&profile, None).is_empty());
    }

    /// Waiting for a CPU is saturation when a thread held the CPU meanwhile, and the wakeup's
    /// latency when the CPU was idle until the waiting thread got it (the idle task gave it back).
    #[test]
    fn an_idle_cpu_is_wakeup_latency_not_saturation() {
        let thread = ThreadRef { pid: 10, tid: 11 };
        let blame = |holder: u32| Blame {
            thread,
            part: WaitPart::Runnable,
            call: None,
            object: 0,
            user_stack: None,
            kernel_stack: None,
            woken_by: None,
            waker: None,
            root: lockscope_probes::waitfor::Root {
                kind: RootKind::CpuSaturation,
                thread,
                call: None,
                user_stack: None,
                kernel_stack: None,
                woken_by: None,
                waker_name: None,
                holder: Some(ThreadRef {
                    pid: holder,
                    tid: holder,
                }),
                holder_name: None,
            },
            depth: 0,
            chain: Vec::new(),
            waits: 1,
            total_ns: 1_000,
        };
        let profile = Profile::default();
        let none = BTreeSet::new();
        assert_eq!(
            classify(&profile, &blame(0), &none),
            CauseKind::WakeupLatency
        );
        assert_eq!(
            classify(&profile, &blame(12), &none),
            CauseKind::CpuSaturation
        );
    }

    /// A profile without the wait-for analysis says which probes to record.
    #[test]
    fn no_waitfor() {
        let err = Why::build(&Profile::default(), &WhyOptions::default()).expect_err("no data");
        assert!(err.to_string().contains("--probes bottleneck"), "{err}");
    }

    /// A DTrace profile without it says what to record, and on macOS what the OS lacks.
    #[test]
    fn no_waitfor_from_dtrace() {
        let mut profile = Profile::default();
        profile.metadata.backend = "dtrace".into();
        profile.metadata.os = "linux".into();
        let err = Why::build(&profile, &WhyOptions::default()).expect_err("no data");
        let text = err.to_string();
        assert!(
            text.contains("record it with `--probes bottleneck`"),
            "{text}"
        );
        profile.metadata.os = "macos".into();
        let text = Why::build(&profile, &WhyOptions::default())
            .expect_err("no data")
            .to_string();
        assert!(
            text.contains("does not record one on macOS")
                && text.contains("sched:::wakeup passes the waker's process"),
            "{text}"
        );
    }
}
