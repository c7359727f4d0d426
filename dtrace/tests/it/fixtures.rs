//! The real DTrace outputs in shared/fixtures/dtrace: every file parses, histograms round-trip,
//! and folded ustack captures match stackcollapse.pl's rules.

use crate::common;

use lockscope_dtrace::parse::{self, BucketLabel, Distribution, Record, Value};
use lockscope_dtrace::{import_capture, TargetOs};

/// Histogram rows read straight from the text, independently of the parser: after a
/// `Distribution` header, until a blank line: (label before the bar, last number).
fn raw_rows(text: &str) -> Vec<Vec<(String, i64)>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<(String, i64)>> = None;
    for line in text.lines() {
        if line.contains(" Distribution ") {
            if let Some(block) = current.take() {
                blocks.push(block);
            }
            current = Some(Vec::new());
            continue;
        }
        if let Some(block) = current.as_mut() {
            if line.trim().is_empty() {
                blocks.push(current.take().unwrap_or_default());
                continue;
            }
            let label = line
                .split(['|', '@'])
                .next()
                .unwrap_or_default()
                .trim()
                .to_string();
            let count = line
                .split_whitespace()
                .last()
                .unwrap_or_default()
                .parse()
                .expect("count");
            block.push((label, count));
        }
    }
    blocks.extend(current);
    blocks
}

fn distributions(output: &parse::Output) -> Vec<&Distribution> {
    output
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Generic(g) => match &g.value {
                Value::Distribution(d) => Some(d),
                Value::Scalar(_) | Value::Traced => None,
            },
            Record::Lockscope(l) => l.histogram.as_ref(),
        })
        .collect()
}

/// Every fixture parses into records (or, for header-only captures, an empty profile) and
/// imports without error, whatever its format.
#[test]
fn every_fixture_parses() {
    let Some(dir) = common::fixtures_dir() else {
        return;
    };
    let files = common::fixture_files(&dir);
    assert!(
        files.len() >= 14,
        "expected the 14 fixture files, found {}",
        files.len()
    );
    for file in files {
        let bytes = std::fs::read(&file).expect("read fixture");
        let output = parse::parse_output(&bytes);
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if name == "only-header-lines.txt" {
            assert!(output.records.is_empty());
            assert_eq!(output.header_lines, 2);
        } else {
            assert!(!output.records.is_empty(), "{name}: no records");
        }
        let profile =
            import_capture(&bytes, Some(TargetOs::MacOs)).unwrap_or_else(|e| panic!("{name}: {e}"));
        profile.validate().expect("consistent profile");
    }
}

/// quantize, lquantize, llquantize (and negative, agghist) blocks keep every row's label and
/// count; quantize blocks round-trip through Log2Histogram; linear ones are not forced into it.
#[test]
fn histograms_round_trip() {
    let Some(dir) = common::fixtures_dir() else {
        return;
    };
    let cases = [
        ("aggs_tst.quantize.d.out", 10, true),
        ("aggs_tst.lquantize.d.out", 10, false),
        ("aggs_tst.llquantnormal.d.out", 1, false),
        ("aggs_tst.negquant.d.out", 7, false),
        ("aggs_tst.multiaggs3.d.out", 2, false),
        ("printa_tst.basics.d.out", 2, false),
        ("aggs_tst.agghist.d.out", 6, false),
    ];
    for (name, blocks, log2) in cases {
        let text =
            std::fs::read_to_string(dir.join("apple-dtrace-tests").join(name)).expect("read");
        let output = parse::parse_output(text.as_bytes());
        let parsed = distributions(&output);
        let raw = raw_rows(&text);
        assert_eq!(parsed.len(), blocks, "{name}: blocks");
        assert_eq!(raw.len(), blocks, "{name}: raw blocks");
        for (d, rows) in parsed.iter().zip(&raw) {
            let as_text: Vec<(String, i64)> = d
                .buckets
                .iter()
                .map(|b| (b.label.to_string(), b.count))
                .collect();
            assert_eq!(&as_text, rows, "{name}");
            if log2 {
                let h = d.to_log2().expect("quantize block");
                let nonzero: Vec<(i64, i64)> = d
                    .buckets
                    .iter()
                    .filter(|b| b.count != 0)
                    .map(|b| match b.label {
                        BucketLabel::At(v) => (v, b.count),
                        ref other => panic!("{name}: label {other}"),
                    })
                    .collect();
                assert_eq!(Distribution::rows_of_log2(&h), nonzero, "{name}");
            }
        }
        if name.contains("lquant") || name.contains("llquant") {
            assert!(
                parsed.iter().all(|d| d.to_log2().is_none()),
                "{name}: linear kept as is"
            );
        }
    }
    // Keys before the blocks: the integer keys of quantize.d.out are kept in order.
    let text = std::fs::read(dir.join("apple-dtrace-tests/aggs_tst.quantize.d.out")).expect("read");
    let keys: Vec<String> = parse::parse_output(&text)
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Generic(g) => g.keys.first().cloned(),
            Record::Lockscope(_) => None,
        })
        .collect();
    let expected: Vec<String> = (0..10).map(|i| (i * 100).to_string()).collect();
    assert_eq!(keys, expected);
}

