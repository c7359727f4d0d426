//! The sliding window of `lockscope top`: what was recorded between two snapshots of one
//! recording ([`since`]), each snapshot the profile of everything from the attach to its moment
//! (`Recorder::live_snapshot`), and the snapshots kept to take the window and the trend from
//! ([`Snapshots`]).
//!
//! The probes' aggregates only grow while attached, so the waits of a window are the later
//! snapshot's records less the earlier's, matched by what a record is (probe, thread, object,
//! operation, who ended it, its stacks: a recording's stack ids stay the same from snapshot to
//! snapshot), and the threads' times the same way per thread. Each snapshot brings the stacks
//! first seen since the one before ([`Snapshots`] keeps them all, once) and the bottleneck
//! analysis of the intervals analysed since: the window's blame is the sum of its snapshots'
//! ([`merge_bottleneck`]), so the causes are the window's, as the sites are. What stays of a
//! record is a profile's record: the report's analysis and `why` read the window as they read
//! a recording.

use lockscope_probes::bottleneck::{
    Blame, BottleneckAnalysis, Root, SampleRole, SampledCpu, ThreadRef, WaitPart, WokenBy,
};
use lockscope_probes::catalog::OFFCPU;
use lockscope_probes::overlap::offcpu_sleep_kind;
use lockscope_probes::{Profile, Stack, StackId, ThreadTime, WaitKind, WaitRecord, WaitStats};
use std::collections::{HashMap, VecDeque};

/// The hash maps of a refresh (ahash: they key every record of a snapshot, every second).
type FastMap<K, V> = HashMap<K, V, ahash::RandomState>;

/// What a wait record is, whatever snapshot of the recording it is in: its probe, thread,
/// object, operation, who ended it and its stacks.
type RecordKey<'a> = (
    &'a str,
    u32,
    u32,
    u64,
    &'a str,
    Option<WokenBy>,
    Option<StackId>,
    Option<StackId>,
);

fn record_key(w: &WaitRecord) -> RecordKey<'_> {
    (
        &w.probe,
        w.pid,
        w.tid,
        w.object,
        &w.operation,
        w.woken_by,
        w.user_stack,
        w.kernel_stack,
    )
}

/// `later`'s waits less `earlier`'s: the counts, times and histogram of what ended between them.
/// A group's longest wait is `later`'s (the probes keep no maximum per window).
fn stats_since(later: &WaitStats, earlier: &WaitStats) -> WaitStats {
    let mut dense: Vec<u64> = Vec::new();
    for (slot, count) in later.histogram.buckets() {
        if dense.len() <= slot {
            dense.resize(slot + 1, 0);
        }
        dense[slot] = count.saturating_sub(earlier.histogram.count_in_slot(slot));
    }
    WaitStats {
        count: later.count.saturating_sub(earlier.count),
        total_ns: later.total_ns.saturating_sub(earlier.total_ns),
        max_ns: later.max_ns,
        histogram: lockscope_probes::Log2Histogram::from_dense(&dense),
    }
}

/// A thread's times between two snapshots.
fn time_since(later: &ThreadTime, earlier: &ThreadTime) -> ThreadTime {
    let mut out = later.clone();
    out.wall_ns = later.wall_ns.saturating_sub(earlier.wall_ns);
    for (class, ns) in &mut out.time_ns {
        *ns = ns.saturating_sub(earlier.ns(*class));
    }
    for (by, ns) in &mut out.woken_ns {
        *ns = ns.saturating_sub(earlier.woken_ns.get(by).copied().unwrap_or(0));
    }
    out.voluntary_switches = later
        .voluntary_switches
        .saturating_sub(earlier.voluntary_switches);
    out.involuntary_switches = later
        .involuntary_switches
        .saturating_sub(earlier.involuntary_switches);
    out
}

