//! The offcpu, syscall, lifecycle and klock probes on real processes.
//!
//! These tests need root and a BPF-capable kernel; elsewhere they print "skipped: <why>" and
//! return. The workloads are this test binary itself, re-executed with the name of one of the
//! `helper_*` tests below (ignored in normal runs), so what they do is known exactly.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{
    deadline, futex, helper_argv, is_helper_run, poll_until_exit, require_bpf, timespec, SERIAL,
};
use lockscope_ebpf::{probe_support, ProbeSettings, ProbeSupport, RecordOptions, Recorder};
use lockscope_probes::waitfor::WokenBy;
use lockscope_probes::{AttachStatus, Profile, Target, TimeClass, WaitKind, WaitRecord};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Forks and spawns of the lifecycle workload.
const FORKS: usize = 5;
const SPAWNS: usize = 3;
/// Failing rmdir calls of the syscall workload.
const FAILED_RMDIRS: u64 = 7;
/// The sleep of the off-CPU workload.
const SLEEP: Duration = Duration::from_millis(500);
/// How long each CPU hog of the run-queue workload spins.
const SPIN: Duration = Duration::from_millis(600);

/// Records helper `name` with `probes` until it exits.
fn record(name: &str, probes: &[&str]) -> Profile {
    record_with(name, probes, &[])
}

/// Records helper `name` with `probes`, the syscall probe limited to `syscalls`, until it exits.
fn record_with(name: &str, probes: &[&str], syscalls: &[&str]) -> Profile {
    record_attached(name, probes, syscalls, || ())
}

/// Records helper `name` like [`record_with`], running `attached` once every probe is attached
/// (while the helper runs), and checks that every probe attached.
fn record_attached(
    name: &str,
    probes: &[&str],
    syscalls: &[&str],
    attached: impl FnOnce(),
) -> Profile {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut options = RecordOptions::new(Target::Command(helper_argv(name)));
    options.probes = probes.iter().map(|p| p.to_string()).collect();
    options.probe_settings.syscalls = syscalls.iter().map(|s| s.to_string()).collect();
    let mut recorder = Recorder::start(options).expect("start");
    attached();
    poll_until_exit(&mut recorder);
    let profile = recorder.finish("target exited").expect("finish");
    for probe in &profile.metadata.probes {
        assert_eq!(probe.status, AttachStatus::Attached, "{probe:?}");
    }
    profile
}

fn records<'a>(profile: &'a Profile, probe: &str, operation: &str) -> Vec<&'a WaitRecord> {
    profile
        .waits
        .iter()
        .filter(|w| w.probe == probe && w.operation == operation)
        .collect()
}

fn count(records: &[&WaitRecord]) -> u64 {
    records.iter().map(|r| r.stats.count).sum()
}

/// Every thread's classes add up to its wall time within 1%.
fn assert_breakdown_adds_up(profile: &Profile) {
    assert!(!profile.thread_times.is_empty(), "no thread times");
    for t in &profile.thread_times {
        let accounted = t.accounted_ns();
        let diff = accounted.abs_diff(t.wall_ns);
        assert!(
            diff * 100 <= t.wall_ns.max(1),
            "thread {} accounts {accounted} ns of {} ns: {t:?}",
            t.tid,
            t.wall_ns
        );
    }
}

/// A fork of N children and M spawns of /bin/true count exactly N forks and M execs (plus the
/// launcher's exec of the helper itself), with plausible latencies and the forking stacks.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn lifecycle_counts_forks_and_execs() {
    require_bpf!();
    let profile = record("helper_forks_and_execs", &["lifecycle"]);
    let forks = records(&profile, "lifecycle", "fork");
    assert_eq!(count(&forks), FORKS as u64, "{:#?}", profile.waits);
    let execs = records(&profile, "lifecycle", "exec");
    assert_eq!(count(&execs), SPAWNS as u64 + 1, "{:#?}", profile.waits);
    for r in forks.iter().chain(&execs) {
        assert!(r.stats.mean_ns() > 1_000, "{r:?}");
        assert!(r.stats.max_ns < 1_000_000_000, "{r:?}");
    }
    assert!(forks.iter().any(|r| r.kernel_stack.is_some()), "{forks:?}");
    // Each child and each spawned /bin/true exits.
    let exits = records(&profile, "lifecycle", "exit-process");
    assert!(count(&exits) >= (FORKS + SPAWNS) as u64, "{exits:?}");
}

