//! The kernel in `why`'s causes: the root's kernel stack and the sleeping kernel lock a cause's
//! time was spent under, in the text (golden), the JSON and `why BASE OTHER` (a sleep under
//! `rwsem_down_read_slowpath` from the page-fault path is not the same cause as one in
//! `futex_wait`); and on a real recording as root, the mmap_lock of a program that maps and
//! unmaps while its threads fault pages in.

use crate::common;

use common::fixtures::bottleneck_profile;
use common::{check_golden, lockscope, run_ok};
use lockscope_probes::bottleneck::{RootKind, WaitPart};
use lockscope_probes::{AddressSpace, Frame, Profile, Stack};
use std::path::Path;
use std::process::Command;

/// A kernel stack of `functions`, leaf first.
fn kernel_stack(functions: &[&str]) -> Stack {
    Stack {
        space: AddressSpace::Kernel,
        frames: functions
            .iter()
            .enumerate()
            .map(|(i, f)| Frame {
                function: Some((*f).to_string()),
                ..Frame::unsymbolized(0xffff_ffff_8100_0000 + 0x100 * i as u64)
            })
            .collect(),
        truncated: false,
    }
}

/// The two-lock program with kernel stacks: the background threads' sleep holding their lock
/// (`clock_nanosleep`) in `hrtimer_nanosleep`; the request threads' waits that a request thread
/// on a CPU ended slept in `futex_wait`, or, with `mmap_lock`, under the mmap_lock's rwsem from
/// the page-fault path (as on a kernel before per-VMA locks, the holder unmapping memory: its
/// kernel stack at the wakeup releases the lock in `__vm_munmap`); each wait for a CPU after a
/// sleep has that sleep's kernel stack.
fn kernel_profile(mmap_lock: bool) -> Profile {
    let mut profile = bottleneck_profile();
    let id = |profile: &Profile| profile.stacks.len() as u32;
    let (futex, fault, nanosleep, release) = (
        id(&profile),
        id(&profile) + 1,
        id(&profile) + 2,
        id(&profile) + 3,
    );
    profile.stacks.extend([
        kernel_stack(&[
            "__schedule",
            "schedule",
            "futex_wait_queue",
            "__futex_wait",
            "futex_wait",
            "do_futex",
            "__x64_sys_futex",
        ]),
        kernel_stack(&[
            "__schedule",
            "schedule",
            "schedule_preempt_disabled",
            "rwsem_down_read_slowpath",
            "down_read",
            "lock_mm_and_find_vma",
            "do_user_addr_fault",
            "exc_page_fault",
            "asm_exc_page_fault",
        ]),
        kernel_stack(&[
            "__schedule",
            "schedule",
            "do_nanosleep",
            "hrtimer_nanosleep",
            "common_nsleep",
            "__x64_sys_clock_nanosleep",
        ]),
        kernel_stack(&[
            "__bpf_trace_sched_wakeup_template",
            "try_to_wake_up",
            "wake_up_q",
            "rwsem_wake",
            "up_write",
            "__vm_munmap",
            "__x64_sys_munmap",
            "do_syscall_64",
        ]),
    ]);
    let bottleneck = profile
        .bottleneck
        .as_mut()
        .expect("the bottleneck analysis");
    let lock_wait = if mmap_lock { fault } else { futex };
    for b in &mut bottleneck.blame {
        match b.root.kind {
            RootKind::Cpu => {
                b.kernel_stack = Some(lock_wait);
                b.root.kernel_stack = mmap_lock.then_some(release);
            }
            RootKind::Blocked => b.root.kernel_stack = Some(nanosleep),
            _ => {}
        }
        // A wait for a CPU after a sleep carries the sleep's kernel stack, as the engine keeps
        // it: the request threads' (user stack 0) on their lock, the background ones' in
        // `futex_wait` (stack 2) or `clock_nanosleep` (stack 3).
        if b.part == WaitPart::Runnable {
            b.kernel_stack = match b.user_stack {
                Some(0) => Some(lock_wait),
                Some(3) => Some(nanosleep),
                _ => Some(futex),
            };
        }
    }
    profile
}

