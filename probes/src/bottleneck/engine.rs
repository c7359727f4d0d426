//! The streaming engine of the bottleneck analysis: off-CPU intervals in, [`RawBlame`] out.
//!
//! A backend pushes each interval as it ends ([`Engine::push`]) and calls [`Engine::advance`]
//! with the current time now and then; the engine analyses the intervals that ended at least
//! [`EngineLimits::lag_ns`] ago (by then every interval of their wakers' past has arrived: each
//! ended before the wakeup it led to), and forgets each thread's intervals older than
//! [`EngineLimits::history_ns`], so memory is bounded by the switch rate, not the recording's
//! length. [`Engine::finish`] analyses the rest and returns the blame, with stacks still in the
//! backend's own handles `S` for it to symbolize.
//!
//! The parts: this file takes the intervals in and keeps each thread's timeline, `walk` blames
//! one interval by following its wakers, and `blames` sums the blame records.

mod blames;
#[cfg(test)]
mod tests;
mod walk;

use super::timeline::{Stored, Timeline};
use super::{RootKind, SampleRole, ThreadRef, WaitPart, WokenBy, SPURIOUS_WAKEUP_NS};
use blames::Blames;
use std::collections::VecDeque;
use std::hash::Hash;
use walk::Walk;

/// The engine's maps are keyed by the engine's own data (tids, stack handles), hashed on every
/// interval: ahash instead of SipHash, still keyed per process (a traced program cannot choose
/// colliding keys it knows).
type HashMap<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;

/// How deep, how far back and how late the engine follows waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineLimits {
    /// Threads followed from a waiting thread to a root. Default: 10 (wPerf's rewrite's cap).
    pub max_depth: u32,
    /// Each thread's past kept to follow waits into, nanoseconds; a wait older than that is
    /// `unknown` where it reaches back further. Default: 10 s.
    pub history_ns: u64,
    /// How long after its end an interval is analysed, nanoseconds: room for intervals of other
    /// CPUs that ended before it to arrive. Default: 50 ms.
    pub lag_ns: u64,
    /// Blame records kept whole. Past it, a new record keeps its threads, part, who ended the
    /// wait and the root's kind, not its stacks, calls, lock word, waker or CPU holder (it
    /// joins the record of the same threads and kinds), so memory is bounded by the threads,
    /// not by the recording's length: in a 10-minute soak of 50 busy MariaDB threads the
    /// records passed 300,000 (about 750 bytes each). Default: 100,000.
    pub max_records: usize,
}

impl Default for EngineLimits {
    fn default() -> Self {
        EngineLimits {
            max_depth: 10,
            history_ns: 10_000_000_000,
            lag_ns: 50_000_000,
            max_records: 100_000,
        }
    }
}

/// What an off-CPU interval was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntervalKind {
    /// Asleep from `start_ns` until woken at `wakeup_ns`, then runnable until `end_ns`.
    Sleep,
    /// Preempted: runnable from `start_ns` to `end_ns`.
    Preempted,
    /// A new thread, runnable from its creation (`start_ns`) to its first run (`end_ns`).
    New,
}

/// One off-CPU interval of a thread of the program, as a backend saw it.
#[derive(Clone, Debug)]
pub struct Interval<S> {
    /// The thread.
    pub thread: ThreadRef,
    /// The thread's interval number, consecutive (a gap says intervals were lost); `None` when
    /// the backend does not number them.
    pub seq: Option<u32>,
    /// Switch-out (or creation, for [`IntervalKind::New`]).
    pub start_ns: u64,
    /// Wakeup (a sleep); equal to `start_ns` otherwise.
    pub wakeup_ns: u64,
    /// Back on a CPU.
    pub end_ns: u64,
    /// What it was.
    pub kind: IntervalKind,
    /// The backend's number of the system call it slept in; negative when none.
    pub call: i32,
    /// The word or object it slept on (a futex word), 0 when none.
    pub object: u64,
    /// Who ended the sleep; `None` when no wakeup was seen.
    pub woken_by: Option<WokenBy>,
    /// The thread of the program that woke it (with [`WokenBy::Program`]).
    pub waker: Option<ThreadRef>,
    /// Its user stack at switch-out (a preempted thread's with the `preempt` probe).
    pub user_stack: Option<S>,
    /// Its kernel stack at switch-out.
    pub kernel_stack: Option<S>,
    /// The waker's user stack at the wakeup.
    pub waker_user_stack: Option<S>,
    /// The waker's kernel stack at the wakeup: what it was doing as it ended the sleep (the
    /// release of a kernel lock, `up_write` from `__vm_munmap`; a futex wake command).
    pub waker_kernel_stack: Option<S>,
    /// The thread that had the CPU until this one got it back (tid 0: the CPU was idle), when
    /// known: for a thread waiting for a CPU, who held it.
    pub holder: Option<ThreadRef>,
}

