//! Helpers shared by the end-to-end tests: the built binaries, privilege checks that skip loudly,
//! reading the recorder's start-up line, and golden files.

use lockscope_probes::catalog::{CPU, FUTEX};
use lockscope_probes::{Profile, StackWalk, WaitKind, WaitRecord};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStderr, Command};
use std::time::Duration;

pub mod fixtures;
// Re-running this binary as one of its tests, found by its name under its module's path.
pub use lockscope_dev::self_run;

/// What the demo does (see `profiler/src/bin/lockscope-demo.rs`).
pub const MUTEX_WAITERS: u64 = 4;
pub const CONDVAR_WAITERS: u64 = 2;

/// The demo's on-CPU threads (part 3), each with the demo functions its samples must be in,
/// outermost first.
pub const DEMO_ON_CPU: [(&str, [&str; 2]); 2] = [
    ("spinner", ["acquire_spin_lock", "spin_until_free"]),
    ("cruncher", ["crunch_numbers", "checksum_round"]),
];

/// How far the `cpu` probe's CPU time may be from a thread's own CPU clock: a 99 Hz sample is
/// 10.1 ms, a thirtieth of the ~300 ms measured.
pub const ON_CPU_TOLERANCE: f64 = 0.15;

/// Each on-CPU thread's own measure of its CPU time, from the demo's output: `(thread, ms)`.
pub fn demo_cpu_measures(log: &str) -> Vec<(String, f64)> {
    demo_thread_measures(log, "lockscope-demo: CPU time measured by the threads: ")
}

/// The `(thread, ms)` pairs of the demo's output line starting with `prefix` (`thread 123.4 ms`,
/// comma-separated); empty without that line.
pub fn demo_thread_measures(log: &str, prefix: &str) -> Vec<(String, f64)> {
    let Some(list) = log.lines().find_map(|l| l.strip_prefix(prefix)) else {
        return Vec::new();
    };
    list.split(", ")
        .filter_map(|item| {
            let (thread, ms) = item.strip_suffix(" ms")?.rsplit_once(' ')?;
            Some((thread.to_owned(), ms.parse().ok()?))
        })
        .collect()
}

/// Checks the `cpu` probe's view of the demo's on-CPU phase against what its threads measured
/// (their CPU clocks, printed in `log`): each thread's CPU time at its demo functions within
/// `tolerance` (a share; [`ON_CPU_TOLERANCE`] on a real kernel), on stacks complete to the
/// thread entry, with the functions in order.
pub fn assert_demo_on_cpu(profile: &Profile, log: &str, tolerance: f64) {
    let measured = demo_cpu_measures(log);
    assert_eq!(
        measured.len(),
        DEMO_ON_CPU.len(),
        "the demo's CPU measures: {log}"
    );
    for (thread, chain) in DEMO_ON_CPU {
        let demo_ms = measured
            .iter()
            .find(|(t, _)| t == thread)
            .map(|(_, ms)| *ms)
            .unwrap_or_else(|| panic!("no CPU measure of {thread}: {log}"));
        let mut at_chain_ns = 0u64;
        for w in profile
            .waits
            .iter()
            .filter(|w| w.is_from(&CPU) && profile.thread_name(w.pid, w.tid) == Some(thread))
        {
            assert_eq!(w.kind, WaitKind::OnCpu, "{w:#?}");
            let Some(stack) = profile.stack(w.user_stack) else {
                continue;
            };
            let names: Vec<String> = stack.frames.iter().map(|f| f.display_name()).collect();
            if !names.iter().any(|n| n.contains(chain[1])) {
                continue;
            }
            assert!(!stack.truncated, "{thread}: stack cut short: {names:?}");
            assert_in_order(&names, &["start_thread", chain[0], chain[1]]);
            at_chain_ns += w.stats.total_ns;
        }
        let sampled_ms = at_chain_ns as f64 / 1e6;
        assert!(
            (sampled_ms - demo_ms).abs() <= demo_ms * tolerance,
            "{thread}: {sampled_ms:.1} ms on CPU at {chain:?}, by its own clock {demo_ms:.1} ms"
        );
    }
}

/// Blocking waits are the long ones: anything under this is start-up noise, not the workload.
pub const BLOCKED: Duration = Duration::from_millis(50);

