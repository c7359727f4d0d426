//! `lockscope diff`: normalization, canonical frames, mismatch warnings, and an end-to-end diff of
//! two demo recordings with different hold times (BPF; skips loudly without it).

use crate::common;
use crate::common::fixtures;

use common::*;
use lockscope::diff::{differential_lines, mismatches, DiffOptions, Normalization};
use lockscope_probes::{AttachStatus, Profile};
use std::collections::BTreeMap;

/// Parses `stack A B` lines into stack → (A, B).
fn pairs(lines: &[String]) -> BTreeMap<String, (u64, u64)> {
    lines
        .iter()
        .map(|line| {
            let mut parts = line.rsplitn(3, ' ');
            let b = parts.next().expect("B").parse().expect("B is a number");
            let a = parts.next().expect("A").parse().expect("A is a number");
            (parts.next().expect("stack").to_string(), (a, b))
        })
        .collect()
}

/// The same profile with every count and time multiplied by `factor`, recorded `factor` times
/// as long: the same rate.
fn scaled(profile: &Profile, factor: u64) -> Profile {
    let mut out = profile.clone();
    out.metadata.duration_ns *= factor;
    for w in &mut out.waits {
        w.stats.count *= factor;
        w.stats.total_ns *= factor;
        let histogram = w.stats.histogram.clone();
        for _ in 1..factor {
            w.stats.histogram.merge(&histogram);
        }
    }
    out
}

/// A run twice as long at the same rate diffs to zero per second on every frame, while the raw
/// totals differ; per operation, twice the operations also diffs to zero.
#[test]
fn same_rate_twice_as_long_diffs_to_zero() {
    let a = fixtures::demo_profile();
    assert!(a.metadata.duration_ns > 0);
    let b = scaled(&a, 2);
    let lines = differential_lines(&a, &b, &DiffOptions::default()).expect("diff");
    assert!(!lines.is_empty());
    for (stack, (va, vb)) in pairs(&lines) {
        assert!(va > 0, "{stack} has a value");
        assert_eq!(va, vb, "{stack} differs per second");
    }
    let mut per_op = DiffOptions::default();
    per_op.normalization = Normalization::PerOperation {
        ops_a: 1000,
        ops_b: 2000,
    };
    for (stack, (va, vb)) in pairs(&differential_lines(&a, &b, &per_op).expect("diff")) {
        assert_eq!(va, vb, "{stack} differs per operation");
    }
    // Unnormalized (one operation each), B is twice A: the normalization did the work above.
    per_op.normalization = Normalization::PerOperation { ops_a: 1, ops_b: 1 };
    for (stack, (va, vb)) in pairs(&differential_lines(&a, &b, &per_op).expect("diff")) {
        assert_eq!(2 * va, vb, "{stack}");
    }
    assert!(mismatches(&a, &b, &DiffOptions::default()).is_empty());
}

/// Stacks fold to canonical frames: numbered threads merge, the wait entry becomes
/// `[kernel wait]` and the kind closes the stack.
#[test]
fn canonical_stacks_of_the_fixture() {
    let profile = fixtures::demo_profile();
    let stacks = lockscope::analysis::canonical::canonical_stacks(&profile);
    let keys: Vec<&String> = stacks.keys().collect();
    assert!(
        keys.iter()
            .any(|k| k.ends_with(";[kernel wait];[mutex]") && k.contains("take_order_lock")),
        "{keys:#?}"
    );
    assert!(
        keys.iter().all(|k| !k.contains("__lll_lock_wait")),
        "{keys:#?}"
    );
    assert!(
        keys.iter()
            .all(|k| !k.split(';').next().unwrap_or("").contains(char::is_numeric)),
        "thread frames keep no digits: {keys:#?}"
    );
}

