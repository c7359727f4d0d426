//! Golden-file tests of every text output, built from the hand-made demo profile of
//! `tests/it/common/fixtures/mod.rs`. Run with `LOCKSCOPE_BLESS=1` to rewrite the files under
//! `tests/golden/` after an intended change, then review the diff.

use crate::common;
use crate::common::fixtures;

use common::check_golden;

use fixtures::{
    bottleneck_profile, demo_profile, lossy_profile, on_cpu_profile, preempt_profile,
    saturation_profile, server_profile,
};
use lockscope::analysis::fold::{folded_lines, FoldOptions};
use lockscope::analysis::measure::Weight;
use lockscope::export::{write_export, ExportFormat};
use lockscope::report::{write_report, GroupBy, ReportOptions};
use lockscope_probes::Profile;

fn report(profile: &Profile, options: &ReportOptions) -> String {
    let mut out = Vec::new();
    write_report(profile, options, &mut out).expect("write report");
    String::from_utf8(out).expect("report is UTF-8")
}

fn report_options(group_by: GroupBy) -> ReportOptions {
    let mut options = ReportOptions::default();
    options.group_by = group_by;
    options
}

/// A recording with the `cpu` probe beside futex: the waits are reported as before (the samples
/// in no kind, total or group), each thread's CPU time shows beside its waits under `--by
/// thread`, and the On CPU section ranks threads and stacks by CPU time; matches its golden file.
#[test]
fn report_on_cpu_by_thread() {
    let text = report(&on_cpu_profile(), &report_options(GroupBy::Thread));
    let waits_only = report(&demo_profile(), &report_options(GroupBy::Thread));
    let kinds = |t: &str| t.split("\n\n").nth(1).unwrap_or_default().to_string();
    assert_eq!(kinds(&text), kinds(&waits_only), "the waits' kinds changed");
    check_golden("report_on_cpu_by_thread.txt", &text);
}

/// The On CPU section's waits column leaves out the time a thread waited for a CPU: the
/// spinner, preempted for 40 ms, still shows no waits beside its CPU time.
#[test]
fn on_cpu_waits_leave_out_cpu_saturation() {
    let mut profile = on_cpu_profile();
    let spinner = profile
        .threads
        .iter()
        .find(|t| t.name == "spinner")
        .map(|t| (t.pid, t.tid))
        .expect("the spinner");
    profile.waits.push(lockscope_probes::WaitRecord {
        probe: "offcpu".to_string(),
        kind: lockscope_probes::WaitKind::OffCpu,
        pid: spinner.0,
        tid: spinner.1,
        object: 0,
        operation: "preempted".to_string(),
        user_stack: None,
        kernel_stack: None,
        woken_by: None,
        stats: fixtures::stats(&[40_000_000]),
    });
    let text = report(&profile, &report_options(GroupBy::Stack));
    let row = text
        .lines()
        .skip_while(|l| !l.starts_with("On CPU"))
        .find(|l| l.trim_start().starts_with("spinner"))
        .unwrap_or_else(|| panic!("no spinner row:\n{text}"));
    assert!(
        !row.contains("40.0 ms"),
        "its preemption counted as a wait: {row}"
    );
}

/// Folding a recording with the `cpu` probe: the waits alone by default (as without the probe),
/// the samples in on-CPU nanoseconds with `--probe cpu`; matches its golden file.
#[test]
fn folded_on_cpu() {
    let profile = on_cpu_profile();
    assert_eq!(
        folded_lines(&profile, &FoldOptions::default()),
        folded_lines(&demo_profile(), &FoldOptions::default())
    );
    let mut options = FoldOptions::default();
    options.probe = Some("cpu".to_string());
    options.kernel_stacks = true;
    let lines = folded_lines(&profile, &options);
    check_golden("folded_on_cpu.folded", &(lines.join("\n") + "\n"));
}