/// Empty stacks, annotated frames and unresolved kernel frames come through.
#[test]
fn special_stacks() {
    let Some(dir) = common::fixtures_dir() else {
        return;
    };
    let empty =
        std::fs::read(dir.join("apple-dtrace-tests/pid_tst.emptystack.d.out")).expect("read");
    let output = parse::parse_output(&empty);
    let Record::Generic(r) = &output.records[0] else {
        panic!("generic")
    };
    assert!(r.stacks.is_empty());
    assert_eq!(r.value, Value::Scalar(0));

    let annotated = std::fs::read(dir.join("apple-dtrace-tests/i386_ustack_tst.annotated.d.out"))
        .expect("read");
    let mut parser = parse::Parser::new();
    for line in annotated.split(|&b| b == b'\n') {
        parser.feed_bytes(line);
    }
    parser.feed_line("                1");
    let output = parser.finish();
    let Record::Generic(r) = &output.records[0] else {
        panic!("generic")
    };
    assert_eq!(r.stacks[0][0].text, "tst.annotated.exe`baz");
    assert_eq!(r.stacks[0][0].annotation.as_deref(), Some("it's annotated"));

    // The annotation reaches the profile's frame and survives the .lsp format; the name does
    // not carry it, so folding is unchanged.
    let mut capture = annotated.clone();
    capture.extend_from_slice(b"                1\n");
    let profile = import_capture(&capture, Some(TargetOs::MacOs)).expect("import");
    let stack = profile
        .stack(profile.waits[0].user_stack)
        .expect("user stack");
    assert_eq!(
        stack.frames[0].annotation.as_deref(),
        Some("it's annotated")
    );
    assert_eq!(stack.frames[0].display_name(), "tst.annotated.exe`baz");
    let mut lsp = Vec::new();
    lockscope_probes::format::write_profile_to(&profile, &mut lsp).expect("write");
    let read = lockscope_probes::format::read_profile_from(lsp.as_slice()).expect("read");
    assert_eq!(read, profile);

    let bug = std::fs::read(dir.join("inferno/flamegraph-bug.txt")).expect("read");
    let profile = import_capture(&bug, Some(TargetOs::Illumos)).expect("import");
    let wait = &profile.waits[0];
    assert!(
        wait.user_stack.is_none(),
        "a genunix/unix stack is a kernel stack"
    );
    let stack = profile.stack(wait.kernel_stack).expect("kernel stack");
    assert_eq!(
        stack.frames[0].function.as_deref(),
        Some("genunix`segvn_fault")
    );
    assert_eq!(stack.frames[3].address, 0xffff_ffff_fb80_01d6);
}

/// Folded stacks of the ustack captures are exactly what stackcollapse.pl's rules give.
#[test]
fn folded_matches_stackcollapse() {
    let Some(dir) = common::fixtures_dir() else {
        return;
    };
    for name in [
        "rust-names.txt",
        "flamegraph-bug.txt",
        "only-header-lines.txt",
    ] {
        let bytes = std::fs::read(dir.join("inferno").join(name)).expect("read");
        let profile = import_capture(&bytes, None).expect("import");
        let expected = common::stackcollapse(&bytes);
        assert_eq!(common::fold_profile(&profile), expected, "{name}");
        if name == "rust-names.txt" {
            assert!(expected.len() > 3, "the comparison covers real stacks");
            assert!(profile.waits.iter().all(|w| w.probe == "dtrace"));
        }
    }
}

/// A hand-written `stack(), ustack()` capture (kernel frames first, C++ arguments, hex frames,
/// equal stacks after offset stripping) folds as stackcollapse.pl does.
#[test]
fn kernel_and_user_capture_folds_like_stackcollapse() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/capture-kernel-user.txt");
    let bytes = std::fs::read(path).expect("read");
    let profile = import_capture(&bytes, Some(TargetOs::FreeBsd)).expect("import");
    assert_eq!(profile.waits.len(), 3);
    assert!(profile
        .waits
        .iter()
        .all(|w| w.kernel_stack.is_some() && w.user_stack.is_some()));
    let folded = common::fold_profile(&profile);
    assert_eq!(folded, common::stackcollapse(&bytes));
    let expected = "libthr.so.3`thread_start;server`worker(void*);0x7fffdfffe000;server`Cache::lookup;libthr.so.3`__thr_umutex_lock;libthr.so.3`_umtx_op_err;kernel`umtxq_sleep;kernel`_sleep 7";
    assert!(folded.iter().any(|l| l == expected), "{folded:#?}");
}