/// What `later` recorded after `earlier` (two snapshots of one recording, `earlier` first): its
/// waits less `earlier`'s, its threads' times less theirs, its duration the time between them.
/// The wakeups are not windowed (the window has none), nor the bottleneck analysis, which
/// [`Snapshots`] sums from the snapshots' own.
pub fn since(later: &Profile, earlier: &Profile) -> Profile {
    let mut before: FastMap<RecordKey<'_>, WaitStats> = FastMap::default();
    for w in &earlier.waits {
        before.entry(record_key(w)).or_default().merge(&w.stats);
    }
    let mut waits = Vec::new();
    for w in &later.waits {
        let stats = match before.get_mut(&record_key(w)) {
            Some(seen) => {
                let stats = stats_since(&w.stats, seen);
                // Taken once: a second record of the same key subtracts what is left.
                let used = stats_since(seen, &w.stats);
                *seen = used;
                stats
            }
            None => w.stats.clone(),
        };
        if stats.count > 0 || stats.total_ns > 0 {
            waits.push(WaitRecord { stats, ..w.clone() });
        }
    }
    let times_before: FastMap<(u32, u32), &ThreadTime> = earlier
        .thread_times
        .iter()
        .map(|t| ((t.pid, t.tid), t))
        .collect();
    let thread_times = later
        .thread_times
        .iter()
        .map(|t| match times_before.get(&(t.pid, t.tid)) {
            Some(before) => time_since(t, before),
            None => t.clone(),
        })
        .filter(|t| t.wall_ns > 0)
        .collect();
    let mut metadata = later.metadata.clone();
    metadata.duration_ns = later
        .metadata
        .duration_ns
        .saturating_sub(earlier.metadata.duration_ns);
    metadata.start_unix_ns = later
        .metadata
        .start_unix_ns
        .saturating_add(earlier.metadata.duration_ns);
    metadata.events = later
        .metadata
        .events
        .saturating_sub(earlier.metadata.events);
    Profile {
        metadata,
        threads: later.threads.clone(),
        stacks: later.stacks.clone(),
        waits,
        thread_times,
        wakeups: Vec::new(),
        bottleneck: None,
        processes: later.processes.clone(),
    }
}

/// What a blame record is, whatever interval it was added in: everything but its chain and
/// sums.
type BlameKey<'a> = (
    ThreadRef,
    WaitPart,
    &'a Option<String>,
    u64,
    Option<StackId>,
    Option<StackId>,
    Option<WokenBy>,
    Option<ThreadRef>,
    &'a Root,
    u32,
);

fn blame_key(b: &Blame) -> BlameKey<'_> {
    (
        b.thread,
        b.part,
        &b.call,
        b.object,
        b.user_stack,
        b.kernel_stack,
        b.woken_by,
        b.waker,
        &b.root,
        b.depth,
    )
}

/// What a sample's weight is counted under: its role, thread, end stack and stack.
type SampleKey = (SampleRole, ThreadRef, Option<StackId>, Option<StackId>);

/// The bottleneck analysis of consecutive intervals of one recording, summed as the window sums
/// them ([`WindowBlame`]: each blame record and sample with what every interval added to it, a
/// record's chain the first seen), with the last interval's counts. `None` when no interval has
/// one.
pub fn merge_bottleneck<'a>(
    intervals: impl IntoIterator<Item = &'a BottleneckAnalysis>,
) -> Option<BottleneckAnalysis> {
    let mut sums = WindowBlame::default();
    let mut last = None;
    for w in intervals {
        sums.add(w);
        last = Some(w);
    }
    Some(sums.analysis(counts_of(last?)))
}

/// Summed samples as the analysis lists them, heaviest first.
fn sample_rows(sums: impl Iterator<Item = (SampleKey, u64)>) -> Vec<SampledCpu> {
    let mut rows: Vec<SampledCpu> = sums
        .map(
            |((role, thread, end_stack, user_stack), weight)| SampledCpu {
                role,
                thread,
                end_stack,
                user_stack,
                weight,
            },
        )
        .collect();
    rows.sort_by_key(|s| {
        (
            std::cmp::Reverse(s.weight),
            s.thread,
            s.end_stack,
            s.user_stack,
        )
    });
    rows
}

/// A bottleneck analysis' limits and counts, without its blame and samples.
fn counts_of(w: &BottleneckAnalysis) -> BottleneckAnalysis {
    BottleneckAnalysis {
        blame: Vec::new(),
        sampled: Vec::new(),
        ..*w
    }
}

