//! Helpers shared by the end-to-end tests: the built binaries, privilege checks that skip loudly,
//! reading the recorder's start-up line, and golden files.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStderr, Command};

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

/// Compares `actual` with the golden file `tests/data/<name>`, or rewrites the file when
/// `LOCKSCOPE_BLESS=1` (then review the diff).
pub fn check_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    if std::env::var_os("LOCKSCOPE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read golden file {}: {e}; run with LOCKSCOPE_BLESS=1 to create it",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{name} differs from its golden file {} (LOCKSCOPE_BLESS=1 rewrites it)\n\
         --- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}
