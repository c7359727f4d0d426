//! The bottleneck analysis from a real dtrace: `lockscope why` names the sleep under the lock.

use super::*;

/// The bottleneck analysis from DTrace (`--probes bottleneck`: the defaults and the `waitfor`
/// stream), on the known-answer program of the class "a sleep inside a critical section"
/// (`tests/programs/sleep_under_lock.c`, docs/BOTTLENECK.md, whose truth the eBPF tests prove by
/// experiment): `lockscope why --json` ranks first the sleep under the lock (kind `sleep`, in
/// `clock_nanosleep`, on a stack through `request_critical_section`), not the CPU work under the
/// mutex (`request_update_under_lock`, the naive answer); the shares are fractions that add up
/// to at most the whole, the first explains at least a quarter of the analysed threads' time,
/// and the analysis followed intervals with none lost. The program is built with frame pointers
/// (`ustack()` walks them, as on macOS and the BSDs); libc's `nanosleep` has none, so the frame
/// between `clock_nanosleep` and `request_critical_section` (`journal_write_under_lock`) is not
/// in the stack.
#[test]
fn live_why_names_the_sleep_under_the_lock() {
    let test = "live_why_names_the_sleep_under_the_lock";
    let Some(live) = Live::start(test) else {
        return;
    };
    let binary = live.tmp.path().join("sleep_under_lock");
    let source =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/programs/sleep_under_lock.c");
    match Command::new("cc")
        .args(["-O2", "-fno-omit-frame-pointer", "-pthread", "-o"])
        .arg(&binary)
        .arg(&source)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "cc sleep_under_lock.c: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => {
            assert!(
                !std::env::var("CI").is_ok_and(|v| v == "true"),
                "{test}: no C compiler (`cc`: {e})"
            );
            eprintln!("skipped: {test}: no C compiler (`cc`: {e}); apt-get install gcc");
            return;
        }
    }
    let lsp = live.profile("sleep_under_lock.lsp");
    let out = live
        .record(&lsp)
        .args(["--probes", "bottleneck", "--"])
        .arg(&binary)
        .args(["--duration", "3"])
        .current_dir(live.tmp.path())
        .output()
        .expect("run lockscope");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("throughput: "), "the program ran: {stdout}");

    let profile = read(&lsp);
    let bottleneck = profile
        .bottleneck
        .as_ref()
        .unwrap_or_else(|| panic!("no bottleneck analysis in the profile: {stderr}"));
    let seconds = profile.metadata.duration_ns as f64 / 1e9;
    eprintln!(
        "{test}: {} intervals in {seconds:.2} s ({:.0}/s), {} lost; dtrace drops {:?}",
        bottleneck.intervals,
        bottleneck.intervals as f64 / seconds,
        bottleneck.lost_intervals,
        profile.metadata.losses
    );
    assert!(
        bottleneck.intervals > 1000,
        "{} intervals",
        bottleneck.intervals
    );

    let json = common::run_ok(lockscope().arg("why").arg(&lsp).arg("--json"));
    let answer: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("why --json: {e}: {json}"));
    let causes = answer["causes"]
        .as_array()
        .unwrap_or_else(|| panic!("no causes: {json}"));
    let first = causes
        .first()
        .unwrap_or_else(|| panic!("why found no cause: {json}"));
    eprintln!("{test}: first cause {first}");
    // Every cause on one line each, leaf first, for a run whose full answer gets cut short.
    for cause in causes {
        let leaf = cause["stack"][0].as_str().unwrap_or("?");
        eprintln!(
            "{test}: cause {} {} {:.3} {} ns at {leaf}",
            cause["rank"],
            cause["kind"],
            cause["share"].as_f64().unwrap_or_default(),
            cause["total_ns"]
        );
    }
    let names: Vec<String> = first["stack"]
        .as_array()
        .unwrap_or_else(|| panic!("a stack of frames: {first}"))
        .iter()
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect();
    let context = format!("first cause {first:#}\nall: {json}");
    assert_eq!(first["kind"], "sleep", "{context}");
    assert_eq!(first["call"], "clock_nanosleep", "{context}");
    assert!(
        names
            .first()
            .is_some_and(|leaf| leaf.contains("clock_nanosleep")),
        "{context}"
    );
    common::assert_in_order(&names, &["request_thread", "request_critical_section"]);
    assert!(
        !names
            .iter()
            .any(|n| n.contains("request_update_under_lock")),
        "the naive answer is not in the first cause: {context}"
    );
    let mut shares = 0.0;
    for cause in causes {
        let share = cause["share"].as_f64().unwrap_or_default();
        assert!(share > 0.0 && share <= 1.0, "share out of (0, 1]: {cause}");
        shares += share;
    }
    assert!(shares <= 1.0 + 1e-6, "{shares}: {json}");
    let share = first["share"].as_f64().unwrap_or_default();
    assert!(
        share >= 0.25,
        "the sleep under the lock explains {share}: {context}"
    );
    // The report still reads the profile.
    let report = common::run_ok(lockscope().arg("report").arg(&lsp));
    assert!(report.contains("backend dtrace"), "{report}");
}