/// Lost events, a failed probe, different probes and different workloads are each flagged.
#[test]
fn mismatches_are_flagged() {
    let a = fixtures::demo_profile();
    let mut b = fixtures::lossy_profile();
    b.metadata.target.command = vec!["/usr/sbin/mariadbd".to_string()];
    b.metadata.probes[0].status = AttachStatus::Failed {
        reason: "EPERM".to_string(),
    };
    b.metadata.probes[0].probe = "offcpu".to_string();
    for w in &mut b.waits {
        w.probe = "offcpu".to_string();
    }
    let warnings = mismatches(&a, &b, &DiffOptions::default()).join("\n");
    assert!(warnings.contains("B lost "), "{warnings}");
    assert!(
        warnings.contains("probe `offcpu` failed to attach (EPERM)"),
        "{warnings}"
    );
    assert!(
        warnings.contains("different probes: A has futex, B has offcpu"),
        "{warnings}"
    );
    assert!(warnings.contains("different workloads"), "{warnings}");

    // The table prints them as WARNING lines.
    let mut out = Vec::new();
    lockscope::diff::write_diff_table(
        &a,
        &b,
        ("a.lsp", "b.lsp"),
        &DiffOptions::default(),
        &mut out,
    )
    .expect("table");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.contains("WARNING: different workloads"), "{text}");
    assert!(!text.contains("comparable:"), "{text}");
}

fn record_demo(dir: &std::path::Path, name: &str, hold_ms: u32) -> std::path::PathBuf {
    let lsp = dir.join(name);
    let out = lockscope()
        .arg("record")
        .arg("-o")
        .arg(&lsp)
        .arg("--")
        .arg(demo_path())
        .arg("--hold-ms")
        .arg(hold_ms.to_string())
        .output()
        .expect("run lockscope record");
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lsp
}

/// Two demo recordings, holding the order lock 200 ms and then 400 ms: per run (one operation
/// each) the mutex waiters' frame grows by 4 × 200 ms, the condvar waiters' frame does not
/// change, the SVG draws the frames, and the table flags the different arguments.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn demo_hold_times_differ_at_the_mutex_frame() {
    if !bpf_available("demo_hold_times_differ_at_the_mutex_frame") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let a = record_demo(dir.path(), "a.lsp", 200);
    let b = record_demo(dir.path(), "b.lsp", 400);
    let svg = dir.path().join("diff.svg");
    let folded = dir.path().join("diff.folded");
    let out = lockscope()
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .args(["--per-op", "1,1", "-o"])
        .arg(&svg)
        .arg("--folded")
        .arg(&folded)
        .output()
        .expect("run lockscope diff");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "diff failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = std::fs::read_to_string(&folded)
        .expect("folded pairs")
        .lines()
        .map(str::to_string)
        .collect();
    let pairs = pairs(&lines);
    let sum = |prefix: &str| {
        pairs
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .fold((0i128, 0i128), |(sa, sb), (_, &(va, vb))| {
                (sa + va as i128, sb + vb as i128)
            })
    };
    let (mutex_a, mutex_b) = sum("mutex-waiter-*;");
    let growth = (mutex_b - mutex_a) as f64;
    // 4 waiters each wait 200 ms longer. The tolerance is wide because recording (stack
    // unwinding on every wait) slows the demo down on a busy 2-CPU machine; what matters is
    // that the growth is there, and only there.
    assert!(
        (growth - 800e6).abs() <= 0.2 * 800e6,
        "mutex waiters grew {:.1} ms, expected 800 ms: {pairs:#?}",
        growth / 1e6
    );
    assert!(
        pairs
            .keys()
            .any(|k| k.starts_with("mutex-waiter-*;") && k.ends_with("[kernel wait];[mutex]")),
        "{pairs:#?}"
    );
    for (stack, &(va, vb)) in &pairs {
        if stack.starts_with("mutex-waiter-*;") {
            continue;
        }
        let change = (vb as f64 - va as f64).abs();
        assert!(
            change < growth / 2.0,
            "{stack} changed by {:.1} ms, as much as the mutex frame: {pairs:#?}",
            change / 1e6
        );
    }
    let (cond_a, _) = sum("cond-waiter-*;");
    assert!(cond_a >= 550_000_000, "condvar waits of A: {cond_a}");

    // The table: the mutex kind's change is about +800 ms per run, and the mismatch is said.
    assert!(
        table.contains("WARNING: same program, different arguments"),
        "{table}"
    );
    let mutex_row = table
        .lines()
        .skip_while(|l| l.trim() != "mutex")
        .nth(2)
        .unwrap_or_default();
    assert!(mutex_row.trim_start().starts_with('B'), "{table}");
    assert!(mutex_row.trim_end().ends_with(" ms/op"), "{mutex_row}");
    assert!(mutex_row.contains(" +"), "{mutex_row}");

    let svg = std::fs::read_to_string(&svg).expect("svg");
    assert!(
        svg.contains("mutex-waiter-*"),
        "the SVG draws the thread frame"
    );
    assert!(svg.contains("[kernel wait]"));
    assert!(svg.contains("ns/op"));
}

