//! Exports for the profiling ecosystem and imports from it: pprof (decoded with a hand-written
//! protobuf subset, totals checked), speedscope JSON, and `import perf-script` / `import folded`
//! checked against stackcollapse-perf's folding rules, restated here.

use crate::common;
use crate::common::fixtures;

use common::*;
use lockscope::analysis::fold::FoldOptions;
use lockscope::export::pprof::PprofOptions;
use prost::Message;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// The subset of pprof's `profile.proto` these tests read (field numbers from the proto file).
#[derive(Clone, PartialEq, prost::Message)]
struct PprofProfile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, repeated, tag = "13")]
    comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
    #[prost(int64, tag = "3")]
    num: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "3")]
    address: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("the pprof output is gzip");
    out
}

fn decode(profile: &lockscope_probes::Profile, options: &PprofOptions) -> PprofProfile {
    let mut gz = Vec::new();
    lockscope::export::pprof::write_pprof(profile, options, &mut gz).expect("write pprof");
    PprofProfile::decode(gunzip(&gz).as_slice()).expect("decode profile.proto")
}

/// The pprof export decodes as profile.proto; its sample types are contentions/count and
/// delay/nanoseconds, its totals equal the profile's, every location and function resolves, the
/// leaf location is the stack's leaf frame, and every sample carries the documented labels.
#[test]
fn pprof_decodes_and_totals_match() {
    let profile = fixtures::demo_profile();
    let mut options = PprofOptions::default();
    options.concurrency = Some(5);
    let decoded = decode(&profile, &options);
    let s = |i: i64| decoded.string_table[i as usize].as_str();
    assert_eq!(decoded.string_table[0], "");
    let types: Vec<(&str, &str)> = decoded
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    assert_eq!(types, [("contentions", "count"), ("delay", "nanoseconds")]);
    assert_eq!(s(decoded.default_sample_type), "delay");
    assert_eq!(decoded.period, 1);
    assert_eq!(decoded.duration_nanos as u64, profile.metadata.duration_ns);
    assert_eq!(decoded.time_nanos as u64, profile.metadata.start_unix_ns);

    let count: i64 = decoded.sample.iter().map(|x| x.value[0]).sum();
    let delay: i64 = decoded.sample.iter().map(|x| x.value[1]).sum();
    let expected_count: u64 = profile.waits.iter().map(|w| w.stats.count).sum();
    let expected_delay: u64 = profile.waits.iter().map(|w| w.stats.total_ns).sum();
    assert_eq!(count as u64, expected_count);
    assert_eq!(delay as u64, expected_delay);
    assert_eq!(decoded.sample.len(), profile.waits.len());

    let locations: BTreeMap<u64, &Location> = decoded.location.iter().map(|l| (l.id, l)).collect();
    let functions: BTreeMap<u64, &Function> = decoded.function.iter().map(|f| (f.id, f)).collect();
    for (sample, record) in decoded.sample.iter().zip(&profile.waits) {
        let labels: BTreeMap<&str, String> = sample
            .label
            .iter()
            .map(|l| {
                let value = if l.str != 0 {
                    s(l.str).to_string()
                } else {
                    l.num.to_string()
                };
                (s(l.key), value)
            })
            .collect();
        for key in [
            "os",
            "kernel",
            "wait_kind",
            "lock_address",
            "thread",
            "tid",
            "concurrency",
        ] {
            assert!(labels.contains_key(key), "label {key} missing: {labels:?}");
        }
        assert_eq!(labels["wait_kind"], record.kind.name());
        assert_eq!(labels["lock_address"], format!("{:#x}", record.object));
        assert_eq!(labels["concurrency"], "5");
        assert_eq!(labels["os"], profile.metadata.os);
        // The leaf location names the leaf frame's innermost function.
        let leaf = locations[&sample.location_id[0]];
        let innermost = functions[&leaf.line[0].function_id];
        let expected = match profile.stack(record.user_stack) {
            Some(stack) if !stack.frames.is_empty() => stack.frames[0]
                .names_outermost_first()
                .pop()
                .expect("a name"),
            _ => lockscope::analysis::fold::NO_USER_STACK.to_string(),
        };
        assert_eq!(s(innermost.name), expected);
        for id in &sample.location_id {
            let location = locations.get(id).expect("location resolves");
            for line in &location.line {
                assert!(functions.contains_key(&line.function_id));
            }
        }
    }
}

