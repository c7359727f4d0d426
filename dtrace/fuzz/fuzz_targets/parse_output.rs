//! Arbitrary bytes as DTrace output: the parser, the importer, the frame parser and the stderr
//! classifier must never panic, and whatever they build must be a consistent profile.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockscope_dtrace::parse::{self, Parser, Record, Value};
use lockscope_dtrace::{import_capture, recorder, to_profile, TargetOs};

fuzz_target!(|data: &[u8]| {
    // Whole input at once, and the same input streamed line by line: same result.
    let output = parse::parse_output(data);
    let mut streamed = Parser::new();
    for line in data.split(|&b| b == b'\n') {
        streamed.feed_bytes(line);
    }
    assert_eq!(
        streamed.finish(),
        output,
        "streaming and whole-input parses differ"
    );

    // Histograms: quantize blocks convert to Log2Histogram and back without panicking.
    for record in &output.records {
        let distribution = match record {
            Record::Generic(r) => match &r.value {
                Value::Distribution(d) => Some(d),
                _ => None,
            },
            Record::Lockscope(r) => r.histogram.as_ref(),
        };
        if let Some(d) = distribution {
            let _ = d.total();
            if let Some(log2) = d.to_log2() {
                let _ = parse::Distribution::rows_of_log2(&log2);
            }
        }
    }

    // The profile built from it refers only to stacks it has.
    for os in [None, Some(TargetOs::MacOs), Some(TargetOs::FreeBsd)] {
        let profile = to_profile(&output, os, Some(3));
        assert!(profile.validate().is_ok(), "inconsistent profile");
    }
    if let Ok(profile) = import_capture(data, Some(TargetOs::Illumos)) {
        assert!(profile.validate().is_ok(), "inconsistent imported profile");
    }

    // Every line as a frame, and as dtrace's stderr.
    let text = String::from_utf8_lossy(data);
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    for line in &lines {
        let frame = parse::parse_frame(line);
        let _ = frame.display_name();
        let _ = lockscope_dtrace::canonical_wait_frame(line);
    }
    let diagnosis = recorder::diagnose(&lines);
    let _ = diagnosis.losses.lost_events();
});
