//! The comparison of hand-made recordings: ranking, new and gone causes, the bases, causes
//! matched across backends and kernels, places told apart, the JSON's shape.

use super::kernel_lock::lock_entry;
use super::rank::name_places;
use super::*;
use lockscope_probes::bottleneck::{
    Blame, BottleneckAnalysis, Root, RootKind, ThreadRef, WaitPart, WokenBy,
};
use lockscope_probes::{AddressSpace, Frame, Stack, ThreadInfo, ThreadTime, TimeClass};

const MS: u64 = 1_000_000;
/// Each worker's wall time.
const WALL: u64 = 1_000 * MS;

/// What one hand-made recording of two workers holds: the time their lock waits ended in
/// the holder's critical section on a CPU, in its backoff sleep (a `sleep` others waited on)
/// and in its `fsync` (`io`); recorded by the eBPF backend, or by DTrace on macOS (its
/// frames as ``module`symbol+0x..``).
#[derive(Clone, Copy)]
struct Recording {
    critical_ns: u64,
    sleep_ns: u64,
    io_ns: u64,
    dtrace: bool,
}

const BASE: Recording = Recording {
    critical_ns: 300 * MS,
    sleep_ns: 100 * MS,
    io_ns: 0,
    dtrace: false,
};

fn stack(dtrace: bool, frames: &[(&str, &str)]) -> Stack {
    Stack {
        space: AddressSpace::User,
        frames: frames
            .iter()
            .enumerate()
            .map(|(i, (module, function))| Frame {
                function: Some(if dtrace {
                    format!("{module}`{function}+0x{:x}", 16 * (i + 1))
                } else {
                    function.to_string()
                }),
                ..Frame::unsymbolized(0x1000 + i as u64)
            })
            .collect(),
        truncated: false,
    }
}

/// The recording's four user stacks: a worker's lock wait (0), the holder's unlock (1), its
/// backoff sleep (2) and its log's fsync (3).
fn stacks(dtrace: bool) -> Vec<Stack> {
    let (libc, unlock, wake) = if dtrace {
        (
            "libsystem_pthread.dylib",
            "pthread_mutex_unlock",
            "__psynch_mutexdrop",
        )
    } else {
        ("libc.so.6", "___pthread_mutex_unlock", "__lll_lock_wake")
    };
    vec![
        // 0: a worker waits for the lock.
        stack(
            dtrace,
            &[
                (libc, "__lll_lock_wait"),
                (libc, "pthread_mutex_lock"),
                ("app", "worker_loop"),
            ],
        ),
        // 1: the holder unlocks, ending its critical section.
        stack(
            dtrace,
            &[
                (libc, wake),
                (libc, unlock),
                ("app", "critical_section"),
                ("app", "worker_loop"),
            ],
        ),
        // 2: the holder sleeps in its backoff.
        stack(
            dtrace,
            &[
                (libc, "clock_nanosleep"),
                ("app", "backoff"),
                ("app", "worker_loop"),
            ],
        ),
        // 3: the holder syncs its log.
        stack(
            dtrace,
            &[
                (libc, "fsync"),
                ("app", "flush_log"),
                ("app", "worker_loop"),
            ],
        ),
    ]
}