/// `lockscope export --format pprof` writes the same, and `protoc --decode_raw` (when installed)
/// reads it too.
#[test]
fn pprof_from_the_command_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lsp = dir.path().join("demo.lsp");
    let profile = fixtures::demo_profile();
    lockscope_probes::write_profile(&profile, &lsp).expect("write profile");
    let pb = dir.path().join("demo.pb.gz");
    let out = lockscope()
        .args(["export", "--format", "pprof", "--concurrency", "2", "-o"])
        .arg(&pb)
        .arg(&lsp)
        .output()
        .expect("run export");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&pb).expect("read pprof");
    let decoded = PprofProfile::decode(gunzip(&bytes).as_slice()).expect("decode");
    let delay: i64 = decoded.sample.iter().map(|x| x.value[1]).sum();
    assert_eq!(
        delay as u64,
        profile.waits.iter().map(|w| w.stats.total_ns).sum::<u64>()
    );
    match std::process::Command::new("protoc")
        .arg("--decode_raw")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
    {
        Ok(mut child) => {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(&gunzip(&bytes))
                .expect("feed protoc");
            let out = child.wait_with_output().expect("protoc");
            assert!(out.status.success(), "protoc --decode_raw failed");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("6: \"delay\""), "{text}");
        }
        Err(e) => eprintln!("skipped: protoc --decode_raw check: protoc not runnable ({e})"),
    }
    // `go tool pprof` itself, when Go is installed (the engine the format is made for).
    match std::process::Command::new("go")
        .args(["tool", "pprof", "-top", "-sample_index=delay"])
        .arg(&pb)
        .output()
    {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("Type: delay"), "{text}");
            assert!(text.contains("__lll_lock_wait"), "{text}");
        }
        Ok(out) => panic!(
            "go tool pprof refused the export: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!("skipped: go tool pprof check: go not runnable ({e})"),
    }
}

/// The speedscope document follows the file format: schema, shared frames, two sampled profiles
/// whose weights sum to the profile's wait time and wait count, stacks root first (thread name,
/// then the outermost frame).
#[test]
fn speedscope_document() {
    let profile = fixtures::demo_profile();
    let mut out = Vec::new();
    lockscope::export::speedscope::write_speedscope(&profile, &FoldOptions::default(), &mut out)
        .expect("speedscope");
    let doc: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
    assert_eq!(doc["$schema"], lockscope::export::speedscope::SCHEMA);
    let frames = doc["shared"]["frames"].as_array().expect("frames");
    let profiles = doc["profiles"].as_array().expect("profiles");
    assert_eq!(profiles.len(), 2);
    let sum = |p: &serde_json::Value| -> u64 {
        p["weights"]
            .as_array()
            .expect("weights")
            .iter()
            .map(|w| w.as_u64().expect("integer weight"))
            .sum()
    };
    assert_eq!(profiles[0]["unit"], "nanoseconds");
    assert_eq!(
        sum(&profiles[0]),
        profile.waits.iter().map(|w| w.stats.total_ns).sum::<u64>()
    );
    assert_eq!(profiles[0]["endValue"].as_u64(), Some(sum(&profiles[0])));
    assert_eq!(profiles[1]["unit"], "none");
    assert_eq!(
        sum(&profiles[1]),
        profile.waits.iter().map(|w| w.stats.count).sum::<u64>()
    );
    let thread_names: Vec<&str> = profile.threads.iter().map(|t| t.name.as_str()).collect();
    for sample in profiles[0]["samples"].as_array().expect("samples") {
        let stack = sample.as_array().expect("stack");
        let root = frames[stack[0].as_u64().expect("index") as usize]["name"]
            .as_str()
            .expect("name");
        assert!(thread_names.contains(&root), "root {root} is a thread");
    }
}

/// `import folded` then `export --format folded` gives the input back, merged and sorted.
#[test]
fn folded_round_trip() {
    let input = "main;work;lock 5\nmain;idle 3\nmain;work;lock 2\nother thread;f(int) 1\n";
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("in.folded");
    std::fs::write(&path, input).expect("write");
    let lsp = dir.path().join("in.lsp");
    let out = lockscope()
        .args(["import", "folded"])
        .arg(&path)
        .arg("-o")
        .arg(&lsp)
        .output()
        .expect("import");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = lockscope()
        .args(["export", "--format", "folded"])
        .arg(&lsp)
        .output()
        .expect("export");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "main;idle 3\nmain;work;lock 7\nother thread;f(int) 1\n"
    );
    let profile = lockscope_probes::read_profile(&lsp).expect("read");
    assert_eq!(profile.metadata.backend, "folded");
}

