//! `lockscope import perf-script`: the text `perf script` prints for `perf record`, with or without
//! `-g`. The stacks are folded by inferno's perf collapser (`inferno::collapse::perf`, a port of
//! FlameGraph's stackcollapse-perf.pl tested against FlameGraph's own suite), so every header
//! layout perf has printed (with or without pid/tid, CPU, timestamp and period; event modifiers;
//! tracepoints; commands with spaces) folds exactly as `inferno-collapse-perf` folds it: addresses
//! and offsets stripped, argument lists dropped, `[unknown]` frames named after their module, Java
//! `->` inlined frames marked `_[i]`, kernel frames kept in place. This module only splits the text
//! into samples (blocks separated by blank lines), reads each header's command, pid/tid, event and
//! period (the same way the collapser does), and maps each folded sample into the profile:
//!
//! - only samples of the first event seen are kept (the collapser's default), or those of
//!   [`ImportOptions::event`];
//! - the sample's weight is its period when the header has one, else 1, as the collapser sums
//!   them; what it measures is the record's kind: [`WaitKind::OnCpu`] for `cpu-clock` and
//!   `task-clock` samples with a period (`total_ns` = the period sum, nanoseconds of CPU time;
//!   `count` = samples), [`WaitKind::Event`] for other events with a period (`count` = the
//!   period sum: cycles, faults, switches), [`WaitKind::Sample`] without a period (`count` =
//!   samples);
//! - the whole call chain is the record's user stack (leaf first), kernel frames included in
//!   their place with module `[kernel]` (what the collapser's `--kernel` marks), so a folded
//!   export prints them unsuffixed as the collapser does, and with `--kernel-stacks` suffixed
//!   `_[k]` as `inferno-collapse-perf --kernel` does;
//! - the record's `operation` is the sample's command name (spaces as `_`), the root frame of
//!   its folded stack: a thread renamed during the capture (by exec) keeps each sample under the
//!   name it had then; its probe is `perf:EVENT` (`perf:cpu-clock:ppp`); its thread is the
//!   header's pid and tid (pid 0 when the header has only one number, which perf prints for the
//!   thread);
//! - two departures from inferno's collapser, both where it departs from stackcollapse-perf.pl:
//!   a sample whose stack is empty (a header without frame lines) folds to its command alone,
//!   where inferno drops it; a tracepoint's arguments after its event are not read as a
//!   one-frame stack, so the frames below stay the sample's (jonhoo/inferno#308).
//!

use super::{base_metadata, Builder, Frames, ImportError, ImportOptions};
use crate::analysis::fold::{KERNEL_SUFFIX, PERF_PROBE_PREFIX};
use inferno::collapse::perf::{Folder, Options as PerfOptions};
use inferno::collapse::Collapse;
use lockscope_probes::{Profile, WaitKind};
use std::borrow::Cow;

/// A perf script header, read as inferno's perf collapser reads it.
#[derive(Debug, PartialEq, Eq)]
struct PerfHeader<'a> {
    /// The command, trimmed (spaces inside kept).
    comm: &'a str,
    /// Process id; `None` when the header has only one number (the thread's).
    pid: Option<u32>,
    /// Thread id.
    tid: u32,
    /// The event name the collapser filters on: the word before the first `:` after the pid
    /// (`cycles` for `cycles:u:`, `sched` for `sched:sched_switch:`, empty for a header without
    /// a timestamp); `None` when the header has no `:` at all (the collapser keeps the sample).
    filter_event: Option<&'a str>,
    /// The event as the header prints it, without its final `:` (`cycles:u`).
    event: String,
    /// The period, when the header has one where the collapser reads it.
    period: Option<u64>,
    /// Where the text after the event starts (after its `:` and a space), when there is any:
    /// a one-frame stack on the header line, or a tracepoint's arguments.
    after_event: Option<usize>,
}

