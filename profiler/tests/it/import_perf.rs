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

use crate::common;

use common::{lockscope, run_ok};
use inferno::collapse::Collapse;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

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

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/perf")
        .join(name)
}

/// A tracepoint's arguments after its event do not change the fold: the capture printed with
/// them folds as inferno folds the same samples printed without them (inferno itself loses
/// the samples that have them, jonhoo/inferno#308).
#[test]
fn tracepoint_arguments_do_not_change_the_fold() {
    let with = data("sched-switch-tracepoint.txt");
    let without =
        std::fs::read_to_string(data("sched-switch-without-arguments.txt")).expect("read capture");
    let dir = tempfile::tempdir().expect("tempdir");
    for kernel in [false, true] {
        let ours = lockscope_fold(dir.path(), &with, &[], kernel);
        let reference = inferno_fold(&without, kernel);
        assert!(!reference.is_empty());
        assert_eq!(ours, reference);
    }
}

/// `--event` keeps another event than the first: by its full name (`sched:sched_switch`) or by
/// the name the collapser compares (`page-faults`), as inferno's `--event-filter` does.
#[test]
fn event_option_selects_the_samples() {
    let capture = data("events-cpu-task-faults-switch.txt");
    let text = std::fs::read_to_string(&capture).expect("read capture");
    let dir = tempfile::tempdir().expect("tempdir");
    for (event, filter) in [
        ("page-faults", "page-faults"),
        ("task-clock", "task-clock"),
        ("sched:sched_switch", "sched"),
    ] {
        let ours = lockscope_fold(dir.path(), &capture, &["--event", event], false);
        let mut options = inferno::collapse::perf::Options::default();
        options.event_filter = Some(filter.to_string());
        let mut out = Vec::new();
        inferno::collapse::perf::Folder::from(options)
            .collapse(without_tracepoint_arguments(&text).as_bytes(), &mut out)
            .expect("collapse");
        let reference = folded_map(&String::from_utf8(out).expect("utf-8"));
        assert!(!reference.is_empty(), "{event}");
        assert_eq!(ours, reference, "{event}");
    }
    let out = lockscope()
        .args(["import", "perf-script"])
        .arg(&capture)
        .arg("-o")
        .arg(dir.path().join("none.lsp"))
        .args(["--event", "cycles"])
        .output()
        .expect("run import");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no samples of event `cycles`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Imports `capture` and returns the profile and its path.
fn import(dir: &Path, capture: &Path, args: &[&str]) -> (lockscope_probes::Profile, PathBuf) {
    let lsp = dir.join(format!(
        "{}.lsp",
        capture
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("capture")
    ));
    run_ok(
        lockscope()
            .args(["import", "perf-script"])
            .arg(capture)
            .arg("-o")
            .arg(&lsp)
            .args(args),
    );
    (
        lockscope_probes::read_profile(&lsp).expect("read profile"),
        lsp,
    )
}

/// The profile keeps what was sampled: cpu-clock periods as CPU time (kind `on-cpu`, count =
/// samples), page-fault periods as events (kind `event`), samples without a period as samples
/// (kind `sample`); the report, the flamegraph and speedscope label that unit and never call
/// them waits.
#[test]
fn units_are_the_captures_own() {
    use lockscope_probes::WaitKind;
    let dir = tempfile::tempdir().expect("tempdir");
    for (capture, kind, unit, report_title) in [
        (
            "mt-threads-named-with-spaces.txt",
            WaitKind::OnCpu,
            "ns on CPU",
            "sampled CPU time",
        ),
        (
            "page-faults.txt",
            WaitKind::Event,
            "events",
            "counted events",
        ),
        (
            "fields-comm-tid-event-no-time.txt",
            WaitKind::Sample,
            "samples",
            "samples",
        ),
    ] {
        let text = std::fs::read_to_string(data(capture)).expect("read capture");
        let (profile, lsp) = import(dir.path(), &data(capture), &[]);
        assert!(profile.waits.iter().all(|w| w.kind == kind), "{capture}");
        let samples = text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with(char::is_whitespace))
            .count() as u64;
        let count: u64 = profile.waits.iter().map(|w| w.stats.count).sum();
        let total_ns: u64 = profile.waits.iter().map(|w| w.stats.total_ns).sum();
        let weight: u64 = inferno_fold(&text, false).values().sum();
        match kind {
            WaitKind::OnCpu => assert_eq!((count, total_ns), (samples, weight), "{capture}"),
            _ => assert_eq!((count, total_ns), (weight, 0), "{capture}"),
        }

        let report = run_ok(lockscope().arg("report").arg(&lsp));
        assert!(
            report.starts_with(&format!("lockscope report: {report_title}")),
            "{report}"
        );
        // (Frames may name waits, `__lll_lock_wait`; the labels must not.)
        for label in ["Waits", " waits", "wait time", "wait sites"] {
            assert!(!report.contains(label), "{capture}: `{label}` in {report}");
        }

        let svg = dir.path().join("graph.svg");
        run_ok(lockscope().arg("flamegraph").arg(&lsp).arg("-o").arg(&svg));
        let svg = std::fs::read_to_string(&svg).expect("svg");
        assert!(
            svg.contains(&format!(" {unit}, ")),
            "{capture}: no `{unit}` in the SVG"
        );
        for label in [" waits", "wait time"] {
            assert!(!svg.contains(label), "{capture}: `{label}` in the SVG");
        }

        let speedscope = run_ok(
            lockscope()
                .arg("export")
                .arg(&lsp)
                .args(["--format", "speedscope"]),
        );
        for label in ["\"waits\"", "\"wait time\"", "waits of"] {
            assert!(!speedscope.contains(label), "{capture}: {speedscope}");
        }
    }
}

