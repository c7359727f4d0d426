//! Unit tests of the bottleneck engine: sampled running, wakers on a CPU, cascades, cycles,
//! conservation of time, the record limit, history, lost intervals, spurious wakeups.

use super::*;

const A: ThreadRef = ThreadRef { pid: 1, tid: 1 };
const B: ThreadRef = ThreadRef { pid: 1, tid: 2 };
const C: ThreadRef = ThreadRef { pid: 1, tid: 3 };

/// A sleep of `thread` from `start` to `wakeup`, on a CPU again at `end`, at stack `stack`.
fn sleep(thread: ThreadRef, start: u64, wakeup: u64, end: u64, stack: u32) -> Interval<u32> {
    Interval {
        thread,
        seq: None,
        start_ns: start,
        wakeup_ns: wakeup,
        end_ns: end,
        kind: IntervalKind::Sleep,
        call: 202,
        object: 0,
        woken_by: None,
        waker: None,
        user_stack: Some(stack),
        kernel_stack: None,
        waker_user_stack: None,
        waker_kernel_stack: None,
        holder: None,
    }
}

fn woken_by(mut interval: Interval<u32>, waker: ThreadRef, at: u32) -> Interval<u32> {
    interval.woken_by = Some(WokenBy::Program);
    interval.waker = Some(waker);
    interval.waker_user_stack = Some(at);
    interval
}

fn by(mut interval: Interval<u32>, woken: WokenBy) -> Interval<u32> {
    interval.woken_by = Some(woken);
    interval
}

fn run(intervals: Vec<Interval<u32>>) -> Vec<RawBlame<u32>> {
    let mut engine = Engine::new(0, EngineLimits::default());
    for i in intervals {
        engine.push(i, None, None);
    }
    engine.finish().1
}

/// Samples of a waker taken while a wait was blamed on its running count once per wait that
/// covered them, under the stack where that running ended; samples outside are not counted.
#[test]
fn sampled_running() {
    let mut engine = Engine::new(0, EngineLimits::default());
    engine.push_sample(B, 50, Some(8));
    engine.push_sample(B, 60, Some(8));
    engine.push_sample(B, 150, Some(5));
    engine.push(woken_by(sleep(A, 0, 100, 100, 1), B, 9), None, None);
    engine.push(woken_by(sleep(C, 40, 100, 100, 1), B, 9), None, None);
    let (_, _, sampled) = engine.finish();
    let got: Vec<_> = sampled
        .iter()
        .map(|s| (s.role, s.thread.tid, s.end_stack, s.stack, s.weight))
        .collect();
    assert_eq!(got, vec![(SampleRole::Root, 2, Some(9), Some(8), 4)]);
}

/// The waiting thread's time per (root kind, root thread, root stack), asleep parts only.
fn roots(blame: &[RawBlame<u32>], of: ThreadRef) -> Vec<(RootKind, u32, Option<u32>, u64)> {
    let mut out: Vec<_> = blame
        .iter()
        .filter(|b| b.wait.thread == of && b.wait.part == WaitPart::Asleep)
        .map(|b| {
            (
                b.root.kind,
                b.root.thread.tid,
                b.root.user_stack,
                b.total_ns,
            )
        })
        .collect();
    out.sort();
    out
}

/// A wait ended by a thread that ran all along is that thread's CPU time, at the stack where
/// it woke the waiter.
#[test]
fn waker_on_cpu() {
    let blame = run(vec![woken_by(sleep(A, 0, 100, 110, 7), B, 9)]);
    assert_eq!(roots(&blame, A), vec![(RootKind::Cpu, 2, Some(9), 100)]);
    let runnable: Vec<_> = blame
        .iter()
        .filter(|b| b.wait.part == WaitPart::Runnable)
        .map(|b| (b.root.kind, b.total_ns))
        .collect();
    assert_eq!(runnable, vec![(RootKind::CpuSaturation, 10)]);
}

