//! Arbitrary text as `perf script` output and as folded stacks: the importers must never panic,
//! whatever they build must be a consistent profile, and a perf import must fold back into
//! lines (every sample it kept has at least its command as a frame).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockscope::analysis::fold::{folded_lines, FoldOptions};
use lockscope::analysis::measure::Weight;
use lockscope::import::{import, ImportFormat, ImportOptions};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for format in [ImportFormat::PerfScript, ImportFormat::Folded] {
        let mut options = ImportOptions::default();
        options.format = format;
        let Ok(profile) = import(text, "fuzz", &options) else {
            continue;
        };
        profile.validate().expect("imported profiles are consistent");
        assert!(
            !profile.waits.is_empty() || format == ImportFormat::Folded,
            "a perf import succeeds only with samples"
        );
        for kernel_stacks in [false, true] {
            for weight in [Weight::Count, Weight::Nanoseconds] {
                let mut fold = FoldOptions::default();
                fold.kernel_stacks = kernel_stacks;
                fold.weight = weight;
                let lines = folded_lines(&profile, &fold);
                // (A perf sample of period 0 weighs nothing, and zero weights are not folded.)
                if weight == Weight::Count && profile.waits.iter().any(|w| w.stats.count > 0) {
                    assert!(!lines.is_empty(), "{format:?}: records but no folded line");
                }
            }
        }
        // The profile survives the file format.
        let mut bytes = Vec::new();
        lockscope_probes::format::write_profile_to(&profile, &mut bytes).expect("write");
        let back = lockscope_probes::format::read_profile_from(&bytes[..]).expect("read back");
        assert_eq!(back, profile);
    }
});