fn profile(r: Recording) -> Profile {
    let stacks = stacks(r.dtrace);
    let (w1, w2) = (ThreadRef { pid: 1, tid: 2 }, ThreadRef { pid: 1, tid: 3 });
    let blame = |kind: RootKind, call: Option<&str>, root_stack: u32, total_ns: u64| Blame {
        thread: w1,
        part: WaitPart::Asleep,
        call: Some("futex".to_string()),
        object: 0x5000,
        user_stack: Some(0),
        kernel_stack: None,
        woken_by: Some(WokenBy::Program),
        waker: Some(w2),
        root: Root {
            kind,
            thread: w2,
            call: call.map(str::to_string),
            user_stack: Some(root_stack),
            kernel_stack: None,
            woken_by: (kind == RootKind::Blocked).then_some(WokenBy::Interrupt),
            waker_name: None,
            holder: None,
            holder_name: None,
        },
        depth: 1,
        chain: Vec::new(),
        waits: 10,
        total_ns,
    };
    let records = [
        (RootKind::Cpu, None, 1, r.critical_ns),
        (RootKind::Blocked, Some("clock_nanosleep"), 2, r.sleep_ns),
        (RootKind::Blocked, Some("fsync"), 3, r.io_ns),
    ];
    let waits_ns = r.critical_ns + r.sleep_ns + r.io_ns;
    let times = |t: ThreadRef, on_cpu: u64| ThreadTime {
        pid: t.pid,
        tid: t.tid,
        wall_ns: WALL,
        time_ns: [(TimeClass::OnCpu, on_cpu)].into_iter().collect(),
        voluntary_switches: 10,
        involuntary_switches: 0,
        woken_ns: Default::default(),
    };
    let mut profile = Profile {
        threads: [w1, w2]
            .iter()
            .map(|t| ThreadInfo {
                pid: t.pid,
                tid: t.tid,
                name: format!("worker-{}", t.tid - 1),
            })
            .collect(),
        stacks,
        // The waiting worker's other time, and all of the holder's, on a CPU.
        thread_times: vec![times(w1, WALL - waits_ns), times(w2, WALL)],
        bottleneck: Some(BottleneckAnalysis {
            max_depth: 10,
            history_ns: 10_000 * MS,
            intervals: 30,
            blame: records
                .into_iter()
                .filter(|r| r.3 > 0)
                .map(|(kind, call, at, ns)| blame(kind, call, at, ns))
                .collect(),
            ..BottleneckAnalysis::default()
        }),
        ..Profile::default()
    };
    profile.metadata.target.command = vec!["app".to_string()];
    profile.metadata.duration_ns = WALL;
    profile.metadata.backend = if r.dtrace { "dtrace" } else { "ebpf" }.to_string();
    profile.metadata.os = if r.dtrace { "macos" } else { "linux" }.to_string();
    profile
}

fn compare(base: Recording, other: Recording, basis: Basis) -> WhyDiff {
    let mut options = WhyDiffOptions::default();
    options.why.threads = Some("worker-*".to_string());
    options.basis = basis;
    options.top = 0;
    WhyDiff::build(
        &profile(base),
        &profile(other),
        ("a.lsp", "b.lsp"),
        &options,
    )
    .expect("comparable")
}

