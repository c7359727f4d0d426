//! The rows both the table and the JSON show: per key (wait kind, thread group, canonical
//! stack), each side's statistics and normalized value, ranked by the absolute change.

use super::{diff_measure, measured_value, Normalization};
use crate::analysis::measure::Measure;
use crate::render::units::share;
use lockscope_probes::{Profile, WaitRecord, WaitStats};
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// One row of a side of the table.
#[derive(Clone, Debug, Default)]
pub(super) struct SideRow {
    pub(super) stats: WaitStats,
    pub(super) normalized: u64,
    /// Time over the recording's wall time: average threads waiting (on CPU for sampled CPU
    /// time); `None` for counts (events, samples) and without a duration.
    pub(super) avg_threads: Option<f64>,
    /// Wait time over the side's thread time (the `offcpu` probe's per-thread wall times
    /// summed), 0 to 1; `None` without them, and for imported captures.
    pub(super) share_of_thread_time: Option<f64>,
}

/// The threads' wall times summed (each the part of the recording it lived through): the whole
/// that shares of thread time are taken of; `None` without the `offcpu` probe's breakdown.
pub fn thread_time_ns(profile: &Profile) -> Option<u64> {
    let total = profile
        .thread_times
        .iter()
        .fold(0u64, |sum, t| sum.saturating_add(t.wall_ns));
    (total > 0).then_some(total)
}

/// The context one side's rows are computed in.
#[derive(Clone, Copy)]
struct Side<'a> {
    profile: &'a Profile,
    first: bool,
    normalization: Normalization,
    measure: Measure,
}

impl Side<'_> {
    fn row(&self, stats: WaitStats) -> SideRow {
        let normalized = self.normalization.apply(
            measured_value(&stats, self.measure),
            self.profile,
            self.first,
        );
        let wall_ns = self.profile.metadata.duration_ns;
        let avg_threads = (self.measure.is_timed() && wall_ns > 0)
            .then(|| stats.total_ns as f64 / wall_ns as f64);
        let share_of_thread_time = if self.measure == Measure::Waits {
            thread_time_ns(self.profile).map(|whole| share(stats.total_ns, whole))
        } else {
            None
        };
        SideRow {
            stats,
            normalized,
            avg_threads,
            share_of_thread_time,
        }
    }
}

/// Sorts `rows` by absolute normalized change, largest first (ties by key), and cuts them at `top`
/// (0: no cut); returns how many there were before the cut.
pub(super) fn rank_by_change<K: Ord + Clone>(
    rows: &mut Vec<(K, SideRow, SideRow)>,
    top: usize,
) -> usize {
    rows.sort_by_key(|(key, ra, rb)| {
        (
            Reverse((rb.normalized as i128 - ra.normalized as i128).unsigned_abs()),
            key.clone(),
        )
    });
    let total = rows.len();
    if top > 0 {
        rows.truncate(top);
    }
    total
}

/// Which records a grouping sums.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Records {
    /// The waits as every view counts them ([`crate::report::Classified`]): no interval of a
    /// thread waiting for a CPU.
    Waits,
    /// The waits and the intervals of threads waiting for a CPU (CPU saturation), each flagged
    /// where it is one ([`crate::diff::StackDiff`]'s `cpu_saturation`): the sites' rows, where
    /// the growth of the run queue is what a sweep's knee shows.
    WaitsAndCpuWaits,
}

/// Groups each side's `records` by `key`, returning rows for both sides over the union of keys.
pub(super) fn grouped<K: Ord + Clone>(
    a: &Profile,
    b: &Profile,
    normalization: Normalization,
    records: Records,
    key: impl Fn(&Profile, &WaitRecord) -> K,
) -> Vec<(K, SideRow, SideRow)> {
    let measure = diff_measure(a, b);
    let side = |profile, first| Side {
        profile,
        first,
        normalization,
        measure,
    };
    let (side_a, side_b) = (side(a, true), side(b, false));
    let mut sums: BTreeMap<K, [WaitStats; 2]> = BTreeMap::new();
    for (i, profile) in [a, b].into_iter().enumerate() {
        for record in profile
            .counted_waits()
            .filter(|w| records == Records::WaitsAndCpuWaits || !w.is_cpu_wait())
        {
            sums.entry(key(profile, record)).or_default()[i].merge(&record.stats);
        }
    }
    sums.into_iter()
        .map(|(k, [sa, sb])| (k, side_a.row(sa), side_b.row(sb)))
        .collect()
}
