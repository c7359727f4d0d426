//! `lockscope bench` through its library API: statistics, a quick run of subsets and of the
//! whole suite, JSON round trips and errors, and golden files for the table and the diff.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::check_golden;

use lockscope::bench::{
    benchmark_names, read_json, run_suite, write_diff, write_json, write_table, BenchOptions,
    BenchResults, Summary,
};
use std::path::{Path, PathBuf};

/// Test data directory of this crate.
fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Quick options selecting `only`, with the given thread counts.
fn quick(only: &[&str], threads: &[u32]) -> BenchOptions {
    let mut options = BenchOptions::default();
    options.quick = true;
    options.only = only.iter().map(|name| name.to_string()).collect();
    options.threads = threads.to_vec();
    options
}

/// Checks the invariants every row of a run must satisfy, whatever the machine's speed.
fn assert_consistent(results: &BenchResults) {
    let settings = &results.settings;
    for row in &results.latency {
        let summary = Summary::of(&row.samples_us).unwrap();
        assert_eq!(row.time_us, summary, "{}: summary of its samples", row.name);
        assert_eq!(
            row.samples_us.len(),
            settings.latency_repetitions as usize,
            "{}: one sample per repetition",
            row.name
        );
        assert!(row.iterations >= 1, "{}: iterations", row.name);
        let time = row.time_us;
        assert!(time.min > 0.0, "{}: positive time", row.name);
        assert!(
            time.min <= time.median && time.median <= time.max,
            "{}",
            row.name
        );
        assert!(time.spread >= 0.0, "{}: spread", row.name);
    }
    for row in &results.scaling {
        let summary = Summary::of(&row.samples_ops_per_sec).unwrap();
        assert_eq!(
            row.ops_per_sec, summary,
            "{}: summary of its samples",
            row.name
        );
        assert_eq!(
            row.samples_ops_per_sec.len(),
            settings.scaling_repetitions as usize
        );
        assert!(
            row.ops_per_sec.min > 0.0,
            "{} x{}: did work",
            row.name,
            row.threads
        );
        assert!(row.ops_per_sec.min <= row.ops_per_sec.median);
        let base = results
            .scaling
            .iter()
            .find(|base| base.name == row.name && base.threads == 1)
            .unwrap();
        let expected = row.ops_per_sec.median / base.ops_per_sec.median * 100.0;
        assert!(
            (row.scaling_percent - expected).abs() < 1e-9,
            "{} x{}: scaling relative to 1 thread",
            row.name,
            row.threads
        );
    }
}

/// Minimum, median (odd and even counts) and spread of known samples.
#[test]
fn summary_of_known_samples() {
    let odd = Summary::of(&[3.0, 9.0, 1.0, 7.0, 5.0]).unwrap();
    assert_eq!(
        (odd.min, odd.median, odd.max, odd.spread),
        (1.0, 5.0, 9.0, 8.0)
    );
    assert_eq!(odd.spread_percent(), 160.0);
    let even = Summary::of(&[2.0, 8.0, 4.0, 6.0]).unwrap();
    assert_eq!((even.min, even.median, even.max), (2.0, 5.0, 8.0));
    let same = Summary::of(&[1.5, 1.5]).unwrap();
    assert_eq!((same.spread, same.spread_percent()), (0.0, 0.0));
    assert_eq!(Summary::of(&[]), None);
}

/// Benchmark names are unique, and unknown `--only` names fail listing the known ones.
#[test]
fn names_and_unknown_names() {
    let names = benchmark_names();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len());
    for expected in [
        "null-call",
        "fork+exit",
        "mutex-contention",
        "condvar-queue",
    ] {
        assert!(names.contains(&expected), "{expected}");
    }
    let error = run_suite(&quick(&["null-call", "nope"], &[1]), &mut |_| {}).unwrap_err();
    let message = format!("{error:#}");
    assert!(message.contains("unknown benchmark `nope`"), "{message}");
    assert!(message.contains("fork+exit"), "{message}");
    let error = run_suite(&quick(&["null-call"], &[0]), &mut |_| {}).unwrap_err();
    assert!(format!("{error:#}").contains("invalid thread count 0"));
}

