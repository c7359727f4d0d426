//! `lockscope export --format pprof`: a profile as pprof's `profile.proto`, gzip-compressed, the
//! format `go tool pprof`, Grafana Pyroscope and other fleet-wide profile stores read.
//!
//! The protobuf is written by hand (the message subset lockscope needs; field numbers from
//! `profile.proto` of github.com/google/pprof) so no code generator is needed:
//!
//! - two sample types, as Go's mutex and block profiles name them: `contentions`/`count` (number
//!   of waits) and `delay`/`nanoseconds` (total wait time, the default sample type); for an
//!   imported capture, `samples`/`count` and `cpu`/`nanoseconds` (sampled CPU time, default
//!   `cpu`), or `events`|`samples`/`count` (the default) and a zero `time`/`nanoseconds`;
//! - one sample per wait record: its locations are the record's user stack, leaf first, with the
//!   kernel stack on top of it when [`FoldOptions::kernel_stacks`] is set; a record without a
//!   user stack has one `[no user stack]` location;
//! - a location per distinct frame; inlined functions are extra `line` entries (innermost first,
//!   as pprof wants);
//! - labels on every sample: `os`, `kernel`, `wait_kind`, `lock_address` (hex), `operation`,
//!   `probe`, `thread` (name) and the numbers `pid`, `tid`, and `concurrency` when
//!   [`PprofOptions::concurrency`] is set (a sweep level);
//! - `time_nanos` and `duration_nanos` from the metadata, `period_type` `contentions`/`count`
//!   with period 1, and comments naming lockscope and the target command.

use super::ExportError;
use crate::analysis::fold::{check_probe, selected, FoldError, FoldOptions, NO_USER_STACK};
use crate::analysis::measure::Measure;
use crate::render::WriteError;
use flate2::write::GzEncoder;
use lockscope_probes::{Frame, Profile, WaitRecord};
use std::collections::HashMap;
use std::io::Write;

/// How to write a pprof profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PprofOptions {
    /// Probe filter and kernel frames (the weight is ignored: both values are written).
    /// Default: [`FoldOptions::default`].
    pub fold: FoldOptions,
    /// Concurrency level to label every sample with (`concurrency`). Default: `None`, no label.
    pub concurrency: Option<u64>,
}

/// Protobuf wire types used here.
const VARINT: u64 = 0;
const LENGTH_DELIMITED: u64 = 2;

fn put_varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push((value as u8) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

fn put_key(buf: &mut Vec<u8>, field: u64, wire_type: u64) {
    put_varint(buf, (field << 3) | wire_type);
}

/// A varint field; zero (the proto3 default) is omitted.
fn put_uint(buf: &mut Vec<u8>, field: u64, value: u64) {
    if value != 0 {
        put_key(buf, field, VARINT);
        put_varint(buf, value);
    }
}

fn put_bytes(buf: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_key(buf, field, LENGTH_DELIMITED);
    put_varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

fn put_packed(buf: &mut Vec<u8>, field: u64, values: &[u64]) {
    if values.is_empty() {
        return;
    }
    let mut packed = Vec::new();
    for &v in values {
        put_varint(&mut packed, v);
    }
    put_bytes(buf, field, &packed);
}

/// The string table: index 0 is the empty string, as pprof requires.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, u64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings::default();
        s.id("");
        s
    }

    fn id(&mut self, text: &str) -> u64 {
        if let Some(&id) = self.index.get(text) {
            return id;
        }
        let id = self.table.len() as u64;
        self.table.push(text.to_string());
        self.index.insert(text.to_string(), id);
        id
    }
}

/// Builds the messages of one profile.
struct Builder {
    strings: Strings,
    /// (name, file) → function id.
    functions: HashMap<(String, String), u64>,
    function_messages: Vec<Vec<u8>>,
    /// (address, names innermost first) → location id.
    locations: HashMap<(u64, Vec<String>), u64>,
    location_messages: Vec<Vec<u8>>,
    sample_messages: Vec<Vec<u8>>,
}

