//! Records real futex waits of real processes with the eBPF backend.
//!
//! These tests need root and a BPF-capable kernel; elsewhere they print "skipped: <why>" and
//! return. The workloads are this test binary itself, re-executed with the name of one of the
//! `helper_*` tests below (ignored in normal runs), so each wait is known: a futex wait with a
//! 200 ms timeout that nobody wakes lasts at least 200 ms, and at most what the thread measured
//! around its call (a loaded machine adds the wait for a CPU after the timer fires).

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{
    deadline, futex, helper_argv, helper_argv_reporting, is_helper_run, measure_wait,
    poll_until_exit, report_dir, reported_wait, require_bpf, timespec, SERIAL,
};
use lockscope_ebpf::{RecordOptions, Recorder};
use lockscope_probes::{AttachStatus, Log2Histogram, Profile, Target, WaitRecord};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicU32;
use std::time::Duration;

const LONG_WAIT: Duration = Duration::from_millis(200);
const SHORT_WAIT: Duration = Duration::from_millis(100);
/// Operation of the timed wait below (absolute CLOCK_REALTIME deadline: std never uses it).
const TIMED_WAIT_OP: &str = "FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME";

/// The nice value of thread `tid` (0: the calling thread).
fn thread_nice(tid: u32) -> i32 {
    // SAFETY: __errno_location returns this thread's errno; clearing it tells -1 from an error.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: plain integers, no memory effects.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
    // SAFETY: this thread's errno, as above.
    let errno = unsafe { *libc::__errno_location() };
    assert!(nice != -1 || errno == 0, "getpriority({tid})");
    nice
}

/// Waits on a futex word nobody wakes until an absolute CLOCK_REALTIME deadline `wait` away.
fn realtime_futex_wait(wait: Duration) {
    let word = AtomicU32::new(0);
    futex(
        &word,
        libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME,
        0,
        &deadline(libc::CLOCK_REALTIME, wait),
        libc::FUTEX_BITSET_MATCH_ANY,
    );
}

/// Waits on a futex word nobody wakes with a relative timeout (FUTEX_WAIT_PRIVATE).
fn relative_futex_wait(wait: Duration) {
    let word = AtomicU32::new(0);
    futex(
        &word,
        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
        0,
        &timespec(wait),
        0,
    );
}

/// Descriptors of this process that refer to BPF objects, and the ids of its BPF programs.
fn own_bpf_objects() -> (Vec<String>, BTreeSet<u32>) {
    let mut links = Vec::new();
    let mut prog_ids = BTreeSet::new();
    for entry in std::fs::read_dir("/proc/self/fd")
        .expect("fd dir")
        .flatten()
    {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        let target = target.to_string_lossy().into_owned();
        if !target.starts_with("anon_inode:bpf") {
            continue;
        }
        if target == "anon_inode:bpf-prog" {
            let fdinfo = format!("/proc/self/fdinfo/{}", entry.file_name().to_string_lossy());
            let info = std::fs::read_to_string(fdinfo).unwrap_or_default();
            if let Some(id) = info
                .lines()
                .find_map(|l| l.strip_prefix("prog_id:"))
                .and_then(|id| id.trim().parse().ok())
            {
                prog_ids.insert(id);
            }
        }
        links.push(target);
    }
    (links, prog_ids)
}

fn loaded_prog_ids() -> BTreeSet<u32> {
    libbpf_rs::query::ProgInfoIter::default()
        .map(|p| p.id)
        .collect()
}

/// Asserts a wait record is one wait of `timeout` as the thread measured it itself (`measured`,
/// around its system call): at least the timeout (less 5%: an absolute deadline is computed just
/// before the call, which a loaded machine can delay), at most what the thread measured (the
/// kernel's wait lies inside; 0.1 ms for the clock readings), and in its histogram slot.
fn assert_wait(record: &WaitRecord, timeout: Duration, measured: Duration) {
    assert_eq!(record.stats.count, 1, "{record:?}");
    let recorded = Duration::from_nanos(record.stats.total_ns);
    assert!(
        recorded >= timeout.mul_f64(0.95) && recorded <= measured + Duration::from_micros(100),
        "a wait of {recorded:?} recorded for a timeout of {timeout:?} that the thread measured as \
         {measured:?}"
    );
    assert_eq!(record.stats.max_ns, record.stats.total_ns);
    let slot = Log2Histogram::slot_of(record.stats.total_ns);
    assert_eq!(
        record.stats.histogram.count_in_slot(slot),
        1,
        "not in slot {slot}: {:?}",
        record.stats.histogram
    );
}

fn records_with_op<'a>(profile: &'a Profile, pid: u32, op: &str) -> Vec<&'a WaitRecord> {
    profile
        .waits
        .iter()
        .filter(|w| w.pid == pid && w.operation == op)
        .collect()
}

