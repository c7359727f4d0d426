//! Just enough ELF64 (little-endian) reading for unwind tables: program headers (to map file
//! offsets to link-time addresses), named sections (.eh_frame, .debug_frame, .text) and the GNU
//! build-id. Sections are read on demand, so a large binary is never read whole.
//!
//! Every file is the traced program's word, and a hostile program controls its bytes: no
//! offset or size read from a header is trusted before it is checked against the image's size
//! (a section that claims 4 GiB in a file of 4 KiB is an error, not an allocation), and nothing
//! here panics on any input (`fuzz/`, target `unwind_table`).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
const PT_LOAD: u32 = 1;
const PF_X: u64 = 1;
const SHT_NOBITS: u32 = 8;
const SHT_NOTE: u32 = 7;
const SHF_COMPRESSED: u64 = 0x800;
const NT_GNU_BUILD_ID: u32 = 3;
/// Refuse section header tables or sections larger than this, even in a file that large.
const MAX_SECTION_BYTES: u64 = 1 << 30;

/// Where the bytes of an ELF image come from.
pub(crate) enum ElfSource<'a> {
    /// An open file (read with pread, so a shared file position is never moved).
    File(&'a File),
    /// An image in memory (the vDSO, read from the process).
    Memory(&'a [u8]),
}

impl ElfSource<'_> {
    /// Bytes of the image: what no header may claim to reach beyond.
    fn size(&self) -> io::Result<u64> {
        match self {
            // A FIFO or device has no size: nothing is read from it.
            ElfSource::File(file) => Ok(file.metadata()?.len()),
            ElfSource::Memory(bytes) => Ok(bytes.len() as u64),
        }
    }

    /// `len` bytes at `offset` (`what` names them in errors). Checked against the image's size
    /// before anything is allocated: a header is the file's word, and a hostile file claims
    /// gigabytes.
    fn read(&self, what: &str, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let size = self.size()?;
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(invalid(&format!(
                "{what} claims {len} bytes at offset {offset}, beyond the image's {size}"
            )));
        }
        if len > MAX_SECTION_BYTES {
            return Err(invalid(&format!(
                "{what} is {len} bytes, more than the {MAX_SECTION_BYTES} read of one section"
            )));
        }
        match self {
            ElfSource::File(file) => {
                let mut buf = vec![0; len as usize];
                file.read_exact_at(&mut buf, offset)?;
                Ok(buf)
            }
            ElfSource::Memory(bytes) => usize::try_from(offset)
                .ok()
                .and_then(|start| bytes.get(start..start.checked_add(len as usize)?))
                .map(<[u8]>::to_vec)
                .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "beyond the image")),
        }
    }
}

/// A PT_LOAD segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LoadSegment {
    /// File offset of the segment.
    pub offset: u64,
    /// Link-time virtual address of the segment.
    pub vaddr: u64,
    /// Bytes of the segment in the file.
    pub filesz: u64,
    /// PF_X: the segment holds code.
    pub executable: bool,
}

/// Page size that segments are mapped with (the file offset of a mapping is rounded down to it).
const PAGE_SIZE: u64 = 4096;

/// The link-time address of file offset `offset`, the start of a mapping of the file: through
/// the PT_LOAD segment it maps. A mapping starts at a page boundary, so its offset can also lie
/// in the page-rounded tail of the previous segment (lld packs segments in the file): code
/// segments are preferred, then the segment starting last.
pub(crate) fn vaddr_of_offset(loads: &[LoadSegment], offset: u64) -> Option<u64> {
    loads
        .iter()
        .filter(|l| {
            l.offset & !(PAGE_SIZE - 1) <= offset
                && offset < l.offset.saturating_add(l.filesz.max(1))
        })
        .max_by_key(|l| (l.executable, l.offset))
        .map(|l| l.vaddr.wrapping_add(offset).wrapping_sub(l.offset))
}

/// A section header.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    pub name: String,
    pub kind: u32,
    pub flags: u64,
    pub addr: u64,
    pub offset: u64,
    pub size: u64,
}

