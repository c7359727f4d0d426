//! `lockscope bench` and `lockscope bench diff` through the binary, as a user runs them.

use crate::common;

use common::lockscope;

fn run(args: &[&str]) -> String {
    let out = lockscope()
        .args(args)
        .output()
        .expect("run lockscope bench");
    assert!(
        out.status.success(),
        "lockscope {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A quick JSON run has the requested rows (one per thread count); `bench diff` against a run
/// with fewer benchmarks shows those as missing.
#[test]
fn quick_json_and_diff() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full = run(&[
        "bench",
        "--quick",
        "--json",
        "--only",
        "null-call,mutex-contention",
        "--threads",
        "1,2,3",
    ]);
    let json: serde_json::Value = serde_json::from_str(&full).expect("bench JSON");
    assert_eq!(json["format"], "lockscope-bench");
    let a = dir.path().join("a.json");
    std::fs::write(&a, &full).expect("write a");

    let only = run(&["bench", "--quick", "--json", "--only", "null-call"]);
    let b = dir.path().join("b.json");
    std::fs::write(&b, &only).expect("write b");

    let diff = run(&[
        "bench",
        "diff",
        a.to_str().expect("utf-8 path"),
        b.to_str().expect("utf-8 path"),
    ]);
    assert!(diff.contains("null-call"), "{diff}");
    let contention: Vec<&str> = diff
        .lines()
        .filter(|l| l.starts_with("mutex-contention"))
        .collect();
    assert_eq!(contention.len(), 3, "one row per thread count:\n{diff}");
    assert!(
        contention.iter().all(|l| l.contains("missing")),
        "rows only A has are shown as missing:\n{diff}"
    );
}

/// Unknown benchmark names are refused with the list of known ones.
#[test]
fn unknown_benchmark() {
    let out = lockscope()
        .args(["bench", "--only", "nosuch"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(
            "lockscope: error: unknown benchmark `nosuch`; known benchmarks: null-call"
        ),
        "{stderr}"
    );
}

/// `bench --record` records the suite, and a benchmark's waits carry its name as thread name
/// (truncated to Linux's 15 bytes), so the table's lines can be traced to their waits.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn recorded_suite_names_threads_after_benchmarks() {
    if !common::bpf_available("recorded_suite_names_threads_after_benchmarks") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let lsp = dir.path().join("bench.lsp");
    let out = lockscope()
        .args([
            "bench",
            "--quick",
            "--only",
            "mutex-contention",
            "--threads",
            "1,4",
            "--record",
            "-o",
        ])
        .arg(&lsp)
        .output()
        .expect("run bench --record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("mutex-contention"));
    let profile = lockscope_probes::read_profile(&lsp).expect("read profile");
    let contended: u64 = profile
        .waits
        .iter()
        .filter(|w| profile.thread_name(w.pid, w.tid) == Some("mutex-contentio"))
        .map(|w| w.stats.count)
        .sum();
    assert!(
        contended > 0,
        "no futex waits under the benchmark's threads: {:?}",
        profile.threads
    );
}
