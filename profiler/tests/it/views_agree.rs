//! Every view gives the same numbers for the same profile: the waits by role (contention, idle,
//! neither), their count and the CPU saturation apart, as `report --json` (`classified`, its
//! totals, its contention and CPU saturation sections), `why --json`, the HTML page, `diff
//! --json` of the profile against itself and a sweep level's breakdown give them, on the
//! hand-made fixtures and on real recordings of the demo under each probe set
//! (`tests/data/demo`).

use crate::common::fixtures;
use crate::common::lockscope;
use lockscope_probes::Profile;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The classification's totals, as one view gives them.
#[derive(Debug, PartialEq, Eq)]
struct Totals {
    waits: u64,
    wait_ns: u64,
    contention_waits: u64,
    contention_ns: u64,
    idle_waits: u64,
    idle_ns: u64,
    cpu_saturation_intervals: u64,
    cpu_saturation_ns: u64,
}

impl Totals {
    /// From a JSON `classified` object of `view`.
    fn of_json(value: &Value, view: &str) -> Totals {
        let n = |key: &str| {
            value[key]
                .as_u64()
                .unwrap_or_else(|| panic!("{view}: no `{key}` in {value}"))
        };
        Totals {
            waits: n("waits"),
            wait_ns: n("wait_ns"),
            contention_waits: n("contention_waits"),
            contention_ns: n("contention_ns"),
            idle_waits: n("idle_waits"),
            idle_ns: n("idle_ns"),
            cpu_saturation_intervals: n("cpu_saturation_intervals"),
            cpu_saturation_ns: n("cpu_saturation_ns"),
        }
    }

    /// From the attributes of the page's `classified` note.
    fn of_page(html: &str) -> Totals {
        let start = html
            .find("<p class=\"note classified\"")
            .expect("the page's waits by role");
        let tag = &html[start..start + html[start..].find('>').expect("tag ends")];
        let n = |key: &str| -> u64 {
            let attr = format!("data-{key}=\"");
            let at = tag.find(&attr).unwrap_or_else(|| panic!("{attr} in {tag}")) + attr.len();
            let end = tag[at..].find('"').expect("attribute ends");
            tag[at..at + end].parse().expect("a number")
        };
        Totals {
            waits: n("waits"),
            wait_ns: n("wait-ns"),
            contention_waits: n("contention-waits"),
            contention_ns: n("contention-ns"),
            idle_waits: n("idle-waits"),
            idle_ns: n("idle-ns"),
            cpu_saturation_intervals: n("cpu-saturation-intervals"),
            cpu_saturation_ns: n("cpu-saturation-ns"),
        }
    }
}