/// The offcpu probe's intervals of threads waiting for a CPU are not waits: the report leaves
/// them out of its kinds, totals and sites and ranks them in its CPU saturation section (a
/// run-queue delay at the site of the sleep it woke from, preemptions apart, per thread, and
/// the threads waiting and running on average against the CPUs); matches its golden file.
#[test]
fn report_cpu_saturation() {
    let text = report(&saturation_profile(), &report_options(GroupBy::Stack));
    let kinds = text.split("\n\n").nth(1).unwrap_or_default();
    assert!(
        !kinds.contains("51.0 ms"),
        "run-queue time among the waits:\n{kinds}"
    );
    check_golden("report_cpu_saturation.txt", &text);
}

/// With the `preempt` probe's stacks, the CPU saturation section names the function a preempted
/// thread was running, its stacks at different pcs merged into one site (12.0 ms, 2 intervals),
/// apart from the preemptions without a stack; matches its golden file.
#[test]
fn report_preempt() {
    let text = report(&preempt_profile(), &report_options(GroupBy::Stack));
    let saturation = text
        .split("\n\n")
        .find(|s| s.starts_with("CPU saturation"))
        .unwrap_or_default();
    let row = saturation
        .lines()
        .find(|l| l.contains("spin_until_free"))
        .unwrap_or_else(|| panic!("no spin_until_free site:\n{saturation}"));
    assert!(
        row.contains("preempted") && row.contains(" 2 ") && row.contains("12.0 ms"),
        "the two preemptions in spin_until_free are not one site: {row}"
    );
    assert!(
        saturation.contains("[preempted]"),
        "the stackless preemptions lost:\n{saturation}"
    );
    check_golden("report_preempt.txt", &text);
}

/// With the `cpu` probe beside `offcpu`, the time breakdown shows each row's sampled CPU time
/// beside the scheduler's on-CPU share: worker-1's 5 samples (50.5 ms of 1.204 s, 4.2%) next to
/// its 41.5%, and no sampled time for worker-2; matches its golden file.
#[test]
fn report_breakdown_sampled() {
    let mut profile = saturation_profile();
    let on_cpu = on_cpu_profile();
    profile.waits.extend(
        on_cpu
            .waits
            .iter()
            .filter(|w| w.probe == "cpu" && w.user_stack != Some(on_cpu.stacks.len() as u32 - 1))
            .cloned(),
    );
    let text = report(&profile, &report_options(GroupBy::Stack));
    let breakdown = text
        .split("\n\n")
        .find(|s| s.starts_with("Where the time went"))
        .unwrap_or_else(|| panic!("no breakdown:\n{text}"));
    assert!(breakdown.contains("sampled"), "{breakdown}");
    let worker = breakdown
        .lines()
        .find(|l| l.trim_start().starts_with("worker-1 ("))
        .unwrap_or_else(|| panic!("no worker-1 row:\n{breakdown}"));
    assert!(
        worker.split_whitespace().any(|w| w == "41.5")
            && worker.split_whitespace().any(|w| w == "4.2"),
        "worker-1's on-cpu and sampled shares: {worker}"
    );
    check_golden("report_breakdown_sampled.txt", &text);
}

/// The default text report (grouped by stack) matches its golden file.
#[test]
fn report_by_stack() {
    check_golden(
        "report_by_stack.txt",
        &report(&demo_profile(), &report_options(GroupBy::Stack)),
    );
}

