//! The file store: the unwind tables of the ELF files that traced processes map, loaded into the
//! BPF arrays (`unwind_rows`, `unwind_pages`) and registered in `unwind_files` for the BPF file
//! fallback.
//!
//! A file is known by its [`FileKey`] (device and inode, or the vDSO's image hash); two files with
//! one build-id share one table. Each file is in one of three states: its table is being built
//! (pending), loaded, or unusable (no CFI, unreadable, no room). Files are reference-counted by the
//! processes whose mapping tables name them ([`super::processes`]): when the last one lets go,
//! the file's `unwind_files` entry is deleted and, when no other file shares its table, the
//! table's rows and page index go back to the arrays' free ranges for the next table (a file
//! whose table is still being built stays pending until the build ends, which is then dropped).
//! Files preloaded for a launched command are pinned: they stay for the recording.

use super::builder::{BuiltTable, TableFailure};
use super::elf::LoadSegment;
use super::maps::UnwindMaps;
use super::{FileKey, TableBuild};
use crate::skel::shared::types::{unwind_file, unwind_file_key, unwind_row};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Where one table's rows and page index are in the BPF arrays, and the file's segments.
#[derive(Debug)]
pub(crate) struct LoadedTable {
    pub first_row: u32,
    pub rows: u32,
    pub first_page: u32,
    pub pages: u32,
    /// Link-time address that row pcs are relative to.
    pub base: u64,
    pub loads: Vec<LoadSegment>,
    /// Link-time address minus file offset of the code segment (for the BPF file fallback).
    pub code_vaddr_minus_offset: Option<i64>,
    build_id: Option<Vec<u8>>,
}

/// What is known of one file's table.
#[derive(Debug)]
pub(crate) enum FileState {
    /// The builders are on it.
    Pending,
    /// Loaded.
    Loaded(Arc<LoadedTable>),
    /// None can be had (no CFI, unreadable, no room left): frame pointers.
    Unusable,
}

/// A file and the processes that map it.
#[derive(Debug)]
struct FileEntry {
    state: FileState,
    /// Processes whose mapping table names the file.
    users: u32,
    /// Kept while no process maps it (preloaded for a launched command).
    pinned: bool,
    /// Pending, and no process maps it any more: the build is dropped when it ends (unless a
    /// process maps the file again meanwhile).
    unwanted: bool,
}

/// A loaded table and how many files use it (several with one build-id).
#[derive(Debug)]
struct SharedTable {
    table: Arc<LoadedTable>,
    files: u32,
}

/// Free space of one BPF array: sorted, coalesced free ranges, allocated first fit.
#[derive(Debug)]
struct Allocator {
    capacity: u32,
    /// (start, length), sorted by start, never adjacent.
    free: Vec<(u32, u32)>,
}

impl Allocator {
    fn new(capacity: u32) -> Self {
        Allocator {
            capacity,
            free: if capacity > 0 {
                vec![(0, capacity)]
            } else {
                Vec::new()
            },
        }
    }

    fn used(&self) -> u32 {
        self.capacity - self.free.iter().map(|&(_, len)| len).sum::<u32>()
    }

    /// The start of `count` free entries, now taken; `None` when no free range is that long.
    fn alloc(&mut self, count: u32) -> Option<u32> {
        if count == 0 {
            return Some(0);
        }
        let i = self.free.iter().position(|&(_, len)| len >= count)?;
        let (start, len) = self.free[i];
        if len == count {
            self.free.remove(i);
        } else {
            self.free[i] = (start + count, len - count);
        }
        Some(start)
    }

    /// Returns [start, start + count) to the free ranges.
    fn free(&mut self, start: u32, count: u32) {
        if count == 0 {
            return;
        }
        let mut i = self.free.partition_point(|&(s, _)| s < start);
        self.free.insert(i, (start, count));
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == start {
            self.free[i - 1].1 += count;
            self.free.remove(i);
            i -= 1;
        }
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free[i + 1].1;
            self.free.remove(i + 1);
        }
    }
}

