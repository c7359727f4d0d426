//! Linux only: user frames symbolized by lockscope itself, from the target's mappings.
//!
//! DTrace for Linux symbolizes `ustack()` frames when `END` prints, through the live process:
//! a target that has exited by then (always with `dtrace -c`, and with `-p` when the target
//! ends the recording) leaves bare addresses, and even a live one gets exported symbols only
//! (no separate debug files, no Rust demangling). So the recorder snapshots `/proc/PID/maps`
//! while the target lives ([`MapsSnapshot`]) and, once dtrace has printed, reads every user
//! frame back into a mapped file and file offset and symbolizes it the way the eBPF backend
//! does (blazesym, with debug files and demangling): both backends name the same frames alike.
//!
//! It also ends each user stack where the frame-pointer walk went astray: `ustack()` follows
//! `%rbp`, which code built without frame pointers (Debian's libc, Rust's default) uses as a
//! general register, so the frames after the first such function are addresses outside any
//! executable mapping, or the same one repeated to the frame limit.

use crate::parse::{Output, ParsedFrame, Record};
use blazesym::inspect::source::{Elf as InspectElf, Source as InspectSource};
use blazesym::inspect::Inspector;

use blazesym::symbolize::Symbolizer;
use lockscope_probes::{symbols, Frame};
use std::collections::HashMap;
use std::path::Path;

/// One executable file mapping of the target.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    path: String,
}

impl Mapping {
    fn module_name(&self) -> String {
        Path::new(&self.path)
            .file_name()
            .map_or_else(|| self.path.clone(), |n| n.to_string_lossy().into_owned())
    }
}

/// Every executable file mapping seen in the target's `/proc/PID/maps`, accumulated over the
/// recording (a library unloaded later keeps its entry, so its frames still resolve).
#[derive(Clone, Debug, Default)]
pub struct MapsSnapshot {
    mappings: Vec<Mapping>,
}

impl MapsSnapshot {
    /// Reads `/proc/PID/maps` and adds mappings not seen yet; false when it cannot be read
    /// (the process is gone).
    pub fn refresh(&mut self, pid: u32) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return false;
        };
        for line in text.lines() {
            if let Some(mapping) = parse_maps_line(line) {
                if !self.mappings.contains(&mapping) {
                    self.mappings.push(mapping);
                }
            }
        }
        true
    }

    /// True when no mapping has been seen.
    pub fn is_empty(&self) -> bool {
        self.mappings.is_empty()
    }

    fn find(&self, address: u64) -> Option<&Mapping> {
        // The newest mapping wins: an address range reused after an unmap belongs to it.
        self.mappings
            .iter()
            .rev()
            .find(|m| (m.start..m.end).contains(&address))
    }

    fn by_module(&self, module: &str) -> Option<&Mapping> {
        self.mappings.iter().find(|m| m.module_name() == module)
    }
}

/// The executable file mappings of `/proc/PID/maps` lines.
fn parse_maps_line(line: &str) -> Option<Mapping> {
    let line = symbols::parse_maps_line(line)?;
    if !line.executable || !line.path.starts_with('/') {
        return None;
    }
    Some(Mapping {
        start: line.start,
        end: line.end,
        offset: line.offset,
        path: line.path.trim_end_matches(" (deleted)").to_string(),
    })
}

/// A frame's text as DTrace prints it: a bare address or ``module`symbol(+0xoffset)``.
enum FrameText<'a> {
    Address(u64),
    Symbol {
        module: &'a str,
        symbol: &'a str,
        offset: u64,
    },
}

fn read_frame_text(text: &str) -> Option<FrameText<'_>> {
    let text = text.trim();
    if let Some(hex) = text.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16).ok().map(FrameText::Address);
    }
    let (module, rest) = text.split_once('`')?;
    if let Some(hex) = rest.strip_prefix("0x") {
        // ``module`0xaddr``: DTrace found the module but no symbol.
        return u64::from_str_radix(hex, 16).ok().map(FrameText::Address);
    }
    let (symbol, offset) = match rest.rsplit_once("+0x") {
        Some((symbol, hex)) => (symbol, u64::from_str_radix(hex, 16).ok()?),
        None => (rest, 0),
    };
    Some(FrameText::Symbol {
        module,
        symbol,
        offset,
    })
}

