//! `lockscope import perf-script` and `import folded`: captures of other tools as profiles, so
//! they join the same reports, diffs and exports.
//!
//! - `perf_script.rs`: the text `perf script` prints for `perf record`, its stacks folded by
//!   inferno's perf collapser;
//! - `folded.rs`: folded stacks (`frame;frame;leaf VALUE` per line), as stackcollapse-* and
//!   `lockscope export --format folded` write.
//!
//! Both build the profile the same way ([`import`]): stacks deduplicated by their frames,
//! records keyed by probe, kind, thread, operation and stack. What cannot be imported is
//! an [`ImportError`] naming the input and, where one line is to blame, that line.

mod folded;
mod perf_script;

use crate::analysis::fold::KERNEL_MODULE;
use lockscope_probes::{
    AddressSpace, Frame, Metadata, Profile, Stack, StackId, ThreadInfo, WaitKind, WaitRecord,
    WaitStats,
};
use std::collections::{BTreeMap, HashMap};
use std::num::ParseIntError;

/// Why a capture could not be imported ([`import`]); `input` is the name it was given, `line`
/// a 1-based line number.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// A folded line without a space between its stack and its value.
    #[error("{input}:{line}: expected `stack value`")]
    FoldedLine {
        /// The input's name.
        input: String,
        /// The line.
        line: usize,
    },
    /// A folded line whose value is not a whole number.
    #[error("{input}:{line}: value `{value}` is not a whole number")]
    FoldedValue {
        /// The input's name.
        input: String,
        /// The line.
        line: usize,
        /// The value as written.
        value: String,
        /// Why it does not parse.
        #[source]
        source: ParseIntError,
    },
    /// Folded input without a single stack.
    #[error("no folded stacks in {input}")]
    NoFoldedStacks {
        /// The input's name.
        input: String,
    },
    /// inferno's perf collapser failed on a sample.
    #[error("{input}:{line}: cannot fold this sample")]
    Collapse {
        /// The input's name.
        input: String,
        /// The sample's header line.
        line: usize,
        /// The collapser's error.
        #[source]
        source: std::io::Error,
    },
    /// The collapser folded a sample into something other than `stack weight`.
    #[error("{input}:{line}: cannot fold this sample: the collapser wrote `{output}`")]
    CollapsedLine {
        /// The input's name.
        input: String,
        /// The sample's header line.
        line: usize,
        /// What the collapser wrote.
        output: String,
        /// Why its weight does not parse, when it has one.
        #[source]
        source: Option<ParseIntError>,
    },
    /// `perf script` text without a sample of the event asked for.
    #[error("no samples of event `{event}` in {input}")]
    NoSamplesOfEvent {
        /// The input's name.
        input: String,
        /// The event asked for.
        event: String,
    },
    /// Text whose first line that is not a comment is not a perf sample header.
    #[error(
        "no perf script samples in {input}: line {line} `{text}` is not a sample header \
         (`COMM [PID/]TID [CPU] [TIME:] [PERIOD] EVENT:`)"
    )]
    NotASampleHeader {
        /// The input's name.
        input: String,
        /// The line.
        line: usize,
        /// What it says.
        text: String,
    },
    /// Text without any perf sample.
    #[error("no perf script samples in {input} (expected the output of `perf script`)")]
    NoPerfSamples {
        /// The input's name.
        input: String,
    },
}

/// Formats `lockscope import` reads besides dtrace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ImportFormat {
    /// `perf script` output of a `perf record` capture (the default).
    #[default]
    PerfScript,
    /// Folded stacks, one `stack value` per line.
    Folded,
}

/// What the values of imported folded stacks measure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FoldedValues {
    /// Numbers of samples (the default; what stackcollapse-* write for sampled profiles):
    /// records of kind [`WaitKind::Sample`].
    #[default]
    Samples,
    /// Numbers of events (summed perf periods of `cycles`, faults...): kind [`WaitKind::Event`].
    Events,
    /// Nanoseconds of wait (lockscope's own `export --format folded`): wait records classified
    /// from their frames, with a count of 1 per line.
    WaitNs,
    /// Nanoseconds of CPU time (folded `cpu-clock` periods): kind [`WaitKind::OnCpu`], with a
    /// count of 1 per line (folded input does not say how many samples a line sums).
    CpuNs,
}

