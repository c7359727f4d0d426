//! `lockscope record --backend dtrace` end to end on any host: `--print-script` prints the
//! backend's golden scripts without running anything, and a recording through a fake dtrace
//! (`dtrace/tests/fake-dtrace`, selected with LOCKSCOPE_DTRACE) writes a profile that `report`
//! reads.
//!
//! The `live_` tests run a real dtrace(1) on Linux (Oracle's DTrace for Linux, built by
//! `.ci/dtrace` or `../shared/dtrace-linux/build.sh DIR`, named by LOCKSCOPE_DTRACE), as root:
//! the demo's known answer through `record -- CMD` and `-p PID -d 10s`, both backends against
//! each other through `lockscope diff`, and the ways a recording ends (Ctrl-C from a background
//! job, a killed dtrace). Without a real dtrace they print `skipped: <why>`; with CI=true (or
//! LOCKSCOPE_REQUIRE_BPF) they fail instead.

use crate::common;
// The dtrace crate's test helpers: `real_dtrace` finds (or skips without) the real dtrace alike
// in both crates' tests, `golden_dir` its golden scripts. They load test-support/golden.rs as
// this crate's `common` does.
#[path = "../../../dtrace/tests/it/common/mod.rs"]
#[allow(clippy::duplicate_mod)]
mod dtrace_common;

use common::{
    bpf_available, demo_cpu_measures, demo_path, lockscope, KillOnDrop, DEMO_ON_CPU,
    ON_CPU_TOLERANCE,
};
use dtrace_common::real_dtrace;
use lockscope_probes::{Profile, WaitKind};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::{Duration, Instant};

fn dtrace_tests() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dtrace/tests")
}

/// `--print-script -p PID` prints, for each OS, exactly the dtrace crate's golden script for the
/// default probes, and runs nothing (no dtrace is needed).
#[test]
fn print_script_matches_the_golden_scripts() {
    for os in ["macos", "freebsd", "illumos", "linux"] {
        let out = lockscope()
            .args([
                "record",
                "--backend",
                "dtrace",
                "--os",
                os,
                "--print-script",
            ])
            .args(["-p", "4242"])
            .env("LOCKSCOPE_DTRACE", "/nonexistent/dtrace")
            .output()
            .expect("run lockscope");
        assert!(
            out.status.success(),
            "{os}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let golden = std::fs::read_to_string(
            dtrace_common::golden_dir().join(format!("{os}-defaults-pid.d")),
        )
        .expect("golden script");
        assert_eq!(String::from_utf8_lossy(&out.stdout), golden, "{os}");
    }
}

/// A macOS recording of a launched command through the fake dtrace: the command gets the
/// introspection libpthread, the profile holds the replayed records, and `report` reads it.
#[test]
fn record_through_a_fake_dtrace() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let lsp = tmp.path().join("mac.lsp");
    let seen = tmp.path().join("seen");
    let out = lockscope()
        .args(["record", "--backend", "dtrace", "--os", "macos", "-o"])
        .arg(&lsp)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "sleep 0.2; echo \"$DYLD_LIBRARY_PATH\" > {}",
            seen.display()
        ))
        .env("LOCKSCOPE_DTRACE", dtrace_tests().join("fake-dtrace"))
        .env(
            "FAKE_DTRACE_STDOUT",
            dtrace_tests().join("data/macos-record.out"),
        )
        .env("FAKE_DTRACE_BEGIN", "1")
        .env("FAKE_DTRACE_FOLLOW", "1")
        .output()
        .expect("run lockscope");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("recording with dtrace on macos"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&seen)
            .expect("the command ran")
            .trim(),
        "/usr/lib/system/introspection"
    );

    let out = lockscope()
        .arg("report")
        .arg(&lsp)
        .output()
        .expect("run report");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("launched by lockscope"), "{report}");
    assert!(report.contains("ended: target exited"), "{report}");
    assert!(report.contains("plockstat"), "{report}");
    assert!(
        report.contains("libsystem_kernel.dylib`__psynch_mutexwait"),
        "{report}"
    );
}

