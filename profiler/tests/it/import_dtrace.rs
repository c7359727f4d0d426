//! Imported dtrace(1) captures fold exactly as Brendan Gregg's stackcollapse.pl folds them.
//!
//! The reference below restates stackcollapse.pl's rules (not inferno's collapser, which also
//! demangles Rust names): skip the header, strip leading blanks, cut each frame at its last `+`,
//! cut C++ arguments at the first `(` or `<` after two characters, `-` for an empty frame, frames
//! root first joined by `;`, a count line ends a stack. The inputs are the real dtrace output in
//! `../shared/fixtures/dtrace/`.

use crate::common;

use common::lockscope;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn fixtures() -> Option<PathBuf> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/dtrace/inferno");
    if dir.is_dir() {
        Some(dir)
    } else {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!("skipped: dtrace fixtures not found at {}\n", dir.display()).as_bytes(),
        );
        None
    }
}

/// stackcollapse.pl's rules, for captures whose first three lines are dtrace's header (as both
/// fixtures used here are).
fn reference_fold(input: &str) -> Vec<String> {
    let mut collapsed: BTreeMap<String, u64> = BTreeMap::new();
    let mut stack: Vec<String> = Vec::new();
    for line in input.lines().skip(3) {
        let trimmed = line.trim();
        if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
            let count: u64 = trimmed.parse().expect("count");
            *collapsed.entry(stack.join(";")).or_default() += count;
            stack.clear();
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        let mut frame = line.trim_start().to_string();
        if let Some(plus) = frame.rfind('+') {
            frame.truncate(plus);
        }
        if let Some(cut) = frame
            .char_indices()
            .skip(2)
            .find(|&(_, c)| c == '(' || c == '<')
            .map(|(i, _)| i)
        {
            frame.truncate(cut);
        }
        if frame.is_empty() {
            frame = "-".to_string();
        }
        stack.insert(0, frame);
    }
    collapsed
        .into_iter()
        .map(|(stack, count)| format!("{stack} {count}"))
        .collect()
}

/// `lockscope import dtrace` then `export --format folded` gives the reference collapser's lines.
#[test]
fn imported_captures_fold_like_stackcollapse() {
    let Some(dir) = fixtures() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    for name in ["rust-names.txt", "flamegraph-bug.txt"] {
        let input = dir.join(name);
        let lsp = tmp.path().join(format!("{name}.lsp"));
        let out = lockscope()
            .args(["import", "dtrace"])
            .arg(&input)
            .arg("-o")
            .arg(&lsp)
            .output()
            .expect("run import");
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = lockscope()
            .arg("export")
            .arg(&lsp)
            .args(["--format", "folded"])
            .output()
            .expect("run export");
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut ours: Vec<String> = String::from_utf8(out.stdout)
            .expect("utf-8")
            .lines()
            .map(str::to_string)
            .collect();
        ours.sort();
        let reference = reference_fold(&std::fs::read_to_string(&input).expect("read fixture"));
        assert!(
            !reference.is_empty(),
            "{name}: the reference folded nothing"
        );
        assert_eq!(ours, reference, "{name}");
    }
}

/// A `@[ustack()] = count()` capture imports as samples (kind `sample`), not waits: the report
/// and the flamegraph count samples.
#[test]
fn imported_counts_are_samples() {
    let Some(dir) = fixtures() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let lsp = tmp.path().join("capture.lsp");
    common::run_ok(
        lockscope()
            .args(["import", "dtrace"])
            .arg(dir.join("rust-names.txt"))
            .arg("-o")
            .arg(&lsp),
    );
    let profile = lockscope_probes::read_profile(&lsp).expect("read profile");
    assert!(!profile.waits.is_empty());
    assert!(profile
        .waits
        .iter()
        .all(|w| w.kind == lockscope_probes::WaitKind::Sample));
    let report = common::run_ok(lockscope().arg("report").arg(&lsp));
    assert!(report.starts_with("lockscope report: samples"), "{report}");
    assert!(report.contains("Samples by kind"), "{report}");
    let svg = tmp.path().join("capture.svg");
    common::run_ok(lockscope().arg("flamegraph").arg(&lsp).arg("-o").arg(&svg));
    let svg = std::fs::read_to_string(&svg).expect("svg");
    assert!(svg.contains(" samples, "), "no `samples` in the SVG");
}