/// The demo's long waits seen by `probe` in the threads whose name starts with `prefix`.
pub fn long_waits<'a>(profile: &'a Profile, probe: &str, prefix: &str) -> Vec<&'a WaitRecord> {
    profile
        .waits
        .iter()
        .filter(|w| w.probe == probe)
        .filter(|w| {
            profile
                .thread_name(w.pid, w.tid)
                .is_some_and(|n| n.starts_with(prefix))
        })
        .filter(|w| w.stats.max_ns >= BLOCKED.as_nanos() as u64)
        .collect()
}

/// The demo's own wait in each thread named `prefix`N as `probe` saw it: the thread's longest
/// long wait. Others may come on top under emulation, on glibc's own locks (a thread's exit once
/// waited 52 ms on the stack-cache lock under TCG on 6.12, a thread's start 50 ms or more on the
/// loader's lock, taken to register its thread-local destructors, on 6.1): real waits, with real
/// stacks, but not the demo's.
pub fn demo_waits<'a>(profile: &'a Profile, probe: &str, prefix: &str) -> Vec<&'a WaitRecord> {
    let mut longest: std::collections::BTreeMap<u32, &WaitRecord> = Default::default();
    for w in long_waits(profile, probe, prefix) {
        let entry = longest.entry(w.tid).or_insert(w);
        if w.stats.max_ns > entry.stats.max_ns {
            *entry = w;
        }
    }
    longest.into_values().collect()
}

/// Checks that `probe` saw the demo's known answer: 4 mutex waits and 2 condvar waits, one a
/// thread, each between the bounds the demo printed in `log` (see [`assert_demo_waits`]).
pub fn assert_demo_known_answer(profile: &Profile, probe: &str, log: &str) {
    assert_demo_waits(profile, probe, log);
    for (prefix, count) in [
        ("mutex-waiter-", MUTEX_WAITERS),
        ("cond-waiter-", CONDVAR_WAITERS),
    ] {
        let waits = long_waits(profile, probe, prefix);
        let threads: std::collections::BTreeSet<u32> = waits.iter().map(|w| w.tid).collect();
        assert_eq!(threads.len() as u64, count, "one wait per {prefix}* thread");
    }
}

/// The demo's 4 mutex waits and 2 condvar waits as `probe` saw them: each thread's longest wait
/// (for futex, its one wait at the demo's site) between the two bounds the demo prints in `log`,
/// which hold whatever an emulated kernel or a loaded host does to the timing (it stretches the
/// nominal 200 and 300 ms, and the code around the system call): no longer than the thread
/// measured around its lock or condvar call (the kernel's wait lies inside that call), and no
/// shorter than the time the main thread knew it was asleep in `futex` before the release (the
/// kernel's wait covers that). Both are CLOCK_MONOTONIC, printed to 0.1 ms (the lower one floored).
pub fn assert_demo_waits(profile: &Profile, probe: &str, log: &str) {
    let measured = demo_measures(log);
    let asleep = demo_asleep(log);
    assert_eq!(
        measured.len() as u64,
        MUTEX_WAITERS + CONDVAR_WAITERS,
        "the demo's measures: {log}"
    );
    assert_eq!(
        asleep.len(),
        measured.len(),
        "the demo's lower bounds: {log}"
    );
    for (thread, demo_ms) in &measured {
        let asleep_ms = asleep
            .iter()
            .find(|(t, _)| t == thread)
            .map(|(_, ms)| *ms)
            .unwrap_or_else(|| panic!("no lower bound of {thread}: {log}"));
        let prefix = thread.trim_end_matches(char::is_numeric);
        let waits: Vec<_> = long_waits(profile, probe, prefix)
            .into_iter()
            .filter(|w| profile.thread_name(w.pid, w.tid) == Some(thread.as_str()))
            .collect();
        // The demo's wait is the thread's longest (see [`demo_waits`]).
        let longest = demo_waits(profile, probe, prefix)
            .into_iter()
            .find(|w| profile.thread_name(w.pid, w.tid) == Some(thread.as_str()));
        let Some(longest) = longest else {
            panic!("{probe}: no long wait of {thread}");
        };
        assert_eq!(longest.stats.count, 1, "{probe}: {thread}: {longest:#?}");
        let total_ms = longest.stats.total_ns as f64 / 1e6;
        let complete_stacks = profile.metadata.user_stack_walk() == StackWalk::UnwindTables;
        if probe == FUTEX.name && complete_stacks {
            // Exactly one wait at the demo's own site (the unwinder's futex stacks are complete;
            // frame-pointer walks stop in the demo and glibc, built without them).
            let site = if prefix == "mutex-waiter-" {
                "take_order_lock"
            } else {
                "wait_for_signal"
            };
            let at_site: u64 = waits
                .iter()
                .filter(|w| {
                    profile
                        .stack(w.user_stack)
                        .is_some_and(|s| s.frames.iter().any(|f| f.display_name().contains(site)))
                })
                .map(|w| w.stats.count)
                .sum();
            // The log's unwinding line says why a stack is missing.
            assert_eq!(
                at_site, 1,
                "{probe}: waits of {thread} at {site}: {waits:#?}\n{log}"
            );
        }
        // The upper bound is rounded to the nearest 0.1 ms, the lower one floored.
        assert!(
            total_ms <= demo_ms + 0.05 && total_ms >= asleep_ms,
            "{probe}: {thread} waited {total_ms:.2} ms, by its own clock {demo_ms:.1} ms, \
             known asleep for {asleep_ms:.1} ms before the release"
        );
    }
}

