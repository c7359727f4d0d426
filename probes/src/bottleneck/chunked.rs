//! A first-in first-out queue kept in fixed-size chunks, for the engine's history: a thread's
//! intervals come in at the back and leave at the front as they age. A `VecDeque` grows by
//! doubling, so a queue of the history's size (thousands of intervals a thread) held up to as
//! much spare room as intervals (heaptrack: 64 MB of capacity for 45 MB of history); this one
//! holds at most one chunk of spare room, and never copies what it holds to grow.

use std::collections::VecDeque;

/// Items per chunk: 256 intervals of 88 bytes, 22 KB.
const CHUNK: usize = 256;

/// The queue: `len` items from `head` of the first chunk on.
#[derive(Debug)]
pub(super) struct ChunkedQueue<T> {
    chunks: VecDeque<Vec<T>>,
    /// Items of the first chunk already taken off the front (still in it, unused: dropped with
    /// the chunk).
    head: usize,
    len: usize,
}

impl<T> ChunkedQueue<T> {
    pub fn new() -> Self {
        ChunkedQueue {
            chunks: VecDeque::new(),
            head: 0,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The item `i` places from the front.
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let at = self.head + i;
        self.chunks.get(at / CHUNK)?.get(at % CHUNK)
    }

    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    pub fn back(&self) -> Option<&T> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    pub fn push_back(&mut self, item: T) {
        match self.chunks.back_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push(item),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(item);
                self.chunks.push_back(chunk);
            }
        }
        self.len += 1;
    }

    /// Takes the front item off; its chunk is freed once all its items are taken.
    pub fn pop_front(&mut self) {
        if self.len == 0 {
            return;
        }
        self.len -= 1;
        self.head += 1;
        if self.head == CHUNK || self.len == 0 {
            self.chunks.pop_front();
            self.head = 0;
        }
        if self.len == 0 {
            // The last chunk may be partly used: start afresh (and free the chunks' list).
            self.chunks = VecDeque::new();
        }
    }

    /// The index of the first item for which `pred` is false, the items being ordered so that
    /// `pred` is true for a prefix (as `slice::partition_point`).
    pub fn partition_point(&self, mut pred: impl FnMut(&T) -> bool) -> usize {
        let (mut low, mut high) = (0, self.len);
        while low < high {
            let mid = low + (high - low) / 2;
            match self.get(mid) {
                Some(item) if pred(item) => low = mid + 1,
                _ => high = mid,
            }
        }
        low
    }

    /// The items from the `first` from the front on, in order.
    pub fn iter_from(&self, first: usize) -> impl Iterator<Item = &T> + '_ {
        let at = self.head + first.min(self.len);
        self.chunks
            .iter()
            .skip(at / CHUNK)
            .enumerate()
            .flat_map(move |(n, chunk)| chunk[if n == 0 { at % CHUNK } else { 0 }..].iter())
    }
}

#[cfg(test)]
mod tests {
    use super::{ChunkedQueue, CHUNK};
    use std::collections::VecDeque;

    /// The queue answers as a `VecDeque` through pushes and pops across many chunk boundaries,
    /// emptying and refilling.
    #[test]
    fn behaves_as_a_vecdeque() {
        let mut queue = ChunkedQueue::new();
        let mut model = VecDeque::new();
        let mut next = 0u64;
        // Pushes and pops in uneven runs, so that the front moves through chunks unaligned.
        for round in 0..40usize {
            for _ in 0..(round * 37) % (3 * CHUNK) {
                queue.push_back(next);
                model.push_back(next);
                next += 1;
            }
            for _ in 0..(round * 53) % (3 * CHUNK) {
                queue.pop_front();
                model.pop_front();
            }
            assert_eq!(queue.len(), model.len());
            assert_eq!(queue.front(), model.front());
            assert_eq!(queue.back(), model.back());
            for i in [
                0,
                1,
                CHUNK - 1,
                CHUNK,
                model.len() / 2,
                model.len().saturating_sub(1),
            ] {
                assert_eq!(queue.get(i), model.get(i), "item {i} of round {round}");
            }
            for first in [0, 1, CHUNK + 3, model.len(), model.len() + 5] {
                let ours: Vec<_> = queue.iter_from(first).copied().collect();
                let theirs: Vec<_> = model.iter().skip(first).copied().collect();
                assert_eq!(ours, theirs, "from {first} in round {round}");
            }
            let cut = next.saturating_sub(100);
            assert_eq!(
                queue.partition_point(|&x| x < cut),
                model.partition_point(|&x| x < cut)
            );
        }
    }

    /// Emptied, the queue keeps no chunk; partly used, it keeps one chunk per `CHUNK` items and
    /// one more at most.
    #[test]
    fn holds_at_most_one_spare_chunk() {
        let mut queue = ChunkedQueue::new();
        for i in 0..(10 * CHUNK + 5) {
            queue.push_back(i);
        }
        for _ in 0..(3 * CHUNK + 7) {
            queue.pop_front();
        }
        assert_eq!(queue.chunks.len(), 8);
        while queue.len() > 0 {
            queue.pop_front();
        }
        assert_eq!(queue.chunks.len(), 0);
    }
}