/// A thread sleeping 500 ms in clock_nanosleep shows ~500 ms off-CPU in that state with its
/// kernel stack, and in its breakdown as `sleep`; every thread's breakdown adds up.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn offcpu_shows_a_sleep() {
    require_bpf!();
    let profile = record("helper_sleeps", &["offcpu"]);
    let sleeps = records(&profile, "offcpu", "sleeping in clock_nanosleep");
    let long: Vec<_> = sleeps
        .iter()
        .filter(|r| r.stats.max_ns >= SLEEP.as_nanos() as u64)
        .collect();
    assert_eq!(long.len(), 1, "{sleeps:#?}");
    let sleep = long[0];
    assert!(
        sleep.stats.max_ns < SLEEP.as_nanos() as u64 + 100_000_000,
        "{sleep:?}"
    );
    let stack = profile.stack(sleep.kernel_stack).expect("kernel stack");
    let names: Vec<String> = stack.frames.iter().map(|f| f.display_name()).collect();
    assert!(
        names.iter().any(|n| n.contains("nanosleep")),
        "kernel stack {names:?}"
    );
    let thread = profile
        .thread_times
        .iter()
        .find(|t| t.tid == sleep.tid)
        .expect("sleeper's times");
    assert!(
        thread.ns(TimeClass::Sleep) >= SLEEP.as_nanos() as u64,
        "{thread:?}"
    );
    // Who ended each sleep: the sleeper's timer expired in interrupt context (an hrtimer
    // callback: `current` there is whatever thread it landed on, never the waker), and the main
    // thread, joining, was woken by the sleeper's exit, a thread of the program.
    let woken =
        |t: &lockscope_probes::ThreadTime, by: WokenBy| t.woken_ns.get(&by).copied().unwrap_or(0);
    assert!(
        woken(thread, WokenBy::Interrupt) >= SLEEP.as_nanos() as u64,
        "the timer's wakeup is not an interrupt's: {thread:?}"
    );
    // The process lives through (almost) the whole recording.
    let main = profile
        .thread_times
        .iter()
        .find(|t| t.tid == profile.metadata.target.pid)
        .expect("main thread");
    assert!(
        main.wall_ns * 100 >= profile.metadata.duration_ns * 90,
        "{main:?} vs {} ns",
        profile.metadata.duration_ns
    );
    assert!(
        woken(main, WokenBy::Program) * 10 >= SLEEP.as_nanos() as u64 * 9,
        "the join's wakeup is not the program's: {main:?}"
    );
}

/// Each kind of sleep keeps the kernel stack of its own path, although offcpu walks a fixed path
/// once and reuses it: a futex wait and a PI futex lock (two commands of one system call), a
/// poll, a clock_nanosleep and a pipe read, each slept PATH_SLEEPS times by its own function,
/// show their own kernel functions and none of the others'.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn offcpu_kernel_stacks_follow_each_sleep_path() {
    require_bpf!();
    let profile = record("helper_sleep_paths", &["offcpu"]);
    // (the sleeping function, the kernel function its path must show, the other paths' ones)
    let paths = [
        ("sleep_in_futex_wait", "futex_wait"),
        ("sleep_in_futex_lock_pi", "futex_lock_pi"),
        ("sleep_in_poll", "do_sys_poll"),
        ("sleep_in_nanosleep", "nanosleep"),
        ("sleep_in_pipe_read", "pipe_read"),
    ];
    for (function, kernel_function) in paths {
        let sleeps: Vec<&WaitRecord> = profile
            .waits
            .iter()
            .filter(|w| w.probe == "offcpu" && w.operation.starts_with("sleeping in "))
            .filter(|w| {
                profile
                    .stack(w.user_stack)
                    .is_some_and(|s| s.frames.iter().any(|f| f.display_name().contains(function)))
            })
            .collect();
        assert!(
            count(&sleeps) >= PATH_SLEEPS,
            "{function}: {} sleeps recorded: {sleeps:#?}",
            count(&sleeps)
        );
        for sleep in sleeps {
            let names: Vec<String> = profile
                .stack(sleep.kernel_stack)
                .unwrap_or_else(|| panic!("{function}: no kernel stack: {sleep:?}"))
                .frames
                .iter()
                .map(|f| f.display_name())
                .collect();
            assert!(
                names.iter().any(|n| n.contains(kernel_function)),
                "{function}: kernel stack {names:?}"
            );
            for (_, other) in paths.iter().filter(|(_, k)| *k != kernel_function) {
                assert!(
                    !names.iter().any(|n| n.contains(other)),
                    "{function}: kernel stack {names:?} shows {other}"
                );
            }
        }
    }
}