/// Stacks that differ only by their addresses are one site of the top list (grouped by stack):
/// worker-1's and worker-2's order-lock waits, at other instructions of the same lines, are one
/// group with both threads, the four waits and one histogram, in the text and the JSON.
#[test]
fn report_groups_shown_alike_are_one() {
    let profile = fixtures::moved_stack_profile();
    let options = report_options(GroupBy::Stack);
    let mut json_options = report_options(GroupBy::Stack);
    json_options.json = true;
    let json: serde_json::Value =
        serde_json::from_str(&report(&profile, &json_options)).expect("report json");
    let mutex: Vec<&serde_json::Value> = json["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter(|g| g["key"]["kind"] == "mutex")
        .collect();
    assert_eq!(mutex.len(), 1, "{mutex:#?}");
    assert_eq!(mutex[0]["count"], 4, "{:#}", mutex[0]);
    assert_eq!(mutex[0]["threads"].as_array().map(Vec::len), Some(2));
    let histogram: u64 = mutex[0]["histogram"]
        .as_array()
        .expect("histogram")
        .iter()
        .map(|b| b["count"].as_u64().expect("count"))
        .sum();
    assert_eq!(histogram, 4);
    let text = report(&profile, &options);
    let headings: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(headings.len(), 3, "{text}");
    check_golden("report_moved_stacks.txt", &text);
}

/// The text report grouped by thread matches its golden file.
#[test]
fn report_by_thread() {
    check_golden(
        "report_by_thread.txt",
        &report(&demo_profile(), &report_options(GroupBy::Thread)),
    );
}

/// The text report grouped by lock matches its golden file.
#[test]
fn report_by_lock() {
    check_golden(
        "report_by_lock.txt",
        &report(&demo_profile(), &report_options(GroupBy::Lock)),
    );
}

/// A lossy profile is flagged in the header; kernel stacks and `--top 2` show as expected.
#[test]
fn report_lossy_with_kernel_stacks() {
    let mut options = report_options(GroupBy::Stack);
    options.top = 2;
    options.show_kernel_stacks = true;
    let text = report(&lossy_profile(), &options);
    assert!(
        text.contains("WARNING: this profile is incomplete"),
        "{text}"
    );
    check_golden("report_lossy_kernel.txt", &text);
}

/// The JSON report (grouped by stack) matches its golden file.
#[test]
fn report_json_by_stack() {
    let mut options = report_options(GroupBy::Stack);
    options.json = true;
    check_golden("report_by_stack.json", &report(&demo_profile(), &options));
}

/// The JSON report of a lossy profile grouped by lock, with kernel stacks, matches its golden file.
#[test]
fn report_json_lossy_by_lock() {
    let mut options = report_options(GroupBy::Lock);
    options.json = true;
    options.show_kernel_stacks = true;
    check_golden(
        "report_lossy_by_lock.json",
        &report(&lossy_profile(), &options),
    );
}

/// Folded stacks weighted by wait time match their golden file.
#[test]
fn folded_by_time() {
    let lines = folded_lines(&demo_profile(), &FoldOptions::default());
    check_golden("folded_ns.folded", &(lines.join("\n") + "\n"));
}

/// Folded stacks weighted by count, with kernel frames, through `write_export`, match their
/// golden file.
#[test]
fn folded_by_count_with_kernel() {
    let mut fold = FoldOptions::default();
    fold.weight = Weight::Count;
    fold.kernel_stacks = true;
    fold.probe = Some("futex".to_string());
    let mut out = Vec::new();
    write_export(&demo_profile(), ExportFormat::Folded, &fold, &mut out).expect("export");
    check_golden(
        "folded_count_kernel.folded",
        &String::from_utf8(out).expect("UTF-8"),
    );
}

/// With `futex` and `offcpu` recorded together, worker-2's 400 ms `sleeping in futex` is its
/// futex probe's mutex wait seen again: the report counts it once (no off-CPU kind, totals of
/// the futex waits alone, four sites instead of five) and says so in its header, and the folded
/// export does the same (as it does the run-queue delay after a futex sleep, inside the futex
/// wait; the preemptions stay) unless `--probe offcpu` asks for that probe's view; matches its
/// golden files.
#[test]
fn futex_and_offcpu_count_each_sleep_once() {
    let profile = saturation_profile();
    let futex_ns: u64 = profile
        .waits
        .iter()
        .filter(|w| w.probe == "futex")
        .map(|w| w.stats.total_ns)
        .sum();
    let mut options = report_options(GroupBy::Stack);
    options.json = true;
    let json: serde_json::Value =
        serde_json::from_str(&report(&profile, &options)).expect("report JSON");
    assert_eq!(json["totals"]["total_ns"], futex_ns, "{json:#}");
    assert!(
        json["by_kind"]
            .as_array()
            .expect("by_kind")
            .iter()
            .all(|k| k["kind"] != "off-cpu"),
        "the futex sleep counted twice: {:#}",
        json["by_kind"]
    );
    let merged = &json["header"]["merged_sleeps"];
    assert_eq!(merged["threads"], 1);
    assert_eq!(merged["offcpu_ns"], 400_500_000);
    let text = report(&profile, &report_options(GroupBy::Stack));
    assert!(
        text.contains("merged     futex and offcpu both saw 1 futex sleep of 1 thread (400 ms)"),
        "{text}"
    );
    check_golden("report_merged.json", &report(&profile, &options));

    let lines = folded_lines(&profile, &FoldOptions::default());
    let folded_ns: u64 = lines
        .iter()
        .map(|l| {
            l.rsplit_once(' ')
                .expect("value")
                .1
                .parse::<u64>()
                .expect("ns")
        })
        .sum();
    // The flamegraph keeps the preemptions (30 ms) but not worker-1's 51 ms in the run queue
    // after its mutex wait: the futex wait lasts until the system call returns, so it holds them.
    let preempted: u64 = profile
        .waits
        .iter()
        .filter(|w| w.operation == "preempted")
        .map(|w| w.stats.total_ns)
        .sum();
    assert_eq!(preempted, 30_000_000);
    assert_eq!(folded_ns, futex_ns + preempted, "{lines:#?}");
    check_golden("folded_merged.folded", &(lines.join("\n") + "\n"));
    let mut offcpu = FoldOptions::default();
    offcpu.probe = Some("offcpu".to_string());
    let offcpu_lines = folded_lines(&profile, &offcpu);
    assert!(
        offcpu_lines
            .iter()
            .any(|l| l.contains("hold_order_lock") && l.ends_with(" 400500000")),
        "--probe offcpu lost the probe's own view: {offcpu_lines:#?}"
    );
}

/// A process-per-connection database whose backends queue for one row in `epoll_wait` until the
/// lock's holder sets their latch: the report calls those sleeps (and the few the deadlock
/// timer cut short at the same site) and the lock manager's semaphore waits contention, ended by
/// the program, the waits for the client idle, and splits the backends' time asleep into 64.8%
/// on the program and 23.0% for something outside it, in text and in JSON; matches its golden
/// files.
#[test]
fn report_latch_waits_are_contention() {
    let profile = fixtures::latch_profile();
    let mut options = report_options(GroupBy::Stack);
    options.json = true;
    let json: serde_json::Value =
        serde_json::from_str(&report(&profile, &options)).expect("report JSON");
    let contention = &json["sections"]["contention"];
    let ns = |list: &str, stack: u64| -> u64 {
        contention[list]
            .as_array()
            .expect("rows")
            .iter()
            .filter(|r| r["user_stack"] == stack)
            .map(|r| r["total_ns"].as_u64().expect("total"))
            .sum()
    };
    // 3 backends x (600 ms ended by the lock's holder + 30 ms by the deadlock timer).
    assert_eq!(ns("sites", 0), 3 * 630_000_000, "{contention:#}");
    assert_eq!(ns("idle", 0), 0, "{contention:#}");
    // The semaphore: the futex probe's 3 x 50 ms, its offcpu sleeps counted once.
    assert_eq!(ns("sites", 2), 3 * 50_000_000, "{contention:#}");
    assert_eq!(ns("idle", 1), 3 * 200_000_000, "{contention:#}");
    assert_eq!(ns("sites", 1), 0, "{contention:#}");
    assert_eq!(contention["wakers_known"], true);
    check_golden("report_latch.json", &report(&profile, &options));
    let text = report(&profile, &report_options(GroupBy::Stack));
    // The sentence as read, whatever its wrapping.
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("all threads: 64.8% of their time in sleeps another thread of the program ended, 23.0% in sleeps something outside it ended"),
        "{text}"
    );
    assert!(
        !text.contains("(no mutex, rwlock or kernel-lock waits"),
        "{text}"
    );
    check_golden("report_latch.txt", &text);
}

