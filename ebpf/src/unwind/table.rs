//! Compact unwind tables from an ELF image's CFI (.eh_frame, then .debug_frame for what it does
//! not cover), parsed with gimli: one rule per address range, sorted, with explicit gaps where no
//! FDE covers an address. The BPF unwinder binary-searches them (`bpf/unwind_lookup.bpf.h`).

use super::elf::ElfImage;
use super::x86_64;
use crate::skel::shared::types::{unwind_cfa_kind as Kind, unwind_constants};
use gimli::{
    BaseAddresses, CieOrFde, DebugFrame, EhFrame, LittleEndian, UnwindContext, UnwindSection,
};
use std::io;

/// How a row computes the CFA: `enum unwind_cfa_kind` of `bpf/unwind.h`, its values taken from
/// the skeleton (stored in a row's `u8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum CfaKind {
    /// No CFI: frame pointers.
    None = Kind::LKS_CFA_NONE.0 as u8,
    /// CFA = SP + offset.
    Sp = Kind::LKS_CFA_SP.0 as u8,
    /// CFA = FP + offset.
    Fp = Kind::LKS_CFA_FP.0 as u8,
    /// Outermost frame.
    End = Kind::LKS_CFA_END.0 as u8,
    /// Signal trampoline.
    Signal = Kind::LKS_CFA_SIGNAL.0 as u8,
    /// A rule the BPF unwinder cannot follow.
    Unsupported = Kind::LKS_CFA_UNSUPPORTED.0 as u8,
}

impl CfaKind {
    /// The kind stored as `value` (a row's `kind`, a cached table's byte).
    pub fn from_u8(value: u8) -> Option<CfaKind> {
        [
            CfaKind::None,
            CfaKind::Sp,
            CfaKind::Fp,
            CfaKind::End,
            CfaKind::Signal,
            CfaKind::Unsupported,
        ]
        .into_iter()
        .find(|kind| *kind as u8 == value)
    }
}

/// The unwind rule of one address range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    pub kind: CfaKind,
    /// CFA offset from SP or FP.
    pub cfa_offset: i16,
    /// 0: FP unchanged; else FP saved at CFA + 8 * fp_offset8.
    pub fp_offset8: i8,
}

impl Rule {
    /// A rule with no offsets.
    pub fn of_kind(kind: CfaKind) -> Rule {
        Rule {
            kind,
            cfa_offset: 0,
            fp_offset8: 0,
        }
    }
}

/// The unwind table of one ELF image: rules by address, addresses relative to `base`.
#[derive(Clone, Debug, Default)]
pub(crate) struct CompactTable {
    /// Link-time address that row addresses are relative to (the lowest FDE start).
    pub base: u64,
    /// `(address - base, rule)`, sorted by address; each rule holds up to the next row.
    pub rows: Vec<(u32, Rule)>,
}

/// One FDE's rows, before merging.
struct FdeRows {
    start: u64,
    end: u64,
    rows: Vec<(u64, Rule)>,
}

/// Why a table could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TableError {
    /// The image could not be read.
    #[error("failed to read the ELF image")]
    Io(#[from] io::Error),
    /// The CFI spans more than 4 GiB (row addresses are 32-bit).
    #[error("unwind information spans more than 4 GiB")]
    TooLarge,
    /// More rows than the BPF unwinder's array holds.
    #[error("unwind information has more than {MAX_ROWS} rows")]
    TooManyRows,
    /// Evaluating the CFI took more steps than its size justifies (a CIE whose instructions
    /// every FDE replays, FDEs that point back at a huge CIE).
    #[error("unwind information takes more than {0} steps to evaluate")]
    TooMuchWork(u64),
}

/// Most rows of one table: `unwind_rows` holds no more (LKS_UNWIND_ROWS of `bpf/unwind.h`).
const MAX_ROWS: usize = 1 << 21;
/// Steps (CFI bytes replayed, rows made) allowed per byte of CFI, and on top: a real file's
/// CIEs are a few bytes that each FDE replays once, so it takes about 2 steps a byte; a hostile
/// one that makes every FDE replay a large CIE runs out of steps instead of time.
const STEPS_PER_BYTE: u64 = 16;
const BASE_STEPS: u64 = 1 << 20;

/// What evaluating one image's CFI may still do.
struct Budget {
    steps_left: u64,
    limit: u64,
    rows: usize,
}

impl Budget {
    fn new(cfi_bytes: u64) -> Budget {
        let limit = cfi_bytes
            .saturating_mul(STEPS_PER_BYTE)
            .saturating_add(BASE_STEPS);
        Budget {
            steps_left: limit,
            limit,
            rows: 0,
        }
    }

    fn spend(&mut self, steps: u64) -> Result<(), TableError> {
        self.steps_left = self
            .steps_left
            .checked_sub(steps)
            .ok_or(TableError::TooMuchWork(self.limit))?;
        Ok(())
    }

    fn add_row(&mut self) -> Result<(), TableError> {
        self.spend(1)?;
        self.rows += 1;
        if self.rows > MAX_ROWS {
            return Err(TableError::TooManyRows);
        }
        Ok(())
    }
}