/// Waits (up to 20 s) until no dtrace of an earlier test is still running: lockscope stops
/// waiting for dtrace once it has printed everything, and the kernel then spends seconds
/// tearing its probes down, which would skew the next test's timings on a small machine.
fn wait_for_earlier_dtraces(dtrace: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    // The wrapper execs the real binary, which lives beside it in src/build/.
    let binary = dtrace
        .parent()
        .map(|dir| dir.join("src/build/dtrace"))
        .and_then(|p| p.canonicalize().ok());
    // A dtrace being torn down has already dropped its memory, and with it its `exe` link (ps
    // shows it as `[dtrace]`, in state D for seconds): its name is what is left of it. A zombie
    // costs nothing and is its parent's to reap.
    let running = || {
        std::fs::read_dir("/proc")
            .map(|entries| {
                entries.flatten().any(|e| {
                    let exe = std::fs::read_link(e.path().join("exe")).ok();
                    match exe {
                        Some(exe) => Some(&exe) == binary.as_ref() || exe == dtrace,
                        None => std::fs::read_to_string(e.path().join("stat")).is_ok_and(|stat| {
                            stat.split_once(" (dtrace) ")
                                .is_some_and(|(_, rest)| !rest.starts_with('Z'))
                        }),
                    }
                })
            })
            .unwrap_or(false)
    };
    while running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for [`wait_for_earlier_dtraces`] when dropped: a live test leaves no dtrace tearing
/// down behind it, to skew the timings of whatever test runs next (eBPF ones included).
struct QuietAfter(PathBuf);

impl Drop for QuietAfter {
    fn drop(&mut self) {
        wait_for_earlier_dtraces(&self.0);
    }
}

/// `lockscope record -o OUTPUT` with the real dtrace on Linux; the target's arguments follow.
fn dtrace_record(dtrace: &Path, output: &Path) -> Command {
    wait_for_earlier_dtraces(dtrace);
    let mut cmd = lockscope();
    cmd.args(["record", "--backend", "dtrace", "--os", "linux", "-o"])
        .arg(output)
        .env("LOCKSCOPE_DTRACE", dtrace);
    cmd
}

/// What a live test holds: the real dtrace, a temporary directory for its profiles, and a quiet
/// machine after it (see [`QuietAfter`]).
struct Live {
    dtrace: PathBuf,
    tmp: tempfile::TempDir,
    _quiet: QuietAfter,
}

impl Live {
    /// The live test `test`'s setup, or `None` when it cannot run (see [`real_dtrace`]).
    fn start(test: &str) -> Option<Live> {
        let dtrace = real_dtrace(test)?;
        Some(Live {
            _quiet: QuietAfter(dtrace.clone()),
            tmp: tempfile::tempdir().expect("tempdir"),
            dtrace,
        })
    }

    /// The profile `name` in the test's temporary directory.
    fn profile(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// [`dtrace_record`] with this test's dtrace.
    fn record(&self, output: &Path) -> Command {
        dtrace_record(&self.dtrace, output)
    }

    /// `record -o OUTPUT -- sleep 30`, its stderr piped, `setup` applied before it starts;
    /// returns it once its probes are enabled, with the rest of its stderr.
    fn record_sleep(
        &self,
        output: &Path,
        setup: impl FnOnce(&mut Command),
    ) -> (KillOnDrop, BufReader<ChildStderr>) {
        let mut cmd = self.record(output);
        cmd.args(["--", "sleep", "30"]).stderr(Stdio::piped());
        setup(&mut cmd);
        let mut recorder = KillOnDrop(cmd.spawn().expect("run lockscope"));
        let rest = wait_for_probes(&mut recorder.0);
        (recorder, rest)
    }
}

fn read(path: &Path) -> Profile {
    lockscope_probes::read_profile(path).expect("read the profile")
}

/// Checks the demo's known answer as the eBPF tests do: one blocked wait (50 ms or more) in
/// each of mutex-waiter-1..4 and cond-waiter-1..2, of the right kind, each between the bounds the
/// demo printed in `log` (its thread's own measure, and how long the main thread knew it asleep:
/// see `common::assert_demo_waits`), whatever a loaded machine did to the timing.
fn check_known_answer(profile: &Profile, label: &str, log: &str) {
    for (kind, prefix, threads) in [
        (WaitKind::Mutex, "mutex-waiter-", 4u64),
        (WaitKind::Condvar, "cond-waiter-", 2),
    ] {
        for n in 1..=threads {
            let name = format!("{prefix}{n}");
            let blocked: Vec<_> = profile
                .waits
                .iter()
                .filter(|w| profile.thread_name(w.pid, w.tid) == Some(name.as_str()))
                .filter(|w| w.stats.max_ns >= 50_000_000)
                .collect();
            let count: u64 = blocked.iter().map(|w| w.stats.count).sum();
            assert_eq!(
                count, 1,
                "{label}: {name} blocked {count} times: {blocked:#?}"
            );
            assert!(
                blocked.iter().all(|w| w.kind == kind),
                "{label}: {name}: {blocked:#?}"
            );
        }
    }
    let probe = profile
        .waits
        .iter()
        .find(|w| w.stats.max_ns >= 50_000_000)
        .map(|w| w.probe.clone())
        .unwrap_or_default();
    common::assert_demo_waits(profile, &probe, log);
}

/// Runs `record` (which writes `path` and returns the demo's output) and checks the known
/// answer.
fn record_known_answer(path: &Path, label: &str, record: impl Fn() -> String) {
    let log = record();
    check_known_answer(&read(path), label, &log);
}

/// Waits for lockscope's "probes enabled" line on `child`'s stderr; returns the reader.
fn wait_for_probes(child: &mut Child) -> BufReader<std::process::ChildStderr> {
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr piped"));
    let mut seen = Vec::new();
    loop {
        let mut line = String::new();
        let n = stderr.read_line(&mut line).expect("read lockscope stderr");
        assert!(
            n > 0,
            "lockscope ended before its probes were enabled: {seen:?}"
        );
        if line.contains("(probes enabled)") {
            return stderr;
        }
        seen.push(line);
    }
}

/// True once `pid` has ended (gone, or a zombie), waiting up to 5 s.
fn ended(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ")?.1.chars().next());
        if matches!(state, None | Some('Z') | Some('X')) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ends a process that a test started through lockscope (a `-c` target outlives a killed
/// dtrace), by its pid from the profile.
fn end_target(pid: u32) {
    if pid > 1 {
        // SAFETY: kill has no memory preconditions; the pid is the test's own target.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
}

/// Waits for the recorder to end and fails the test unless it succeeded; returns the rest of its
/// stderr.
fn wait_success(recorder: &mut KillOnDrop, rest: BufReader<ChildStderr>) -> Vec<String> {
    let status = recorder.0.wait().expect("wait for lockscope");
    let stderr: Vec<String> = rest.lines().map_while(Result::ok).collect();
    assert!(status.success(), "{stderr:?}");
    stderr
}

/// The recording ended on SIGINT, and the command it launched with it (`dtrace -c` leaves it
/// running).
fn assert_interrupted(profile: &Profile) {
    let target = profile.metadata.target.pid;
    assert!(
        ended(target),
        "the launched command {target} is still running"
    );
    assert!(
        profile.metadata.end_reason.starts_with("interrupted"),
        "{}",
        profile.metadata.end_reason
    );
}

/// `record --backend dtrace --probes cpu` with the real dtrace (profile-997): the demo's spinner
/// and cruncher as on-CPU records under their own threads, each thread's CPU time within 15% of
/// what its thread clock measured, some of its samples in the demo's function. DTrace's ustack()
/// walks frame pointers, which the demo and libc do not keep: only a sample whose leaf is the
/// demo's function names it (the eBPF probe's stacks are checked complete instead).
#[test]
fn live_cpu_probe_samples_the_demo() {
    let Some(live) = Live::start("live_cpu_probe_samples_the_demo") else {
        return;
    };
    let lsp = live.profile("cpu.lsp");
    let out = live
        .record(&lsp)
        .args(["--probes", "cpu", "--", demo_path()])
        .output()
        .expect("run lockscope");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let measured = demo_cpu_measures(&String::from_utf8_lossy(&out.stdout));
    let profile = read(&lsp);
    for (thread, chain) in DEMO_ON_CPU {
        let (_, demo_ms) = measured
            .iter()
            .find(|(t, _)| t == thread)
            .unwrap_or_else(|| panic!("no CPU measure of {thread}: {measured:?}"));
        let samples: Vec<_> = profile
            .waits
            .iter()
            .filter(|w| w.probe == "cpu" && profile.thread_name(w.pid, w.tid) == Some(thread))
            .collect();
        assert!(
            samples.iter().all(|w| w.kind == WaitKind::OnCpu),
            "{samples:#?}"
        );
        // When it fails, say what was sampled instead: this check failed once in five runs, and
        // a failure that shows nothing can only be rerun, not read.
        assert!(
            samples.iter().any(|w| profile
                .stack(w.user_stack)
                .is_some_and(|s| s.frames.iter().any(|f| f.display_name().contains(chain[1])))),
            "{thread}: no sample in {} among {} samples; their user stacks (leaf first): {:#?}; \
             the threads: {:?}",
            chain[1],
            samples.len(),
            samples
                .iter()
                .map(|w| profile.stack(w.user_stack).map(|s| s
                    .frames
                    .iter()
                    .map(|f| f.display_name())
                    .collect::<Vec<_>>()))
                .collect::<Vec<_>>(),
            profile.threads
        );
        let sampled_ms = samples.iter().map(|w| w.stats.total_ns).sum::<u64>() as f64 / 1e6;
        assert!(
            (sampled_ms - demo_ms).abs() <= demo_ms * ON_CPU_TOLERANCE,
            "{thread}: {sampled_ms:.1} ms sampled, by its own clock {demo_ms:.1} ms"
        );
    }
}

/// `record --backend dtrace --os linux -- lockscope-demo` with the real dtrace gives the demo's
/// known answer with symbolized leaf frames, the same report sections as the eBPF backend, and
/// ends when the demo exits.
#[test]
fn live_record_command_known_answer() {
    let Some(live) = Live::start("live_record_command_known_answer") else {
        return;
    };
    let lsp = live.profile("dtrace.lsp");
    record_known_answer(&lsp, "dtrace", || {
        let started = Instant::now();
        let out = live
            .record(&lsp)
            .args(["--", demo_path()])
            .output()
            .expect("run lockscope");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        // dtrace loads its probes for about a second and is not waited for once END printed.
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
        // The demo's own output reaches lockscope's stdout, as it would without lockscope.
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            stdout.contains("lockscope-demo: held the order lock"),
            "{stdout}"
        );
        stdout
    });
    let profile = read(&lsp);
    assert_eq!(profile.metadata.end_reason, "target exited");
    assert_eq!(profile.metadata.os, "linux");
    assert!(profile.metadata.target.pid > 0);
    // The leaf frames are named from the demo's mappings although it exited before END.
    let leaves: Vec<String> = profile
        .waits
        .iter()
        .filter_map(|w| {
            profile
                .stack(w.user_stack)?
                .frames
                .first()?
                .function
                .clone()
        })
        .collect();
    assert!(
        leaves.iter().any(|f| f.contains("lll_lock_wait")),
        "{leaves:?}"
    );
    let report = common::run_ok(lockscope().arg("report").arg(&lsp));
    for section in [
        "Waits by kind",
        "wait sites (stack and kind)",
        "Contention: waits on other threads of the program",
    ] {
        assert!(report.contains(section), "{section}: {report}");
    }
}

/// `record -p PID -d 10s` attaches to the running demo, gives its known answer with the demo
/// still alive, and ends by the duration.
#[test]
fn live_record_pid_duration() {
    let Some(live) = Live::start("live_record_pid_duration") else {
        return;
    };
    let lsp = live.profile("pid.lsp");
    let mut demo = KillOnDrop(
        Command::new(demo_path())
            .arg("--wait-for-stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the demo"),
    );
    let mut demo_out = demo.0.stdout.take().expect("demo stdout");
    let mut recorder = KillOnDrop(
        live.record(&lsp)
            .args(["-p", &demo.0.id().to_string(), "-d", "10s"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("run lockscope"),
    );
    let rest = wait_for_probes(&mut recorder.0);
    let mut stdin = demo.0.stdin.take().expect("demo stdin");
    writeln!(stdin).expect("start the demo");
    wait_success(&mut recorder, rest);
    assert!(
        demo.0.try_wait().expect("demo state").is_none(),
        "the demo outlives the recording"
    );
    drop(stdin);
    let mut log = String::new();
    std::io::Read::read_to_string(&mut demo_out, &mut log).expect("the demo's output");
    let profile = read(&lsp);
    check_known_answer(&profile, "dtrace -p", &log);
    assert_eq!(profile.metadata.end_reason, "duration elapsed");
    assert!(!profile.metadata.target.launched);
    let ms = profile.metadata.duration_ns / 1_000_000;
    assert!((9_000..=11_000).contains(&ms), "recorded {ms} ms");
}

/// Both backends record the demo's known answer within 5%, and `lockscope diff` of the two
/// shows the same wait sites (compared at their leaf, with the stack-depth note), not phantom
/// changes.
#[test]
fn live_backends_agree() {
    let Some(live) = Live::start("live_backends_agree") else {
        return;
    };
    if !bpf_available("live_backends_agree") {
        return;
    }
    let ebpf = live.profile("ebpf.lsp");
    let dt = live.profile("dtrace.lsp");
    record_known_answer(&ebpf, "ebpf", || {
        wait_for_earlier_dtraces(&live.dtrace);
        common::run_ok(
            lockscope()
                .args(["record", "--backend", "ebpf", "-o"])
                .arg(&ebpf)
                .args(["--", demo_path()]),
        )
    });
    record_known_answer(&dt, "dtrace", || {
        common::run_ok(live.record(&dt).args(["--", demo_path()]))
    });
    let diff = common::run_ok(lockscope().arg("diff").arg(&ebpf).arg(&dt));
    assert!(
        diff.contains("stack depth differs by method, not by code: B walked its user stacks by frame pointers"),
        "{diff}"
    );
    let warnings: Vec<&str> = diff.lines().filter(|l| l.starts_with("WARNING")).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    // Each site's rows: the mutex and condvar sites carry the same waits on both sides.
    let sites = diff
        .split("wait sites (canonical stack, root first)")
        .nth(1)
        .expect("sites");
    let mut lines = sites.lines().skip(2);
    let mut seen = Vec::new();
    while let (Some(site), Some(a), Some(b)) = (lines.next(), lines.next(), lines.next()) {
        let waits = |row: &str| row.split_whitespace().nth(1).map(str::to_string);
        let site = site.trim().to_string();
        assert!(
            site.starts_with("[kernel wait];["),
            "a phantom site: {site}\n{diff}"
        );
        // Both sides hold at least the demo's blocked waits there (each profile's known answer
        // is checked above; a convoy may add a short wait on either side, so not equal counts).
        let at_least = if site.ends_with("[mutex]") {
            4
        } else if site.ends_with("[condvar]") {
            2
        } else {
            0
        };
        for row in [a, b] {
            let count: u64 = waits(row).and_then(|w| w.parse().ok()).unwrap_or(0);
            assert!(count >= at_least, "{site}: {row}\n{diff}");
        }
        seen.push(site);
    }
    for site in ["[kernel wait];[mutex]", "[kernel wait];[condvar]"] {
        assert!(seen.iter().any(|s| s == site), "{site} missing: {diff}");
    }
}

/// A recording from a background job (SIGINT ignored, as a non-interactive shell starts one)
/// still ends on SIGINT with a complete profile: dtrace gets its SIGINT back.
#[test]
fn live_sigint_from_a_background_job() {
    let Some(live) = Live::start("live_sigint_from_a_background_job") else {
        return;
    };
    let lsp = live.profile("bg.lsp");
    let (mut recorder, _rest) = live.record_sleep(&lsp, |cmd| {
        use std::os::unix::process::CommandExt;
        // SAFETY: signal is async-signal-safe; it only changes this child's disposition.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
    });
    let interrupted = Instant::now();
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe { libc::kill(recorder.0.id() as libc::pid_t, libc::SIGINT) };
    let status = recorder.0.wait().expect("wait for lockscope");
    assert!(status.success());
    assert!(
        interrupted.elapsed() < Duration::from_secs(10),
        "{:?}",
        interrupted.elapsed()
    );
    assert_interrupted(&read(&lsp));
}

/// A dtrace killed while recording leaves a profile that says it is partial.
#[test]
fn live_killed_dtrace_leaves_a_partial_profile() {
    let Some(live) = Live::start("live_killed_dtrace_leaves_a_partial_profile") else {
        return;
    };
    let lsp = live.profile("killed.lsp");
    let (mut recorder, rest) = live.record_sleep(&lsp, |_| {});
    let lockscope_pid = recorder.0.id();
    let dtrace_pid = std::fs::read_dir(format!("/proc/{lockscope_pid}/task"))
        .expect("lockscope's tasks")
        .flatten()
        .find_map(|t| {
            let children = std::fs::read_to_string(t.path().join("children")).ok()?;
            children.split_whitespace().next()?.parse::<i32>().ok()
        })
        .expect("dtrace is lockscope's child");
    // SAFETY: kill has no memory preconditions; the pid is dtrace, lockscope's child.
    unsafe { libc::kill(dtrace_pid, libc::SIGKILL) };
    let stderr = wait_success(&mut recorder, rest);
    assert!(
        stderr.iter().any(|l| l.contains("profile is partial")),
        "{stderr:?}"
    );
    let profile = read(&lsp);
    end_target(profile.metadata.target.pid);
    assert!(
        profile.metadata.end_reason.starts_with("dtrace killed"),
        "{}",
        profile.metadata.end_reason
    );
}

/// A Ctrl-C at the terminal (SIGINT to lockscope's whole process group) ends the recording with
/// dtrace's END output: dtrace, in its own process group, gets one SIGINT (two would make it
/// exit without printing).
#[test]
fn live_ctrl_c_at_the_terminal() {
    let Some(live) = Live::start("live_ctrl_c_at_the_terminal") else {
        return;
    };
    let lsp = live.profile("ctrl-c.lsp");
    let (mut recorder, rest) = live.record_sleep(&lsp, |cmd| {
        use std::os::unix::process::CommandExt;
        // Its own process group, standing in for the terminal's foreground group.
        cmd.process_group(0);
    });
    // SAFETY: kill has no memory preconditions; the group is the one lockscope leads.
    unsafe { libc::kill(-(recorder.0.id() as libc::pid_t), libc::SIGINT) };
    let stderr = wait_success(&mut recorder, rest);
    assert!(
        !stderr.iter().any(|l| l.contains("before printing")),
        "dtrace did not print its aggregations: {stderr:?}"
    );
    assert_interrupted(&read(&lsp));
}

/// The waits of process `pid` of `profile` alone (its threads too).
fn of_process(profile: &Profile, pid: u32) -> Profile {
    Profile {
        waits: profile
            .waits
            .iter()
            .filter(|w| w.pid == pid)
            .cloned()
            .collect(),
        threads: profile
            .threads
            .iter()
            .filter(|t| t.pid == pid)
            .cloned()
            .collect(),
        ..profile.clone()
    }
}

/// A demo waiting for its go line (its summary on stdout, discarded).
fn waiting_demo() -> KillOnDrop {
    KillOnDrop(
        Command::new(demo_path())
            .arg("--wait-for-stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the demo"),
    )
}

/// `record --backend dtrace` of several processes (`-p A,B`: a pid set that proc:::create
/// extends), of a tree (`-p SHELL --tree`: progenyof) and of every process (`-a`: no pid
/// predicate), each with the known answer of every demo in it; `--cgroup` is refused with its
/// reason.
#[test]
fn live_record_pids_tree_and_all() {
    let Some(live) = Live::start("live_record_pids_tree_and_all") else {
        return;
    };
    // Every demo stays alive until the recording ends: DTrace for Linux names frames when END
    // prints, through the live process (the recorder reads one target's mappings only).
    let record = |lsp: &Path, args: &[String], demos: &mut [&mut Child]| {
        let mut recorder = KillOnDrop(
            live.record(lsp)
                .args(args)
                .args(["-d", "8s"])
                .stderr(Stdio::piped())
                .spawn()
                .expect("run lockscope"),
        );
        let rest = wait_for_probes(&mut recorder.0);
        let stdins: Vec<_> = demos
            .iter_mut()
            .map(|demo| {
                let mut stdin = demo.stdin.take().expect("demo stdin");
                writeln!(stdin).expect("start the demo");
                stdin
            })
            .collect();
        wait_success(&mut recorder, rest);
        drop(stdins);
        // Each demo prints its bounds before it waits for its standard input to close.
        let logs: Vec<String> = demos
            .iter_mut()
            .map(|demo| {
                let mut log = String::new();
                demo.stdout
                    .take()
                    .expect("demo stdout")
                    .read_to_string(&mut log)
                    .expect("read the demo's output");
                log
            })
            .collect();
        (read(lsp), logs)
    };

    let mut a = waiting_demo();
    let mut b = waiting_demo();
    let (pid_a, pid_b) = (a.0.id(), b.0.id());
    let lsp = live.profile("pids.lsp");
    let (profile, logs) = record(
        &lsp,
        &["-p".into(), format!("{pid_a},{pid_b}")],
        &mut [&mut a.0, &mut b.0],
    );
    assert_eq!(profile.metadata.target.pids, [pid_a, pid_b]);
    check_known_answer(&of_process(&profile, pid_a), "dtrace -p A,B (A)", &logs[0]);
    check_known_answer(&of_process(&profile, pid_b), "dtrace -p A,B (B)", &logs[1]);

    let mut shell = KillOnDrop(
        Command::new("sh")
            .args(["-c", &format!("{} --wait-for-stdin; true", demo_path())])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the shell"),
    );
    let shell_pid = shell.0.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    let child = loop {
        let out = Command::new("pgrep")
            .args(["-P", &shell_pid.to_string()])
            .output()
            .expect("pgrep");
        if let Some(pid) = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.trim().parse::<u32>().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the shell's demo did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let lsp = live.profile("tree.lsp");
    let (profile, logs) = record(
        &lsp,
        &["-p".into(), shell_pid.to_string(), "--tree".into()],
        &mut [&mut shell.0],
    );
    assert!(profile.metadata.target.tree);
    check_known_answer(
        &of_process(&profile, child),
        "dtrace -p SHELL --tree",
        &logs[0],
    );

    // Every futex wait of the machine goes through dtrace; the demo's bounds hold whatever
    // that load does to its timing.
    let mut demo = waiting_demo();
    let pid = demo.0.id();
    let lsp = live.profile("all.lsp");
    let (profile, logs) = record(&lsp, &["-a".into()], &mut [&mut demo.0]);
    assert!(profile.metadata.target.all);
    check_known_answer(&of_process(&profile, pid), "dtrace -a", &logs[0]);

    let out = live
        .record(&live.profile("cgroup.lsp"))
        .args(["--cgroup", "/", "-d", "1s"])
        .output()
        .expect("run lockscope");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("--cgroup needs the ebpf backend: D has no variable"),
        "{stderr}"
    );
}

/// The wait-for analysis from DTrace (`--probes bottleneck`: the defaults and the `waitfor`
/// stream), on the known-answer program of the class "a sleep inside a critical section"
/// (`tests/programs/sleep_under_lock.c`, docs/BOTTLENECK.md, whose truth the eBPF tests prove by
/// experiment): `lockscope why --json` ranks first the sleep under the lock (kind `sleep`, in
/// `clock_nanosleep`, on a stack through `request_critical_section`), not the CPU work under the
/// mutex (`request_update_under_lock`, the naive answer); the shares are fractions that add up
/// to at most the whole, the first explains at least a quarter of the analysed threads' time,
/// and the analysis followed intervals with none lost. The program is built with frame pointers
/// (`ustack()` walks them, as on macOS and the BSDs); libc's `nanosleep` has none, so the frame
/// between `clock_nanosleep` and `request_critical_section` (`journal_write_under_lock`) is not
/// in the stack.
#[test]
fn live_why_names_the_sleep_under_the_lock() {
    let test = "live_why_names_the_sleep_under_the_lock";
    let Some(live) = Live::start(test) else {
        return;
    };
    let binary = live.tmp.path().join("sleep_under_lock");
    let source =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/programs/sleep_under_lock.c");
    match Command::new("cc")
        .args(["-O2", "-fno-omit-frame-pointer", "-pthread", "-o"])
        .arg(&binary)
        .arg(&source)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "cc sleep_under_lock.c: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => {
            assert!(
                !std::env::var("CI").is_ok_and(|v| v == "true"),
                "{test}: no C compiler (`cc`: {e})"
            );
            eprintln!("skipped: {test}: no C compiler (`cc`: {e}); apt-get install gcc");
            return;
        }
    }
    let lsp = live.profile("sleep_under_lock.lsp");
    let out = live
        .record(&lsp)
        .args(["--probes", "bottleneck", "--"])
        .arg(&binary)
        .args(["--duration", "3"])
        .current_dir(live.tmp.path())
        .output()
        .expect("run lockscope");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("throughput: "), "the program ran: {stdout}");

    let profile = read(&lsp);
    let waitfor = profile
        .waitfor
        .as_ref()
        .unwrap_or_else(|| panic!("no wait-for analysis in the profile: {stderr}"));
    let seconds = profile.metadata.duration_ns as f64 / 1e9;
    eprintln!(
        "{test}: {} intervals in {seconds:.2} s ({:.0}/s), {} lost; dtrace drops {:?}",
        waitfor.intervals,
        waitfor.intervals as f64 / seconds,
        waitfor.lost_intervals,
        profile.metadata.losses
    );
    assert!(waitfor.intervals > 1000, "{} intervals", waitfor.intervals);

    let json = common::run_ok(lockscope().arg("why").arg(&lsp).arg("--json"));
    let answer: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("why --json: {e}: {json}"));
    let causes = answer["causes"]
        .as_array()
        .unwrap_or_else(|| panic!("no causes: {json}"));
    let first = causes
        .first()
        .unwrap_or_else(|| panic!("why found no cause: {json}"));
    eprintln!("{test}: first cause {first}");
    // Every cause on one line each, leaf first, for a run whose full answer gets cut short.
    for cause in causes {
        let leaf = cause["stack"][0].as_str().unwrap_or("?");
        eprintln!(
            "{test}: cause {} {} {:.3} {} ns at {leaf}",
            cause["rank"],
            cause["kind"],
            cause["share"].as_f64().unwrap_or_default(),
            cause["total_ns"]
        );
    }
    let names: Vec<String> = first["stack"]
        .as_array()
        .unwrap_or_else(|| panic!("a stack of frames: {first}"))
        .iter()
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect();
    let context = format!("first cause {first:#}\nall: {json}");
    assert_eq!(first["kind"], "sleep", "{context}");
    assert_eq!(first["call"], "clock_nanosleep", "{context}");
    assert!(
        names
            .first()
            .is_some_and(|leaf| leaf.contains("clock_nanosleep")),
        "{context}"
    );
    common::assert_in_order(&names, &["request_thread", "request_critical_section"]);
    assert!(
        !names
            .iter()
            .any(|n| n.contains("request_update_under_lock")),
        "the naive answer is not in the first cause: {context}"
    );
    let mut shares = 0.0;
    for cause in causes {
        let share = cause["share"].as_f64().unwrap_or_default();
        assert!(share > 0.0 && share <= 1.0, "share out of (0, 1]: {cause}");
        shares += share;
    }
    assert!(shares <= 1.0 + 1e-6, "{shares}: {json}");
    let share = first["share"].as_f64().unwrap_or_default();
    assert!(
        share >= 0.25,
        "the sleep under the lock explains {share}: {context}"
    );
    // The report still reads the profile.
    let report = common::run_ok(lockscope().arg("report").arg(&lsp));
    assert!(report.contains("backend dtrace"), "{report}");
}