/// The bottleneck analysis of a window, summed as its intervals come and go: each blame record
/// once, with what the intervals in the window added to it; an interval leaving takes back what
/// it added. Its records are the engine's (each interval's are some of them), so there are at
/// most as many as the engine keeps (`EngineLimits::max_records`, then coarse ones).
#[derive(Default)]
struct WindowBlame {
    /// Every record seen since the last [`WindowBlame::arrange`], which drops those whose
    /// intervals all left the window (zero sums) and orders the rest as the analysis lists them.
    records: Vec<Blame>,
    /// The index of each record in `records`, found by its key (the key borrows from the record,
    /// so the table holds indices and hashes the records' keys).
    index: hashbrown::HashTable<usize>,
    /// Sample weights of the window.
    sampled: HashMap<SampleKey, u64>,
    /// The hasher of the keys (ahash: a window sums tens of thousands of records a second).
    hasher: ahash::RandomState,
}

/// What one interval added to a [`WindowBlame`], to take back when it leaves the window.
#[derive(Default)]
struct Added {
    /// (record, waits, time) of each record it added to.
    records: Vec<(usize, u64, u64)>,
    sampled: Vec<(SampleKey, u64)>,
}

impl WindowBlame {
    /// The index of `b`'s record, added (with zero sums) when new.
    fn slot(&mut self, b: &Blame) -> usize {
        let hash = self.hasher.hash_one(blame_key(b));
        let records = &self.records;
        if let Some(&i) = self
            .index
            .find(hash, |&i| blame_key(&records[i]) == blame_key(b))
        {
            return i;
        }
        let i = self.records.len();
        self.records.push(Blame {
            waits: 0,
            total_ns: 0,
            ..b.clone()
        });
        let (records, hasher) = (&self.records, &self.hasher);
        self.index
            .insert_unique(hash, i, |&j| hasher.hash_one(blame_key(&records[j])));
        i
    }

    /// Adds an interval's bottleneck analysis; returns what it added.
    fn add(&mut self, bottleneck: &BottleneckAnalysis) -> Added {
        let mut added = Added::default();
        for b in &bottleneck.blame {
            let i = self.slot(b);
            let sum = &mut self.records[i];
            sum.waits += b.waits;
            sum.total_ns = sum.total_ns.saturating_add(b.total_ns);
            added.records.push((i, b.waits, b.total_ns));
        }
        for s in &bottleneck.sampled {
            let key = (s.role, s.thread, s.end_stack, s.user_stack);
            *self.sampled.entry(key).or_insert(0) += s.weight;
            added.sampled.push((key, s.weight));
        }
        added
    }

    /// Takes back what an interval added. The records it leaves without time stay (a later
    /// interval may add to them again) until [`WindowBlame::arrange`].
    fn take_back(&mut self, added: &Added) {
        for &(i, waits, total_ns) in &added.records {
            if let Some(sum) = self.records.get_mut(i) {
                sum.waits = sum.waits.saturating_sub(waits);
                sum.total_ns = sum.total_ns.saturating_sub(total_ns);
            }
        }
        for (key, weight) in &added.sampled {
            if let Some(sum) = self.sampled.get_mut(key) {
                *sum = sum.saturating_sub(*weight);
                if *sum == 0 {
                    self.sampled.remove(key);
                }
            }
        }
    }

    /// Orders the records as the window's analysis lists them (heaviest first; a tie in the order
    /// they had) and drops those with no time in the window; what the intervals still in the
    /// window added (`added`) follows the records to their new places. Moves the records, copies
    /// none: the window's analysis is then lent (`Snapshots::with_window`), not copied.
    fn arrange<'a>(&mut self, added: impl Iterator<Item = &'a mut Added>) {
        let mut order: Vec<usize> = (0..self.records.len())
            .filter(|&i| has_time(&self.records[i]))
            .collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.records[i].total_ns));
        const GONE: usize = usize::MAX;
        let mut place = vec![GONE; self.records.len()];
        for (new, &old) in order.iter().enumerate() {
            place[old] = new;
        }
        let mut old: Vec<Option<Blame>> = std::mem::take(&mut self.records)
            .into_iter()
            .map(Some)
            .collect();
        self.records = order.iter().filter_map(|&i| old[i].take()).collect();
        self.index.retain(|i| {
            *i = place[*i];
            *i != GONE
        });
        // A record dropped had no time: what an interval still in the window added to it was 0.
        for interval in added {
            interval.records.retain_mut(|(i, _, _)| {
                *i = place[*i];
                *i != GONE
            });
        }
    }

    /// True when more than half the records have no time in the window.
    fn mostly_idle(&self) -> bool {
        let idle = self.records.iter().filter(|b| !has_time(b)).count();
        idle * 2 > self.records.len()
    }

    /// The window's analysis, copied: `counts`' limits and counts, the records and samples with
    /// time.
    fn analysis(&self, counts: BottleneckAnalysis) -> BottleneckAnalysis {
        let mut blame: Vec<Blame> = (self.records.iter())
            .filter(|b| has_time(b))
            .cloned()
            .collect();
        blame.sort_by_key(|b| std::cmp::Reverse(b.total_ns));
        let sampled = sample_rows(self.sampled.iter().map(|(&key, &weight)| (key, weight)));
        BottleneckAnalysis {
            blame,
            sampled,
            ..counts
        }
    }
}

