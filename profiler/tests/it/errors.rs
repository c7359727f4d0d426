//! Every user error ends in one clear line on stderr and exit status 1: never a panic or a
//! backtrace.

use crate::common;

use common::*;
use std::process::{Command, Output};

/// Runs lockscope, expects failure, and returns its one stderr line.
fn one_line_error(cmd: &mut Command) -> String {
    let out: Output = cmd.output().expect("run lockscope");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{cmd:?}: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{cmd:?} panicked: {stderr}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{cmd:?}: expected one line, got: {stderr}");
    let line = lines[0];
    assert!(line.starts_with("lockscope: error: "), "{line}");
    line.trim_start_matches("lockscope: error: ").to_string()
}

/// A pid that no process has: one that just exited and was reaped.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("reap true");
    pid
}

/// `record -p` with a pid that does not exist says so.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn record_missing_pid() {
    if !bpf_available("record_missing_pid") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let pid = dead_pid();
    let msg = one_line_error(
        lockscope()
            .args(["record", "-o"])
            .arg(dir.path().join("x.lsp"))
            .args(["-p", &pid.to_string()]),
    );
    assert_eq!(msg, format!("no process with pid {pid}"));
    assert!(
        !dir.path().join("x.lsp").exists(),
        "no profile for a failed recording"
    );
}

/// `record -- CMD` with a command that cannot start names the command and the OS error, and
/// leaves no BPF program behind.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn record_command_that_cannot_start() {
    if !bpf_available("record_command_that_cannot_start") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let msg = one_line_error(
        lockscope()
            .args(["record", "-o"])
            .arg(dir.path().join("x.lsp"))
            .args(["--", "/nonexistent/lockscope-no-such-command", "arg"]),
    );
    assert_eq!(
        msg,
        "failed to start `/nonexistent/lockscope-no-such-command`: No such file or directory (os error 2)"
    );
}

/// Recording without CAP_BPF/CAP_PERFMON names what is missing and how to get it.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn record_without_privileges() {
    if !bpf_available("record_without_privileges") {
        return;
    }
    // Stay root (so the binary and its directories stay readable wherever the tree is) but
    // without any capability, as an ordinary user would run it.
    let msg = one_line_error(
        Command::new("setpriv")
            .args(["--bounding-set=-all", "--inh-caps=-all"])
            .arg(env!("CARGO_BIN_EXE_lockscope"))
            .args(["record", "-o", "/tmp/never-written.lsp", "--", "true"]),
    );
    assert!(
        msg.starts_with("missing capabilities CAP_BPF, CAP_PERFMON"),
        "{msg}"
    );
    assert!(msg.contains("run lockscope as root"), "{msg}");
}

/// An output path in a missing directory is refused before anything is recorded.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn record_unwritable_output() {
    if !bpf_available("record_unwritable_output") {
        return;
    }
    let msg = one_line_error(lockscope().args([
        "record",
        "-o",
        "/nonexistent-dir/run.lsp",
        "--",
        "true",
    ]));
    assert_eq!(
        msg,
        "failed to write profile `/nonexistent-dir/run.lsp`: No such file or directory (os error 2)"
    );
}

