//! The blame being summed: one record per wait, root and depth with the time and waits blamed on
//! it, coarse (no stacks, calls, lock words) past the record limit; and the weights of the
//! samples of `cpu` roots and of CPU holders.

use super::{HashMap, RawBlame, RawRoot, RawWait};
use crate::bottleneck::{SampleRole, ThreadRef};
use std::collections::hash_map::Entry;
use std::hash::Hash;

/// The identity of a blame record (everything but its chain and sums): its wait, its root with
/// names interned, its depth.
type Key<S> = (RawWait<S>, RootKey<S>, u32);

/// A root while the engine sums: names as interned ids.
pub(super) type RootKey<S> = RawRoot<S, u32>;

/// What a weighted sample is counted under: its role, thread, the end stack of the stretch it
/// belongs to (a `cpu` root's), its own stack.
type SampleKey<S> = (SampleRole, ThreadRef, Option<S>, Option<S>);

/// The blame being summed.
pub(super) struct Blames<S> {
    /// [`super::EngineLimits::max_records`].
    max_records: usize,
    /// [`super::EngineCounts::stackless_ns`].
    pub(super) stackless_ns: u64,
    index: HashMap<Key<S>, usize>,
    pub(super) records: Vec<RawBlame<S>>,
    /// Records the interval being analysed touched (their `waits` grow by one after it).
    touched: Vec<usize>,
    /// Weights of the samples of `cpu` roots and of CPU holders: (role, thread, end stack,
    /// sample's stack).
    pub(super) sampled: HashMap<SampleKey<S>, u64>,
}

impl<S: Copy + Eq + Hash> Blames<S> {
    /// No blame yet; records past `max_records` go coarse.
    pub(super) fn new(max_records: usize) -> Self {
        Blames {
            max_records,
            stackless_ns: 0,
            index: HashMap::default(),
            records: Vec::new(),
            touched: Vec::new(),
            sampled: HashMap::default(),
        }
    }

    pub(super) fn add(
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

    pub(super) fn count_touched(&mut self) {
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