/// The runnable part after a sleep keeps the sleep's kernel stack (a wait for a CPU once a
/// kernel lock's holder let the thread go is the lock's to `why`); a preemption's has none.
#[test]
fn runnable_after_a_sleep_keeps_its_kernel_stack() {
    let mut slept = woken_by(sleep(A, 0, 100, 110, 7), B, 9);
    slept.kernel_stack = Some(30);
    let mut preempted = sleep(A, 200, 200, 250, 7);
    preempted.kind = IntervalKind::Preempted;
    preempted.kernel_stack = Some(31);
    let blame = run(vec![slept, preempted]);
    let mut parts: Vec<_> = blame
        .iter()
        .filter(|b| b.wait.thread == A)
        .map(|b| (b.wait.part, b.wait.kernel_stack, b.total_ns))
        .collect();
    parts.sort();
    assert_eq!(
        parts,
        vec![
            (WaitPart::Asleep, Some(30), 100),
            (WaitPart::Runnable, None, 50),
            (WaitPart::Runnable, Some(30), 10),
        ]
    );
}

/// A root on a CPU keeps the waker's kernel stack at the wakeup that ended its running (what it
/// did as it released the waiter: a kernel lock's `up_write`), but not where its running ended
/// at a switch-out of its own.
#[test]
fn waker_kernel_stack_at_the_release() {
    let mut released = woken_by(sleep(A, 0, 100, 110, 7), B, 9);
    released.waker_kernel_stack = Some(20);
    let blame = run(vec![released]);
    let root = blame
        .iter()
        .find(|b| b.wait.thread == A && b.wait.part == WaitPart::Asleep)
        .map(|b| (b.root.kind, b.root.user_stack, b.root.kernel_stack));
    assert_eq!(root, Some((RootKind::Cpu, Some(9), Some(20))));
    // B itself sleeps from 60 to 80 (woken by a timer): its running before ended at its own
    // switch-out, whose kernel stack is where it slept, not a release.
    let mut released = woken_by(sleep(A, 0, 100, 110, 7), B, 9);
    released.waker_kernel_stack = Some(20);
    let blame = run(vec![
        by(sleep(B, 60, 80, 80, 5), WokenBy::Interrupt),
        released,
    ]);
    let mut cpu: Vec<_> = blame
        .iter()
        .filter(|b| b.wait.thread == A && b.root.kind == RootKind::Cpu)
        .map(|b| (b.root.user_stack, b.root.kernel_stack, b.total_ns))
        .collect();
    cpu.sort();
    assert_eq!(cpu, vec![(Some(5), None, 60), (Some(9), Some(20), 20)]);
}

/// wPerf's cascade: A waits 100 for B, B waits 60 of it for C, who runs: 40 are B's CPU time
/// (before and after its own sleep), 60 C's; a sleep of C ended by a timer is `blocked`.
#[test]
fn cascade() {
    let blame = run(vec![
        by(sleep(C, 30, 50, 50, 5), WokenBy::Interrupt),
        woken_by(sleep(B, 20, 80, 80, 4), C, 6),
        woken_by(sleep(A, 0, 100, 100, 1), B, 2),
    ]);
    assert_eq!(
        roots(&blame, A),
        vec![
            (RootKind::Cpu, 2, Some(2), 20),
            (RootKind::Cpu, 2, Some(4), 20),
            (RootKind::Cpu, 3, Some(5), 10),
            (RootKind::Cpu, 3, Some(6), 30),
            (RootKind::Blocked, 3, Some(5), 20),
        ]
    );
    let depth: Vec<_> = blame
        .iter()
        .filter(|b| b.wait.thread == A && b.root.kind == RootKind::Blocked)
        .map(|b| {
            (
                b.depth,
                b.chain.iter().map(|(t, _)| t.tid).collect::<Vec<_>>(),
            )
        })
        .collect();
    assert_eq!(depth, vec![(2, vec![1, 2, 3])]);
}