/// A launched command's 200 ms futex wait is recorded with its duration, histogram slot, op,
/// thread and stacks (symbolized although the command exited before finish), a 100 ms wait of a
/// process it forked is recorded too, and afterwards no BPF program or map of ours remains; the
/// command runs at the caller's priority (the loader's raised one is not inherited) and the
/// caller is back at its own.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn records_launched_command_and_its_children() {
    require_bpf!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let loaded_before = loaded_prog_ids();

    let reports = tempfile::tempdir().expect("tempdir");
    let argv = helper_argv_reporting("helper_launched", reports.path());
    let own_nice = thread_nice(0);
    let mut recorder = Recorder::start(RecordOptions::new(Target::Command(argv))).expect("start");
    assert_eq!(
        thread_nice(0),
        own_nice,
        "the caller's priority after start"
    );
    assert_eq!(
        thread_nice(recorder.target_pid()),
        own_nice,
        "the command's priority"
    );
    let (_, our_progs) = own_bpf_objects();
    assert!(
        !our_progs.is_empty(),
        "no BPF program loaded while recording"
    );
    assert!(our_progs.is_disjoint(&loaded_before));
    let pid = recorder.target_pid();
    poll_until_exit(&mut recorder);
    let status = recorder.target_exit_status().expect("exit status kept");
    assert!(status.success(), "helper failed: {status:?}");
    let profile = recorder.finish("target exited").expect("finish");

    let (left, _) = own_bpf_objects();
    assert!(
        left.is_empty(),
        "BPF objects left open after finish: {left:?}"
    );
    // The kernel frees a program whose last reference is gone after an RCU grace period (longer
    // for programs that call bpf_loop callbacks): give it a moment.
    let mut still_loaded: Vec<u32> = Vec::new();
    for _ in 0..50 {
        still_loaded = loaded_prog_ids()
            .intersection(&our_progs)
            .copied()
            .collect();
        if still_loaded.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        still_loaded.is_empty(),
        "programs still loaded: {still_loaded:?}"
    );

    let meta = &profile.metadata;
    assert_eq!(meta.backend, "ebpf");
    assert_eq!(meta.target.pid, pid);
    assert!(meta.target.launched);
    assert_eq!(meta.end_reason, "target exited");
    assert_eq!(meta.probes.len(), 1);
    assert_eq!(meta.probes[0].probe, "futex");
    assert_eq!(
        meta.probes[0].status,
        AttachStatus::Attached,
        "{:?}",
        meta.probes
    );
    let counted: u64 = profile.waits.iter().map(|w| w.stats.count).sum();
    assert!(
        meta.events >= counted,
        "events {} < recorded waits {counted}",
        meta.events
    );
    profile.validate().expect("consistent profile");

    let timed = records_with_op(&profile, pid, TIMED_WAIT_OP);
    assert_eq!(timed.len(), 1, "records: {:#?}", profile.waits);
    let wait = timed[0];
    assert_wait(wait, LONG_WAIT, reported_wait(reports.path(), wait.tid));
    assert!(profile
        .thread_name(pid, wait.tid)
        .is_some_and(|n| !n.is_empty()));

    // The wait entered the kernel through libc's syscall(): the leaf user frame, symbolized
    // from the maps snapshot after the helper exited.
    let user = profile.stack(wait.user_stack).expect("user stack");
    let leaf = &user.frames[0];
    assert_eq!(leaf.module.as_deref(), Some("libc.so.6"), "{leaf:?}");
    assert_eq!(leaf.function.as_deref(), Some("syscall"), "{leaf:?}");
    // A wait that ends at its system call's exit has no kernel stack on any hook: there it is
    // the return path, the same for every wait (futex.bpf.c's on_wait_end takes one only at a
    // thread's exit).
    assert_eq!(
        wait.kernel_stack, None,
        "hook {}: {wait:?}",
        meta.probes[0].hook
    );

    // The forked child process: another pid, its own op.
    let child_waits: Vec<&WaitRecord> = profile
        .waits
        .iter()
        .filter(|w| w.pid != pid && w.operation == "FUTEX_WAIT_PRIVATE")
        .filter(|w| w.stats.total_ns > SHORT_WAIT.as_nanos() as u64 / 2)
        .collect();
    assert_eq!(child_waits.len(), 1, "records: {:#?}", profile.waits);
    let child_wait = child_waits[0];
    assert_wait(
        child_wait,
        SHORT_WAIT,
        reported_wait(reports.path(), child_wait.tid),
    );
}

