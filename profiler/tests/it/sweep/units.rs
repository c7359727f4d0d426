//! The units of a sweep, from synthetic profiles: wait time as average threads waiting and share of
//! thread time in the table and `sweep.json` version 2, the table without a breakdown, a version 1
//! sweep's finding rewritten.

use super::*;

/// Where the time of `threads` threads went, every thread alike over the whole recording: the
/// per-mille of its wall time per class (they add up to 1000).
fn thread_times(
    profile: &lockscope_probes::Profile,
    threads: u32,
    per_mille: &[(TimeClass, u64)],
) -> Vec<ThreadTime> {
    assert_eq!(per_mille.iter().map(|(_, p)| p).sum::<u64>(), 1000);
    let wall_ns = profile.metadata.duration_ns;
    (0..threads)
        .map(|i| ThreadTime {
            pid: profile.metadata.target.pid,
            tid: 5000 + i,
            wall_ns,
            time_ns: per_mille
                .iter()
                .map(|&(class, p)| (class, wall_ns / 1000 * p))
                .collect(),
            voluntary_switches: 100,
            involuntary_switches: 10,
            woken_ns: Default::default(),
        })
        .collect()
}

/// A sweep at 1, 2, 5 and 10 connections of the demo profile, its mutex waits growing with the
/// level: throughput peaks at 5 (the knee) and falls at 10 while the threads' time moves from
/// on-CPU to run-queue and lock; level 2 was recorded without the `offcpu` probe (no breakdown).
fn synthetic_sweep() -> Sweep {
    use TimeClass::*;
    // (concurrency, throughput, per-mille of thread time per class: none without offcpu)
    type Shape = (u32, f64, &'static [(TimeClass, u64)]);
    let shapes: [Shape; 4] = [
        (
            1,
            1000.0,
            &[
                (OnCpu, 600),
                (RunQueue, 20),
                (Lock, 30),
                (Condvar, 250),
                (Poll, 80),
                (Io, 20),
            ],
        ),
        (2, 1800.0, &[]),
        (
            5,
            1900.0,
            &[
                (OnCpu, 400),
                (RunQueue, 150),
                (Lock, 250),
                (Condvar, 100),
                (Futex, 10),
                (Poll, 40),
                (Io, 30),
                (Sleep, 10),
                (Other, 10),
            ],
        ),
        (
            10,
            1200.0,
            &[
                (OnCpu, 250),
                (RunQueue, 250),
                (Lock, 380),
                (Condvar, 50),
                (Futex, 10),
                (Poll, 20),
                (Io, 20),
                (Sleep, 10),
                (Other, 10),
            ],
        ),
    ];
    let mut levels = Vec::new();
    for (c, throughput, classes) in shapes {
        let mut profile = fixtures::demo_profile();
        for w in &mut profile.waits {
            if w.kind == lockscope_probes::WaitKind::Mutex {
                w.stats.total_ns *= u64::from(c);
                w.stats.count *= u64::from(c);
            }
        }
        if !classes.is_empty() {
            // c connection threads and one listener.
            profile.thread_times = thread_times(&profile, c + 1, classes);
        }
        let profile_name = format!("level-{c}.lsp");
        let load_name = format!("level-{c}.load.txt");
        levels.push(summarize_level(
            c,
            throughput,
            &profile,
            (&profile_name, &load_name),
        ));
    }
    fill_scaling(&mut levels);
    let knee = find_knee(&levels);
    let sentence = finding(&levels, knee.as_ref());
    Sweep {
        sweep_version: SWEEP_VERSION,
        load: "sysbench oltp_read_only --threads={c} run".to_string(),
        server: None,
        pid: 4242,
        target: None,
        duration_ns: 1_204_000_000,
        throughput_parser: "sysbench".to_string(),
        throughput_unit: "transactions/s".to_string(),
        levels,
        knee,
        finding: sentence,
        warnings: Vec::new(),
        probes: None,
        min_block_ns: None,
        syscalls: None,
    }
}

/// The table `sweep` prints gives wait time as average threads waiting and as a share of thread
/// time (never a percentage of one clock), shows where the threads' time went per level, and
/// says a level recorded without `offcpu` has no breakdown; the finding names both units and
/// the class of thread time that grows most across the knee (the fixture's lock, 250 → 380 per
/// mille, ahead of the run queue's 150 → 250).
#[test]
fn sweep_table_in_threads_and_thread_time() {
    let sweep = synthetic_sweep();
    assert_eq!(sweep.knee.as_ref().map(|k| k.concurrency), Some(5));
    assert_eq!(
        sweep.finding,
        "Throughput rises to 190% of concurrency 1 at 5, then falls (120% at 10); from 5 to 10, \
         `mutex` wait grows most (3.33 → 6.66 threads waiting on average, 55.5% → 60.5% of \
         thread time), led by `take_order_lock <- process_order <- worker_main [mutex]`; of \
         the threads' time, lock grows most (25.0% → 38.0%)."
    );
    let table = lockscope::sweep::sweep_table(&sweep);
    assert!(!table.contains("of wall time"), "{table}");
    assert!(
        table.contains("no breakdown: recorded without the offcpu probe"),
        "{table}"
    );
    check_golden("sweep_table.txt", &table);
}

/// Without any breakdown, the table says how to get one instead of printing zeros.
#[test]
fn sweep_table_without_any_breakdown() {
    let mut sweep = synthetic_sweep();
    for level in &mut sweep.levels {
        level.breakdown = None;
    }
    let table = lockscope::sweep::sweep_table(&sweep);
    assert!(
        table.contains("No level has a breakdown of the threads' time"),
        "{table}"
    );
    assert!(!table.contains("Where the threads' time went"), "{table}");
}

/// `sweep.json` version 2: wait time as `avg_threads` and `share_of_thread_time` (0 to 1, `null`
/// without a breakdown), and per level the `breakdown` of thread time over every class (`null`
/// for the level recorded without `offcpu`); it reads back unchanged.
#[test]
fn sweep_json_version_2_units() {
    let sweep = synthetic_sweep();
    let text = serde_json::to_string_pretty(&sweep).expect("encode");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(json["sweep_version"], 2);
    assert!(!text.contains("share_of_wall"), "renamed in version 2");
    let levels = json["levels"].as_array().expect("levels");
    assert_eq!(levels[1]["breakdown"], serde_json::Value::Null);
    assert_eq!(
        levels[1]["kinds"][0]["share_of_thread_time"],
        serde_json::Value::Null
    );
    for level in [&levels[0], &levels[2], &levels[3]] {
        let breakdown = &level["breakdown"];
        let names: Vec<&str> = breakdown["classes"]
            .as_array()
            .expect("classes")
            .iter()
            .map(|c| c["name"].as_str().expect("name"))
            .collect();
        assert_eq!(
            names,
            TimeClass::ALL.map(TimeClass::name),
            "every class, in report order"
        );
        let total: f64 = breakdown["classes"]
            .as_array()
            .expect("classes")
            .iter()
            .map(|c| c["share_of_thread_time"].as_f64().expect("share"))
            .sum();
        assert!((total - 1.0).abs() < 1e-3, "shares add up to 1: {total}");
        for kind in level["kinds"].as_array().expect("kinds") {
            let share = kind["share_of_thread_time"].as_f64().expect("a share");
            assert!((0.0..=1.0).contains(&share), "{kind}");
        }
    }
    // Level 10: 11 threads lived through the whole recording, 38% of their time on a lock.
    assert_eq!(levels[3]["breakdown"]["threads"], 11);
    assert_eq!(levels[3]["breakdown"]["avg_threads"], 11.0);
    assert_eq!(levels[3]["breakdown"]["classes"][2]["name"], "lock");
    assert_eq!(
        levels[3]["breakdown"]["classes"][2]["share_of_thread_time"],
        0.38
    );
    assert_eq!(levels[3]["breakdown"]["classes"][2]["avg_threads"], 4.18);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("sweep.json"), &text).expect("write");
    let (read, _) = lockscope::sweep::read_sweep(dir.path()).expect("read");
    assert_eq!(read, sweep);
}

