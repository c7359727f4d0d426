//! `lockscope record --backend dtrace` end to end on any host: `--print-script` prints the
//! backend's golden scripts without running anything, and a recording through a fake dtrace
//! (`dtrace/tests/fake-dtrace`, selected with LOCKSCOPE_DTRACE) writes a profile that `report`
//! reads.
//!
//! The `live_` tests, in the submodules, run a real dtrace(1) on Linux (Oracle's DTrace for Linux,
//! built by `.ci/dtrace` or `../shared/dtrace-linux/build.sh DIR`, named by LOCKSCOPE_DTRACE), as
//! root: the demo's known answer through `record -- CMD` and `-p PID -d 10s`, both backends
//! against each other through `lockscope diff` (`known_answer`); the ways a recording ends, Ctrl-C
//! from a background job, a killed dtrace (`endings`); several processes (`processes`); the
//! bottleneck analysis (`why`). Here the helpers they share. Without a real dtrace they print
//! `skipped: <why>`; with CI=true (or LOCKSCOPE_REQUIRE_BPF) they fail instead.

use crate::common;
// The dtrace crate's test helpers: `real_dtrace` finds (or skips without) the real dtrace alike
// in both crates' tests, `golden_dir` its golden scripts.
use lockscope_dev::dtrace as dtrace_common;

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

mod endings;
mod known_answer;
mod processes;
mod why;

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
