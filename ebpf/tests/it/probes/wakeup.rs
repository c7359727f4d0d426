//! The wakeup probe on real processes: each wake path's kernel stack, and interrupts' stacks
//! sampled.

use super::*;

/// Each kind of wakeup keeps the waker's kernel stack of its own path, although the wakeup probe
/// walks a futex wake command's path once and reuses it: FUTEX_WAKE, FUTEX_WAKE_OP,
/// FUTEX_CMP_REQUEUE and a pipe write, each PATH_WAKES times from its own function, show their
/// own kernel functions and none of the others' (by name's end: 6.18 calls `pipe_write`
/// `anon_pipe_write`).
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn wakeup_kernel_stacks_follow_each_wake_path() {
    require_bpf!();
    let profile = record("helper_wake_paths", &["offcpu", "wakeup"]);
    // (the waking function, the kernel function its path must show)
    let paths = [
        ("wake_by_futex_wake", "futex_wake"),
        ("wake_by_wake_op", "futex_wake_op"),
        ("wake_by_requeue", "futex_requeue"),
        ("wake_by_pipe_write", "pipe_write"),
    ];
    let has = |stack: Option<lockscope_probes::StackId>, function: &str| {
        profile.stack(stack).is_some_and(|s| {
            s.frames
                .iter()
                .any(|f| f.function.as_deref().is_some_and(|n| n.ends_with(function)))
        })
    };
    for (function, kernel_function) in paths {
        let wakes: Vec<_> = profile
            .wakeups
            .iter()
            .filter(|w| {
                profile
                    .stack(w.waker_user_stack)
                    .is_some_and(|s| s.frames.iter().any(|f| f.display_name().contains(function)))
            })
            .collect();
        let n: u64 = wakes.iter().map(|w| w.stats.count).sum();
        assert!(
            n >= u64::from(PATH_WAKES),
            "{function}: {n} wakeups recorded: {wakes:#?}"
        );
        for wake in wakes {
            let names: Vec<String> = profile
                .stack(wake.waker_kernel_stack)
                .unwrap_or_else(|| panic!("{function}: no waker kernel stack: {wake:?}"))
                .frames
                .iter()
                .map(|f| f.display_name())
                .collect();
            assert!(
                has(wake.waker_kernel_stack, kernel_function),
                "{function}: waker kernel stack {names:?}"
            );
            for (_, other) in paths.iter().filter(|(_, k)| *k != kernel_function) {
                assert!(
                    !has(wake.waker_kernel_stack, other),
                    "{function}: waker kernel stack {names:?} shows {other}"
                );
            }
        }
    }
}

/// The `wakeup` probe takes an interrupt's kernel stack at most once per 10 ms of a thread's
/// sleeps, and keeps every wakeup: of SHORT_SLEEPS 1 ms sleeps ended by their timer, all are
/// recorded as woken by an interrupt, a few with the timer's stack (`hrtimer_wakeup`), the rest
/// without one, and the profile says so.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn wakeup_samples_interrupt_stacks() {
    require_bpf!();
    let profile = record("helper_short_sleeps", &["offcpu", "wakeup"]);
    let sleeper = profile
        .threads
        .iter()
        .find(|t| t.name == "short-sleeper")
        .expect("the sleeping thread");
    let by_interrupt: Vec<_> = profile
        .wakeups
        .iter()
        .filter(|w| w.tid == sleeper.tid && w.waker_tid == 0)
        .collect();
    let all: u64 = by_interrupt.iter().map(|w| w.stats.count).sum();
    assert!(
        all * 100 >= SHORT_SLEEPS * 95,
        "{all} of {SHORT_SLEEPS} timer wakeups recorded: {by_interrupt:#?}"
    );
    let with_stack: u64 = by_interrupt
        .iter()
        .filter(|w| {
            profile.stack(w.waker_kernel_stack).is_some_and(|s| {
                s.frames
                    .iter()
                    .any(|f| f.function.as_deref() == Some("hrtimer_wakeup"))
            })
        })
        .map(|w| w.stats.count)
        .sum();
    // At most one stack per 10 ms of the thread's wall time (targ_interrupt_waker_stack_interval
    // _ns), and its wall time is what its sleeps took: about SHORT_SLEEPS ms, longer on a loaded
    // machine where 1 ms sleeps overrun. Without the sampling every wakeup would have one.
    let wall_ns = profile
        .thread_times
        .iter()
        .find(|t| t.tid == sleeper.tid)
        .expect("the sleeper's thread times")
        .wall_ns;
    let most = wall_ns / 10_000_000 + 1;
    assert!(
        (1..=most).contains(&with_stack) && most < all / 2,
        "{with_stack} of {all} timer wakeups with the timer's stack, at most {most} in the \
         sleeper's {wall_ns} ns: {by_interrupt:#?}"
    );
    assert!(
        profile
            .metadata
            .warnings
            .iter()
            .any(|w| w.contains("wakeups from interrupt context have no kernel stack")),
        "{:?}",
        profile.metadata.warnings
    );
}

