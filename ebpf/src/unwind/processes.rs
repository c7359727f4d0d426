//! The process store: per traced process, its sorted mapping table (address range → table rows
//! and bias) written to `unwind_procs`, and the files it maps, which it holds in the file store
//! ([`super::files`]).
//!
//! A refresh takes the process's executable mappings as `/proc/PID/maps` shows them now: it holds
//! the files they name, rewrites the mapping table when it changed, then lets go of the files the
//! previous table named (after the write: the BPF side no longer points at their rows when they
//! are freed). So an exec drops the old image's files, and removing a process drops them all.

use super::files::{FileState, FileStore};
use super::maps::UnwindMaps;
use super::{elf, FileKey, TABLE_PENDING};
use crate::error::Error;
use crate::skel::shared::types::{unwind_mapping, unwind_proc};
use std::collections::{HashMap, HashSet};

/// One executable mapping of a process, and the file whose table unwinds it.
#[derive(Clone, Debug)]
pub(crate) struct MappedRange {
    pub start: u64,
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// `None`: anonymous or JIT code, unwound by frame pointer.
    pub file: Option<FileKey>,
}

/// What the store wrote for one process.
#[derive(Debug)]
struct ProcessEntry {
    mappings: Vec<MappingKey>,
    files: HashSet<FileKey>,
    /// The ranges it was written from: a child forked since maps the same.
    ranges: Vec<MappedRange>,
}

/// The mapping tables of the traced processes (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct ProcessStore {
    processes: HashMap<u32, ProcessEntry>,
}

impl ProcessStore {
    /// Makes `pid`'s mapping table the one of `ranges` (in any order): mappings of pending files
    /// are marked `LKS_UNWIND_TABLE_PENDING`, those of unusable ones unwind by frame pointer.
    /// True when the table in `unwind_procs` changed. Without ranges the previous table stays.
    pub fn refresh(
        &mut self,
        maps: &mut impl UnwindMaps,
        files: &mut FileStore,
        pid: u32,
        ranges: &[MappedRange],
    ) -> Result<bool, Error> {
        let mut mappings: Vec<unwind_mapping> =
            ranges.iter().map(|range| mapping(range, files)).collect();
        if mappings.is_empty() {
            return Ok(false);
        }
        mappings.sort_by_key(|m| m.start);
        let used: HashSet<FileKey> = ranges.iter().filter_map(|r| r.file.clone()).collect();
        let keys: Vec<MappingKey> = mappings.iter().map(mapping_key).collect();
        // The new files first: a file in both tables must not drop to no user in between.
        for key in &used {
            files.acquire(key);
        }
        let changed = self.processes.get(&pid).map(|p| &p.mappings) != Some(&keys);
        if changed {
            let mut proc = Box::<unwind_proc>::default();
            let count = mappings.len().min(proc.mappings.len());
            proc.mappings[..count].copy_from_slice(&mappings[..count]);
            proc.count = count as u32;
            if let Err(err) = maps.put_proc(pid, &proc) {
                for key in &used {
                    files.release(maps, key);
                }
                return Err(err);
            }
        }
        let entry = ProcessEntry {
            mappings: keys,
            files: used,
            ranges: ranges.to_vec(),
        };
        if let Some(old) = self.processes.insert(pid, entry) {
            for key in &old.files {
                files.release(maps, key);
            }
        }
        Ok(changed)
    }

    /// The kernel dropped `pid`'s table (at an exec): the next refresh writes the table
    /// whatever the store wrote before.
    pub fn dropped(&mut self, pid: u32) {
        if let Some(entry) = self.processes.get_mut(&pid) {
            entry.mappings.clear();
        }
    }

    /// The ranges `pid`'s table was last written from.
    pub fn ranges(&self, pid: u32) -> Option<Vec<MappedRange>> {
        self.processes.get(&pid).map(|p| p.ranges.clone())
    }

