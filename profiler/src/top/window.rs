//! The sliding window of `lockscope top`: what was recorded between two snapshots of one
//! recording ([`since`]), each snapshot the profile of everything from the attach to its moment
//! (`Recorder::snapshot`), and the snapshots kept to take the window and the trend from
//! ([`Snapshots`]).
//!
//! The probes' aggregates only grow while attached, so the waits of a window are the later
//! snapshot's records less the earlier's, matched by what a record is (probe, thread, object,
//! operation, who ended it, and its stacks by their frames: stack indices differ between
//! snapshots), and the threads' times the same way per thread. What stays of a record is a
//! profile's record: the report's analysis reads the window as it reads a recording.

use lockscope_probes::{Profile, Stack, StackId, ThreadTime, WaitRecord, WaitStats};
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

/// What a wait record is, whatever snapshot it is in: its probe, thread, object, operation,
/// who ended it and its stacks' frames (hashed).
type RecordKey = (String, u32, u32, u64, String, Option<String>, u64, u64);

/// A hash of a stack's frames (address and function), 0 for none.
fn stack_hash(profile: &Profile, id: Option<StackId>) -> u64 {
    let Some(stack) = profile.stack(id) else {
        return 0;
    };
    let Stack { space, frames, .. } = stack;
    let mut hasher = DefaultHasher::new();
    format!("{space:?}").hash(&mut hasher);
    for frame in frames {
        frame.address.hash(&mut hasher);
        frame.function.hash(&mut hasher);
    }
    hasher.finish()
}

fn record_key(profile: &Profile, w: &WaitRecord) -> RecordKey {
    (
        w.probe.clone(),
        w.pid,
        w.tid,
        w.object,
        w.operation.clone(),
        w.woken_by.map(|b| format!("{b:?}")),
        stack_hash(profile, w.user_stack),
        stack_hash(profile, w.kernel_stack),
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
/// The wakeups and the bottleneck analysis are not windowed (the chains of a wait cross the
/// window's edges): the window has none, and the causes are read from a whole snapshot.
pub fn since(later: &Profile, earlier: &Profile) -> Profile {
    let mut before: HashMap<RecordKey, WaitStats> = HashMap::new();
    for w in &earlier.waits {
        before
            .entry(record_key(earlier, w))
            .or_default()
            .merge(&w.stats);
    }
    let mut waits = Vec::new();
    for w in &later.waits {
        let stats = match before.get_mut(&record_key(later, w)) {
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
    let times_before: HashMap<(u32, u32), &ThreadTime> = earlier
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

/// The snapshots of a recording that the window and the trend need: the latest, and those up
/// to one window before it (older ones are dropped: memory stays flat however long it runs).
pub struct Snapshots {
    window_ns: u64,
    kept: VecDeque<Profile>,
}

impl Snapshots {
    /// None yet, for a window of `window_ns`.
    pub fn new(window_ns: u64) -> Self {
        Snapshots {
            window_ns,
            kept: VecDeque::new(),
        }
    }

    /// Adds the latest snapshot, dropping those the window no longer reaches.
    pub fn push(&mut self, snapshot: Profile) {
        let now = snapshot.metadata.duration_ns;
        self.kept.push_back(snapshot);
        // Keep the newest snapshot at or before the window's start, and all after it.
        while self.kept.len() > 2
            && self
                .kept
                .get(1)
                .is_some_and(|s| now.saturating_sub(s.metadata.duration_ns) >= self.window_ns)
        {
            self.kept.pop_front();
        }
    }

    /// The latest snapshot: everything recorded so far.
    pub fn latest(&self) -> Option<&Profile> {
        self.kept.back()
    }

    /// The window: what was recorded in the last `window_ns` (or since the attach, before one
    /// window has passed).
    pub fn window(&self) -> Option<Profile> {
        let latest = self.kept.back()?;
        let now = latest.metadata.duration_ns;
        match self.kept.front() {
            Some(first) if now.saturating_sub(first.metadata.duration_ns) >= self.window_ns => {
                Some(since(latest, first))
            }
            _ => Some(latest.clone()),
        }
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

    /// The window reaches back one window length from the latest snapshot, and the snapshots
    /// older than that are dropped.
    #[test]
    fn snapshots_keep_one_window() {
        let mut kept = Snapshots::new(2_000);
        for i in 1..=10u64 {
            kept.push(snapshot(i * 1_000, vec![wait(2, i, i * 100)]));
        }
        assert_eq!(kept.kept.len(), 3);
        let window = kept.window().expect("a window");
        assert_eq!(window.metadata.duration_ns, 2_000);
        assert_eq!(window.waits[0].stats.count, 2);
    }
}

#[cfg(test)]
mod agree {
    use super::*;
    use lockscope::report::Classified;

    /// The window from the attach (an empty first snapshot) of a recorded profile holds its
    /// waits and thread times whole: the report's classification of the two is the same.
    #[test]
    fn window_from_the_attach_classifies_as_the_report() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/demo/demo-bottleneck.lsp"
        );
        let profile = lockscope_probes::read_profile(std::path::Path::new(path)).expect("profile");
        let mut attach = Profile {
            metadata: profile.metadata.clone(),
            ..Profile::default()
        };
        attach.metadata.duration_ns = 0;
        let window = since(&profile, &attach);
        // The report's numbers (the bottleneck analysis, which the window leaves out, tells no
        // role otherwise here), and the sites and time split the view shows.
        assert_eq!(Classified::of(&window), Classified::of(&profile));
        let view = lockscope::sweep::summarize_level(0, 0.0, &window, ("", ""));
        let report = lockscope::sweep::summarize_level(0, 0.0, &profile, ("", ""));
        assert_eq!(view.top_sites, report.top_sites);
        assert_eq!(view.breakdown, report.breakdown);
    }
}
