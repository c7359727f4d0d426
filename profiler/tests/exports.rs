//! Exports for the profiling ecosystem and imports from it: pprof (decoded with a hand-written
//! protobuf subset, totals checked), speedscope JSON, and `import perf-script` / `import folded`
//! checked against stackcollapse-perf's folding rules, restated here.

mod common;
mod fixtures;

use common::*;
use lockscope::fold::FoldOptions;
use lockscope::pprof::PprofOptions;
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
    lockscope::pprof::write_pprof(profile, options, &mut gz).expect("write pprof");
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
            _ => lockscope::fold::NO_USER_STACK.to_string(),
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
    lockscope::speedscope::write_speedscope(&profile, &FoldOptions::default(), &mut out)
        .expect("speedscope");
    let doc: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
    assert_eq!(doc["$schema"], lockscope::speedscope::SCHEMA);
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

/// Folds `perf script` text by stackcollapse-perf's rules, restated:
///
/// 1. samples are blocks separated by blank lines; `#` lines are comments;
/// 2. the header's command name ends before the first token that is `PID` or `PID/TID`, and its
///    spaces become `_`; it is the root frame;
/// 3. the event is the header's last token; only samples of the first event seen count;
/// 4. a frame line is `ADDRESS SYMBOL+0xOFFSET (MODULE)`: the offset is dropped; `[unknown]`
///    becomes `[basename of MODULE]`, or stays `[unknown]` when the module is unknown; `;`
///    becomes `:`; an argument list (from the first `(`) is dropped;
/// 5. frames are listed leaf first and folded root first; every sample counts 1 and equal stacks
///    add up;
/// 6. with `--kernel`, kernel frames (module `[kernel.kallsyms]` or another bracketed name that is
///    not a user mapping: `[unknown]`, `[vdso]`, ...) get the suffix `_[k]` — lockscope's
///    only deviation: a sample with no user frame keeps its kernel frames unsuffixed (its fold
///    rule for a kernel stack standing alone, docs/EXPORTS.md).
fn stackcollapse_perf(text: &str, kernel_suffix: bool) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut first_event: Option<String> = None;
    for block in text.split("\n\n") {
        let mut lines = block
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty());
        let Some(header) = lines.next() else { continue };
        let tokens: Vec<&str> = header.split_whitespace().collect();
        let pid_at = (1..tokens.len())
            .find(|&i| {
                tokens[i]
                    .split('/')
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
            })
            .expect("a pid");
        let comm = tokens[..pid_at].join(" ").replace(' ', "_");
        let event = tokens.last().expect("event").to_string();
        if first_event.get_or_insert(event.clone()) != &event {
            continue;
        }
        let mut user = Vec::new();
        let mut kernel = Vec::new();
        for line in lines {
            let line = line.trim();
            let (_, rest) = line.split_once(' ').expect("address and symbol");
            let open = rest.rfind(" (").expect("module");
            let module = &rest[open + 2..rest.len() - 1];
            let mut symbol = rest[..open].trim().to_string();
            if let Some(plus) = symbol.rfind("+0x") {
                symbol.truncate(plus);
            }
            let name = if symbol == "[unknown]" {
                if module == "[unknown]" {
                    symbol
                } else {
                    format!("[{}]", module.rsplit('/').next().expect("basename"))
                }
            } else {
                let symbol = symbol.replace(';', ":");
                match symbol.find('(') {
                    Some(i) => symbol[..i].to_string(),
                    None => symbol,
                }
            };
            let user_mapping = ["[unknown]", "[vdso]", "[vsyscall]", "[heap]", "[stack]"]
                .contains(&module)
                || module.starts_with("[anon");
            if module.starts_with('[') && !user_mapping {
                kernel.push(name);
            } else {
                user.push(name);
            }
        }
        let mut frames = vec![comm];
        let has_user = !user.is_empty();
        frames.extend(user.into_iter().rev());
        frames.extend(kernel.into_iter().rev().map(|k| {
            if kernel_suffix && has_user {
                k + "_[k]"
            } else {
                k
            }
        }));
        *out.entry(frames.join(";")).or_default() += 1;
    }
    out
}

fn folded_map(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .map(|l| {
            let (stack, value) = l.rsplit_once(' ').expect("folded line");
            (stack.to_string(), value.parse().expect("value"))
        })
        .collect()
}

/// Imports `perf_text` through the command line and exports it folded (with kernel frames).
fn import_and_fold(dir: &Path, perf_text: &str) -> String {
    let input = dir.join("perf.txt");
    std::fs::write(&input, perf_text).expect("write perf text");
    let lsp = dir.join("perf.lsp");
    let out = lockscope()
        .args(["import", "perf-script"])
        .arg(&input)
        .arg("-o")
        .arg(&lsp)
        .output()
        .expect("run import");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = lockscope()
        .args(["export", "--format", "folded", "--kernel-stacks"])
        .arg(&lsp)
        .output()
        .expect("run export");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A captured `perf script` (perf record -g of a shell loop and `ls -R`, kernel and user frames,
/// a kernel-only exec sample) imports to the stacks stackcollapse-perf's rules give.
#[test]
fn perf_script_fixture_folds_like_stackcollapse_perf() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perf-script-sh.txt"),
    )
    .expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let folded = import_and_fold(dir.path(), &text);
    let expected = stackcollapse_perf(&text, true);
    assert!(
        expected.keys().any(|k| k.contains("_[k]")),
        "fixture has kernel frames"
    );
    assert_eq!(folded_map(&folded), expected);
}

/// A fresh `perf record -g` + `perf script` capture imports to the same stacks as the rules say
/// (skips loudly when perf cannot record here).
#[test]
fn perf_script_live_capture_folds_like_stackcollapse_perf() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("perf.data");
    let record = std::process::Command::new("perf")
        .args(["record", "-q", "-g", "-o"])
        .arg(&data)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; ls -R /usr/share/doc >/dev/null",
        ])
        .output();
    let recorded = matches!(&record, Ok(out) if out.status.success());
    if !recorded {
        eprintln!("skipped: perf_script_live_capture: `perf record -g` failed here: {record:?}");
        return;
    }
    let script = std::process::Command::new("perf")
        .args(["script", "-i"])
        .arg(&data)
        .output()
        .expect("perf script");
    assert!(script.status.success());
    let text = String::from_utf8_lossy(&script.stdout).into_owned();
    let folded = import_and_fold(dir.path(), &text);
    assert_eq!(folded_map(&folded), stackcollapse_perf(&text, true));
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