fn why_json(profile: &Profile, threads: &str) -> serde_json::Value {
    let mut options = lockscope::why::WhyOptions::default();
    options.threads = Some(threads.to_string());
    let why = lockscope::why::Why::build(profile, &options).expect("why");
    serde_json::to_value(&why).expect("json")
}

/// The request threads' waits under the mmap_lock make their cause (the holder on a CPU) say
/// so, with the lock's path from the page fault, and so does their wait for a CPU once the
/// holder let them go; the background sleep shows its kernel stack past the scheduler, marked
/// `kernel`; the text matches its golden file and fits 100 columns.
#[test]
fn why_names_the_kernel_lock() {
    let profile = kernel_profile(true);
    let mut options = lockscope::why::WhyOptions::default();
    options.threads = Some("request-*".to_string());
    let text = lockscope::why::Why::build(&profile, &options)
        .expect("why")
        .to_text();
    let lock = text
        .lines()
        .find(|l| l.contains("under kernel lock"))
        .expect("a kernel lock line");
    assert_eq!(
        lock,
        "     under kernel lock rwsem (rwsem_down_read_slowpath <- lock_mm_and_find_vma <- ...): \
         100.0% of it"
    );
    check_golden("why_kernel_lock.txt", &text);
    let json = why_json(&profile, "request-*");
    let first = &json["causes"][0];
    assert_eq!(first["kind"], "cpu", "{json:#}");
    assert_eq!(first["kernel_lock"]["lock"], "rwsem", "{json:#}");
    assert_eq!(first["kernel_lock"]["slept"], "waits", "{json:#}");
    assert_eq!(
        first["kernel_lock"]["stack"][3], "do_user_addr_fault",
        "{json:#}"
    );
    assert!(first.get("kernel_stack").is_none(), "{json:#}");
    // What the holder did as it let the waiters go: the release, past the wakeup's own frames.
    assert_eq!(first["release_stack"][0], "up_write", "{json:#}");
    assert_eq!(first["release_stack"][1], "__vm_munmap", "{json:#}");
    let woken = &json["causes"][1];
    assert_eq!(woken["kind"], "cpu-saturation", "{json:#}");
    assert_eq!(woken["kernel_lock"]["lock"], "rwsem", "{json:#}");
    assert_eq!(woken["sites"][0]["part"], "runnable", "{json:#}");
    let background = why_json(&profile, "background-*");
    let sleep = &background["causes"][0];
    assert_eq!(sleep["kind"], "sleep", "{background:#}");
    assert_eq!(sleep["kernel_stack"][2], "do_nanosleep", "{background:#}");
    assert!(sleep.get("kernel_lock").is_none(), "{background:#}");
    options.threads = Some("background-*".to_string());
    let text = lockscope::why::Why::build(&profile, &options)
        .expect("why")
        .to_text();
    assert!(text.contains("       kernel do_nanosleep\n"), "{text}");
}