/// True when a window's blame record has waits or time in the window.
fn has_time(b: &Blame) -> bool {
    b.waits > 0 || b.total_ns > 0
}

/// The kinds the `offcpu` probe's sleeps take from their stacks ([`offcpu_sleep_kind`]: a futex
/// sleep is `mutex`, `condvar`... as the end's profile gives it), remembered by what decides
/// them (the operation and the stacks, whose ids stay the same through a recording): each
/// refresh classifies the sleeps of new sites only, and only the records of its window.
#[derive(Default)]
struct SleepKinds {
    by_operation: FastMap<String, KindsByStacks>,
}

/// The kind of an operation's sleeps by (user, kernel) stack (`None`: the `offcpu` kind kept).
type KindsByStacks = FastMap<(Option<StackId>, Option<StackId>), Option<WaitKind>>;

impl SleepKinds {
    /// Gives every `offcpu` sleep of `profile` (with its stacks) the kind its stacks tell.
    fn classify(&mut self, profile: &mut Profile) {
        let mut kinds = Vec::with_capacity(profile.waits.len());
        for w in &profile.waits {
            // The only records `offcpu_sleep_kind` gives a kind.
            if !w.is_from(&OFFCPU) || w.kind != WaitKind::OffCpu {
                kinds.push(None);
                continue;
            }
            let stacks = (w.user_stack, w.kernel_stack);
            let known = self
                .by_operation
                .get(w.operation.as_str())
                .and_then(|by_stacks| by_stacks.get(&stacks));
            let kind = match known {
                Some(&kind) => kind,
                None => {
                    let kind = offcpu_sleep_kind(profile, w);
                    self.by_operation
                        .entry(w.operation.clone())
                        .or_default()
                        .insert(stacks, kind);
                    kind
                }
            };
            kinds.push(kind);
        }
        for (w, kind) in profile.waits.iter_mut().zip(kinds) {
            if let Some(kind) = kind {
                w.kind = kind;
            }
        }
    }
}

/// A snapshot as [`Snapshots`] keeps it.
struct Kept {
    /// Without stacks; its bottleneck analysis only the counts (the totals so far).
    profile: Profile,
    /// What its interval added to the window's blame; `None` once taken back (or none).
    added: Option<Added>,
}

/// The snapshots of a recording that the window and the trend need: the latest, and those up
/// to one window before it (older ones are dropped: memory stays flat however long it runs),
/// each without its stacks (every stack of the recording is kept once, here), and the window's
/// bottleneck analysis, summed as the snapshots come and go.
pub struct Snapshots {
    window_ns: u64,
    /// Every stack of the recording so far, by id.
    stacks: Vec<Stack>,
    kept: VecDeque<Kept>,
    /// The blame of the intervals in the window: those after the first kept snapshot, and its
    /// own while the window reaches back to the attach.
    blame: WindowBlame,
    /// The `offcpu` sleeps' kinds, by site.
    sleep_kinds: SleepKinds,
}

impl Snapshots {
    /// None yet, for a window of `window_ns`.
    pub fn new(window_ns: u64) -> Self {
        Snapshots {
            window_ns,
            stacks: Vec::new(),
            kept: VecDeque::new(),
            blame: WindowBlame::default(),
            sleep_kinds: SleepKinds::default(),
        }
    }

