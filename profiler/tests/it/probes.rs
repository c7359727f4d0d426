//! The probe set end to end through the `lockscope` binary: a probe that fails to attach is
//! reported in the profile and the report while the others keep recording; every probe's report
//! section, flamegraph and export come out of one recording; `lockscope probes` tells which
//! probes load here.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{bpf_available, demo_path, lockscope, run_ok};
use lockscope_probes::catalog::{FUTEX, KLOCK, LIFECYCLE, MUTEX_HOLD, OFFCPU, SYSCALL, WAKEUP};
use lockscope_probes::{Profile, WaitRecord};
use std::path::{Path, PathBuf};

/// A probe whose attach fails is `failed` with its reason in the metadata and the report, and
/// the other probes still record.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn failed_attach_is_reported_and_others_record() {
    if !bpf_available("failed_attach_is_reported_and_others_record") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let lsp = dir.path().join("run.lsp");
    run_ok(
        lockscope()
            .env("LOCKSCOPE_FAIL_ATTACH", "klock")
            .args(["record", "--probes", "syscall,klock", "-o"])
            .arg(&lsp)
            .args(["--", "/bin/true"]),
    );
    let profile = lockscope_probes::read_profile(&lsp).expect("read profile");
    let klock = profile
        .metadata
        .probes
        .iter()
        .find(|p| p.probe == "klock")
        .expect("klock listed");
    match &klock.status {
        lockscope_probes::AttachStatus::Failed { reason } => {
            assert!(reason.contains("simulated failure"), "{reason}")
        }
        other => panic!("klock not failed: {other:?}"),
    }
    assert!(profile.waits.iter().any(|w| w.probe == "syscall"));
    let report = run_ok(lockscope().arg("report").arg(&lsp));
    assert!(
        report
            .lines()
            .any(|l| l.contains("klock") && l.contains("FAILED") && l.contains("simulated")),
        "{report}"
    );
    assert!(report.contains("System calls (syscall)"), "{report}");
}

/// One recording with every probe gives every section, an off-CPU flamegraph, a wakeup
/// flamegraph and per-probe folded exports.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn every_probe_reports_draws_and_exports() {
    if !bpf_available("every_probe_reports_draws_and_exports") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let lsp = dir.path().join("run.lsp");
    run_ok(
        lockscope()
            .args([
                "record",
                "--probes",
                [FUTEX, OFFCPU, WAKEUP, SYSCALL, LIFECYCLE, KLOCK]
                    .map(|probe| probe.name)
                    .join(",")
                    .as_str(),
                "--min-block",
                "1us",
                "-o",
            ])
            .arg(&lsp)
            .args(["--", "sh", "-c", "sleep 0.2; ls / > /dev/null"]),
    );
    let report = run_ok(lockscope().arg("report").arg(&lsp));
    for section in [
        "Where the time went",
        "Off-CPU time (offcpu)",
        "who woke whom (sleep time ended by each waker)",
        "System calls (syscall)",
        "Process and thread lifecycle (lifecycle)",
    ] {
        assert!(report.contains(section), "no `{section}` in\n{report}");
    }
    let json = run_ok(lockscope().args(["report", "--json"]).arg(&lsp));
    let json: serde_json::Value = serde_json::from_str(&json).expect("report json");
    assert!(json["sections"]["breakdown"]["total"]["wall_ns"].as_u64() > Some(0));

    let svg = dir.path().join("offcpu.svg");
    run_ok(
        lockscope()
            .arg("flamegraph")
            .arg(&lsp)
            .args(["--probe", "offcpu", "-o"])
            .arg(&svg),
    );
    let svg = std::fs::read_to_string(&svg).expect("svg");
    assert!(
        svg.contains("clock_nanosleep"),
        "no sleep in the off-CPU flamegraph"
    );

    let wakeups = dir.path().join("wakeups.svg");
    run_ok(
        lockscope()
            .arg("flamegraph")
            .arg(&lsp)
            .args(["--wakeups", "-o"])
            .arg(&wakeups),
    );
    let wakeups = std::fs::read_to_string(&wakeups).expect("svg");
    assert!(
        wakeups.contains("[interrupt]"),
        "the sleep's timer is no waker"
    );

    for probe in ["offcpu", "syscall", "lifecycle"] {
        let folded = run_ok(
            lockscope()
                .args(["export", "--format", "folded", "--probe", probe])
                .arg(&lsp),
        );
        assert!(!folded.trim().is_empty(), "empty {probe} export");
    }
}

/// Records `command` with the `offcpu` probe alone (every interval of 1 µs or more) into `dir`;
/// the profile's path and the profile.
fn record_offcpu(dir: &Path, command: &[&str]) -> (PathBuf, Profile) {
    let lsp = dir.join("run.lsp");
    run_ok(
        lockscope()
            .args(["record", "--probes", "offcpu", "--min-block", "1us", "-o"])
            .arg(&lsp)
            .arg("--")
            .args(command),
    );
    let profile = lockscope_probes::read_profile(&lsp).expect("profile");
    (lsp, profile)
}

/// `offcpu` alone takes no waker stacks (that is the `wakeup` probe's cost), and says so.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn offcpu_without_wakeup_takes_no_waker_stacks() {
    if !bpf_available("offcpu_without_wakeup_takes_no_waker_stacks") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (lsp, profile) = record_offcpu(dir.path(), &["sh", "-c", "sleep 0.2"]);
    assert!(
        profile.waits.iter().any(|w| w.probe == "offcpu"),
        "no off-CPU records"
    );
    assert!(
        profile.wakeups.is_empty(),
        "wakeups without the wakeup probe"
    );
    let report = run_ok(lockscope().arg("report").arg(&lsp));
    assert!(
        report.contains("who woke whom: not recorded"),
        "no hint in\n{report}"
    );
}