/// The parsed headers of an ELF image.
pub(crate) struct ElfImage<'a> {
    source: ElfSource<'a>,
    /// PT_LOAD segments.
    pub loads: Vec<LoadSegment>,
    /// Section headers, with names.
    pub sections: Vec<Section>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

impl<'a> ElfImage<'a> {
    /// Reads the ELF header, program headers and section headers.
    pub fn parse(source: ElfSource<'a>) -> io::Result<Self> {
        let header = source.read("the ELF header", 0, 64)?;
        if &header[..4] != ELF_MAGIC || header[4] != ELFCLASS64 || header[5] != ELFDATA2LSB {
            return Err(invalid("not a little-endian ELF64 image"));
        }
        let field = |v: Option<u64>| v.ok_or_else(|| invalid("truncated ELF header"));
        let phoff = field(u64_at(&header, 32))?;
        let shoff = field(u64_at(&header, 40))?;
        let phentsize = field(u16_at(&header, 54).map(u64::from))?;
        let phnum = field(u16_at(&header, 56).map(u64::from))?;
        let shentsize = field(u16_at(&header, 58).map(u64::from))?;
        let shnum = field(u16_at(&header, 60).map(u64::from))?;
        let shstrndx = field(u16_at(&header, 62).map(u64::from))?;

        let mut loads = Vec::new();
        if phnum > 0 && phentsize >= 56 {
            let table = source.read("the program header table", phoff, phentsize * phnum)?;
            for i in 0..phnum as usize {
                let at = i * phentsize as usize;
                if u32_at(&table, at) != Some(PT_LOAD) {
                    continue;
                }
                loads.push(LoadSegment {
                    offset: field(u64_at(&table, at + 8))?,
                    vaddr: field(u64_at(&table, at + 16))?,
                    filesz: field(u64_at(&table, at + 32))?,
                    executable: field(u32_at(&table, at + 4).map(u64::from))? & PF_X != 0,
                });
            }
        }

        let mut sections = Vec::new();
        if shnum > 0 && shentsize >= 64 && shoff != 0 {
            let table = source.read("the section header table", shoff, shentsize * shnum)?;
            let raw: Vec<(u32, Section)> = (0..shnum as usize)
                .filter_map(|i| {
                    let at = i * shentsize as usize;
                    Some((
                        u32_at(&table, at)?,
                        Section {
                            name: String::new(),
                            kind: u32_at(&table, at + 4)?,
                            flags: u64_at(&table, at + 8)?,
                            addr: u64_at(&table, at + 16)?,
                            offset: u64_at(&table, at + 24)?,
                            size: u64_at(&table, at + 32)?,
                        },
                    ))
                })
                .collect();
            let names = raw
                .get(shstrndx as usize)
                .map(|(_, s)| source.read("the section name table", s.offset, s.size))
                .transpose()?
                .unwrap_or_default();
            for (name_offset, mut section) in raw {
                section.name = names
                    .get(name_offset as usize..)
                    .and_then(|n| n.split(|&b| b == 0).next())
                    .map(|n| String::from_utf8_lossy(n).into_owned())
                    .unwrap_or_default();
                sections.push(section);
            }
        }
        Ok(ElfImage {
            source,
            loads,
            sections,
        })
    }