/// Two CPU hogs pinned to one CPU wait for it in turn: each spends a large share of its wall time
/// in the run queue, preempted.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn offcpu_shows_run_queue_delay() {
    require_bpf!();
    let profile = record("helper_pinned_hogs", &["offcpu"]);
    assert_breakdown_adds_up(&profile);
    // The hogs never sleep: on a CPU or waiting for one all along (however busy the machine).
    let hogs: Vec<_> = profile
        .thread_times
        .iter()
        .filter(|t| {
            let runnable = t.ns(TimeClass::OnCpu) + t.ns(TimeClass::RunQueue);
            t.wall_ns >= SPIN.as_nanos() as u64 / 2 && runnable * 10 >= t.wall_ns * 9
        })
        .collect();
    assert!(hogs.len() >= 2, "{:#?}", profile.thread_times);
    for hog in hogs {
        let run_queue = hog.ns(TimeClass::RunQueue);
        assert!(run_queue * 5 >= hog.wall_ns, "{hog:?}");
        assert!(hog.involuntary_switches > 0, "{hog:?}");
    }
    assert!(!records(&profile, "offcpu", "preempted").is_empty());
}

/// A syscall failing with ENOENT is counted under that errno, apart from the successes.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn syscall_counts_errno() {
    require_bpf!();
    let profile = record("helper_failing_syscalls", &["syscall"]);
    let failed = records(&profile, "syscall", "rmdir ENOENT");
    assert_eq!(count(&failed), FAILED_RMDIRS, "{:#?}", profile.waits);
    let ok = records(&profile, "syscall", "getpid");
    assert!(count(&ok) >= 1, "no getpid");
}

/// `--syscalls rmdir` records rmdir and nothing else.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn syscall_filter_keeps_only_the_named_calls() {
    require_bpf!();
    let profile = record_with("helper_failing_syscalls", &["syscall"], &["rmdir"]);
    assert!(!profile.waits.is_empty());
    for w in &profile.waits {
        assert!(w.operation.starts_with("rmdir"), "{w:?}");
    }
    assert_eq!(
        count(&records(&profile, "syscall", "rmdir ENOENT")),
        FAILED_RMDIRS
    );
}

/// Threads mapping and unmapping memory in one address space contend its mmap lock: klock
/// records rwsem contention with kernel stacks.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn klock_shows_mmap_lock_contention() {
    require_bpf!();
    let profile = record("helper_mmap_storm", &["klock"]);
    let contended: Vec<_> = profile
        .waits
        .iter()
        .filter(|w| w.probe == "klock" && w.operation.starts_with("rwsem"))
        .collect();
    assert!(!contended.is_empty(), "{:#?}", profile.waits);
    assert!(contended.iter().all(|w| w.object != 0));
    assert!(contended.iter().any(|w| w.kernel_stack.is_some()));
}

