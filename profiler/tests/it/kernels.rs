//! The kernel matrix: every eBPF probe on the kernels people run, the Debian series listed in
//! `.ci/kernels` (booted under QEMU by `.ci/kernel-vm`) and this machine's own, each checked with
//! the demo's known answer. `kernel-checks.sh` (beside this file) runs on the kernel; this file
//! judges what it left: `lockscope probes` must say of each probe what `record` then does with
//! it, every probe must load except where the kernel lacks its hooks, the futex and offcpu probes
//! must measure the demo's waits as its threads measured them, the futex probe's on complete
//! stacks, and the cpu probe the CPU time of its spinning and computing threads, on complete
//! stacks. Each kernel's results are kept under `target/tmp/kernel-matrix/KERNEL/` with a
//! `summary.txt` that `.ci/kernel-table` turns into the README's table.
//!
//! Each guest also runs the comparison step: the known-answer programs of [`COMPARED`] (per-VMA
//! page-fault locks, Linux 6.4; EEVDF's slice, 6.6), each alone and recorded with the probe set
//! `why` records with; [`kernel_6_1_against_6_12`] then asks `lockscope why` of the 6.1 and 6.12
//! recordings of the first which change in causes makes the difference,
//! [`kernel_5_10_against_6_1`] the same of 5.10 and 6.1 (rwsem reader spinning, removed in 5.11),
//! and [`kernel_6_1_against_6_12_preemption`] of the second how the scheduler cut the spinners'
//! waits, from the boots the per-series tests already made.
//!
//! The QEMU kernels take minutes each: the tests are ignored by a plain `cargo test` and run by
//! `.ci/run` (as root, with `--include-ignored`).

use crate::common;

use common::*;
use lockscope_probes::catalog::{BOTTLENECK, CPU, FUTEX, KLOCK, OFFCPU};
use lockscope_probes::{read_profile, AttachStatus, Profile, CATALOG};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The probes of the eBPF backend (the catalog's), as the checks record them one by one.
fn probes() -> impl Iterator<Item = &'static str> {
    CATALOG.iter().map(|probe| probe.name)
}

/// What `kernel-checks.sh` is told of the catalog besides the names `lockscope probes --names`
/// gives it: the probe `--frequency` samples with, the probe whose hooks need tracefs, and the
/// probe set `why` records with.
const CHECK_PROBES: [(&str, &str); 3] = [
    ("SAMPLED_PROBE", CPU.name),
    ("TRACEFS_PROBE", FUTEX.name),
    ("PROBE_SET", BOTTLENECK.name),
];

/// The name of the check recording the [`FUTEX`] probe without tracefs (`TRACEFS_PROBE`).
fn notracefs() -> String {
    format!("{}-notracefs", FUTEX.name)
}

/// The known-answer programs of the comparison step (`tests/programs/`, without `.c`) and their
/// arguments.
const COMPARED: [(&str, &str); 2] = [VMA_FAULT, PREEMPT_SLICE];

/// Two threads faulting pages while a third maps, unmaps and changes protections (per-VMA
/// page-fault locks, Linux 6.4).
const VMA_FAULT: (&str, &str) = ("vma_fault", "--duration 2");

/// Two threads computing on one CPU, preempted by turns (CFS's period against EEVDF's slice,
/// Linux 6.6).
const PREEMPT_SLICE: (&str, &str) = ("preempt_slice", "--duration 2");

/// How long one guest may take, boot to power-off (the checks take 1-4 minutes under TCG).
const GUEST_TIMEOUT_SECS: &str = "1500";