/// A name the engine interned: its index in the engine's names plus one, so that an
/// `Option<NameId>` takes 4 bytes (two in each interval of the history and each blame key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NameId(std::num::NonZeroU32);

impl NameId {
    /// The id of the name that comes after `count` names.
    fn after(count: usize) -> Self {
        let id = u32::try_from(count.saturating_add(1)).unwrap_or(u32::MAX);
        NameId(std::num::NonZeroU32::new(id).unwrap_or(std::num::NonZeroU32::MAX))
    }

    /// Its index in the names.
    fn index(self) -> usize {
        self.0.get() as usize - 1
    }
}

/// [`super::Root`] in the backend's stack handles and call numbers (fields as there), with the
/// names of threads outside the program as `N`: the engine's interned ids while it sums (cheap
/// to hash and compare), the names themselves in what it returns.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub struct RawRoot<S, N = String> {
    pub kind: RootKind,
    pub thread: ThreadRef,
    /// The backend's number of the call the root slept in (`blocked`), negative when none.
    pub call: i32,
    pub user_stack: Option<S>,
    pub kernel_stack: Option<S>,
    pub woken_by: Option<WokenBy>,
    pub waker_name: Option<N>,
    pub holder: Option<ThreadRef>,
    pub holder_name: Option<N>,
}

impl<S> RawRoot<S, NameId> {
    /// The root with its interned names looked up in `names`.
    fn named(self, names: &[String]) -> RawRoot<S> {
        let name = |id: Option<NameId>| id.and_then(|n| names.get(n.index()).cloned());
        RawRoot {
            kind: self.kind,
            thread: self.thread,
            call: self.call,
            user_stack: self.user_stack,
            kernel_stack: self.kernel_stack,
            woken_by: self.woken_by,
            waker_name: name(self.waker_name),
            holder: self.holder,
            holder_name: name(self.holder_name),
        }
    }
}

/// The waiting thread's side of a blame record: [`super::Blame`]'s fields of that side, in the
/// backend's stack handles and call numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub struct RawWait<S> {
    pub thread: ThreadRef,
    pub part: WaitPart,
    /// The backend's number of the call the thread slept in, negative when none.
    pub call: i32,
    pub object: u64,
    pub user_stack: Option<S>,
    pub kernel_stack: Option<S>,
    pub woken_by: Option<WokenBy>,
    pub waker: Option<ThreadRef>,
}

/// [`super::Blame`] in the backend's stack handles and call numbers (fields as there).
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct RawBlame<S> {
    pub wait: RawWait<S>,
    pub root: RawRoot<S>,
    pub depth: u32,
    /// From the waiting thread to the root: each thread and the user stack it waited at.
    pub chain: Vec<(ThreadRef, Option<S>)>,
    pub waits: u64,
    pub total_ns: u64,
}

/// [`super::SampledCpu`] in the backend's stack handles (fields as there): samples of a `cpu`
/// root taken while waits were blamed on its running, or of the holder of a CPU that a
/// `cpu-saturation` root waited for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct RawSampled<S> {
    pub role: SampleRole,
    pub thread: ThreadRef,
    pub end_stack: Option<S>,
    pub stack: Option<S>,
    pub weight: u64,
}

