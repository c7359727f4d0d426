//! Behaviour of the outputs beyond their exact text: JSON consistency, export round trips,
//! flamegraph SVGs and error messages.

use crate::common::fixtures;

use fixtures::{demo_profile, stats};
use lockscope::analysis::fold::FoldOptions;
use lockscope::analysis::measure::Weight;
use lockscope::export::{write_export, ExportFormat};
use lockscope::render::flamegraph::{write_flamegraph, FlamegraphOptions};
use lockscope::report::{write_report, GroupBy, ReportOptions, REPORT_JSON_VERSION};
use lockscope_probes::catalog::{offcpu_operation, CATALOG, OFFCPU, PREEMPT};
use lockscope_probes::{Profile, WaitKind, WaitRecord};
use serde_json::Value;

fn json_report(profile: &Profile, group_by: GroupBy, top: usize) -> Value {
    let mut options = ReportOptions::default();
    options.group_by = group_by;
    options.top = top;
    options.json = true;
    let mut out = Vec::new();
    write_report(profile, &options, &mut out).expect("write report");
    serde_json::from_slice(&out).expect("report is valid JSON")
}

fn flamegraph(profile: &Profile, options: &FlamegraphOptions) -> anyhow::Result<String> {
    let mut out = Vec::new();
    write_flamegraph(profile, options, &mut out)?;
    Ok(String::from_utf8(out).expect("SVG is UTF-8"))
}

/// Every grouping accounts for every wait: group totals add up to the profile's totals.
#[test]
fn json_groups_add_up() {
    let profile = demo_profile();
    let expected_ns: u64 = profile.waits.iter().map(|w| w.stats.total_ns).sum();
    let expected_count: u64 = profile.waits.iter().map(|w| w.stats.count).sum();
    for group_by in [GroupBy::Stack, GroupBy::Thread, GroupBy::Lock] {
        let report = json_report(&profile, group_by, 0);
        assert_eq!(report["version"], REPORT_JSON_VERSION);
        assert_eq!(report["group_by"], group_by.name());
        assert_eq!(report["totals"]["total_ns"], expected_ns);
        let groups = report["groups"].as_array().expect("groups");
        assert_eq!(
            groups.len() as u64,
            report["groups_total"].as_u64().expect("n")
        );
        let ns: u64 = groups
            .iter()
            .map(|g| g["total_ns"].as_u64().expect("ns"))
            .sum();
        let count: u64 = groups.iter().map(|g| g["count"].as_u64().expect("n")).sum();
        assert_eq!((ns, count), (expected_ns, expected_count), "{group_by}");
        let totals: Vec<u64> = groups
            .iter()
            .map(|g| g["total_ns"].as_u64().expect("ns"))
            .collect();
        assert!(
            totals.windows(2).all(|w| w[0] >= w[1]),
            "not sorted: {totals:?}"
        );
    }
}

/// `top` limits the groups shown but not `groups_total`.
#[test]
fn json_top_limits_groups() {
    let report = json_report(&demo_profile(), GroupBy::Stack, 1);
    assert_eq!(report["groups"].as_array().expect("groups").len(), 1);
    assert_eq!(report["groups_total"], 4);
    // Both workers wait on the condvar from one stack (~600 ms); each mutex stack has ~400 ms.
    assert_eq!(report["groups"][0]["key"]["kind"], "condvar");
}

/// The JSON export is the profile itself: it reads back equal.
#[test]
fn json_export_round_trips() {
    let profile = demo_profile();
    let mut out = Vec::new();
    write_export(
        &profile,
        ExportFormat::Json,
        &FoldOptions::default(),
        &mut out,
    )
    .expect("export");
    let back: Profile = serde_json::from_slice(&out).expect("profile JSON");
    assert_eq!(back, profile);
}

/// A probe filter on the JSON export keeps a valid profile with renumbered stacks.
#[test]
fn json_export_filtered_stays_valid() {
    let mut profile = demo_profile();
    let mut other = profile.waits[0].clone();
    other.probe = "sched".to_string();
    other.user_stack = Some(2);
    profile.waits = vec![other, profile.waits[3].clone()];
    let mut fold = FoldOptions::default();
    fold.probe = Some("sched".to_string());
    let mut out = Vec::new();
    write_export(&profile, ExportFormat::Json, &fold, &mut out).expect("export");
    let back: Profile = serde_json::from_slice(&out).expect("profile JSON");
    back.validate().expect("filtered profile is consistent");
    assert_eq!(back.waits.len(), 1);
    assert_eq!(back.waits[0].probe, "sched");
    assert_eq!(back.stacks.len(), 2, "only the stacks of the kept record");
    assert_eq!(back.stack(back.waits[0].user_stack), profile.stack(Some(2)));
    assert_eq!(back.threads.len(), 1);
}