/// Workload: fork FORKS children that exit at once, then spawn /bin/true SPAWNS times.
#[test]
#[ignore = "helper process of lifecycle_counts_forks_and_execs"]
fn helper_forks_and_execs() {
    if !is_helper_run("helper_forks_and_execs") {
        return;
    }
    for _ in 0..FORKS {
        // SAFETY: the child only calls _exit, which is async-signal-safe.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: exits the child without running the parent's destructors.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out pointer.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }
    for _ in 0..SPAWNS {
        let status = std::process::Command::new("/bin/true")
            .status()
            .expect("spawn /bin/true");
        assert!(status.success());
    }
}

/// The verifier's limit on the instructions it explores in one program (`BPF_COMPLEXITY_LIMIT_INSNS`).
const VERIFIER_LIMIT: u32 = 1_000_000;

/// Every program of every probe this kernel takes, all attached together, verified within half
/// of the verifier's limit: a kernel whose verifier explores more must not find lockscope at its
/// edge (6.18.44-fc-v1272 rejected every probe that takes stacks at 1,000,001 instructions while
/// an earlier build of the same 6.18.44 took them).
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn every_program_verifies_within_half_the_limit() {
    require_bpf!();
    // One recording at a time: record_attached holds SERIAL (taking it here too deadlocks).
    let probes: Vec<String> = probe_support(&ProbeSettings::default())
        .into_iter()
        .filter(|(_, support)| matches!(support, ProbeSupport::Loads))
        .map(|(name, _)| name.to_string())
        .collect();
    assert!(
        probes.iter().any(|p| p == "offcpu"),
        "probes that load: {probes:?}"
    );
    let probe_names: Vec<&str> = probes.iter().map(String::as_str).collect();
    let mut verified: Vec<(String, u32)> = Vec::new();
    record_attached("helper_sleeps", &probe_names, &[], || {
        // Every program lockscope loaded is attached now: this process's are the `lks_` ones.
        verified = libbpf_rs::query::ProgInfoIter::default()
            .filter_map(|info| {
                let name = info.name.to_string_lossy().into_owned();
                name.starts_with("lks_")
                    .then_some((name, info.verified_insns))
            })
            .collect();
    });
    let (most, most_insns) = verified
        .iter()
        .max_by_key(|(_, insns)| *insns)
        .cloned()
        .unwrap_or_default();
    println!(
        "{} programs of {probes:?}; the most: {most} with {most_insns} instructions",
        verified.len()
    );
    assert!(verified.len() >= probes.len(), "programs: {verified:?}");
    assert!(
        most_insns < VERIFIER_LIMIT / 2,
        "{most}: {most_insns} instructions verified of {VERIFIER_LIMIT}"
    );
}

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
    // SHORT_SLEEPS sleeps of 1 ms last at least SHORT_SLEEPS ms: one stack per 10 ms of them,
    // and a margin for sleeps that overran.
    assert!(
        (1..=SHORT_SLEEPS / 10 + 5).contains(&with_stack),
        "{with_stack} of {all} timer wakeups with the timer's stack: {by_interrupt:#?}"
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

/// Workload: a thread sleeps SLEEP.
#[test]
#[ignore = "helper process of offcpu_shows_a_sleep"]
fn helper_sleeps() {
    if !is_helper_run("helper_sleeps") {
        return;
    }
    std::thread::spawn(|| std::thread::sleep(SLEEP))
        .join()
        .expect("join");
}

/// How many times the sleep-path workload sleeps in each path, and how long each sleep lasts.
const PATH_SLEEPS: u64 = 3;
const PATH_SLEEP: Duration = Duration::from_millis(30);

#[inline(never)]
fn sleep_in_futex_wait(word: &AtomicU32) {
    // A relative timed wait on a word nobody wakes: it times out.
    futex(
        word,
        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
        0,
        &timespec(PATH_SLEEP),
        0,
    );
}

#[inline(never)]
fn sleep_in_futex_lock_pi(word: &AtomicU32) {
    // The word names a live thread as its owner: the lock blocks until its (absolute) timeout.
    let rc = futex(
        word,
        libc::FUTEX_LOCK_PI | libc::FUTEX_PRIVATE_FLAG,
        0,
        &deadline(libc::CLOCK_REALTIME, PATH_SLEEP),
        0,
    );
    assert_eq!(rc, -1, "FUTEX_LOCK_PI of a held word returned");
}

#[inline(never)]
fn sleep_in_poll() {
    // SAFETY: no descriptors: poll only sleeps for its timeout.
    unsafe { libc::poll(std::ptr::null_mut(), 0, PATH_SLEEP.as_millis() as i32) };
}

#[inline(never)]
fn sleep_in_nanosleep() {
    let request = timespec(PATH_SLEEP);
    // SAFETY: `request` is a valid timespec; no remainder is asked for.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &request, std::ptr::null_mut()) };
}

#[inline(never)]
fn sleep_in_pipe_read(read_end: &mut std::io::PipeReader) {
    let mut byte = [0u8; 1];
    read_end.read_exact(&mut byte).expect("read the pipe");
}

/// Workload: a thread sleeps PATH_SLEEPS times in each of a futex wait, a PI futex lock held by
/// another thread, a poll, a clock_nanosleep and a pipe read (a byte written PATH_SLEEP later),
/// each from its own function.
#[test]
#[ignore = "helper process of offcpu_kernel_stacks_follow_each_sleep_path"]
fn helper_sleep_paths() {
    if !is_helper_run("helper_sleep_paths") {
        return;
    }
    let wait_word = AtomicU32::new(0);
    let pi_word = std::sync::Arc::new(AtomicU32::new(0));
    let (owner_ready, owner_named) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let owner = {
        let pi_word = pi_word.clone();
        std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() } as u32;
            pi_word.store(tid, Ordering::SeqCst);
            owner_ready.send(()).expect("owner named");
            released.recv().ok();
        })
    };
    owner_named.recv().expect("owner named");
    let (mut read_end, mut write_end) = std::io::pipe().expect("pipe");
    let (ask, asked) = std::sync::mpsc::channel::<()>();
    // Writes a byte PATH_SLEEP after each request, so that each read finds the pipe empty.
    let writer = std::thread::spawn(move || {
        for () in asked {
            std::thread::sleep(PATH_SLEEP);
            write_end.write_all(b"x").expect("write the pipe");
        }
    });
    for _ in 0..PATH_SLEEPS {
        sleep_in_futex_wait(&wait_word);
        sleep_in_futex_lock_pi(&pi_word);
        sleep_in_poll();
        sleep_in_nanosleep();
        ask.send(()).expect("ask the writer");
        sleep_in_pipe_read(&mut read_end);
    }
    drop(ask);
    writer.join().expect("writer");
    release.send(()).expect("release the owner");
    owner.join().expect("owner");
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

