//! The streaming engine of the wait-for analysis: off-CPU intervals in, [`RawBlame`] out.
//!
//! A backend pushes each interval as it ends ([`Engine::push`]) and calls [`Engine::advance`]
//! with the current time now and then; the engine analyses the intervals that ended at least
//! [`EngineLimits::lag_ns`] ago (by then every interval of their wakers' past has arrived: each
//! ended before the wakeup it led to), and forgets each thread's intervals older than
//! [`EngineLimits::history_ns`], so memory is bounded by the switch rate, not the recording's
//! length. [`Engine::finish`] analyses the rest and returns the blame, with stacks still in the
//! backend's own handles `S` for it to symbolize.

use super::timeline::{Piece, Stored, Timeline};
use super::{RootKind, SampleRole, ThreadRef, WaitPart, WokenBy, SPURIOUS_WAKEUP_NS};
use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::hash::Hash;

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
    /// The thread that had the CPU until this one got it back (tid 0: the CPU was idle), when
    /// known: for a thread waiting for a CPU, who held it.
    pub holder: Option<ThreadRef>,
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

impl<S> RawRoot<S, u32> {
    /// The root with its interned names looked up in `names`.
    fn named(self, names: &[String]) -> RawRoot<S> {
        let name = |id: Option<u32>| id.and_then(|n| names.get(n as usize).cloned());
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

/// What the engine counted besides the blame (as [`super::WaitFor`]'s fields of those names).
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

/// The identity of a blame record (everything but its chain and sums): its wait, its root with
/// names interned, its depth.
type Key<S> = (RawWait<S>, RootKey<S>, u32);

/// A root while the engine sums: names as interned ids.
type RootKey<S> = RawRoot<S, u32>;

/// What a weighted sample is counted under: its role, thread, the end stack of the stretch it
/// belongs to (a `cpu` root's), its own stack.
type SampleKey<S> = (SampleRole, ThreadRef, Option<S>, Option<S>);

/// The blame being summed.
struct Blames<S> {
    /// [`EngineLimits::max_records`].
    max_records: usize,
    /// [`EngineCounts::stackless_ns`].
    stackless_ns: u64,
    index: HashMap<Key<S>, usize>,
    records: Vec<RawBlame<S>>,
    /// Records the interval being analysed touched (their `waits` grow by one after it).
    touched: Vec<usize>,
    /// Weights of the samples of `cpu` roots and of CPU holders: (role, thread, end stack,
    /// sample's stack).
    sampled: HashMap<SampleKey<S>, u64>,
}

/// The wait-for engine of one recording.
pub struct Engine<S> {
    limits: EngineLimits,
    start_ns: u64,
    threads: HashMap<u32, Timeline<S>>,
    /// Intervals not analysed yet, in arrival order: (tid, index in its timeline).
    pending: VecDeque<(u32, u64)>,
    names: Vec<String>,
    name_index: HashMap<String, u32>,
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
            blames: Blames {
                max_records: limits.max_records,
                stackless_ns: 0,
                index: HashMap::default(),
                records: Vec::new(),
                touched: Vec::new(),
                sampled: HashMap::default(),
            },
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
        let sampled = self
            .blames
            .sampled
            .into_iter()
            .map(|((role, thread, end_stack, stack), weight)| RawSampled {
                role,
                thread,
                end_stack,
                stack,
                weight,
            })
            .collect();
        self.counts.stackless_ns = self.blames.stackless_ns;
        (self.counts, self.blames.records, sampled)
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.name_index.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
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
                names: &self.names,
            };
            walk.interval(ThreadRef { pid, tid }, &interval);
            self.blames.count_touched();
        }
    }
}