/// The command, pid, tid and the end of the `PID[/TID] ` word: the first word of digits (or
/// `digits/digits`) that follows a space and is followed by one. The rule is inferno's
/// (`event_line_parts` in inferno's `collapse/perf.rs`), restated so this module knows the
/// sample's thread, event and period, which the folded output does not carry.
fn pid_word(line: &str) -> Option<(&str, Option<&str>, &str, usize)> {
    let mut word_start = 0;
    let mut digits_only = false;
    let mut previous_was_space = false;
    let mut slash_at = None;
    for (at, c) in line.char_indices() {
        if c == ' ' {
            if digits_only && !previous_was_space {
                let (pid, tid) = match slash_at {
                    Some(slash) => (Some(&line[word_start..slash]), &line[slash + 1..at]),
                    None => (None, &line[word_start..at]),
                };
                let comm = line[..word_start.saturating_sub(1)].trim();
                return Some((comm, pid, tid, at + 1));
            }
            word_start = at + 1;
            digits_only = true;
        } else if c == '/' {
            if digits_only {
                slash_at = Some(at);
            }
        } else if !c.is_ascii_digit() {
            digits_only = false;
            slash_at = None;
        }
        previous_was_space = c == ' ';
    }
    None
}

/// Parses a header line; `None` for a line the collapser does not take for one.
fn parse_header(line: &str) -> Option<PerfHeader<'_>> {
    let (comm, pid, tid, end) = pid_word(line)?;
    let rest = &line[end..];
    // The collapser's reading: the text between the first and the second `:` ends with the
    // event name, preceded by the period when the header has one.
    let mut by_colons = rest.splitn(3, ':').skip(1);
    let (filter_event, period) = match by_colons.next() {
        Some(period_and_event) => {
            let mut words = period_and_event.rsplit(' ');
            let event = words.next();
            (event, words.next().and_then(|w| w.parse::<u64>().ok()))
        }
        None => (None, None),
    };
    // What follows the event: the collapser skips to the first `:` or space in it.
    let after_event = by_colons.next().and_then(|post| {
        let skip = post.find([':', ' ']).map_or(0, |i| i + 1);
        let text = &post[skip..];
        (!text.trim().is_empty()).then(|| line.len() - text.len())
    });
    // The full name, for the probe: the first word ending in `:` that is not a timestamp.
    let event = rest
        .split_whitespace()
        .filter(|w| !w.starts_with('['))
        .find(|w| {
            w.len() > 1
                && w.ends_with(':')
                && !w[..w.len() - 1]
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.')
        })
        .map(|w| w[..w.len() - 1].to_string())
        .or_else(|| filter_event.filter(|e| !e.is_empty()).map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string());
    Some(PerfHeader {
        comm,
        pid: pid.map(|p| p.parse().unwrap_or(0)),
        tid: tid.parse().unwrap_or(0),
        filter_event,
        event,
        period,
        after_event,
    })
}

impl PerfHeader<'_> {
    /// True when this sample is of `wanted` (a full event name or the collapser's name).
    fn is_event(&self, wanted: &str) -> bool {
        self.event == wanted || self.filter_event == Some(wanted)
    }

    /// What the sample's weight measures.
    fn kind(&self) -> WaitKind {
        let base = self.event.split(':').next().unwrap_or_default();
        match self.period {
            Some(_) if base == "cpu-clock" || base == "task-clock" => WaitKind::OnCpu,
            Some(_) => WaitKind::Event,
            None => WaitKind::Sample,
        }
    }
}

/// Length of the Rust hash (`::h` and 16 hex digits, without the colons) inferno's collapser
/// looks for at the end of every symbol.
const RUST_HASH_LENGTH: usize = 17;

/// `line` made safe for inferno's collapser: 0.12 panics on a frame whose symbol is at least
/// [`RUST_HASH_LENGTH`] bytes long with a multi-byte character across its last 17 bytes (it
/// slices the symbol there to look for a Rust hash: `fix_partially_demangled_rust_symbol`).
/// Such a symbol cannot end in a hash, so the collapser would keep it as it is; its non-ASCII
/// characters are written `?` instead, the only way to get it past the collapser.
fn collapser_safe(line: &str) -> Cow<'_, str> {
    // The symbol as the collapser cuts it: after the address word, before the last word (the
    // module in parentheses), trimmed, without a `+0xOFFSET`.
    let trimmed = line.trim_start();
    let Some((_, rest)) = trimmed.split_once(' ') else {
        return Cow::Borrowed(line);
    };
    let Some((function, module)) = rest.rsplit_once(' ') else {
        return Cow::Borrowed(line);
    };
    if !(module.starts_with('(') && module.ends_with(')')) {
        return Cow::Borrowed(line);
    }
    let start = line.len() - rest.len() + (function.len() - function.trim_start().len());
    let function = function.trim();
    let symbol = match function.rfind("+0x") {
        Some(at) if function[at + 3..].chars().all(|c| c.is_ascii_hexdigit()) => &function[..at],
        _ => function,
    };
    if symbol.len() < RUST_HASH_LENGTH || symbol.is_char_boundary(symbol.len() - RUST_HASH_LENGTH) {
        return Cow::Borrowed(line);
    }
    let end = start + symbol.len();
    let ascii: String = line[start..end]
        .chars()
        .map(|c| if c.is_ascii() { c } else { '?' })
        .collect();
    Cow::Owned(format!("{}{ascii}{}", &line[..start], &line[end..]))
}