fn why(profile: &Profile, threads: Option<&str>) -> lockscope::why::Why {
    let mut options = lockscope::why::WhyOptions::default();
    options.threads = threads.map(str::to_string);
    lockscope::why::Why::build(profile, &options).expect("why")
}

/// `why` of the two-lock program analyses the request threads (the background threads barely
/// ran) and names the request lock's critical section, although the background lock has far
/// more wait time; matches its golden files (text and JSON).
#[test]
fn why_working_threads() {
    let profile = bottleneck_profile();
    let answer = why(&profile, None);
    let json = serde_json::to_value(&answer).expect("json");
    assert_eq!(json["causes"][0]["kind"], "cpu");
    let stack = json["causes"][0]["stack"].to_string();
    assert!(stack.contains("request_critical_section"), "{stack}");
    check_golden("why_working.txt", &answer.to_text());
    check_golden(
        "why_working.json",
        &(serde_json::to_string_pretty(&json).expect("json") + "\n"),
    );
}

/// A sweep level recorded with `waitfor` keeps `why`'s first causes (the request lock's critical
/// section first, not the background lock with the most wait time), and the sweep's finding says
/// what the working threads' time traces back to.
#[test]
fn sweep_levels_keep_why() {
    let profile = bottleneck_profile();
    let mut levels = vec![
        lockscope::sweep::summarize_level(1, 100.0, &profile, ("1.lsp", "1.txt")),
        lockscope::sweep::summarize_level(2, 100.0, &profile, ("2.lsp", "2.txt")),
    ];
    lockscope::sweep::fill_scaling(&mut levels);
    let why = levels[0]
        .why
        .as_ref()
        .expect("a level with bottleneck has why's causes");
    assert_eq!(why.groups, ["request-*"]);
    assert_eq!(why.causes[0].kind, "cpu");
    assert!(
        why.causes[0]
            .stack
            .contains(&"request_critical_section".to_string()),
        "{why:?}"
    );
    let knee = lockscope::sweep::find_knee(&levels);
    let sentence = lockscope::sweep::finding(&levels, knee.as_ref());
    assert!(
        sentence.contains(
            "`lockscope why` traces 42% of the working threads' time (request-*) to `cpu` at \
             `__lll_lock_wake <- pthread_mutex_unlock <- request_critical_section <- request_loop`"
        ),
        "{sentence}"
    );
}