/// `why BASE OTHER`: the same critical section whose waiters slept in `futex_wait` on one side
/// and under the mmap_lock on the other is two changes: the `cpu` cause `gone`, and a
/// `kernel-lock` change `new`, matched by its lock and where the kernel took it
/// (`lock_mm_and_find_vma [rwsem]`), with the lock's kernel path as its `kernel_stack` and the
/// causes it gathers as its parts: the holder on a CPU (`cpu`), and the waiters' waits for a
/// CPU once it let them go (`cpu-saturation`), which on the futex side are a change of their own.
#[test]
fn compare_tells_kernel_locks_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (base, other) = (dir.path().join("base.lsp"), dir.path().join("other.lsp"));
    lockscope_probes::write_profile(&kernel_profile(false), &base).expect("write base");
    lockscope_probes::write_profile(&kernel_profile(true), &other).expect("write other");
    let out = run_ok(lockscope().current_dir(dir.path()).args([
        "why",
        "base.lsp",
        "other.lsp",
        "--threads",
        "request-*",
        "--json",
    ]));
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    let changes = json["changes"].as_array().expect("changes");
    let cpu: Vec<&serde_json::Value> = changes.iter().filter(|c| c["kind"] == "cpu").collect();
    assert_eq!(cpu.len(), 1, "{json:#}");
    let new = changes
        .iter()
        .find(|c| c["kind"] == "kernel-lock")
        .expect("a kernel-lock change");
    assert_eq!(new["status"], "new", "{new:#}");
    assert_eq!(
        new["kernel_stack"][0], "rwsem_down_read_slowpath",
        "{new:#}"
    );
    assert_eq!(new["kernel_lock"]["lock"], "rwsem", "{new:#}");
    assert_eq!(new["where"], "lock_mm_and_find_vma [rwsem]", "{new:#}");
    assert_eq!(new["stack"], serde_json::json!([]), "{new:#}");
    let parts: Vec<(&str, u64)> = new["other"]["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .map(|p| {
            (
                p["kind"].as_str().unwrap_or_default(),
                p["total_ns"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        parts.iter().map(|p| p.0).collect::<Vec<_>>(),
        ["cpu", "cpu-saturation"],
        "{new:#}"
    );
    assert_eq!(
        parts.iter().map(|p| p.1).sum::<u64>(),
        new["other"]["total_ns"].as_u64().unwrap_or_default(),
        "{new:#}"
    );
    assert_eq!(new["release_stack"][0], "up_write", "{new:#}");
    let saturation = changes
        .iter()
        .find(|c| c["kind"] == "cpu-saturation")
        .expect("the futex side's waits for a CPU");
    assert_eq!(saturation["status"], "gone", "{saturation:#}");
    let gone = cpu[0];
    assert_eq!(gone["status"], "gone", "{gone:#}");
    assert!(gone.get("kernel_lock").is_none(), "{gone:#}");
    let text = run_ok(lockscope().current_dir(dir.path()).args([
        "why",
        "base.lsp",
        "other.lsp",
        "--threads",
        "request-*",
    ]));
    assert!(
        text.contains("under kernel lock rwsem: the waits slept in rwsem_down_read_slowpath <- lock_mm_and_find_vma"),
        "{text}"
    );
    assert!(
        text.contains("released in the kernel at up_write <- __vm_munmap <- __x64_sys_munmap"),
        "{text}"
    );
}

/// Compiles `tests/programs/<program>.c` into `dir`; `None` (and a loud skip) without `cc`.
fn build(test: &str, program: &str, dir: &Path) -> Option<std::path::PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/programs/{program}.c"));
    let binary = dir.join(program);
    match Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&binary)
        .arg(&source)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "cc {program}.c failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            Some(binary)
        }
        Err(e) => {
            eprintln!("skipped: {test}: no C compiler (`cc`: {e}); apt-get install gcc");
            None
        }
    }
}

/// Recorded as root, the mmap_lock program's causes name the kernel lock: a cause whose time
/// was spent under an rwsem, its kernel path from `rwsem_down_*` through the mmap_lock's
/// `down_write_killable` or `down_read`, from mapping or (before per-VMA locks) page faults.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn recorded_mmap_lock_is_named() {
    let test = "recorded_mmap_lock_is_named";
    let Some(dir) = common::bpf_scratch(test) else {
        return;
    };
    let Some(program) = build(test, "mmap_lock", dir.path()) else {
        return;
    };
    let profile = dir.path().join("x.lsp");
    run_ok(
        lockscope()
            .args(["record", "--probes", "bottleneck", "-o"])
            .arg(&profile)
            .arg("--")
            .arg(&program)
            .args(["3", "2"]),
    );
    let out = run_ok(
        lockscope()
            .args(["why", "--json", "--top", "0"])
            .arg(&profile),
    );
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    let causes: Vec<&serde_json::Value> = ["causes", "idle"]
        .iter()
        .flat_map(|k| json[k].as_array().into_iter().flatten())
        .collect();
    let locked: Vec<&&serde_json::Value> = causes
        .iter()
        .filter(|c| c["kernel_lock"]["lock"] == "rwsem")
        .collect();
    let paths: Vec<String> = locked
        .iter()
        .map(|c| c["kernel_lock"]["stack"].to_string())
        .collect();
    eprintln!("{test}: kernel locks: {paths:#?}");
    assert!(
        locked.iter().any(|c| {
            let path = c["kernel_lock"]["stack"].to_string();
            path.contains("rwsem_down")
                && ["down_write_killable", "down_read", "lock_mm_and_find_vma"]
                    .iter()
                    .any(|f| path.contains(f))
        }),
        "no cause under the mmap_lock: {json:#}"
    );
    // The root's own sleep on the lock has it as its kernel stack.
    assert!(
        causes
            .iter()
            .any(|c| c["kernel_stack"].as_array().is_some_and(|s| s
                .iter()
                .any(|f| f.as_str().is_some_and(|f| f.starts_with("rwsem_down"))))),
        "no root kernel stack under the rwsem: {json:#}"
    );
}

