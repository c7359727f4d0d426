//! End-to-end recordings of the demo workload, whose waits are known: run as root with BPF, and
//! skip loudly otherwise.

use crate::common;

use common::*;
use lockscope_probes::{read_profile, Profile};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStderr, Command, Stdio};

/// Mounts tracefs for the life of the guard when it is not mounted (unmounting it again after).
struct TracefsMount {
    mounted_here: bool,
}

impl TracefsMount {
    const PATH: &'static str = "/sys/kernel/tracing";

    fn ensure() -> Result<Self, String> {
        if std::path::Path::new(Self::PATH).join("events").is_dir() {
            return Ok(Self {
                mounted_here: false,
            });
        }
        let out = Command::new("mount")
            .args(["-t", "tracefs", "nodev", Self::PATH])
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tracefs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Self { mounted_here: true })
    }
}

impl Drop for TracefsMount {
    fn drop(&mut self) {
        if self.mounted_here {
            let _ = Command::new("umount").arg(Self::PATH).status();
        }
    }
}

/// With tracefs mounted, the futex probe attaches to the futex system calls' own tracepoints
/// (so other system calls never enter BPF) and still measures the demo's known waits.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn futex_probe_uses_syscall_tracepoints_with_tracefs() {
    if !bpf_available("futex_probe_uses_syscall_tracepoints_with_tracefs") {
        return;
    }
    let _tracefs = match TracefsMount::ensure() {
        Ok(guard) => guard,
        Err(why) => {
            let message = format!(
                "skipped: futex_probe_uses_syscall_tracepoints_with_tracefs: no tracefs ({why})"
            );
            assert!(
                std::env::var_os("LOCKSCOPE_REQUIRE_BPF").is_none(),
                "{message}"
            );
            eprintln!("{message}");
            return;
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let lsp = dir.path().join("demo.lsp");
    let (stdout, _) = record_demo(&lsp, &["--probes", "futex"]);
    let profile = read_lossless(&lsp);
    let futex = profile
        .metadata
        .probes
        .iter()
        .find(|p| p.probe == "futex")
        .expect("futex probe in the metadata");
    assert!(
        futex
            .hook
            .contains("tracepoint/syscalls/sys_{enter,exit}_futex")
            && !futex.hook.contains("/sys_enter"),
        "futex hooks: {}",
        futex.hook
    );
    assert_demo_known_answer(&profile, "futex", &stdout);
}

/// `record -- lockscope-demo` measures the demo's known waits: 4 × 200 ms on a mutex and 2 × 300 ms
/// on condvars, in the right buckets, under the right threads, in the report, the folded export and
/// the flamegraph; the target has exited before symbolization, and its frames still have names.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn demo_waits_match_the_known_answer() {
    let Some(dir) = bpf_scratch("demo_waits_match_the_known_answer") else {
        return;
    };
    let lsp = dir.path().join("demo.lsp");
    let (stdout, stderr) = record_demo(&lsp, &[]);
    // Whatever hooks this machine offers (with or without tracefs), libbpf has nothing to say.
    assert!(!stderr.contains("libbpf:"), "libbpf noise: {stderr}");
    assert!(
        stdout.contains("lockscope-demo: held the order lock"),
        "the demo's own output passes through"
    );

    let profile = read_lossless(&lsp);
    let meta = &profile.metadata;
    assert_eq!(meta.end_reason, "target exited");
    assert!(meta.target.launched);
    assert_eq!(meta.target.command[0], demo_path());
    assert_demo_known_answer(&profile, "futex", &stdout);

    assert_demo_stacks(&profile, "futex");

    let report = run_ok(lockscope().arg("report").arg(&lsp).args(["--by", "thread"]));
    for name in [
        "mutex-waiter-1",
        "mutex-waiter-4",
        "cond-waiter-1",
        "cond-waiter-2",
    ] {
        assert!(
            report.contains(name),
            "report --by thread lacks {name}:\n{report}"
        );
    }
    let folded = run_ok(
        lockscope()
            .arg("export")
            .arg(&lsp)
            .args(["--format", "folded"]),
    );
    for i in 1..=MUTEX_WAITERS {
        let prefix = format!("mutex-waiter-{i};");
        assert!(
            folded.lines().any(|l| l.starts_with(&prefix)),
            "folded lacks {prefix}:\n{folded}"
        );
    }
    let svg = dir.path().join("demo.svg");
    run_ok(lockscope().arg("flamegraph").arg(&lsp).arg("-o").arg(&svg));
    let svg = std::fs::read_to_string(&svg).expect("read svg");
    assert!(
        svg.contains("<svg") && svg.contains("lll_lock_wait"),
        "flamegraph content"
    );
}

