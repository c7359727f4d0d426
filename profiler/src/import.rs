//! `lockscope import perf-script` and `import folded`: captures of other tools as profiles, so
//! they join the same reports, diffs and exports.
//!
//! **perf script** (the text `perf script` prints for `perf record -g`): one sample per block,
//! blocks separated by blank lines, `#` lines are comments. The rules are stackcollapse-perf's:
//!
//! - the header line is `COMM PID[/TID] [CPU] TIME: [PERIOD] EVENT: ...`; the command name may hold
//!   spaces (it ends before the first run of whitespace followed by the pid), and spaces in it
//!   become `_`; it becomes the thread's name, the root frame of the folded stacks (the one
//!   deviation: a profile names each thread once, so a thread renamed during the capture, by
//!   exec or PR_SET_NAME, is named by its last name in all its samples, where stackcollapse-perf
//!   names each sample by its own);
//! - a sample with no frame at all folds to `COMM;[no user stack]`, as every record without a
//!   stack does in lockscope's folds (stackcollapse-perf prints `COMM` alone);
//! - only samples of the first event seen are kept (stackcollapse-perf's default event filter);
//! - each indented line is `ADDRESS SYMBOL[+0xOFFSET] (MODULE)`, leaf first; the offset is
//!   dropped; `[unknown]` symbols become `[MODULE-BASENAME]`, or `[unknown]` when the module is
//!   unknown too; `;` becomes `:` and a C++ argument list (from the first `(`, except
//!   `(anonymous namespace)`) is dropped;
//! - every sample counts 1: a record's `count` is its number of samples, its times are zero.
//!
//! Frames in the kernel (module `[kernel.kallsyms]`, or a bracketed kernel module such as
//! `[nf_tables]`; not `[unknown]`, `[vdso]` and other user mappings) form the record's kernel stack, the rest its user stack, as in
//! lockscope's own recordings: `export --format folded --kernel-stacks` then prints the kernel
//! frames above the user frames with FlameGraph's `_[k]` suffix (stackcollapse-perf
//! `--kernel`), and a sample with only kernel frames prints them unsuffixed.
//!
//! **folded** (`frame;frame;leaf VALUE` per line, root first, as stackcollapse-* and
//! `lockscope export --format folded` write): each line becomes a record with a user stack of
//! those frames and no thread (so exporting it folded gives the same lines back, merged and
//! sorted). [`ImportOptions::folded_weight`] says what the values are: numbers of samples
//! (`count`, the default) or nanoseconds of wait (`total_ns`, with a count of 1 per line).
//!
//! Imported records are classified with [`WaitKind::classify_user_wait`] from their frames;
//! their probe is `perf:EVENT` or `folded`.

use crate::fold::Weight;
use anyhow::{bail, Context};
use lockscope_probes::{
    AddressSpace, Frame, Metadata, Profile, Stack, StackId, ThreadInfo, WaitKind, WaitRecord,
    WaitStats,
};
use std::collections::{BTreeMap, HashMap};

/// Formats `lockscope import` reads besides dtrace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ImportFormat {
    /// `perf script` output of a `perf record -g` capture (the default).
    #[default]
    PerfScript,
    /// Folded stacks, one `stack value` per line.
    Folded,
}

/// How to import a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportOptions {
    /// What the capture is. Default: [`ImportFormat::PerfScript`].
    pub format: ImportFormat,
    /// What the values of folded lines measure. Default: [`Weight::Count`] (samples).
    pub folded_weight: Weight,
    /// OS to record in the metadata (`linux`). Default: `None` (left empty for folded input,
    /// `linux` for perf script, which only exists there).
    pub os: Option<String>,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            format: ImportFormat::PerfScript,
            folded_weight: Weight::Count,
            os: None,
        }
    }
}

/// Key of an imported record: (probe, pid, tid, user stack, kernel stack).
type RecordKey = (String, u32, u32, Option<StackId>, Option<StackId>);

/// Builds the profile: stacks are deduplicated by their frames' names and addresses.
#[derive(Default)]
struct Builder {
    stacks: Vec<Stack>,
    stack_ids: HashMap<(AddressSpace, Vec<(u64, String)>), StackId>,
    /// (probe, pid, tid, user stack, kernel stack) → stats and kind.
    records: BTreeMap<RecordKey, (WaitKind, WaitStats)>,
    threads: BTreeMap<(u32, u32), String>,
}

impl Builder {
    /// Interns a stack given leaf first as (address, name) pairs.
    fn stack(&mut self, space: AddressSpace, frames: Vec<(u64, String)>) -> Option<StackId> {
        if frames.is_empty() {
            return None;
        }
        let key = (space, frames);
        if let Some(&id) = self.stack_ids.get(&key) {
            return Some(id);
        }
        let id = self.stacks.len() as StackId;
        self.stacks.push(Stack {
            space,
            frames: key
                .1
                .iter()
                .map(|(address, name)| {
                    let mut frame = Frame::unsymbolized(*address);
                    frame.function = Some(name.clone());
                    frame
                })
                .collect(),
            truncated: false,
        });
        self.stack_ids.insert(key, id);
        Some(id)
    }