/// Symbolizes user frames from a [`MapsSnapshot`].
pub struct UserSymbolizer<'a> {
    maps: &'a MapsSnapshot,
    symbolizer: Symbolizer,
    inspector: Inspector,
}

impl<'a> UserSymbolizer<'a> {
    /// A symbolizer over `maps`.
    pub fn new(maps: &'a MapsSnapshot) -> Self {
        UserSymbolizer {
            maps,
            symbolizer: Symbolizer::new(),
            inspector: Inspector::new(),
        }
    }

    /// Cuts every user stack of `output` where the frame-pointer walk left the target's code,
    /// and returns the frames lockscope resolved, by frame text (for
    /// [`crate::to_profile_with`]).
    pub fn resolve_output(&self, output: &mut Output) -> HashMap<String, Frame> {
        self.resolve_records(output, None)
    }

    /// [`UserSymbolizer::resolve_output`] for the records of process `pid` alone (`None`:
    /// every record): the maps are that process's.
    pub fn resolve_records(&self, output: &mut Output, pid: Option<u32>) -> HashMap<String, Frame> {
        let stacks = output.records.iter_mut().filter_map(|record| match record {
            Record::Lockscope(record) if pid.is_none_or(|pid| record.pid == pid) => {
                Some(&mut record.user_stack)
            }
            _ => None,
        });
        let mut resolved = HashMap::new();
        self.resolve_stacks(stacks, &mut resolved);
        resolved
    }