/// `record --probes cpu,futex -- lockscope-demo`: the cpu probe measures the demo's spinner (on
/// a user-space spinlock, never in the kernel) and cruncher as their own CPU clocks did, within
/// 15%, on stacks complete to the thread entry through the demo's functions, while the futex
/// probe still measures the known waits; the report keeps CPU time apart from waits, and the
/// folded export, flamegraph and pprof of `--probe cpu` carry the on-CPU nanoseconds.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn cpu_probe_measures_the_demo_on_cpu() {
    let Some(dir) = bpf_scratch("cpu_probe_measures_the_demo_on_cpu") else {
        return;
    };
    let lsp = dir.path().join("demo.lsp");
    // 997 Hz: on a busy machine the threads share their CPUs, and which slices a sample
    // lands in is chance; ten times the samples make the estimate three times as close.
    let (stdout, _) = record_demo(&lsp, &["--probes", "cpu,futex", "--frequency", "997"]);
    let profile = read_lossless(&lsp);
    assert_demo_on_cpu(&profile, &stdout, ON_CPU_TOLERANCE);
    assert_demo_known_answer(&profile, "futex", &stdout);
    let cpu_ns: u64 = profile
        .waits
        .iter()
        .filter(|w| w.probe == "cpu")
        .map(|w| w.stats.total_ns)
        .sum();

    // The report: waits as waits, the samples in their own section, never as waits.
    let report = run_ok(lockscope().arg("report").arg(&lsp).args(["--by", "thread"]));
    assert!(
        !report.contains("on-cpu "),
        "CPU time among the waits:\n{report}"
    );
    let section = report
        .split_once("\nOn CPU (cpu probe): ")
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("no on-CPU section:\n{report}"));
    for needle in [
        "spinner (tid",
        "cruncher (tid",
        "spin_until_free",
        "checksum_round",
    ] {
        assert!(
            section.contains(needle),
            "on-CPU section lacks {needle}:\n{section}"
        );
    }
    assert!(report.contains("mutex-waiter-1"), "{report}");

    // Folded, `--probe cpu`: on-CPU nanoseconds; without it, the waits alone.
    let folded = run_ok(
        lockscope()
            .arg("export")
            .arg(&lsp)
            .args(["--format", "folded", "--probe", "cpu"]),
    );
    let folded_ns: u64 = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    assert_eq!(folded_ns, cpu_ns, "{folded}");
    assert!(
        folded
            .lines()
            .any(|l| l.starts_with("spinner;") && l.contains("acquire_spin_lock;")),
        "{folded}"
    );
    let waits = run_ok(
        lockscope()
            .arg("export")
            .arg(&lsp)
            .args(["--format", "folded"]),
    );
    assert!(
        !waits.contains("spin_until_free") && waits.contains("lll_lock_wait"),
        "{waits}"
    );
    let svg = dir.path().join("cpu.svg");
    run_ok(
        lockscope()
            .arg("flamegraph")
            .arg(&lsp)
            .args(["--probe", "cpu", "-o"])
            .arg(&svg),
    );
    let svg = std::fs::read_to_string(&svg).expect("read svg");
    assert!(svg.contains("checksum_round") && svg.contains("spin_until_free"));
}