/// Pins the calling thread to CPU 0.
fn pin_to_cpu0() {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: 0 is within the set.
    unsafe { libc::CPU_SET(0, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the given size; 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    assert_eq!(rc, 0, "sched_setaffinity");
}

/// Workload: two threads spin on CPU 0 for SPIN each.
#[test]
#[ignore = "helper process of offcpu_shows_run_queue_delay"]
fn helper_pinned_hogs() {
    if !is_helper_run("helper_pinned_hogs") {
        return;
    }
    let hogs: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(|| {
                pin_to_cpu0();
                let start = Instant::now();
                let mut n = 0u64;
                while start.elapsed() < SPIN {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
                n
            })
        })
        .collect();
    for hog in hogs {
        hog.join().expect("join");
    }
}

/// Workload: FAILED_RMDIRS rmdir calls on a missing path, and a getpid.
#[test]
#[ignore = "helper process of syscall_counts_errno"]
fn helper_failing_syscalls() {
    if !is_helper_run("helper_failing_syscalls") {
        return;
    }
    for _ in 0..FAILED_RMDIRS {
        // SAFETY: a NUL-terminated path; rmdir only reads it.
        let rc = unsafe { libc::rmdir(c"/nonexistent-lockscope-test/dir".as_ptr()) };
        assert_eq!(rc, -1);
    }
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() };
}

/// Workload: four threads map and unmap memory for 500 ms.
#[test]
#[ignore = "helper process of klock_shows_mmap_lock_contention"]
fn helper_mmap_storm() {
    if !is_helper_run("helper_mmap_storm") {
        return;
    }
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(500) {
                    // SAFETY: an anonymous private mapping, touched and unmapped right here.
                    unsafe {
                        let p = libc::mmap(
                            std::ptr::null_mut(),
                            1 << 20,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                            -1,
                            0,
                        );
                        assert_ne!(p, libc::MAP_FAILED);
                        *(p as *mut u8) = 1;
                        libc::munmap(p, 1 << 20);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("join");
    }
}

/// Waits of each pthread primitive land in their category (from the futex op and the user
/// frames), and a pool thread parked on a condvar for the whole run is labelled idle while the
/// mutex waits are not.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn futex_waits_are_classified() {
    require_bpf!();
    // With offcpu, each thread's own lifetime is its window (not the whole recording, whose
    // start-up a loaded machine can stretch).
    let profile = record("helper_sync_primitives", &["futex", "offcpu"]);
    let at_least = |kind: WaitKind, ns: u64| {
        let total: u64 = profile
            .waits
            .iter()
            .filter(|w| w.probe == "futex" && w.kind == kind)
            .map(|w| w.stats.total_ns)
            .sum();
        assert!(
            total >= ns,
            "{kind}: {total} ns < {ns} ns\n{:#?}",
            profile.waits
        );
    };
    // Each wait starts 50 ms into the hold (later if the holder starts late): about 150 ms.
    let held = HOLD.as_nanos() as u64 / 2;
    at_least(WaitKind::Mutex, held);
    at_least(WaitKind::RwlockRead, held);
    at_least(WaitKind::RwlockWrite, held);
    at_least(WaitKind::Condvar, held);
    at_least(WaitKind::Join, held);
    let idle = lockscope_probes::idle_waits(&profile);
    let idle_kinds: Vec<WaitKind> = idle.iter().map(|&i| profile.waits[i].kind).collect();
    assert!(
        idle_kinds.contains(&WaitKind::Condvar),
        "{idle_kinds:?}\n{:#?}\n{:#?}",
        profile.waits,
        profile.thread_times
    );
    for &i in &idle {
        assert_ne!(
            profile.waits[i].kind,
            WaitKind::Mutex,
            "{:?}",
            profile.waits[i]
        );
    }
}