/// `import folded --values` says what the values are: samples (the default), events, CPU
/// nanoseconds or wait nanoseconds; the records' kinds follow, and the fold gives the input back
/// under the matching weight.
#[test]
fn folded_values_set_the_kind() {
    use lockscope_probes::WaitKind;
    let input = "main;work;pthread_mutex_lock 5\nmain;idle 3\n";
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("in.folded");
    std::fs::write(&path, input).expect("write");
    for (values, kind, weight) in [
        (None, WaitKind::Sample, "count"),
        (Some("events"), WaitKind::Event, "count"),
        (Some("cpu-ns"), WaitKind::OnCpu, "ns"),
        (Some("ns"), WaitKind::Mutex, "ns"),
    ] {
        let lsp = dir.path().join("in.lsp");
        let mut import = lockscope();
        import
            .args(["import", "folded"])
            .arg(&path)
            .arg("-o")
            .arg(&lsp);
        if let Some(values) = values {
            import.args(["--values", values]);
        }
        common::run_ok(&mut import);
        let profile = lockscope_probes::read_profile(&lsp).expect("read");
        assert_eq!(profile.waits[0].kind, kind, "{values:?}");
        let folded = common::run_ok(
            lockscope()
                .arg("export")
                .arg(&lsp)
                .args(["--format", "folded", "--weight", weight]),
        );
        assert_eq!(
            folded, "main;idle 3\nmain;work;pthread_mutex_lock 5\n",
            "{values:?}"
        );
    }
}

/// The demo profile with the `offcpu` probe's data added: one off-CPU wait, per-thread times,
/// and two wakeups (worker-1 waking worker-2, and an interrupt waking worker-1) whose stacks
/// are spread over the profile, so that a probe filter has to renumber them.
fn profile_with_wakeups() -> lockscope_probes::Profile {
    use lockscope_probes::{
        AddressSpace, AttachStatus, Frame, ProbeAttachment, Stack, ThreadTime, TimeClass, WaitKind,
        WaitRecord, WaitStats, WakeupRecord,
    };
    let mut profile = fixtures::demo_profile();
    let (pid, worker_1, worker_2) = (
        profile.threads[0].pid,
        profile.threads[0].tid,
        profile.threads[1].tid,
    );
    profile.metadata.probes.push(ProbeAttachment {
        probe: "offcpu".to_string(),
        hook: "tp_btf/sched_switch".to_string(),
        status: AttachStatus::Attached,
    });
    let wake = profile.stacks.len() as u32;
    profile.stacks.push(Stack {
        space: AddressSpace::Kernel,
        frames: ["try_to_wake_up", "wake_up_q", "futex_wake"]
            .iter()
            .enumerate()
            .map(|(i, name)| Frame {
                function: Some(name.to_string()),
                ..Frame::unsymbolized(0xffff_ffff_8120_0000 + 0x40 * i as u64)
            })
            .collect(),
        truncated: false,
    });
    let stats = |count: u64, total_ns: u64| WaitStats {
        count,
        total_ns,
        max_ns: total_ns,
        ..WaitStats::default()
    };
    profile.waits.push(WaitRecord {
        probe: "offcpu".to_string(),
        kind: WaitKind::OffCpu,
        pid,
        tid: worker_2,
        object: 0,
        operation: "sleeping in futex".to_string(),
        user_stack: Some(2),
        kernel_stack: Some(wake),
        woken_by: None,
        stats: stats(1, 300_000_000),
    });
    profile.wakeups = vec![
        WakeupRecord {
            pid,
            tid: worker_2,
            syscall: Some("futex".to_string()),
            user_stack: Some(1),
            kernel_stack: Some(3),
            waker_pid: pid,
            waker_tid: worker_1,
            waker_name: "worker-1".to_string(),
            waker_user_stack: Some(0),
            waker_kernel_stack: Some(wake),
            stats: stats(2, 400_000_000),
        },
        WakeupRecord {
            pid,
            tid: worker_1,
            syscall: None,
            user_stack: Some(2),
            kernel_stack: None,
            waker_pid: 0,
            waker_tid: 0,
            waker_name: "[interrupt]".to_string(),
            waker_user_stack: None,
            waker_kernel_stack: Some(wake),
            stats: stats(1, 1_000_000),
        },
    ];
    profile.thread_times = [worker_1, worker_2]
        .into_iter()
        .map(|tid| ThreadTime {
            pid,
            tid,
            wall_ns: profile.metadata.duration_ns,
            time_ns: BTreeMap::from([(TimeClass::OnCpu, profile.metadata.duration_ns)]),
            voluntary_switches: 3,
            involuntary_switches: 1,
            woken_ns: Default::default(),
        })
        .collect();
    profile.validate().expect("the test profile is consistent");
    profile
}

