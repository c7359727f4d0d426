//! The unwinder's per-thread stack memo (`ebpf/src/bpf/unwind_memo.bpf.h`) never answers with a
//! wrong stack: real workloads recorded with `LOCKSCOPE_STACK_MEMO=verify` (every stack unwound
//! and compared with the memo's answer) see no difference, and waits that differ only in a return
//! address deep in the stack keep their own stacks. Root with BPF.

use crate::common;

use common::{bpf_scratch, lockscope};
use std::path::Path;
use std::process::Command;

/// Waits under each caller in `memo_callers.c`.
const ROUNDS: u64 = 1500;

/// Records `command` with `probes` and the memo in `mode`; returns the profile and stderr.
fn record(
    dir: &Path,
    probes: &str,
    mode: &str,
    command: &[&str],
) -> (lockscope_probes::Profile, String) {
    let lsp = dir.join(format!("{mode}.lsp"));
    let out = lockscope()
        .env("LOCKSCOPE_STACK_MEMO", mode)
        .args(["record", "--probes", probes, "-o"])
        .arg(&lsp)
        .arg("--")
        .args(command)
        .output()
        .expect("run lockscope record");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "record failed: {stderr}");
    (
        lockscope_probes::read_profile(&lsp).expect("profile"),
        stderr,
    )
}

/// From the recorder's `unwinding:` line: (stacks, memo answers, differing answers). The
/// differing count is 0 unless the mode is `verify`.
fn memo_counts(stderr: &str) -> (u64, u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains("unwinding: "))
        .unwrap_or_else(|| panic!("no unwinding line in {stderr}"));
    let number_before = |marker: &str| -> u64 {
        let head = &line[..line
            .find(marker)
            .unwrap_or_else(|| panic!("{marker:?} in {line}"))];
        let digits: String = head
            .trim_end()
            .chars()
            .rev()
            .take_while(char::is_ascii_digit)
            .collect();
        digits
            .chars()
            .rev()
            .collect::<String>()
            .parse()
            .expect("a count")
    };
    let stacks = number_before(" user stacks");
    if line.contains(" differed") {
        (
            stacks,
            number_before(" checked against the stack memo"),
            number_before(" differed"),
        )
    } else {
        (stacks, number_before(" from the stack memo"), 0)
    }
}

/// Builds `tests/data/memo_callers.c` into `dir` without frame pointers; `None` (printed as a
/// skip) without a C compiler.
fn build_memo_callers(dir: &Path) -> Option<std::path::PathBuf> {
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/memo_callers.c");
    let binary = dir.join("memo_callers");
    match Command::new("cc")
        .args(["-O2", "-fomit-frame-pointer", "-o"])
        .arg(&binary)
        .arg(source)
        .status()
    {
        Ok(status) => {
            assert!(status.success(), "cc {source} failed");
            Some(binary)
        }
        Err(e) => {
            eprintln!("skipped: memo test workload: no C compiler (`cc`): {e}");
            None
        }
    }
}

/// Waits from the same pc, sp and frame pointer whose stacks differ only in one return address
/// (`left_caller` or `right_caller`, in turn): with the memo on, every one of them is counted
/// under its own caller, by the futex probe and by the off-CPU probe (whose switch-out leaves the
/// memo that the futex exit of the same wait then uses), on complete stacks; and `verify` finds
/// no memo answer differing from a walk.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn memo_keeps_waits_that_differ_in_one_return_address_apart() {
    let Some(dir) = bpf_scratch("memo_keeps_waits_that_differ_in_one_return_address_apart") else {
        return;
    };
    let Some(binary) = build_memo_callers(dir.path()) else {
        return;
    };
    let binary = binary.to_str().expect("utf-8 path");
    let rounds = ROUNDS.to_string();
    for mode in ["on", "verify"] {
        let (profile, stderr) =
            record(dir.path(), "futex,offcpu", mode, &[binary, rounds.as_str()]);
        let (stacks, memo, differed) = memo_counts(&stderr);
        assert_eq!(differed, 0, "{stderr}");
        assert!(
            memo * 3 > stacks,
            "the futex exits should find the switch-out's memo: {stderr}"
        );
        for probe in ["futex", "offcpu"] {
            for caller in ["left_caller", "right_caller"] {
                let mut waits = 0;
                // offcpu's run-queue delays after those sleeps point at the same stacks.
                let sleeps = profile
                    .waits
                    .iter()
                    .filter(|w| w.probe == probe && !w.operation.contains("run-queue"));
                for w in sleeps {
                    let Some(stack) = profile.stack(w.user_stack) else {
                        continue;
                    };
                    let names: Vec<String> =
                        stack.frames.iter().map(|f| f.display_name()).collect();
                    if names.iter().any(|n| n == caller) {
                        assert!(!stack.truncated, "{probe} {caller}: {names:?}");
                        assert!(
                            names.iter().any(|n| n.contains("wait_once")),
                            "{probe} {caller}: {names:?}"
                        );
                        waits += w.stats.count;
                    }
                }
                if probe == "futex" {
                    assert_eq!(waits, ROUNDS, "{mode}: {probe} waits under {caller}");
                } else {
                    // offcpu sees a wait only when the thread leaves the CPU: a 50 µs timer
                    // that fires before the switch (an interrupt or a preemption between arming
                    // it and sleeping) ends the wait on the CPU, 8 of 1500 times on a quiet
                    // machine. A memo answer under the other caller's stack would show as more
                    // than ROUNDS here (and `verify` counts every differing answer above).
                    assert!(
                        (ROUNDS - ROUNDS / 50..=ROUNDS).contains(&waits),
                        "{mode}: {waits} {probe} sleeps under {caller}, not {ROUNDS}"
                    );
                }
            }
        }
    }
}

/// lockscope's own benchmarks (thread ping-pongs over pipes, a mutex+condvar handoff, thread
/// creation, fork+exec of /bin/true: threads that wait at several sites in turn, exec, tids
/// reused by other processes), recorded with every probe that takes user stacks and the memo
/// in `verify` mode: thousands of memo answers, none differing from the walk done beside it.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn memo_answers_equal_the_walks_on_real_workloads() {
    let Some(dir) = bpf_scratch("memo_answers_equal_the_walks_on_real_workloads") else {
        return;
    };
    let bench = env!("CARGO_BIN_EXE_lockscope");
    let (profile, stderr) = record(
        dir.path(),
        "futex,offcpu,wakeup,preempt,syscall,lifecycle",
        "verify",
        &[
            bench,
            "bench",
            "--quick",
            "--only",
            "ctx-2thread,mutex-handoff,thread-create,fork+exec,pipe-rtt",
        ],
    );
    let (stacks, checked, differed) = memo_counts(&stderr);
    assert_eq!(differed, 0, "{stderr}");
    assert!(checked > 1000, "too few memo answers to check: {stderr}");
    assert!(checked <= stacks, "{stderr}");
    assert!(
        profile.waits.iter().any(|w| w.probe == "futex"),
        "no futex waits recorded"
    );
}