/// Threads that wake each other in a ring end in a cycle, not in an endless walk.
#[test]
fn cycle() {
    let blame = run(vec![
        woken_by(sleep(B, 0, 100, 100, 4), A, 3),
        woken_by(sleep(A, 0, 100, 100, 1), B, 2),
    ]);
    assert!(
        roots(&blame, A).contains(&(RootKind::Cycle, 1, Some(3), 100)),
        "{:?}",
        roots(&blame, A)
    );
}

/// A deterministic pseudo-random schedule of 5 threads waking each other, sorted as the
/// engine takes it (each thread's intervals in order, globally by end).
fn random_schedule() -> Vec<Interval<u32>> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let threads: Vec<ThreadRef> = (1..=5).map(|tid| ThreadRef { pid: 1, tid }).collect();
    let mut clock = [0u64; 5];
    let mut intervals = Vec::new();
    for _ in 0..400 {
        let i = next(5) as usize;
        let start = clock[i] + next(50);
        let wakeup = start + next(500);
        let end = wakeup + next(30);
        clock[i] = end;
        let mut interval = sleep(threads[i], start, wakeup, end, next(4) as u32);
        match next(4) {
            0 => interval = by(interval, WokenBy::Interrupt),
            1 => interval.kind = IntervalKind::Preempted,
            _ => interval = woken_by(interval, threads[next(5) as usize], next(3) as u32),
        }
        if interval.kind == IntervalKind::Preempted {
            interval.wakeup_ns = interval.start_ns;
        }
        intervals.push(interval);
    }
    intervals.sort_by_key(|i| i.end_ns);
    intervals
}

/// The parts of every wait add up to the wait, however the timelines interleave.
#[test]
fn conservation() {
    let intervals = random_schedule();
    let expected: u64 = intervals.iter().map(|i| i.end_ns - i.start_ns).sum();
    let blame = run(intervals);
    let blamed: u64 = blame.iter().map(|b| b.total_ns).sum();
    assert_eq!(blamed, expected);
}

/// Past the record limit new records lose their stacks, not their time: the parts still
/// add up, the records stay few, and the stackless time is counted.
#[test]
fn record_limit_keeps_time_without_stacks() {
    let intervals = random_schedule();
    let expected: u64 = intervals.iter().map(|i| i.end_ns - i.start_ns).sum();
    let unlimited = run(intervals.clone()).len();
    let limits = EngineLimits {
        max_records: 10,
        ..EngineLimits::default()
    };
    let mut engine = Engine::new(0, limits);
    for i in intervals {
        engine.push(i, None, None);
    }
    let (counts, blame, _) = engine.finish();
    assert_eq!(blame.iter().map(|b| b.total_ns).sum::<u64>(), expected);
    assert!(blame.len() < unlimited, "{} of {unlimited}", blame.len());
    let stackless: u64 = blame[10..].iter().map(|b| b.total_ns).sum();
    assert!(counts.stackless_ns >= stackless && stackless > 0);
    for b in &blame[10..] {
        assert_eq!(
            (b.wait.user_stack, b.root.user_stack),
            (None, None),
            "{b:?}"
        );
        assert_eq!(
            (b.wait.object, b.wait.waker, b.root.holder),
            (0, None, None),
            "{b:?}"
        );
        assert!(b.chain.iter().all(|(_, stack)| stack.is_none()), "{b:?}");
    }
}

/// A waker's past older than the history is `unknown`; within it, known.
#[test]
fn history() {
    let limits = EngineLimits {
        history_ns: 1_000,
        lag_ns: 10,
        ..EngineLimits::default()
    };
    let mut engine = Engine::new(0, limits);
    engine.push(
        by(sleep(B, 100, 200, 200, 4), WokenBy::Interrupt),
        None,
        None,
    );
    engine.advance(5_000);
    engine.push(woken_by(sleep(A, 0, 5_000, 5_000, 1), B, 2), None, None);
    let (_, blame, _) = engine.finish();
    let roots = roots(&blame, A);
    assert_eq!(
        roots,
        vec![
            (RootKind::Cpu, 2, Some(2), 4_800),
            (RootKind::Unknown, 2, None, 200),
        ]
    );
}

