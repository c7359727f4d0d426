//! Log2 histograms of wait times, bucketed like DTrace's `quantize()`.
//!
//! Slot 0 counts the value 0; slot `k >= 1` counts values in `[2^(k-1), 2^k)`, i.e. the slot of a
//! value is its bit length. The BPF side computes the same slot (see `ebpf/src/bpf/futex.h`), so a
//! histogram aggregated in the kernel and one built here agree bucket for bucket.

use serde::{Deserialize, Serialize};

/// Number of slots: one for zero plus one per bit of a `u64`.
pub const SLOTS: usize = 65;

/// A log2 histogram, stored sparsely as `(slot, count)` pairs sorted by slot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Log2Histogram {
    buckets: Vec<(u8, u64)>,
}

impl Log2Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self::default()
    }

    /// The slot a value falls into: its bit length (0 for 0, 1 for 1, 2 for 2..=3, ...).
    pub fn slot_of(value: u64) -> usize {
        (u64::BITS - value.leading_zeros()) as usize
    }

    /// The smallest value that falls into `slot` (0, 1, 2, 4, 8, ...).
    pub fn slot_lower_bound(slot: usize) -> u64 {
        match slot {
            0 => 0,
            s => 1u64 << (s - 1).min(63),
        }
    }

    /// The largest value that falls into `slot` (0, 1, 3, 7, ...).
    pub fn slot_upper_bound(slot: usize) -> u64 {
        match slot {
            0 => 0,
            s if s >= 64 => u64::MAX,
            s => (1u64 << s) - 1,
        }
    }

    /// Builds a histogram from dense per-slot counts (as the kernel aggregates them); slots past
    /// [`SLOTS`] are ignored, zero counts are dropped.
    pub fn from_dense(counts: &[u64]) -> Self {
        let buckets = counts
            .iter()
            .take(SLOTS)
            .enumerate()
            .filter(|(_, &c)| c != 0)
            .map(|(slot, &c)| (slot as u8, c))
            .collect();
        Self { buckets }
    }

    /// Adds `count` observations of `value`.
    pub fn record_n(&mut self, value: u64, count: u64) {
        self.add_to_slot(Self::slot_of(value), count);
    }

    /// Adds one observation of `value`.
    pub fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    fn add_to_slot(&mut self, slot: usize, count: u64) {
        if count == 0 {
            return;
        }
        let slot = slot.min(SLOTS - 1) as u8;
        match self.buckets.binary_search_by_key(&slot, |&(s, _)| s) {
            Ok(i) => self.buckets[i].1 = self.buckets[i].1.saturating_add(count),
            Err(i) => self.buckets.insert(i, (slot, count)),
        }
    }

    /// Adds every observation of `other` to this histogram.
    pub fn merge(&mut self, other: &Log2Histogram) {
        for &(slot, count) in &other.buckets {
            self.add_to_slot(slot as usize, count);
        }
    }

    /// Non-empty `(slot, count)` pairs in slot order.
    pub fn buckets(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.buckets.iter().map(|&(s, c)| (s as usize, c))
    }

    /// Count in one slot.
    pub fn count_in_slot(&self, slot: usize) -> u64 {
        self.buckets
            .iter()
            .find(|&&(s, _)| s as usize == slot)
            .map_or(0, |&(_, c)| c)
    }

    /// Total number of observations (saturating at `u64::MAX`: slots saturate too, and
    /// imported histograms can carry any counts).
    pub fn total_count(&self) -> u64 {
        self.buckets
            .iter()
            .fold(0u64, |total, &(_, c)| total.saturating_add(c))
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// An upper bound for the `q` quantile (`0.0..=1.0`): the top of the bucket holding it.
    /// `None` for an empty histogram.
    pub fn quantile_upper_bound(&self, q: f64) -> Option<u64> {
        let total = self.total_count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for &(slot, count) in &self.buckets {
            seen = seen.saturating_add(count);
            if seen >= rank {
                return Some(Self::slot_upper_bound(slot as usize));
            }
        }
        self.buckets
            .last()
            .map(|&(s, _)| Self::slot_upper_bound(s as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values at the edges of each power of two land in the slot DTrace's quantize() would use.
    #[test]
    fn slot_edges() {
        assert_eq!(Log2Histogram::slot_of(0), 0);
        assert_eq!(Log2Histogram::slot_of(1), 1);
        assert_eq!(Log2Histogram::slot_of(2), 2);
        assert_eq!(Log2Histogram::slot_of(3), 2);
        assert_eq!(Log2Histogram::slot_of(4), 3);
        assert_eq!(Log2Histogram::slot_of(1023), 10);
        assert_eq!(Log2Histogram::slot_of(1024), 11);
        assert_eq!(Log2Histogram::slot_of(u64::MAX), 64);
        for slot in 1..SLOTS {
            let lo = Log2Histogram::slot_lower_bound(slot);
            let hi = Log2Histogram::slot_upper_bound(slot);
            assert_eq!(
                Log2Histogram::slot_of(lo),
                slot,
                "lower bound of slot {slot}"
            );
            assert_eq!(
                Log2Histogram::slot_of(hi),
                slot,
                "upper bound of slot {slot}"
            );
            if slot > 1 {
                assert_eq!(
                    Log2Histogram::slot_of(lo - 1),
                    slot - 1,
                    "below slot {slot}"
                );
            }
        }
    }

    /// 200 ms lands in the [134.2 ms, 268.4 ms) bucket, as `quantize()` would print it.
    #[test]
    fn wait_of_200ms_bucket() {
        let mut h = Log2Histogram::new();
        h.record(200_000_000);
        let (slot, count) = h.buckets().next().expect("one bucket");
        assert_eq!(count, 1);
        assert_eq!(Log2Histogram::slot_lower_bound(slot), 134_217_728);
    }

    /// Dense kernel counts and sparse merges give the same histogram as recording one by one.
    #[test]
    fn dense_and_merge_agree() {
        let mut dense = [0u64; SLOTS];
        let mut direct = Log2Histogram::new();
        for v in [0u64, 1, 5, 5, 1000, 1_000_000, u64::MAX] {
            dense[Log2Histogram::slot_of(v)] += 1;
            direct.record(v);
        }
        let from_dense = Log2Histogram::from_dense(&dense);
        assert_eq!(from_dense, direct);
        let mut merged = Log2Histogram::new();
        merged.merge(&direct);
        merged.merge(&direct);
        assert_eq!(merged.total_count(), 14);
        assert_eq!(merged.count_in_slot(3), 4);
    }

    /// Quantiles report the top of the bucket that holds the rank.
    #[test]
    fn quantiles() {
        let mut h = Log2Histogram::new();
        assert_eq!(h.quantile_upper_bound(0.5), None);
        h.record_n(10, 99);
        h.record(5000);
        assert_eq!(h.quantile_upper_bound(0.5), Some(15));
        assert_eq!(h.quantile_upper_bound(0.99), Some(15));
        assert_eq!(h.quantile_upper_bound(1.0), Some(8191));
    }

    /// Counts near u64::MAX (imported histograms) saturate instead of overflowing.
    #[test]
    fn huge_counts_saturate() {
        let mut h = Log2Histogram::new();
        h.record_n(1, u64::MAX - 1);
        h.record_n(1 << 20, 7);
        assert_eq!(h.total_count(), u64::MAX);
        assert_eq!(h.quantile_upper_bound(1.0), Some((1 << 21) - 1));
    }
}
