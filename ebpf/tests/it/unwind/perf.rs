//! The functions on lockscope's user stacks of the C chains against those of `perf record
//! --call-graph dwarf` on the same program.

use super::*;

/// Function names as both tools spell them: glibc aliases reduced, symbol versions dropped.
fn function_key(name: &str) -> String {
    normalize(name.split('@').next().unwrap_or(name)).to_owned()
}

/// The functions on user stacks of `perf script` samples taken in a futex wait of the threads
/// named in `threads` (context-switch samples: one per blocking wait).
fn perf_functions(script: &str, threads: &[&str]) -> BTreeSet<String> {
    let mut functions = BTreeSet::new();
    for sample in script.split("\n\n") {
        let mut lines = sample.lines().filter(|l| !l.trim().is_empty());
        let Some(header) = lines.next() else { continue };
        if !threads.iter().any(|t| header.trim_start().starts_with(t)) {
            continue;
        }
        let frames: Vec<(&str, &str)> = lines
            .filter_map(|l| {
                // "\t    addr sym (dso)"
                let l = l.trim();
                let (_, rest) = l.split_once(' ')?;
                let (sym, dso) = rest.rsplit_once(" (")?;
                Some((sym.trim(), dso.trim_end_matches(')')))
            })
            .collect();
        let in_futex_wait = frames
            .iter()
            .any(|(sym, dso)| *dso == "[kernel.kallsyms]" && sym.contains("futex"));
        if !in_futex_wait {
            continue;
        }
        for (sym, dso) in frames {
            if dso != "[kernel.kallsyms]" && sym != "[unknown]" {
                functions.insert(function_key(sym));
            }
        }
    }
    functions
}

/// The functions (outer name of each frame, as perf names frames without --inline) on user
/// stacks of the waits of threads named in `threads` that lasted at least `min_wait`.
fn lockscope_functions(
    profile: &Profile,
    threads: &[&str],
    min_wait: Duration,
) -> BTreeSet<String> {
    profile
        .waits
        .iter()
        .filter(|w| {
            profile
                .thread_name(w.pid, w.tid)
                .is_some_and(|n| threads.contains(&n))
        })
        .filter(|w| w.stats.max_ns >= min_wait.as_nanos() as u64)
        .filter_map(|w| profile.stack(w.user_stack))
        .flat_map(|s| &s.frames)
        .filter_map(|f| f.function.as_deref())
        .map(function_key)
        .collect()
}

/// The functions on lockscope's stacks of the C chains are those on `perf record --call-graph
/// dwarf` stacks of the same run (perf from Debian's linux-perf, sampling every context switch,
/// so every wait that blocked): every function of a wait long enough to have surely blocked is
/// in perf's set, and every function in perf's set is in lockscope's.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn functions_match_perf_dwarf_unwinding() {
    require_bpf!(skip_reason());
    if Command::new("perf").arg("--version").output().is_err() {
        eprintln!("skipped: perf not installed (Debian: linux-perf)");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("chains");
    compile(CHAINS_C, &binary, &[]);
    let perf_data = dir.path().join("perf.data");
    let workload = Workload::start(
        Command::new("perf")
            .args(["record", "-q", "-e", "context-switches", "-c", "1"])
            .args(["--call-graph", "dwarf", "-o"])
            .arg(&perf_data)
            .arg("--")
            .arg(&binary)
            .args(["--wait-for-stdin", "20"]),
    );
    let (profile, _workload, _) = workload.record();
    let script = Command::new("perf")
        .args(["script", "--no-inline", "-F", "comm,tid,ip,sym,dso", "-i"])
        .arg(&perf_data)
        .output()
        .expect("perf script");
    assert!(script.status.success(), "perf script failed");
    let script = String::from_utf8_lossy(&script.stdout);
    let threads = ["mutex-worker", "rw-worker", "cv-worker"];
    let perf = perf_functions(&script, &threads);
    let blocked = lockscope_functions(&profile, &threads, Duration::from_millis(1));
    let all = lockscope_functions(&profile, &threads, Duration::ZERO);
    eprintln!("perf: {perf:?}\nlockscope (waits >= 1 ms): {blocked:?}\nlockscope (all): {all:?}");
    assert!(
        perf.contains("inner_lock") && perf.contains("start_thread"),
        "perf: {perf:?}"
    );
    assert!(
        blocked.is_subset(&perf),
        "lockscope functions perf does not see: {:?}",
        blocked.difference(&perf).collect::<Vec<_>>()
    );
    assert!(
        perf.is_subset(&all),
        "perf functions lockscope does not see: {:?}",
        perf.difference(&all).collect::<Vec<_>>()
    );
}
