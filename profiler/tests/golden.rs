//! Golden-file tests of every text output, built from the hand-made demo profile of
//! `tests/common`. Run with `LOCKSCOPE_BLESS=1` to rewrite the files under `tests/data/` after an
//! intended change, then review the diff.

mod common;
mod fixtures;

use common::check_golden;

use fixtures::{demo_profile, lossy_profile, on_cpu_profile, preempt_profile, saturation_profile};
use lockscope::analysis::fold::{folded_lines, FoldOptions, Weight};
use lockscope::export::{write_export, ExportFormat};
use lockscope::report::{write_report, GroupBy, ReportOptions};
use lockscope_probes::Profile;

fn report(profile: &Profile, options: &ReportOptions) -> String {
    let mut out = Vec::new();
    write_report(profile, options, &mut out).expect("write report");
    String::from_utf8(out).expect("report is UTF-8")
}

fn report_options(group_by: GroupBy) -> ReportOptions {
    let mut options = ReportOptions::default();
    options.group_by = group_by;
    options
}

/// A recording with the `cpu` probe beside futex: the waits are reported as before (the samples
/// in no kind, total or group), each thread's CPU time shows beside its waits under `--by
/// thread`, and the On CPU section ranks threads and stacks by CPU time; matches its golden file.
#[test]
fn report_on_cpu_by_thread() {
    let text = report(&on_cpu_profile(), &report_options(GroupBy::Thread));
    let waits_only = report(&demo_profile(), &report_options(GroupBy::Thread));
    let kinds = |t: &str| t.split("\n\n").nth(1).unwrap_or_default().to_string();
    assert_eq!(kinds(&text), kinds(&waits_only), "the waits' kinds changed");
    check_golden("report_on_cpu_by_thread.txt", &text);
}

/// The On CPU section's waits column leaves out the time a thread waited for a CPU: the
/// spinner, preempted for 40 ms, still shows no waits beside its CPU time.
#[test]
fn on_cpu_waits_leave_out_cpu_saturation() {
    let mut profile = on_cpu_profile();
    let spinner = profile
        .threads
        .iter()
        .find(|t| t.name == "spinner")
        .map(|t| (t.pid, t.tid))
        .expect("the spinner");
    profile.waits.push(lockscope_probes::WaitRecord {
        probe: "offcpu".to_string(),
        kind: lockscope_probes::WaitKind::OffCpu,
        pid: spinner.0,
        tid: spinner.1,
        object: 0,
        operation: "preempted".to_string(),
        user_stack: None,
        kernel_stack: None,
        stats: fixtures::stats(&[40_000_000]),
    });
    let text = report(&profile, &report_options(GroupBy::Stack));
    let row = text
        .lines()
        .skip_while(|l| !l.starts_with("On CPU"))
        .find(|l| l.trim_start().starts_with("spinner"))
        .unwrap_or_else(|| panic!("no spinner row:\n{text}"));
    assert!(
        !row.contains("40.0 ms"),
        "its preemption counted as a wait: {row}"
    );
}

/// Folding a recording with the `cpu` probe: the waits alone by default (as without the probe),
/// the samples in on-CPU nanoseconds with `--probe cpu`; matches its golden file.
#[test]
fn folded_on_cpu() {
    let profile = on_cpu_profile();
    assert_eq!(
        folded_lines(&profile, &FoldOptions::default()),
        folded_lines(&demo_profile(), &FoldOptions::default())
    );
    let mut options = FoldOptions::default();
    options.probe = Some("cpu".to_string());
    options.kernel_stacks = true;
    let lines = folded_lines(&profile, &options);
    check_golden("folded_on_cpu.folded", &(lines.join("\n") + "\n"));
}

/// The offcpu probe's intervals of threads waiting for a CPU are not waits: the report leaves
/// them out of its kinds, totals and sites and ranks them in its CPU saturation section (a
/// run-queue delay at the site of the sleep it woke from, preemptions apart, per thread, and
/// the threads waiting and running on average against the CPUs); matches its golden file.
#[test]
fn report_cpu_saturation() {
    let text = report(&saturation_profile(), &report_options(GroupBy::Stack));
    let kinds = text.split("\n\n").nth(1).unwrap_or_default();
    assert!(
        !kinds.contains("51.0 ms"),
        "run-queue time among the waits:\n{kinds}"
    );
    check_golden("report_cpu_saturation.txt", &text);
}