    /// Adds the latest snapshot: `snapshot` without stacks or bottleneck analysis, the stacks
    /// first seen since the previous snapshot (ids from `first_new_stack` on) and the bottleneck
    /// analysis of the intervals analysed since. Drops the snapshots the window no longer
    /// reaches.
    pub fn push(
        &mut self,
        mut snapshot: Profile,
        first_new_stack: usize,
        new_stacks: Vec<Stack>,
        bottleneck: Option<BottleneckAnalysis>,
    ) {
        self.stacks.truncate(first_new_stack);
        self.stacks.extend(new_stacks);
        let added = bottleneck.as_ref().map(|w| self.blame.add(w));
        snapshot.bottleneck = bottleneck.as_ref().map(counts_of);
        let now = snapshot.metadata.duration_ns;
        self.kept.push_back(Kept {
            profile: snapshot,
            added,
        });
        // Keep the newest snapshot at or before the window's start, and all after it.
        while self.kept.len() > 2
            && self.kept.get(1).is_some_and(|s| {
                now.saturating_sub(s.profile.metadata.duration_ns) >= self.window_ns
            })
        {
            if let Some(Kept {
                added: Some(added), ..
            }) = self.kept.pop_front()
            {
                self.blame.take_back(&added);
            }
        }
        // The first snapshot's interval leaves the window once the window starts at it.
        if self.window_full() {
            if let Some(added) = self.kept.front_mut().and_then(|k| k.added.take()) {
                self.blame.take_back(&added);
            }
        }
        // A view that never asks for the causes still keeps only the window's records.
        if self.blame.mostly_idle() {
            self.arrange_blame();
        }
    }

    /// [`WindowBlame::arrange`], with what the kept intervals added.
    fn arrange_blame(&mut self) {
        let added = self.kept.iter_mut().filter_map(|k| k.added.as_mut());
        self.blame.arrange(added);
    }

    /// The window starts at the first kept snapshot (not at the attach).
    fn window_full(&self) -> bool {
        match (self.kept.front(), self.kept.back()) {
            (Some(first), Some(latest)) => {
                let now = latest.profile.metadata.duration_ns;
                now.saturating_sub(first.profile.metadata.duration_ns) >= self.window_ns
            }
            _ => false,
        }
    }

    /// Runs `f` on `profile` (a window of the snapshots) with the recording's stacks in it (they
    /// go back here after), its `offcpu` sleeps classified as the end's profile classifies them.
    fn lend_stacks<R>(&mut self, profile: &mut Profile, f: impl FnOnce(&Profile) -> R) -> R {
        profile.stacks = std::mem::take(&mut self.stacks);
        self.sleep_kinds.classify(profile);
        let result = f(profile);
        self.stacks = std::mem::take(&mut profile.stacks);
        result
    }

    /// The latest snapshot: everything recorded so far but the stacks and the bottleneck
    /// analysis.
    pub fn latest(&self) -> Option<&Profile> {
        self.kept.back().map(|k| &k.profile)
    }

    /// Runs `f` on what the latest interval recorded (between the last two snapshots), without
    /// its bottleneck analysis (the trend has no use for it).
    pub fn with_last_interval<R>(&mut self, f: impl FnOnce(&Profile) -> R) -> Option<R> {
        let n = self.kept.len();
        let earlier = &self.kept.get(n.checked_sub(2)?)?.profile;
        let later = &self.kept.get(n - 1)?.profile;
        let mut interval = since(later, earlier);
        Some(self.lend_stacks(&mut interval, f))
    }