/// The tests of the Debian kernel series, one per series of `.ci/kernels` (the matrix's list, read
/// by the scripts that boot, benchmark and tabulate them), named for it: `kernel_5_10` for 5.10,
/// the name `.ci/run` skips it by. [`guest_tests_are_the_ci_list`] fails when the two disagree.
macro_rules! guest_kernels {
    ($($(#[doc = $doc:literal])* $test:ident = $series:literal, ignore = $why:literal;)*) => {
        /// Each guest test's name and its series, in `.ci/kernels`' order.
        const GUEST_TESTS: &[(&str, &str)] = &[$((stringify!($test), $series)),*];

        $(
            $(#[doc = $doc])*
            #[test]
            #[ignore = $why]
            fn $test() {
                check_kernel(Kernel::Guest($series));
            }
        )*
    };
}

guest_kernels! {
    /// The known answers under Debian's 5.10 (bullseye), booted in QEMU: no bpf_loop,
    /// bpf_find_vma or lock contention tracepoints.
    kernel_5_10 = "5.10",
        ignore = "boots Debian's 5.10 kernel under QEMU for minutes; .ci/run runs it as root";
    /// The known answers under Debian's 6.1 (bookworm, the README's system), booted in QEMU.
    kernel_6_1 = "6.1",
        ignore = "boots Debian's 6.1 kernel under QEMU for minutes; .ci/run runs it as root";
    /// The known answers under Debian's 6.12 (bookworm-backports), booted in QEMU.
    kernel_6_12 = "6.12",
        ignore = "boots Debian's 6.12 kernel under QEMU for minutes; .ci/run runs it as root";
}

/// The guest tests above are `.ci/kernels`' series, in its order, each named for its series
/// (`kernel_` and the series with `_` for `.`).
#[test]
fn guest_tests_are_the_ci_list() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/kernels");
    let list = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let series: Vec<&str> = list
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let tested: Vec<&str> = GUEST_TESTS.iter().map(|(_, series)| *series).collect();
    assert_eq!(
        tested,
        series,
        "the kernel tests of {} and the series of {}",
        file!(),
        path.display()
    );
    for (test, series) in GUEST_TESTS {
        assert_eq!(
            *test,
            format!("kernel_{}", series.replace('.', "_")),
            "the test of {series}"
        );
    }
}

/// This machine's kernel, with the same checks (tracefs as the machine has it).
#[test]
#[ignore = "needs root with BPF; .ci/run runs it"]
fn kernel_host() {
    if !bpf_available("kernel_host") {
        return;
    }
    check_kernel(Kernel::Host);
}

/// Where the checks run.
#[derive(Clone, Copy)]
enum Kernel {
    /// A Debian kernel series under QEMU.
    Guest(&'static str),
    /// This machine.
    Host,
}

impl Kernel {
    fn name(self) -> &'static str {
        match self {
            Kernel::Guest(series) => series,
            Kernel::Host => "host",
        }
    }

    /// How far the cpu probe's CPU time of a demo thread may be from the thread's own CPU clock.
    /// A sample weighs the CPU time the kernel charged its thread since its previous sample, so
    /// the samples of a thread stand for its clock but for the time after its last sample (and
    /// one period for its first). Under emulation samples are few and far apart: QEMU's TCG runs
    /// both vCPUs on one thread, a stopped vCPU's guest clock runs on and the sampling hrtimer
    /// skips the periods it missed (one CI run gave the spinner 34 samples for 326.8 ms of its
    /// clock), so that time, up to the gap between two samples, is a larger share than on the
    /// host.
    fn on_cpu_tolerance(self) -> f64 {
        match self {
            Kernel::Guest(_) => 0.3,
            Kernel::Host => ON_CPU_TOLERANCE,
        }
    }
}

/// The results of the checks on `kernel`, run once per test process: the per-series tests and
/// the comparisons ([`kernel_6_1_against_6_12`], ...) share one boot (a second caller waits for
/// the first's). With `LOCKSCOPE_MATRIX_REUSE=1`, a kernel's results left by an earlier run are
/// judged again without booting it (for work on the judging; CI never sets it).
fn checks_of(kernel: Kernel) -> PathBuf {
    let kept = results_dir(kernel);
    if std::env::var_os("LOCKSCOPE_MATRIX_REUSE").is_some_and(|v| v == "1")
        && kept.join("kernel").exists()
    {
        return kept;
    }
    static RUNS: Mutex<BTreeMap<&'static str, &'static OnceLock<PathBuf>>> =
        Mutex::new(BTreeMap::new());
    let once: &'static OnceLock<PathBuf> = RUNS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .entry(kernel.name())
        .or_insert_with(|| Box::leak(Box::default()));
    once.get_or_init(|| run_checks(kernel)).clone()
}

/// Runs the checks on `kernel` and judges their results.
fn check_kernel(kernel: Kernel) {
    let out = checks_of(kernel);
    let results = Results::read(&out);
    assert_eq!(results.rc("probes"), 0, "{}", results.text("probes.txt"));
    let mut summary = vec![
        format!("kernel {}", results.text("kernel").trim()),
        format!("programs {}", results.programs()),
    ];

    // `probes` and `record` agree, and every probe loads unless the kernel lacks its hooks.
    let verdicts = results.probe_verdicts();
    for probe in probes() {
        let (verdict, why) = verdicts.get(probe).unwrap_or_else(|| {
            panic!(
                "`lockscope probes` lists no {probe}:\n{}",
                results.text("probes.txt")
            )
        });
        let rc = results.rc(probe);
        match verdict.as_str() {
            "loads" => {
                assert_eq!(
                    rc,
                    0,
                    "{probe}: `probes` says it loads, `record` failed:\n{}",
                    results.log(probe)
                );
                let profile = results.profile(probe);
                let status = attach_status(&profile, probe);
                assert!(
                    !matches!(status, AttachStatus::Failed { .. }),
                    "{probe}: `probes` says it loads, `record` says {status:?}"
                );
            }
            "absent" => {
                // Only a probe whose kernel hooks are missing may be absent: klock, before
                // the lock contention tracepoints (Linux 5.19).
                assert_eq!(probe, KLOCK.name, "{probe} absent: {why}");
                assert_ne!(
                    rc, 0,
                    "{probe} absent, yet `record --probes {probe}` succeeded"
                );
                let log = results.log(probe);
                assert!(
                    log.contains("no probe attached") && log.contains("absent"),
                    "{probe}: record's error should say it is absent:\n{log}"
                );
            }
            other => panic!("{probe} {other} on {}: {why}", kernel.name()),
        }
        summary.push(format!("probe {probe} {verdict}"));
    }

    // The demo's known answer, on complete stacks, from the futex and offcpu probes. No event
    // may be lost. One or two user stacks of the demo's other waits (its threads' start and
    // exit) may fail under emulation: one did once in 6.1 (a fresh-clone CI run, 2026-12-05),
    // whose cause the profile, not kept, would have said; the log below has the unwinder's
    // counts. The known answer's own waits must have complete stacks (assert_demo_answer), so a
    // broken unwinder still fails here.
    let futex = results.profile(FUTEX.name);
    let losses = &futex.metadata.losses;
    assert!(
        losses.lost_events() == 0
            && losses.kernel_stack_failures == 0
            && losses.user_stack_failures <= 2,
        "futex losses: {losses:?}\n{}",
        results.log(FUTEX.name)
    );
    assert_demo_answer(&futex, FUTEX.name, &results.log(FUTEX.name));
    // The offcpu probe's stacks are taken as the waits begin, in the demo's first milliseconds,
    // before its process table exists: its libc frames are then found through the VMA, which
    // bpf_find_vma cannot lock while the demo's threads are being created (one stack in a few
    // runs is cut there). Their share is in the summary; the waits themselves must be exact.
    let offcpu = results.profile(OFFCPU.name);
    assert_demo_waits(&offcpu, OFFCPU.name, &results.log(OFFCPU.name));
    for (probe, profile) in [(FUTEX.name, &futex), (OFFCPU.name, &offcpu)] {
        summary.push(format!("stacks {probe} {}", complete_share(profile, probe)));
    }
    // The cpu probe's samples interrupt the demo's spinner and cruncher (a perf_event program,
    // in the unwinder's interrupt slot): their CPU time as their own clocks measured it.
    let cpu = results.profile(CPU.name);
    assert_demo_on_cpu(&cpu, &results.log(CPU.name), kernel.on_cpu_tolerance());
    summary.push(format!(
        "stacks {} {}",
        CPU.name,
        complete_share(&cpu, CPU.name)
    ));

    // All probes at once: each attaches as it did alone, and futex still measures the demo.
    assert_eq!(results.rc("all"), 0, "all probes:\n{}", results.log("all"));
    let all = results.profile("all");
    for probe in probes() {
        let alone = &verdicts[probe].0;
        let status = attach_status(&all, probe);
        assert_eq!(
            alone == "loads",
            !matches!(status, AttachStatus::Failed { .. }),
            "{probe} with the others: {status:?}, alone: {alone}"
        );
    }
    // The stacks too: mutex-hold's uretprobes replace return addresses in libc's lock path
    // with their trampoline's, which the unwinder must see through.
    assert_demo_answer(&all, FUTEX.name, &results.log("all"));
    assert_demo_on_cpu(&all, &results.log("all"), kernel.on_cpu_tolerance());

    // The bottleneck analysis (--probes bottleneck): the mutex waiters' time ends in the main
    // thread's sleep under the order lock, with nothing lost from the stream.
    assert_eq!(
        results.rc(BOTTLENECK.name),
        0,
        "{}",
        results.log(BOTTLENECK.name)
    );
    let bottleneck = results.profile(BOTTLENECK.name);
    let bottleneck = bottleneck
        .bottleneck
        .as_ref()
        .expect("the bottleneck analysis");
    assert_eq!(bottleneck.lost_intervals, 0, "{bottleneck:?}");
    assert_demo_waits_end_in_the_hold(
        &results.dir.join(format!("{}.lsp", BOTTLENECK.name)),
        &results.log(BOTTLENECK.name),
    );

    // Without tracefs, the futex probe falls back on the generic system call hooks.
    if let Kernel::Guest(_) = kernel {
        assert_eq!(results.rc(&notracefs()), 0, "{}", results.log(&notracefs()));
        let profile = results.profile(&notracefs());
        let hook = &profile
            .metadata
            .probes
            .iter()
            .find(|p| p.probe == FUTEX.name)
            .expect("futex in the metadata")
            .hook;
        assert!(
            hook.contains("sys_enter") && !hook.contains("tracepoint/syscalls"),
            "hooks without tracefs: {hook}"
        );
        assert_demo_answer(&profile, FUTEX.name, &results.log(&notracefs()));
        let with = &futex.metadata.probes[0].hook;
        assert!(
            with.contains("tracepoint/syscalls"),
            "hooks with tracefs: {with}"
        );
    }

    // The comparison step ran; its programs' own numbers, alone, and its time go to the summary.
    if let Kernel::Guest(_) = kernel {
        let faults = FaultNumbers::read(&results, VMA_FAULT.0);
        summary.push(format!(
            "compare {} {:.0} faults/s per faulter, {:.2} sleeps per 1000 faults ({} sleeps)",
            VMA_FAULT.0, faults.per_faulter_per_s, faults.sleeps_per_1000, faults.sleeps
        ));
        let slices = SliceNumbers::read(&results, PREEMPT_SLICE.0);
        summary.push(format!(
            "compare {} {:.1} preemptions/s per spinner, {:.2} ms waiting each, {:.2} per tick \
             ({} ticks)",
            PREEMPT_SLICE.0,
            slices.per_spinner_per_s,
            slices.ms_per_preemption,
            slices.per_tick,
            slices.ticks
        ));
        for (name, _) in COMPARED {
            summary.push(format!(
                "compare {name} step {:.1} s",
                results.step_seconds(name)
            ));
        }
    }

    std::fs::write(out.join("summary.txt"), summary.join("\n") + "\n").expect("write summary.txt");
}

/// What [`VMA_FAULT`] measured of itself when it ran alone (`NAME.plain.txt`).
#[derive(Debug)]
struct FaultNumbers {
    /// Minor faults per second of each faulter thread, averaged.
    per_faulter_per_s: f64,
    /// The faulters' voluntary context switches (sleeps) per 1000 faults.
    sleeps_per_1000: f64,
    /// Those sleeps, all faulters.
    sleeps: u64,
}

impl FaultNumbers {
    /// Parses the program's `faults:` line and its `faulter-N:` lines.
    fn read(results: &Results, name: &str) -> FaultNumbers {
        let text = results.plain_output(name);
        let total = text
            .lines()
            .find(|l| l.starts_with("faults: "))
            .unwrap_or_else(|| panic!("no faults line in {name}'s output:\n{text}"));
        let sleeps = text
            .lines()
            .filter(|l| l.starts_with("faulter-"))
            .map(|l| number_after(l, "), ") as u64)
            .sum();
        FaultNumbers {
            per_faulter_per_s: number_after(total, "faults: "),
            sleeps_per_1000: number_after(total, "sleeps: "),
            sleeps,
        }
    }
}

/// What [`PREEMPT_SLICE`] measured of itself when it ran alone (`NAME.plain.txt`): the
/// kernel's counts of its spinners' preemptions and waits for the CPU.
#[derive(Debug)]
struct SliceNumbers {
    /// Preemptions per second of each spinner, averaged.
    per_spinner_per_s: f64,
    /// The spinners' time in the run queue per preemption, milliseconds.
    ms_per_preemption: f64,
    /// Preemptions per tick of their CPU.
    per_tick: f64,
    /// The ticks their CPU took.
    ticks: u64,
}

impl SliceNumbers {
    /// Parses the program's `preemptions:` line.
    fn read(results: &Results, name: &str) -> SliceNumbers {
        let text = results.plain_output(name);
        let line = text
            .lines()
            .find(|l| l.starts_with("preemptions: "))
            .unwrap_or_else(|| panic!("no preemptions line in {name}'s output:\n{text}"));
        SliceNumbers {
            per_spinner_per_s: number_after(line, "preemptions: "),
            ms_per_preemption: number_after(line, "/s per spinner, "),
            per_tick: number_after(line, "waiting per preemption, "),
            ticks: number_after(line, "per tick (") as u64,
        }
    }
}

/// The number that follows `after` in `line`, up to a space or a `/`.
fn number_after(line: &str, after: &str) -> f64 {
    line.split(after)
        .nth(1)
        .and_then(|rest| rest.split(['/', ' ']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after {after:?} in {line:?}"))
}

/// Per-VMA page-fault locks (Linux 6.4), compared in the guests of the per-series tests: on 6.1
/// the faulting threads of [`VMA_FAULT`] sleep on the mmap_lock in the page-fault path whenever
/// the mapper holds it for write (their own count of voluntary switches says so, at least 20 in
/// its 2 s), on 6.12 they do not (at most a tenth as often, per fault: none in the runs so
/// far, where the madvise that resets a faulter's region may sleep). `lockscope why` of the 6.1
/// recording against the 6.12 one, asked about the faulters, then ranks the kernel lock's change
/// first of all (its waits for a CPU once the holder let them go included): gone on 6.12, the
/// waits' sleep on an rwsem from `lock_mm_and_find_vma` under `do_user_addr_fault`, its kernel
/// stack shown, released by the holder in a mapping call. Named under `kernel_6_1` so that
/// `.ci/run`'s pass without tracefs, which skips the series' tests by name, skips it too.
#[test]
#[ignore = "boots Debian's 6.1 and 6.12 kernels under QEMU (or reuses kernel_6_1's and kernel_6_12's); \
            .ci/run runs it as root"]
fn kernel_6_1_against_6_12() {
    let (before, after) = (
        checks_of(Kernel::Guest("6.1")),
        checks_of(Kernel::Guest("6.12")),
    );
    let name = VMA_FAULT.0;
    let (before, after) = (Results::read(&before), Results::read(&after));
    let (old, new) = (
        FaultNumbers::read(&before, name),
        FaultNumbers::read(&after, name),
    );
    eprintln!("{name}: 6.1 {old:?}, 6.12 {new:?}");
    assert!(
        old.sleeps >= 20 && new.sleeps_per_1000 <= old.sleeps_per_1000 / 10.0,
        "the faulters' sleeps: 6.1 {old:?}, 6.12 {new:?}"
    );
    let (json, first) = compare_vma_fault((&before, "6.1"), (&after, "6.12"));
    assert_eq!(
        first["status"], "gone",
        "the mmap_lock is not gone on 6.12: {json}"
    );
    // 6.1 takes it in lock_mm_and_find_vma (5.10 in do_user_addr_fault itself).
    let lock_path = frames(&first["kernel_lock"]["stack"]);
    assert!(
        lock_path.iter().any(|f| f == "lock_mm_and_find_vma"),
        "the mmap_lock is not taken in lock_mm_and_find_vma: {lock_path:?}\n{json}"
    );
}

/// Reader optimistic spinning in rwsems (removed in Linux 5.11, "locking/rwsem: Remove reader
/// optimistic spinning"), compared in the guests of the per-series tests: on 5.10 a faulter of
/// [`VMA_FAULT`] that finds the mmap_lock held for write by a mapper on a CPU spins for it,
/// on 6.1 it sleeps (neither has per-VMA locks): their own counts say so, at least 20 sleeps on
/// 6.1 and at least 3 times as many per fault as on 5.10 (7 to 12 times in the runs so far).
/// `lockscope why` of the 5.10 recording against the 6.1 one, asked about the faulters, ranks
/// first of all the mmap_lock's change, grown on 6.1 (or new, where 5.10's faulters never
/// slept while recorded): the waits' sleep on an rwsem from the page-fault path, its kernel
/// stack shown, released by the holder in a mapping call. The mechanism is one kind that `why A
/// B` was not tuned on (a lock both kernels take, slept on by one far more than the other);
/// docs/KERNELS.md has what each kernel did. Named under `kernel_5_10` so that `.ci/run`'s pass
/// without tracefs skips it too.
#[test]
#[ignore = "boots Debian's 5.10 and 6.1 kernels under QEMU (or reuses kernel_5_10's and kernel_6_1's); \
            .ci/run runs it as root"]
fn kernel_5_10_against_6_1() {
    let (before, after) = (
        checks_of(Kernel::Guest("5.10")),
        checks_of(Kernel::Guest("6.1")),
    );
    let name = VMA_FAULT.0;
    let (before, after) = (Results::read(&before), Results::read(&after));
    let (old, new) = (
        FaultNumbers::read(&before, name),
        FaultNumbers::read(&after, name),
    );
    eprintln!("{name}: 5.10 {old:?}, 6.1 {new:?}");
    assert!(
        new.sleeps >= 20 && new.sleeps_per_1000 >= 3.0 * old.sleeps_per_1000,
        "the faulters' sleeps: 5.10 {old:?}, 6.1 {new:?}"
    );
    let (json, first) = compare_vma_fault((&before, "5.10"), (&after, "6.1"));
    assert!(
        first["status"] == "grew" || first["status"] == "new",
        "the mmap_lock did not grow on 6.1: {json}"
    );
}

/// The function names of a JSON stack.
fn frames(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// `lockscope why BASE OTHER` of [`VMA_FAULT`]'s recordings, asked about the faulters: checks
/// that the first change of all is the mmap_lock (a `kernel-lock` change of an rwsem taken in
/// `do_user_addr_fault`, its kernel stack from the read slow path, released by the holder in a
/// mapping call), keeps the text beside the base's results (`vma_fault-against-OTHER.txt`) and
/// returns the JSON and that change. Prints the change's margin over the next (in points of the
/// threads' time).
fn compare_vma_fault(
    (base, base_name): (&Results, &str),
    (other, other_name): (&Results, &str),
) -> (String, serde_json::Value) {
    let name = VMA_FAULT.0;
    for results in [base, other] {
        assert_eq!(results.rc(name), 0, "{}", results.log(name));
    }
    let why = |json: bool| {
        let mut command = lockscope();
        command
            .arg("why")
            .arg(base.dir.join(format!("{name}.lsp")))
            .arg(other.dir.join(format!("{name}.lsp")))
            .args(["--threads", "faulter-*"]);
        if json {
            command.arg("--json");
        }
        run_ok(&mut command)
    };
    let json = why(true);
    let text = why(false);
    std::fs::write(
        base.dir.join(format!("{name}-against-{other_name}.txt")),
        &text,
    )
    .expect("write the comparison");
    eprintln!("{text}");
    let diff: serde_json::Value = serde_json::from_str(&json).expect("why --json");
    let changes = diff["changes"].as_array().cloned().unwrap_or_default();
    let points = |c: Option<&serde_json::Value>| {
        c.and_then(|c| c["delta_share"].as_f64())
            .unwrap_or_default()
            .abs()
            * 100.0
    };
    eprintln!(
        "{name} {base_name} against {other_name}: first {} {} {:.1} pt, next {} {:.1} pt",
        changes
            .first()
            .map_or("-".into(), |c| c["kind"].to_string()),
        changes
            .first()
            .map_or("-".into(), |c| c["where"].to_string()),
        points(changes.first()),
        changes.get(1).map_or("-".into(), |c| c["kind"].to_string()),
        points(changes.get(1)),
    );
    let first = changes.first().cloned().unwrap_or_default();
    let lock_path = frames(&first["kernel_lock"]["stack"]);
    assert!(
        first["kind"] == "kernel-lock"
            && first["kernel_lock"]["lock"] == "rwsem"
            && lock_path.iter().any(|f| f == "do_user_addr_fault")
            && frames(&first["kernel_stack"])
                .first()
                .is_some_and(|f| f.starts_with("rwsem_down_read")),
        "the first change is not the mmap_lock in the fault path ({base_name} against \
         {other_name}): {json}"
    );
    // What the holder did as it let the faulters go: the mapper's mapping calls (the wakeup
    // probe's kernel stack of the waker; `up_write` itself may be a tail call, not a frame).
    let release = frames(&first["release_stack"]);
    assert!(
        release
            .iter()
            .any(|f| ["mprotect", "munmap", "mmap"].iter().any(|c| f.contains(c))),
        "the holder's release is not in a mapping call: {release:?}\n{json}"
    );
    (json, first)
}

/// CFS's period against EEVDF's slice (Linux 6.6), compared in the guests of the per-series
/// tests: the two spinners of [`PREEMPT_SLICE`], pinned to one CPU, each get half of it on both
/// kernels, but 6.1 (CFS) preempts the running one once it has run its share of the 12 ms
/// period, 6 ms, which its tick sees at every second tick, and 6.12 (EEVDF) once it has run its
/// 1.4 ms slice, at every tick. The kernel's own counts (the program's, run alone) must say so:
/// on 6.12 more preemptions per tick of their CPU than on 6.1, each wait for the CPU shorter.
/// `lockscope why` of the 6.1 recording against the 6.12 one, asked about the spinners, then
/// ranks first their waits for the CPU (`cpu-saturation`), its scheduler part on both sides: the
/// CPU held by the other spinner, in more waits on 6.12 than on 6.1 for about the same time.
#[test]
#[ignore = "boots Debian's 6.1 and 6.12 kernels under QEMU (or reuses kernel_6_1's and kernel_6_12's); \
            .ci/run runs it as root"]
fn kernel_6_1_against_6_12_preemption() {
    let (before, after) = (
        checks_of(Kernel::Guest("6.1")),
        checks_of(Kernel::Guest("6.12")),
    );
    let name = PREEMPT_SLICE.0;
    let (before, after) = (Results::read(&before), Results::read(&after));
    let (old, new) = (
        SliceNumbers::read(&before, name),
        SliceNumbers::read(&after, name),
    );
    eprintln!("{name}: 6.1 {old:?}, 6.12 {new:?}");
    assert!(
        new.per_tick > old.per_tick && new.ms_per_preemption < old.ms_per_preemption,
        "the spinners' preemptions: 6.1 {old:?}, 6.12 {new:?}"
    );
    for results in [&before, &after] {
        assert_eq!(results.rc(name), 0, "{}", results.log(name));
    }
    let why = |json: bool| {
        let mut command = lockscope();
        command
            .arg("why")
            .arg(before.dir.join(format!("{name}.lsp")))
            .arg(after.dir.join(format!("{name}.lsp")))
            .args(["--threads", "spinner-*"]);
        if json {
            command.arg("--json");
        }
        run_ok(&mut command)
    };
    let json = why(true);
    let diff: serde_json::Value = serde_json::from_str(&json).expect("why --json");
    let first = &diff["changes"][0];
    let side = |label: &str| {
        let side = &first[label];
        let holders: Vec<&str> = side["holders"]
            .as_array()
            .map(|h| h.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        (
            side["waits"].as_u64().unwrap_or_default(),
            side["total_ns"].as_u64().unwrap_or_default(),
            holders,
        )
    };
    let (base, other) = (side("base"), side("other"));
    assert!(
        first["kind"] == "cpu-saturation"
            && base.2.first() == Some(&"spinner-*")
            && other.2.first() == Some(&"spinner-*")
            && other.0 > base.0,
        "the first change is not the spinners' waits for the CPU, held by the other spinner, in \
         more waits on 6.12 (6.1 {old:?}, 6.12 {new:?}; waits and ns 6.1 {base:?}, 6.12 \
         {other:?}): {json}"
    );
    let text = why(false);
    std::fs::write(before.dir.join(format!("{name}-against-6.12.txt")), &text)
        .expect("write the comparison");
    eprintln!("{text}");
}

/// `why` of the demo recorded with `--probes bottleneck`, asked about the mutex waiters: their
/// first cause is the main thread's sleep while it held the order lock (in `main`, at
/// `clock_nanosleep`), for as long as the demo says: at most what the waiters measured around
/// their lock calls, at least the time the main thread knew each waiter asleep before the release
/// less the part of it the main thread was awake itself (on a CPU, or waiting for one once its
/// sleep ended: that part is the CPU's or the CPUs' saturation, not the sleep's; an emulated
/// kernel makes it milliseconds), both as the demo printed them (0.1 ms each), a millisecond
/// for the moments between the demo's clock readings, and 5% of the known sleep that emulation
/// has been seen to charge elsewhere (up to 3.6%).
fn assert_demo_waits_end_in_the_hold(lsp: &Path, log: &str) {
    let json =
        run_ok(
            lockscope()
                .arg("why")
                .arg(lsp)
                .args(["--threads", "mutex-waiter-*", "--json"]),
        );
    let why: serde_json::Value = serde_json::from_str(&json).expect("why --json");
    let first = &why["causes"][0];
    assert_eq!(first["kind"], "sleep", "{json}");
    let frames: Vec<&str> = first["stack"]
        .as_array()
        .map(|s| s.iter().filter_map(|f| f.as_str()).collect())
        .unwrap_or_default();
    assert!(
        frames.iter().any(|f| f.contains("clock_nanosleep"))
            && frames.iter().any(|f| *f == "main" || f.ends_with("::main")),
        "{json}"
    );
    let mutex_waiter = |(thread, _): &(String, f64)| thread.starts_with("mutex-waiter-");
    let asleep_ms: f64 = demo_asleep(log)
        .iter()
        .filter(|t| mutex_waiter(t))
        .map(|(_, ms)| ms)
        .sum();
    let measured_ms: f64 = demo_measures(log)
        .iter()
        .filter(|t| mutex_waiter(t))
        .map(|(_, ms)| ms)
        .sum();
    let awake_ms =
        demo_holder_awake(log).unwrap_or_else(|| panic!("no holder's awake time: {log}"));
    let held_ms = first["total_ns"].as_f64().unwrap_or_default() / 1e6;
    // Under emulation a little of the hold also goes to other causes (cpu-saturation, cpu) in a
    // way the holder's own clocks do not show: 7.0 ms of 657.6 ms (1.1%) on 6.12 in one matrix
    // run of four on this project's machine, 21.4 ms of 588.8 ms (3.6%) on 5.10 in one of the
    // next six (its cpu-saturation cause held 61.6 ms of the waiters' time asleep at the order
    // lock, before and after the release), not understood yet. Up to 5% of the known sleep is allowed for it; the hold must still
    // explain the rest.
    let emulation_ms = asleep_ms * 0.05;
    let low = asleep_ms - MUTEX_WAITERS as f64 * awake_ms - 1.0 - emulation_ms;
    let high = measured_ms + MUTEX_WAITERS as f64 * 0.05;
    assert!(
        asleep_ms > 0.0 && (low..=high).contains(&held_ms),
        "the hold explains {held_ms:.1} ms of the mutex waiters' waits; they were known asleep \
         {asleep_ms:.1} ms before the release (the holder awake {awake_ms:.1} ms of it) and \
         measured {measured_ms:.1} ms: {json}"
    );
}

/// The demo's 4 mutex waits and 2 condvar waits as `probe` saw them, on stacks complete to the
/// thread entry (see [`assert_demo_waits`]).
fn assert_demo_answer(profile: &Profile, probe: &str, log: &str) {
    assert_demo_waits(profile, probe, log);
    assert_demo_stacks(profile, probe);
}

/// Of `probe`'s wait time with a user stack, the share on stacks complete to the thread entry,
/// as a percentage (intervals recorded without a stack by design, a preemption's, do not count).
fn complete_share(profile: &Profile, probe: &str) -> String {
    let (mut all, mut complete) = (0u64, 0u64);
    for w in profile.waits.iter().filter(|w| w.probe == probe) {
        let Some(stack) = profile.stack(w.user_stack) else {
            continue;
        };
        all += w.stats.total_ns;
        if !stack.truncated {
            complete += w.stats.total_ns;
        }
    }
    format!("{:.1}%", 100.0 * complete as f64 / all.max(1) as f64)
}

/// What became of `probe` in a recording.
fn attach_status(profile: &Profile, probe: &str) -> AttachStatus {
    profile
        .metadata
        .probes
        .iter()
        .find(|p| p.probe == probe)
        .unwrap_or_else(|| panic!("{probe} not in the profile's metadata"))
        .status
        .clone()
}

/// Where the checks on `kernel` leave their results.
fn results_dir(kernel: Kernel) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("kernel-matrix")
        .join(kernel.name())
}

/// Runs `kernel-checks.sh` on `kernel`; returns the directory of its results.
fn run_checks(kernel: Kernel) -> PathBuf {
    let out = results_dir(kernel);
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("create the results directory");
    let work = tempfile::tempdir().expect("tempdir");
    let checks = include_str!("kernel-checks.sh");
    match kernel {
        Kernel::Host => {
            let script = work.path().join("checks.sh");
            std::fs::write(&script, checks).expect("write the checks");
            let status = Command::new("sh")
                .arg(&script)
                .envs(CHECK_PROBES)
                .env("LOCKSCOPE", env!("CARGO_BIN_EXE_lockscope"))
                .env("DEMO", demo_path())
                .env("OUT", &out)
                .status()
                .expect("run the checks");
            assert!(status.success(), "the checks failed: {status}");
        }
        Kernel::Guest(series) => {
            // The guest gets lockscope without its debug information (a tenth of the size, so a
            // far smaller initramfs); the demo keeps its names.
            let lockscope = work.path().join("lockscope");
            let strip = Command::new("strip")
                .arg("--strip-debug")
                .arg("-o")
                .arg(&lockscope)
                .arg(env!("CARGO_BIN_EXE_lockscope"))
                .status()
                .expect("run strip");
            assert!(strip.success(), "strip failed");
            let compared: Vec<PathBuf> = COMPARED
                .iter()
                .map(|(name, _)| build_program(name, work.path()))
                .collect();
            let programs: Vec<String> = COMPARED
                .iter()
                .zip(&compared)
                .map(|((name, args), binary)| format!("{name} {} {args}", binary.display()))
                .collect();
            let script = work.path().join("guest.sh");
            let mut header = format!(
                "LOCKSCOPE={}\nDEMO={}\nOUT=/out\nTOGGLE_TRACEFS=1\nCOMPARE='{}'\n",
                lockscope.display(),
                demo_path(),
                programs.join("\n"),
            );
            for (var, value) in CHECK_PROBES {
                header.push_str(&format!("{var}={value}\n"));
            }
            std::fs::write(&script, header + checks).expect("write the guest script");
            let vm = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/kernel-vm");
            let status = Command::new("bash")
                .arg(vm)
                .args(["run", "--kernel", series, "--timeout", GUEST_TIMEOUT_SECS])
                .arg("--script")
                .arg(&script)
                .arg("--out")
                .arg(&out)
                .arg("--file")
                .arg(&lockscope)
                .arg("--file")
                .arg(demo_path())
                .args(
                    compared
                        .iter()
                        .flat_map(|binary| ["--file".as_ref(), binary.as_os_str()]),
                )
                .status()
                .expect("run .ci/kernel-vm");
            assert!(
                status.success(),
                "the {series} guest failed ({status}); its console is in {}",
                out.join("console.log").display()
            );
        }
    }
    out
}

/// Compiles `tests/programs/<program>.c` into `dir` as distributions build (no frame
/// pointers). The matrix needs a C compiler (`.ci/deps` installs one).
fn build_program(program: &str, dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/programs/{program}.c"));
    let binary = dir.join(program);
    let out = Command::new("cc")
        .args(["-O2", "-fomit-frame-pointer", "-pthread", "-o"])
        .arg(&binary)
        .arg(&source)
        .output()
        .expect("run cc (the kernel matrix compiles its known-answer programs)");
    assert!(
        out.status.success(),
        "cc {program}.c failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    binary
}

/// The files the checks left.
struct Results {
    dir: PathBuf,
}

impl Results {
    fn read(dir: &Path) -> Results {
        Results {
            dir: dir.to_owned(),
        }
    }

    fn text(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name))
            .unwrap_or_else(|e| panic!("no {name} in {}: {e}", self.dir.display()))
    }

    /// What lockscope printed in the check `name`.
    fn log(&self, name: &str) -> String {
        self.text(&format!("{name}.log"))
    }

    fn rc(&self, name: &str) -> i32 {
        let text = self.text(&format!("{name}.rc"));
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}.rc: {text:?}"))
    }

    fn profile(&self, name: &str) -> Profile {
        read_profile(&self.dir.join(format!("{name}.lsp")))
            .unwrap_or_else(|e| panic!("{name}.lsp: {e:#}\n{}", self.log(name)))
    }

    /// How long the step `name` took in the guest, seconds (`NAME.seconds`: its start's and its
    /// end's uptime).
    fn step_seconds(&self, name: &str) -> f64 {
        let text = self.text(&format!("{name}.seconds"));
        let times: Vec<f64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        match times[..] {
            [start, end] => end - start,
            _ => panic!("{name}.seconds is not two uptimes: {text:?}"),
        }
    }

    /// What the known-answer program `name` printed when it ran alone, which it must have done
    /// successfully.
    fn plain_output(&self, name: &str) -> String {
        let text = self.text(&format!("{name}.plain.txt"));
        assert_eq!(self.rc(&format!("{name}.plain")), 0, "{name}:\n{text}");
        text
    }

    /// The programs line of `lockscope probes`.
    fn programs(&self) -> String {
        let text = self.text("probes.txt");
        text.lines()
            .find_map(|l| l.trim().strip_prefix("this kernel takes the "))
            .unwrap_or_else(|| panic!("no programs line in probes.txt:\n{text}"))
            .to_owned()
    }

    /// Each eBPF probe's verdict in `lockscope probes` (`loads`, `fails`, `absent`) with its
    /// `why:` line.
    fn probe_verdicts(&self) -> BTreeMap<String, (String, String)> {
        let text = self.text("probes.txt");
        let ebpf = text.split("DTrace backend").next().unwrap_or_default();
        let mut verdicts = BTreeMap::new();
        let mut last: Option<String> = None;
        for line in ebpf.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if let Some(why) = line.trim().strip_prefix("why: ") {
                if let Some(entry) = last.as_ref().and_then(|p| verdicts.get_mut(p)) {
                    let (_, reason): &mut (String, String) = entry;
                    *reason = why.to_owned();
                }
            } else if fields.len() > 4 && probes().any(|probe| probe == fields[0]) {
                verdicts.insert(fields[0].to_owned(), (fields[3].to_owned(), String::new()));
                last = Some(fields[0].to_owned());
            }
        }
        verdicts
    }
}
