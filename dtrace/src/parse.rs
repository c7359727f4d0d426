//! Parser of DTrace's text output.
//!
//! Two kinds of input end up in one [`Output`]:
//!
//! - lockscope's own records, framed by `=== lockscope ...` lines (see [`crate::script`]);
//! - generic `printa()` output as dtrace prints it without a format string: stacks
//!   (``module`symbol+0xoff`` frames, one per line; with `stack(), ustack()` keys the kernel
//!   frames come first, then an empty line, then the user frames), followed by a value line
//!   (one space and a 16-wide number) or a `quantize()`/`lquantize()`/`llquantize()` block, with
//!   an empty line between records. The non-quiet header (`CPU     ID   FUNCTION:NAME` and the
//!   probe lines under it) is skipped.
//!
//! The parser never fails: bytes that are not UTF-8 are replaced (lossy), and lines that belong
//! to no record are counted in [`Output::skipped_lines`]. It is fed line by line
//! ([`Parser::feed_line`]), so the recorder streams dtrace's stdout into it.

use lockscope_probes::{Frame, Log2Histogram};

/// Everything parsed from one output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// Fields of the `=== lockscope begin` line (`os`, `format`), when present.
    pub begin: Vec<(String, String)>,
    /// Records in output order.
    pub records: Vec<Record>,
    /// True when the `=== lockscope done` line was seen (lockscope's END clause completed).
    pub done: bool,
    /// Lines of the non-quiet header (`CPU ID FUNCTION:NAME` and probe lines).
    pub header_lines: usize,
    /// Non-empty lines that belong to no record (text printed without a value).
    pub skipped_lines: usize,
}

/// One aggregation record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A record of lockscope's own script.
    Lockscope(LockscopeRecord),
    /// A record of generic `printa()` output.
    Generic(GenericRecord),
}

/// A record framed by `=== lockscope record` ... `=== end`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockscopeRecord {
    /// Catalog probe name (`probe=`).
    pub probe: String,
    /// Wait kind name, or `auto` (`kind=`).
    pub kind: String,
    /// Operation key as printed (`psynch_mutexwait`, `17`, `ulock_wait2/2`).
    pub op: String,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Waited-on object (lock address), 0 when not applicable.
    pub object: u64,
    /// `execname` of the thread.
    pub thread: String,
    /// User stack, leaf first.
    pub user_stack: Vec<ParsedFrame>,
    /// Kernel stack, leaf first, when the family keys by `stack()`.
    pub kernel_stack: Option<Vec<ParsedFrame>>,
    /// `count()`.
    pub count: i64,
    /// `sum()` of nanoseconds, when timed.
    pub total_ns: Option<i64>,
    /// `max()` of nanoseconds, when timed.
    pub max_ns: Option<i64>,
    /// `quantize()` of nanoseconds, when timed.
    pub histogram: Option<Distribution>,
    /// False when the output ended (or a new record began) before `=== end`.
    pub complete: bool,
}

/// A record of generic `printa()` output: stacks and key lines, then a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenericRecord {
    /// Groups of frame lines separated by empty lines, in print order (with `stack(),
    /// ustack()` keys: kernel first). Text keys (`@[execname]`) appear as one-frame groups.
    pub stacks: Vec<Vec<ParsedFrame>>,
    /// Key lines that are plain numbers or text before a value on the same line.
    pub keys: Vec<String>,
    /// The aggregated value.
    pub value: Value,
}

/// An aggregated value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// `count()`, `sum()`, `min()`, `max()`, `avg()`: one number.
    Scalar(i64),
    /// A `quantize()`, `lquantize()` or `llquantize()` block.
    Distribution(Distribution),
    /// No value: stacks printed by the `stack()`/`ustack()` actions (not aggregated), one
    /// record per group of frames.
    Traced,
}

/// A stack frame line, trimmed, with the ustack-helper annotation printed under it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedFrame {
    /// The line without its indentation (``libc.so.1`mutex_lock_impl+0x1a``).
    pub text: String,
    /// Text of an annotation line (`[ ... ]`) under the frame, without the brackets.
    pub annotation: Option<String>,
}