/// One sample of a perf script capture: its header and the text to fold.
struct PerfSample<'a> {
    /// Line number of the header.
    number: usize,
    header: PerfHeader<'a>,
    /// The header and its frame lines, as the collapser is to read them.
    text: String,
}

/// True when `text` reads as a frame line (`ADDRESS SYMBOL (MODULE)`: a word, then text, then a
/// last word in parentheses), as the collapser requires of one.
fn is_frame_line(text: &str) -> bool {
    let text = text.trim();
    text.split_once(' ').is_some_and(|(_, rest)| {
        rest.rsplit(' ')
            .next()
            .is_some_and(|m| m.len() >= 2 && m.starts_with('(') && m.ends_with(')'))
    })
}

/// The samples of perf script text, cut where the collapser cuts them: a header (the first line
/// that reads as one: lines that do not are skipped, as the collapser skips them) and its frame
/// lines up to a blank line; `#` lines are comments. A header whose event is followed by a frame
/// is a sample of that one frame (older perf's one-line samples), and the lines after it are read
/// as headers again.
///
/// The one departure from the collapser: a tracepoint's arguments after its event
/// (`sched:sched_switch: prev_comm=...`) are not read as a frame, so the frame lines below them
/// stay the sample's stack, as stackcollapse-perf.pl reads them. (inferno's collapser takes the
/// arguments for a one-frame stack and the frame lines for headers, and loses the samples:
/// jonhoo/inferno#308.) The arguments are cut off the header before folding.
///
/// Returns the samples and the first line that was neither a header nor part of a sample.
fn perf_samples(text: &str) -> (Vec<PerfSample<'_>>, Option<(usize, &str)>) {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut samples = Vec::new();
    let mut unread = None;
    let mut i = 0;
    while i < lines.len() {
        let (number, raw) = (i + 1, lines[i]);
        i += 1;
        let line = raw.trim_end();
        if raw.starts_with('#') || line.is_empty() {
            continue;
        }
        let Some(header) = parse_header(line) else {
            unread.get_or_insert((number, line));
            continue;
        };
        let (mut sample_text, one_frame) = match header.after_event {
            Some(at) if is_frame_line(&line[at..]) => (
                format!("{}{}", &line[..at], collapser_safe(&line[at..])),
                true,
            ),
            Some(at) => (line[..at].to_string(), false),
            None => (line.to_string(), false),
        };
        sample_text.push('\n');
        if !one_frame {
            while let Some(&next) = lines.get(i) {
                if !next.starts_with('#') {
                    if next.trim_end().is_empty() {
                        break;
                    }
                    sample_text.push_str(&collapser_safe(next.trim_end()));
                    sample_text.push('\n');
                }
                i += 1;
            }
        }
        samples.push(PerfSample {
            number,
            header,
            text: sample_text,
        });
    }
    (samples, unread)
}