    /// Cuts each user stack of `stacks` where the frame-pointer walk left the target's code and
    /// adds the frames lockscope resolves to `resolved`, by frame text (the bottleneck stream's
    /// stacks go through here as the records' do).
    pub fn resolve_stacks<'s>(
        &self,
        stacks: impl Iterator<Item = &'s mut Vec<ParsedFrame>>,
        resolved: &mut HashMap<String, Frame>,
    ) {
        for stack in stacks {
            self.cut_stray_frames(stack);
            for (i, frame) in stack.iter().enumerate() {
                if resolved.contains_key(&frame.text) {
                    continue;
                }
                if let Some(symbolized) = self.resolve(&frame.text, i > 0) {
                    resolved.insert(frame.text.clone(), symbolized);
                }
            }
        }
    }

    /// Ends a stack at its first frame that is no code of the target (a bare address outside
    /// every executable mapping) or that repeats the frame before it: both mean the walk
    /// followed a `%rbp` that was not a frame pointer. The leaf frame is always kept.
    fn cut_stray_frames(&self, frames: &mut Vec<ParsedFrame>) {
        if self.maps.is_empty() {
            return;
        }
        let keep = frames
            .iter()
            .enumerate()
            .skip(1)
            .find(|(i, f)| {
                let stray = matches!(read_frame_text(&f.text), Some(FrameText::Address(a))
                    if self.maps.find(a).is_none());
                stray || frames[i - 1].text == f.text
            })
            .map_or(frames.len(), |(i, _)| i);
        frames.truncate(keep);
    }

    /// The frame of `text`; `is_return` for every frame but the leaf (a return address,
    /// looked up one byte back so that it names the call).
    fn resolve(&self, text: &str, is_return: bool) -> Option<Frame> {
        let (mapping, address, file_offset) = match read_frame_text(text)? {
            FrameText::Address(address) => {
                let mapping = self.maps.find(address)?;
                (mapping, address, address - mapping.start + mapping.offset)
            }
            FrameText::Symbol {
                module,
                symbol,
                offset,
            } => {
                let mapping = self.maps.by_module(module)?;
                // DTrace names a symbol of the module's own tables: a debug file may spell it
                // otherwise (`clock_nanosleep@@GLIBC_2.17`) and gives no file offset.
                let mut elf = InspectElf::new(&mapping.path);
                elf.debug_syms = false;
                let source = InspectSource::Elf(elf);
                let found = self.inspector.lookup(&source, &[symbol]).ok()?;
                let start = found.first()?.first()?.file_offset?;
                let file_offset = start + offset;
                let address = (file_offset + mapping.start).checked_sub(mapping.offset)?;
                (mapping, address, file_offset)
            }
        };
        Some(symbols::file_frame(
            &self.symbolizer,
            Path::new(&mapping.path),
            address,
            Some(mapping.module_name()),
            file_offset,
            is_return,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn marker_for_symbolization() -> u64 {
        std::hint::black_box(7)
    }

    /// A function of this test binary resolves by name from a maps snapshot, given as a bare
    /// address (the target exited) or as DTrace's ``module`symbol+0x..`` text.
    #[test]
    fn resolves_addresses_and_dtrace_symbols() {
        let mut maps = MapsSnapshot::default();
        assert!(maps.refresh(std::process::id()));
        let symbolizer = UserSymbolizer::new(&maps);
        let address = marker_for_symbolization as fn() -> u64 as usize as u64;
        let frame = symbolizer
            .resolve(&format!("0x{address:x}"), false)
            .expect("resolved");
        let name = frame.function.clone().unwrap_or_default();
        assert!(name.ends_with("marker_for_symbolization"), "{name}");
        assert!(frame.module.is_some());
        // DTrace's text names a symbol of the module's symbol table; libc's getpid is there
        // (the debug file may name it by its internal alias, `__GI_getpid`).
        let libc = symbolizer
            .resolve("libc.so.6`getpid+0x0", false)
            .expect("libc is mapped in a test binary");
        let name = libc.function.unwrap_or_default();
        assert!(name.ends_with("getpid"), "{name}");
        assert_eq!(libc.module.as_deref(), Some("libc.so.6"));
        // A versioned symbol (two versions of one function, as glibc keeps for compatibility)
        // that a debug file names `clock_nanosleep@@GLIBC_2.17`, resolved as an address of
        // the same function is.
        let start = symbolizer
            .resolve("libc.so.6`clock_nanosleep+0x0", false)
            .expect("libc's clock_nanosleep by name");
        let by_name = start.function.unwrap_or_default();
        assert!(by_name.ends_with("clock_nanosleep"), "{by_name}");
        let address = libc::clock_nanosleep as *const () as usize as u64;
        let by_address = symbolizer
            .resolve(&format!("0x{address:x}"), false)
            .expect("libc's clock_nanosleep by address");
        assert_eq!(by_address.function.as_deref(), Some(by_name.as_str()));
    }

    /// Stacks end at the first frame outside the target's code or repeating its parent.
    #[test]
    fn stray_frames_are_cut() {
        let maps = MapsSnapshot {
            mappings: vec![Mapping {
                start: 0x1000,
                end: 0x2000,
                offset: 0,
                path: "/bin/x".into(),
            }],
        };
        let frame = |t: &str| ParsedFrame {
            text: t.into(),
            annotation: None,
        };
        let symbolizer = UserSymbolizer::new(&maps);
        let mut frames = vec![
            frame("0x1010"),
            frame("0x1020"),
            frame("0x55aa00"),
            frame("0x1030"),
        ];
        symbolizer.cut_stray_frames(&mut frames);
        assert_eq!(frames.len(), 2);
        let mut frames = vec![frame("0x1010"), frame("0x1020"), frame("0x1020")];
        symbolizer.cut_stray_frames(&mut frames);
        assert_eq!(frames.len(), 2);
        let mut frames = vec![frame("0x9999")];
        symbolizer.cut_stray_frames(&mut frames);
        assert_eq!(frames.len(), 1, "the leaf stays");
    }

    /// Executable file mappings are kept; data, anonymous and special mappings are not.
    #[test]
    fn maps_lines() {
        let line = "7f10a000-7f10b000 r-xp 00028000 fe:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6";
        assert_eq!(
            parse_maps_line(line),
            Some(Mapping {
                start: 0x7f10a000,
                end: 0x7f10b000,
                offset: 0x28000,
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into()
            })
        );
        assert_eq!(parse_maps_line("7f-80 rw-p 0 00:00 0 /x"), None);
        assert_eq!(parse_maps_line("7f-80 r-xp 0 00:00 0 [vdso]"), None);
    }
}