/// A version 1 sweep with several levels reads as version 2 with its finding rewritten in
/// today's units (its `2039% of wall time` becomes average threads waiting).
#[test]
fn old_sweep_finding_is_rewritten() {
    // As version 1 wrote it: no breakdown, so no share of thread time either.
    let mut sweep = synthetic_sweep();
    for level in &mut sweep.levels {
        level.breakdown = None;
        for share in level
            .kinds
            .iter_mut()
            .chain(&mut level.threads)
            .chain(&mut level.top_sites)
        {
            share.share_of_thread_time = None;
        }
    }
    let mut json: serde_json::Value = serde_json::to_value(&sweep).expect("encode");
    json["sweep_version"] = 1.into();
    json["finding"] = "… `mutex` wait grows most (333% → 666% of wall time) …".into();
    for level in json["levels"].as_array_mut().expect("levels") {
        level.as_object_mut().expect("level").remove("breakdown");
        for list in ["kinds", "threads", "top_sites"] {
            for share in level[list].as_array_mut().expect("shares") {
                let share = share.as_object_mut().expect("share");
                let value = share.remove("avg_threads").expect("avg_threads");
                share.remove("share_of_thread_time");
                share.insert("share_of_wall".to_string(), value);
            }
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("sweep.json"), json.to_string()).expect("write");
    let (read, _) = lockscope::sweep::read_sweep(dir.path()).expect("a version 1 file reads");
    assert_eq!(read.sweep_version, SWEEP_VERSION);
    assert_eq!(
        read.finding,
        "Throughput rises to 190% of concurrency 1 at 5, then falls (120% at 10); from 5 to 10, \
         `mutex` wait grows most (3.33 → 6.66 threads waiting on average), led by \
         `take_order_lock <- process_order <- worker_main [mutex]`."
    );
    assert_eq!(read.levels, sweep.levels);

    json["sweep_version"] = 3.into();
    std::fs::write(dir.path().join("sweep.json"), json.to_string()).expect("write");
    let err = lockscope::sweep::read_sweep(dir.path()).expect_err("a newer file");
    assert!(err.to_string().contains("reads 1 to 2"), "{err}");
}

/// The table of the stored MariaDB sweep (`profiler/tests/data/mariadb-sweep`) fits 100 columns
/// and names its top wait sites leaf first, not by root-first cut stacks.
#[test]
fn mariadb_sweep_table_fits_100_columns() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mariadb-sweep");
    let (sweep, _) = lockscope::sweep::read_sweep(&dir).expect("the stored MariaDB sweep");
    let table = lockscope::sweep::sweep_table(&sweep);
    println!("{table}");
    let wide: Vec<&str> = table.lines().filter(|l| l.chars().count() > 100).collect();
    assert!(wide.is_empty(), "lines over 100 columns: {wide:#?}");
    assert!(!table.contains("…;"), "{table}");
    // Level 1's top site, `…;mariadbd;pthread_cond_timedwait64;[kernel wait];[condvar]`, at
    // the frame above the wait primitive (mariadbd's own code, unsymbolized: its module).
    assert!(
        table.contains("\n           1  mariadbd [condvar]\n"),
        "{table}"
    );
}
