//! The probes on real processes: here the lifecycle, syscall and klock probes and the verifier's
//! budget; the offcpu probe's times and stacks in `offcpu`, the wakeup probe's in `wakeup`, the
//! futex and mutex-hold probes on pthread primitives in `pthread`.
//!
//! These tests need root and a BPF-capable kernel; elsewhere they print "skipped: <why>" and
//! return. The workloads are this test binary itself, re-executed with the name of one of the
//! `helper_*` tests (ignored in normal runs), so what they do is known exactly.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{
    deadline, futex, helper_argv, is_helper_run, poll_until_exit, require_bpf, timespec, SERIAL,
};
use lockscope_ebpf::{probe_support, ProbeSettings, ProbeSupport, RecordOptions, Recorder};
use lockscope_probes::bottleneck::WokenBy;
use lockscope_probes::{AttachStatus, Profile, Target, TimeClass, WaitKind, WaitRecord};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

mod offcpu;
mod pthread;
mod wakeup;

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
