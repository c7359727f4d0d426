//! One interval's analysis: blames each nanosecond of a thread's wait on what the threads it
//! waited for did meanwhile, following wakeups from thread to thread (to a depth limit) through
//! their timelines until a root: a thread on a CPU, blocked, runnable, in a cycle or unknown.

use super::blames::{Blames, RootKey};
use super::{EngineLimits, HashMap, IntervalKind, RawWait};
use crate::bottleneck::timeline::{Piece, Stored, Timeline};
use crate::bottleneck::{RootKind, SampleRole, ThreadRef, WaitPart, WokenBy};
use std::hash::Hash;

/// Where a thread of the chain was when it woke the thread before it: the waker's stacks at the
/// wakeup.
#[derive(Clone, Copy)]
struct WokeAt<S> {
    user_stack: Option<S>,
    kernel_stack: Option<S>,
}

/// Where the walk is in one wait: the wait being blamed, the threads followed from it (each
/// with its user stack where it slept, `None` for the last), and how deep.
struct Path<S> {
    side: RawWait<S>,
    chain: Vec<(ThreadRef, Option<S>)>,
    depth: u32,
}

/// A stretch of time, `[from, to)` in nanoseconds.
#[derive(Clone, Copy)]
struct Span {
    from: u64,
    to: u64,
}

/// One interval's analysis: reads the timelines, adds to the blame.
pub(super) struct Walk<'a, S> {
    pub(super) threads: &'a HashMap<u32, Timeline<S>>,
    pub(super) limits: EngineLimits,
    pub(super) blames: &'a mut Blames<S>,
}

impl<S: Copy + Eq + Hash> Walk<'_, S> {
    /// Blames every nanosecond of `interval` of `thread`.
    pub(super) fn interval(&mut self, thread: ThreadRef, interval: &Stored<S>) {
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
                let mut path = Path {
                    side,
                    chain: vec![(thread, interval.user_stack)],
                    depth: 0,
                };
                let span = Span {
                    from: interval.start,
                    to: interval.wakeup,
                };
                self.asleep(&mut path, thread, interval, span);
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
            // After a sleep, the sleep's kernel stack: a thread woken by a kernel lock's holder
            // waits for a CPU because it slept on the lock, and `why` charges that wait to the
            // lock (a preemption has none).
            kernel_stack: match interval.kind {
                IntervalKind::Sleep => interval.kernel_stack,
                IntervalKind::Preempted | IntervalKind::New => None,
            },
            woken_by: None,
            waker: None,
        };
        self.sample_holder(interval, runnable_from, interval.end);
        let root = self.saturation_root(thread, interval);
        let chain = [(thread, interval.user_stack)];
        self.blames
            .add(side, root, 0, &chain, interval.end - runnable_from);
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
            self.blames
                .add_sample((SampleRole::Holder, holder, None, sample));
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

    /// Blames `ns` of the path's wait to `root`, the last thread of the chain.
    fn add(&mut self, path: &Path<S>, root: RootKey<S>, ns: u64) {
        self.blames
            .add(path.side, root, path.depth, &path.chain, ns);
    }

    /// Blames `ns` of the path's wait to `root`, with `hop` (a thread, and its stack where it
    /// slept) at the chain's end.
    fn add_at(
        &mut self,
        path: &mut Path<S>,
        hop: (ThreadRef, Option<S>),
        root: RootKey<S>,
        ns: u64,
    ) {
        path.chain.push(hop);
        self.add(path, root, ns);
        path.chain.pop();
    }

    /// Blames `span` of `sleeper`'s sleep `interval` (at the path's depth from the waiting
    /// thread): to what its waker did meanwhile when a thread of the program woke it, else to the
    /// sleep.
    fn asleep(&mut self, path: &mut Path<S>, sleeper: ThreadRef, interval: &Stored<S>, span: Span) {
        match interval.waker {
            Some(waker) if interval.woken_by == Some(WokenBy::Program) => {
                let woke_at = WokeAt {
                    user_stack: interval.waker_user_stack,
                    kernel_stack: interval.waker_kernel_stack,
                };
                path.depth += 1;
                self.follow(path, waker, span, woke_at);
                path.depth -= 1;
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
                self.add(path, root, span.to - span.from);
            }
        }
    }

    /// Blames `span` to what `thread` did then, the path's depth from the waiting thread;
    /// `woke_at` is where it ended the sleep that led here (at `span.to`).
    fn follow(&mut self, path: &mut Path<S>, thread: ThreadRef, span: Span, woke_at: WokeAt<S>) {
        let Span { from, to } = span;
        if from >= to {
            return;
        }
        if path.chain.iter().any(|(t, _)| t.tid == thread.tid) {
            let root = Self::simple_root(RootKind::Cycle, thread, woke_at.user_stack);
            self.add_at(path, (thread, None), root, to - from);
            return;
        }
        if path.depth > self.limits.max_depth {
            let root = Self::simple_root(RootKind::DepthLimit, thread, woke_at.user_stack);
            self.add_at(path, (thread, None), root, to - from);
            return;
        }
        let Some(timeline) = self.threads.get(&thread.tid) else {
            // Never switched during the recording: on a CPU all along.
            let root = RootKey {
                kernel_stack: woke_at.kernel_stack,
                ..Self::simple_root(RootKind::Cpu, thread, woke_at.user_stack)
            };
            self.add_at(path, (thread, None), root, to - from);
            return;
        };
        for (start, end, piece) in timeline.pieces(from, to) {
            match piece {
                Piece::Unknown => {
                    let root = Self::simple_root(RootKind::Unknown, thread, None);
                    self.add_at(path, (thread, None), root, end - start);
                }
                Piece::OnCpu { next } => {
                    // The stack where this stretch of running ended: its next switch-out, or
                    // the wakeup that led here; and what it ran meanwhile, where sampled.
                    let stack = next.map_or(woke_at.user_stack, |n| n.user_stack);
                    for sample in timeline.samples_in(start, end) {
                        self.blames
                            .add_sample((SampleRole::Root, thread, stack, sample));
                    }
                    // Ended at the wakeup: the root's kernel stack as it woke the chain's next
                    // thread (a kernel lock's release).
                    let root = RootKey {
                        kernel_stack: next.map_or(woke_at.kernel_stack, |_| None),
                        ..Self::simple_root(RootKind::Cpu, thread, stack)
                    };
                    self.add_at(path, (thread, None), root, end - start);
                }
                Piece::Runnable { interval } => {
                    self.sample_holder(interval, start, end);
                    let root = self.saturation_root(thread, interval);
                    self.add_at(path, (thread, interval.user_stack), root, end - start);
                }
                Piece::Asleep { interval } => {
                    path.chain.push((thread, interval.user_stack));
                    self.asleep(
                        path,
                        thread,
                        interval,
                        Span {
                            from: start,
                            to: end,
                        },
                    );
                    path.chain.pop();
                }
            }
        }
    }
}
