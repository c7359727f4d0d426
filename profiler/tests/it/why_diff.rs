//! `lockscope why BASE OTHER`: the two-lock program's recording against a variant whose request
//! lock's critical section grew (as if on another kernel), through the binary end to end: the
//! golden text, the JSON, and the one-line errors of bad input.

use crate::common;

use common::fixtures::bottleneck_profile;
use common::{check_golden, lockscope, run_ok};
use lockscope_probes::bottleneck::RootKind;
use lockscope_probes::{Profile, TimeClass};
use std::path::{Path, PathBuf};
use std::process::Command;

const MS: u64 = 1_000_000;

/// The two-lock program on another kernel, its request lock's critical section half as long
/// again: the waits that ended in a request thread on a CPU take 1.2 s instead of 800 ms, out of
/// the request threads' own CPU time (480 ms each, now 280 ms).
fn grown_bottleneck_profile() -> Profile {
    let mut profile = bottleneck_profile();
    profile.metadata.kernel_release = "6.1.0-57-cloud-amd64".to_string();
    let bottleneck = profile
        .bottleneck
        .as_mut()
        .expect("the bottleneck analysis");
    let mut grown = 0;
    for b in &mut bottleneck.blame {
        if b.root.kind == RootKind::Cpu {
            grown += b.total_ns / 2;
            b.total_ns += b.total_ns / 2;
        }
    }
    assert_eq!(grown, 400 * MS, "the fixture's critical section is 800 ms");
    for t in &mut profile.thread_times {
        if let Some(on_cpu) = t.time_ns.get_mut(&TimeClass::OnCpu) {
            if *on_cpu == 480 * MS {
                *on_cpu -= grown / 2;
                *t.time_ns.entry(TimeClass::Lock).or_default() += grown / 2;
            }
        }
    }
    profile
}

/// Both profiles written to a temporary directory: (dir, base, other).
fn written() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (base, other) = (dir.path().join("base.lsp"), dir.path().join("other.lsp"));
    lockscope_probes::write_profile(&bottleneck_profile(), &base).expect("write base");
    lockscope_probes::write_profile(&grown_bottleneck_profile(), &other).expect("write other");
    (dir, base, other)
}

/// `lockscope why` of two files, with the paths relative to `dir` so the text does not depend
/// on where the temporary directory is.
fn why(dir: &Path, args: &[&str]) -> String {
    run_ok(
        lockscope()
            .current_dir(dir)
            .args(["why", "base.lsp", "other.lsp", "--threads", "request-*"])
            .args(args),
    )
}

/// Runs lockscope, expects failure, and returns its one stderr line.
fn one_line_error(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run lockscope");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{cmd:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{cmd:?}: expected one line, got: {stderr}");
    lines[0]
        .trim_start_matches("lockscope: error: ")
        .to_string()
}

/// The grown critical section ranks first, by the share of the request threads' time it took
/// from their own CPU time (41.7% to 62.5%), and per operation (1000 against 800) by what each
/// operation cost more; the text fits 100 columns and matches its golden file.
#[test]
fn why_diff_text() {
    let (dir, _, _) = written();
    let shares = why(dir.path(), &[]);
    let per_op = why(dir.path(), &["--per-op", "1000,800"]);
    let first = |text: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with("1 "))
            .map(str::to_string)
            .unwrap_or_default()
    };
    let row = first(&shares);
    assert!(
        row.contains("cpu") && row.contains("request_critical_section") && row.contains("+20.8 pt"),
        "{shares}"
    );
    assert!(first(&per_op).contains("+700 µs/op"), "{per_op}");
    for text in [&shares, &per_op] {
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    }
    check_golden(
        "why_diff.txt",
        &format!("{shares}\n--- --per-op 1000,800\n{per_op}"),
    );
}

/// `--json` prints the comparison's schema with the changes largest first, the grown critical
/// section first with both sides' shares; another kernel is no mismatch.
#[test]
fn why_diff_json() {
    let (dir, _, _) = written();
    let json: serde_json::Value =
        serde_json::from_str(&why(dir.path(), &["--json"])).expect("json");
    assert_eq!(json["schema"], "lockscope-why-diff");
    assert_eq!(json["other"]["kernel_release"], "6.1.0-57-cloud-amd64");
    assert_eq!(json["comparable"], true, "another kernel is no mismatch");
    assert_eq!(json["difference"]["moved"], 0.208333);
    let first = &json["changes"][0];
    assert_eq!(first["kind"], "cpu");
    assert_eq!(first["status"], "grew");
    assert_eq!(first["where"], "request_critical_section");
    assert_eq!(
        (
            first["base"]["share"].as_f64(),
            first["other"]["share"].as_f64()
        ),
        (Some(0.4167), Some(0.625))
    );
}

/// Bad input ends in one line: `--per-op` with one number, and a profile without the bottleneck
/// analysis, named, with the flag that records it.
#[test]
fn why_diff_errors() {
    let (dir, base, other) = written();
    let msg = one_line_error(
        lockscope()
            .args(["why"])
            .arg(&base)
            .arg(&other)
            .args(["--per-op", "1000"]),
    );
    assert_eq!(
        msg,
        "--per-op takes two operation counts, N_BASE,N_OTHER (got 1 number)"
    );
    let plain = dir.path().join("plain.lsp");
    let mut profile = bottleneck_profile();
    profile.bottleneck = None;
    lockscope_probes::write_profile(&profile, &plain).expect("write");
    let msg = one_line_error(lockscope().args(["why"]).arg(&base).arg(&plain));
    assert_eq!(
        msg,
        format!(
            "`{}` (other): this profile has no bottleneck analysis: record it with `--probes \
             bottleneck` (or add `waitfor` to its probes)",
            plain.display()
        )
    );
}