    fn add(
        &mut self,
        probe: &str,
        (pid, tid): (u32, u32),
        user: Option<StackId>,
        kernel: Option<StackId>,
        (count, total_ns): (u64, u64),
    ) {
        let names: Vec<String> = user
            .and_then(|id| self.stacks.get(id as usize))
            .map(|s| s.frames.iter().filter_map(|f| f.function.clone()).collect())
            .unwrap_or_default();
        let kind = WaitKind::classify_user_wait(names.iter().map(String::as_str), WaitKind::Wait);
        let entry = self
            .records
            .entry((probe.to_string(), pid, tid, user, kernel))
            .or_insert_with(|| (kind, WaitStats::default()));
        entry.1.count += count;
        entry.1.total_ns = entry.1.total_ns.saturating_add(total_ns);
        entry.1.max_ns = entry.1.max_ns.max(total_ns);
        if total_ns > 0 {
            entry.1.histogram.record_n(total_ns / count.max(1), count);
        }
    }

    fn finish(self, metadata: Metadata) -> Profile {
        let mut events = 0;
        let waits = self
            .records
            .into_iter()
            .map(
                |((probe, pid, tid, user_stack, kernel_stack), (kind, stats))| {
                    events += stats.count;
                    WaitRecord {
                        probe,
                        kind,
                        pid,
                        tid,
                        object: 0,
                        operation: String::new(),
                        user_stack,
                        kernel_stack,
                        stats,
                    }
                },
            )
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
pub fn import(text: &str, source: &str, options: &ImportOptions) -> anyhow::Result<Profile> {
    match options.format {
        ImportFormat::PerfScript => import_perf_script(text, source, options),
        ImportFormat::Folded => import_folded(text, source, options),
    }
}

/// The header of one perf script sample.
struct Header {
    comm: String,
    pid: u32,
    tid: u32,
    event: String,
}

/// Parses `COMM PID[/TID] [CPU] TIME: [PERIOD] EVENT: ...`.
fn parse_header(line: &str) -> Option<Header> {
    let tokens: Vec<(usize, &str)> = line
        .split_whitespace()
        .map(|t| (t.as_ptr() as usize - line.as_ptr() as usize, t))
        .collect();
    // The pid is the first token after the first one that is `PID` or `PID/TID`.
    let (pid_index, pid, tid) = tokens.iter().enumerate().skip(1).find_map(|(i, &(_, t))| {
        let (pid, tid) = t.split_once('/').unwrap_or((t, t));
        let pid: u32 = pid.parse().ok()?;
        let tid: u32 = tid.parse().ok()?;
        Some((i, pid, tid))
    })?;
    let comm = line[..tokens[pid_index].0].trim_end().replace(' ', "_");
    // The event is the first token after the timestamp (`123.456:`) that ends with `:`, skipping
    // a period (digits).
    let time_index = tokens
        .iter()
        .enumerate()
        .skip(pid_index + 1)
        .find(|(_, &(_, t))| t.ends_with(':') && t[..t.len() - 1].contains('.'))
        .map(|(i, _)| i)?;
    let event = tokens
        .iter()
        .skip(time_index + 1)
        .map(|&(_, t)| t)
        .find(|t| !t.chars().all(|c| c.is_ascii_digit()))?
        .trim_end_matches(':')
        .to_string();
    Some(Header {
        comm,
        pid,
        tid,
        event,
    })
}

/// Parses `ADDRESS SYMBOL[+0xOFF] (MODULE)` into (address, folded name).
fn parse_frame(line: &str) -> Option<(u64, String)> {
    let line = line.trim();
    let (address, rest) = line.split_once(char::is_whitespace)?;
    let address = u64::from_str_radix(address, 16).ok()?;
    let rest = rest.trim();
    let (symbol, module) = match rest.rfind(" (") {
        Some(i) if rest.ends_with(')') => (rest[..i].trim(), &rest[i + 2..rest.len() - 1]),
        _ => (rest, "[unknown]"),
    };
    let symbol = match symbol.rsplit_once("+0x") {
        Some((base, off)) if off.chars().all(|c| c.is_ascii_hexdigit()) => base,
        _ => symbol,
    };
    let name = if symbol == "[unknown]" {
        if module == "[unknown]" {
            "[unknown]".to_string()
        } else {
            format!("[{}]", module.rsplit('/').next().unwrap_or(module))
        }
    } else {
        tidy(symbol)
    };
    Some((address, name))
}

/// `;` → `:`, and a C++ argument list is dropped (keeping `(anonymous namespace)`).
fn tidy(symbol: &str) -> String {
    let symbol = symbol.replace(';', ":");
    let mut search = 0;
    while let Some(found) = symbol[search..].find('(') {
        let at = search + found;
        if symbol[at..].starts_with("(anonymous namespace)") {
            search = at + "(anonymous namespace)".len();
            continue;
        }
        return symbol[..at].to_string();
    }
    symbol
}

/// True for frames in the kernel: perf names the kernel's module `[kernel.kallsyms]` and kernel
/// modules `[name]`; the other bracketed names are user-space mappings.
fn is_kernel(line: &str) -> bool {
    let Some(module) = line
        .trim_end()
        .strip_suffix(')')
        .and_then(|l| l.rsplit_once(" (").map(|(_, m)| m))
    else {
        return false;
    };
    const USER_MAPPINGS: [&str; 6] = [
        "[unknown]",
        "[vdso]",
        "[vsyscall]",
        "[heap]",
        "[stack]",
        "[uprobes]",
    ];
    module.starts_with('[')
        && !USER_MAPPINGS.contains(&module)
        && !module.starts_with("[anon")
        && !module.starts_with("[jit")
}

fn import_perf_script(
    text: &str,
    source: &str,
    options: &ImportOptions,
) -> anyhow::Result<Profile> {
    let mut builder = Builder::default();
    let mut first_event: Option<String> = None;
    let mut samples = 0u64;
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            // A frame line without a header (a header we could not parse): skip it.
            continue;
        }
        let header = parse_header(line)
            .with_context(|| format!("{source}:{i}: unrecognized perf script header `{line}`"))?;
        let mut user = Vec::new();
        let mut kernel = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() {
            let frame_line = lines[i];
            i += 1;
            if let Some((address, name)) = parse_frame(frame_line) {
                if is_kernel(frame_line) {
                    kernel.push((address, name));
                } else {
                    user.push((address, name));
                }
            }
        }
        let event = first_event.get_or_insert_with(|| header.event.clone());
        if *event != header.event {
            continue;
        }
        samples += 1;
        let probe = format!("perf:{event}");
        builder
            .threads
            .insert((header.pid, header.tid), header.comm.clone());
        let user = builder.stack(AddressSpace::User, user);
        let kernel = builder.stack(AddressSpace::Kernel, kernel);
        builder.add(&probe, (header.pid, header.tid), user, kernel, (1, 0));
    }
    if samples == 0 {
        bail!("no perf script samples in {source} (expected the output of `perf script`)");
    }
    let os = options.os.as_deref().or(Some("linux"));
    Ok(builder.finish(base_metadata("perf", os, source)))
}