/// A quick run of a subset has exactly the requested rows, one scaling row per thread count
/// (1 added as the scaling base), consistent statistics, and progress lines.
#[test]
fn quick_subset() {
    let mut progress = Vec::new();
    let results = run_suite(
        &quick(&["mutex-contention", "fork+exit", "null-call"], &[3, 2]),
        &mut |line| progress.push(line.to_string()),
    )
    .unwrap();
    let latency: Vec<&str> = results.latency.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(latency, ["null-call", "fork+exit"]);
    let scaling: Vec<(&str, u32)> = results
        .scaling
        .iter()
        .map(|row| (row.name.as_str(), row.threads))
        .collect();
    assert_eq!(
        scaling,
        [
            ("mutex-contention", 1),
            ("mutex-contention", 2),
            ("mutex-contention", 3)
        ]
    );
    assert!(
        progress.contains(&"running fork+exit".to_string()),
        "{progress:?}"
    );
    assert_eq!(results.settings.threads, [1, 2, 3]);
    assert_consistent(&results);
}

/// The whole quick suite runs, has a row for every benchmark and thread count, and survives a
/// JSON round trip unchanged; prints its table (`--nocapture`) for a look at this machine.
#[test]
fn whole_quick_suite() {
    let started = std::time::Instant::now();
    let results = run_suite(&quick(&[], &[1, 2, 5, 10, 20, 35, 50]), &mut |_| {}).unwrap();
    let names = benchmark_names();
    for row in &results.latency {
        assert!(names.contains(&row.name.as_str()));
    }
    let scaling_names = ["mutex-contention", "condvar-queue"];
    assert_eq!(
        results.latency.len() + scaling_names.len(),
        names.len(),
        "every latency benchmark has a row"
    );
    for name in scaling_names {
        let counts: Vec<u32> = results
            .scaling
            .iter()
            .filter(|row| row.name == name)
            .map(|row| row.threads)
            .collect();
        assert_eq!(counts, [1, 2, 5, 10, 20, 35, 50], "{name}");
    }
    assert_consistent(&results);

    let mut json = Vec::new();
    write_json(&results, &mut json).unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &json).unwrap();
    assert_eq!(read_json(file.path()).unwrap(), results);

    let mut table = Vec::new();
    write_table(&results, &mut table).unwrap();
    println!("{}", String::from_utf8(table).unwrap());
    println!("quick suite took {:?}", started.elapsed());
}

/// `read_json` names the problem: unreadable file, not JSON, other JSON, newer schema.
#[test]
fn read_json_errors() {
    let directory = tempfile::tempdir().unwrap();
    let error = |contents: Option<&str>| {
        let path = directory.path().join("input.json");
        match contents {
            Some(text) => std::fs::write(&path, text).unwrap(),
            None => drop(std::fs::remove_file(&path)),
        }
        format!("{:#}", read_json(&path).unwrap_err())
    };
    assert!(error(None).contains("failed to read"));
    assert!(error(Some("lmbench")).contains("is not JSON"));
    assert!(error(Some(r#"{"samples": []}"#)).contains("is not lockscope bench JSON"));
    let newer = r#"{"format": "lockscope-bench", "schema_version": 99}"#;
    assert!(error(Some(newer)).contains("schema version 99, newer"));
    let broken = r#"{"format": "lockscope-bench", "schema_version": 1}"#;
    assert!(error(Some(broken)).contains("malformed bench JSON"));
}

/// The table of a fixed JSON file matches its golden file.
#[test]
fn table_golden() {
    let results = read_json(&data("bench-a.json")).unwrap();
    let mut table = Vec::new();
    write_table(&results, &mut table).unwrap();
    check_golden("bench-table.txt", &String::from_utf8(table).unwrap());
}

/// The diff of a full run and an `--only` run shows both side by side with ratios, and the rows
/// only one of them has as missing.
#[test]
fn diff_golden() {
    let a = read_json(&data("bench-a.json")).unwrap();
    let b = read_json(&data("bench-b-only.json")).unwrap();
    let mut diff = Vec::new();
    write_diff(&a, &b, &mut diff).unwrap();
    let diff = String::from_utf8(diff).unwrap();
    assert!(diff.contains("missing"));
    check_golden("bench-diff.txt", &diff);
}
