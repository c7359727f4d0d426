//! Unit tests of the sweep: warnings of missed processes, the finding (what, why, traced back
//! to), the knee on collapsing, rising, dipping and flat curves, waits on each other.

use super::*;

fn level(c: u32, throughput: f64, mutex_share: f64) -> Level {
    let share = |name: &str, s: f64| Share {
        name: name.to_string(),
        count: 1,
        total_ns: (s * 1e9) as u64,
        avg_threads: s,
        share_of_thread_time: None,
    };
    Level {
        concurrency: c,
        throughput,
        scaling: 1.0,
        profile: String::new(),
        load_output: String::new(),
        wall_ns: 1_000_000_000,
        waits: 1,
        wait_ns: 0,
        lost_events: 0,
        kinds: vec![share("mutex", mutex_share), share("condvar", 0.5)],
        threads: vec![],
        top_sites: vec![share("row_lock;[kernel wait];[mutex]", mutex_share)],
        breakdown: None,
        processes: None,
        target_processes: None,
        missed_processes: None,
        commands: Vec::new(),
        why: None,
    }
}

/// A level that missed processes of its target is a warning, even when it recorded as many
/// processes as the target has (children forked under the load); one that recorded them
/// all, or cannot tell, is not.
#[test]
fn missed_processes_of_the_target_warn() {
    let mut partial = level(5, 100.0, 0.1);
    partial.processes = Some(1);
    partial.target_processes = Some(3);
    partial.missed_processes = Some(2);
    let mut replaced = level(50, 100.0, 0.1);
    replaced.processes = Some(3);
    replaced.target_processes = Some(3);
    replaced.missed_processes = Some(2);
    let mut whole = level(100, 100.0, 0.1);
    whole.processes = Some(4);
    whole.target_processes = Some(3);
    whole.missed_processes = Some(0);
    let unknown = level(150, 100.0, 0.1);
    let warnings = level_warnings(&[partial, replaced, whole, unknown]);
    assert_eq!(
        warnings,
        [
            "level 5 missed 2 of the 3 processes the target has: its waits are not the whole \
          server's (record the process tree: --tree, or its cgroup)",
            "level 50 missed 2 of the 3 processes the target has: its waits are not the \
          whole server's (record the process tree: --tree, or its cgroup)"
        ]
    );
}

/// With a bottleneck analysis at the knee and at the last level, the finding ends with what
/// `why` traces the working threads' time back to at both; without one it says nothing of it.
#[test]
fn finding_says_what_why_traces_back_to() {
    let why = |kind: &str, share: f64| LevelWhy {
        groups: vec!["one_connection*".to_string()],
        causes: vec![LevelCause {
            kind: kind.to_string(),
            stack: vec!["JOIN::exec".to_string(), "do_command".to_string()],
            call: None,
            share,
            threads: vec!["one_connection*".to_string()],
        }],
    };
    let mut levels = vec![
        level(1, 100.0, 0.1),
        level(5, 300.0, 0.2),
        level(50, 290.0, 0.9),
    ];
    fill_scaling(&mut levels);
    let knee = find_knee(&levels).expect("a knee");
    assert_eq!(knee.concurrency, 5);
    assert!(!finding(&levels, Some(&knee)).contains("lockscope why"));
    levels[1].why = Some(why("cpu", 0.4));
    levels[2].why = Some(why("cpu-saturation", 0.62));
    let sentence = finding(&levels, Some(&knee));
    assert!(
        sentence.ends_with(
            ". At the knee (concurrency 5), `lockscope why` traces 40% of the working \
             threads' time (one_connection*) to `cpu` at `JOIN::exec <- do_command`; at 50, \
             62% to `cpu-saturation` at `JOIN::exec <- do_command`."
        ),
        "{sentence}"
    );
    levels[1].why = None;
    let sentence = finding(&levels, Some(&knee));
    assert!(
        sentence.ends_with(
            ". At concurrency 50, `lockscope why` traces 62% of the working threads' time \
             (one_connection*) to `cpu-saturation` at `JOIN::exec <- do_command`."
        ),
        "{sentence}"
    );
}

/// The seed's MySQL on Mac OS X: 5 connections fell to 25% of one; the knee is level 1.
#[test]
fn collapse_from_the_first_level() {
    let mut levels = vec![level(1, 1000.0, 0.1), level(5, 250.0, 3.0)];
    fill_scaling(&mut levels);
    assert_eq!(levels[1].scaling, 0.25);
    let knee = find_knee(&levels).expect("a knee");
    assert_eq!(knee.concurrency, 1);
    let sentence = finding(&levels, Some(&knee));
    assert_eq!(
        sentence,
        "Throughput peaks at concurrency 1 and falls to 25% of it at 5; from 1 to 5, \
         `mutex` wait grows most (0.10 → 3.00 threads waiting on average), led by \
         `row_lock [mutex]`."
    );
}