fn import_folded(text: &str, source: &str, options: &ImportOptions) -> anyhow::Result<Profile> {
    let mut builder = Builder::default();
    let mut lines_read = 0;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        let (stack, value) = line
            .rsplit_once(' ')
            .with_context(|| format!("{source}:{}: expected `stack value`", number + 1))?;
        let value: u64 = value.trim().parse().with_context(|| {
            format!(
                "{source}:{}: value `{value}` is not a whole number",
                number + 1
            )
        })?;
        lines_read += 1;
        if value == 0 {
            continue;
        }
        let frames: Vec<(u64, String)> = stack
            .split(';')
            .rev()
            .map(|name| (0, name.to_string()))
            .collect();
        let user = builder.stack(AddressSpace::User, frames);
        let values = match options.folded_weight {
            Weight::Count => (value, 0),
            Weight::Nanoseconds => (1, value),
        };
        builder.add("folded", (0, 0), user, None, values);
    }
    if lines_read == 0 {
        bail!("no folded stacks in {source}");
    }
    Ok(builder.finish(base_metadata("folded", options.os.as_deref(), source)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Headers with spaces in the command, with and without tid, cpu and period parse.
    #[test]
    fn headers() {
        let h = parse_header("perf-exec 4242 12345.678901:          1 cycles:P: ").expect("h");
        assert_eq!((h.comm.as_str(), h.pid, h.tid), ("perf-exec", 4242, 4242));
        assert_eq!(h.event, "cycles:P");
        let h = parse_header("Web Content  100/101 [001] 5.000001:   250000 cpu-clock:ppp: ")
            .expect("h");
        assert_eq!((h.comm.as_str(), h.pid, h.tid), ("Web_Content", 100, 101));
        assert_eq!(h.event, "cpu-clock:ppp");
        let h = parse_header("sh 7 [000] 1.5: sched:sched_switch: prev_comm=sh").expect("h");
        assert_eq!(h.event, "sched:sched_switch");
    }

    /// Frames lose offsets and argument lists; unknown symbols take their module's name.
    #[test]
    fn frames() {
        assert_eq!(
            parse_frame("\t    7f0a1b2c3d4e __libc_start_main+0x80 (/usr/lib/libc.so.6)"),
            Some((0x7f0a1b2c3d4e, "__libc_start_main".to_string()))
        );
        assert_eq!(
            parse_frame("  55d0 [unknown] (/usr/bin/sha256sum)").map(|f| f.1),
            Some("[sha256sum]".to_string())
        );
        assert_eq!(
            parse_frame("  0 [unknown] ([unknown])").map(|f| f.1),
            Some("[unknown]".to_string())
        );
        assert_eq!(tidy("ns::f(int, char*) const"), "ns::f");
        assert_eq!(
            tidy("(anonymous namespace)::g(int)"),
            "(anonymous namespace)::g"
        );
        assert_eq!(tidy("a;b"), "a:b");
    }
}