    /// The section named `name`, if present with contents in the image.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections
            .iter()
            .find(|s| s.name == name && s.kind != SHT_NOBITS && s.size > 0)
    }

    /// The bytes of section `name` with its address; `None` when absent or compressed.
    pub fn section_data(&self, name: &str) -> io::Result<Option<(Vec<u8>, u64)>> {
        match self.section(name) {
            Some(s) if s.flags & SHF_COMPRESSED == 0 => Ok(Some((
                self.source
                    .read(&format!("section `{name}`"), s.offset, s.size)?,
                s.addr,
            ))),
            _ => Ok(None),
        }
    }

    /// The libraries this image needs (DT_NEEDED), by name.
    pub fn needed(&self) -> Vec<String> {
        const DT_NEEDED: u64 = 1;
        let (Ok(Some((dynamic, _))), Ok(Some((strings, _)))) =
            (self.section_data(".dynamic"), self.section_data(".dynstr"))
        else {
            return Vec::new();
        };
        dynamic
            .chunks_exact(16)
            .filter_map(|entry| Some((u64_at(entry, 0)?, u64_at(entry, 8)?)))
            .take_while(|&(tag, _)| tag != 0)
            .filter(|&(tag, _)| tag == DT_NEEDED)
            .filter_map(|(_, at)| {
                let name = strings.get(usize::try_from(at).ok()?..)?;
                let name = name.split(|&b| b == 0).next()?;
                Some(String::from_utf8_lossy(name).into_owned())
            })
            .collect()
    }

    /// Link-time address minus file offset of the (first) code segment.
    pub fn code_vaddr_minus_offset(&self) -> Option<i64> {
        self.loads
            .iter()
            .find(|l| l.executable)
            .map(|l| l.vaddr.wrapping_sub(l.offset) as i64)
    }

    /// The GNU build-id (from the first note section that has one).
    pub fn build_id(&self) -> Option<Vec<u8>> {
        self.sections
            .iter()
            .filter(|s| s.kind == SHT_NOTE && s.size < 1 << 16)
            .find_map(|s| {
                let notes = self.source.read("a note section", s.offset, s.size).ok()?;
                let mut at = 0usize;
                while at + 12 <= notes.len() {
                    let namesz = u32_at(&notes, at)? as usize;
                    let descsz = u32_at(&notes, at + 4)? as usize;
                    let kind = u32_at(&notes, at + 8)?;
                    let name_at = at + 12;
                    let desc_at = name_at + namesz.next_multiple_of(4);
                    let name = notes.get(name_at..name_at + namesz)?;
                    if kind == NT_GNU_BUILD_ID && name == b"GNU\0" {
                        return notes.get(desc_at..desc_at + descsz).map(<[u8]>::to_vec);
                    }
                    at = desc_at + descsz.next_multiple_of(4);
                }
                None
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test binary parses: it has .eh_frame, .text, loads and a build-id (Rust links with
    /// one by default on Linux), and the offset of its first load maps to that load's address.
    #[test]
    fn parses_own_executable() {
        let file = File::open("/proc/self/exe").expect("open self");
        let image = ElfImage::parse(ElfSource::File(&file)).expect("parse");
        assert!(image.section(".eh_frame").is_some());
        assert!(image.section(".text").is_some());
        let code = image
            .loads
            .iter()
            .find(|l| l.executable)
            .expect("a code PT_LOAD");
        assert_eq!(vaddr_of_offset(&image.loads, code.offset), Some(code.vaddr));
        assert!(image.needed().iter().any(|n| n.starts_with("libc.so")));
        assert!(image.code_vaddr_minus_offset().is_some());
        let (eh_frame, _) = image
            .section_data(".eh_frame")
            .expect("read")
            .expect("present");
        assert!(!eh_frame.is_empty());
    }

    /// A mapping offset rounded down into the previous segment's last page (lld's layout) maps
    /// through the code segment that the mapping is for.
    #[test]
    fn mapping_offset_in_shared_page() {
        let loads = [
            LoadSegment {
                offset: 0,
                vaddr: 0,
                filesz: 0x195ac,
                executable: false,
            },
            LoadSegment {
                offset: 0x195b0,
                vaddr: 0x1a5b0,
                filesz: 0x4c000,
                executable: true,
            },
        ];
        assert_eq!(vaddr_of_offset(&loads, 0x19000), Some(0x1a000));
        assert_eq!(vaddr_of_offset(&loads, 0), Some(0));
        assert_eq!(vaddr_of_offset(&loads, 0x100000), None);
    }

    /// Garbage is refused with an error, never a panic.
    #[test]
    fn refuses_non_elf() {
        let bytes = vec![0u8; 128];
        assert!(ElfImage::parse(ElfSource::Memory(&bytes)).is_err());
        assert!(ElfImage::parse(ElfSource::Memory(b"\x7fELF")).is_err());
    }
}