/// Asked about the background threads, `why` names the sleep under the background lock: a sleep
/// others waited on is a cause (the holders' own time in it too), not idleness.
#[test]
fn why_background_threads() {
    let answer = why(&bottleneck_profile(), Some("background-*"));
    let text = answer.to_text();
    check_golden("why_background.txt", &text);
    let json = serde_json::to_value(&answer).expect("json");
    assert_eq!(json["causes"][0]["kind"], "sleep", "{text}");
    assert!(
        json["causes"][0]["stack"]
            .to_string()
            .contains("background_hold"),
        "{text}"
    );
}

/// A recording of a server's process tree grouped by process: the header counts the processes
/// (one exited, one kernel thread), each process row has its command, and the kernel thread's
/// CPU time stays apart from the waits; `--probe cpu` ranks the processes by CPU time with the
/// kernel thread's kernel stack; matches its golden file.
#[test]
fn report_by_process() {
    let mut options = report_options(GroupBy::Process);
    let text = report(&server_profile(), &options);
    assert!(text.contains("  processes  5 recorded (1 exited before the end, 1 kernel thread)"));
    options.probe = Some("cpu".to_string());
    options.show_kernel_stacks = true;
    let cpu = report(&server_profile(), &options);
    check_golden(
        "report_by_process.txt",
        &format!("{text}\n--- --probe cpu --kernel-stacks\n{cpu}"),
    );
}