/// Each thread's own measure of its wait, from the demo's output: `(thread, ms)`.
pub fn demo_measures(log: &str) -> Vec<(String, f64)> {
    demo_thread_measures(log, "lockscope-demo: waits measured by the threads: ")
}

/// How long the demo's main thread knew each waiter asleep before it released it: `(thread, ms)`.
pub fn demo_asleep(log: &str) -> Vec<(String, f64)> {
    demo_thread_measures(
        log,
        "lockscope-demo: waits known asleep before the release: ",
    )
}

/// How long the demo's main thread was awake (on a CPU or waiting for one) while the mutex
/// waiters it held the order lock against were known asleep, in ms, as it printed it; `None`
/// where its kernel does not say.
pub fn demo_holder_awake(log: &str) -> Option<f64> {
    log.lines()
        .find_map(|l| {
            l.strip_prefix("lockscope-demo: the main thread awake while the mutex waiters slept: ")
        })
        .and_then(|rest| rest.trim_end_matches(" ms").parse().ok())
}

/// Asserts that `names` (leaf first) contains frames matching `chain` (outermost first), in that
/// order from the root.
pub fn assert_in_order(names: &[String], chain: &[&str]) {
    let mut next = 0;
    for name in names.iter().rev() {
        if next < chain.len() && name.contains(chain[next]) {
            next += 1;
        }
    }
    assert_eq!(next, chain.len(), "{chain:?} not in order in {names:?}");
}

/// Checks the stacks of the demo's own waits seen by `probe` (see [`demo_waits`]): the mutex
/// waits stop in glibc's lock slow path and are classified from its name (even when the target
/// had exited before symbolization), and both the mutex and condvar waits unwind through the demo
/// and glibc (neither has frame pointers) to the thread entry: the whole call chain, in order, on
/// a complete stack.
pub fn assert_demo_stacks(profile: &Profile, probe: &str) {
    for w in demo_waits(profile, probe, "mutex-waiter-") {
        let stack = profile
            .stack(w.user_stack)
            .expect("user stack of a mutex wait");
        let names: Vec<String> = stack.frames.iter().map(|f| f.display_name()).collect();
        assert!(
            names.iter().any(|n| n.contains("lll_lock_wait")),
            "mutex wait stack: {names:?}"
        );
        if probe == FUTEX.name {
            assert_eq!(w.kind, WaitKind::Mutex);
            assert!(w.operation.starts_with("FUTEX_WAIT"), "{}", w.operation);
        }
        // The unwinder walks through the demo and glibc (neither has frame pointers) to the
        // thread entry: the whole call chain, in order, on a complete stack.
        assert!(!stack.truncated, "mutex wait stack truncated: {names:?}");
        assert_in_order(
            &names,
            &[
                "place_order",
                "take_order_lock",
                "pthread_mutex_lock",
                "lll_lock_wait",
            ],
        );
    }
    for w in demo_waits(profile, probe, "cond-waiter-") {
        let stack = profile
            .stack(w.user_stack)
            .expect("user stack of a condvar wait");
        let names: Vec<String> = stack.frames.iter().map(|f| f.display_name()).collect();
        assert!(!stack.truncated, "condvar wait stack truncated: {names:?}");
        assert_in_order(
            &names,
            &["await_shipment", "wait_for_signal", "pthread_cond_wait"],
        );
        if probe == FUTEX.name {
            assert_eq!(w.kind, WaitKind::Condvar);
        }
    }
}