/// `record --probes futex,offcpu -- lockscope-demo`: both probes see the demo's 4 mutex and 2
/// condvar sleeps, and the report counts each once. Its total is the futex probe's waits plus
/// the offcpu probe's sleeps in other system calls (the lock holder's and the main thread's
/// nanosleeps), its mutex kind lies within the waiters' own bounds (not twice them), its header
/// says what was merged, and the folded export adds up to the same time (plus the preemptions
/// and run-queue delays it keeps, less the run-queue delays inside futex waits), each mutex
/// waiter's wait once, within its bounds.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn futex_and_offcpu_count_each_sleep_once() {
    let Some(dir) = bpf_scratch("futex_and_offcpu_count_each_sleep_once") else {
        return;
    };
    let lsp = dir.path().join("demo.lsp");
    let (log, _) = record_demo(&lsp, &["--probes", "futex,offcpu"]);
    let profile = read_lossless(&lsp);
    assert_demo_known_answer(&profile, "futex", &log);
    // Each waiter's bounds, as the demo printed them: the time its main thread knew it asleep
    // before the release, and the thread's own measure around its call.
    let (asleep, measured) = (demo_asleep(&log), demo_measures(&log));
    let bound = |list: &[(String, f64)], name: &str| -> f64 {
        list.iter()
            .find(|(t, _)| t == name)
            .map(|(_, ms)| ms * 1e6)
            .unwrap_or_else(|| panic!("no measure of {name}: {log}"))
    };
    let waiters: Vec<String> = (1..=MUTEX_WAITERS)
        .map(|i| format!("mutex-waiter-{i}"))
        .chain((1..=CONDVAR_WAITERS).map(|i| format!("cond-waiter-{i}")))
        .collect();
    let total = |keep: &dyn Fn(&lockscope_probes::WaitRecord) -> bool| -> u64 {
        profile
            .waits
            .iter()
            .filter(|w| keep(w))
            .map(|w| w.stats.total_ns)
            .sum()
    };
    let is_cpu_wait = |w: &lockscope_probes::WaitRecord| {
        matches!(w.operation.as_str(), "run-queue" | "preempted")
    };
    let futex_ns = total(&|w| w.probe == "futex");
    let offcpu_futex_ns = total(&|w| w.probe == "offcpu" && w.operation == "sleeping in futex");
    let offcpu_other_ns =
        total(&|w| w.probe == "offcpu" && !is_cpu_wait(w) && w.operation != "sleeping in futex");
    // The offcpu probe saw the known sleeps too: at least the time the waiters were known asleep.
    let known_ns: f64 = waiters.iter().map(|w| bound(&asleep, w)).sum();
    assert!(
        offcpu_futex_ns as f64 >= known_ns,
        "offcpu futex sleeps: {offcpu_futex_ns} ns, the waiters known asleep {known_ns} ns"
    );
    assert!(offcpu_other_ns > 0, "no offcpu sleep outside futex");

    let json: serde_json::Value =
        serde_json::from_str(&run_ok(lockscope().arg("report").arg(&lsp).arg("--json")))
            .expect("report JSON");
    assert_eq!(
        json["totals"]["total_ns"].as_u64(),
        Some(futex_ns + offcpu_other_ns),
        "totals are not the futex waits plus the other off-CPU sleeps: {:#}",
        json["by_kind"]
    );
    let kind_ns = |kind: &str| {
        json["by_kind"]
            .as_array()
            .expect("by_kind")
            .iter()
            .find(|k| k["kind"] == kind)
            .and_then(|k| k["total_ns"].as_u64())
            .unwrap_or(0)
    };
    // Counted once: between the mutex waiters' bounds (and 1 ms of the other threads' short
    // mutex waits), not twice that.
    let mutex_ns = kind_ns("mutex") as f64;
    let mutex_waiters = &waiters[..MUTEX_WAITERS as usize];
    let low: f64 = mutex_waiters.iter().map(|w| bound(&asleep, w)).sum();
    let high: f64 = mutex_waiters
        .iter()
        .map(|w| bound(&measured, w) + 50_000.0)
        .sum::<f64>()
        + 1e6;
    assert!(
        (low..=high).contains(&mutex_ns),
        "mutex waits {mutex_ns} ns, the waiters' bounds {low}..{high} (counted once)"
    );
    // The other sleeps are `off-cpu`, or `kernel-lock` where their kernel stack sleeps on one
    // (the mmap lock while threads start).
    assert_eq!(kind_ns("off-cpu") + kind_ns("kernel-lock"), offcpu_other_ns);
    let merged = &json["header"]["merged_sleeps"];
    assert_eq!(
        merged["offcpu_ns"].as_u64(),
        Some(offcpu_futex_ns),
        "{merged}"
    );
    assert!(
        merged["threads"].as_u64() >= Some(MUTEX_WAITERS + CONDVAR_WAITERS),
        "{merged}"
    );
    let text = run_ok(lockscope().arg("report").arg(&lsp));
    assert!(
        text.contains("  merged     futex and offcpu both saw "),
        "{text}"
    );

    let folded = run_ok(
        lockscope()
            .arg("export")
            .arg(&lsp)
            .args(["--format", "folded"]),
    );
    let value = |line: &str| -> u64 {
        line.rsplit_once(' ')
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or_else(|| panic!("folded line without a value: {line}"))
    };
    let folded_ns: u64 = folded.lines().map(value).sum();
    let twice = lockscope_probes::SeenTwice::of(&profile);
    let kept_cpu_waits = total(&|w| w.probe == "offcpu" && is_cpu_wait(w) && !twice.contains(w));
    assert_eq!(
        folded_ns,
        futex_ns + offcpu_other_ns + kept_cpu_waits,
        "{folded}"
    );
    for waiter in mutex_waiters {
        let prefix = format!("{waiter};");
        let lines: Vec<&str> = folded.lines().filter(|l| l.starts_with(&prefix)).collect();
        let ns: f64 = lines
            .iter()
            .filter(|l| l.contains("take_order_lock;") && l.contains("lll_lock_wait"))
            .map(|l| value(l) as f64)
            .sum();
        // Once: its wait at the demo's lock within the waiter's own bounds (its run-queue delay
        // after the wakeup is inside its futex wait), not twice.
        // The upper bound is printed rounded to the nearest 0.1 ms, the lower one floored.
        let (low, high) = (bound(&asleep, waiter), bound(&measured, waiter) + 50_000.0);
        assert!(
            (low..=high).contains(&ns),
            "{waiter} waited {ns} ns in the folded export, its bounds {low}..{high}: {lines:#?}"
        );
    }
}

