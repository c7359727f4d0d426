//! `lockscope import perf-script` folds every `perf script` capture as inferno's perf collapser
//! (the port of FlameGraph's stackcollapse-perf.pl, tested against FlameGraph's suite) folds it,
//! stack for stack and weight for weight, and labels the profile with the capture's own unit.
//!
//! The reference is the inferno library lockscope already depends on, called on the whole
//! capture with the collapser's defaults (`inferno-collapse-perf FILE`) and with `--kernel`
//! (`annotate_kernel`). The one expected difference: a sample without any frame folds to its
//! command alone (stackcollapse-perf.pl's output), which inferno drops; those lines, and only
//! those, have no `;`.
//!
//! The captures are `tests/data/perf/*.txt`, made on a Linux 6.1 VM with perf 6.1 (see
//! `tests/data/perf/README.md`), plus any directory named by `LOCKSCOPE_PERF_CAPTURES`; the
//! live test records new ones with the local perf.

mod common;

use common::{lockscope, run_ok};
use inferno::collapse::Collapse;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Folded = BTreeMap<String, u64>;

/// The capture with the arguments of its tracepoint headers cut off
/// (`... sched:sched_switch: prev_comm=...` → `... sched:sched_switch:`): inferno's collapser
/// takes them for a one-frame stack and loses the sample (jonhoo/inferno#308), where
/// stackcollapse-perf.pl and lockscope read the frames below.
fn without_tracepoint_arguments(text: &str) -> String {
    let header = regex::Regex::new(r"^(\s*\S.*?\s\d+(?:/\d+)?\s.*?\s[\w-]+:\w+:)\s+\S.*[^)]$")
        .expect("regex");
    text.lines()
        .map(|l| header.replace(l, "$1").into_owned() + "\n")
        .collect()
}

/// inferno's collapser on the whole capture: `inferno-collapse-perf [--kernel] FILE`, with
/// tracepoint arguments cut off.
fn inferno_fold(text: &str, kernel: bool) -> Folded {
    let text = without_tracepoint_arguments(text);
    let mut options = inferno::collapse::perf::Options::default();
    options.annotate_kernel = kernel;
    let mut out = Vec::new();
    inferno::collapse::perf::Folder::from(options)
        .collapse(text.as_bytes(), &mut out)
        .expect("inferno collapses the capture");
    folded_map(&String::from_utf8(out).expect("utf-8"))
}

fn folded_map(text: &str) -> Folded {
    text.lines()
        .map(|l| {
            let (stack, value) = l.rsplit_once(' ').expect("folded line");
            (stack.to_string(), value.parse().expect("value"))
        })
        .collect()
}

/// `lockscope import perf-script FILE` then `export --format folded [--kernel-stacks]`.
fn lockscope_fold(dir: &Path, capture: &Path, import_args: &[&str], kernel: bool) -> Folded {
    let lsp = dir.join("capture.lsp");
    run_ok(
        lockscope()
            .args(["import", "perf-script"])
            .arg(capture)
            .arg("-o")
            .arg(&lsp)
            .args(import_args),
    );
    let mut export = lockscope();
    export.args(["export", "--format", "folded"]).arg(&lsp);
    if kernel {
        export.arg("--kernel-stacks");
    }
    folded_map(&run_ok(&mut export))
}

/// Compares lockscope's fold of `capture` with inferno's, with and without kernel marks;
/// returns the number of folded lines compared.
fn assert_folds_like_inferno(capture: &Path) -> usize {
    let text = std::fs::read_to_string(capture).expect("read capture");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut lines = 0;
    for kernel in [false, true] {
        let ours = lockscope_fold(dir.path(), capture, &[], kernel);
        let (stackless, stacks): (Folded, Folded) = ours
            .into_iter()
            .partition(|(stack, _)| !stack.contains(';'));
        let reference = inferno_fold(&text, kernel);
        assert!(
            stacks == reference,
            "{} (kernel marks: {kernel}) folds differently from inferno:\n{}",
            capture.display(),
            difference(&stacks, &reference)
        );
        // A frameless line is the command of samples inferno drops: it is one of the capture's
        // commands (spaces as `_`).
        for command in stackless.keys() {
            assert!(
                text.replace(' ', "_").contains(command.as_str()),
                "{}: frameless line `{command}` names no command",
                capture.display()
            );
        }
        lines += stacks.len() + stackless.len();
    }
    lines
}

/// The first lines that differ, for a readable failure.
fn difference(ours: &Folded, reference: &Folded) -> String {
    let mut out = String::new();
    for (stack, value) in ours {
        if reference.get(stack) != Some(value) {
            out.push_str(&format!(
                "  lockscope: {stack} {value} (inferno: {:?})\n",
                reference.get(stack)
            ));
        }
    }
    for (stack, value) in reference {
        if !ours.contains_key(stack) {
            out.push_str(&format!("  inferno only: {stack} {value}\n"));
        }
    }
    out.lines().take(20).collect::<Vec<_>>().join("\n")
}

fn captures_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "txt"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Every committed capture (several perf versions' header layouts, `-F` field lists, kernel and
/// user frames, multi-threaded, events and tracepoints) folds as inferno folds it; so does every
/// capture in `LOCKSCOPE_PERF_CAPTURES` when that names a directory.
#[test]
fn captures_fold_like_inferno() {
    let mut captures = captures_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perf"));
    let committed = captures.len();
    if let Some(dir) = std::env::var_os("LOCKSCOPE_PERF_CAPTURES") {
        captures.extend(captures_in(Path::new(&dir)));
    }
    for capture in &captures {
        let lines = assert_folds_like_inferno(capture);
        eprintln!("{}: {lines} folded lines match inferno", capture.display());
    }
    assert!(committed >= 10, "committed captures: {committed}");
}