/// A histogram block as printed: its rows with their labels and counts.
///
/// `quantize()` blocks round-trip into [`Log2Histogram`] ([`Distribution::to_log2`]);
/// `lquantize()`/`llquantize()` buckets are linear or log-linear and are kept as they are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Distribution {
    /// Rows in print order, including DTrace's zero rows around the data.
    pub buckets: Vec<Bucket>,
}

/// One row of a histogram block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// The row's label.
    pub label: BucketLabel,
    /// Its count (negative counts exist: `quantize(x, -1)`).
    pub count: i64,
}

/// Label of a histogram row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BucketLabel {
    /// `< N`: underflow bucket of `lquantize`/`llquantize`.
    Below(i64),
    /// `N`: the bucket starting at N.
    At(i64),
    /// `>= N`: overflow bucket of `lquantize`/`llquantize`.
    AtOrAbove(i64),
    /// A key (`agghist` output: one row per key).
    Key(String),
}

impl Distribution {
    /// Sum of the counts.
    pub fn total(&self) -> i64 {
        self.buckets
            .iter()
            .fold(0i64, |sum, b| sum.saturating_add(b.count))
    }

    /// True when every row could come from `quantize()`: plain labels that are 0 or a power of
    /// two (negative powers included). Text alone cannot tell an `lquantize()` whose rows happen
    /// to be 0, 1, 2 from a `quantize()`; lockscope's own records are always `quantize()`.
    pub fn looks_like_quantize(&self) -> bool {
        self.buckets.iter().all(|b| match b.label {
            BucketLabel::At(v) => v == 0 || v.unsigned_abs().is_power_of_two(),
            _ => false,
        })
    }

    /// The histogram as a [`Log2Histogram`], when it is a `quantize()` of non-negative values
    /// with non-negative counts (rows with value -1 and count 0 are DTrace's padding).
    pub fn to_log2(&self) -> Option<Log2Histogram> {
        if !self.looks_like_quantize() {
            return None;
        }
        let mut dense = [0u64; lockscope_probes::hist::SLOTS];
        for b in &self.buckets {
            let BucketLabel::At(value) = b.label else {
                return None;
            };
            if b.count == 0 {
                continue;
            }
            if value < 0 || b.count < 0 {
                return None;
            }
            let slot = &mut dense[Log2Histogram::slot_of(value as u64)];
            *slot = slot.saturating_add(b.count as u64);
        }
        Some(Log2Histogram::from_dense(&dense))
    }

    /// The non-zero rows a [`Log2Histogram`] stands for, as `(value, count)` pairs in the order
    /// `quantize()` prints them: the inverse of [`Distribution::to_log2`].
    pub fn rows_of_log2(histogram: &Log2Histogram) -> Vec<(i64, i64)> {
        histogram
            .buckets()
            .map(|(slot, count)| {
                let value = Log2Histogram::slot_lower_bound(slot);
                (
                    i64::try_from(value).unwrap_or(i64::MAX),
                    i64::try_from(count).unwrap_or(i64::MAX),
                )
            })
            .collect()
    }
}

/// Parses a whole output at once.
pub fn parse_output(bytes: &[u8]) -> Output {
    let mut parser = Parser::new();
    for line in bytes.split(|&b| b == b'\n') {
        parser.feed_bytes(line);
    }
    parser.finish()
}

/// Incremental parser: feed it lines, then [`Parser::finish`].
#[derive(Debug, Default)]
pub struct Parser {
    output: Output,
    /// Inside a lockscope record.
    lockscope: Option<(LockscopeRecord, Section)>,
    /// Generic record under construction.
    groups: Vec<Vec<ParsedFrame>>,
    group: Vec<ParsedFrame>,
    keys: Vec<String>,
    /// A number line that is a value unless a histogram header follows (then it is a key).
    pending_number: Option<(i64, String)>,
    histogram: Option<HistogramReader>,
    /// Just saw the non-quiet header: probe lines follow.
    in_header: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    Fields,
    UserStack,
    KernelStack,
    Histogram,
}

#[derive(Debug)]
struct HistogramReader {
    /// Byte index where the label column ends (end of `value`/`key` in the header).
    label_end: usize,
    keyed: bool,
    distribution: Distribution,
}