    /// Runs `f` on the window: what was recorded in the last `window_ns` (or since the attach,
    /// before one window has passed), its waits, thread times and, with `bottleneck`, its
    /// bottleneck analysis (without: none, as a recording without the `waitfor` probe), whose
    /// blame records are lent to `f` (they come back after), not copied.
    pub fn with_window<R>(&mut self, bottleneck: bool, f: impl FnOnce(&Profile) -> R) -> Option<R> {
        let latest = &self.kept.back()?.profile;
        let first = &self.kept.front()?.profile;
        let (mut window, before) = if self.window_full() {
            (since(latest, first), first.bottleneck.as_ref())
        } else {
            (
                Profile {
                    bottleneck: None,
                    ..latest.clone()
                },
                None,
            )
        };
        let counts = latest
            .bottleneck
            .as_ref()
            .filter(|_| bottleneck)
            .map(|counts| {
                let mut counts = counts_of(counts);
                if let Some(before) = before {
                    counts.intervals = counts.intervals.saturating_sub(before.intervals);
                    counts.lost_intervals =
                        counts.lost_intervals.saturating_sub(before.lost_intervals);
                    counts.spurious_wakeups = counts
                        .spurious_wakeups
                        .saturating_sub(before.spurious_wakeups);
                    counts.spurious_wakeup_ns = counts
                        .spurious_wakeup_ns
                        .saturating_sub(before.spurious_wakeup_ns);
                    counts.stackless_ns = counts.stackless_ns.saturating_sub(before.stackless_ns);
                }
                counts
            });
        if let Some(counts) = counts {
            self.arrange_blame();
            let sampled = (self.blame.sampled.iter()).map(|(&key, &weight)| (key, weight));
            window.bottleneck = Some(BottleneckAnalysis {
                blame: std::mem::take(&mut self.blame.records),
                sampled: sample_rows(sampled),
                ..counts
            });
        }
        let result = self.lend_stacks(&mut window, f);
        if let Some(lent) = window.bottleneck.take() {
            self.blame.records = lent.blame;
        }
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockscope_probes::{Log2Histogram, WaitKind};

    fn wait(tid: u32, count: u64, total_ns: u64) -> WaitRecord {
        let mut histogram = Log2Histogram::new();
        histogram.record_n(total_ns / count.max(1), count);
        WaitRecord {
            probe: "futex".into(),
            kind: WaitKind::Mutex,
            pid: 1,
            tid,
            object: 0x10,
            operation: "FUTEX_WAIT_PRIVATE".into(),
            user_stack: None,
            kernel_stack: None,
            woken_by: None,
            stats: WaitStats {
                count,
                total_ns,
                max_ns: total_ns,
                histogram,
            },
        }
    }

    fn snapshot(duration_ns: u64, waits: Vec<WaitRecord>) -> Profile {
        let mut p = Profile {
            waits,
            ..Profile::default()
        };
        p.metadata.duration_ns = duration_ns;
        p
    }

    /// A window holds what ended between its snapshots: a grown record's difference, a new
    /// record whole, and no record that did not change.
    #[test]
    fn since_subtracts_matching_records() {
        let earlier = snapshot(1_000, vec![wait(2, 3, 300), wait(3, 1, 50)]);
        let later = snapshot(3_000, vec![wait(2, 5, 500), wait(3, 1, 50), wait(4, 2, 20)]);
        let window = since(&later, &earlier);
        assert_eq!(window.metadata.duration_ns, 2_000);
        let got: Vec<(u32, u64, u64)> = window
            .waits
            .iter()
            .map(|w| (w.tid, w.stats.count, w.stats.total_ns))
            .collect();
        assert_eq!(got, [(2, 2, 200), (4, 2, 20)]);
        assert_eq!(window.waits[0].stats.histogram.total_count(), 2);
    }

    /// The window reaches back one window length from the latest snapshot, its waits and its
    /// blame alike, and the snapshots older than that are dropped.
    #[test]
    fn snapshots_keep_one_window() {
        let thread = ThreadRef { pid: 1, tid: 2 };
        let blame = Blame {
            thread,
            part: WaitPart::Asleep,
            call: None,
            object: 0x10,
            user_stack: None,
            kernel_stack: None,
            woken_by: None,
            waker: None,
            root: Root {
                kind: lockscope_probes::bottleneck::RootKind::Blocked,
                thread,
                call: None,
                user_stack: None,
                kernel_stack: None,
                woken_by: None,
                waker_name: None,
                holder: None,
                holder_name: None,
            },
            depth: 0,
            chain: Vec::new(),
            waits: 1,
            total_ns: 100,
        };
        let mut kept = Snapshots::new(2_000);
        for i in 1..=10u64 {
            let bottleneck = BottleneckAnalysis {
                intervals: i,
                blame: vec![blame.clone()],
                ..BottleneckAnalysis::default()
            };
            kept.push(
                snapshot(i * 1_000, vec![wait(2, i, i * 100)]),
                0,
                Vec::new(),
                Some(bottleneck),
            );
        }
        assert_eq!(kept.kept.len(), 3);
        let window = kept.with_window(true, |w| {
            let bottleneck = w.bottleneck.as_ref().expect("the window's analysis");
            let blame: Vec<(u64, u64)> = bottleneck
                .blame
                .iter()
                .map(|b| (b.waits, b.total_ns))
                .collect();
            (
                w.metadata.duration_ns,
                w.waits[0].stats.count,
                bottleneck.intervals,
                blame,
            )
        });
        // Two intervals: the snapshots at 9 and 10 s; the one at 8 s is the window's start.
        assert_eq!(window, Some((2_000, 2, 2, vec![(2, 200)])));
    }
}

#[cfg(test)]
mod agree {
    use super::*;
    use lockscope::report::Classified;
    use lockscope::sweep::{summarize_level, LevelWhy};