/// Folds one sample with inferno's perf collapser: its frames root first (kernel frames
/// marked) and its weight, or `None` when the sample has no frame. Errors name the sample as
/// `input:line`.
fn collapse_sample(
    block: &str,
    header: &PerfHeader<'_>,
    (input, line): (&str, usize),
) -> Result<Option<(Frames, u64)>, ImportError> {
    let mut options = PerfOptions::default();
    options.annotate_kernel = true;
    // The sample's own event: the collapser keeps it (the choice of event is made here, so the
    // collapser never has to guess one).
    options.event_filter = Some(header.filter_event.unwrap_or_default().to_string());
    options.nthreads = 1;
    let mut folded = Vec::new();
    Folder::from(options)
        .collapse(block.as_bytes(), &mut folded)
        .map_err(|source| ImportError::Collapse {
            input: input.to_string(),
            line,
            source,
        })?;
    let folded = String::from_utf8_lossy(&folded);
    let Some(output) = folded.lines().next() else {
        return Ok(None);
    };
    let collapsed_line = |source| ImportError::CollapsedLine {
        input: input.to_string(),
        line,
        output: output.to_string(),
        source,
    };
    let (stack, weight) = output
        .rsplit_once(' ')
        .ok_or_else(|| collapsed_line(None))?;
    let weight: u64 = weight.parse().map_err(|e| collapsed_line(Some(e)))?;
    let root = header.comm.replace(' ', "_");
    let frames = stack
        .strip_prefix(root.as_str())
        .and_then(|s| s.strip_prefix(';'))
        .unwrap_or(stack);
    let frames = frames
        .split(';')
        .map(|name| match name.strip_suffix(KERNEL_SUFFIX) {
            Some(name) => (name.to_string(), true),
            None => (name.to_string(), false),
        })
        .collect();
    Ok(Some((frames, weight)))
}