/// The report of an imported cpu-clock capture (golden file).
#[test]
fn report_of_a_cpu_capture() {
    let dir = tempfile::tempdir().expect("tempdir");
    let capture = data("mt-threads-named-with-spaces.txt");
    let lsp = dir.path().join("mt.lsp");
    run_ok(
        lockscope()
            .current_dir(capture.parent().expect("data dir"))
            .args([
                "import",
                "perf-script",
                "mt-threads-named-with-spaces.txt",
                "-o",
            ])
            .arg(&lsp),
    );
    let report = run_ok(lockscope().arg("report").arg(&lsp).args(["--top", "3"]));
    common::check_golden("report_perf_cpu.txt", &report);
}

/// Records new captures with the local perf (`-g` and `--call-graph dwarf` of a multi-threaded
/// program and a shell pipeline; `-e cpu-clock,task-clock,page-faults,sched:sched_switch`;
/// several `perf script -F` field lists) and checks each folds as inferno folds it.
#[test]
#[ignore = "runs `perf record` (root, perf installed); the suite runs it with --include-ignored"]
fn live_captures_fold_like_inferno() {
    let usable = Command::new("perf")
        .args(["stat", "-e", "cpu-clock", "true"])
        .output();
    if !matches!(&usable, Ok(out) if out.status.success()) {
        eprintln!("skipped: live_captures_fold_like_inferno: `perf stat -e cpu-clock true` fails here: {usable:?}");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let workload = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; \
                    seq 1 100000 | sort -r | uniq -c | wc -l >/dev/null";
    let demo = common::demo_path();
    let recordings: [(&str, Vec<&str>); 4] = [
        ("fp", vec!["-g", "--", "sh", "-c", workload]),
        ("dwarf", vec!["--call-graph", "dwarf,8192", "--", demo]),
        (
            "events",
            vec![
                "-g",
                "-e",
                "cpu-clock,task-clock,page-faults,sched:sched_switch",
                "--",
                demo,
            ],
        ),
        (
            "switch",
            vec!["-g", "-e", "sched:sched_switch", "--", "sh", "-c", workload],
        ),
    ];
    let field_lists = [
        None,
        Some("comm,tid,event,ip,sym,dso"),
        Some("comm,pid,tid,time,period,event,ip,sym,dso,symoff"),
        Some("comm,tid,time,period,event"),
    ];
    let mut compared = 0;
    for (name, args) in recordings {
        let data = dir.path().join(format!("{name}.data"));
        let out = Command::new("perf")
            .args(["record", "-q", "-o"])
            .arg(&data)
            .args(&args)
            .output()
            .expect("run perf record");
        if !out.status.success() {
            eprintln!(
                "skipped: live capture `{name}`: perf record failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            continue;
        }
        for (i, fields) in field_lists.iter().enumerate() {
            let mut script = Command::new("perf");
            script.args(["script", "-i"]).arg(&data);
            if let Some(fields) = fields {
                script.args(["-F", fields]);
            }
            let out = script.output().expect("run perf script");
            if !out.status.success() || out.stdout.is_empty() {
                continue;
            }
            let capture = dir.path().join(format!("{name}-{i}.txt"));
            std::fs::write(&capture, &out.stdout).expect("write capture");
            let lines = assert_folds_like_inferno(&capture);
            eprintln!("live capture {name} -F {fields:?}: {lines} folded lines match inferno");
            compared += 1;
        }
    }
    assert!(compared > 0, "no live capture could be compared");
}