impl Builder {
    fn function(&mut self, name: &str, file: &str) -> u64 {
        let key = (name.to_string(), file.to_string());
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = self.function_messages.len() as u64 + 1;
        let mut msg = Vec::new();
        put_uint(&mut msg, 1, id);
        put_uint(&mut msg, 2, self.strings.id(name));
        put_uint(&mut msg, 3, self.strings.id(name));
        put_uint(&mut msg, 4, self.strings.id(file));
        self.function_messages.push(msg);
        self.functions.insert(key, id);
        id
    }

    /// A location for `frame`: one line per function, innermost (the inlined leaf) first.
    fn location(&mut self, frame: &Frame, suffix: &str) -> u64 {
        let mut names: Vec<String> = frame
            .names_outermost_first()
            .into_iter()
            .map(|n| n + suffix)
            .collect();
        names.reverse();
        let key = (frame.address, names);
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let id = self.location_messages.len() as u64 + 1;
        let mut msg = Vec::new();
        put_uint(&mut msg, 1, id);
        put_uint(&mut msg, 3, frame.address);
        for (i, name) in key.1.iter().enumerate() {
            // The innermost function is where the address is; the inlined call sites' lines
            // belong to the function they are in.
            let (file, line) = if i == 0 {
                (frame.file.clone().unwrap_or_default(), frame.line)
            } else {
                let site = frame.inlined.len().checked_sub(i);
                let call = site.and_then(|s| frame.inlined.get(s));
                (
                    call.and_then(|c| c.file.clone()).unwrap_or_default(),
                    call.and_then(|c| c.line),
                )
            };
            let function = self.function(name, &file);
            let mut line_msg = Vec::new();
            put_uint(&mut line_msg, 1, function);
            put_uint(&mut line_msg, 2, u64::from(line.unwrap_or(0)));
            put_bytes(&mut msg, 4, &line_msg);
        }
        self.location_messages.push(msg);
        self.locations.insert(key, id);
        id
    }

    fn label_str(&mut self, sample: &mut Vec<u8>, key: &str, value: &str) {
        let mut label = Vec::new();
        put_uint(&mut label, 1, self.strings.id(key));
        put_uint(&mut label, 2, self.strings.id(value));
        put_bytes(sample, 3, &label);
    }

    fn label_num(&mut self, sample: &mut Vec<u8>, key: &str, value: u64) {
        let mut label = Vec::new();
        put_uint(&mut label, 1, self.strings.id(key));
        put_uint(&mut label, 3, value);
        put_bytes(sample, 3, &label);
    }

    fn sample(&mut self, profile: &Profile, record: &WaitRecord, options: &PprofOptions) {
        let mut ids = Vec::new();
        if options.fold.kernel_stacks {
            if let Some(stack) = profile.stack(record.kernel_stack) {
                for frame in &stack.frames {
                    ids.push(self.location(frame, crate::analysis::fold::KERNEL_SUFFIX));
                }
            }
        }
        match profile.stack(record.user_stack) {
            Some(stack) if !stack.frames.is_empty() => {
                for frame in &stack.frames {
                    ids.push(self.location(frame, ""));
                }
            }
            _ => {
                let mut frame = Frame::unsymbolized(0);
                frame.function = Some(NO_USER_STACK.to_string());
                ids.push(self.location(&frame, ""));
            }
        }
        let mut msg = Vec::new();
        put_packed(&mut msg, 1, &ids);
        put_packed(&mut msg, 2, &[record.stats.count, record.stats.total_ns]);
        let meta = &profile.metadata;
        self.label_str(&mut msg, "os", &meta.os);
        self.label_str(&mut msg, "kernel", &meta.kernel_release);
        self.label_str(&mut msg, "wait_kind", record.kind.name());
        self.label_str(&mut msg, "lock_address", &format!("{:#x}", record.object));
        self.label_str(&mut msg, "operation", &record.operation);
        self.label_str(&mut msg, "probe", &record.probe);
        let thread = profile
            .thread_name(record.pid, record.tid)
            .unwrap_or(crate::analysis::fold::UNKNOWN_THREAD)
            .to_string();
        self.label_str(&mut msg, "thread", &thread);
        self.label_num(&mut msg, "pid", u64::from(record.pid));
        self.label_num(&mut msg, "tid", u64::from(record.tid));
        if let Some(level) = options.concurrency {
            self.label_num(&mut msg, "concurrency", level);
        }
        self.sample_messages.push(msg);
    }
}

