//! The unwinder's tables on real processes: built in the background and reused from the cache, a
//! pending table that cuts a stack, and the tables an exec or an exit leaves unmapped freed.

use super::*;

/// Unwinding options with tables built in the background (as `lockscope record` does).
fn background(cache: Option<&Path>, builder_threads: Option<usize>) -> UnwindOptions {
    let mut unwind = UnwindOptions::default();
    unwind.background = true;
    unwind.cache_dir = cache.map(Path::to_path_buf);
    unwind.builder_threads = builder_threads;
    unwind
}

/// With tables built in the background and a cache: the chains unwind completely (the
/// executable's and libc's tables are ready before the attach), the first attach builds and
/// caches every table, and a second attach to the same program takes every one from the cache.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn background_tables_and_cache_reuse() {
    require_bpf!(skip_reason());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("chains");
    compile(CHAINS_C, &binary, &[]);
    let cache = dir.path().join("cache");
    let mut runs = Vec::new();
    for _ in 0..2 {
        let workload = Workload::start(Command::new(&binary).args(["--wait-for-stdin", "20"]));
        let (profile, workload, stats) = workload.record_with(background(Some(&cache), None));
        assert_c_chains(&profile, &workload);
        assert_eq!(stats.table_pending, 0, "{stats:?}");
        runs.push(stats);
    }
    let names = |stats: &UnwindStats, cached: bool| -> BTreeSet<String> {
        stats
            .table_builds
            .iter()
            .filter(|b| b.cached == cached)
            .map(|b| b.name.clone())
            .collect()
    };
    let first_built = names(&runs[0], false);
    assert!(
        first_built.iter().any(|n| n.contains("/libc.so")),
        "{:?}",
        runs[0].table_builds
    );
    assert!(first_built.iter().any(|n| n.ends_with("/chains")));
    assert!(
        names(&runs[1], false).is_empty(),
        "{:?}",
        runs[1].table_builds
    );
    let second_cached = names(&runs[1], true);
    for file in first_built.iter().filter(|n| n.starts_with('/')) {
        assert!(second_cached.contains(file), "{file} not from the cache");
    }
    assert!(std::fs::read_dir(&cache).unwrap().count() >= 2);
}

/// A mapping whose table is still being built (here: never, without builder threads) cuts the
/// stack at its frame, flagged and counted, instead of walking on by frame pointer: the plugin's
/// waits end at plugin_lock, none shows the callers beyond it, and the chains through the
/// executable and libc alone (built before the attach) stay complete.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn pending_table_cuts_stack_and_counts_it() {
    require_bpf!(skip_reason());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let workload = start_chains_with_plugin(dir.path(), "50");
    let (profile, workload, stats) = workload.record_with(background(None, Some(0)));
    assert!(stats.table_pending > 0, "{stats:?}");
    assert!(stats.truncated >= stats.table_pending, "{stats:?}");
    assert!(stats.tables_pending >= 1, "{stats:?}");
    let mutex = workload.lock("mutex");
    let mut through_plugin = 0;
    for wait in &profile.waits {
        if !(mutex.0..mutex.1).contains(&wait.object) {
            continue;
        }
        let Some(stack) = profile.stack(wait.user_stack) else {
            continue;
        };
        let names: Vec<String> = stack
            .frames
            .iter()
            .flat_map(|f| f.names_outermost_first())
            .collect();
        assert!(
            stack.truncated,
            "complete through a pending table: {names:?}"
        );
        assert!(
            !names
                .iter()
                .any(|n| matches(n, "inner_lock") || matches(n, "worker")),
            "frames beyond the pending mapping: {names:?}"
        );
        if names.iter().any(|n| matches(n, "plugin_lock")) {
            through_plugin += wait.stats.total_ns;
        }
    }
    assert!(through_plugin > 0, "{}", dump_stacks(&profile));
    assert_chain(
        &profile,
        "condvar chain",
        workload.lock("cond"),
        CONDVAR_CHAIN,
    );
}

/// Polls `recorder` (which refreshes the traced processes' tables) until its unwinder's stats
/// satisfy `done`; panics after 10 s.
fn poll_until(recorder: &mut Recorder, done: impl Fn(&UnwindStats) -> bool) -> UnwindStats {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        recorder.poll().expect("poll");
        let stats = recorder.unwind_stats().expect("unwind stats").unwrap();
        if done(&stats) {
            return stats;
        }
        assert!(Instant::now() < deadline, "timed out: {stats:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Rows of the tables built for files whose path ends with `suffix`.
fn rows_of(stats: &UnwindStats, suffix: &str) -> u32 {
    stats
        .table_builds
        .iter()
        .filter(|build| build.name.ends_with(suffix))
        .map(|build| build.rows)
        .sum()
}

/// A traced process that execs gives back its old image's table (the shell's rows are freed,
/// the new program's loaded; libc, ld.so and the vDSO stay), and once it is gone every table it
/// held is freed: nothing it mapped stays in the BPF arrays.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn exec_and_exit_free_the_tables_no_process_maps() {
    require_bpf!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = Command::new("/bin/sh")
        .args(["-c", "read line; exec sleep 30"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    // The shell runs: spawn returns once exec succeeded.
    let mut recorder =
        Recorder::start(RecordOptions::new(Target::pid(child.id()))).expect("start recorder");
    let before = recorder.unwind_stats().unwrap().unwrap();
    let shell_rows = rows_of(&before, "/dash") + rows_of(&before, "/bash");
    assert!(shell_rows > 0, "{before:?}");
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    // The refresh takes the maps as they are when it reads them: one read in the middle of the
    // exec (CI saw it once) holds `sleep` alone, and a process asleep misses no stack that
    // would refresh it again. Let the exec and the dynamic loader finish first.
    let maps = format!("/proc/{}/maps", child.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&maps)
        .is_ok_and(|m| m.contains("/sleep") && m.contains("libc.so"))
    {
        assert!(Instant::now() < deadline, "sleep did not load libc");
        std::thread::sleep(Duration::from_millis(10));
    }
    let after = poll_until(&mut recorder, |stats| rows_of(stats, "/sleep") > 0);
    assert_eq!(
        after.rows_used,
        before.rows_used - shell_rows + rows_of(&after, "/sleep"),
        "before: {before:?}\nafter: {after:?}"
    );
    assert_eq!(after.tables, before.tables, "{after:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    let gone = poll_until(&mut recorder, |stats| stats.tables == 0);
    assert_eq!(gone.rows_used, 0, "{gone:?}");
    assert!(gone.rows_capacity > 0, "{gone:?}");
}