/// Frames that vanished in B have no width in B's graph; `--negate` draws A's widths, so they show.
#[test]
fn negate_draws_the_vanished_frames() {
    let a = fixtures::demo_profile();
    let mut b = a.clone();
    b.waits
        .retain(|w| w.kind != lockscope_probes::WaitKind::Mutex);
    let draw = |negate: bool| {
        let mut options = DiffOptions::default();
        options.negate = negate;
        let mut svg = Vec::new();
        lockscope::diff::write_diff_flamegraph(&a, &b, &options, &mut svg).expect("draw");
        String::from_utf8(svg).expect("utf-8")
    };
    assert!(!draw(false).contains("take_order_lock"));
    assert!(draw(true).contains("take_order_lock"));
}

/// A macOS DTrace profile and a Linux eBPF profile of the same code line up: their wait entry
/// frames differ (`libsystem_kernel.dylib`__psynch_mutexwait+0xa` against glibc's
/// `__lll_lock_wait` under an inlined `futex_wait`), their canonical stacks do not, so the diff
/// pairs them on one line instead of two disjoint ones.
#[test]
fn dtrace_and_ebpf_stacks_line_up() {
    use lockscope_probes::{
        AddressSpace, Frame, InlinedFrame, Stack, ThreadInfo, WaitKind, WaitRecord, WaitStats,
    };
    let named = |name: &str| Frame {
        function: Some(name.to_string()),
        ..Frame::unsymbolized(0x1000)
    };
    let profile = |os: &str, tid: u32, leaf: Vec<Frame>, total_ns: u64| {
        let mut frames = leaf;
        frames.extend([
            named("pthread_mutex_lock"),
            named("row_lock"),
            named("worker_main"),
        ]);
        let mut p = Profile::default();
        p.metadata.os = os.to_string();
        p.metadata.duration_ns = 1_000_000_000;
        p.metadata.target.command = vec!["/usr/sbin/mysqld".to_string()];
        p.threads = vec![ThreadInfo {
            pid: 1,
            tid,
            name: format!("connection-{tid}"),
        }];
        p.stacks = vec![Stack {
            space: AddressSpace::User,
            frames,
            truncated: false,
        }];
        p.waits = vec![WaitRecord {
            probe: "futex".to_string(),
            kind: WaitKind::Mutex,
            pid: 1,
            tid,
            object: 0x10,
            operation: String::new(),
            user_stack: Some(0),
            kernel_stack: None,
            woken_by: None,
            stats: WaitStats {
                count: 10,
                total_ns,
                max_ns: total_ns / 10,
                histogram: Default::default(),
            },
        }];
        p
    };
    let mac = profile(
        "macos",
        7,
        vec![
            named("libsystem_kernel.dylib`__psynch_mutexwait+0xa"),
            named("libsystem_pthread.dylib`_pthread_mutex_firstfit_lock_wait+0x4c"),
        ],
        750_000_000,
    );
    let mut lll = named("__GI___lll_lock_wait");
    lll.inlined = vec![InlinedFrame {
        function: "futex_wait".to_string(),
        file: None,
        line: None,
    }];
    let linux = profile("linux", 12, vec![lll], 100_000_000);
    let lines = differential_lines(&mac, &linux, &DiffOptions::default()).expect("diff");
    assert_eq!(
        lines,
        ["connection-*;worker_main;row_lock;pthread_mutex_lock;[kernel wait];[mutex] 750000000 100000000"],
        "one paired line"
    );
    // Different OSes are the point of the comparison, not a mismatch.
    assert!(mismatches(&mac, &linux, &DiffOptions::default()).is_empty());
}