fn change(diff: &WhyDiff, kind: CauseKind) -> &CauseChange {
    diff.changes
        .iter()
        .find(|c| c.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} change in {diff:#?}"))
}

/// The critical section that grows from 300 ms to 900 ms of the workers' 2 s ranks first,
/// at its own frame, with the 30 points it grew; the backoff sleep that stayed is last, and
/// the workers' own CPU time lost what the cause gained: it explains all the time that moved.
#[test]
fn the_grown_cause_ranks_first() {
    let other = Recording {
        critical_ns: 900 * MS,
        ..BASE
    };
    let diff = compare(BASE, other, Basis::PerThreadSecond);
    let first = &diff.changes[0];
    assert_eq!(
        (first.kind, first.status, first.place.as_str()),
        (
            ChangeKind::Cause(CauseKind::Cpu),
            ChangeStatus::Grew,
            "critical_section"
        )
    );
    assert_eq!(
        first.stack,
        ["pthread_mutex_unlock", "critical_section", "worker_loop"]
    );
    assert_eq!((first.base.share, first.other.share), (0.15, 0.45));
    assert!((first.delta_share - 0.30).abs() < 1e-9, "{first:?}");
    assert_eq!(first.explains, Some(1.0));
    let sleep = change(&diff, CauseKind::Sleep);
    assert_eq!((sleep.rank, sleep.status), (2, ChangeStatus::Same));
    assert_eq!(sleep.call.as_deref(), Some("clock_nanosleep"));
    let on_cpu = &diff.rest[0];
    assert_eq!(on_cpu.part, "on-cpu");
    assert_eq!(on_cpu.explains, Some(-1.0));
    assert_eq!(diff.difference.delta, 0.0);
}

/// A cause on one side only is `new` (the fsync) or `gone` (the backoff sleep), with zeros
/// on the side without it and its place from the side with it.
#[test]
fn new_and_gone_causes() {
    let other = Recording {
        sleep_ns: 0,
        io_ns: 250 * MS,
        ..BASE
    };
    let diff = compare(BASE, other, Basis::PerThreadSecond);
    let io = change(&diff, CauseKind::Io);
    assert_eq!(
        (io.status, io.place.as_str()),
        (ChangeStatus::New, "flush_log")
    );
    assert_eq!((io.base.total_ns, io.other.total_ns), (0, 250 * MS));
    assert_eq!(io.rank, 1, "{diff:#?}");
    let sleep = change(&diff, CauseKind::Sleep);
    assert_eq!(
        (sleep.status, sleep.place.as_str()),
        (ChangeStatus::Gone, "backoff")
    );
    assert_eq!((sleep.base.waits, sleep.other.waits), (10, 0));
    assert!(sleep.delta_share < 0.0);
    assert_eq!(diff.changes_total, 3);
}

/// Per operation, the same recording with half the operations costs twice the thread time
/// per operation: each cause's delta is its time over the base's count, and its part of the
/// net difference is its share of the threads' time.
#[test]
fn per_operation_normalisation() {
    let diff = compare(
        BASE,
        BASE,
        Basis::PerOperation {
            ops_base: 1000,
            ops_other: 500,
        },
    );
    assert_eq!(diff.basis.unit, "ns/op");
    assert_eq!(diff.basis.explains_of, "net");
    // 2 s of thread time per 1000 and per 500 operations.
    assert_eq!(
        (diff.difference.base, diff.difference.other),
        (2_000_000.0, 4_000_000.0)
    );
    let cpu = change(&diff, CauseKind::Cpu);
    assert_eq!(
        (cpu.base.normalized, cpu.other.normalized),
        (300_000.0, 600_000.0)
    );
    assert_eq!(cpu.delta_normalized, 300_000.0);
    assert_eq!(cpu.status, ChangeStatus::Grew);
    assert_eq!(cpu.explains, Some(0.15));
    assert_eq!(cpu.delta_share, 0.0);
    assert_eq!(diff.other.operations, Some(500));
    let text = diff.to_text();
    assert!(
        text.contains("each took 2.00 ms of the analysed threads' time in base, 4.00 ms"),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    let err = WhyDiff::build(
        &profile(BASE),
        &profile(BASE),
        ("a.lsp", "b.lsp"),
        &WhyDiffOptions {
            basis: Basis::PerOperation {
                ops_base: 0,
                ops_other: 5,
            },
            ..WhyDiffOptions::default()
        },
    )
    .expect_err("no operations");
    assert_eq!(
        err.to_string(),
        "invalid operation counts 0,5: both must be at least 1"
    );
}

/// A macOS DTrace recording (frames as ``module`symbol+0x..``, walked by frame pointers)
/// matches the Linux one's causes at their first canonical frame: the critical section
/// grew, nothing is new or gone.
#[test]
fn causes_match_across_backends() {
    let other = Recording {
        critical_ns: 600 * MS,
        dtrace: true,
        ..BASE
    };
    let diff = compare(BASE, other, Basis::PerThreadSecond);
    assert_eq!(diff.matched_at, "leaf");
    assert!(
        diff.changes
            .iter()
            .all(|c| !matches!(c.status, ChangeStatus::New | ChangeStatus::Gone)),
        "{diff:#?}"
    );
    let cpu = &diff.changes[0];
    assert_eq!(
        (cpu.kind, cpu.status),
        (ChangeKind::Cause(CauseKind::Cpu), ChangeStatus::Grew)
    );
    assert_eq!(cpu.stack, ["pthread_mutex_unlock"]);
    assert_eq!(cpu.other.stack[2], "app`critical_section+0x30");
    assert!(
        diff.warnings
            .iter()
            .any(|w| w.contains("stack depth differs")),
        "{:?}",
        diff.warnings
    );
}

/// The JSON: its schema and version, the basis, both sides, and each change with kind,
/// canonical stack, kernel stack, place, both sides' shares and the deltas, largest first.
#[test]
fn json_shape() {
    let other = Recording {
        critical_ns: 800 * MS,
        io_ns: 50 * MS,
        ..BASE
    };
    let json = serde_json::to_value(compare(BASE, other, Basis::PerThreadSecond)).expect("json");
    assert_eq!(json["schema"], "lockscope-why-diff");
    assert_eq!(json["version"], WHY_DIFF_JSON_VERSION);
    assert_eq!(json["basis"]["mode"], "per-thread-second");
    assert_eq!(json["base"]["path"], "a.lsp");
    assert_eq!(json["other"]["wall_ns"], 2 * WALL);
    let changes = json["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 3);
    let first = &changes[0];
    assert_eq!(first["kind"], "cpu");
    assert_eq!(first["where"], "critical_section");
    assert!(first["stack"].is_array() && first["kernel_stack"].is_array());
    assert_eq!(first["base"]["share"], 0.15);
    assert_eq!(first["other"]["share"], 0.4);
    assert_eq!(first["delta_share"], 0.25);
    assert_eq!(changes[1]["kind"], "io");
    assert_eq!(changes[1]["status"], "new");
    let deltas: Vec<f64> = changes
        .iter()
        .map(|c| c["delta_normalized"].as_f64().expect("delta").abs())
        .collect();
    assert!(deltas.windows(2).all(|w| w[0] >= w[1]), "{deltas:?}");
}

/// Per second of recording, a recording twice as long with the same causes has half their
/// nanoseconds per second: every cause shrank while their shares stayed, and no part grew,
/// so no time moved and nothing is explained.
#[test]
fn per_second_normalisation() {
    let mut long = profile(BASE);
    long.metadata.duration_ns = 2 * WALL;
    let mut options = WhyDiffOptions::default();
    options.why.threads = Some("worker-*".to_string());
    options.basis = Basis::PerSecond;
    let diff =
        WhyDiff::build(&profile(BASE), &long, ("a.lsp", "b.lsp"), &options).expect("comparable");
    assert_eq!(diff.basis.unit, "ns/s");
    let cpu = change(&diff, CauseKind::Cpu);
    assert_eq!(
        (cpu.base.normalized, cpu.other.normalized),
        (300_000_000.0, 150_000_000.0)
    );
    assert_eq!((cpu.status, cpu.delta_share), (ChangeStatus::Shrank, 0.0));
    assert_eq!(diff.difference.moved, 0.0);
    assert_eq!(cpu.explains, None);
}

/// A kernel lock's change is keyed by where the kernel was entered to take it: 6.1's fault
/// path through `lock_mm_and_find_vma` and 5.10's straight from `do_user_addr_fault` are one
/// mechanism; a path cut short falls back on its first caller past the lock's entry points.
#[test]
fn kernel_locks_match_by_entry() {
    let lock = |frames: &[&str]| KernelLock {
        lock: "rwsem",
        stack: frames.iter().map(|f| f.to_string()).collect(),
        slept: "waits",
        total_ns: 1,
    };
    let new = lock(&[
        "rwsem_down_read_slowpath",
        "down_read_killable",
        "lock_mm_and_find_vma",
        "do_user_addr_fault",
        "exc_page_fault",
        "asm_exc_page_fault",
    ]);
    let old = lock(&[
        "rwsem_down_read_slowpath",
        "down_read",
        "do_user_addr_fault.constprop.0",
        "exc_page_fault",
    ]);
    assert_eq!(lock_entry(&new), Some("exc_page_fault".to_string()));
    assert_eq!(lock_entry(&new), lock_entry(&old));
    let unmap = lock(&[
        "rwsem_down_write_slowpath",
        "down_write_killable",
        "__vm_munmap",
    ]);
    assert_eq!(lock_entry(&unmap), Some("__vm_munmap".to_string()));
    let syscall = lock(&[
        "rwsem_down_write_slowpath",
        "__vm_munmap",
        "__x64_sys_munmap",
    ]);
    assert_eq!(lock_entry(&syscall), Some("__x64_sys_munmap".to_string()));
}

/// A change's place is its telling frame, past the plumbing; with the frame's caller when
/// another change of its kind shows the same frame.
#[test]
fn places_are_told_apart() {
    let names = |frames: &[&str]| frames.iter().map(|f| f.to_string()).collect::<Vec<_>>();
    let change = |kind: CauseKind, frames: &[&str]| CauseChange {
        rank: 0,
        kind: ChangeKind::Cause(kind),
        status: ChangeStatus::New,
        stack: Vec::new(),
        kernel_stack: Vec::new(),
        release_stack: Vec::new(),
        kernel_lock: None,
        call: None,
        place: String::new(),
        base: CauseSide::default(),
        other: CauseSide {
            total_ns: 1,
            stack: names(frames),
            ..CauseSide::default()
        },
        delta_share: 0.0,
        delta_normalized: 0.0,
        explains: None,
    };
    let mut changes = vec![
        change(CauseKind::Cpu, &["spin", "critical_section", "worker"]),
        change(CauseKind::Cpu, &["spin", "outside_work", "worker"]),
        change(CauseKind::CpuSaturation, &["spin", "outside_work"]),
        change(
            CauseKind::Sleep,
            &["__GI___clock_nanosleep", "std::thread::sleep", "backoff"],
        ),
        change(CauseKind::Unknown, &[]),
    ];
    name_places(&mut changes);
    let places: Vec<&str> = changes.iter().map(|c| c.place.as_str()).collect();
    assert_eq!(
        places,
        [
            "spin <- critical_section",
            "spin <- outside_work",
            "spin",
            "backoff",
            "[no stack]"
        ]
    );
}

/// A side without the bottleneck analysis is named, with what to record.
#[test]
fn a_side_without_bottleneck_is_named() {
    let err = WhyDiff::build(
        &profile(BASE),
        &Profile::default(),
        ("a.lsp", "b.lsp"),
        &WhyDiffOptions::default(),
    )
    .expect_err("no bottleneck analysis");
    let text = err.to_string();
    assert!(
        text.starts_with("`b.lsp` (other): this profile has no bottleneck analysis")
            && text.contains("--probes bottleneck"),
        "{text}"
    );
}

/// A wait for a CPU keeps its scheduler part: who held the CPU (the other worker, preempting
/// the first), with the waits it was cut into on each side: the same time in twice the waits,
/// as a scheduler with a slice half as long cuts it.
#[test]
fn the_cpu_holders_are_kept() {
    let preempted = |waits: u64| {
        let mut p = profile(BASE);
        let analysis = p.bottleneck.as_mut().expect("bottleneck analysis");
        let mut b = analysis.blame[0].clone();
        b.part = WaitPart::Runnable;
        b.call = None;
        b.woken_by = None;
        b.waker = None;
        b.root.kind = RootKind::CpuSaturation;
        b.root.thread = b.thread;
        b.root.call = None;
        b.root.user_stack = None;
        b.root.woken_by = None;
        b.root.holder = Some(ThreadRef { pid: 1, tid: 3 });
        b.waits = waits;
        b.total_ns = 200 * MS;
        analysis.blame.push(b);
        p
    };
    let mut options = WhyDiffOptions::default();
    options.why.threads = Some("worker-*".to_string());
    let diff = WhyDiff::build(&preempted(10), &preempted(20), ("a.lsp", "b.lsp"), &options)
        .expect("comparable");
    let saturation = change(&diff, CauseKind::CpuSaturation);
    for (side, waits) in [(&saturation.base, 10), (&saturation.other, 20)] {
        assert_eq!(side.waits, waits, "{saturation:#?}");
        assert_eq!(side.total_ns, 200 * MS, "{saturation:#?}");
        let holders: Vec<(&str, u64)> = side
            .holders
            .iter()
            .map(|h| (h.name.as_str(), h.total_ns))
            .collect();
        assert_eq!(holders, [("worker-*", 200 * MS)], "{saturation:#?}");
    }
    let json = serde_json::to_value(&diff).expect("json");
    let in_json = json["changes"]
        .as_array()
        .and_then(|changes| changes.iter().find(|c| c["kind"] == "cpu-saturation"))
        .expect("the cpu-saturation change in the JSON");
    assert_eq!(
        in_json["other"]["holders"][0]["name"], "worker-*",
        "{json:#}"
    );
    assert!(diff
        .to_text()
        .contains("the CPUs meanwhile held by worker-* (200 ms)"));
}