/// Bad argument combinations and values are refused with their reason.
#[test]
fn record_bad_arguments() {
    let msg = one_line_error(lockscope().args(["record", "--probes", "nosuch", "--", "true"]));
    assert_eq!(
        msg,
        format!(
            "unknown probe `nosuch`: known probes are {}",
            lockscope_probes::catalog::known_names()
        )
    );
    let msg = one_line_error(lockscope().args(["record"]));
    assert_eq!(
        msg,
        "nothing to record: give -p PID, --cgroup PATH, -a or a command after `--`"
    );
    let msg = one_line_error(lockscope().args(["record", "--tree", "--", "true"]));
    assert_eq!(
        msg,
        "--tree records the descendants of the processes of -p PID: give -p"
    );
    for (pid, why) in [
        (
            "12,abc",
            "invalid pid `abc`: expected a process id (a positive number)",
        ),
        ("0", "pid 0 is no process: -a records every process"),
    ] {
        let out = lockscope()
            .args(["record", "-p", pid])
            .output()
            .expect("run lockscope");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(why), "{stderr}");
    }
    let msg = one_line_error(lockscope().args(["record", "--frequency", "49", "--", "true"]));
    assert_eq!(
        msg,
        "--frequency sets the `cpu` probe's sampling rate: add `cpu` to --probes"
    );
    // A set with `cpu` in it is enough: the next check is the one to fail.
    let msg = one_line_error(lockscope().args([
        "record",
        "--probes",
        lockscope_probes::catalog::BOTTLENECK.name,
        "--frequency",
        "49",
        "--tree",
        "--",
        "true",
    ]));
    assert_eq!(
        msg,
        "--tree records the descendants of the processes of -p PID: give -p"
    );
    let out = lockscope()
        .args([
            "record",
            "--probes",
            "cpu",
            "--frequency",
            "0",
            "--",
            "true",
        ])
        .output()
        .expect("run lockscope");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("--frequency") && stderr.contains("1..=10000"),
        "{stderr}"
    );
}

fn sample_profile_bytes(dir: &std::path::Path) -> Vec<u8> {
    let path = dir.join("good.lsp");
    let profile = lockscope_probes::Profile::default();
    lockscope_probes::write_profile(&profile, &path).expect("write sample");
    std::fs::read(&path).expect("read sample")
}

/// Unreadable, truncated, foreign and too-new profiles each get their own message, naming the file.
#[test]
fn bad_profile_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.lsp");
    let msg = one_line_error(lockscope().arg("report").arg(&missing));
    assert_eq!(
        msg,
        format!(
            "failed to read profile `{}`: No such file or directory (os error 2)",
            missing.display()
        )
    );

    let good = sample_profile_bytes(dir.path());
    let truncated = dir.path().join("truncated.lsp");
    std::fs::write(&truncated, &good[..good.len() - 10]).expect("write truncated");
    let msg = one_line_error(lockscope().arg("report").arg(&truncated));
    assert!(
        msg.starts_with(&format!(
            "failed to read profile `{}`: truncated or corrupt profile: ",
            truncated.display()
        )),
        "{msg}"
    );

    let foreign = dir.path().join("foreign.lsp");
    std::fs::write(&foreign, "#!/bin/sh\necho not a profile\n").expect("write foreign");
    for sub in ["report", "export"] {
        let mut cmd = lockscope();
        cmd.arg(sub).arg(&foreign);
        if sub == "export" {
            cmd.args(["--format", "folded"]);
        }
        let msg = one_line_error(&mut cmd);
        assert_eq!(
            msg,
            format!(
                "failed to read profile `{}`: not a lockscope profile (bad magic bytes)",
                foreign.display()
            )
        );
    }

    let mut newer = good.clone();
    newer[8..12].copy_from_slice(&99u32.to_le_bytes());
    let newer_path = dir.path().join("newer.lsp");
    std::fs::write(&newer_path, newer).expect("write newer");
    let msg = one_line_error(lockscope().arg("report").arg(&newer_path));
    assert!(
        msg.ends_with("profile format version 99 is newer than this lockscope reads (up to 3); upgrade lockscope"),
        "{msg}"
    );
}

/// A flamegraph or export that cannot be written names the path and leaves nothing behind.
#[test]
fn unwritable_outputs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("good.lsp");
    std::fs::write(&good, sample_profile_bytes(dir.path())).expect("write");
    let msg = one_line_error(
        lockscope()
            .arg("flamegraph")
            .arg(&good)
            .args(["-o", "/nonexistent-dir/w.svg"]),
    );
    assert_eq!(
        msg,
        "failed to write `/nonexistent-dir/w.svg`: No such file or directory (os error 2)"
    );
    let msg = one_line_error(lockscope().arg("export").arg(&good).args([
        "--format",
        "folded",
        "-o",
        "/nonexistent-dir/w.folded",
    ]));
    assert_eq!(
        msg,
        "failed to write `/nonexistent-dir/w.folded`: No such file or directory (os error 2)"
    );
}