/// Linux on the same machine rose to 180% at 5 and stayed there: the knee is 5.
#[test]
fn rise_then_flat() {
    let mut levels = vec![
        level(1, 100.0, 0.1),
        level(2, 150.0, 0.2),
        level(5, 180.0, 0.3),
        level(10, 182.0, 0.9),
    ];
    fill_scaling(&mut levels);
    let knee = find_knee(&levels).expect("a knee");
    assert_eq!(knee.concurrency, 5);
    let sentence = finding(&levels, Some(&knee));
    assert!(
        sentence.starts_with(
            "Throughput rises to 180% of concurrency 1 at 5, then stays flat (182% at 10); from 5 to 10, `mutex` wait grows most (0.30 → 0.90 threads waiting on average)"
        ),
        "{sentence}"
    );
}

/// A dip that recovers is not a knee (MariaDB on 2 CPUs: 578, 545, 1157, 1130 tps).
#[test]
fn dip_then_recovery() {
    let mut levels = vec![
        level(1, 578.0, 0.1),
        level(2, 545.0, 0.1),
        level(5, 1157.0, 0.1),
        level(10, 1130.0, 0.1),
    ];
    fill_scaling(&mut levels);
    assert_eq!(find_knee(&levels).map(|k| k.concurrency), Some(5));
}

/// Throughput that rises at every level has no knee.
#[test]
fn no_knee() {
    let mut levels = vec![level(1, 100.0, 0.1), level(2, 190.0, 0.1)];
    fill_scaling(&mut levels);
    assert_eq!(find_knee(&levels), None);
    assert!(finding(&levels, None).contains("so there is no knee"));
}

/// A breakdown whose threads spent `poll` of their time in poll-like calls, `program` of it
/// asleep until another thread of the program woke them and `outside` until a client did.
fn latch_breakdown(poll: f64, program: f64, outside: f64) -> Breakdown {
    let time = |name: &str, share: f64| ClassTime {
        name: name.to_string(),
        total_ns: (share * 1e10) as u64,
        avg_threads: share * 10.0,
        share_of_thread_time: share,
    };
    Breakdown {
        threads: 10,
        thread_ns: 10_000_000_000,
        avg_threads: 10.0,
        classes: TimeClass::ALL
            .iter()
            .map(|c| match c {
                TimeClass::Poll => time("poll", poll),
                TimeClass::OnCpu => time("on-cpu", 1.0 - poll),
                other => time(other.name(), 0.0),
            })
            .collect(),
        woken: vec![
            time("program", program),
            time("outside", outside),
            time("interrupt", 0.0),
        ],
        roles: vec![time("contention", program), time("idle", outside)],
        program_calls: vec![time("epoll_wait", program)],
    }
}

/// A process-per-connection database whose backends queue for one row in `epoll_wait` until
/// the lock's holder sets their latch: the finding says the threads wait on each other (the
/// share of their time asleep on the program grows most, mostly in `epoll_wait`), not that
/// poll grows; the same levels without who ended the sleeps fall back on the classes.
#[test]
fn finding_names_waits_on_each_other() {
    let mut levels = vec![level(1, 1000.0, 0.0), level(16, 700.0, 0.0)];
    levels[0].breakdown = Some(latch_breakdown(0.60, 0.05, 0.55));
    levels[1].breakdown = Some(latch_breakdown(0.86, 0.80, 0.06));
    fill_scaling(&mut levels);
    let knee = find_knee(&levels);
    let sentence = finding(&levels, knee.as_ref());
    assert!(
        sentence.ends_with(
            "of the threads' time, waiting on other threads of the program grows most \
             (5.0% → 80.0%, mostly in `epoll_wait`): the threads wait on each other."
        ),
        "{sentence}"
    );
    assert!(!sentence.contains("poll grows most"), "{sentence}");
    for level in &mut levels {
        if let Some(b) = level.breakdown.as_mut() {
            b.woken.clear();
            b.roles.clear();
        }
    }
    let old = finding(&levels, knee.as_ref());
    assert!(old.ends_with("poll grows most (60.0% → 86.0%)."), "{old}");
}