/// An unknown probe is an error naming the probes the profile has.
#[test]
fn unknown_probe_is_an_error() {
    let mut fold = FoldOptions::default();
    fold.probe = Some("futx".to_string());
    let err = write_export(
        &demo_profile(),
        ExportFormat::Folded,
        &fold,
        &mut Vec::new(),
    )
    .expect_err("unknown probe accepted");
    assert_eq!(
        err.to_string(),
        "probe `futx` is not in this profile (its probes: futex)"
    );
}

/// The flamegraph is an SVG with the default title, the frame names (inlined ones included) and
/// the weight's unit.
#[test]
fn flamegraph_svg_has_title_and_frames() {
    let svg = flamegraph(&demo_profile(), &FlamegraphOptions::default()).expect("flamegraph");
    assert!(svg.starts_with("<?xml"), "{}", &svg[..100.min(svg.len())]);
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("lockscope: futex waits of `demo --orders 8` (pid 4242), 1.20 s"));
    for frame in [
        "worker-1",
        "worker-2",
        "take_order_lock",
        "process_order",
        "hold_order_lock",
        "wait_for_order",
        "__lll_lock_wait",
        "[no user stack]",
    ] {
        assert!(svg.contains(frame), "frame `{frame}` missing from the SVG");
    }
    assert!(svg.contains(" ns"), "no `ns` count name");
}

/// A count-weighted flamegraph with a custom title and kernel frames labels counts as waits.
#[test]
fn flamegraph_by_count_with_title() {
    let mut options = FlamegraphOptions::default();
    options.title = Some("order lock contention".to_string());
    options.fold.weight = Weight::Count;
    options.fold.kernel_stacks = true;
    let svg = flamegraph(&demo_profile(), &options).expect("flamegraph");
    assert!(svg.contains("order lock contention"));
    assert!(svg.contains("waits"));
    // inferno shows kernel frames without their `_[k]` annotation.
    assert!(svg.contains("futex_wait_queue"));
}

/// Drawing a profile without waits fails with a message naming the probe.
#[test]
fn flamegraph_without_waits_fails() {
    let mut profile = demo_profile();
    profile.waits.clear();
    let mut options = FlamegraphOptions::default();
    options.fold.probe = Some("futex".to_string());
    let err = flamegraph(&profile, &options).expect_err("empty flamegraph drawn");
    assert_eq!(
        err.to_string(),
        "no waits recorded for probe `futex`: nothing to draw"
    );
}

/// A profile without waits still reports its header and says so, in text and JSON.
#[test]
fn report_without_waits() {
    let mut profile = demo_profile();
    profile.waits.clear();
    profile.threads.clear();
    let mut out = Vec::new();
    write_report(&profile, &ReportOptions::default(), &mut out).expect("write report");
    let text = String::from_utf8(out).expect("UTF-8");
    assert!(text.contains("(no waits recorded)"), "{text}");
    assert!(text.contains("threads    0 seen"), "{text}");
    assert!(!text.contains("Top "), "{text}");
    let report = json_report(&profile, GroupBy::Thread, 10);
    assert_eq!(report["groups_total"], 0);
    assert_eq!(report["totals"]["share"], 0.0);
}

/// Each probe's descriptor names the report section its records fill: a profile with one record
/// of the probe has that key under `sections` in the JSON report.
#[test]
fn descriptor_sections_are_the_reports() {
    for descriptor in CATALOG {
        let Some(section) = descriptor.section else {
            continue;
        };
        // The probes that only add to offcpu's intervals (wakeup, preempt) have offcpu records.
        let (probe, operation) = match descriptor.kinds {
            [WaitKind::OffCpu] if descriptor.name == PREEMPT.name => {
                (OFFCPU.name, offcpu_operation::PREEMPTED.to_string())
            }
            [WaitKind::OffCpu] => (OFFCPU.name, offcpu_operation::sleeping_in("nanosleep")),
            _ => (descriptor.name, "nanosleep".to_string()),
        };
        let mut profile = demo_profile();
        let first = profile.waits[0].clone();
        profile.waits.push(WaitRecord {
            probe: probe.to_string(),
            kind: descriptor.kinds[0],
            operation,
            stats: stats(&[1_000_000]),
            ..first
        });
        let report = json_report(&profile, GroupBy::Stack, 10);
        assert!(
            report["sections"].get(section).is_some(),
            "{}: no `{section}` in {}",
            descriptor.name,
            report["sections"]
        );
    }
}