/// The tables of the files traced processes map (see the module docs).
#[derive(Debug)]
pub(crate) struct FileStore {
    files: HashMap<FileKey, FileEntry>,
    /// Loaded tables by first row.
    tables: HashMap<u32, SharedTable>,
    /// Loaded tables' first rows by build-id, so two copies of one file share rows.
    by_build_id: HashMap<Vec<u8>, u32>,
    rows: Allocator,
    pages: Allocator,
    /// Files whose table could not be built, with why (for diagnostics).
    failures: Vec<String>,
    /// How each table was obtained, in load order.
    builds: Vec<TableBuild>,
}

impl FileStore {
    /// An empty store over arrays of `rows` and `pages` entries.
    pub fn new(rows: u32, pages: u32) -> Self {
        FileStore {
            files: HashMap::new(),
            tables: HashMap::new(),
            by_build_id: HashMap::new(),
            rows: Allocator::new(rows),
            pages: Allocator::new(pages),
            failures: Vec::new(),
            builds: Vec::new(),
        }
    }

    /// What is known of `key`'s table (`None`: nothing, it was never asked for or is forgotten).
    pub fn state(&self, key: &FileKey) -> Option<&FileState> {
        self.files.get(key).map(|entry| &entry.state)
    }

    /// True while `key`'s table is being built.
    pub fn is_pending(&self, key: &FileKey) -> bool {
        matches!(self.state(key), Some(FileState::Pending))
    }

    /// Marks `key` as being built; false when it is already known (built, pending or unusable):
    /// the caller then submits no build.
    pub fn start_build(&mut self, key: &FileKey) -> bool {
        if let Some(entry) = self.files.get_mut(key) {
            // Wanted again while its build runs: the build is kept.
            entry.unwanted = false;
            return false;
        }
        self.files.insert(
            key.clone(),
            FileEntry {
                state: FileState::Pending,
                users: 0,
                pinned: false,
                unwanted: false,
            },
        );
        true
    }

    /// Takes `key`'s built table (or why there is none), loading it into the arrays unless a
    /// file with the same build-id already did. The build of a file that no process maps any more
    /// is dropped, and the file forgotten, unless `add`: a table built on the caller's thread for a
    /// file not asked for before or wanted now (the vDSO, a preloaded file). A file already loaded
    /// or found unusable keeps what it has.
    pub fn finish_build(
        &mut self,
        maps: &mut impl UnwindMaps,
        key: &FileKey,
        result: Result<BuiltTable, TableFailure>,
        name: &str,
        elapsed: Duration,
        add: bool,
    ) {
        match self.files.get(key) {
            Some(entry) if !matches!(entry.state, FileState::Pending) => return,
            Some(entry) if entry.unwanted && entry.users == 0 && !add => {
                self.files.remove(key);
                return;
            }
            Some(_) => {}
            None if add => {
                self.start_build(key);
            }
            None => return,
        }
        let state = match result {
            Ok(built) => self.load(maps, key, built, name, elapsed),
            Err(err) => {
                self.fail(err.to_string());
                FileState::Unusable
            }
        };
        if let Some(entry) = self.files.get_mut(key) {
            entry.state = state;
            entry.unwanted = false;
        }
    }

    /// One more process maps `key` (a file the store knows).
    pub fn acquire(&mut self, key: &FileKey) {
        if let Some(entry) = self.files.get_mut(key) {
            entry.users += 1;
            entry.unwanted = false;
        }
    }