/// `lockscope record ARGS -o LSP -- lockscope-demo`, failing the test unless it succeeds; returns
/// its stdout (the demo's own output among it) and stderr.
fn record_demo(lsp: &Path, args: &[&str]) -> (String, String) {
    let out = lockscope()
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(lsp)
        .arg("--")
        .arg(demo_path())
        .output()
        .expect("run lockscope record");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "record failed: {stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// The recorded profile at `lsp`, failing the test if the recording lost anything.
fn read_lossless(lsp: &Path) -> Profile {
    let profile = read_profile(lsp).expect("read the recorded profile");
    assert!(
        profile.metadata.losses.is_zero(),
        "losses: {:?}",
        profile.metadata.losses
    );
    profile
}

/// Waits for a recorder started by [`start_recording_pid`] to end, failing the test (`what`
/// failed, with its stderr) unless it succeeded.
fn wait_success(mut recorder: KillOnDrop, stderr: BufReader<ChildStderr>, what: &str) {
    let status = recorder.0.wait().expect("wait for lockscope");
    assert!(status.success(), "{what} failed: {}", rest_of(stderr));
}

/// A demo started with `--wait-for-stdin`, its stdin and stdout held by the test.
struct HeldDemo {
    child: KillOnDrop,
    stdout: BufReader<std::process::ChildStdout>,
}

impl HeldDemo {
    fn start() -> HeldDemo {
        let mut child = Command::new(demo_path())
            .arg("--wait-for-stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start lockscope-demo");
        let stdout = BufReader::new(child.stdout.take().expect("demo stdout"));
        HeldDemo {
            child: KillOnDrop(child),
            stdout,
        }
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Lets the demo run and waits until it has printed its summary (all its waits are over);
    /// returns what it printed.
    fn run_workload(&mut self) -> String {
        let stdin = self.child.0.stdin.as_mut().expect("demo stdin");
        stdin.write_all(b"go\n").expect("release the demo");
        let mut log = String::new();
        while !log.contains("CPU time measured by the threads") {
            let before = log.len();
            self.stdout.read_line(&mut log).expect("demo summary");
            assert!(log.len() > before, "the demo ended its output early: {log}");
        }
        assert!(log.contains("held the order lock"), "demo said: {log}");
        log
    }

    /// Closes its stdin so it exits.
    fn let_exit(&mut self) {
        drop(self.child.0.stdin.take());
        let status = self.child.0.wait().expect("wait for the demo");
        assert!(status.success(), "demo failed: {status}");
    }
}

fn start_recording_pid(
    pid: u32,
    lsp: &std::path::Path,
) -> (KillOnDrop, BufReader<std::process::ChildStderr>) {
    let mut recorder = lockscope()
        .arg("record")
        .arg("-o")
        .arg(lsp)
        .arg("-p")
        .arg(pid.to_string())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockscope record -p");
    let mut stderr = BufReader::new(recorder.stderr.take().expect("stderr"));
    wait_until_recording(&mut stderr);
    (KillOnDrop(recorder), stderr)
}

/// `record -p PID` on a running process records the waits of threads it creates after the
/// attach, and ends by itself when the process exits.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn attach_by_pid_records_threads_created_later() {
    let Some(dir) = bpf_scratch("attach_by_pid_records_threads_created_later") else {
        return;
    };
    let lsp = dir.path().join("attach.lsp");
    let mut demo = HeldDemo::start();
    let (recorder, stderr) = start_recording_pid(demo.pid(), &lsp);
    let log = demo.run_workload();
    demo.let_exit();
    wait_success(recorder, stderr, "record -p");

    let profile = read_profile(&lsp).expect("read profile");
    assert_eq!(profile.metadata.end_reason, "target exited");
    assert!(!profile.metadata.target.launched);
    assert_eq!(profile.metadata.target.pid, demo.pid());
    assert_demo_known_answer(&profile, "futex", &log);
}

/// SIGINT and SIGTERM end a recording with a complete, readable profile that holds the waits seen
/// so far, and leave no lockscope BPF program loaded in the kernel.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn signals_end_recording_with_complete_profile() {
    if !bpf_available("signals_end_recording_with_complete_profile") {
        return;
    }
    for (signal, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")] {
        let dir = tempfile::tempdir().expect("tempdir");
        let lsp = dir.path().join("signal.lsp");
        let mut demo = HeldDemo::start();
        // Another lockscope may be recording on this machine: only the programs that appear
        // with this recorder are its own.
        let before = loaded_lockscope_program_ids();
        let (recorder, stderr) = start_recording_pid(demo.pid(), &lsp);
        let ours: Vec<u64> = loaded_lockscope_program_ids()
            .difference(&before)
            .copied()
            .collect();
        assert!(
            !ours.is_empty(),
            "lockscope's programs are loaded while it records"
        );
        let log = demo.run_workload();
        // SAFETY: kill has no memory-safety preconditions; the pid is our live child's.
        let rc = unsafe { libc::kill(recorder.0.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill {name}");
        wait_success(recorder, stderr, &format!("record ended by {name}"));

        let profile = read_profile(&lsp).expect("profile written after the signal");
        assert_eq!(profile.metadata.end_reason, format!("interrupted ({name})"));
        assert_demo_known_answer(&profile, "futex", &log);
        // The kernel frees a program when the last link to it goes, and a link on the generic
        // sys_enter/sys_exit tracepoints (faultable since 6.13) goes only after an RCU grace
        // period: about 200 ms after lockscope's exit here (6.18, tracefs unmounted). Ten seconds,
        // far beyond one, before calling a program left behind.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let left = loop {
            let loaded = loaded_lockscope_program_ids();
            let left: Vec<u64> = ours
                .iter()
                .copied()
                .filter(|id| loaded.contains(id))
                .collect();
            if left.is_empty() || std::time::Instant::now() >= deadline {
                break left;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert!(
            left.is_empty(),
            "BPF programs left loaded 10 s after {name}: {left:?}"
        );
        demo.let_exit();
    }
}

/// Runs `record -p PID -d 1s ARGS` on `pid`, writing `lsp`; returns its stderr lines after the
/// "recording" line, each with when it came, counted from that line.
fn record_one_second(pid: u32, lsp: &Path, args: &[&str]) -> Vec<(std::time::Duration, String)> {
    let mut recorder = lockscope()
        .arg("record")
        .arg("-o")
        .arg(lsp)
        .args(["-p", &pid.to_string(), "-d", "1s"])
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockscope record -p -d 1s");
    let mut stderr = BufReader::new(recorder.stderr.take().expect("stderr"));
    let recorder = KillOnDrop(recorder);
    wait_until_recording(&mut stderr);
    let attached = std::time::Instant::now();
    let lines: Vec<(std::time::Duration, String)> = stderr
        .lines()
        .map(|l| (attached.elapsed(), l.expect("read stderr")))
        .collect();
    let mut recorder = recorder;
    let status = recorder.0.wait().expect("wait for lockscope");
    assert!(status.success(), "record -d 1s failed: {lines:?}");
    lines
}

/// `-d 1s` on a running process: the profile lasts 1 s within 100 ms, counted from the
/// "recording" line; the "recorded" line comes within 1.2 s of it and says the profile's
/// duration, and only the writing follows it.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn duration_ends_the_recording_when_it_says() {
    let Some(dir) = bpf_scratch("duration_ends_the_recording_when_it_says") else {
        return;
    };
    // A busy process (a shell's empty loop): the recording has its CPU to watch.
    let busy = KillOnDrop(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("start a busy shell"),
    );
    for probes in ["futex", lockscope_probes::catalog::BOTTLENECK.name] {
        let lsp = dir.path().join(format!("{probes}.lsp"));
        let lines = record_one_second(busy.0.id(), &lsp, &["--probes", probes]);
        let profile = read_profile(&lsp).expect("read profile");
        let duration_ms = profile.metadata.duration_ns as f64 / 1e6;
        assert!(
            (duration_ms - 1000.0).abs() <= 100.0,
            "{probes}: recorded {duration_ms} ms for -d 1s: {lines:?}"
        );
        let (at, ended) = lines
            .iter()
            .find(|(_, l)| l.starts_with("lockscope: recorded "))
            .unwrap_or_else(|| panic!("{probes}: no \"recorded\" line: {lines:?}"));
        assert!(
            at.as_secs_f64() <= 1.2,
            "{probes}: said the end {at:?} after the start: {lines:?}"
        );
        let said = format!(
            "lockscope: recorded {:.2} s (duration elapsed);",
            duration_ms / 1e3
        );
        assert!(
            ended.starts_with(&said),
            "{probes}: {ended} (expected {said})"
        );
    }
}

/// A process idle while recorded (`sleep`) gets the idle warning at the end of `record` and in
/// the report's header, beside the recording's having seen nothing.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn idle_target_is_said_idle() {
    let Some(dir) = bpf_scratch("idle_target_is_said_idle") else {
        return;
    };
    let idle = KillOnDrop(
        Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("start sleep"),
    );
    let lsp = dir.path().join("idle.lsp");
    let lines = record_one_second(idle.0.id(), &lsp, &[]);
    let said = |start: &str| lines.iter().any(|(_, l)| l.starts_with(start));
    assert!(
        said("lockscope: warning: while recorded, the target used 0 ns of CPU (0.0% of one CPU"),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|(_, l)| l.contains("it was idle, or all its threads were blocked")),
        "{lines:?}"
    );
    assert!(
        said("lockscope: warning: nothing was recorded: no probe saw an event"),
        "{lines:?}"
    );
    let report = run_ok(lockscope().arg("report").arg(&lsp));
    assert!(
        report.contains("  warnings   WARNING: while recorded, the target used 0 ns of CPU")
            && report.contains("  quiet      WARNING: nothing was recorded"),
        "{report}"
    );
}
