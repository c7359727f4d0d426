//! One thread's recent past as the engine keeps it: its off-CPU intervals in order, and what the
//! thread was doing at any moment of a window (the [`Piece`]s).

use super::chunked::ChunkedQueue;
use super::engine::{IntervalKind, NameId};
use super::{ThreadRef, WokenBy};
use std::collections::VecDeque;

/// An off-CPU interval as the engine keeps it.
#[derive(Clone, Debug)]
pub(super) struct Stored<S> {
    pub start: u64,
    pub wakeup: u64,
    pub end: u64,
    pub kind: IntervalKind,
    pub call: i32,
    pub object: u64,
    pub woken_by: Option<WokenBy>,
    pub waker: Option<ThreadRef>,
    /// Interned name of the thread outside the program that ended it.
    pub waker_name: Option<NameId>,
    pub user_stack: Option<S>,
    pub kernel_stack: Option<S>,
    pub waker_user_stack: Option<S>,
    pub waker_kernel_stack: Option<S>,
    pub holder: Option<ThreadRef>,
    /// Interned name of the holder when outside the program.
    pub holder_name: Option<NameId>,
    /// Intervals were lost just before this one: the stretch since the previous one is unknown.
    pub after_gap: bool,
}

/// A thread's kept intervals.
#[derive(Debug)]
pub(super) struct Timeline<S> {
    pub pid: u32,
    /// Before this the thread's state is unknown (its creation, or the history's start).
    pub known_from: u64,
    /// Intervals in order; `base` is the number of the first one.
    pub intervals: ChunkedQueue<Stored<S>>,
    pub base: u64,
    /// The last interval number the backend gave, to tell lost ones.
    pub last_seq: Option<u32>,
    /// Its samples on a CPU (the `cpu` probe): time and user stack, in time order.
    pub samples: VecDeque<(u64, Option<S>)>,
}

/// What a thread was doing over part of a window.
#[derive(Clone, Copy, Debug)]
pub(super) enum Piece<'a, S> {
    /// Not known.
    Unknown,
    /// Running until `next` (its next switch-out), or, `None`, to the window's end.
    OnCpu { next: Option<&'a Stored<S>> },
    /// Asleep in `interval`, not woken yet.
    Asleep { interval: &'a Stored<S> },
    /// Runnable in `interval` (preempted, new, or woken and waiting for a CPU).
    Runnable { interval: &'a Stored<S> },
}

impl<S> Timeline<S> {
    pub fn new(pid: u32, known_from: u64) -> Self {
        Timeline {
            pid,
            known_from,
            intervals: ChunkedQueue::new(),
            base: 0,
            last_seq: None,
            samples: VecDeque::new(),
        }
    }

    /// Adds a sample taken at `time` (samples of one thread come about in order: it runs on one
    /// CPU at a time).
    pub fn add_sample(&mut self, time: u64, stack: Option<S>) {
        let at = self.samples.partition_point(|&(t, _)| t <= time);
        self.samples.insert(at, (time, stack));
    }

    /// The stacks of its samples in `[from, to)`.
    pub fn samples_in(&self, from: u64, to: u64) -> impl Iterator<Item = Option<S>> + '_
    where
        S: Copy,
    {
        let first = self.samples.partition_point(|&(t, _)| t < from);
        self.samples
            .iter()
            .skip(first)
            .take_while(move |&&(t, _)| t < to)
            .map(|&(_, stack)| stack)
    }

    /// The interval numbered `index` (see `base`), if still kept.
    pub fn get(&self, index: u64) -> Option<&Stored<S>> {
        let i = usize::try_from(index.checked_sub(self.base)?).ok()?;
        self.intervals.get(i)
    }

    /// The number the next pushed interval gets.
    pub fn next_index(&self) -> u64 {
        self.base + self.intervals.len() as u64
    }

    /// Forgets the intervals that ended before `horizon`; the thread is unknown before the end
    /// of the last one forgotten.
    pub fn prune(&mut self, horizon: u64) {
        while self.samples.front().is_some_and(|&(t, _)| t < horizon) {
            self.samples.pop_front();
        }
        while let Some(first) = self.intervals.front() {
            if first.end >= horizon {
                break;
            }
            self.known_from = self.known_from.max(first.end);
            self.intervals.pop_front();
            self.base += 1;
        }
        // A burst's capacity is given back once the thread is quieter (halving, not to fit, so
        // that a steady thread does not reallocate at every prune), all of it once the thread
        // has nothing left (exited: a server's connections come and go, and each exited
        // thread's queues kept their largest capacity; its state, ~100 bytes, stays). The
        // intervals' chunks go as they empty.
        shrink(&mut self.samples);
    }

    /// What the thread did over `[from, to)`, in order, as `(start, end, piece)` covering the
    /// window exactly.
    pub fn pieces(&self, from: u64, to: u64) -> Vec<(u64, u64, Piece<'_, S>)> {
        let mut out = Vec::new();
        let mut cursor = from;
        if cursor < to && cursor < self.known_from {
            let end = self.known_from.min(to);
            out.push((cursor, end, Piece::Unknown));
            cursor = end;
        }
        // The first interval that ends after the cursor (ends are in order).
        let first = self.intervals.partition_point(|i| i.end <= cursor);
        for interval in self.intervals.iter_from(first) {
            if cursor >= to {
                break;
            }
            if interval.start > cursor {
                let end = interval.start.min(to);
                let piece = if interval.after_gap {
                    Piece::Unknown
                } else if interval.start <= to {
                    Piece::OnCpu {
                        next: Some(interval),
                    }
                } else {
                    Piece::OnCpu { next: None }
                };
                out.push((cursor, end, piece));
                cursor = end;
                if cursor >= to {
                    break;
                }
            }
            let (asleep_end, runnable) = match interval.kind {
                IntervalKind::Sleep => (interval.wakeup, true),
                IntervalKind::Preempted | IntervalKind::New => (interval.start, true),
            };
            if cursor < asleep_end {
                let end = asleep_end.min(to);
                out.push((cursor, end, Piece::Asleep { interval }));
                cursor = end;
            }
            if runnable && cursor < to && cursor < interval.end {
                let end = interval.end.min(to);
                out.push((cursor, end, Piece::Runnable { interval }));
                cursor = end;
            }
        }
        if cursor < to {
            out.push((cursor, to, Piece::OnCpu { next: None }));
        }
        out
    }
}

/// Halves `queue`'s capacity when it is four times what it holds, frees it when it holds nothing.
fn shrink<T>(queue: &mut VecDeque<T>) {
    if queue.is_empty() {
        queue.shrink_to_fit();
    } else if queue.capacity() / 4 > queue.len().max(16) {
        queue.shrink_to(queue.capacity() / 2);
    }
}

#[cfg(test)]
mod tests {
    use super::Stored;

    /// An interval of the history takes 88 bytes with a 4-byte stack handle that has a niche (as
    /// the eBPF backend's): the history holds 10 s of every thread's intervals.
    #[test]
    fn stored_interval_stays_small() {
        assert_eq!(std::mem::size_of::<Stored<std::num::NonZeroU32>>(), 88);
    }
}