    /// One process less maps `key`: with none left (and not pinned) the file is forgotten, its
    /// `unwind_files` entry deleted and its table freed unless another file shares it. A build
    /// under way stays pending (it is still running) and is dropped when it ends.
    pub fn release(&mut self, maps: &mut impl UnwindMaps, key: &FileKey) {
        let Some(entry) = self.files.get_mut(key) else {
            return;
        };
        entry.users = entry.users.saturating_sub(1);
        if entry.users > 0 || entry.pinned {
            return;
        }
        if matches!(entry.state, FileState::Pending) {
            entry.unwanted = true;
            return;
        }
        let Some(entry) = self.files.remove(key) else {
            return;
        };
        let FileState::Loaded(table) = entry.state else {
            return;
        };
        if let FileKey::Inode { dev, ino } = key {
            maps.delete_file(&kernel_file_key(*dev, *ino));
        }
        let Some(shared) = self.tables.get_mut(&table.first_row) else {
            return;
        };
        shared.files -= 1;
        if shared.files == 0 {
            self.tables.remove(&table.first_row);
            if let Some(id) = &table.build_id {
                self.by_build_id.remove(id);
            }
            self.rows.free(table.first_row, table.rows);
            self.pages.free(table.first_page, table.pages);
        }
    }

    /// Keeps `key` while no process maps it (a file preloaded for a launched command).
    pub fn pin(&mut self, key: &FileKey) {
        if let Some(entry) = self.files.get_mut(key) {
            entry.pinned = true;
        }
    }

    /// Files with a loaded table.
    pub fn loaded_files(&self) -> usize {
        self.files
            .values()
            .filter(|entry| matches!(entry.state, FileState::Loaded(_)))
            .count()
    }

    /// Files whose table is being built.
    pub fn pending_files(&self) -> usize {
        self.files
            .values()
            .filter(|entry| matches!(entry.state, FileState::Pending))
            .count()
    }

    /// Rows in use, and the capacity of `unwind_rows`.
    pub fn rows_used(&self) -> (u32, u32) {
        (self.rows.used(), self.rows.capacity)
    }

    /// Files whose table could not be built, with why.
    pub fn failures(&self) -> &[String] {
        &self.failures
    }

    /// How each table was obtained, in load order.
    pub fn builds(&self) -> &[TableBuild] {
        &self.builds
    }

    pub fn fail(&mut self, why: String) {
        // A file forgotten and mapped again fails again: say it once.
        if !self.failures.contains(&why) {
            self.failures.push(why);
        }
    }

    /// Loads `built` for `key` (or shares the table of its build-id) and registers it in
    /// `unwind_files`.
    fn load(
        &mut self,
        maps: &mut impl UnwindMaps,
        key: &FileKey,
        built: BuiltTable,
        name: &str,
        elapsed: Duration,
    ) -> FileState {
        let known = built
            .build_id
            .as_ref()
            .and_then(|id| self.by_build_id.get(id))
            .and_then(|first_row| self.tables.get_mut(first_row));
        let table = match known {
            Some(shared) => {
                shared.files += 1;
                shared.table.clone()
            }
            None => {
                let Some(stored) = self.store(maps, built, name, elapsed) else {
                    return FileState::Unusable;
                };
                let table = Arc::new(stored);
                if let Some(id) = &table.build_id {
                    self.by_build_id.insert(id.clone(), table.first_row);
                }
                self.tables.insert(
                    table.first_row,
                    SharedTable {
                        table: table.clone(),
                        files: 1,
                    },
                );
                table
            }
        };
        if let (FileKey::Inode { dev, ino }, Some(file)) = (key, file_entry(&table)) {
            // A full map only costs the fallback for this file.
            let _ = maps.put_file(&kernel_file_key(*dev, *ino), &file);
        }
        FileState::Loaded(table)
    }