/// The comparison page of two runs with the bottleneck analysis lists their differential causes
/// as `why A B` does: the mmap_lock `new` in B (a `kernel-lock` change, with its lock), and the
/// critical section whose waiters slept in `futex_wait` `gone`.
#[test]
fn comparison_page_has_differential_causes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (base, other) = (dir.path().join("base.lsp"), dir.path().join("other.lsp"));
    lockscope_probes::write_profile(&kernel_profile(false), &base).expect("write base");
    lockscope_probes::write_profile(&kernel_profile(true), &other).expect("write other");
    let page = dir.path().join("page.html");
    run_ok(
        lockscope()
            .arg("html")
            .args([&base, &other])
            .arg("-o")
            .arg(&page),
    );
    let html = std::fs::read_to_string(&page).expect("page");
    let table = html
        .split("<table class=\"diff-table why-diff")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .expect("a differential causes table");
    let row = |status: &str, kind: &str| {
        table
            .split("<tr>")
            .find(|r| {
                r.contains(&format!("<td>{status}</td>")) && r.contains(&format!("<td>{kind}</td>"))
            })
            .unwrap_or_else(|| panic!("no {status} {kind} row in {table}"))
    };
    assert!(
        row("new", "kernel-lock")
            .contains("rwsem (rwsem_down_read_slowpath &lt;- lock_mm_and_find_vma)"),
        "{table}"
    );
    assert!(!row("gone", "cpu").contains("rwsem"), "{table}");
}

/// Two sweeps on one page (`lockscope html SWEEP_A SWEEP_B`): both curves on one chart, both
/// per level, and at the level where the scaling differs most (20: B's throughput from 5 up
/// is 1.6 times A's) the differential causes of its two recordings, the mmap_lock `new` in B.
#[test]
fn two_sweeps_page_compares_curves_and_causes() {
    let stored = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mariadb-sweep");
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (side, mmap_lock) in [(&a, false), (&b, true)] {
        std::fs::create_dir(side).expect("mkdir");
        for entry in std::fs::read_dir(&stored).expect("stored sweep") {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), side.join(entry.file_name())).expect("copy");
        }
        lockscope_probes::write_profile(&kernel_profile(mmap_lock), &side.join("level-20.lsp"))
            .expect("write level 20");
    }
    let path = b.join("sweep.json");
    let mut sweep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("sweep.json")).expect("json");
    for level in sweep["levels"].as_array_mut().expect("levels") {
        if level["concurrency"].as_u64() > Some(1) {
            for field in ["throughput", "scaling"] {
                level[field] = (level[field].as_f64().expect(field) * 1.6).into();
            }
        }
    }
    std::fs::write(&path, sweep.to_string()).expect("write sweep.json");
    let page = dir.path().join("page.html");
    run_ok(lockscope().arg("html").args([&a, &b]).arg("-o").arg(&page));
    let html = std::fs::read_to_string(&page).expect("page");
    let section = html
        .split("<h2 id=\"sweeps\">Two sweeps compared</h2>")
        .nth(1)
        .and_then(|s| s.split("<h2").next())
        .expect("the two sweeps' section");
    let chart = section.split("</svg>").next().expect("chart");
    assert_eq!(chart.matches("<polyline").count(), 2, "{chart}");
    assert!(
        section.contains("<td class=\"num\">20</td><td class=\"num\">3809.3</td>"),
        "{section}"
    );
    assert!(
        section.contains("Where the curves part: concurrency 20 (scaling 383% in A, 613% in B)"),
        "{section}"
    );
    let table = section
        .split("<table class=\"diff-table why-diff")
        .nth(1)
        .expect("differential causes at level 20");
    assert!(
        table.contains("rwsem (rwsem_down_read_slowpath &lt;- lock_mm_and_find_vma)"),
        "{table}"
    );
}