pub(super) fn import_perf_script(
    text: &str,
    source: &str,
    options: &ImportOptions,
) -> Result<Profile, ImportError> {
    let mut builder = Builder::default();
    let mut wanted: Option<String> = options.event.clone();
    let mut samples = 0u64;
    let (perf_samples, unread) = perf_samples(text);
    for PerfSample {
        number,
        header,
        text: block,
    } in perf_samples
    {
        // By default the collapser keeps the first event it sees (merging cycles and
        // instructions would mislead); a header without any `:` is kept whatever its event.
        if let Some(event) = header.filter_event {
            let wanted = wanted.get_or_insert_with(|| event.to_string());
            if !header.is_event(wanted) {
                continue;
            }
        }
        let (frames, weight) = match collapse_sample(&block, &header, (source, number))? {
            Some((mut frames, weight)) => {
                frames.reverse();
                (frames, weight)
            }
            // No frame: stackcollapse-perf.pl counts the sample under its command alone.
            None => (Vec::new(), header.period.unwrap_or(1)),
        };
        samples += 1;
        let (pid, tid) = (header.pid.unwrap_or(0), header.tid);
        let comm = header.comm.replace(' ', "_");
        builder.threads.insert((pid, tid), comm.clone());
        let kind = header.kind();
        let user = builder.stack(frames);
        let key = (
            format!("{PERF_PROBE_PREFIX}{}", header.event),
            kind,
            pid,
            tid,
            comm,
            user,
        );
        match kind {
            WaitKind::OnCpu => builder.add(key, 1, weight),
            _ => builder.add(key, weight, 0),
        }
    }
    if samples == 0 {
        let input = source.to_string();
        return Err(match (unread, &options.event) {
            (_, Some(event)) => ImportError::NoSamplesOfEvent {
                input,
                event: event.clone(),
            },
            (Some((line, text)), None) => ImportError::NotASampleHeader {
                input,
                line,
                text: text.to_string(),
            },
            (None, None) => ImportError::NoPerfSamples { input },
        });
    }
    let os = options.os.as_deref().or(Some("linux"));
    Ok(builder.finish(base_metadata("perf", os, source)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::import;

    /// Every header layout perf has printed gives the command, thread, event and period the
    /// collapser reads.
    #[test]
    fn headers() {
        let h = parse_header("perf-exec 4242 12345.678901:          1 cycles:P: ").expect("h");
        assert_eq!((h.comm, h.pid, h.tid), ("perf-exec", None, 4242));
        assert_eq!(
            (h.event.as_str(), h.filter_event),
            ("cycles:P", Some("cycles"))
        );
        assert_eq!(h.period, Some(1));
        let h = parse_header("Web Content  100/101 [001] 5.000001:   250000 cpu-clock:ppp: ")
            .expect("h");
        assert_eq!((h.comm, h.pid, h.tid), ("Web Content", Some(100), 101));
        assert_eq!(
            (h.event.as_str(), h.period),
            ("cpu-clock:ppp", Some(250000))
        );
        assert_eq!(h.kind(), WaitKind::OnCpu);
        let h = parse_header("sh 7 [000] 1.5: sched:sched_switch: prev_comm=sh").expect("h");
        assert_eq!(
            (h.event.as_str(), h.filter_event),
            ("sched:sched_switch", Some("sched"))
        );
        assert_eq!((h.period, h.kind()), (None, WaitKind::Sample));
        // No CPU, no timestamp, no period (older perf, `perf script -F comm,tid,event`).
        let h = parse_header("func_ab 15294 cpu-clock: ").expect("h");
        assert_eq!(
            (h.comm, h.tid, h.event.as_str()),
            ("func_ab", 15294, "cpu-clock")
        );
        assert_eq!((h.filter_event, h.period), (Some(""), None));
        let h = parse_header("java 19983 cycles:").expect("h");
        assert_eq!(
            (h.comm, h.event.as_str(), h.filter_event),
            ("java", "cycles", Some(""))
        );
        let h = parse_header("java  3244 cpu-clock: ").expect("h");
        assert_eq!((h.comm, h.tid), ("java", 3244));
        let h = parse_header("node-v011 31912 cpu-clock: ").expect("h");
        assert_eq!((h.comm, h.tid), ("node-v011", 31912));
        let h = parse_header("vote   913    72.176760:     257597 cycles:uppp:").expect("h");
        assert_eq!(
            (h.event.as_str(), h.period, h.kind()),
            ("cycles:uppp", Some(257597), WaitKind::Event)
        );
        assert_eq!(parse_header("\t7f0a1b2c3d4e main+0x10 (/bin/x)"), None);
    }

    /// A symbol with a multi-byte character across its last 17 bytes (on which inferno's
    /// collapser panics) is folded with `?` for its non-ASCII characters; other lines pass as
    /// they are.
    #[test]
    fn symbols_the_collapser_cannot_slice() {
        let line = "\t  55d0 caf\u{e9}_\u{12796}_sixteen_bytes+0x1f (/bin/x)";
        assert_eq!(
            collapser_safe(line),
            "\t  55d0 caf?_?_sixteen_bytes+0x1f (/bin/x)"
        );
        let fine = "\t  55d0 caf\u{e9}::run::h0123456789abcdef (/bin/\u{e9})";
        assert_eq!(collapser_safe(fine), fine);
        assert_eq!(
            collapser_safe("\t  55d0 short\u{e9} (m)"),
            "\t  55d0 short\u{e9} (m)"
        );
        let text = format!("sh 1 1.0: 1 cpu-clock:\n{line}\n\nsh 1 1.0: 1 cpu-clock:  1 caf\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}xy (m)\n");
        let profile = import(&text, "test", &ImportOptions::default()).expect("import");
        let lines = crate::analysis::fold::folded_lines(
            &profile,
            &crate::analysis::fold::FoldOptions::default(),
        );
        assert_eq!(lines, ["sh;caf?????????xy 1", "sh;caf?_?_sixteen_bytes 1"]);
    }

    /// Samples are cut where the collapser cuts them: comments are skipped, a one-line sample
    /// ends at its header, and a tracepoint's arguments are cut off.
    #[test]
    fn samples() {
        let text = "# header\n\na 1 x:\n\tf (m)\n# c\n\tg (m)\n\n\nnot a header\n\
                    b 2 1.0: 1 cycles:  ffff f (m)\nc 3 1.0: sched:sched_switch: prev_comm=c\n\t1 h (m)\n";
        let (samples, unread) = perf_samples(text);
        let read: Vec<(usize, &str)> = samples
            .iter()
            .map(|s| (s.number, s.text.as_str()))
            .collect();
        assert_eq!(
            read,
            [
                (3, "a 1 x:\n\tf (m)\n\tg (m)\n"),
                (10, "b 2 1.0: 1 cycles:  ffff f (m)\n"),
                (11, "c 3 1.0: sched:sched_switch:\n\t1 h (m)\n"),
            ]
        );
        assert_eq!(unread, Some((9, "not a header")));
    }
}