/// Runs lockscope with `args`, fails unless it succeeds, returns its stdout.
fn run(args: &[&std::ffi::OsStr]) -> String {
    let out = lockscope().args(args).output().expect("run lockscope");
    assert!(
        out.status.success(),
        "lockscope {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("JSON")
}

/// Checks that every view of the profile at `path` gives the same totals; returns them.
fn assert_views_agree(path: &Path) -> Totals {
    let name = path.display().to_string();
    let p = path.as_os_str();
    let report = json(&run(&["report".as_ref(), "--json".as_ref(), p]));
    let totals = Totals::of_json(&report["classified"], &format!("report of {name}"));
    // The value matches the report's own totals and sections, which count apart from it.
    assert_eq!(
        report["totals"]["count"].as_u64(),
        Some(totals.waits),
        "{name}"
    );
    assert_eq!(
        report["totals"]["total_ns"].as_u64(),
        Some(totals.wait_ns),
        "{name}"
    );
    assert_eq!(
        report["header"]["cpu_wait_intervals"].as_u64().unwrap_or(0),
        totals.cpu_saturation_intervals,
        "{name}"
    );
    let sections = &report["sections"];
    if let Some(cpu) = sections.get("cpu_saturation") {
        let ns =
            cpu["run_queue_ns"].as_u64().unwrap_or(0) + cpu["preempted_ns"].as_u64().unwrap_or(0);
        assert_eq!(
            ns, totals.cpu_saturation_ns,
            "{name}: the CPU saturation section"
        );
    }
    if let Some(contention) = sections.get("contention") {
        // The section lists at most 10 rows of each role: with fewer, they are all of them.
        for (rows, waits, ns) in [
            ("sites", totals.contention_waits, totals.contention_ns),
            ("idle", totals.idle_waits, totals.idle_ns),
        ] {
            let rows = contention[rows].as_array().expect("rows");
            if rows.len() < 10 {
                let sum = |key: &str| {
                    rows.iter()
                        .map(|r| r[key].as_u64().unwrap_or(0))
                        .sum::<u64>()
                };
                assert_eq!(
                    (sum("count"), sum("total_ns")),
                    (waits, ns),
                    "{name}: {rows:?}"
                );
            }
        }
    }
    let kinds: u64 = report["by_kind"]
        .as_array()
        .expect("by_kind")
        .iter()
        .map(|k| k["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(kinds, totals.waits, "{name}: the kinds add up to the waits");

    let page_file = tempfile::NamedTempFile::new().expect("temp file");
    run(&[
        "html".as_ref(),
        p,
        "-o".as_ref(),
        page_file.path().as_os_str(),
    ]);
    let page = std::fs::read_to_string(page_file.path()).expect("page");
    assert_eq!(Totals::of_page(&page), totals, "{name}: the page");

    let diff = json(&run(&[
        "diff".as_ref(),
        "--json".as_ref(),
        "--top".as_ref(),
        "0".as_ref(),
        p,
        p,
    ]));
    // Its stacks keep the intervals of threads waiting for a CPU, flagged: the flagged ones are
    // some of those intervals, the others hold every wait.
    let stacks = diff["stacks"].as_array().expect("stacks");
    let count = |flagged: bool| -> u64 {
        stacks
            .iter()
            .filter(|s| s["cpu_saturation"].as_bool().unwrap_or(false) == flagged)
            .map(|s| s["a"]["count"].as_u64().unwrap_or(0))
            .sum()
    };
    assert!(
        count(true) <= totals.cpu_saturation_intervals,
        "{name}: diff stacks"
    );
    assert!(count(false) >= totals.waits, "{name}: diff stacks");
    for side in ["a", "b"] {
        assert_eq!(
            Totals::of_json(&diff[side]["classified"], &format!("diff of {name}")),
            totals,
            "{name}: diff {side}"
        );
        assert_eq!(
            diff[side]["waits"].as_u64(),
            Some(totals.waits),
            "{name}: diff {side}"
        );
        let kinds: u64 = diff["by_kind"]
            .as_array()
            .expect("by_kind")
            .iter()
            .map(|k| k[side]["count"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(kinds, totals.waits, "{name}: diff {side}'s kinds");
    }

    let profile: Profile = lockscope_probes::read_profile(path).expect("read");
    if profile.bottleneck.is_some() {
        let why = json(&run(&["why".as_ref(), "--json".as_ref(), p]));
        assert_eq!(
            Totals::of_json(&why["classified"], &format!("why of {name}")),
            totals,
            "{name}: why"
        );
    }

    // A sweep level: its waits, and its breakdown's roles (the same contention and idle time,
    // which the finding compares across levels).
    let level = lockscope::sweep::summarize_level(1, 1.0, &profile, ("run.lsp", "load.txt"));
    assert_eq!(
        (level.waits, level.wait_ns),
        (totals.waits, totals.wait_ns),
        "{name}: sweep"
    );
    let kinds: u64 = level.kinds.iter().map(|k| k.count).sum();
    assert_eq!(kinds, totals.waits, "{name}: the sweep level's kinds");
    if let Some(breakdown) = lockscope::sweep::Breakdown::of(&profile) {
        let role = |name: &str| {
            breakdown
                .roles
                .iter()
                .find(|c| c.name == name)
                .map(|c| c.total_ns)
        };
        if !breakdown.roles.is_empty() {
            assert_eq!(
                role("contention"),
                Some(totals.contention_ns),
                "{name}: sweep"
            );
            assert_eq!(role("idle"), Some(totals.idle_ns), "{name}: sweep");
        }
    }
    totals
}

/// Writes `profile` as `name` into `dir`.
fn written(dir: &Path, name: &str, profile: &Profile) -> PathBuf {
    let path = dir.join(name);
    lockscope_probes::write_profile(profile, &path).expect("write");
    path
}

/// The hand-made fixtures: the demo (futex), the saturated demo (futex and offcpu, CPU waits),
/// with the cpu probe's samples, and the two-lock program with the bottleneck analysis.
#[test]
fn views_agree_on_the_fixtures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let demo = assert_views_agree(&written(dir.path(), "demo.lsp", &fixtures::demo_profile()));
    assert!(demo.contention_waits > 0, "{demo:?}");
    let saturated = assert_views_agree(&written(
        dir.path(),
        "saturated.lsp",
        &fixtures::saturation_profile(),
    ));
    assert!(saturated.cpu_saturation_intervals > 0, "{saturated:?}");
    assert_views_agree(&written(
        dir.path(),
        "on-cpu.lsp",
        &fixtures::on_cpu_profile(),
    ));
    // Wait-for records and per-thread times, no wait records: zero everywhere, why included.
    assert_views_agree(&written(
        dir.path(),
        "twolocks.lsp",
        &fixtures::bottleneck_profile(),
    ));
}

/// The real recordings of the demo under each probe set: the same totals in every view; the
/// intervals of threads waiting for a CPU are never waits.
#[test]
fn views_agree_on_the_recorded_demo() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/demo");
    for name in [
        "demo-futex",
        "demo-offcpu",
        "demo-futex-offcpu",
        "demo-bottleneck",
    ] {
        let totals = assert_views_agree(&data.join(format!("{name}.lsp")));
        assert!(totals.waits > 0, "{name}: {totals:?}");
        if name != "demo-futex" {
            assert!(totals.cpu_saturation_intervals > 0, "{name}: {totals:?}");
        }
    }
}