/// A gap in a thread's interval numbers makes the stretch before the next interval unknown,
/// and counts the lost intervals.
#[test]
fn lost_intervals() {
    let mut engine = Engine::new(0, EngineLimits::default());
    let mut first = by(sleep(B, 0, 10, 10, 4), WokenBy::Interrupt);
    first.seq = Some(1);
    let mut after = by(sleep(B, 50, 60, 60, 4), WokenBy::Interrupt);
    after.seq = Some(4);
    engine.push(first, None, None);
    engine.push(after, None, None);
    engine.push(woken_by(sleep(A, 0, 100, 100, 1), B, 2), None, None);
    let (counts, blame, _) = engine.finish();
    assert_eq!(counts.lost_intervals, 2);
    assert!(
        roots(&blame, A).contains(&(RootKind::Unknown, 2, None, 40)),
        "{:?}",
        roots(&blame, A)
    );
}

/// A thread that sleeps again on the same word at the same site right after a wakeup had a
/// spurious wakeup; a sleep loop without a word did not.
#[test]
fn spurious_wakeups() {
    let mut engine = Engine::new(0, EngineLimits::default());
    let on_word = |mut i: Interval<u32>| {
        i.object = 0x1000;
        i
    };
    engine.push(
        on_word(woken_by(sleep(A, 0, 100, 105, 1), B, 2)),
        None,
        None,
    );
    engine.push(
        on_word(woken_by(sleep(A, 110, 200, 205, 1), C, 3)),
        None,
        None,
    );
    // A loop of sleeps (no word) wakes up on purpose each time.
    engine.push(by(sleep(B, 0, 100, 105, 4), WokenBy::Interrupt), None, None);
    engine.push(
        by(sleep(B, 110, 200, 205, 4), WokenBy::Interrupt),
        None,
        None,
    );
    let (counts, _, _) = engine.finish();
    assert_eq!(counts.spurious_wakeups, 1);
    assert_eq!(counts.spurious_wakeup_ns, 100);
}

/// With change tracking, each call of `changed` gives only what the intervals analysed since
/// the previous one added (a record's waits and time since, unchanged records left out), and
/// the changes summed are the whole blame `finish` gives.
#[test]
fn changes_since_the_last_take() {
    let limits = EngineLimits {
        lag_ns: 0,
        ..EngineLimits::default()
    };
    let mut engine = Engine::new(0, limits);
    engine.track_changes();
    engine.push(woken_by(sleep(A, 0, 100, 100, 1), B, 9), None, None);
    engine.push(woken_by(sleep(C, 0, 50, 50, 3), B, 8), None, None);
    engine.advance(100);
    let (_, first, _) = engine.changed();
    assert_eq!(roots(&first, A), vec![(RootKind::Cpu, 2, Some(9), 100)]);
    assert_eq!(roots(&first, C), vec![(RootKind::Cpu, 2, Some(8), 50)]);
    engine.push(woken_by(sleep(A, 200, 230, 230, 1), B, 9), None, None);
    engine.advance(300);
    let (counts, second, _) = engine.changed();
    assert_eq!(counts.intervals, 3);
    assert_eq!(roots(&second, A), vec![(RootKind::Cpu, 2, Some(9), 30)]);
    assert!(roots(&second, C).is_empty(), "{second:?}");
    let waits: Vec<u64> = second.iter().map(|b| b.waits).collect();
    assert_eq!(waits, [1], "{second:?}");
    let (_, third, _) = engine.changed();
    assert!(third.is_empty(), "{third:?}");
    let (_, whole, _) = engine.finish();
    let mut summed = roots(&first, A);
    summed.extend(roots(&second, A));
    let total: u64 = summed.iter().map(|r| r.3).sum();
    assert_eq!(roots(&whole, A), vec![(RootKind::Cpu, 2, Some(9), total)]);
}