/// Sleeps of the interrupt-stack sampling workload, 1 ms each.
const SHORT_SLEEPS: u64 = 200;

/// Workload: a thread named `short-sleeper` sleeps 1 ms SHORT_SLEEPS times.
#[test]
#[ignore = "helper process of wakeup_samples_interrupt_stacks"]
fn helper_short_sleeps() {
    if !is_helper_run("helper_short_sleeps") {
        return;
    }
    std::thread::Builder::new()
        .name("short-sleeper".into())
        .spawn(|| {
            for _ in 0..SHORT_SLEEPS {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
        .expect("spawn")
        .join()
        .expect("join");
}

/// How many times each path of the wake-path workload wakes the sleeper, and after how long.
const PATH_WAKES: u32 = 3;
const WAKE_AFTER: Duration = Duration::from_millis(20);

/// futex(2) with a second word: `count2` goes in the timeout's place, as the wake and requeue
/// commands take it.
fn futex2(
    word: &AtomicU32,
    op: i32,
    count: u32,
    count2: usize,
    word2: &AtomicU32,
    val3: u32,
) -> i64 {
    // SAFETY: both words are live and aligned; the commands used here read the fourth argument
    // as a count, never as a pointer.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            count,
            count2,
            word2.as_ptr(),
            val3,
        )
    }
}

#[inline(never)]
fn wake_by_futex_wake(word: &AtomicU32, _: &AtomicU32) {
    word.fetch_add(1, Ordering::SeqCst);
    futex2(
        word,
        libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
        1,
        0,
        word,
        0,
    );
}

#[inline(never)]
fn wake_by_wake_op(word: &AtomicU32, other: &AtomicU32) {
    word.fetch_add(1, Ordering::SeqCst);
    // Operation 0: set `other` to 0, then wake none there if it was 0 (FUTEX_OP(SET, 0, EQ, 0)).
    futex2(
        word,
        libc::FUTEX_WAKE_OP | libc::FUTEX_PRIVATE_FLAG,
        1,
        0,
        other,
        0,
    );
}

#[inline(never)]
fn wake_by_requeue(word: &AtomicU32, other: &AtomicU32) {
    let value = word.fetch_add(1, Ordering::SeqCst) + 1;
    // Wakes one waiter of `word` and moves none to `other`, if `word` still holds `value`.
    futex2(
        word,
        libc::FUTEX_CMP_REQUEUE | libc::FUTEX_PRIVATE_FLAG,
        1,
        0,
        other,
        value,
    );
}

#[inline(never)]
fn wake_by_pipe_write(write_end: &mut std::io::PipeWriter) {
    write_end.write_all(b"x").expect("write the pipe");
}

/// Workload: a thread wakes a sleeping one PATH_WAKES times by each of FUTEX_WAKE, FUTEX_WAKE_OP,
/// FUTEX_CMP_REQUEUE (the sleeper in FUTEX_WAIT) and a pipe write (the sleeper in read), each
/// from its own function, WAKE_AFTER after the sleeper went to sleep.
#[test]
#[ignore = "helper process of wakeup_kernel_stacks_follow_each_wake_path"]
fn helper_wake_paths() {
    if !is_helper_run("helper_wake_paths") {
        return;
    }
    let word = std::sync::Arc::new(AtomicU32::new(0));
    let other = std::sync::Arc::new(AtomicU32::new(0));
    let (mut read_end, mut write_end) = std::io::pipe().expect("pipe");
    let futex_wakes = 3 * PATH_WAKES;
    let waker = {
        let (word, other) = (word.clone(), other.clone());
        std::thread::spawn(move || {
            let wakes: [fn(&AtomicU32, &AtomicU32); 3] =
                [wake_by_futex_wake, wake_by_wake_op, wake_by_requeue];
            for wake in wakes {
                for _ in 0..PATH_WAKES {
                    std::thread::sleep(WAKE_AFTER);
                    wake(&word, &other);
                }
            }
            for _ in 0..PATH_WAKES {
                std::thread::sleep(WAKE_AFTER);
                wake_by_pipe_write(&mut write_end);
            }
        })
    };
    let mut seen = 0;
    while seen < futex_wakes {
        // Sleeps until the word moves past `seen` (a timeout just waits again).
        futex(
            &word,
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            seen,
            &timespec(Duration::from_secs(1)),
            0,
        );
        seen = word.load(Ordering::SeqCst);
    }
    let mut byte = [0u8; 1];
    for _ in 0..PATH_WAKES {
        read_end.read_exact(&mut byte).expect("read the pipe");
    }
    waker.join().expect("waker");
}