    /// `profile` at `duration_ns` as a live snapshot gives it: no stacks, no bottleneck analysis.
    fn bare(profile: &Profile, duration_ns: u64) -> Profile {
        let mut bare = Profile {
            stacks: Vec::new(),
            bottleneck: None,
            ..profile.clone()
        };
        bare.metadata.duration_ns = duration_ns;
        bare
    }

    /// `bottleneck` with only the blame records `keep` chooses (by index), and no samples.
    fn part_of(
        bottleneck: &BottleneckAnalysis,
        keep: impl Fn(usize) -> bool,
    ) -> BottleneckAnalysis {
        BottleneckAnalysis {
            blame: (bottleneck.blame.iter().enumerate())
                .filter(|(i, _)| keep(*i))
                .map(|(_, b)| b.clone())
                .collect(),
            sampled: Vec::new(),
            ..counts_of(bottleneck)
        }
    }

    /// The window from the attach (an empty first snapshot) of a recorded profile holds its
    /// waits, thread times and bottleneck analysis whole, each record's blame split over two
    /// intervals: the report's classification, the sites, the time split and `why`'s causes of
    /// the two are the same.
    #[test]
    fn window_from_the_attach_is_the_report_and_why() {
        let profile = crate::top::demo_profile();
        let bottleneck = profile.bottleneck.clone().expect("a bottleneck analysis");
        let half = |b: &Blame| Blame {
            waits: b.waits / 2,
            total_ns: b.total_ns / 2,
            ..b.clone()
        };
        let rest = |b: &Blame| Blame {
            waits: b.waits - b.waits / 2,
            total_ns: b.total_ns - b.total_ns / 2,
            ..b.clone()
        };
        let first = BottleneckAnalysis {
            blame: bottleneck.blame.iter().map(half).collect(),
            ..bottleneck.clone()
        };
        let second = BottleneckAnalysis {
            blame: bottleneck.blame.iter().map(rest).collect(),
            sampled: Vec::new(),
            ..counts_of(&bottleneck)
        };
        let mut kept = Snapshots::new(u64::MAX);
        kept.push(bare(&profile, 0), 0, Vec::new(), None);
        let middle = profile.metadata.duration_ns / 2;
        kept.push(
            Profile {
                waits: Vec::new(),
                thread_times: Vec::new(),
                ..bare(&profile, middle)
            },
            0,
            profile.stacks.clone(),
            Some(first),
        );
        kept.push(
            bare(&profile, profile.metadata.duration_ns),
            profile.stacks.len(),
            Vec::new(),
            Some(second),
        );
        let (classified, level, why, merged) = kept
            .with_window(true, |w| {
                (
                    Classified::of(w),
                    summarize_level(0, 0.0, w, ("", "")),
                    LevelWhy::of(w),
                    w.bottleneck.clone(),
                )
            })
            .expect("a window");
        let merged = merged.expect("the window's bottleneck analysis");
        assert_eq!(merged.blame.len(), bottleneck.blame.len());
        assert_eq!(
            merged.blame.iter().map(|b| b.total_ns).sum::<u64>(),
            bottleneck.blame.iter().map(|b| b.total_ns).sum::<u64>()
        );
        assert_eq!(classified, Classified::of(&profile));
        let report = summarize_level(0, 0.0, &profile, ("", ""));
        assert_eq!(level.top_sites, report.top_sites);
        assert_eq!(level.breakdown, report.breakdown);
        let whole = LevelWhy::of(&profile).expect("why's causes");
        assert!(!whole.causes.is_empty());
        assert_eq!(why, Some(whole));
    }

