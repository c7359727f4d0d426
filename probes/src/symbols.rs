//! What both backends' Linux symbolizers share (the eBPF backend's, and the DTrace driver's on
//! Linux, which symbolizes user frames itself): parsing `/proc/PID/maps` lines, and turning a
//! blazesym symbol into a profile [`Frame`]. Linux only; the rest of this crate is OS-neutral.

use crate::profile::{Frame, InlinedFrame};
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Sym, Symbolized, Symbolizer};
use std::path::Path;

/// A line of `/proc/PID/maps`, parsed.
#[derive(Debug, PartialEq, Eq)]
pub struct MapsLine<'a> {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The mapping is executable.
    pub executable: bool,
    /// File offset mapped at `start`.
    pub offset: u64,
    /// Inode of the mapped file (0: not a file).
    pub inode: u64,
    /// Path (`/usr/lib/x86_64-linux-gnu/libc.so.6`, with ` (deleted)` when it was), pseudo-name
    /// (`[vdso]`), or empty for anonymous memory.
    pub path: &'a str,
}

/// Parses one line of `/proc/PID/maps` (`start-end perms offset dev inode path`); `None` for a
/// malformed line.
pub fn parse_maps_line(line: &str) -> Option<MapsLine<'_>> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let _device = fields.next()?;
    let inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start();
    Some(MapsLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        offset: u64::from_str_radix(offset, 16).ok()?,
        inode: inode.parse().ok()?,
        path,
    })
}

/// The frame of `address` that blazesym found in `sym` (looked up `adjust` bytes before the
/// address: a return address's call), with its source location and inlined functions. Its
/// module is left to the caller, which knows the mapping.
pub fn frame_from_sym(address: u64, sym: &Sym<'_>, adjust: u64) -> Frame {
    let (file, line) = code_location(sym.code_info.as_deref());
    Frame {
        address,
        function: Some(sym.name.to_string()),
        function_offset: Some(sym.offset as u64 + adjust),
        module: None,
        module_offset: None,
        file,
        line,
        inlined: sym
            .inlined
            .iter()
            .map(|inlined| {
                let (file, line) = code_location(inlined.code_info.as_ref());
                InlinedFrame {
                    function: inlined.name.to_string(),
                    file,
                    line,
                }
            })
            .collect(),
        annotation: None,
    }
}

/// The user frame of `address`, which is `file_offset` in the ELF file at `path` (named
/// `module` in frames), symbolized with `symbolizer` when it can be; `is_return` for every frame
/// but the leaf.
pub fn file_frame(
    symbolizer: &Symbolizer,
    path: &Path,
    address: u64,
    module: Option<String>,
    file_offset: u64,
    is_return: bool,
) -> Frame {
    // A return address points after its call, which may be the first instruction of the next
    // function or line: look the call itself up. A signal trampoline is "returned to" at its
    // first instruction, and the byte before it (glibc's CFI covers a nop there) belongs to no
    // symbol: then the address itself.
    let adjust = u64::from(is_return && file_offset > 0);
    let source = Source::Elf(Elf::new(path));
    let lookup = |adjust: u64| match symbolizer
        .symbolize_single(&source, Input::FileOffset(file_offset - adjust))
    {
        Ok(Symbolized::Sym(sym)) => Some(frame_from_sym(address, &sym, adjust)),
        _ => None,
    };
    let mut frame = lookup(adjust)
        .or_else(|| if adjust > 0 { lookup(0) } else { None })
        .unwrap_or_else(|| Frame::unsymbolized(address));
    frame.module = module;
    frame.module_offset = Some(file_offset);
    frame
}

fn code_location(info: Option<&CodeInfo<'_>>) -> (Option<String>, Option<u32>) {
    match info {
        Some(info) => (Some(info.to_path().display().to_string()), info.line),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines with and without a path parse; permissions and hex fields are read right; a
    /// path keeps its spaces.
    #[test]
    fn parses_maps_lines() {
        let line = "7f2a1c028000-7f2a1c17d000 r-xp 00028000 fe:01 1837 \
                    /usr/lib/x86_64-linux-gnu/libc.so.6";
        assert_eq!(
            parse_maps_line(line),
            Some(MapsLine {
                start: 0x7f2a_1c02_8000,
                end: 0x7f2a_1c17_d000,
                executable: true,
                offset: 0x28000,
                inode: 1837,
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6",
            })
        );
        let anon = parse_maps_line("7ffd1000-7ffd3000 rw-p 00000000 00:00 0").expect("anon");
        assert_eq!(anon.path, "");
        assert!(!anon.executable);
        let vdso =
            parse_maps_line("7ffd5000-7ffd7000 r-xp 00000000 00:00 0                  [vdso]")
                .expect("vdso");
        assert_eq!(vdso.path, "[vdso]");
        let spaced = parse_maps_line("7f-80 r-xp 0 fe:01 12 /opt/a b.so").expect("spaced");
        assert_eq!(spaced.path, "/opt/a b.so");
        assert_eq!(parse_maps_line("not a maps line"), None);
    }
}