/// Attaching to a running process records threads it creates after the attach.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn records_threads_created_after_pid_attach() {
    require_bpf!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let reports = tempfile::tempdir().expect("tempdir");
    let argv = helper_argv_reporting("helper_pid_attach", reports.path());
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn helper");
    let pid = child.id();

    let mut recorder = Recorder::start(RecordOptions::new(Target::pid(pid))).expect("start");
    assert_eq!(recorder.target_pid(), pid);
    // Let the helper go: only now does it create its threads.
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("write");
    poll_until_exit(&mut recorder);
    let profile = recorder.finish("target exited").expect("finish");
    assert!(child.wait().expect("wait").success());

    assert!(!profile.metadata.target.launched);
    assert!(profile
        .metadata
        .target
        .command
        .iter()
        .any(|a| a.ends_with("helper_pid_attach")));
    let timed = records_with_op(&profile, pid, TIMED_WAIT_OP);
    assert_eq!(timed.len(), 2, "records: {:#?}", profile.waits);
    let tids: BTreeSet<u32> = timed.iter().map(|w| w.tid).collect();
    assert_eq!(tids.len(), 2, "the two waits came from one thread");
    assert!(
        !tids.contains(&pid),
        "waits of the main thread, not of new threads"
    );
    for wait in timed {
        assert_wait(wait, LONG_WAIT, reported_wait(reports.path(), wait.tid));
    }
}

/// A thread killed by its process's exit while waiting has its wait recorded up to the exit.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn records_wait_ended_by_exit() {
    require_bpf!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let argv = helper_argv("helper_exit_while_waiting");
    let mut recorder = Recorder::start(RecordOptions::new(Target::Command(argv))).expect("start");
    let pid = recorder.target_pid();
    poll_until_exit(&mut recorder);
    let profile = recorder.finish("target exited").expect("finish");
    let killed: Vec<&WaitRecord> = profile
        .waits
        .iter()
        .filter(|w| w.pid == pid && w.operation == "FUTEX_WAIT_PRIVATE")
        .filter(|w| w.stats.total_ns >= 250_000_000)
        .collect();
    assert_eq!(killed.len(), 1, "records: {:#?}", profile.waits);
    assert!(killed[0].stats.total_ns < 2_000_000_000, "{:?}", killed[0]);
}

/// Missing pids and commands give their one-line errors and leave no BPF object behind.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn start_errors() {
    require_bpf!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let err = Recorder::start(RecordOptions::new(Target::pid(4_000_000_000)))
        .err()
        .expect("pid accepted");
    assert_eq!(err.to_string(), "no process with pid 4000000000");

    let argv = vec![OsString::from("lockscope-no-such-command")];
    let err = Recorder::start(RecordOptions::new(Target::Command(argv)))
        .err()
        .expect("command started");
    // The message names the command; the cause is the error's source, named once (error.rs).
    assert_eq!(
        err.to_string(),
        "failed to start `lockscope-no-such-command`"
    );
    let source = std::error::Error::source(&err).expect("the exec error as source");
    assert_eq!(source.to_string(), "No such file or directory (os error 2)");
    let (left, _) = own_bpf_objects();
    assert!(
        left.is_empty(),
        "BPF objects leaked by a failed start: {left:?}"
    );
}

/// Workload of the launched-command test: wait for the recorder's first maps snapshot to see the
/// loaded libraries, do the 200 ms timed wait, then run a child process doing a 100 ms wait.
#[test]
#[ignore = "helper process of records_launched_command_and_its_children"]
fn helper_launched() {
    if !is_helper_run("helper_launched") {
        return;
    }
    std::thread::sleep(Duration::from_millis(300));
    measure_wait(|| realtime_futex_wait(LONG_WAIT));
    let argv = match report_dir() {
        Some(dir) => helper_argv_reporting("helper_forked_child", &dir),
        None => helper_argv("helper_forked_child"),
    };
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .status()
        .expect("child");
    assert!(status.success());
}

/// Workload of the forked child: a 100 ms relative wait, after the maps snapshot interval.
#[test]
#[ignore = "helper process of records_launched_command_and_its_children"]
fn helper_forked_child() {
    if !is_helper_run("helper_forked_child") {
        return;
    }
    std::thread::sleep(Duration::from_millis(300));
    measure_wait(|| relative_futex_wait(SHORT_WAIT));
}

/// Workload of the pid-attach test: on "go" from stdin, two new threads each wait 200 ms.
#[test]
#[ignore = "helper process of records_threads_created_after_pid_attach"]
fn helper_pid_attach() {
    if !is_helper_run("helper_pid_attach") {
        return;
    }
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("read go");
    let threads: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(|| measure_wait(|| realtime_futex_wait(LONG_WAIT))))
        .collect();
    for thread in threads {
        thread.join().expect("join");
    }
}

/// Workload of the exit test: a thread waits without timeout; the process exits 300 ms later.
#[test]
#[ignore = "helper process of records_wait_ended_by_exit"]
fn helper_exit_while_waiting() {
    if !is_helper_run("helper_exit_while_waiting") {
        return;
    }
    std::thread::spawn(|| relative_futex_wait(Duration::from_secs(3600)));
    std::thread::sleep(Duration::from_millis(300));
    std::process::exit(0);
}