/// How long each primitive is held while another thread waits for it.
const HOLD: Duration = Duration::from_millis(200);

/// A pthread object shared between threads (pthread types are plain memory with their own
/// synchronization).
struct Shared<T>(std::cell::UnsafeCell<T>);
// SAFETY: only ever used through the pthread functions, which synchronize.
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    fn ptr(&self) -> *mut T {
        self.0.get()
    }
}

static MUTEX: Shared<libc::pthread_mutex_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
static RWLOCK: Shared<libc::pthread_rwlock_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_RWLOCK_INITIALIZER));
static POOL_MUTEX: Shared<libc::pthread_mutex_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
static POOL_COND: Shared<libc::pthread_cond_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER));
static CV_MUTEX: Shared<libc::pthread_mutex_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
static CV: Shared<libc::pthread_cond_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER));
static CV_READY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static POOL_STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs `hold` in a thread that holds a primitive for HOLD while this thread, 50 ms in, runs
/// `wait` (which blocks on it).
fn contend(hold: impl FnOnce() + Send + 'static, wait: impl FnOnce()) {
    let holder = std::thread::spawn(hold);
    std::thread::sleep(Duration::from_millis(50));
    wait();
    holder.join().expect("join holder");
}

/// Workload: a mutex, a read lock, a write lock, a condvar and a join, each waited for about
/// HOLD, while a pool thread stays parked on a condvar the whole time.
#[test]
#[ignore = "helper process of futex_waits_are_classified"]
fn helper_sync_primitives() {
    if !is_helper_run("helper_sync_primitives") {
        return;
    }
    use std::sync::atomic::Ordering;
    // SAFETY (whole function): the pthread objects are statically initialized and live forever;
    // every lock is unlocked by the thread that took it.
    let pool = std::thread::spawn(|| unsafe {
        libc::pthread_mutex_lock(POOL_MUTEX.ptr());
        while !POOL_STOP.load(Ordering::SeqCst) {
            libc::pthread_cond_wait(POOL_COND.ptr(), POOL_MUTEX.ptr());
        }
        libc::pthread_mutex_unlock(POOL_MUTEX.ptr());
    });
    let hold_then = |lock: fn(), unlock: fn()| {
        move || {
            lock();
            std::thread::sleep(HOLD);
            unlock();
        }
    };
    // Mutex.
    contend(
        hold_then(
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_mutex_lock(MUTEX.ptr());
            },
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_mutex_unlock(MUTEX.ptr());
            },
        ),
        // SAFETY: pthread calls on statically initialized objects that live forever.
        || unsafe {
            libc::pthread_mutex_lock(MUTEX.ptr());
            libc::pthread_mutex_unlock(MUTEX.ptr());
        },
    );
    // Write lock waits for a reader.
    contend(
        hold_then(
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_rwlock_rdlock(RWLOCK.ptr());
            },
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_rwlock_unlock(RWLOCK.ptr());
            },
        ),
        // SAFETY: pthread calls on statically initialized objects that live forever.
        || unsafe {
            libc::pthread_rwlock_wrlock(RWLOCK.ptr());
            libc::pthread_rwlock_unlock(RWLOCK.ptr());
        },
    );
    // Read lock waits for a writer.
    contend(
        hold_then(
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_rwlock_wrlock(RWLOCK.ptr());
            },
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_rwlock_unlock(RWLOCK.ptr());
            },
        ),
        // SAFETY: pthread calls on statically initialized objects that live forever.
        || unsafe {
            libc::pthread_rwlock_rdlock(RWLOCK.ptr());
            libc::pthread_rwlock_unlock(RWLOCK.ptr());
        },
    );
    // Condvar: this thread waits until the other signals, HOLD later.
    // SAFETY: pthread calls on statically initialized objects that live forever.
    let signaller = std::thread::spawn(|| unsafe {
        std::thread::sleep(HOLD);
        libc::pthread_mutex_lock(CV_MUTEX.ptr());
        CV_READY.store(true, Ordering::SeqCst);
        libc::pthread_cond_signal(CV.ptr());
        libc::pthread_mutex_unlock(CV_MUTEX.ptr());
    });
    // SAFETY: pthread calls on statically initialized objects that live forever.
    unsafe {
        libc::pthread_mutex_lock(CV_MUTEX.ptr());
        while !CV_READY.load(Ordering::SeqCst) {
            libc::pthread_cond_wait(CV.ptr(), CV_MUTEX.ptr());
        }
        libc::pthread_mutex_unlock(CV_MUTEX.ptr());
    }
    signaller.join().expect("join signaller");
    // Join: a thread that sleeps HOLD.
    std::thread::spawn(|| std::thread::sleep(HOLD))
        .join()
        .expect("join sleeper");
    // Release the pool.
    // SAFETY: pthread calls on statically initialized objects that live forever.
    unsafe {
        libc::pthread_mutex_lock(POOL_MUTEX.ptr());
        POOL_STOP.store(true, Ordering::SeqCst);
        libc::pthread_cond_broadcast(POOL_COND.ptr());
        libc::pthread_mutex_unlock(POOL_MUTEX.ptr());
    }
    pool.join().expect("join pool");
}