    /// Forgets a process that is gone: deletes its mapping table (also one the kernel copied
    /// from its parent at its fork, which the store never wrote), then lets go of its files.
    pub fn remove(&mut self, maps: &mut impl UnwindMaps, files: &mut FileStore, pid: u32) {
        let Some(old) = self.processes.remove(&pid) else {
            maps.delete_proc(pid);
            return;
        };
        maps.delete_proc(pid);
        for key in &old.files {
            files.release(maps, key);
        }
    }
}

/// The `unwind_mapping` of `range` with its file's table as the store has it now.
fn mapping(range: &MappedRange, files: &FileStore) -> unwind_mapping {
    let mut mapping = unwind_mapping {
        start: range.start,
        end: range.end,
        ..unwind_mapping::default()
    };
    match range.file.as_ref().and_then(|key| files.state(key)) {
        Some(FileState::Loaded(table)) => {
            if let Some(vaddr) = elf::vaddr_of_offset(&table.loads, range.offset) {
                // rel = pc - bias = (pc - start + vaddr at start) - table base
                mapping.bias = range.start.wrapping_sub(vaddr).wrapping_add(table.base);
                mapping.first_row = table.first_row;
                mapping.rows = table.rows;
                mapping.first_page = table.first_page;
                mapping.pages = table.pages;
            }
        }
        // Still being built: the BPF walk stops here instead of guessing.
        Some(FileState::Pending) => mapping.first_row = TABLE_PENDING,
        Some(FileState::Unusable) | None => {}
    }
    mapping
}

/// An `unwind_mapping`'s fields (the generated type has no `PartialEq`).
type MappingKey = (u64, u64, u64, u32, u32, u32, u32);

fn mapping_key(m: &unwind_mapping) -> MappingKey {
    (
        m.start,
        m.end,
        m.bias,
        m.first_row,
        m.rows,
        m.first_page,
        m.pages,
    )
}