    /// Writes a table's rows and page index into free ranges of the arrays.
    fn store(
        &mut self,
        maps: &mut impl UnwindMaps,
        built: BuiltTable,
        name: &str,
        elapsed: Duration,
    ) -> Option<LoadedTable> {
        let table = &built.table;
        if table.rows.is_empty() {
            return None;
        }
        let rows: Vec<unwind_row> = table
            .rows
            .iter()
            .map(|(pc, rule)| unwind_row {
                pc: *pc,
                kind: rule.kind as u8,
                fp_offset8: rule.fp_offset8,
                cfa_offset: rule.cfa_offset,
            })
            .collect();
        let index = table.page_index();
        let (Ok(row_count), Ok(page_count)) =
            (u32::try_from(rows.len()), u32::try_from(index.len()))
        else {
            self.fail(format!("{name}: its table is too large"));
            return None;
        };
        let Some(first_page) = self.pages.alloc(page_count) else {
            self.fail(format!(
                "{name}: its {page_count} pages do not fit in `unwind_pages` ({} of {} used)",
                self.pages.used(),
                self.pages.capacity
            ));
            return None;
        };
        let Some(first_row) = self.rows.alloc(row_count) else {
            self.pages.free(first_page, page_count);
            self.fail(format!(
                "{name}: {row_count} rows do not fit in `unwind_rows` ({} of {} used)",
                self.rows.used(),
                self.rows.capacity
            ));
            return None;
        };
        let written = maps
            .write_rows(first_row, &rows)
            .and_then(|()| maps.write_pages(first_page, &index));
        if let Err(err) = written {
            self.rows.free(first_row, row_count);
            self.pages.free(first_page, page_count);
            self.fail(format!("{name}: {err}"));
            return None;
        }
        self.builds.push(TableBuild {
            name: name.to_owned(),
            rows: row_count,
            bytes: (u64::from(row_count) + u64::from(page_count)) * 8,
            elapsed,
            cached: built.cached,
        });
        Some(LoadedTable {
            first_row,
            rows: row_count,
            first_page,
            pages: page_count,
            base: table.base,
            loads: built.loads,
            code_vaddr_minus_offset: built.code_vaddr_minus_offset,
            build_id: built.build_id,
        })
    }
}

/// A file as the kernel names it: its dev_t as MKDEV makes it (major << 20 | minor, as in
/// super_block.s_dev), and its inode.
fn kernel_file_key(dev: u64, ino: u64) -> unwind_file_key {
    let kernel_dev = (u64::from(libc::major(dev)) << 20) | u64::from(libc::minor(dev));
    unwind_file_key {
        dev: kernel_dev,
        ino,
    }
}

/// The `unwind_files` entry that lets the BPF unwinder find `table` through any VMA of its file;
/// `None` without the code segment's address.
fn file_entry(table: &LoadedTable) -> Option<unwind_file> {
    let executable = || table.loads.iter().filter(|load| load.executable);
    Some(unwind_file {
        base: table.base,
        vaddr_minus_offset: table.code_vaddr_minus_offset?,
        text_vaddr: executable().map(|load| load.vaddr).min().unwrap_or(0),
        text_end_vaddr: executable()
            .map(|load| load.vaddr + load.filesz)
            .max()
            .unwrap_or(0),
        first_row: table.first_row,
        rows: table.rows,
        first_page: table.first_page,
        pages: table.pages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Freed ranges merge with their neighbours and are taken again first fit.
    #[test]
    fn allocator_merges_and_reuses_free_ranges() {
        let mut a = Allocator::new(100);
        assert_eq!(a.alloc(10), Some(0));
        assert_eq!(a.alloc(20), Some(10));
        assert_eq!(a.alloc(30), Some(30));
        assert_eq!(a.used(), 60);
        assert_eq!(a.alloc(41), None);
        a.free(10, 20);
        assert_eq!(a.alloc(15), Some(10));
        a.free(0, 10);
        a.free(10, 15);
        // [0, 30) is one range again: 30 entries fit at 0.
        assert_eq!(a.free, vec![(0, 30), (60, 40)]);
        assert_eq!(a.alloc(30), Some(0));
        a.free(30, 30);
        a.free(0, 30);
        assert_eq!(a.free, vec![(0, 100)]);
        assert_eq!(a.used(), 0);
    }
}