/// What the engine counted besides the blame (as [`super::BottleneckAnalysis`]'s fields of those names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct EngineCounts {
    pub intervals: u64,
    pub lost_intervals: u64,
    pub spurious_wakeups: u64,
    pub spurious_wakeup_ns: u64,
    /// Time blamed to coarse records (no stacks, calls, locks) because the records reached
    /// [`EngineLimits::max_records`], nanoseconds.
    pub stackless_ns: u64,
}

/// The bottleneck engine of one recording.
pub struct Engine<S> {
    limits: EngineLimits,
    start_ns: u64,
    threads: HashMap<u32, Timeline<S>>,
    /// Intervals not analysed yet, in arrival order: (tid, index in its timeline).
    pending: VecDeque<(u32, u64)>,
    names: Vec<String>,
    name_index: HashMap<String, NameId>,
    blames: Blames<S>,
    counts: EngineCounts,
}

impl<S: Copy + Eq + Hash> Engine<S> {
    /// An engine for a recording that started at `start_ns` (the clock of the intervals).
    pub fn new(start_ns: u64, limits: EngineLimits) -> Self {
        Engine {
            limits,
            start_ns,
            threads: HashMap::default(),
            pending: VecDeque::new(),
            names: Vec::new(),
            name_index: HashMap::default(),
            blames: Blames::new(limits.max_records),
            counts: EngineCounts::default(),
        }
    }

    /// Its limits.
    pub fn limits(&self) -> EngineLimits {
        self.limits
    }

    /// Adds an interval that just ended; `waker_name` names a waker outside the program,
    /// `holder_name` the holder of the CPU ([`Interval::holder`]) when it is outside the program.
    /// Intervals of one thread must come in order.
    pub fn push(
        &mut self,
        interval: Interval<S>,
        waker_name: Option<&str>,
        holder_name: Option<&str>,
    ) {
        self.counts.intervals += 1;
        let waker_name = waker_name
            .filter(|_| interval.woken_by == Some(WokenBy::Outside))
            .map(|name| self.intern(name));
        let holder_name = holder_name.map(|name| self.intern(name));
        let tid = interval.thread.tid;
        let start_ns = self.start_ns;
        let timeline = self.threads.entry(tid).or_insert_with(|| {
            let known_from = match interval.kind {
                IntervalKind::New => interval.start_ns,
                _ => start_ns,
            };
            Timeline::new(interval.thread.pid, known_from)
        });
        if timeline.pid != interval.thread.pid {
            // A thread id reused by another process: nothing before is this thread's.
            *timeline = Timeline::new(interval.thread.pid, interval.start_ns);
        } else if interval.kind == IntervalKind::New {
            timeline.known_from = timeline.known_from.max(interval.start_ns);
        }
        let mut after_gap = false;
        if let Some(seq) = interval.seq {
            if let Some(last) = timeline.last_seq {
                let lost = seq.wrapping_sub(last).wrapping_sub(1);
                if lost > 0 && lost < u32::MAX / 2 {
                    self.counts.lost_intervals += u64::from(lost);
                    after_gap = true;
                }
            }
            timeline.last_seq = Some(seq);
        }
        if let Some(previous) = timeline.intervals.back() {
            if previous.kind == IntervalKind::Sleep
                && interval.kind == IntervalKind::Sleep
                && interval.start_ns.saturating_sub(previous.end) < SPURIOUS_WAKEUP_NS
                && previous.user_stack == interval.user_stack
                && previous.object == interval.object
                && interval.object != 0
                && !after_gap
            {
                self.counts.spurious_wakeups += 1;
                self.counts.spurious_wakeup_ns += previous.wakeup - previous.start;
            }
        }
        // Out of order (another CPU's clock): never before the previous interval's end.
        let floor = timeline.intervals.back().map_or(0, |p| p.end);
        let start = interval.start_ns.max(floor);
        let wakeup = interval.wakeup_ns.clamp(start, interval.end_ns.max(start));
        let end = interval.end_ns.max(wakeup);
        let index = timeline.next_index();
        timeline.intervals.push_back(Stored {
            start,
            wakeup,
            end,
            kind: interval.kind,
            call: interval.call,
            object: interval.object,
            woken_by: interval.woken_by,
            waker: interval.waker.filter(|w| w.tid != tid),
            waker_name,
            user_stack: interval.user_stack,
            kernel_stack: interval.kernel_stack,
            waker_user_stack: interval.waker_user_stack,
            waker_kernel_stack: interval.waker_kernel_stack,
            holder: interval.holder,
            holder_name,
            after_gap,
        });
        self.pending.push_back((tid, index));
    }

