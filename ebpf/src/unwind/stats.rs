//! What the unwinder did during a recording ([`UnwindStats`]): the BPF side's counters, summed
//! over CPUs, and the tables loaded, with how each was obtained ([`TableBuild`]).

use super::Unwinder;
use crate::error::Error;
use crate::skel::shared::types::unwind_counters;
use libbpf_rs::{MapCore, MapFlags};
use std::time::Duration;

/// How one file's table was obtained (for the benchmarks and diagnostics).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableBuild {
    /// The file (path as mapped, `[vdso]`).
    pub name: String,
    /// Rows of its table.
    pub rows: u32,
    /// Bytes of the table in the BPF arrays (rows and page index).
    pub bytes: u64,
    /// Time to read it from the cache, or to build it.
    pub elapsed: Duration,
    /// It came from the cache.
    pub cached: bool,
}

/// What the user-stack unwinder did during a recording.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnwindStats {
    /// User stacks unwound.
    pub stacks: u64,
    /// ... that reached the outermost frame (thread or process entry).
    pub complete: u64,
    /// ... that were cut short; the causes follow.
    pub truncated: u64,
    /// Frames unwound.
    pub frames: u64,
    /// ... found by frame pointer (no CFI for the pc).
    pub frame_pointer_frames: u64,
    /// Stacks of a process without tables yet (walked by frame pointer).
    pub unknown_process: u64,
    /// Frames whose pc was in no mapping of their process's table (code mapped since the last
    /// refresh, JIT code) ...
    pub unknown_mapping: u64,
    /// ... and frames (of those, or of processes without a table) unwound with their file's
    /// table, found through the VMA.
    pub file_fallbacks: u64,
    /// Stack reads that failed.
    pub read_failures: u64,
    /// Frames with a CFI rule the unwinder cannot follow (DWARF expressions).
    pub unsupported_rules: u64,
    /// Stacks deeper than the unwinder's limit (127 frames).
    pub too_deep: u64,
    /// Stacks that could not be stored (map full, id collision).
    pub store_failures: u64,
    /// Stacks cut at a mapping whose table was still being built (counted in `truncated`).
    pub table_pending: u64,
    /// Stacks (of `stacks`) that the thread's memo gave without unwinding; with
    /// [`StackMemo::Verify`](super::StackMemo::Verify), the memo answers checked against a walk.
    pub memo_hits: u64,
    /// With [`StackMemo::Verify`](super::StackMemo::Verify): memo answers that differed from
    /// the walk (0 unless the memo is wrong).
    pub memo_mismatches: u64,
    /// Walks kept as their thread's memo.
    pub memo_stores: u64,
    /// Stacks not taken because the unwinder was busy on that CPU: a wakeup in a hard
    /// interrupt that came during another program's walk.
    pub busy: u64,
    /// ELF images with a loaded table now (the tables of files no traced process maps any more
    /// are freed).
    pub tables: usize,
    /// Table rows in use now.
    pub rows_used: u32,
    /// Capacity of the row array.
    pub rows_capacity: u32,
    /// Images whose table could not be built, with why.
    pub table_failures: Vec<String>,
    /// Tables still being built.
    pub tables_pending: usize,
    /// How each table was obtained, in the order they were loaded.
    pub table_builds: Vec<TableBuild>,
}

impl Unwinder {
    /// What the unwinder did so far: the BPF side's counters and the tables loaded.
    pub fn stats(&self) -> Result<UnwindStats, Error> {
        let c = self.counters()?;
        let (rows_used, rows_capacity) = self.files.rows_used();
        Ok(UnwindStats {
            stacks: c.stacks,
            complete: c.complete,
            truncated: c.truncated,
            frames: c.frames,
            frame_pointer_frames: c.fp_frames,
            unknown_process: c.unknown_process,
            unknown_mapping: c.unknown_mapping,
            file_fallbacks: c.file_fallbacks,
            read_failures: c.read_failures,
            unsupported_rules: c.unsupported,
            too_deep: c.too_deep,
            store_failures: c.store_failures,
            table_pending: c.table_pending,
            memo_hits: c.memo_hits,
            memo_mismatches: c.memo_mismatches,
            memo_stores: c.memo_stores,
            busy: c.busy,
            tables: self.files.loaded_files(),
            rows_used,
            rows_capacity,
            table_failures: self.files.failures().to_vec(),
            tables_pending: self.files.pending_files(),
            table_builds: self.files.builds().to_vec(),
        })
    }

    /// The unwinder's counters, summed over CPUs and their two slots (walks in a thread's
    /// context, and the `cpu` probe's in interrupt context: `enum unwind_slot`).
    fn counters(&self) -> Result<unwind_counters, Error> {
        let mut per_cpu = Vec::new();
        for slot in 0..self.counters.max_entries() {
            per_cpu.extend(
                self.counters
                    .lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)
                    .map_err(|source| Error::Map {
                        map: "unwind_counters",
                        source,
                    })?
                    .unwrap_or_default(),
            );
        }
        let mut sum = unwind_counters::default();
        for bytes in &per_cpu {
            if bytes.len() < std::mem::size_of::<unwind_counters>() {
                continue;
            }
            // SAFETY: at least size_of bytes; unwind_counters is plain u64s, valid for any bits.
            let c: unwind_counters = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
            sum.stacks += c.stacks;
            sum.complete += c.complete;
            sum.truncated += c.truncated;
            sum.frames += c.frames;
            sum.fp_frames += c.fp_frames;
            sum.unknown_process += c.unknown_process;
            sum.unknown_mapping += c.unknown_mapping;
            sum.file_fallbacks += c.file_fallbacks;
            sum.read_failures += c.read_failures;
            sum.unsupported += c.unsupported;
            sum.too_deep += c.too_deep;
            sum.store_failures += c.store_failures;
            sum.table_pending += c.table_pending;
            sum.memo_hits += c.memo_hits;
            sum.memo_mismatches += c.memo_mismatches;
            sum.memo_stores += c.memo_stores;
            sum.busy += c.busy;
        }
        Ok(sum)
    }
}