/// Builds the table of `image`. An image without CFI gives an empty table; FDEs that fail to
/// parse are skipped (their addresses fall back to frame pointers). Time and memory are bounded
/// by the size of the CFI ([`Budget`]), whatever it says.
pub(crate) fn build_table(image: &ElfImage<'_>) -> Result<CompactTable, TableError> {
    let text = image.section(".text").map_or(0, |s| s.addr);
    let eh_frame = image.section_data(".eh_frame")?;
    let debug_frame = image.section_data(".debug_frame")?;
    let cfi_bytes = [&eh_frame, &debug_frame]
        .iter()
        .filter_map(|s| s.as_ref().map(|(bytes, _)| bytes.len() as u64))
        .sum();
    let mut budget = Budget::new(cfi_bytes);
    let mut fdes = Vec::new();
    if let Some((bytes, addr)) = &eh_frame {
        let mut section = EhFrame::new(bytes, LittleEndian);
        section.set_address_size(8);
        let mut bases = BaseAddresses::default().set_eh_frame(*addr).set_text(text);
        if let Some(hdr) = image.section(".eh_frame_hdr") {
            bases = bases.set_eh_frame_hdr(hdr.addr);
        }
        if let Some(got) = image.section(".got") {
            bases = bases.set_got(got.addr);
        }
        collect_fdes(&section, &bases, &mut fdes, &mut budget)?;
    }
    let eh_frame_fdes = fdes.len();
    if let Some((bytes, _)) = &debug_frame {
        let mut section = DebugFrame::new(bytes, LittleEndian);
        section.set_address_size(8);
        collect_fdes(&section, &BaseAddresses::default(), &mut fdes, &mut budget)?;
    }
    // .eh_frame wins where both describe an address: it is what the program itself unwinds with.
    let mut ordered: Vec<(usize, FdeRows)> = fdes.into_iter().enumerate().collect();
    ordered.sort_by_key(|(i, f)| (f.start, *i >= eh_frame_fdes, *i));
    merge(ordered.into_iter().map(|(_, f)| f))
}

fn collect_fdes<'a, S>(
    section: &S,
    bases: &BaseAddresses,
    out: &mut Vec<FdeRows>,
    budget: &mut Budget,
) -> Result<(), TableError>
where
    S: UnwindSection<gimli::EndianSlice<'a, LittleEndian>>,
{
    let mut ctx = Box::new(UnwindContext::new());
    let mut entries = section.entries(bases);
    // An error in the entry list itself ends the walk: later offsets cannot be trusted.
    while let Ok(Some(entry)) = entries.next() {
        let CieOrFde::Fde(partial) = entry else {
            budget.spend(1)?;
            continue;
        };
        let Ok(fde) = partial.parse(S::cie_from_offset) else {
            budget.spend(1)?;
            continue;
        };
        // Parsing the FDE parsed its CIE again, and its rows replay the CIE's instructions.
        budget.spend(2 * fde.cie().entry_len() as u64 + fde.entry_len() as u64)?;
        let (start, end) = (fde.initial_address(), fde.end_address());
        if start >= end {
            continue;
        }
        let signal = fde.is_signal_trampoline();
        let Ok(mut table) = fde.rows(section, bases, &mut ctx) else {
            continue;
        };
        let mut rows = Vec::new();
        loop {
            match table.next_row() {
                Ok(Some(row)) => {
                    budget.add_row()?;
                    rows.push((row.start_address(), x86_64::rule_of(row, signal)));
                }
                Ok(None) => break,
                Err(_) => {
                    // Rows up to the bad instruction are right; the rest of the FDE is unknown.
                    budget.add_row()?;
                    rows.push((
                        rows.last().map_or(start, |r| r.0.saturating_add(1)),
                        Rule::of_kind(CfaKind::Unsupported),
                    ));
                    break;
                }
            }
        }
        out.push(FdeRows { start, end, rows });
    }
    Ok(())
}

/// Merges FDEs sorted by start into one table: overlapping FDEs are dropped, equal consecutive
/// rules merged, and a gap row ends every FDE not followed directly by the next.
fn merge(fdes: impl Iterator<Item = FdeRows>) -> Result<CompactTable, TableError> {
    let mut absolute: Vec<(u64, Rule)> = Vec::new();
    let mut covered_to = 0u64;
    let gap = Rule::of_kind(CfaKind::None);
    for fde in fdes {
        if fde.start < covered_to {
            continue;
        }
        if let Some(last) = absolute.last_mut() {
            // The previous FDE's gap row sits exactly where this FDE starts: replace it.
            if last.0 == fde.start && last.1 == gap {
                absolute.pop();
            }
        }
        for (address, rule) in fde.rows {
            if address >= fde.end {
                break;
            }
            match absolute.last_mut() {
                // A row before the last one (DW_CFA_set_loc going back) would unsort the table.
                Some(last) if address < last.0 => {}
                Some(last) if last.0 == address => last.1 = rule,
                Some(last) if last.1 == rule => {}
                _ => absolute.push((address, rule)),
            }
        }
        absolute.push((fde.end, gap));
        covered_to = fde.end;
    }
    let base = absolute.first().map_or(0, |r| r.0);
    let rows = absolute
        .into_iter()
        .map(|(address, rule)| {
            u32::try_from(address - base)
                .map(|pc| (pc, rule))
                .map_err(|_| TableError::TooLarge)
        })
        .collect::<Result<_, _>>()?;
    Ok(CompactTable { base, rows })
}