    /// Adds a sample of `thread` on a CPU at `time_ns` with its user stack (the `cpu` probe): a
    /// stretch of running that others waited on is then known by what it ran, not only by where
    /// it ended.
    pub fn push_sample(&mut self, thread: ThreadRef, time_ns: u64, stack: Option<S>) {
        let start_ns = self.start_ns;
        let timeline = self
            .threads
            .entry(thread.tid)
            .or_insert_with(|| Timeline::new(thread.pid, start_ns));
        if timeline.pid == thread.pid {
            timeline.add_sample(time_ns, stack);
        }
    }

    /// Analyses the intervals that ended before `now_ns` less the lag, and forgets what is older
    /// than the history.
    pub fn advance(&mut self, now_ns: u64) {
        self.analyse_until(now_ns.saturating_sub(self.limits.lag_ns));
        let horizon = now_ns.saturating_sub(self.limits.history_ns);
        for timeline in self.threads.values_mut() {
            timeline.prune(horizon);
        }
    }

    /// Analyses every interval left; returns the counts, the blame and the weighted samples of
    /// `cpu` roots.
    pub fn finish(mut self) -> (EngineCounts, Vec<RawBlame<S>>, Vec<RawSampled<S>>) {
        self.analyse_until(u64::MAX);
        self.analysed()
    }

    /// What [`Engine::finish`] would return for the intervals analysed so far, the engine going
    /// on (copies: for a live view's snapshot).
    pub fn analysed(&self) -> (EngineCounts, Vec<RawBlame<S>>, Vec<RawSampled<S>>) {
        (
            self.counts(),
            self.blames.records(&self.names),
            self.blames.sampled(),
        )
    }

    /// From now on, remembers which blame records and samples each analysis adds to, for
    /// [`Engine::changed`] (a live view that reads the blame every second, which a copy of
    /// every record each time would cost more than the analysis).
    pub fn track_changes(&mut self) {
        self.blames.track_changes();
    }

    /// The blame and samples added since the last call (or since [`Engine::track_changes`]),
    /// each record with only its waits and time added since; the counts are the totals so far.
    /// The first call without change tracking gives [`Engine::analysed`] and turns it on.
    pub fn changed(&mut self) -> (EngineCounts, Vec<RawBlame<S>>, Vec<RawSampled<S>>) {
        let (blame, sampled) = self.blames.take_changed(&self.names);
        (self.counts(), blame, sampled)
    }

    fn counts(&self) -> EngineCounts {
        EngineCounts {
            stackless_ns: self.blames.stackless_ns,
            ..self.counts
        }
    }

    fn intern(&mut self, name: &str) -> NameId {
        if let Some(&id) = self.name_index.get(name) {
            return id;
        }
        let id = NameId::after(self.names.len());
        self.names.push(name.to_owned());
        self.name_index.insert(name.to_owned(), id);
        id
    }

    fn analyse_until(&mut self, until: u64) {
        while let Some(&(tid, index)) = self.pending.front() {
            let Some(interval) = self.threads.get(&tid).and_then(|t| t.get(index)) else {
                self.pending.pop_front();
                continue;
            };
            if interval.end > until {
                break;
            }
            self.pending.pop_front();
            let interval = interval.clone();
            let pid = self.threads.get(&tid).map_or(0, |t| t.pid);
            let mut walk = Walk {
                threads: &self.threads,
                limits: self.limits,
                blames: &mut self.blames,
            };
            walk.interval(ThreadRef { pid, tid }, &interval);
            self.blames.count_touched();
        }
    }
}