/// Folded stacks with the process as root frame (`--process`): each worker apart under
/// `apache2-PID`, as stackcollapse-perf.pl --pid; the kernel thread's samples under its own name
/// with `--probe cpu`; matches its golden file.
#[test]
fn folded_by_process() {
    let mut options = FoldOptions::default();
    options.process = true;
    let waits = folded_lines(&server_profile(), &options);
    assert!(waits
        .iter()
        .all(|l| l.starts_with("apache2-5001;") || l.starts_with("apache2-5002;")));
    options.probe = Some("cpu".to_string());
    let cpu = folded_lines(&server_profile(), &options);
    assert_eq!(cpu.len(), 1);
    assert!(
        cpu[0].starts_with("[kworker/u4:1]-40;kworker/u4:1;"),
        "{cpu:?}"
    );
    check_golden(
        "folded_by_process.folded",
        &(waits.join("\n") + "\n" + &cpu.join("\n") + "\n"),
    );
}

/// The demo profile's report with `--full-stacks`: every frame of every stack, as recorded (the
/// runtime's `start_thread` and `clone3` too); matches its golden file.
#[test]
fn report_by_stack_full_stacks() {
    let mut options = report_options(GroupBy::Stack);
    options.stack_style = lockscope::report::StackStyle::Full;
    let text = report(&demo_profile(), &options);
    assert!(text.contains("start_thread") && text.contains("clone3"));
    assert!(!text.contains("runtime frames"));
    check_golden("report_by_stack_full.txt", &text);
}

/// No line of the golden text outputs (reports, `why`, the diff table, the sweep table) is wider
/// than 100 columns, in their default, readable form: the report's header and its "Where the time
/// went" table included.
#[test]
fn golden_text_lines_fit_100_columns() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut checked = 0;
    let mut wide = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the golden directory") {
        let path = entry.expect("a golden file").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !(name.starts_with("report_")
            || name.starts_with("why_")
            || name == "diff_table.txt"
            || name == "sweep_table.txt")
            || !name.ends_with(".txt")
            || name.ends_with("_full.txt")
        {
            continue;
        }
        checked += 1;
        let text = std::fs::read_to_string(&path).expect("a golden text file");
        for (i, line) in text.lines().enumerate() {
            let columns = line.chars().count();
            if columns > 100 {
                wide.push(format!("{name}:{}: {columns} columns: {line}", i + 1));
            }
        }
    }
    assert!(checked >= 10, "only {checked} golden text files found");
    assert!(
        wide.is_empty(),
        "lines over 100 columns:\n{}",
        wide.join("\n")
    );
}

/// Stacks of the same functions at other instructions (the spinner sampled at two addresses of
/// its loop) are one entry of the On CPU section's stacks, with their samples summed.
#[test]
fn frame_identical_stacks_are_merged() {
    let mut profile = on_cpu_profile();
    let (index, spin_stack) = profile
        .stacks
        .iter()
        .enumerate()
        .find(|(_, s)| {
            s.frames
                .iter()
                .any(|f| f.function.as_deref() == Some("spin_until_free"))
        })
        .map(|(i, s)| (i as u32, s.clone()))
        .expect("the spinner's stack");
    let mut moved = spin_stack.clone();
    for frame in &mut moved.frames {
        frame.address += 4;
    }
    let copy = profile.stacks.len() as u32;
    profile.stacks.push(moved);
    // A third of the spinner's samples at the other addresses.
    let record = profile
        .waits
        .iter()
        .position(|w| w.user_stack == Some(index))
        .expect("the spinner's samples");
    let mut other = profile.waits[record].clone();
    other.user_stack = Some(copy);
    other.stats = fixtures::stats(&[10_101_010; 10]);
    profile.waits[record].stats = fixtures::stats(&[10_101_010; 20]);
    profile.waits.push(other);
    let text = report(&profile, &report_options(GroupBy::Thread));
    let on_cpu: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("On CPU"))
        .collect();
    let spinner_stacks: Vec<&&str> = on_cpu
        .iter()
        .filter(|l| l.trim_start().starts_with('#') && l.ends_with("spinner"))
        .collect();
    assert_eq!(spinner_stacks.len(), 1, "{}", on_cpu.join("\n"));
    assert!(
        spinner_stacks[0].contains("30 samples"),
        "{}",
        spinner_stacks[0]
    );
    assert!(
        on_cpu.iter().any(|l| l.contains("Top 2 of 2 stacks")),
        "{}",
        on_cpu.join("\n")
    );
}