/// A launched program's first sleep, taken in sched_switch before its process table exists,
/// unwinds through its executable to libc's start code (the file fallback resolves the
/// executable through mm->exe_file, where a second VMA walk is refused with interrupts off).
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn offcpu_stack_of_an_early_sleep_reaches_the_start_code() {
    if !bpf_available("offcpu_stack_of_an_early_sleep_reaches_the_start_code") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, profile) = record_offcpu(dir.path(), &["sleep", "0.2"]);
    let sleep = profile
        .waits
        .iter()
        .filter(|w| w.operation == "sleeping in clock_nanosleep")
        .max_by_key(|w| w.stats.total_ns)
        .expect("the 200 ms sleep");
    let names: Vec<String> = profile
        .stack(sleep.user_stack)
        .expect("a user stack")
        .frames
        .iter()
        .map(|f| f.display_name())
        .collect();
    assert!(
        names.iter().any(|n| n.contains("__libc_start_call_main")),
        "the sleep's stack stops early: {names:?}"
    );
}

/// With `preempt`, a preempted thread's time points at the code it was running: the demo's
/// spinner, pinned to one CPU with the cruncher, is preempted for at least a quarter of its
/// 300 ms spin, at least 90% of its preempted time with a (sampled) user stack has one through
/// `spin_until_free` and its caller `acquire_spin_lock`, which the report's CPU saturation
/// section names, and the preemptions between samples are said to have none.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn preempt_names_where_a_preempted_thread_ran() {
    if !bpf_available("preempt_names_where_a_preempted_thread_ran") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let lsp = dir.path().join("run.lsp");
    run_ok(
        lockscope()
            .args(["record", "--probes", "preempt", "-o"])
            .arg(&lsp)
            .args(["--", "taskset", "-c", "0", demo_path()]),
    );
    let profile = lockscope_probes::read_profile(&lsp).expect("profile");
    let spinner: Vec<&WaitRecord> = profile
        .waits
        .iter()
        .filter(|w| {
            w.operation == "preempted" && profile.thread_name(w.pid, w.tid) == Some("spinner")
        })
        .collect();
    let preempted: u64 = spinner.iter().map(|w| w.stats.total_ns).sum();
    assert!(
        preempted >= 75_000_000,
        "the spinner, sharing one CPU with the cruncher, was preempted for {preempted} ns"
    );
    // Stacks are sampled (at most one per thread per 10 ms of its preemptions): the spinner's
    // sampled preemptions are in its spin, and the ones between samples are said to have none.
    let sampled: u64 = spinner
        .iter()
        .filter(|w| w.user_stack.is_some())
        .map(|w| w.stats.total_ns)
        .sum();
    let in_spin: u64 = spinner
        .iter()
        .filter(|w| {
            profile.stack(w.user_stack).is_some_and(|s| {
                let names: Vec<String> = s.frames.iter().map(|f| f.display_name()).collect();
                names.iter().any(|n| n.contains("spin_until_free"))
                    && names.iter().any(|n| n.contains("acquire_spin_lock"))
            })
        })
        .map(|w| w.stats.total_ns)
        .sum();
    assert!(
        sampled > 0 && in_spin as f64 >= 0.9 * sampled as f64,
        "{in_spin} of the spinner's {sampled} preempted ns with a stack (of {preempted}) have \
         its spin's stack"
    );
    if sampled < preempted {
        assert!(
            profile
                .metadata
                .warnings
                .iter()
                .any(|w| w.contains("preemptions have no user stack")),
            "{} of {preempted} preempted ns without a stack, and no warning says why: {:?}",
            preempted - sampled,
            profile.metadata.warnings
        );
    }
    let report = run_ok(lockscope().arg("report").arg(&lsp));
    let saturation = report
        .split("\n\n")
        .find(|s| s.starts_with("CPU saturation"))
        .unwrap_or_else(|| panic!("no CPU saturation section:\n{report}"));
    assert!(
        saturation
            .lines()
            // The site column cuts long names: `lockscope_demo::spin_until_…`.
            .any(|l| l.contains("preempted") && l.contains("spin_until")),
        "the spin is no preempted site:\n{saturation}"
    );
}

/// `lockscope probes` lists every eBPF probe with its hooks.
#[test]
fn probes_lists_hooks() {
    let out = run_ok(lockscope().arg("probes"));
    for probe in lockscope_probes::CATALOG {
        assert!(out.contains(probe.ebpf_hooks), "{out}");
    }
}

/// `lockscope probes --names` prints the catalog's names, one per line, for shell scripts.
#[test]
fn probes_names_are_the_catalog() {
    let out = run_ok(lockscope().args(["probes", "--names"]));
    let names: Vec<&str> = lockscope_probes::CATALOG.iter().map(|p| p.name).collect();
    assert_eq!(out.lines().collect::<Vec<_>>(), names, "{out}");
}

/// `lockscope probes` says every eBPF probe loads on this machine's kernel.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn probes_says_every_probe_loads_here() {
    if !bpf_available("probes_says_every_probe_loads_here") {
        return;
    }
    let out = run_ok(lockscope().arg("probes"));
    for name in [FUTEX, OFFCPU, SYSCALL, LIFECYCLE, KLOCK, MUTEX_HOLD].map(|probe| probe.name) {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .expect("probe line");
        assert!(line.contains("loads"), "{line}");
    }
}