/// `lockscope diff --json` of the demo profile against a run twice as long with three times the
/// mutex waits, other arguments and no unclassified waits matches its golden file, and its
/// numbers agree with the profiles: per-stack totals and counts are the profiles' canonical
/// stacks, deltas are B - A, per-second rates are totals over each duration, and the warnings
/// are the ones the text diff prints.
#[test]
fn json_diff_from_the_command_line() {
    use lockscope::analysis::canonical::canonical_stacks;
    let a = fixtures::demo_profile();
    let mut b = a.clone();
    b.metadata.duration_ns *= 2;
    b.metadata.target.command = vec!["demo".into(), "--orders".into(), "16".into()];
    b.waits
        .retain(|w| w.kind != lockscope_probes::WaitKind::Wait);
    for w in b
        .waits
        .iter_mut()
        .filter(|w| w.kind == lockscope_probes::WaitKind::Mutex)
    {
        w.stats.count *= 3;
        w.stats.total_ns *= 3;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    lockscope_probes::write_profile(&a, &dir.path().join("a.lsp")).expect("write A");
    lockscope_probes::write_profile(&b, &dir.path().join("b.lsp")).expect("write B");
    let out = lockscope()
        .current_dir(dir.path())
        .args(["diff", "a.lsp", "b.lsp", "--json", "--top", "0"])
        .output()
        .expect("run lockscope diff");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    check_golden("diff.json", &text);

    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(json["schema"], "lockscope-diff");
    assert_eq!(json["version"], lockscope::diff::DIFF_JSON_VERSION);
    assert_eq!(json["a"]["path"], "a.lsp");
    assert_eq!(json["b"]["duration_ns"], b.metadata.duration_ns);
    assert_eq!(json["rates"], true, "the durations differ");
    let expected_warnings = mismatches(&a, &b, &DiffOptions::default());
    assert!(!expected_warnings.is_empty());
    assert_eq!(json["warnings"], serde_json::json!(expected_warnings));
    assert_eq!(json["comparable"], false);

    let (stacks_a, stacks_b) = (canonical_stacks(&a), canonical_stacks(&b));
    let stacks = json["stacks"].as_array().expect("stacks");
    let mut keys: Vec<&String> = stacks_a.keys().chain(stacks_b.keys()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(stacks.len(), keys.len(), "every stack of either side");
    assert_eq!(json["stacks_total"], keys.len());
    let mut previous_change = u64::MAX;
    for entry in stacks {
        let stack = entry["stack"].as_str().expect("stack key");
        assert_eq!(
            entry["frames"].as_array().expect("frames").len(),
            stack.split(';').count()
        );
        for (side, profile, canonical) in [("a", &a, &stacks_a), ("b", &b, &stacks_b)] {
            let (count, total) = canonical
                .get(stack)
                .map_or((0, 0), |s| (s.count, s.total_ns));
            assert_eq!(entry[side]["count"], count, "{side} count of {stack}");
            assert_eq!(entry[side]["total_ns"], total, "{side} total of {stack}");
            let seconds = profile.metadata.duration_ns as f64 / 1e9;
            assert_eq!(
                entry[side]["total_ns_per_s"],
                (total as f64 / seconds).round() as u64,
                "{side} rate of {stack}"
            );
        }
        let int = |v: &serde_json::Value| v.as_i64().expect("integer");
        assert_eq!(
            int(&entry["delta"]["total_ns"]),
            int(&entry["b"]["total_ns"]) - int(&entry["a"]["total_ns"])
        );
        assert_eq!(
            int(&entry["delta"]["count"]),
            int(&entry["b"]["count"]) - int(&entry["a"]["count"])
        );
        let change = int(&entry["delta"]["normalized"]).unsigned_abs();
        assert!(change <= previous_change, "ranked by absolute change");
        previous_change = change;
    }
    // The mutex waits tripled over twice the time: their rate grew by half.
    let mutex = stacks
        .iter()
        .find(|s| s["stack"].as_str().is_some_and(|k| k.ends_with("[mutex]")))
        .expect("a mutex stack");
    let (ra, rb) = (
        mutex["a"]["total_ns_per_s"].as_f64().expect("rate A"),
        mutex["b"]["total_ns_per_s"].as_f64().expect("rate B"),
    );
    assert!((rb / ra - 1.5).abs() < 1e-6, "{ra} -> {rb}");
}

/// The demo profile (A) against a run twice as long with three times the mutex waits (B), whose
/// threads' wall times the `offcpu` probe measured (two threads alive all along).
fn demo_and_busier_demo() -> (Profile, Profile) {
    let a = fixtures::demo_profile();
    let mut b = a.clone();
    b.metadata.duration_ns *= 2;
    for w in b
        .waits
        .iter_mut()
        .filter(|w| w.kind == lockscope_probes::WaitKind::Mutex)
    {
        w.stats.count *= 3;
        w.stats.total_ns *= 3;
    }
    b.thread_times = [4243, 4244]
        .into_iter()
        .map(|tid| lockscope_probes::ThreadTime {
            pid: 4242,
            tid,
            wall_ns: b.metadata.duration_ns,
            time_ns: Default::default(),
            voluntary_switches: 0,
            involuntary_switches: 0,
            woken_ns: Default::default(),
        })
        .collect();
    (a, b)
}

/// `lockscope diff`'s table gives wait time as average threads waiting and, where the side has
/// per-thread times, as a share of thread time, never as a percentage of one clock; it matches
/// its golden file, and B's mutex row says 2.40 s of mutex wait over 2.40 s is 1.00 thread
/// waiting, 49.9% of the two threads' time (A has no per-thread times: a dash).
#[test]
fn table_in_threads_waiting() {
    let (a, b) = demo_and_busier_demo();
    let dir = tempfile::tempdir().expect("temp dir");
    lockscope_probes::write_profile(&a, &dir.path().join("a.lsp")).expect("write A");
    lockscope_probes::write_profile(&b, &dir.path().join("b.lsp")).expect("write B");
    let text = run_ok(
        lockscope()
            .current_dir(dir.path())
            .args(["diff", "a.lsp", "b.lsp", "--top", "0"]),
    );
    check_golden("diff_table.txt", &text);
    // No share of one clock: every percentage is a share of thread time, at most 100%.
    for share in text.split_whitespace().filter_map(|w| w.strip_suffix('%')) {
        let share: f64 = share.parse().expect("a percentage");
        assert!(share <= 100.0, "{share}% in {text}");
    }
    assert!(text.contains("threads: average threads waiting (wait time / wall time)"));
    let mutex_b = text
        .lines()
        .skip_while(|l| l.trim() != "mutex")
        .nth(2)
        .expect("B's mutex row");
    let mb = b.totals_by_kind()[&lockscope_probes::WaitKind::Mutex].total_ns;
    let threads = mb as f64 / b.metadata.duration_ns as f64;
    let of_thread_time = mb as f64 / (2 * b.metadata.duration_ns) as f64;
    assert!(
        mutex_b.contains(&format!(" {threads:.2} "))
            && mutex_b.contains(&format!(" {:.1}% ", of_thread_time * 100.0)),
        "{mutex_b}"
    );
    // A has no per-thread times: no share of thread time, said with a dash.
    let mutex_a = text
        .lines()
        .skip_while(|l| l.trim() != "mutex")
        .nth(1)
        .expect("A's mutex row");
    assert!(mutex_a.contains(" - "), "{mutex_a}");
}

/// Imports a perf-script capture of `tests/data/perf` into `dir`.
fn import_capture(dir: &std::path::Path, capture: &str) -> std::path::PathBuf {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perf");
    let lsp = dir.join(capture.replace(".txt", ".lsp"));
    run_ok(
        lockscope()
            .args(["import", "perf-script"])
            .arg(data.join(capture))
            .arg("-o")
            .arg(&lsp),
    );
    lsp
}

/// Imported captures (sampled CPU time, counted events) are diffed by what they hold: the count
/// column is named samples or events, the values are CPU time or events per second, and nothing
/// calls them waits, in the table, the JSON (`measure`) or the differential flamegraph.
#[test]
fn imported_captures_are_not_waits() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (capture, measure, column, unit) in [
        (
            "mt-threads-named-with-spaces.txt",
            "on-cpu",
            "samples",
            "ns/s",
        ),
        (
            "events-cpu-task-faults-switch.txt",
            "samples",
            "samples",
            "samples/s",
        ),
        ("page-faults.txt", "events", "events", "events/s"),
    ] {
        let lsp = import_capture(dir.path(), capture);
        let svg = dir.path().join("diff.svg");
        let text = run_ok(
            lockscope()
                .arg("diff")
                .arg(&lsp)
                .arg(&lsp)
                .arg("-o")
                .arg(&svg),
        );
        // The capture's own frames may name waits (perf sampled `__lll_lock_wait` on CPU): the
        // labels, every line but the sites' stacks, may not.
        let labels: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_end().ends_with(']'))
            .collect();
        assert!(
            !labels.iter().any(|l| l.to_lowercase().contains("wait")),
            "{capture}: a wait in\n{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().take(2).eq(["side", column])),
            "{capture}: a `{column}` column in\n{text}"
        );
        let svg = std::fs::read_to_string(&svg).expect("svg");
        for label in ["more wait", "wait per", "waits"] {
            assert!(
                !svg.contains(label),
                "{capture}: `{label}` in the flamegraph"
            );
        }
        let json: serde_json::Value = serde_json::from_str(&run_ok(
            lockscope().arg("diff").arg(&lsp).arg(&lsp).arg("--json"),
        ))
        .expect("JSON");
        assert_eq!(json["measure"], measure, "{capture}");
        assert_eq!(json["normalization"]["unit"], unit, "{capture}");
        assert!(json["by_kind"][0]["a"]["normalized"].as_u64() > Some(0));
    }
}