    /// A window that starts after the attach has the causes of its own intervals only: the blame
    /// of the interval before it is not in them, and they are `why`'s causes of a profile with
    /// that interval's blame alone.
    #[test]
    fn window_causes_are_the_window_s() {
        let profile = crate::top::demo_profile();
        let bottleneck = profile.bottleneck.clone().expect("a bottleneck analysis");
        let early = part_of(&bottleneck, |i| i % 3 == 0);
        let late = part_of(&bottleneck, |i| i % 3 != 0);
        let mut kept = Snapshots::new(1_000);
        // The waits and thread times all in the window, the blame of the early interval not.
        let before = Profile {
            waits: Vec::new(),
            thread_times: Vec::new(),
            ..bare(&profile, 500)
        };
        kept.push(before, 0, profile.stacks.clone(), Some(early.clone()));
        kept.push(
            bare(&profile, 1_500),
            profile.stacks.len(),
            Vec::new(),
            Some(late.clone()),
        );
        let why = kept.with_window(true, LevelWhy::of).expect("a window");
        let alone = Profile {
            bottleneck: Some(late),
            ..profile.clone()
        };
        let expected = LevelWhy::of(&alone).expect("why's causes");
        assert_eq!(why, Some(expected.clone()));
        let with_early = LevelWhy::of(&profile).expect("why's causes");
        assert_ne!(
            expected, with_early,
            "the early interval's blame changes nothing here"
        );
    }

    /// Every record of an analysis (its key in words), with its waits and time, sorted.
    fn sums(blame: &[Blame]) -> Vec<(String, u64, u64)> {
        let mut sums: Vec<(String, u64, u64)> = (blame.iter())
            .map(|b| (format!("{:?}", blame_key(b)), b.waits, b.total_ns))
            .collect();
        sums.sort();
        sums
    }

    /// Arranged as intervals come and go (records dropped when their intervals left, the rest
    /// moved), the window's blame is what summing its intervals' blame afresh gives, record for
    /// record, heaviest first, and what an interval added is still taken back right.
    #[test]
    fn arranged_blame_is_the_sum_of_the_window_s_intervals() {
        let bottleneck = crate::top::demo_profile()
            .bottleneck
            .expect("a bottleneck analysis");
        assert!(bottleneck.blame.len() >= 6, "too few records to test");
        let intervals: Vec<BottleneckAnalysis> = (0..4)
            .map(|n| part_of(&bottleneck, |i| i % 4 == n || i % 4 == (n + 1) % 4))
            .collect();
        let mut window = WindowBlame::default();
        let mut added: VecDeque<Added> = VecDeque::new();
        for (n, interval) in intervals.iter().enumerate() {
            added.push_back(window.add(interval));
            if added.len() > 2 {
                if let Some(gone) = added.pop_front() {
                    window.take_back(&gone);
                }
            }
            window.arrange(added.iter_mut());
            let expected =
                merge_bottleneck(&intervals[n.saturating_sub(1)..=n]).expect("a merged analysis");
            assert_eq!(sums(&window.records), sums(&expected.blame), "interval {n}");
            assert!(
                (window.records.windows(2)).all(|p| p[0].total_ns >= p[1].total_ns),
                "interval {n}: not heaviest first"
            );
        }
        // The last two intervals have three records in four: the fourth left with the first two.
        assert!(window.records.len() < bottleneck.blame.len());
    }

    /// The sleeps' kinds remembered by site are those `classify_offcpu_sleeps` gives, on the
    /// first refresh and on a later one that reads them from memory.
    #[test]
    fn remembered_sleep_kinds_are_the_classification() {
        let classified = crate::top::demo_profile();
        let mut bare = classified.clone();
        for w in &mut bare.waits {
            if w.is_from(&OFFCPU) {
                w.kind = WaitKind::OffCpu;
            }
        }
        let kinds = |p: &Profile| p.waits.iter().map(|w| w.kind).collect::<Vec<_>>();
        assert_ne!(kinds(&bare), kinds(&classified), "no sleep to classify");
        let mut expected = bare.clone();
        lockscope_probes::overlap::classify_offcpu_sleeps(&mut expected);
        let mut memory = SleepKinds::default();
        for _ in 0..2 {
            let mut again = bare.clone();
            memory.classify(&mut again);
            assert_eq!(kinds(&again), kinds(&expected));
        }
    }
}
