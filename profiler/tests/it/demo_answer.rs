//! The demo's known answer, told the same way by every view under every probe set: its mutex
//! convoy is contention at `take_order_lock` whichever probe saw it, its condvar waiters waited
//! on the main thread (contention where who ended their sleeps is recorded; with `futex` alone,
//! neither, never idle), and `why` with no options names the main thread's two sleeps
//! (`hold_order_lock`, `prepare_shipment`) as the causes of those waits.

use crate::common::*;
use std::path::Path;

/// The probe sets a user tries, as the README gives them.
const PROBE_SETS: [&str; 4] = ["futex", "offcpu", "futex,offcpu", "bottleneck"];

/// Records the demo with `probes` into `lsp`.
fn record(lsp: &Path, probes: &str) {
    run_ok(
        lockscope()
            .args(["record", "--probes", probes, "-o"])
            .arg(lsp)
            .arg("--")
            .arg(demo_path()),
    );
}

/// The contention (`sites`) or idle (`idle`) rows of `report --json` of threads named
/// `threads*`, as (kind, total ns).
fn role_rows(report: &serde_json::Value, role: &str, threads: &str) -> Vec<(String, u64)> {
    report["sections"]["contention"][role]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|row| {
            row["threads"].as_array().is_some_and(|names| {
                names
                    .iter()
                    .any(|n| n.as_str().is_some_and(|n| n.starts_with(threads)))
            })
        })
        .map(|row| {
            (
                row["kind"].as_str().unwrap_or_default().to_string(),
                row["total_ns"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

/// Under every probe set, the report calls the 4 mutex waiters' 800 ms contention (kind
/// `mutex`), never idle, and the 2 condvar waiters' 600 ms never idle (contention, kind
/// `condvar`, wherever who ended them is recorded).
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn demo_report_tells_one_answer_under_every_probe_set() {
    let Some(dir) = bpf_scratch("demo_report_tells_one_answer_under_every_probe_set") else {
        return;
    };
    for probes in PROBE_SETS {
        let lsp = dir.path().join(format!("{}.lsp", probes.replace(',', "-")));
        record(&lsp, probes);
        let json = run_ok(lockscope().arg("report").arg(&lsp).arg("--json"));
        let report: serde_json::Value = serde_json::from_str(&json).expect("report --json");
        let context = format!("--probes {probes}: {:#}", report["sections"]["contention"]);

        let convoy = role_rows(&report, "sites", "mutex-waiter-");
        let convoy_ns: u64 = convoy
            .iter()
            .filter(|(kind, _)| kind == "mutex")
            .map(|(_, ns)| ns)
            .sum();
        // 4 waiters x 200 ms, each between its known sleep and a loaded machine's delays.
        assert!(
            (760_000_000..=1_200_000_000).contains(&convoy_ns),
            "the convoy's contention is {convoy_ns} ns: {context}"
        );
        assert!(
            role_rows(&report, "idle", "mutex-waiter-").is_empty(),
            "a mutex convoy called idle: {context}"
        );
        assert!(
            role_rows(&report, "idle", "cond-waiter-").is_empty(),
            "the condvar waiters called idle: {context}"
        );
        if probes != "futex" {
            let signalled: u64 = role_rows(&report, "sites", "cond-waiter-")
                .iter()
                .filter(|(kind, _)| kind == "condvar")
                .map(|(_, ns)| ns)
                .sum();
            assert!(
                (570_000_000..=900_000_000).contains(&signalled),
                "the condvar waiters' contention is {signalled} ns: {context}"
            );
        }
    }
}

/// `why` of the demo recorded with `--probes bottleneck`, with no options: its first two causes
/// are the main thread's sleep holding the order lock (`hold_order_lock`, explaining the mutex
/// waiters at `take_order_lock`) and its sleep before the signal (`prepare_shipment`,
/// explaining the condvar waiters at `wait_for_signal`).
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn why_names_the_demo_main_thread_sleeps() {
    let Some(dir) = bpf_scratch("why_names_the_demo_main_thread_sleeps") else {
        return;
    };
    let lsp = dir.path().join("demo.lsp");
    record(&lsp, "bottleneck");
    let json = run_ok(lockscope().arg("why").arg(&lsp).arg("--json"));
    let why: serde_json::Value = serde_json::from_str(&json).expect("why --json");
    let text = run_ok(lockscope().arg("why").arg(&lsp));
    let cause = |rank: usize, function: &str, explains: &str, waiters: &str| {
        let cause = &why["causes"][rank];
        let context = format!("cause #{}: {cause:#}\n{text}", rank + 1);
        assert_eq!(cause["kind"], "sleep", "{context}");
        let stack = cause["stack"].to_string();
        assert!(stack.contains(function), "not at {function}: {context}");
        let waits = cause["sites"].to_string();
        assert!(
            waits.contains(explains) && waits.contains(waiters),
            "does not explain {waiters} at {explains}: {context}"
        );
    };
    cause(0, "hold_order_lock", "take_order_lock", "mutex-waiter");
    cause(1, "prepare_shipment", "wait_for_signal", "cond-waiter");
}
