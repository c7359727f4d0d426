//! The blame being summed: one record per wait, root and depth with the time and waits blamed on
//! it, coarse (no stacks, calls, lock words) past the record limit; and the weights of the
//! samples of `cpu` roots and of CPU holders.
//!
//! Each record's identity is stored once, as the key of an insertion-ordered map whose values are
//! its sums (a hash map of keys to indices beside a list of whole records held every key twice,
//! and every name of a root once per record); names stay interned until the blame is read out.
//! With change tracking on ([`Blames::track_changes`]), the records and samples changed since the
//! last [`Blames::take_changed`] are remembered, for a live view's snapshots.

use super::{HashMap, NameId, RawBlame, RawRoot, RawSampled, RawWait};
use crate::bottleneck::{SampleRole, ThreadRef};
use indexmap::map::Entry;
use indexmap::IndexMap;
use std::hash::Hash;

/// The identity of a blame record (everything but its chain and sums): its wait, its root with
/// names interned, its depth.
type Key<S> = (RawWait<S>, RootKey<S>, u32);

/// A root while the engine sums: names as interned ids.
pub(super) type RootKey<S> = RawRoot<S, NameId>;

/// What a weighted sample is counted under: its role, thread, the end stack of the stretch it
/// belongs to (a `cpu` root's), its own stack.
pub(super) type SampleKey<S> = (SampleRole, ThreadRef, Option<S>, Option<S>);

/// A record's chain and sums.
struct Sums<S> {
    /// [`RawBlame::chain`]; boxed, not a vector: no spare capacity kept per record.
    chain: Box<[(ThreadRef, Option<S>)]>,
    waits: u64,
    total_ns: u64,
    /// `waits` and `total_ns` at the last [`Blames::take_changed`] (with change tracking).
    taken: (u64, u64),
    /// In [`Blames::changed`] already.
    changed: bool,
}

/// The blame being summed.
pub(super) struct Blames<S> {
    /// [`super::EngineLimits::max_records`].
    max_records: usize,
    /// [`super::EngineCounts::stackless_ns`].
    pub(super) stackless_ns: u64,
    records: IndexMap<Key<S>, Sums<S>, ahash::RandomState>,
    /// Records the interval being analysed touched (their `waits` grow by one after it).
    touched: Vec<usize>,
    /// Weights of the samples of `cpu` roots and of CPU holders: (role, thread, end stack,
    /// sample's stack).
    sampled: HashMap<SampleKey<S>, u64>,
    /// With change tracking: the records changed since the last take, and the samples' weights
    /// added since; `None` without.
    changes: Option<Changes<S>>,
}

/// What changed since the last [`Blames::take_changed`].
struct Changes<S> {
    changed: Vec<usize>,
    sampled: HashMap<SampleKey<S>, u64>,
}

impl<S: Copy + Eq + Hash> Blames<S> {
    /// No blame yet; records past `max_records` go coarse.
    pub(super) fn new(max_records: usize) -> Self {
        Blames {
            max_records,
            stackless_ns: 0,
            records: IndexMap::default(),
            touched: Vec::new(),
            sampled: HashMap::default(),
            changes: None,
        }
    }

    /// From now on, remembers what changed for [`Blames::take_changed`].
    pub(super) fn track_changes(&mut self) {
        if self.changes.is_none() {
            self.changes = Some(Changes {
                changed: Vec::new(),
                sampled: HashMap::default(),
            });
        }
    }

    pub(super) fn add(
        &mut self,
        side: RawWait<S>,
        root: RootKey<S>,
        depth: u32,
        chain: &[(ThreadRef, Option<S>)],
        ns: u64,
    ) {
        if ns == 0 {
            return;
        }
        let mut key = (side, root, depth);
        let mut coarse = false;
        if self.records.len() >= self.max_records && !self.records.contains_key(&key) {
            key = (coarse_wait(key.0), coarse_root(&key.1), depth);
            coarse = true;
            self.stackless_ns = self.stackless_ns.saturating_add(ns);
        }
        // One hash and one comparison of the key per call: the engine's hottest line.
        let entry = self.records.entry(key);
        let i = entry.index();
        let sums = match entry {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => entry.insert(Sums {
                chain: if coarse {
                    chain.iter().map(|&(t, _)| (t, None)).collect()
                } else {
                    chain.into()
                },
                waits: 0,
                total_ns: 0,
                taken: (0, 0),
                changed: false,
            }),
        };
        sums.total_ns = sums.total_ns.saturating_add(ns);
        if let Some(changes) = &mut self.changes {
            if !sums.changed {
                sums.changed = true;
                changes.changed.push(i);
            }
        }
        self.touched.push(i);
    }

    /// Adds one to the weight of a sample.
    pub(super) fn add_sample(&mut self, key: SampleKey<S>) {
        *self.sampled.entry(key).or_insert(0) += 1;
        if let Some(changes) = &mut self.changes {
            *changes.sampled.entry(key).or_insert(0) += 1;
        }
    }

    pub(super) fn count_touched(&mut self) {
        self.touched.sort_unstable();
        self.touched.dedup();
        for &i in &self.touched {
            if let Some((_, sums)) = self.records.get_index_mut(i) {
                sums.waits += 1;
            }
        }
        self.touched.clear();
    }

    /// Every record, its names looked up in `names`, in the order they were first seen.
    pub(super) fn records(&self, names: &[String]) -> Vec<RawBlame<S>> {
        self.records
            .iter()
            .map(|(key, sums)| raw_blame(key, sums, sums.waits, sums.total_ns, names))
            .collect()
    }

    /// Every sample's weight.
    pub(super) fn sampled(&self) -> Vec<RawSampled<S>> {
        raw_sampled(&self.sampled)
    }

    /// The records and sample weights added to since the last call, each record with what was
    /// added to it; the first call (change tracking off) gives the whole blame and turns it on.
    pub(super) fn take_changed(
        &mut self,
        names: &[String],
    ) -> (Vec<RawBlame<S>>, Vec<RawSampled<S>>) {
        let Some(changes) = &mut self.changes else {
            // The first take: everything so far, and the changes from now on.
            self.track_changes();
            for sums in self.records.values_mut() {
                sums.taken = (sums.waits, sums.total_ns);
            }
            return (self.records(names), self.sampled());
        };
        let mut records = Vec::with_capacity(changes.changed.len());
        for i in changes.changed.drain(..) {
            let Some((key, sums)) = self.records.get_index_mut(i) else {
                continue;
            };
            let (waits, total_ns) = sums.taken;
            records.push(raw_blame(
                key,
                sums,
                sums.waits - waits,
                sums.total_ns - total_ns,
                names,
            ));
            sums.taken = (sums.waits, sums.total_ns);
            sums.changed = false;
        }
        let sampled = raw_sampled(&changes.sampled);
        changes.sampled.clear();
        (records, sampled)
    }
}

/// A record as the engine returns it.
fn raw_blame<S: Copy>(
    (wait, root, depth): &Key<S>,
    sums: &Sums<S>,
    waits: u64,
    total_ns: u64,
    names: &[String],
) -> RawBlame<S> {
    RawBlame {
        wait: *wait,
        root: root.clone().named(names),
        depth: *depth,
        chain: sums.chain.to_vec(),
        waits,
        total_ns,
    }
}

fn raw_sampled<S: Copy>(sampled: &HashMap<SampleKey<S>, u64>) -> Vec<RawSampled<S>> {
    sampled
        .iter()
        .map(|(&(role, thread, end_stack, stack), &weight)| RawSampled {
            role,
            thread,
            end_stack,
            stack,
            weight,
        })
        .collect()
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