/// The `lockscope` binary under test.
pub fn lockscope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockscope"))
}

/// The demo workload binary.
pub fn demo_path() -> &'static str {
    env!("CARGO_BIN_EXE_lockscope-demo")
}

/// True when this test can load BPF programs. Otherwise prints `skipped: <test>: <why>` straight
/// to the terminal (past the test harness's output capture) and returns false, or fails the test
/// when `LOCKSCOPE_REQUIRE_BPF` is set (CI sets it: there a skip would hide a broken suite).
pub fn bpf_available(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let why = if euid != 0 {
        Some(format!(
            "needs root (CAP_BPF, CAP_PERFMON), running as uid {euid}"
        ))
    } else if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        Some("the kernel has no BTF (/sys/kernel/btf/vmlinux)".to_string())
    } else {
        None
    };
    match why {
        None => true,
        Some(why) => {
            if std::env::var_os("LOCKSCOPE_REQUIRE_BPF").is_some() {
                panic!("{test} cannot run: {why} (LOCKSCOPE_REQUIRE_BPF is set)");
            }
            let _ = writeln!(std::io::stderr(), "skipped: {test}: {why}");
            false
        }
    }
}

/// A scratch directory for the root+BPF test `test`, or `None` when it cannot load BPF (see
/// [`bpf_available`]: the skip is printed, or fails the test under CI); the test then returns.
pub fn bpf_scratch(test: &str) -> Option<tempfile::TempDir> {
    bpf_available(test).then(|| tempfile::tempdir().expect("tempdir"))
}

/// Reads the recorder's stderr until its "recording pid N" line; returns all lines read.
pub fn wait_until_recording(stderr: &mut BufReader<ChildStderr>) -> Vec<String> {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        let n = stderr.read_line(&mut line).expect("read lockscope stderr");
        assert!(n > 0, "lockscope exited before recording: {lines:?}");
        let started = line.starts_with("lockscope: recording pid");
        lines.push(line);
        if started {
            return lines;
        }
    }
}

/// Reads the rest of a child's stderr.
pub fn rest_of(stderr: BufReader<ChildStderr>) -> String {
    stderr
        .lines()
        .map(|l| l.expect("read stderr"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Kills a child when dropped, so a failing test leaves no process behind.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// True for the names of lockscope's BPF programs (all start with `lks_`, see
/// `ebpf/src/bpf/futex.bpf.c`).
pub fn lockscope_ebpf_program(name: &str) -> bool {
    name.starts_with("lks_")
}

/// Ids of lockscope's BPF programs currently loaded in the kernel (by any lockscope process).
pub fn loaded_lockscope_program_ids() -> std::collections::BTreeSet<u64> {
    let out = Command::new("bpftool")
        .args(["prog", "show", "--json"])
        .output()
        .expect("run bpftool (package bpftool)");
    assert!(out.status.success(), "bpftool failed: {out:?}");
    let progs: serde_json::Value = serde_json::from_slice(&out.stdout).expect("bpftool json");
    progs
        .as_array()
        .expect("bpftool prints an array")
        .iter()
        .filter(|p| {
            p.get("name")
                .and_then(|n| n.as_str())
                .is_some_and(lockscope_ebpf_program)
        })
        .filter_map(|p| p.get("id").and_then(|id| id.as_u64()))
        .collect()
}

/// Runs `cmd`, fails the test unless it succeeds (showing its stderr and stdout), and returns
/// its stdout.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run lockscope");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

// The golden-file check, the same for every crate's tests.
use lockscope_dev::golden;

/// Compares `actual` with the golden file `tests/golden/<name>`, or rewrites the file when
/// `LOCKSCOPE_BLESS=1` (then review the diff).
pub fn check_golden(name: &str, actual: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    golden::check(&dir.join(name), actual);
}