/// A thread asleep for the whole recording (it never runs, so no scheduler event names it) still
/// gets its breakdown, classed by the system call it is blocked in.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn offcpu_accounts_threads_that_never_run() {
    require_bpf!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    // Let it reach its nanosleep.
    std::thread::sleep(Duration::from_millis(100));
    let mut options = RecordOptions::new(Target::pid(sleeper.id()));
    options.probes = vec!["offcpu".to_string()];
    let mut recorder = Recorder::start(options).expect("start");
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        recorder.poll().expect("poll");
        std::thread::sleep(Duration::from_millis(20));
    }
    let profile = recorder.finish("duration elapsed").expect("finish");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let time = profile
        .thread_times
        .iter()
        .find(|t| t.tid == sleeper.id())
        .expect("the sleeper's times");
    assert!(time.wall_ns >= 250_000_000, "{time:?}");
    assert_eq!(time.ns(TimeClass::Sleep), time.wall_ns, "{time:?}");
    assert_eq!(profile.thread_name(time.pid, time.tid), Some("sleep"));
}

/// The opt-in mutex-hold probe measures its own cost when it attaches, and records how long a
/// pthread mutex was held, apart from how it was acquired.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn mutex_hold_times() {
    require_bpf!();
    let profile = record("helper_holds_a_mutex", &["mutex-hold"]);
    let probe = &profile.metadata.probes[0];
    assert!(probe.hook.contains("measured"), "{probe:?}");
    let holds: Vec<_> = profile
        .waits
        .iter()
        .filter(|w| w.probe == "mutex-hold" && w.stats.max_ns >= HOLD.as_nanos() as u64)
        .collect();
    let count: u64 = holds.iter().map(|w| w.stats.count).sum();
    assert_eq!(count, 3, "{:#?}", profile.waits);
    assert!(holds.iter().all(|w| w.operation.starts_with("hold (")));
    assert!(holds
        .iter()
        .all(|w| w.stats.max_ns < 2 * HOLD.as_nanos() as u64));
}

/// Workload: holds a pthread mutex three times for HOLD.
#[test]
#[ignore = "helper process of mutex_hold_times"]
fn helper_holds_a_mutex() {
    if !is_helper_run("helper_holds_a_mutex") {
        return;
    }
    for _ in 0..3 {
        // SAFETY: pthread calls on statically initialized objects that live forever.
        unsafe { libc::pthread_mutex_lock(MUTEX.ptr()) };
        std::thread::sleep(HOLD);
        // SAFETY: as above; this thread holds the mutex.
        unsafe { libc::pthread_mutex_unlock(MUTEX.ptr()) };
    }
}