/// The two stores' bookkeeping over in-memory maps.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::unwind::builder::{BuiltTable, TableFailure};
    use crate::unwind::elf::LoadSegment;
    use crate::unwind::maps::fake::FakeMaps;
    use crate::unwind::table::{CfaKind, CompactTable, Rule};
    use std::time::Duration;

    fn key(ino: u64) -> FileKey {
        FileKey::Inode { dev: 0x803, ino }
    }

    /// `key`'s entry in the fake `unwind_files`: the kernel's dev_t of 0x803 (major 8, minor 3).
    fn file_key_in_map(key: &FileKey) -> (u64, u64) {
        match key {
            FileKey::Inode { ino, .. } => ((8 << 20) | 3, *ino),
            FileKey::Vdso(_) => unreachable!("the vDSO has no unwind_files entry"),
        }
    }

    /// A table of `rows` rows, 0x40 bytes apart, over one executable segment.
    fn built(rows: u32, build_id: Option<&[u8]>) -> BuiltTable {
        BuiltTable {
            build_id: build_id.map(<[u8]>::to_vec),
            table: CompactTable {
                base: 0x1000,
                rows: (0..rows)
                    .map(|i| (i * 0x40, Rule::of_kind(CfaKind::Sp)))
                    .collect(),
            },
            loads: vec![LoadSegment {
                offset: 0,
                vaddr: 0,
                filesz: 0x10_0000,
                executable: true,
            }],
            code_vaddr_minus_offset: Some(0),
            cached: false,
        }
    }

    struct Stores {
        maps: FakeMaps,
        files: FileStore,
        processes: ProcessStore,
    }

    impl Stores {
        fn new() -> Self {
            let maps = FakeMaps::new(1000, 100);
            Stores {
                files: FileStore::new(maps.row_capacity(), maps.page_capacity()),
                maps,
                processes: ProcessStore::default(),
            }
        }

        /// Asks for `key`'s table (as a refresh does): true when a build is to be submitted.
        fn request(&mut self, key: &FileKey) -> bool {
            self.files.start_build(key)
        }

        /// The builders finished `key`'s table of `rows` rows.
        fn finish(&mut self, key: &FileKey, rows: u32, build_id: Option<&[u8]>) {
            self.files.finish_build(
                &mut self.maps,
                key,
                Ok(built(rows, build_id)),
                "test",
                Duration::ZERO,
                false,
            );
        }

        /// The builders found no table for `key`, for `why`.
        fn fail(&mut self, key: &FileKey, why: &str) {
            let result = Err(TableFailure::Elf {
                name: "broken".to_owned(),
                error: std::io::Error::other(why.to_owned()),
            });
            let name = "test";
            self.files
                .finish_build(&mut self.maps, key, result, name, Duration::ZERO, false);
        }

        /// Requests and loads `key`'s table.
        fn load(&mut self, key: &FileKey, rows: u32, build_id: Option<&[u8]>) {
            assert!(self.request(key), "{key:?} already known");
            self.finish(key, rows, build_id);
        }

        /// `pid` now maps `files`, one mapping each, from 1 MiB on.
        fn refresh(&mut self, pid: u32, files: &[&FileKey]) -> bool {
            let ranges: Vec<MappedRange> = (1u64..)
                .zip(files)
                .map(|(i, key)| MappedRange {
                    start: i << 20,
                    end: (i << 20) + 0x8000,
                    offset: 0,
                    file: Some((*key).clone()),
                })
                .collect();
            self.processes
                .refresh(&mut self.maps, &mut self.files, pid, &ranges)
                .expect("refresh")
        }

        fn remove(&mut self, pid: u32) {
            self.processes.remove(&mut self.maps, &mut self.files, pid);
        }

        /// `key`'s first row; panics unless its table is loaded.
        fn first_row(&self, key: &FileKey) -> u32 {
            match self.files.state(key) {
                Some(FileState::Loaded(table)) => table.first_row,
                other => panic!("{key:?} is not loaded: {other:?}"),
            }
        }

        fn rows_used(&self) -> u32 {
            self.files.rows_used().0
        }

        /// (first_row, rows) of each mapping of `pid` in the fake `unwind_procs`.
        fn proc_tables(&self, pid: u32) -> Vec<(u32, u32)> {
            self.maps.procs[&pid]
                .iter()
                .map(|m| (m.first_row, m.rows))
                .collect()
        }

        fn in_files_map(&self, key: &FileKey) -> bool {
            self.maps.files.contains_key(&file_key_in_map(key))
        }
    }

    /// Two processes mapping one file share one table: one set of rows, both mapping tables
    /// point at it, with the bias of their own mapping.
    #[test]
    fn two_processes_share_one_table() {
        let mut s = Stores::new();
        let libc = key(1);
        s.load(&libc, 100, None);
        assert!(s.refresh(1, &[&libc]));
        assert!(!s.request(&libc), "a second build of a loaded file");
        assert!(s.refresh(2, &[&libc]));
        let first = s.first_row(&libc);
        assert_eq!(s.proc_tables(1), vec![(first, 100)]);
        assert_eq!(s.proc_tables(2), vec![(first, 100)]);
        assert_eq!(s.maps.procs[&1][0].bias, (1 << 20) + 0x1000);
        assert_eq!(s.rows_used(), 100);
        assert_eq!(s.files.builds().len(), 1);
        assert_eq!(s.files.loaded_files(), 1);
        assert_eq!(s.maps.files[&file_key_in_map(&libc)], (first, 100));
        // An unchanged refresh writes nothing and holds the file once, not twice.
        assert!(!s.refresh(1, &[&libc]));
        s.remove(2);
        s.remove(1);
        assert_eq!(s.rows_used(), 0);
    }

    /// Removing one of two processes that map a file keeps its table; removing the other frees
    /// its rows and page index and deletes its `unwind_files` entry and both mapping tables.
    #[test]
    fn last_process_gone_frees_the_table() {
        let mut s = Stores::new();
        let libc = key(1);
        s.load(&libc, 100, None);
        s.refresh(1, &[&libc]);
        s.refresh(2, &[&libc]);
        s.remove(1);
        assert!(!s.maps.procs.contains_key(&1));
        assert!(s.in_files_map(&libc));
        assert_eq!(s.rows_used(), 100);
        assert_eq!(s.proc_tables(2), vec![(s.first_row(&libc), 100)]);
        s.remove(2);
        assert!(s.maps.procs.is_empty());
        assert!(!s.in_files_map(&libc));
        assert!(s.files.state(&libc).is_none());
        assert_eq!(s.rows_used(), 0);
        assert_eq!(s.files.loaded_files(), 0);
        // Removing a process twice (a pid seen gone at two snapshots) changes nothing.
        s.remove(2);
        assert_eq!(s.rows_used(), 0);
        // Mapped again, the file is built again.
        assert!(s.request(&libc));
    }

    /// A process that exec'ed drops the files of its old image (freed: no one else maps them)
    /// and keeps the ones its new image maps too, at the same rows.
    #[test]
    fn reexec_drops_the_old_images_files() {
        let mut s = Stores::new();
        let (old_exe, libc, new_exe) = (key(1), key(2), key(3));
        s.load(&old_exe, 50, None);
        s.load(&libc, 100, None);
        s.refresh(7, &[&old_exe, &libc]);
        let libc_row = s.first_row(&libc);
        s.load(&new_exe, 30, None);
        assert!(s.refresh(7, &[&new_exe, &libc]));
        assert!(s.files.state(&old_exe).is_none());
        assert!(!s.in_files_map(&old_exe));
        assert!(s.in_files_map(&libc));
        assert_eq!(s.first_row(&libc), libc_row);
        assert_eq!(s.rows_used(), 130);
        assert_eq!(
            s.proc_tables(7),
            vec![(s.first_row(&new_exe), 30), (libc_row, 100)]
        );
    }

    /// A mapping whose table is being built is marked `LKS_UNWIND_TABLE_PENDING` (no rows); once
    /// the build completes, the next refresh points it at the rows. A build that completes after
    /// its only process is gone is dropped (no rows, no `unwind_files` entry), unless another
    /// process mapped the file meanwhile.
    #[test]
    fn pending_tables_become_real_when_built() {
        let mut s = Stores::new();
        let plugin = key(1);
        assert!(s.request(&plugin));
        assert!(s.refresh(1, &[&plugin]));
        assert_eq!(s.proc_tables(1), vec![(TABLE_PENDING, 0)]);
        assert_eq!(s.files.pending_files(), 1);
        assert!(!s.request(&plugin), "a second build of a pending file");
        s.finish(&plugin, 40, None);
        assert_eq!(s.files.pending_files(), 0);
        assert!(s.refresh(1, &[&plugin]));
        assert_eq!(s.proc_tables(1), vec![(s.first_row(&plugin), 40)]);
        assert!(s.in_files_map(&plugin));

        let gone = key(2);
        assert!(s.request(&gone));
        s.refresh(2, &[&gone]);
        s.remove(2);
        // Still being built: counted until the build ends.
        assert_eq!(s.files.pending_files(), 1);
        s.finish(&gone, 60, None);
        assert!(s.files.state(&gone).is_none());
        assert_eq!(s.files.pending_files(), 0);
        assert!(!s.in_files_map(&gone));
        assert_eq!(s.rows_used(), 40);

        let back = key(3);
        assert!(s.request(&back));
        s.refresh(3, &[&back]);
        s.remove(3);
        assert!(!s.request(&back), "a second build of a file being built");
        s.refresh(4, &[&back]);
        s.finish(&back, 20, None);
        assert!(s.refresh(4, &[&back]));
        assert_eq!(s.proc_tables(4), vec![(s.first_row(&back), 20)]);
    }

    /// Rows and page-index entries of a freed table are taken by the next tables that fit in
    /// them; a table too large for the hole goes after the others.
    #[test]
    fn freed_rows_are_reused() {
        let mut s = Stores::new();
        let (a, b) = (key(1), key(2));
        s.load(&a, 100, None);
        s.load(&b, 50, None);
        s.refresh(1, &[&a]);
        s.refresh(2, &[&b]);
        let (a_row, b_row) = (s.first_row(&a), s.first_row(&b));
        assert_eq!((a_row, b_row), (0, 100));
        s.remove(1);
        assert_eq!(s.rows_used(), 50);
        let (c, d, e) = (key(3), key(4), key(5));
        s.load(&c, 80, None);
        assert_eq!(s.first_row(&c), a_row);
        s.load(&d, 30, None);
        assert_eq!(
            s.first_row(&d),
            150,
            "30 rows do not fit in the 20 left at 80"
        );
        s.load(&e, 20, None);
        assert_eq!(s.first_row(&e), 80);
        assert_eq!(s.rows_used(), 180);
        // The rows are c's: rewritten, not a's left over.
        assert_eq!(s.maps.rows[79].pc, 79 * 0x40);
        // Page indexes too: c's first page is where a's was.
        let page_of = |s: &Stores, k: &FileKey| match s.files.state(k) {
            Some(FileState::Loaded(t)) => t.first_page,
            other => panic!("{other:?}"),
        };
        assert_eq!(page_of(&s, &c), 0);
        s.refresh(3, &[&c, &d, &e]);
        assert_eq!(s.proc_tables(3), vec![(0, 80), (150, 30), (80, 20)]);
    }

    /// Two files with one build-id share rows; the rows stay until neither is mapped, while
    /// each file's `unwind_files` entry goes with its last process.
    #[test]
    fn files_with_one_build_id_share_rows_until_both_are_gone() {
        let mut s = Stores::new();
        let (copy1, copy2) = (key(1), key(2));
        s.load(&copy1, 100, Some(b"id"));
        s.load(&copy2, 100, Some(b"id"));
        assert_eq!(s.first_row(&copy1), s.first_row(&copy2));
        assert_eq!(s.rows_used(), 100);
        s.refresh(1, &[&copy1]);
        s.refresh(2, &[&copy2]);
        s.remove(1);
        assert!(!s.in_files_map(&copy1));
        assert!(s.in_files_map(&copy2));
        assert_eq!(s.rows_used(), 100);
        s.remove(2);
        assert_eq!(s.rows_used(), 0);
        // The build-id is forgotten with its rows: a new copy is loaded anew.
        let copy3 = key(3);
        s.load(&copy3, 100, Some(b"id"));
        assert_eq!(s.files.builds().len(), 2);
    }

    /// A file whose table failed is mapped without rows (frame pointers) and said once; a
    /// preloaded (pinned) file stays when its process is gone.
    #[test]
    fn unusable_and_pinned_files() {
        let mut s = Stores::new();
        let (broken, preloaded) = (key(1), key(2));
        assert!(s.request(&broken));
        s.fail(&broken, "no ELF");
        s.files.finish_build(
            &mut s.maps,
            &preloaded,
            Ok(built(10, None)),
            "preloaded",
            Duration::ZERO,
            true,
        );
        s.files.pin(&preloaded);
        s.refresh(1, &[&broken, &preloaded]);
        assert_eq!(
            s.proc_tables(1),
            vec![(0, 0), (s.first_row(&preloaded), 10)]
        );
        s.remove(1);
        assert!(s.in_files_map(&preloaded));
        assert_eq!(s.rows_used(), 10);
        assert!(
            s.request(&broken),
            "an unusable file is forgotten with its process"
        );
        s.fail(&broken, "no ELF");
        assert_eq!(s.files.failures(), ["broken: no ELF"]);
    }
}