/// Runs `lockscope export FILE ARGS...` and returns its standard output and standard error.
fn export_cli(lsp: &Path, args: &[&str]) -> (String, String) {
    let out = lockscope()
        .arg("export")
        .arg(lsp)
        .args(args)
        .output()
        .expect("run export");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "export {args:?}: {stderr}");
    (String::from_utf8(out.stdout).expect("utf-8"), stderr)
}

/// `export --probe offcpu --format json` keeps the wakeups with their stacks (renumbered, but
/// resolving to the same frames), the per-thread times, and the waker threads; the unfiltered
/// JSON is the whole profile; `--format folded --wakeups` writes the wakeup chains; pprof and
/// speedscope, which cannot hold them, say so on stderr.
#[test]
fn exports_keep_the_wakeups() {
    let profile = profile_with_wakeups();
    let dir = tempfile::tempdir().expect("tempdir");
    let lsp = dir.path().join("offcpu.lsp");
    lockscope_probes::write_profile(&profile, &lsp).expect("write profile");

    let (json, _) = export_cli(&lsp, &["--format", "json"]);
    let whole: lockscope_probes::Profile = serde_json::from_str(&json).expect("profile JSON");
    // As read: its offcpu futex sleep has the kind its user stack says (a condvar wait).
    let mut read = profile.clone();
    lockscope_probes::overlap::classify_offcpu_sleeps(&mut read);
    assert_eq!(whole, read, "the unfiltered export is the profile");

    let (json, _) = export_cli(&lsp, &["--format", "json", "--probe", "offcpu"]);
    let offcpu: lockscope_probes::Profile = serde_json::from_str(&json).expect("profile JSON");
    offcpu.validate().expect("every stack reference resolves");
    assert!(offcpu.waits.iter().all(|w| w.probe == "offcpu"));
    assert_eq!(offcpu.waits.len(), 1);
    let original_wait = profile.waits.last().expect("the off-CPU wait");
    assert_ne!(
        offcpu.waits[0].user_stack, original_wait.user_stack,
        "stack ids were renumbered"
    );
    assert_eq!(offcpu.wakeups.len(), profile.wakeups.len());
    let frames = |p: &lockscope_probes::Profile, id| p.stack(id).map(|s| s.frames.clone());
    for (exported, original) in offcpu.wakeups.iter().zip(&profile.wakeups) {
        assert_eq!(exported.stats, original.stats);
        assert_eq!(exported.waker_name, original.waker_name);
        for (e, o) in [
            (exported.user_stack, original.user_stack),
            (exported.kernel_stack, original.kernel_stack),
            (exported.waker_user_stack, original.waker_user_stack),
            (exported.waker_kernel_stack, original.waker_kernel_stack),
        ] {
            assert_eq!(frames(&offcpu, e), frames(&profile, o));
        }
    }
    assert_eq!(offcpu.thread_times, profile.thread_times);
    assert!(
        offcpu.thread_name(profile.threads[0].pid, profile.threads[0].tid) == Some("worker-1"),
        "the waker, which has no off-CPU wait, keeps its name"
    );
    let fold = FoldOptions::default();
    assert_eq!(
        lockscope::analysis::wakeup::wakeup_lines(&offcpu, &fold),
        lockscope::analysis::wakeup::wakeup_lines(&profile, &fold),
        "the chains read the same from the filtered export"
    );

    // Wakeups are the offcpu probe's: another probe's export has none (documented).
    let (json, _) = export_cli(&lsp, &["--format", "json", "--probe", "futex"]);
    let futex: lockscope_probes::Profile = serde_json::from_str(&json).expect("profile JSON");
    assert!(futex.wakeups.is_empty() && futex.thread_times.is_empty());

    let (folded, _) = export_cli(&lsp, &["--format", "folded", "--wakeups"]);
    let expected: Vec<String> = lockscope::analysis::wakeup::wakeup_lines(&profile, &fold);
    assert_eq!(folded.lines().collect::<Vec<_>>(), expected);
    assert!(folded.contains(";--;"), "{folded}");

    for format in ["pprof", "speedscope"] {
        let out = dir.path().join(format!("out.{format}"));
        let (_, stderr) = export_cli(
            &lsp,
            &["--format", format, "-o", out.to_str().expect("utf-8 path")],
        );
        assert!(
            stderr.contains("2 wakeup records are in `--format json`"),
            "{format}: {stderr}"
        );
    }
    let refused = lockscope()
        .arg("export")
        .arg(&lsp)
        .args(["--format", "pprof", "--wakeups"])
        .output()
        .expect("run export");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--wakeups needs --format folded"));
}
