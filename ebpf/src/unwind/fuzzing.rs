//! The unwinder's part of the `unwind_table` fuzz target (see `crate::fuzzing`).

use super::cache::fuzzing::round_trip;
use super::elf::{vaddr_of_offset, ElfImage, ElfSource};
use super::table::{build_table, PAGE_SHIFT};

/// Parses `image`, builds its table and checks it; returns file offsets to symbolize (some
/// rows' addresses, as file offsets, and the start of each code segment).
pub(crate) fn check_image(bytes: &[u8]) -> Vec<u64> {
    let Ok(image) = ElfImage::parse(ElfSource::Memory(bytes)) else {
        return Vec::new();
    };
    let _ = image.build_id();
    let _ = image.needed();
    let mut offsets: Vec<u64> = image
        .loads
        .iter()
        .filter(|l| l.executable)
        .map(|l| l.offset)
        .take(4)
        .collect();
    for load in &image.loads {
        let _ = vaddr_of_offset(&image.loads, load.offset);
    }
    let Ok(table) = build_table(&image) else {
        return offsets;
    };
    assert!(
        table.rows.windows(2).all(|w| w[0].0 < w[1].0),
        "rows not strictly sorted"
    );
    let index = table.page_index();
    if let Some(&(last, _)) = table.rows.last() {
        assert_eq!(index.len(), (last >> PAGE_SHIFT) as usize + 1);
    }
    for (page, &row) in index.iter().enumerate() {
        assert!(
            (row as usize) < table.rows.len().max(1),
            "page {page} past the rows"
        );
    }
    round_trip(&table);
    if let Some(bias) = image.code_vaddr_minus_offset() {
        offsets.extend(
            table
                .rows
                .iter()
                .step_by((table.rows.len() / 8).max(1))
                .filter_map(|(pc, _)| {
                    (table.base.wrapping_add(u64::from(*pc)) as i64).checked_sub(bias)
                })
                .filter_map(|offset| u64::try_from(offset).ok())
                .filter(|&offset| offset < bytes.len() as u64),
        );
    }
    offsets
}