impl<S: Copy + Eq + Hash> Blames<S> {
    fn add(
        &mut self,
        side: RawWait<S>,
        root: RootKey<S>,
        depth: u32,
        chain: &[(ThreadRef, Option<S>)],
        names: &[String],
        ns: u64,
    ) {
        if ns == 0 {
            return;
        }
        let mut key = (side, root, depth);
        let mut stackless = None;
        if self.records.len() >= self.max_records && !self.index.contains_key(&key) {
            key = (coarse_wait(key.0), coarse_root(&key.1), depth);
            stackless = Some(chain.iter().map(|&(t, _)| (t, None)).collect::<Vec<_>>());
            self.stackless_ns = self.stackless_ns.saturating_add(ns);
        }
        // One hash and one comparison of the key per call: the engine's hottest line.
        let i = match self.index.entry(key) {
            Entry::Occupied(entry) => *entry.get(),
            Entry::Vacant(entry) => {
                let i = self.records.len();
                let (wait, root, _) = entry.key();
                self.records.push(RawBlame {
                    wait: *wait,
                    root: root.clone().named(names),
                    depth,
                    chain: stackless.unwrap_or_else(|| chain.to_vec()),
                    waits: 0,
                    total_ns: 0,
                });
                entry.insert(i);
                i
            }
        };
        self.records[i].total_ns = self.records[i].total_ns.saturating_add(ns);
        self.touched.push(i);
    }

    fn count_touched(&mut self) {
        self.touched.sort_unstable();
        self.touched.dedup();
        for &i in &self.touched {
            self.records[i].waits += 1;
        }
        self.touched.clear();
    }
}

/// A wait past the record limit: its thread, part and who ended it; no stacks, call, word or
/// waker, which multiply the records by the places and locks the threads meet at.
fn coarse_wait<S>(wait: RawWait<S>) -> RawWait<S> {
    RawWait {
        call: -1,
        object: 0,
        user_stack: None,
        kernel_stack: None,
        waker: None,
        ..wait
    }
}

/// A root past the record limit: its kind and thread only.
fn coarse_root<S>(root: &RootKey<S>) -> RootKey<S> {
    RawRoot {
        kind: root.kind,
        thread: root.thread,
        call: -1,
        user_stack: None,
        kernel_stack: None,
        woken_by: None,
        waker_name: None,
        holder: None,
        holder_name: None,
    }
}

/// One interval's analysis: reads the timelines, adds to the blame.
struct Walk<'a, S> {
    threads: &'a HashMap<u32, Timeline<S>>,
    limits: EngineLimits,
    blames: &'a mut Blames<S>,
    names: &'a [String],
}

