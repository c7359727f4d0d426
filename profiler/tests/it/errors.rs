//! Every user error ends in one clear line on stderr and exit status 1 (2 for a usage error the
//! command line's parser refused): never a panic or a backtrace.

use crate::common;

use common::*;
use std::process::{Command, Output};

/// Runs lockscope, expects failure, and returns its one stderr line.
fn one_line_error(cmd: &mut Command) -> String {
    one_line_error_with(cmd, 1)
}

/// Runs lockscope, expects a usage error (exit 2), and returns its one stderr line.
fn usage_error(cmd: &mut Command) -> String {
    one_line_error_with(cmd, 2)
}

/// Runs lockscope, expects exit status `code`, and returns its one stderr line.
fn one_line_error_with(cmd: &mut Command, code: i32) -> String {
    let out: Output = cmd.output().expect("run lockscope");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{cmd:?}: {stderr}");
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
            "invalid value 'abc' for '--pid <PID>': invalid pid `abc`: expected a process id \
             (a positive number) (see 'lockscope record --help')",
        ),
        (
            "0",
            "invalid value '0' for '--pid <PID>': pid 0 is no process: -a records every process \
             (see 'lockscope record --help')",
        ),
    ] {
        assert_eq!(usage_error(lockscope().args(["record", "-p", pid])), why);
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
    let msg = usage_error(lockscope().args(["record", "--probes", "cpu", "-F", "0", "--", "true"]));
    assert_eq!(
        msg,
        "invalid value '0' for '--frequency <HZ>': 0 is not in 1..=10000 \
         (see 'lockscope record --help')"
    );
}

/// Usage errors the parser finds (an unknown flag, a bad value, a missing argument, an unknown
/// command) are one line naming the flag and what it wants, with exit status 2; an unknown flag
/// of `record` is not suggested after `--`, where it would be launched.
#[test]
fn usage_errors_are_one_line() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["record", "-F", "x", "--probes", "cpu", "--", "true"],
            "invalid value 'x' for '--frequency <HZ>': invalid digit found in string \
             (see 'lockscope record --help')",
        ),
        (
            &["record", "-X", "--", "true"],
            "unexpected argument '-X' (see 'lockscope record --help')",
        ),
        (
            &["report", "--by", "nope", "x.lsp"],
            "invalid value 'nope' for '--by <BY>': expected one of 'stack', 'thread', 'lock', \
             'process' (see 'lockscope report --help')",
        ),
        (
            &["sweep", "--load", "true"],
            "missing required argument '--output <DIR>' (see 'lockscope sweep --help')",
        ),
        (
            &["record", "--durtion", "2s"],
            "unexpected argument '--durtion'; did you mean '--duration'? \
             (see 'lockscope record --help')",
        ),
        (
            &["bench", "diff", "a.json"],
            "missing required argument '<B.json>' (see 'lockscope bench diff --help')",
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(usage_error(lockscope().args(args)), expected, "{args:?}");
    }
    // Help and the version still print in full, with success.
    for args in [&["record", "--help"][..], &["--version"][..]] {
        let out = lockscope().args(args).output().expect("run lockscope");
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stdout.is_empty() && out.stderr.is_empty(), "{args:?}");
    }
}

/// The readers of one profile read `lockscope.lsp`, what `record` writes by default, when given
/// no file; when it is missing, they say so and how to make one.
#[test]
fn readers_default_to_records_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let msg = one_line_error(lockscope().arg("report").current_dir(dir.path()));
    assert_eq!(
        msg,
        "no profile `lockscope.lsp` here: run `lockscope record` first, or give a profile file"
    );
    let profile = common::fixtures::demo_profile();
    lockscope_probes::write_profile(&profile, &dir.path().join("lockscope.lsp")).expect("write");
    let report = |args: &[&str]| {
        let out = lockscope()
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("run lockscope");
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let by_default = report(&["report"]);
    assert!(by_default.contains("Waits by kind"), "{by_default}");
    assert_eq!(by_default, report(&["report", "lockscope.lsp"]));
    assert_eq!(
        report(&["export", "--format", "folded"]),
        report(&["export", "lockscope.lsp", "--format", "folded"])
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