impl HistogramReader {
    /// Starts a block if `line` is its header (`value  ---- Distribution ---- count`).
    fn from_header(line: &str) -> Option<Self> {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let is_header = tokens.len() == 5
            && (tokens[0] == "value" || tokens[0] == "key")
            && tokens[1].chars().all(|c| c == '-')
            && tokens[2] == "Distribution"
            && tokens[3].chars().all(|c| c == '-')
            && tokens[4] == "count";
        if !is_header {
            return None;
        }
        let label_end = line.find(tokens[0]).map_or(0, |i| i + tokens[0].len());
        Some(HistogramReader {
            label_end,
            keyed: tokens[0] == "key",
            distribution: Distribution::default(),
        })
    }

    /// Adds a row; false when `line` is not one (the block is over).
    fn add_row(&mut self, line: &str) -> bool {
        let Some(count_token) = line.split_whitespace().next_back() else {
            return false;
        };
        let Ok(count) = count_token.parse::<i64>() else {
            return false;
        };
        let label = match line.get(..self.label_end) {
            Some(label) if line.len() > self.label_end => label.trim(),
            _ => line.split(['|', '@']).next().unwrap_or_default().trim(),
        };
        if label.is_empty() {
            return false;
        }
        let label = if self.keyed {
            BucketLabel::Key(label.to_string())
        } else {
            match parse_value_label(label) {
                Some(label) => label,
                None => return false,
            }
        };
        self.distribution.buckets.push(Bucket { label, count });
        true
    }
}

impl std::fmt::Display for BucketLabel {
    /// The label as DTrace prints it (`< 1`, `1024`, `>= 1000`, a key).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BucketLabel::Below(v) => write!(f, "< {v}"),
            BucketLabel::At(v) => write!(f, "{v}"),
            BucketLabel::AtOrAbove(v) => write!(f, ">= {v}"),
            BucketLabel::Key(key) => f.write_str(key),
        }
    }
}

fn parse_value_label(label: &str) -> Option<BucketLabel> {
    if let Some(rest) = label.strip_prefix(">=") {
        return rest.trim().parse().ok().map(BucketLabel::AtOrAbove);
    }
    if let Some(rest) = label.strip_prefix('<') {
        return rest.trim().parse().ok().map(BucketLabel::Below);
    }
    label.parse().ok().map(BucketLabel::At)
}

fn parse_number_line(line: &str) -> Option<i64> {
    let t = line.trim();
    if t.is_empty() {
        return None;
    }
    t.parse().ok()
}

fn is_header_line(line: &str) -> bool {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    tokens.len() == 3 && tokens[0] == "CPU" && tokens[1] == "ID" && tokens[2] == "FUNCTION:NAME"
}

/// A probe line under the non-quiet header: `  6  29091   :tick-60s` (CPU, ID, FUNCTION:NAME,
/// then whatever the clause printed).
fn is_probe_line(line: &str) -> bool {
    let mut tokens = line.split_whitespace();
    let cpu = tokens.next().is_some_and(|t| t.parse::<u32>().is_ok());
    let id = tokens.next().is_some_and(|t| t.parse::<u32>().is_ok());
    let name = tokens.next().is_some_and(|t| t.contains(':'));
    cpu && id && name
}

fn annotation_of(line: &str) -> Option<&str> {
    let t = line.trim();
    t.strip_prefix("[ ")
        .and_then(|rest| rest.strip_suffix(" ]"))
        .filter(|_| line.starts_with(char::is_whitespace))
}

fn push_frame_line(stack: &mut Vec<ParsedFrame>, line: &str) {
    if let Some(annotation) = annotation_of(line) {
        if let Some(last) = stack.last_mut() {
            last.annotation = Some(annotation.to_string());
            return;
        }
    }
    stack.push(ParsedFrame {
        text: line.trim().to_string(),
        annotation: None,
    });
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|t| t.strip_prefix(name)?.strip_prefix('='))
}

fn parse_u64(text: &str) -> u64 {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap_or(0),
        None => text
            .parse::<u64>()
            .or_else(|_| text.parse::<i64>().map(|v| v as u64))
            .unwrap_or(0),
    }
}

impl Parser {
    /// A parser with nothing fed yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one line given as bytes (without its `\n`; a trailing `\r` is dropped). Bytes that
    /// are not UTF-8 are replaced with U+FFFD.
    pub fn feed_bytes(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.feed_line(&String::from_utf8_lossy(line));
    }