/// The uncompressed `profile.proto` message of `profile`.
pub fn encode_profile(profile: &Profile, options: &PprofOptions) -> Result<Vec<u8>, FoldError> {
    check_probe(profile, &options.fold)?;
    let mut b = Builder {
        strings: Strings::new(),
        functions: HashMap::new(),
        function_messages: Vec::new(),
        locations: HashMap::new(),
        location_messages: Vec::new(),
        sample_messages: Vec::new(),
    };
    let value_type = |b: &mut Builder, kind: &str, unit: &str| {
        let mut msg = Vec::new();
        put_uint(&mut msg, 1, b.strings.id(kind));
        put_uint(&mut msg, 2, b.strings.id(unit));
        msg
    };
    // Sample types named for what the records measure: Go's mutex-profile names for waits,
    // its CPU-profile names for sampled CPU time; bare counts keep a (zero) time column so
    // every sample has the same two values.
    let (count_name, time_name) = match Measure::of(profile, &options.fold) {
        Measure::Waits => ("contentions", "delay"),
        Measure::Holds => ("holds", "held"),
        Measure::Calls => ("calls", "time"),
        Measure::OnCpu => ("samples", "cpu"),
        Measure::Events => ("events", "time"),
        Measure::Samples => ("samples", "time"),
    };
    let contentions = value_type(&mut b, count_name, "count");
    let delay = value_type(&mut b, time_name, "nanoseconds");
    for record in selected(profile, &options.fold) {
        b.sample(profile, record, options);
    }
    let meta = &profile.metadata;
    let comments = [
        b.strings.id(&format!(
            "lockscope {} ({} backend)",
            meta.lockscope_version, meta.backend
        )),
        b.strings.id(&format!(
            "target: {} (pid {})",
            meta.target.command.join(" "),
            meta.target.pid
        )),
    ];
    let default_type = if Measure::of(profile, &options.fold).is_timed() {
        b.strings.id(time_name)
    } else {
        b.strings.id(count_name)
    };

    let mut out = Vec::new();
    put_bytes(&mut out, 1, &contentions);
    put_bytes(&mut out, 1, &delay);
    for msg in &b.sample_messages {
        put_bytes(&mut out, 2, msg);
    }
    for msg in &b.location_messages {
        put_bytes(&mut out, 4, msg);
    }
    for msg in &b.function_messages {
        put_bytes(&mut out, 5, msg);
    }
    for s in &b.strings.table {
        put_bytes(&mut out, 6, s.as_bytes());
    }
    put_uint(&mut out, 9, meta.start_unix_ns);
    put_uint(&mut out, 10, meta.duration_ns);
    put_bytes(&mut out, 11, &contentions);
    put_uint(&mut out, 12, 1);
    put_packed(&mut out, 13, &comments);
    put_uint(&mut out, 14, default_type);
    Ok(out)
}

/// Writes `profile` as a gzip-compressed pprof profile to `out`.
pub fn write_pprof(
    profile: &Profile,
    options: &PprofOptions,
    out: &mut dyn Write,
) -> Result<(), ExportError> {
    let message = encode_profile(profile, options)?;
    let mut gz = GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&message)
        .and_then(|()| gz.finish().map(|_| ()))
        .map_err(WriteError::io("the pprof profile"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Varints encode as protobuf's base-128 little-endian groups.
    #[test]
    fn varints() {
        let mut buf = Vec::new();
        put_varint(&mut buf, 1);
        put_varint(&mut buf, 300);
        put_varint(&mut buf, u64::MAX);
        assert_eq!(&buf[..3], &[0x01, 0xac, 0x02]);
        assert_eq!(buf.len(), 3 + 10);
    }
}