/// Bytes of address space per page-index entry: 1 << this (from `bpf/unwind.h`).
pub(crate) const PAGE_SHIFT: u32 = unwind_constants::LKS_UNWIND_PAGE_SHIFT.0;

impl CompactTable {
    /// For each 4 KiB page of the table's address range, the index of the row in effect at the
    /// page's start (0 when none is: before the first row). The BPF unwinder then searches only
    /// the rows between a page's entry and the next one.
    pub fn page_index(&self) -> Vec<u64> {
        let Some(&(last, _)) = self.rows.last() else {
            return Vec::new();
        };
        let pages = (last >> PAGE_SHIFT) as usize + 1;
        let mut index = Vec::with_capacity(pages);
        let mut row = 0usize;
        for page in 0..pages {
            let start = (page as u64) << PAGE_SHIFT;
            while row + 1 < self.rows.len() && u64::from(self.rows[row + 1].0) <= start {
                row += 1;
            }
            index.push(row as u64);
        }
        index
    }
}

#[cfg(test)]
impl CompactTable {
    /// The rule at link-time address `address` (what the BPF unwinder's search finds).
    pub fn lookup(&self, address: u64) -> Option<Rule> {
        let rel = u32::try_from(address.checked_sub(self.base)?).ok()?;
        let after = self.rows.partition_point(|(pc, _)| *pc <= rel);
        after.checked_sub(1).map(|i| self.rows[i].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unwind::elf::ElfSource;
    use std::fs::File;

    fn libc_table() -> CompactTable {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        let path = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .expect("libc mapped");
        let file = File::open(path).expect("open libc");
        let image = ElfImage::parse(ElfSource::File(&file)).expect("parse libc");
        build_table(&image).expect("libc table")
    }

    /// libc's table is large, sorted, and ends its thread entry with the outermost-frame rule
    /// (clone3's `cfi_undefined rip`); its functions start with CFA = SP + 8 (after `call`).
    #[test]
    fn libc_table_has_entry_and_function_rules() {
        let table = libc_table();
        assert!(table.rows.len() > 1000, "{} rows", table.rows.len());
        assert!(table.rows.windows(2).all(|w| w[0].0 < w[1].0));
        let kinds = |k: CfaKind| table.rows.iter().filter(|(_, r)| r.kind == k).count();
        assert!(kinds(CfaKind::End) >= 1, "no outermost-frame row");
        assert!(kinds(CfaKind::Signal) >= 1, "no signal trampoline row");
        assert!(kinds(CfaKind::Sp) > kinds(CfaKind::Unsupported));
        let sp8 = Rule {
            kind: CfaKind::Sp,
            cfa_offset: 8,
            fp_offset8: 0,
        };
        assert!(table.rows.iter().filter(|(_, r)| *r == sp8).count() > 100);
    }

    /// The page index names, for each page, the row in effect at its start, and searching
    /// only between a page's entry and the next finds what a whole-table search finds.
    #[test]
    fn page_index_narrows_searches_correctly() {
        let table = libc_table();
        let index = table.page_index();
        assert_eq!(
            index.len(),
            (table.rows.last().expect("rows").0 >> PAGE_SHIFT) as usize + 1
        );
        for (page, &row) in index.iter().enumerate() {
            let start = (page as u64) << PAGE_SHIFT;
            assert!(u64::from(table.rows[row as usize].0) <= start || row == 0);
            if let Some(next) = table.rows.get(row as usize + 1) {
                assert!(u64::from(next.0) > start);
            }
        }
        // Every 97th byte of the range: the narrowed search agrees with the full one.
        let end = u64::from(table.rows.last().expect("rows").0);
        for rel in (0..end).step_by(97) {
            let page = (rel >> PAGE_SHIFT) as usize;
            let lo = index[page] as usize;
            let hi = index
                .get(page + 1)
                .map_or(table.rows.len(), |&n| n as usize + 1);
            let narrowed = lo + table.rows[lo..hi].partition_point(|(pc, _)| u64::from(*pc) <= rel);
            let full = table.rows.partition_point(|(pc, _)| u64::from(*pc) <= rel);
            assert_eq!(narrowed, full, "rel {rel:#x}");
        }
    }

    /// Lookups find the rule of the row at or before an address, and nothing before the table.
    #[test]
    fn lookup_finds_enclosing_row() {
        let table = libc_table();
        let (pc, rule) = table.rows[10];
        assert_eq!(table.lookup(table.base + u64::from(pc)), Some(rule));
        if table.base > 0 {
            assert_eq!(table.lookup(table.base - 1), None);
        }
    }
}