/// With the `preempt` probe's stacks, the CPU saturation section names the function a preempted
/// thread was running, its stacks at different pcs merged into one site (12.0 ms, 2 intervals),
/// apart from the preemptions without a stack; matches its golden file.
#[test]
fn report_preempt() {
    let text = report(&preempt_profile(), &report_options(GroupBy::Stack));
    let saturation = text
        .split("\n\n")
        .find(|s| s.starts_with("CPU saturation"))
        .unwrap_or_default();
    let row = saturation
        .lines()
        .find(|l| l.contains("spin_until_free"))
        .unwrap_or_else(|| panic!("no spin_until_free site:\n{saturation}"));
    assert!(
        row.contains("preempted") && row.contains(" 2 ") && row.contains("12.0 ms"),
        "the two preemptions in spin_until_free are not one site: {row}"
    );
    assert!(
        saturation.contains("[preempted]"),
        "the stackless preemptions lost:\n{saturation}"
    );
    check_golden("report_preempt.txt", &text);
}

/// With the `cpu` probe beside `offcpu`, the time breakdown shows each row's sampled CPU time
/// beside the scheduler's on-CPU share: worker-1's 5 samples (50.5 ms of 1.204 s, 4.2%) next to
/// its 41.5%, and no sampled time for worker-2; matches its golden file.
#[test]
fn report_breakdown_sampled() {
    let mut profile = saturation_profile();
    let on_cpu = on_cpu_profile();
    profile.waits.extend(
        on_cpu
            .waits
            .iter()
            .filter(|w| w.probe == "cpu" && w.user_stack != Some(on_cpu.stacks.len() as u32 - 1))
            .cloned(),
    );
    let text = report(&profile, &report_options(GroupBy::Stack));
    let breakdown = text
        .split("\n\n")
        .find(|s| s.starts_with("Where the time went"))
        .unwrap_or_else(|| panic!("no breakdown:\n{text}"));
    assert!(breakdown.contains("sampled"), "{breakdown}");
    let worker = breakdown
        .lines()
        .find(|l| l.trim_start().starts_with("worker-1 ("))
        .unwrap_or_else(|| panic!("no worker-1 row:\n{breakdown}"));
    assert!(
        worker.contains("41.5%") && worker.contains("4.2%"),
        "worker-1's on-cpu and sampled shares: {worker}"
    );
    check_golden("report_breakdown_sampled.txt", &text);
}

/// The default text report (grouped by stack) matches its golden file.
#[test]
fn report_by_stack() {
    check_golden(
        "report_by_stack.txt",
        &report(&demo_profile(), &report_options(GroupBy::Stack)),
    );
}

/// The text report grouped by thread matches its golden file.
#[test]
fn report_by_thread() {
    check_golden(
        "report_by_thread.txt",
        &report(&demo_profile(), &report_options(GroupBy::Thread)),
    );
}

/// The text report grouped by lock matches its golden file.
#[test]
fn report_by_lock() {
    check_golden(
        "report_by_lock.txt",
        &report(&demo_profile(), &report_options(GroupBy::Lock)),
    );
}

/// A lossy profile is flagged in the header; kernel stacks and `--top 2` show as expected.
#[test]
fn report_lossy_with_kernel_stacks() {
    let mut options = report_options(GroupBy::Stack);
    options.top = 2;
    options.show_kernel_stacks = true;
    let text = report(&lossy_profile(), &options);
    assert!(
        text.contains("WARNING: this profile is incomplete"),
        "{text}"
    );
    check_golden("report_lossy_kernel.txt", &text);
}

/// The JSON report (grouped by stack) matches its golden file.
#[test]
fn report_json_by_stack() {
    let mut options = report_options(GroupBy::Stack);
    options.json = true;
    check_golden("report_by_stack.json", &report(&demo_profile(), &options));
}

/// The JSON report of a lossy profile grouped by lock, with kernel stacks, matches its golden file.
#[test]
fn report_json_lossy_by_lock() {
    let mut options = report_options(GroupBy::Lock);
    options.json = true;
    options.show_kernel_stacks = true;
    check_golden(
        "report_lossy_by_lock.json",
        &report(&lossy_profile(), &options),
    );
}

/// Folded stacks weighted by wait time match their golden file.
#[test]
fn folded_by_time() {
    let lines = folded_lines(&demo_profile(), &FoldOptions::default());
    check_golden("folded_ns.folded", &(lines.join("\n") + "\n"));
}

/// Folded stacks weighted by count, with kernel frames, through `write_export`, match their
/// golden file.
#[test]
fn folded_by_count_with_kernel() {
    let mut fold = FoldOptions::default();
    fold.weight = Weight::Count;
    fold.kernel_stacks = true;
    fold.probe = Some("futex".to_string());
    let mut out = Vec::new();
    write_export(&demo_profile(), ExportFormat::Folded, &fold, &mut out).expect("export");
    check_golden(
        "folded_count_kernel.folded",
        &String::from_utf8(out).expect("UTF-8"),
    );
}