/// The real recordings of the demo under each probe set (`tests/data/demo`): the report (text
/// and JSON), with the bottleneck analysis `why` with no options (text, and JSON as `why --json`
/// writes it: the causes with the profile's classified totals), and the HTML page (normalized:
/// see [`normalized_page`]), read as a user reads them; each matches its golden file, so that a
/// change in what any view says of the demo is reviewed. The views' totals agree with each other
/// (`views_agree.rs`); here their words and numbers are pinned.
#[test]
fn recorded_demo_under_every_probe_set() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/demo");
    for set in ["futex", "offcpu", "futex-offcpu", "bottleneck"] {
        let name = format!("demo-{set}.lsp");
        let profile =
            lockscope_probes::read_profile(&dir.join(&name)).expect("a recorded demo profile");
        let text = report(&profile, &ReportOptions::default());
        check_golden(&format!("demo_{set}_report.txt"), &text);
        let mut options = ReportOptions::default();
        options.json = true;
        let json = report(&profile, &options);
        let value: serde_json::Value = serde_json::from_str(&json).expect("report JSON");
        assert_eq!(
            value["classified"]["waits"], value["totals"]["count"],
            "{set}: the classified waits are the report's"
        );
        check_golden(&format!("demo_{set}_report.json"), &json);
        if profile.bottleneck.is_some() {
            let answer = why(&profile, None);
            check_golden(&format!("demo_{set}_why.txt"), &answer.to_text());
            let mut value = serde_json::to_value(&answer).expect("why JSON");
            value["classified"] = serde_json::to_value(lockscope::report::Classified::of(&profile))
                .expect("classified JSON");
            check_golden(
                &format!("demo_{set}_why.json"),
                &(serde_json::to_string_pretty(&value).expect("why JSON") + "\n"),
            );
        }
        let page = lockscope::html::render_html(
            &[lockscope::html::Input::Run {
                path: std::path::PathBuf::from(&name),
                profile: Box::new(profile),
            }],
            &lockscope::html::HtmlOptions::default(),
        )
        .expect("the page");
        check_golden(&format!("demo_{set}.html"), &normalized_page(&page));
    }
}

/// The HTML page without the parts that are not the demo's: the embedded flamegraphs (inferno's
/// SVG as base64 `data:` URLs, whose folded lines the `folded_*` goldens pin), the styles and the
/// script (constants of the page), each left as a marker; and every tag on a line of its own
/// where a line holds several, so that a diff names the table row that changed.
fn normalized_page(page: &str) -> String {
    let data = regex::Regex::new(r"data:image/svg\+xml;base64,[A-Za-z0-9+/=]+").expect("regex");
    let style = regex::Regex::new(r"(?s)<style>.*?</style>").expect("regex");
    let script = regex::Regex::new(r"(?s)<script>.*?</script>").expect("regex");
    let page = data.replace_all(page, "data:[flamegraph]");
    let page = style.replace_all(&page, "<style>[styles]</style>");
    let page = script.replace_all(&page, "<script>[script]</script>");
    page.replace("><tr>", ">\n<tr>")
        .replace("</tr><", "</tr>\n<")
}