/// The same server recorded twice, its processes under other pids: the diff matches them by
/// command (one row for the workers' command, their counts per side), calls the recordings
/// comparable, and flags a command whose waits only one side recorded.
#[test]
fn processes_compare_by_command() {
    let a = fixtures::server_profile();
    let mut b = a.clone();
    for p in &mut b.processes {
        if !p.kernel_thread {
            p.pid += 100;
            p.parent = p
                .parent
                .map(|parent| if parent > 1 { parent + 100 } else { parent });
        }
    }
    for w in &mut b.waits {
        if w.pid != 40 {
            w.pid += 100;
            w.stats.total_ns *= 2;
        }
    }
    for t in &mut b.threads {
        if t.pid != 40 {
            t.pid += 100;
        }
    }
    let options = DiffOptions::default();
    assert_eq!(mismatches(&a, &b, &options), Vec::<String>::new());
    let mut out = Vec::new();
    lockscope::diff::write_diff_table(&a, &b, ("a.lsp", "b.lsp"), &options, &mut out)
        .expect("table");
    let table = String::from_utf8(out).expect("utf-8");
    assert!(
        table.contains("Processes by command (matched by command, not pid: A 5 processes, B 5)"),
        "{table}"
    );
    assert!(
        table.contains("  /usr/sbin/apache2 -DFOREGROUND (A: 4, B: 4 processes)"),
        "{table}"
    );
    let mut json = Vec::new();
    lockscope::diff::write_diff_json(&a, &b, ("a.lsp", "b.lsp"), &options, &mut json)
        .expect("json");
    let json: serde_json::Value = serde_json::from_slice(&json).expect("json");
    let by_command = json["by_command"].as_array().expect("by_command");
    let apache = by_command
        .iter()
        .find(|c| c["command"] == "/usr/sbin/apache2 -DFOREGROUND")
        .expect("the workers' command");
    assert_eq!(apache["processes"], serde_json::json!([4, 4]));
    assert_eq!(
        apache["b"]["total_ns"].as_u64().expect("B's total"),
        2 * apache["a"]["total_ns"].as_u64().expect("A's total")
    );

    // A worker command B never recorded waits of: a different set of processes.
    let mut c = b.clone();
    c.waits.retain(|w| w.pid == 40);
    let warnings = mismatches(&a, &c, &options);
    assert!(
        warnings.contains(
            &"only A has waits of processes running `/usr/sbin/apache2 -DFOREGROUND`: B did \
              not record them"
                .to_string()
        ),
        "{warnings:?}"
    );
}