    /// Feeds one line (without its `\n`).
    pub fn feed_line(&mut self, line: &str) {
        if self.lockscope.is_some() {
            self.feed_lockscope(line);
            return;
        }
        if let Some(rest) = line.strip_prefix("=== lockscope ") {
            self.flush_generic();
            self.start_lockscope_line(rest);
            return;
        }
        self.feed_generic(line);
    }

    fn start_lockscope_line(&mut self, rest: &str) {
        if let Some(fields) = rest.strip_prefix("begin") {
            self.output.begin = fields
                .split_whitespace()
                .filter_map(|t| t.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        } else if rest.starts_with("done") {
            self.output.done = true;
        } else if rest.starts_with("record") {
            let record = LockscopeRecord {
                probe: field(rest, "probe").unwrap_or_default().to_string(),
                kind: field(rest, "kind").unwrap_or("auto").to_string(),
                ..LockscopeRecord::default()
            };
            self.lockscope = Some((record, Section::Fields));
        } else {
            self.output.skipped_lines += 1;
        }
    }

    fn feed_lockscope(&mut self, line: &str) {
        let Some((record, section)) = self.lockscope.as_mut() else {
            return;
        };
        if let Some(rest) = line.strip_prefix("=== ") {
            let (name, value) = rest.split_once(' ').unwrap_or((rest, ""));
            match name {
                "end" => {
                    self.finish_lockscope(true);
                    return;
                }
                "lockscope" => {
                    // A new record (or the done line) before `=== end`: the output was cut.
                    self.finish_lockscope(false);
                    self.feed_line(line);
                    return;
                }
                "key" => {
                    // `op` comes first and may contain spaces (a FreeBSD wait message).
                    let op_end = value.rfind(" pid=").unwrap_or(value.len());
                    record.op = value[..op_end]
                        .strip_prefix("op=")
                        .unwrap_or(&value[..op_end])
                        .to_string();
                    let tail = &value[op_end..];
                    record.pid = field(tail, "pid").map_or(0, |v| parse_u64(v) as u32);
                    record.tid = field(tail, "tid").map_or(0, |v| parse_u64(v) as u32);
                    record.object = field(tail, "object").map_or(0, parse_u64);
                }
                "thread" => record.thread = value.to_string(),
                "ustack" => *section = Section::UserStack,
                "kstack" => {
                    record.kernel_stack = Some(Vec::new());
                    *section = Section::KernelStack;
                }
                "count" => record.count = parse_number_line(value).unwrap_or(0),
                "total_ns" => record.total_ns = parse_number_line(value),
                "max_ns" => record.max_ns = parse_number_line(value),
                "histogram" => *section = Section::Histogram,
                _ => self.output.skipped_lines += 1,
            }
            return;
        }
        if line.trim().is_empty() {
            return;
        }
        match section {
            Section::UserStack => push_frame_line(&mut record.user_stack, line),
            Section::KernelStack => {
                push_frame_line(record.kernel_stack.get_or_insert_with(Vec::new), line)
            }
            Section::Histogram => match self.histogram.as_mut() {
                Some(reader) => {
                    if !reader.add_row(line) {
                        self.output.skipped_lines += 1;
                    }
                }
                None => match HistogramReader::from_header(line) {
                    Some(reader) => self.histogram = Some(reader),
                    None => self.output.skipped_lines += 1,
                },
            },
            Section::Fields => self.output.skipped_lines += 1,
        }
    }

    fn finish_lockscope(&mut self, complete: bool) {
        if let Some((mut record, _)) = self.lockscope.take() {
            if let Some(reader) = self.histogram.take() {
                record.histogram = Some(reader.distribution);
            }
            record.complete = complete;
            self.output.records.push(Record::Lockscope(record));
        }
    }

    fn feed_generic(&mut self, line: &str) {
        if let Some((number, text)) = self.pending_number.take() {
            if let Some(reader) = HistogramReader::from_header(line) {
                self.keys.push(text);
                self.histogram = Some(reader);
                return;
            }
            self.finish_generic(Value::Scalar(number));
        }
        if let Some(reader) = self.histogram.as_mut() {
            if reader.add_row(line) {
                return;
            }
            if let Some(reader) = self.histogram.take() {
                self.finish_generic(Value::Distribution(reader.distribution));
            }
        }
        if is_header_line(line) {
            self.flush_generic();
            self.output.header_lines += 1;
            self.in_header = true;
            return;
        }
        if self.in_header {
            if is_probe_line(line) {
                self.output.header_lines += 1;
                return;
            }
            self.in_header = false;
        }
        if line.trim().is_empty() {
            if !self.group.is_empty() {
                let group = std::mem::take(&mut self.group);
                self.groups.push(group);
            }
            return;
        }
        if let Some(reader) = HistogramReader::from_header(line) {
            self.histogram = Some(reader);
            return;
        }
        if let Some(number) = parse_number_line(line) {
            self.pending_number = Some((number, line.trim().to_string()));
            return;
        }
        let trimmed = line.trim();
        if trimmed.ends_with("| count") {
            // Column header of `aggpack` output: its rows end in `| count`.
            self.output.skipped_lines += 1;
            return;
        }
        if self.group.is_empty() {
            // `@[execname] = count()` prints key and value on one line (after the stacks of
            // `@[ustack(), execname]`, which stay this record's stacks).
            if let Some((key, last)) = trimmed.rsplit_once(char::is_whitespace) {
                if let Ok(value) = last.parse::<i64>() {
                    self.keys.push(key.trim_end().to_string());
                    self.finish_generic(Value::Scalar(value));
                    return;
                }
            }
        }
        if !line.starts_with(char::is_whitespace) {
            // DTrace indents stack frames and keys; text at the margin is the script's own
            // printf() output (a title, a timestamp).
            self.output.skipped_lines += 1;
            return;
        }
        push_frame_line(&mut self.group, line);
    }

    fn finish_generic(&mut self, value: Value) {
        let mut stacks = std::mem::take(&mut self.groups);
        if !self.group.is_empty() {
            stacks.push(std::mem::take(&mut self.group));
        }
        let keys = std::mem::take(&mut self.keys);
        self.output.records.push(Record::Generic(GenericRecord {
            stacks,
            keys,
            value,
        }));
    }

    /// Ends any generic record in progress: a pending value or histogram completes it; frames
    /// without a value become [`Value::Traced`] records.
    fn flush_generic(&mut self) {
        if let Some((number, _)) = self.pending_number.take() {
            self.finish_generic(Value::Scalar(number));
        }
        if let Some(reader) = self.histogram.take() {
            self.finish_generic(Value::Distribution(reader.distribution));
        }
        if !self.group.is_empty() {
            let group = std::mem::take(&mut self.group);
            self.groups.push(group);
        }
        for group in std::mem::take(&mut self.groups) {
            self.output.records.push(Record::Generic(GenericRecord {
                stacks: vec![group],
                keys: Vec::new(),
                value: Value::Traced,
            }));
        }
        self.output.skipped_lines += self.keys.len();
        self.keys.clear();
    }

    /// Ends the input and returns what was parsed.
    pub fn finish(mut self) -> Output {
        if self.lockscope.is_some() {
            self.finish_lockscope(false);
        }
        self.flush_generic();
        self.output
    }
}

/// Turns a frame line into a [`Frame`], named the way `stackcollapse.pl` prints it.
///
/// - ``module`symbol+0xoff``: `function` = ``module`symbol``, `function_offset` = `off`,
///   `module` = `module`; at a symbol's start (no offset) `function_offset` is 0.
/// - C++ arguments are removed like `stackcollapse.pl` does: from the last `(` or `<` that
///   follows the first `::` (so `ns::f(int)` becomes `ns::f`, and a Rust
///   `h0123 (.llvm.42)` suffix goes too, leaving the space before it).
/// - ``module`0xaddr`` (no symbol): `function` = the text, `address` = `addr`.
/// - `0xaddr`: an unsymbolized frame.
/// - anything else (ustack-helper text, text keys): `function` = the text.
///
/// `address` is 0 for symbolized frames: DTrace prints symbols, not addresses.
///
/// Difference from `stackcollapse.pl`: it strips everything after the last `+` of a line even
/// when that is no `+0x..` offset, so a frame at the start of a symbol whose name has a `+`
/// (``libc++.1.dylib`f``, `operator+`) loses its end there; here only a real `+0x..` offset is
/// stripped.
pub fn parse_frame(text: &str) -> Frame {
    let text = text.trim();
    if let Some(address) = parse_hex(text) {
        return Frame::unsymbolized(address);
    }
    let (base, offset) = match text.rsplit_once('+') {
        Some((base, off)) => match parse_hex(off) {
            Some(off) => (base, Some(off)),
            None => (text, None),
        },
        None => (text, None),
    };
    let base = strip_cpp_arguments(base);
    let name = if base.is_empty() { "-" } else { base };
    let mut frame = Frame::unsymbolized(0);
    frame.function = Some(name.to_string());
    if let Some((module, symbol)) = name.split_once('`') {
        frame.module = Some(module.to_string());
        if let Some(address) = parse_hex(symbol) {
            frame.address = address;
            frame.module_offset = None;
            frame.function_offset = None;
            return frame;
        }
        frame.function_offset = Some(offset.unwrap_or(0));
    } else {
        frame.function_offset = offset;
    }
    frame
}

fn parse_hex(text: &str) -> Option<u64> {
    let hex = text.strip_prefix("0x")?;
    if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// `stackcollapse.pl`'s `s/(::.*)[(<].*/$1/`.
fn strip_cpp_arguments(name: &str) -> &str {
    let Some(first) = name.find("::") else {
        return name;
    };
    match name[first + 2..].rfind(['(', '<']) {
        Some(i) => &name[..first + 2 + i],
        None => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frame lines split into function, module and offset as stackcollapse.pl names them.
    #[test]
    fn frames() {
        let f = parse_frame("              libc.so.1`mutex_lock_impl+0x1a");
        assert_eq!(f.function.as_deref(), Some("libc.so.1`mutex_lock_impl"));
        assert_eq!(f.module.as_deref(), Some("libc.so.1"));
        assert_eq!(f.function_offset, Some(0x1a));
        let f = parse_frame("genunix`segvn_fault");
        assert_eq!(f.function_offset, Some(0));
        let f = parse_frame("unix`0xfffffffffb8001d6");
        assert_eq!(f.address, 0xffff_ffff_fb80_01d6);
        assert_eq!(f.display_name(), "unix`0xfffffffffb8001d6");
        let f = parse_frame("0x7fff5fc01000");
        assert_eq!(f.display_name(), "0x7fff5fc01000");
        let f = parse_frame("a.out`ns::Foo::bar(int, char const*)+0x10");
        assert_eq!(f.display_name(), "a.out`ns::Foo::bar");
        let f = parse_frame("rg`std::panicking::try::do_call::h08ca (.llvm.155)+0x25");
        assert_eq!(f.display_name(), "rg`std::panicking::try::do_call::h08ca ");
        let f = parse_frame("libc++.1.dylib`std::__1::mutex::lock()");
        assert_eq!(f.display_name(), "libc++.1.dylib`std::__1::mutex::lock");
    }

    /// A quantize block becomes a Log2Histogram and back with the same non-zero rows.
    #[test]
    fn quantize_round_trip() {
        let text = "\n           value  ------------- Distribution ------------- count    \n\
                    \x20              2 |                                         0        \n\
                    \x20              4 |@@@@@@@@@@@@@@@@@@@@                     3        \n\
                    \x20              8 |@@@@@@@@@@@@@@@@@@@@                     3        \n\
                    \x20             16 |                                         0        \n\n";
        let out = parse_output(text.as_bytes());
        assert_eq!(out.records.len(), 1);
        let Record::Generic(GenericRecord {
            value: Value::Distribution(d),
            ..
        }) = &out.records[0]
        else {
            panic!("not a distribution: {out:?}");
        };
        let log2 = d.to_log2().expect("quantize");
        assert_eq!(log2.total_count(), 6);
        assert_eq!(Distribution::rows_of_log2(&log2), vec![(4, 3), (8, 3)]);
    }

    /// Bytes that are not UTF-8 never stop the parser.
    #[test]
    fn invalid_utf8_is_lossy() {
        let out = parse_output(b"\n              a.out`f\xff\xfeoo+0x1\n                3\n");
        assert_eq!(out.records.len(), 1);
        let Record::Generic(r) = &out.records[0] else {
            panic!("generic");
        };
        assert!(r.stacks[0][0].text.contains('\u{fffd}'));
        assert_eq!(r.value, Value::Scalar(3));
    }
}
