//! The blame being summed: one record per wait, root and depth with the time and waits blamed on
//! it, coarse (no stacks, calls, lock words) past the record limit; and the weights of the
//! samples of `cpu` roots and of CPU holders.

use super::{HashMap, RawBlame, RawRoot, RawWait};
use crate::waitfor::{SampleRole, ThreadRef};
use std::hash::Hash;

/// The identity of a blame record (everything but its chain and sums): its wait and its root
/// (names interned), each as its number in [`Blames`]' tables of them, and its depth. Twelve
/// bytes to hash and compare where the wait and root themselves are 130: the engine hashes one
/// per piece of every interval it analyses.
type Key = (u32, u32, u32);

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
    /// The numbers of the waits and roots of the records, by value.
    wait_ids: HashMap<RawWait<S>, u32>,
    root_ids: HashMap<RootKey<S>, u32>,
    /// The last wait looked up, with its number: an interval's walk blames one wait on many
    /// roots, and comparing it costs less than hashing it again.
    last_wait: Option<(RawWait<S>, u32)>,
    index: HashMap<Key, usize>,
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
            wait_ids: HashMap::default(),
            root_ids: HashMap::default(),
            last_wait: None,
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
        let wait_id = match self.last_wait {
            Some((last, id)) if last == side => Some(id),
            _ => self.wait_ids.get(&side).copied(),
        };
        let known = wait_id
            .zip(self.root_ids.get(&root).copied())
            .and_then(|(w, r)| self.index.get(&(w, r, depth)).copied());
        if let Some(w) = wait_id {
            self.last_wait = Some((side, w));
        }
        let i = match known {
            Some(i) => i,
            None if self.records.len() >= self.max_records => {
                // Past the limit a new record is coarse: it joins the one of its threads and
                // kinds, without stacks.
                self.stackless_ns = self.stackless_ns.saturating_add(ns);
                let (wait, root) = (coarse_wait(side), coarse_root(&root));
                let key = (self.wait_id(wait), self.root_id(&root), depth);
                match self.index.get(&key) {
                    Some(&i) => i,
                    None => {
                        let chain = chain.iter().map(|&(t, _)| (t, None)).collect();
                        self.insert(key, wait, &root, depth, chain, names)
                    }
                }
            }
            None => {
                let key = (self.wait_id(side), self.root_id(&root), depth);
                self.insert(key, side, &root, depth, chain.to_vec(), names)
            }
        };
        self.records[i].total_ns = self.records[i].total_ns.saturating_add(ns);
        self.touched.push(i);
    }

    /// The number of `wait`, given it now if it has none.
    fn wait_id(&mut self, wait: RawWait<S>) -> u32 {
        let next = self.wait_ids.len() as u32;
        *self.wait_ids.entry(wait).or_insert(next)
    }

    /// The number of `root`, given it now if it has none.
    fn root_id(&mut self, root: &RootKey<S>) -> u32 {
        if let Some(&id) = self.root_ids.get(root) {
            return id;
        }
        let id = self.root_ids.len() as u32;
        self.root_ids.insert(root.clone(), id);
        id
    }

    /// A new record under `key`, with nothing summed yet; its index.
    fn insert(
        &mut self,
        key: Key,
        wait: RawWait<S>,
        root: &RootKey<S>,
        depth: u32,
        chain: Vec<(ThreadRef, Option<S>)>,
        names: &[String],
    ) -> usize {
        let i = self.records.len();
        self.records.push(RawBlame {
            wait,
            root: root.clone().named(names),
            depth,
            chain,
            waits: 0,
            total_ns: 0,
        });
        self.index.insert(key, i);
        i
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