/// How to import a capture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportOptions {
    /// What the capture is. Default: [`ImportFormat::PerfScript`].
    pub format: ImportFormat,
    /// What the values of folded lines measure. Default: [`FoldedValues::Samples`].
    pub folded_values: FoldedValues,
    /// The perf event whose samples to keep: its full name as the header prints it
    /// (`sched:sched_switch`, `cycles:u`) or the name the collapser compares (the part before
    /// the first `:`, `cycles`). Default: `None`, the first event of the capture.
    pub event: Option<String>,
    /// OS to record in the metadata (`linux`). Default: `None` (left empty for folded input,
    /// `linux` for perf script, which only exists there).
    pub os: Option<String>,
}

/// Frames as (name, kernel frame) pairs.
type Frames = Vec<(String, bool)>;

/// Key of an imported record: (probe, kind, pid, tid, operation, user stack).
type RecordKey = (String, WaitKind, u32, u32, String, Option<StackId>);

/// Builds the profile: stacks are deduplicated by their frames.
#[derive(Default)]
struct Builder {
    stacks: Vec<Stack>,
    /// (frame name, kernel frame) lists, leaf first → stack id.
    stack_ids: HashMap<Vec<(String, bool)>, StackId>,
    records: BTreeMap<RecordKey, WaitStats>,
    threads: BTreeMap<(u32, u32), String>,
}

impl Builder {
    /// Interns a user-space stack given leaf first as (name, kernel frame) pairs.
    fn stack(&mut self, frames: Vec<(String, bool)>) -> Option<StackId> {
        if frames.is_empty() {
            return None;
        }
        if let Some(&id) = self.stack_ids.get(&frames) {
            return Some(id);
        }
        let id = StackId::try_from(self.stacks.len()).ok()?;
        self.stacks.push(Stack {
            space: AddressSpace::User,
            frames: frames
                .iter()
                .map(|(name, kernel)| Frame {
                    function: Some(name.clone()),
                    module: kernel.then(|| KERNEL_MODULE.to_string()),
                    ..Frame::unsymbolized(0)
                })
                .collect(),
            truncated: false,
        });
        self.stack_ids.insert(frames, id);
        Some(id)
    }

    /// Adds `count` things (samples, events, waits) weighing `ns` nanoseconds in all.
    fn add(&mut self, key: RecordKey, count: u64, ns: u64) {
        let stats = self.records.entry(key).or_default();
        stats.count = stats.count.saturating_add(count);
        stats.total_ns = stats.total_ns.saturating_add(ns);
        stats.max_ns = stats.max_ns.max(ns);
        if ns > 0 {
            stats.histogram.record_n(ns / count.max(1), count);
        }
    }

    fn finish(self, metadata: Metadata) -> Profile {
        let mut events = 0u64;
        let waits = self
            .records
            .into_iter()
            .map(|((probe, kind, pid, tid, operation, user_stack), stats)| {
                events = events.saturating_add(stats.count);
                WaitRecord {
                    probe,
                    kind,
                    pid,
                    tid,
                    object: 0,
                    operation,
                    user_stack,
                    kernel_stack: None,
                    woken_by: None,
                    stats,
                }
            })
            .collect();
        Profile {
            metadata: Metadata { events, ..metadata },
            threads: self
                .threads
                .into_iter()
                .map(|((pid, tid), name)| ThreadInfo { pid, tid, name })
                .collect(),
            stacks: self.stacks,
            waits,
            ..Profile::default()
        }
    }
}

fn base_metadata(backend: &str, os: Option<&str>, source: &str) -> Metadata {
    Metadata {
        lockscope_version: env!("CARGO_PKG_VERSION").to_string(),
        backend: backend.to_string(),
        os: os.unwrap_or_default().to_string(),
        end_reason: format!("imported from {source}"),
        ..Metadata::default()
    }
}

/// Imports `text` per `options`; `source` names the input in errors and in the metadata.
pub fn import(text: &str, source: &str, options: &ImportOptions) -> Result<Profile, ImportError> {
    match options.format {
        ImportFormat::PerfScript => perf_script::import_perf_script(text, source, options),
        ImportFormat::Folded => folded::import_folded(text, source, options),
    }
}

/// Marks the generic records of an imported DTrace capture (an `@[ustack()] = count()`
/// aggregation and the like: probe [`lockscope_dtrace::GENERIC_PROBE`], counts without times)
/// as [`WaitKind::Sample`]: they count probe firings, not waits. lockscope's own records keep
/// their kinds.
pub fn mark_dtrace_samples(profile: &mut Profile) {
    for record in &mut profile.waits {
        if record.probe == lockscope_dtrace::GENERIC_PROBE
            && record.kind == WaitKind::Wait
            && record.stats.total_ns == 0
        {
            record.kind = WaitKind::Sample;
        }
    }
}