impl<S: Copy + Eq + Hash> Walk<'_, S> {
    /// Blames every nanosecond of `interval` of `thread`.
    fn interval(&mut self, thread: ThreadRef, interval: &Stored<S>) {
        let runnable_from = match interval.kind {
            IntervalKind::Sleep => {
                let side = RawWait {
                    thread,
                    part: WaitPart::Asleep,
                    call: interval.call,
                    object: interval.object,
                    user_stack: interval.user_stack,
                    kernel_stack: interval.kernel_stack,
                    woken_by: interval.woken_by,
                    waker: interval
                        .waker
                        .filter(|_| interval.woken_by == Some(WokenBy::Program)),
                };
                let mut chain = vec![(thread, interval.user_stack)];
                self.asleep(
                    &side,
                    thread,
                    interval,
                    interval.start,
                    interval.wakeup,
                    0,
                    &mut chain,
                );
                interval.wakeup
            }
            IntervalKind::Preempted | IntervalKind::New => interval.start,
        };
        let side = RawWait {
            thread,
            part: WaitPart::Runnable,
            call: interval.call,
            object: interval.object,
            user_stack: interval.user_stack,
            kernel_stack: None,
            woken_by: None,
            waker: None,
        };
        self.sample_holder(interval, runnable_from, interval.end);
        let root = self.saturation_root(thread, interval);
        let chain = [(thread, interval.user_stack)];
        self.blames.add(
            side,
            root,
            0,
            &chain,
            self.names,
            interval.end - runnable_from,
        );
    }

    /// Counts what the holder of the CPU a thread waited for in `[from, to)` of `interval` ran
    /// then, where it is a thread of the program the cpu probe sampled.
    fn sample_holder(&mut self, interval: &Stored<S>, from: u64, to: u64) {
        let Some(holder) = interval.holder.filter(|h| h.tid != 0) else {
            return;
        };
        let Some(timeline) = self.threads.get(&holder.tid) else {
            return;
        };
        for sample in timeline.samples_in(from, to) {
            *self
                .blames
                .sampled
                .entry((SampleRole::Holder, holder, None, sample))
                .or_insert(0) += 1;
        }
    }

    /// `thread` runnable in `interval`: the CPUs were busy (with the thread that gave it the CPU
    /// back, at the end).
    fn saturation_root(&self, thread: ThreadRef, interval: &Stored<S>) -> RootKey<S> {
        RootKey {
            holder: interval.holder,
            holder_name: interval.holder_name,
            ..Self::simple_root(RootKind::CpuSaturation, thread, interval.user_stack)
        }
    }

    fn simple_root(kind: RootKind, thread: ThreadRef, user_stack: Option<S>) -> RootKey<S> {
        RootKey {
            kind,
            thread,
            call: -1,
            user_stack,
            kernel_stack: None,
            woken_by: None,
            waker_name: None,
            holder: None,
            holder_name: None,
        }
    }

    /// Blames `[from, to)` of `sleeper`'s sleep `interval` (at `depth` from the waiting thread):
    /// to what its waker did meanwhile when a thread of the program woke it, else to the sleep.
    #[allow(clippy::too_many_arguments)]
    fn asleep(
        &mut self,
        side: &RawWait<S>,
        sleeper: ThreadRef,
        interval: &Stored<S>,
        from: u64,
        to: u64,
        depth: u32,
        chain: &mut Vec<(ThreadRef, Option<S>)>,
    ) {
        match interval.waker {
            Some(waker) if interval.woken_by == Some(WokenBy::Program) => {
                self.follow(
                    side,
                    waker,
                    from,
                    to,
                    depth + 1,
                    interval.waker_user_stack,
                    chain,
                );
            }
            _ => {
                let root = RootKey {
                    kind: RootKind::Blocked,
                    thread: sleeper,
                    call: interval.call,
                    user_stack: interval.user_stack,
                    kernel_stack: interval.kernel_stack,
                    woken_by: interval.woken_by,
                    waker_name: interval.waker_name,
                    holder: None,
                    holder_name: None,
                };
                self.blames
                    .add(*side, root, depth, chain, self.names, to - from);
            }
        }
    }

    /// Blames `[from, to)` to what `thread` did then, `depth` threads from the waiting one;
    /// `woke_at` is its user stack where it ended the sleep that led here (at `to`).
    #[allow(clippy::too_many_arguments)]
    fn follow(
        &mut self,
        side: &RawWait<S>,
        thread: ThreadRef,
        from: u64,
        to: u64,
        depth: u32,
        woke_at: Option<S>,
        chain: &mut Vec<(ThreadRef, Option<S>)>,
    ) {
        if from >= to {
            return;
        }
        if chain.iter().any(|(t, _)| t.tid == thread.tid) {
            chain.push((thread, None));
            let root = Self::simple_root(RootKind::Cycle, thread, woke_at);
            self.blames
                .add(*side, root, depth, chain, self.names, to - from);
            chain.pop();
            return;
        }
        if depth > self.limits.max_depth {
            chain.push((thread, None));
            let root = Self::simple_root(RootKind::DepthLimit, thread, woke_at);
            self.blames
                .add(*side, root, depth, chain, self.names, to - from);
            chain.pop();
            return;
        }
        let Some(timeline) = self.threads.get(&thread.tid) else {
            // Never switched during the recording: on a CPU all along.
            chain.push((thread, None));
            let root = Self::simple_root(RootKind::Cpu, thread, woke_at);
            self.blames
                .add(*side, root, depth, chain, self.names, to - from);
            chain.pop();
            return;
        };
        for (start, end, piece) in timeline.pieces(from, to) {
            match piece {
                Piece::Unknown => {
                    chain.push((thread, None));
                    let root = Self::simple_root(RootKind::Unknown, thread, None);
                    self.blames
                        .add(*side, root, depth, chain, self.names, end - start);
                    chain.pop();
                }
                Piece::OnCpu { next } => {
                    // The stack where this stretch of running ended: its next switch-out, or
                    // the wakeup that led here; and what it ran meanwhile, where sampled.
                    let stack = next.map_or(woke_at, |n| n.user_stack);
                    for sample in timeline.samples_in(start, end) {
                        *self
                            .blames
                            .sampled
                            .entry((SampleRole::Root, thread, stack, sample))
                            .or_insert(0) += 1;
                    }
                    chain.push((thread, None));
                    let root = Self::simple_root(RootKind::Cpu, thread, stack);
                    self.blames
                        .add(*side, root, depth, chain, self.names, end - start);
                    chain.pop();
                }
                Piece::Runnable { interval } => {
                    chain.push((thread, interval.user_stack));
                    self.sample_holder(interval, start, end);
                    let root = self.saturation_root(thread, interval);
                    self.blames
                        .add(*side, root, depth, chain, self.names, end - start);
                    chain.pop();
                }
                Piece::Asleep { interval } => {
                    chain.push((thread, interval.user_stack));
                    self.asleep(side, thread, interval, start, end, depth, chain);
                    chain.pop();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ThreadRef = ThreadRef { pid: 1, tid: 1 };
    const B: ThreadRef = ThreadRef { pid: 1, tid: 2 };
    const C: ThreadRef = ThreadRef { pid: 1, tid: 3 };

    /// A sleep of `thread` from `start` to `wakeup`, on a CPU again at `end`, at stack `stack`.
    fn sleep(thread: ThreadRef, start: u64, wakeup: u64, end: u64, stack: u32) -> Interval<u32> {
        Interval {
            thread,
            seq: None,
            start_ns: start,
            wakeup_ns: wakeup,
            end_ns: end,
            kind: IntervalKind::Sleep,
            call: 202,
            object: 0,
            woken_by: None,
            waker: None,
            user_stack: Some(stack),
            kernel_stack: None,
            waker_user_stack: None,
            holder: None,
        }
    }

    fn woken_by(mut interval: Interval<u32>, waker: ThreadRef, at: u32) -> Interval<u32> {
        interval.woken_by = Some(WokenBy::Program);
        interval.waker = Some(waker);
        interval.waker_user_stack = Some(at);
        interval
    }

    fn by(mut interval: Interval<u32>, woken: WokenBy) -> Interval<u32> {
        interval.woken_by = Some(woken);
        interval
    }

    fn run(intervals: Vec<Interval<u32>>) -> Vec<RawBlame<u32>> {
        let mut engine = Engine::new(0, EngineLimits::default());
        for i in intervals {
            engine.push(i, None, None);
        }
        engine.finish().1
    }

    /// Samples of a waker taken while a wait was blamed on its running count once per wait that
    /// covered them, under the stack where that running ended; samples outside are not counted.
    #[test]
    fn sampled_running() {
        let mut engine = Engine::new(0, EngineLimits::default());
        engine.push_sample(B, 50, Some(8));
        engine.push_sample(B, 60, Some(8));
        engine.push_sample(B, 150, Some(5));
        engine.push(woken_by(sleep(A, 0, 100, 100, 1), B, 9), None, None);
        engine.push(woken_by(sleep(C, 40, 100, 100, 1), B, 9), None, None);
        let (_, _, sampled) = engine.finish();
        let got: Vec<_> = sampled
            .iter()
            .map(|s| (s.role, s.thread.tid, s.end_stack, s.stack, s.weight))
            .collect();
        assert_eq!(got, vec![(SampleRole::Root, 2, Some(9), Some(8), 4)]);
    }

    /// The waiting thread's time per (root kind, root thread, root stack), asleep parts only.
    fn roots(blame: &[RawBlame<u32>], of: ThreadRef) -> Vec<(RootKind, u32, Option<u32>, u64)> {
        let mut out: Vec<_> = blame
            .iter()
            .filter(|b| b.wait.thread == of && b.wait.part == WaitPart::Asleep)
            .map(|b| {
                (
                    b.root.kind,
                    b.root.thread.tid,
                    b.root.user_stack,
                    b.total_ns,
                )
            })
            .collect();
        out.sort();
        out
    }

    /// A wait ended by a thread that ran all along is that thread's CPU time, at the stack where
    /// it woke the waiter.
    #[test]
    fn waker_on_cpu() {
        let blame = run(vec![woken_by(sleep(A, 0, 100, 110, 7), B, 9)]);
        assert_eq!(roots(&blame, A), vec![(RootKind::Cpu, 2, Some(9), 100)]);
        let runnable: Vec<_> = blame
            .iter()
            .filter(|b| b.wait.part == WaitPart::Runnable)
            .map(|b| (b.root.kind, b.total_ns))
            .collect();
        assert_eq!(runnable, vec![(RootKind::CpuSaturation, 10)]);
    }

    /// wPerf's cascade: A waits 100 for B, B waits 60 of it for C, who runs: 40 are B's CPU time
    /// (before and after its own sleep), 60 C's; a sleep of C ended by a timer is `blocked`.
    #[test]
    fn cascade() {
        let blame = run(vec![
            by(sleep(C, 30, 50, 50, 5), WokenBy::Interrupt),
            woken_by(sleep(B, 20, 80, 80, 4), C, 6),
            woken_by(sleep(A, 0, 100, 100, 1), B, 2),
        ]);
        assert_eq!(
            roots(&blame, A),
            vec![
                (RootKind::Cpu, 2, Some(2), 20),
                (RootKind::Cpu, 2, Some(4), 20),
                (RootKind::Cpu, 3, Some(5), 10),
                (RootKind::Cpu, 3, Some(6), 30),
                (RootKind::Blocked, 3, Some(5), 20),
            ]
        );
        let depth: Vec<_> = blame
            .iter()
            .filter(|b| b.wait.thread == A && b.root.kind == RootKind::Blocked)
            .map(|b| {
                (
                    b.depth,
                    b.chain.iter().map(|(t, _)| t.tid).collect::<Vec<_>>(),
                )
            })
            .collect();
        assert_eq!(depth, vec![(2, vec![1, 2, 3])]);
    }

    /// Threads that wake each other in a ring end in a cycle, not in an endless walk.
    #[test]
    fn cycle() {
        let blame = run(vec![
            woken_by(sleep(B, 0, 100, 100, 4), A, 3),
            woken_by(sleep(A, 0, 100, 100, 1), B, 2),
        ]);
        assert!(
            roots(&blame, A).contains(&(RootKind::Cycle, 1, Some(3), 100)),
            "{:?}",
            roots(&blame, A)
        );
    }

    /// A deterministic pseudo-random schedule of 5 threads waking each other, sorted as the
    /// engine takes it (each thread's intervals in order, globally by end).
    fn random_schedule() -> Vec<Interval<u32>> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let threads: Vec<ThreadRef> = (1..=5).map(|tid| ThreadRef { pid: 1, tid }).collect();
        let mut clock = [0u64; 5];
        let mut intervals = Vec::new();
        for _ in 0..400 {
            let i = next(5) as usize;
            let start = clock[i] + next(50);
            let wakeup = start + next(500);
            let end = wakeup + next(30);
            clock[i] = end;
            let mut interval = sleep(threads[i], start, wakeup, end, next(4) as u32);
            match next(4) {
                0 => interval = by(interval, WokenBy::Interrupt),
                1 => interval.kind = IntervalKind::Preempted,
                _ => interval = woken_by(interval, threads[next(5) as usize], next(3) as u32),
            }
            if interval.kind == IntervalKind::Preempted {
                interval.wakeup_ns = interval.start_ns;
            }
            intervals.push(interval);
        }
        intervals.sort_by_key(|i| i.end_ns);
        intervals
    }

    /// The parts of every wait add up to the wait, however the timelines interleave.
    #[test]
    fn conservation() {
        let intervals = random_schedule();
        let expected: u64 = intervals.iter().map(|i| i.end_ns - i.start_ns).sum();
        let blame = run(intervals);
        let blamed: u64 = blame.iter().map(|b| b.total_ns).sum();
        assert_eq!(blamed, expected);
    }

    /// Past the record limit new records lose their stacks, not their time: the parts still
    /// add up, the records stay few, and the stackless time is counted.
    #[test]
    fn record_limit_keeps_time_without_stacks() {
        let intervals = random_schedule();
        let expected: u64 = intervals.iter().map(|i| i.end_ns - i.start_ns).sum();
        let unlimited = run(intervals.clone()).len();
        let limits = EngineLimits {
            max_records: 10,
            ..EngineLimits::default()
        };
        let mut engine = Engine::new(0, limits);
        for i in intervals {
            engine.push(i, None, None);
        }
        let (counts, blame, _) = engine.finish();
        assert_eq!(blame.iter().map(|b| b.total_ns).sum::<u64>(), expected);
        assert!(blame.len() < unlimited, "{} of {unlimited}", blame.len());
        let stackless: u64 = blame[10..].iter().map(|b| b.total_ns).sum();
        assert!(counts.stackless_ns >= stackless && stackless > 0);
        for b in &blame[10..] {
            assert_eq!(
                (b.wait.user_stack, b.root.user_stack),
                (None, None),
                "{b:?}"
            );
            assert_eq!(
                (b.wait.object, b.wait.waker, b.root.holder),
                (0, None, None),
                "{b:?}"
            );
            assert!(b.chain.iter().all(|(_, stack)| stack.is_none()), "{b:?}");
        }
    }

    /// A waker's past older than the history is `unknown`; within it, known.
    #[test]
    fn history() {
        let limits = EngineLimits {
            history_ns: 1_000,
            lag_ns: 10,
            ..EngineLimits::default()
        };
        let mut engine = Engine::new(0, limits);
        engine.push(
            by(sleep(B, 100, 200, 200, 4), WokenBy::Interrupt),
            None,
            None,
        );
        engine.advance(5_000);
        engine.push(woken_by(sleep(A, 0, 5_000, 5_000, 1), B, 2), None, None);
        let (_, blame, _) = engine.finish();
        let roots = roots(&blame, A);
        assert_eq!(
            roots,
            vec![
                (RootKind::Cpu, 2, Some(2), 4_800),
                (RootKind::Unknown, 2, None, 200),
            ]
        );
    }

    /// A gap in a thread's interval numbers makes the stretch before the next interval unknown,
    /// and counts the lost intervals.
    #[test]
    fn lost_intervals() {
        let mut engine = Engine::new(0, EngineLimits::default());
        let mut first = by(sleep(B, 0, 10, 10, 4), WokenBy::Interrupt);
        first.seq = Some(1);
        let mut after = by(sleep(B, 50, 60, 60, 4), WokenBy::Interrupt);
        after.seq = Some(4);
        engine.push(first, None, None);
        engine.push(after, None, None);
        engine.push(woken_by(sleep(A, 0, 100, 100, 1), B, 2), None, None);
        let (counts, blame, _) = engine.finish();
        assert_eq!(counts.lost_intervals, 2);
        assert!(
            roots(&blame, A).contains(&(RootKind::Unknown, 2, None, 40)),
            "{:?}",
            roots(&blame, A)
        );
    }

    /// A thread that sleeps again on the same word at the same site right after a wakeup had a
    /// spurious wakeup; a sleep loop without a word did not.
    #[test]
    fn spurious_wakeups() {
        let mut engine = Engine::new(0, EngineLimits::default());
        let on_word = |mut i: Interval<u32>| {
            i.object = 0x1000;
            i
        };
        engine.push(
            on_word(woken_by(sleep(A, 0, 100, 105, 1), B, 2)),
            None,
            None,
        );
        engine.push(
            on_word(woken_by(sleep(A, 110, 200, 205, 1), C, 3)),
            None,
            None,
        );
        // A loop of sleeps (no word) wakes up on purpose each time.
        engine.push(by(sleep(B, 0, 100, 105, 4), WokenBy::Interrupt), None, None);
        engine.push(
            by(sleep(B, 110, 200, 205, 4), WokenBy::Interrupt),
            None,
            None,
        );
        let (counts, _, _) = engine.finish();
        assert_eq!(counts.spurious_wakeups, 1);
        assert_eq!(counts.spurious_wakeup_ns, 100);
    }
}
