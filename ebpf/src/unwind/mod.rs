//! User-stack unwinding without frame pointers: a service of the eBPF backend that every probe
//! uses through `capture_stacks()` (`bpf/stacks.bpf.h`).
//!
//! User space builds a compact unwind table per ELF file ([`table`], from .eh_frame and
//! .debug_frame with gimli), shared by every process that maps the file (keyed by build-id, else
//! by device and inode), and writes its rows into the mmap'ed `unwind_rows` BPF array. Per traced
//! process, [`Unwinder::refresh`] turns `/proc/PID/maps` into a sorted mapping table (address
//! range → rows + bias) in `unwind_procs`. In the kernel, `bpf/unwind.bpf.h` walks the stack with
//! them and stores the pcs, with a `truncated` flag, in `user_stacks`.
//!
//! Tables are built on builder threads ([`builder`]: one per CPU, below the target's priority,
//! the main executable and libc first) and kept in a persistent cache keyed by build-id
//! ([`cache`]). With [`UnwindOptions::background`] a process is attached as soon as its
//! executable's and libc's tables are ready; its other mappings are marked pending
//! (`LKS_UNWIND_TABLE_PENDING`) until theirs are, and the BPF walk stops at a pending mapping
//! (flag and counter `table_pending`) rather than guess on by frame pointer.
//!
//! The maps are declared in `bpf/unwind.bpf.h`, included by every probe object through
//! `stacks.bpf.h`; the loader shares them between objects by name (libbpf `reuse_fd`), so all
//! probes unwind with the same tables into the same stack map. [`Unwinder::new`] takes them from
//! any object that has them.

mod builder;
mod cache;
mod elf;
mod table;
mod x86_64;

use crate::error::Error;
use crate::procmaps::parse_maps_line;
use crate::shared::SharedMaps;
use crate::skel::targets::types::{
    unwind_config, unwind_constants, unwind_counters, unwind_file, unwind_file_key, unwind_mapping,
    unwind_proc, unwind_row, unwind_user_stacks,
};
use builder::{build_image, builder_nice, Builders, BuiltTable, Done};
use cache::TableCache;
use elf::{ElfImage, ElfSource};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};
use table::CompactTable;

pub use cache::DEFAULT_MAX_BYTES as DEFAULT_CACHE_MAX_BYTES;

/// `unwind_mapping.first_row` of a mapping whose table is being built (from `bpf/unwind.h`).
const TABLE_PENDING: u32 = unwind_constants::LKS_UNWIND_TABLE_PENDING.0;
/// Default of [`UnwindOptions::urgent_wait`].
const DEFAULT_URGENT_WAIT: Duration = Duration::from_secs(3);
/// Where [`Unwinder::preload_command`] looks for needed libraries (Debian's multiarch first).
const LIBRARY_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
];
/// Most files [`Unwinder::preload_command`] loads (a bound on a runaway dependency walk).
const MAX_PRELOADED_FILES: usize = 256;
/// Pseudo-path of the vDSO in `/proc/PID/maps`.
const VDSO: &str = "[vdso]";

/// The unwinder's maps in a loaded BPF object (see `bpf/unwind.bpf.h`): a skeleton's maps, or
/// handles on shared ones.
pub struct StackMaps<'a, M: MapCore> {
    /// `unwind_rows`.
    pub rows: &'a M,
    /// `unwind_pages`.
    pub pages: &'a M,
    /// `unwind_procs`.
    pub procs: &'a M,
    /// `unwind_files`.
    pub files: &'a M,
    /// `unwind_config`.
    pub config: &'a M,
    /// `unwind_counters`.
    pub counters: &'a M,
}

impl<'a> StackMaps<'a, MapHandle> {
    /// The unwinder's maps among the maps every probe object shares; `None` if one is missing.
    pub fn from_shared(shared: &'a SharedMaps) -> Option<Self> {
        Some(StackMaps {
            rows: shared.map("unwind_rows")?,
            pages: shared.map("unwind_pages")?,
            procs: shared.map("unwind_procs")?,
            files: shared.map("unwind_files")?,
            config: shared.map("unwind_config")?,
            counters: shared.map("unwind_counters")?,
        })
    }
}

/// How the unwinder gets its tables.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct UnwindOptions {
    /// Directory of the persistent table cache, shared by recorders (see `unwind/cache.rs`);
    /// `None`: no cache. Default: none (the `lockscope` binary passes
    /// `$XDG_CACHE_HOME/lockscope`).
    pub cache_dir: Option<PathBuf>,
    /// Size bound of the cache directory; least recently used tables go beyond it.
    /// Default: 256 MiB.
    pub cache_max_bytes: u64,
    /// Build tables while recording already runs: a process is attached once the tables of its
    /// main executable and libc are ready (at most [`UnwindOptions::urgent_wait`]); its other
    /// mappings are marked as pending until theirs are, and stacks reaching them are cut there
    /// and counted ([`UnwindStats::table_pending`]). Default: false (every table is ready before
    /// [`Unwinder::add_process`] returns).
    pub background: bool,
    /// Longest wait for the main executable's and libc's tables with
    /// [`UnwindOptions::background`]. Default: 3 s.
    pub urgent_wait: Duration,
    /// Builder threads. Default: `None`, one per CPU. `Some(0)`: none; tables are then built on
    /// the recording's thread when they are waited for (the urgent ones, and every one without
    /// [`UnwindOptions::background`]), and the others stay pending, which tests use.
    pub builder_threads: Option<usize>,
    /// How user stacks are captured, to measure what unwinding costs. Default:
    /// [`UserStacks::Cfi`].
    pub user_stacks: UserStacks,
}

/// How user stacks are captured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UserStacks {
    /// CFI tables, frame pointers where a pc has none.
    #[default]
    Cfi,
    /// The kernel's frame-pointer walk alone (`bpf_get_stack(BPF_F_USER_STACK)`).
    FramePointers,
    /// No user stacks.
    None,
}

impl UserStacks {
    /// The mode named `cfi`, `frame-pointers` or `none` (how `LOCKSCOPE_USER_STACKS` names
    /// them).
    pub fn from_name(name: &str) -> Option<UserStacks> {
        match name {
            "cfi" => Some(UserStacks::Cfi),
            "frame-pointers" => Some(UserStacks::FramePointers),
            "none" => Some(UserStacks::None),
            _ => None,
        }
    }
}

impl Default for UnwindOptions {
    fn default() -> Self {
        UnwindOptions {
            cache_dir: None,
            cache_max_bytes: DEFAULT_CACHE_MAX_BYTES,
            background: false,
            urgent_wait: DEFAULT_URGENT_WAIT,
            builder_threads: None,
            user_stacks: UserStacks::Cfi,
        }
    }
}

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
    /// ELF images with a loaded table.
    pub tables: usize,
    /// Table rows loaded, and the capacity.
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

/// What the unwinder knows about one ELF file: where its rows are, and its segments.
#[derive(Debug)]
struct LoadedTable {
    first_row: u32,
    rows: u32,
    first_page: u32,
    pages: u32,
    base: u64,
    loads: Vec<elf::LoadSegment>,
    /// Link-time address minus file offset of the code segment (for the BPF file fallback).
    code_vaddr_minus_offset: Option<i64>,
}

/// Identity of a mapped file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum FileKey {
    /// A file, by device and inode.
    Inode { dev: u64, ino: u64 },
    /// The vDSO, by a hash of its image.
    Vdso(u64),
}

/// A BPF_F_MMAPABLE array mapped into this process, filled by appending: `unwind_rows` and
/// `unwind_pages`. `T` must be the array's value type, 8 bytes (the array's element stride).
struct Arena<T: Copy> {
    /// Keeps the map alive while it is mapped.
    _map: MapHandle,
    name: &'static str,
    items: NonNull<T>,
    capacity: u32,
    used: u32,
}

impl<T: Copy> Arena<T> {
    fn new(map: MapHandle, name: &'static str) -> Result<Self, Error> {
        let action = || format!("map BPF array `{name}`");
        if map.value_size() as usize != std::mem::size_of::<T>() || std::mem::size_of::<T>() != 8 {
            return Err(Error::io(
                action(),
                std::io::Error::other("element size is not 8 bytes"),
            ));
        }
        let capacity = map.max_entries();
        let bytes = capacity as usize * std::mem::size_of::<T>();
        // SAFETY: maps `bytes` of a BPF_F_MMAPABLE array (the whole array: its elements are 8
        // bytes, the stride of array maps, so packed) shared with the kernel; unmapped in Drop.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if address == libc::MAP_FAILED {
            return Err(Error::io(action(), std::io::Error::last_os_error()));
        }
        let items = NonNull::new(address.cast::<T>())
            .ok_or_else(|| Error::io(action(), std::io::Error::other("null mapping")))?;
        Ok(Arena {
            _map: map,
            name,
            items,
            capacity,
            used: 0,
        })
    }

    /// Appends `items`; returns the index of the first, or `None` when they do not fit.
    fn push(&mut self, items: &[T]) -> Option<u32> {
        let count = u32::try_from(items.len()).ok()?;
        if count > self.capacity - self.used {
            return None;
        }
        let first = self.used;
        // SAFETY: [first, first + count) is inside the mapped array (checked above) and no one
        // else writes it: items are only appended, and BPF programs only read them.
        unsafe {
            std::ptr::copy_nonoverlapping(
                items.as_ptr(),
                self.items.as_ptr().add(first as usize),
                items.len(),
            );
        }
        self.used += count;
        Some(first)
    }
}

impl<T: Copy> Drop for Arena<T> {
    fn drop(&mut self) {
        let bytes = self.capacity as usize * std::mem::size_of::<T>();
        // SAFETY: unmaps exactly the mapping made in `new`; nothing refers to it any more.
        unsafe { libc::munmap(self.items.as_ptr().cast(), bytes) };
    }
}

/// Builds and loads unwind tables for traced processes, and reads the stacks BPF unwound.
pub struct Unwinder {
    arena: Arena<unwind_row>,
    pages: Arena<u64>,
    procs: MapHandle,
    files: MapHandle,
    counters: MapHandle,
    /// Tables by file identity; `None` when the file has no usable CFI.
    tables: HashMap<FileKey, Option<Arc<LoadedTable>>>,
    /// The same tables by build-id, so two copies of one file share rows.
    by_build_id: HashMap<Vec<u8>, Arc<LoadedTable>>,
    /// The mapping table last loaded for each process (as comparable tuples).
    loaded: HashMap<u32, Vec<MappingKey>>,
    /// Files whose table could not be built, with why (for diagnostics).
    failures: Vec<String>,
    /// Builder threads (and the cache).
    builders: Builders,
    /// Files whose table the builders are working on.
    pending: HashSet<FileKey>,
    background: bool,
    urgent_wait: Duration,
    /// How each table was obtained.
    builds: Vec<TableBuild>,
}

/// Where an executable mapping's table comes from.
enum TableSource {
    /// Nowhere (anonymous, JIT code): frame pointers.
    None,
    /// The vDSO's table, built on the spot (it is small).
    Vdso(Option<Arc<LoadedTable>>),
    /// A file's table: loaded, being built, or found to be unusable.
    File(FileKey),
}

/// A `MapHandle` of `map` (a new fd: it outlives the object that declared the map).
fn handle(map: &impl MapCore, name: &'static str) -> Result<MapHandle, Error> {
    map.info()
        .and_then(|info| MapHandle::from_map_id(info.info.id))
        .map_err(|source| Error::Map { map: name, source })
}

impl Unwinder {
    /// An unwinder over the maps of a loaded object; no process is known yet.
    pub fn new<M: MapCore>(maps: StackMaps<'_, M>, options: &UnwindOptions) -> Result<Self, Error> {
        let mode = match options.user_stacks {
            UserStacks::Cfi => unwind_user_stacks::LKS_USER_STACKS_CFI,
            UserStacks::FramePointers => unwind_user_stacks::LKS_USER_STACKS_FRAME_POINTERS,
            UserStacks::None => unwind_user_stacks::LKS_USER_STACKS_NONE,
        };
        let config = unwind_config {
            user_stacks: mode,
            pad: 0,
        };
        // SAFETY: unwind_config is a u32 enum and a u32: no padding.
        let value = unsafe { as_bytes(&config) };
        maps.config
            .update(&0u32.to_ne_bytes(), value, MapFlags::ANY)
            .map_err(|source| Error::Map {
                map: "unwind_config",
                source,
            })?;
        Ok(Unwinder {
            arena: Arena::new(handle(maps.rows, "unwind_rows")?, "unwind_rows")?,
            pages: Arena::new(handle(maps.pages, "unwind_pages")?, "unwind_pages")?,
            procs: handle(maps.procs, "unwind_procs")?,
            files: handle(maps.files, "unwind_files")?,
            counters: handle(maps.counters, "unwind_counters")?,
            tables: HashMap::new(),
            by_build_id: HashMap::new(),
            loaded: HashMap::new(),
            failures: Vec::new(),
            builders: Builders::new(
                options
                    .cache_dir
                    .clone()
                    .map(|dir| TableCache::new(dir, options.cache_max_bytes)),
                options.builder_threads,
            ),
            pending: HashSet::new(),
            background: options.background,
            urgent_wait: options.urgent_wait,
            builds: Vec::new(),
        })
    }

    /// Starts unwinding `pid`'s stacks with CFI: builds the tables of its executable mappings
    /// (in the background, all but the urgent ones, with [`UnwindOptions::background`]).
    pub fn add_process(&mut self, pid: u32) -> Result<(), Error> {
        self.refresh_process(pid, true).map(|_| ())
    }

    /// Re-reads `pid`'s executable mappings and loads tables for new ones (a library dlopen'ed
    /// since, an exec); true when the mapping table changed. A process that is gone keeps the
    /// table it had. With [`UnwindOptions::background`] new tables are only queued here.
    pub fn refresh(&mut self, pid: u32) -> Result<bool, Error> {
        self.refresh_process(pid, false)
    }

    /// Loads the tables the builders finished since the last call; true when there were any
    /// (the processes that map them then need a [`Unwinder::refresh`]).
    pub fn collect_ready(&mut self) -> bool {
        let mut any = false;
        while let Some(done) = self.builders.next_done(None) {
            self.finish_build(done);
            any = true;
        }
        any
    }

    fn refresh_process(&mut self, pid: u32, first: bool) -> Result<bool, Error> {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return Ok(false);
        };
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        let mut nice = HashMap::new();
        let mut sources = Vec::new();
        let mut urgent = Vec::new();
        let mut wanted = Vec::new();
        for line in text.lines().filter_map(parse_maps_line) {
            if !line.executable {
                continue;
            }
            let source = if line.path == VDSO {
                TableSource::Vdso(self.vdso_table(pid, line.start, line.end))
            } else if line.inode != 0 && line.path.starts_with('/') {
                // The main executable and libc first: most waits are in them.
                let is_urgent = exe.as_deref() == Some(Path::new(line.path)) || is_libc(line.path);
                let nice = *nice
                    .entry(is_urgent)
                    .or_insert_with(|| builder_nice(pid, is_urgent));
                match self.request_file(pid, line.start, line.end, line.path, is_urgent, nice) {
                    Some(key) => {
                        if is_urgent {
                            urgent.push(key.clone());
                        }
                        wanted.push(key.clone());
                        TableSource::File(key)
                    }
                    None => TableSource::None,
                }
            } else {
                TableSource::None
            };
            sources.push((line.start, line.end, line.offset, source));
        }
        if !self.background {
            self.wait_for(&wanted, None);
        } else if first {
            self.wait_for(&urgent, Some(Instant::now() + self.urgent_wait));
        }
        let mut mappings = Vec::new();
        for (start, end, offset, source) in sources {
            let mut mapping = unwind_mapping {
                start,
                end,
                ..unwind_mapping::default()
            };
            let table = match source {
                TableSource::None => None,
                TableSource::Vdso(table) => table,
                TableSource::File(key) => match self.tables.get(&key) {
                    Some(table) => table.clone(),
                    None => {
                        // Still being built: the BPF walk stops here instead of guessing.
                        mapping.first_row = TABLE_PENDING;
                        None
                    }
                },
            };
            if let Some(table) = table {
                if let Some(vaddr) = elf::vaddr_of_offset(&table.loads, offset) {
                    // rel = pc - bias = (pc - start + vaddr at start) - table base
                    mapping.bias = start.wrapping_sub(vaddr).wrapping_add(table.base);
                    mapping.first_row = table.first_row;
                    mapping.rows = table.rows;
                    mapping.first_page = table.first_page;
                    mapping.pages = table.pages;
                }
            }
            mappings.push(mapping);
        }
        if mappings.is_empty() {
            return Ok(false);
        }
        mappings.sort_by_key(|m| m.start);
        let mut proc = Box::<unwind_proc>::default();
        let count = mappings.len().min(proc.mappings.len());
        proc.mappings[..count].copy_from_slice(&mappings[..count]);
        proc.count = count as u32;
        let keys: Vec<MappingKey> = mappings.iter().map(mapping_key).collect();
        if self.loaded.get(&pid) == Some(&keys) {
            return Ok(false);
        }
        // SAFETY: unwind_proc is a #[repr(C)] struct of integers without padding.
        let value = unsafe { as_bytes(&*proc) };
        self.procs
            .update(&pid.to_ne_bytes(), value, MapFlags::ANY)
            .map_err(|source| Error::Map {
                map: "unwind_procs",
                source,
            })?;
        self.loaded.insert(pid, keys);
        Ok(true)
    }

    /// Loads finished tables until none of `keys` is pending, or until `deadline` (`None`: no
    /// limit).
    fn wait_for(&mut self, keys: &[FileKey], deadline: Option<Instant>) {
        while keys.iter().any(|key| self.pending.contains(key)) {
            // Without a deadline a build always ends (a failure is a result too).
            let until = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            match self.builders.next_done(Some(until)) {
                Some(done) => self.finish_build(done),
                None => return,
            }
        }
    }

    /// The identity of the file mapped at [start, end) of `pid`, with its table loaded, queued
    /// for the builders or known to be unusable; `None` when the file cannot be opened.
    fn request_file(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        path: &str,
        urgent: bool,
        nice: i32,
    ) -> Option<FileKey> {
        // map_files opens the very file mapped (also deleted, or in another mount namespace).
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        let file = File::open(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
            .or_else(|_| File::open(format!("/proc/{pid}/root{path}")))
            .ok()?;
        let meta = file.metadata().ok()?;
        let key = FileKey::Inode {
            dev: meta.dev(),
            ino: meta.ino(),
        };
        if !self.tables.contains_key(&key) && self.pending.insert(key.clone()) {
            self.builders
                .submit(u8::from(!urgent), key.clone(), file, path.to_owned(), nice);
        }
        Some(key)
    }

    /// Loads a table the builders finished.
    fn finish_build(&mut self, done: Done) {
        self.pending.remove(&done.key);
        let loaded = match done.result {
            Ok(built) => self.load_built(built, &done.name, done.elapsed),
            Err(err) => {
                self.failures.push(err);
                None
            }
        };
        if let (Some(table), FileKey::Inode { dev, ino }) = (&loaded, &done.key) {
            self.register_file(*dev, *ino, table);
        }
        self.tables.insert(done.key, loaded);
    }

    /// Forgets a process that is gone (its files' tables stay: other processes may share them).
    pub fn remove_process(&mut self, pid: u32) {
        if self.loaded.remove(&pid).is_some() {
            // Already absent is fine: the map only has to lose the entry.
            let _ = self.procs.delete(&pid.to_ne_bytes());
        }
    }

    /// What the unwinder did so far: the BPF side's counters and the tables loaded.
    pub fn stats(&self) -> Result<UnwindStats, Error> {
        let c = self.counters()?;
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
            tables: self.tables.values().filter(|t| t.is_some()).count(),
            rows_used: self.arena.used,
            rows_capacity: self.arena.capacity,
            table_failures: self.failures.clone(),
            tables_pending: self.pending.len(),
            table_builds: self.builds.clone(),
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
        }
        Ok(sum)
    }

    /// The table of an open ELF file, built on first sight and registered for the BPF file
    /// fallback.
    fn open_file_table(&mut self, file: &File, name: &str) -> Option<Arc<LoadedTable>> {
        let meta = file.metadata().ok()?;
        let key = FileKey::Inode {
            dev: meta.dev(),
            ino: meta.ino(),
        };
        if let Some(known) = self.tables.get(&key) {
            return known.clone();
        }
        // A file the builders are on is built here again rather than waited for: the callers
        // need it now, and the builder's result then finds the table by build-id.
        let loaded = self.load_image(ElfSource::File(file), name);
        if let Some(table) = &loaded {
            self.register_file(meta.dev(), meta.ino(), table);
        }
        self.tables.insert(key, loaded.clone());
        loaded
    }

    /// Lets the BPF unwinder find `table` through any VMA of file (dev, ino).
    fn register_file(&mut self, dev: u64, ino: u64, table: &LoadedTable) {
        let Some(vaddr_minus_offset) = table.code_vaddr_minus_offset else {
            return;
        };
        // The kernel's dev_t (MKDEV: major << 20 | minor), as in super_block.s_dev.
        let kernel_dev = (u64::from(libc::major(dev)) << 20) | u64::from(libc::minor(dev));
        let key = unwind_file_key {
            dev: kernel_dev,
            ino,
        };
        let value = unwind_file {
            base: table.base,
            vaddr_minus_offset,
            text_vaddr: table
                .loads
                .iter()
                .filter(|load| load.executable)
                .map(|load| load.vaddr)
                .min()
                .unwrap_or(0),
            text_end_vaddr: table
                .loads
                .iter()
                .filter(|load| load.executable)
                .map(|load| load.vaddr + load.filesz)
                .max()
                .unwrap_or(0),
            first_row: table.first_row,
            rows: table.rows,
            first_page: table.first_page,
            pages: table.pages,
        };
        // SAFETY: both are #[repr(C)] structs of integers without padding.
        let (key, value) = unsafe { (as_bytes(&key), as_bytes(&value)) };
        // A full map only costs the fallback for this file.
        let _ = self.files.update(key, value, MapFlags::ANY);
    }

    /// Builds the tables of a command's executable and of the libraries it needs (DT_NEEDED,
    /// found in the standard directories), before it runs: its first waits then unwind through
    /// the file fallback, before its process table exists. Returns how many files got a table.
    pub fn preload_command(&mut self, program: &OsStr) -> usize {
        let Some(program) = find_program(program) else {
            return 0;
        };
        let mut pending = vec![program];
        let mut seen = std::collections::HashSet::new();
        let mut loaded = 0;
        while let Some(path) = pending.pop() {
            if !seen.insert(path.clone()) || seen.len() > MAX_PRELOADED_FILES {
                continue;
            }
            let Ok(file) = File::open(&path) else {
                continue;
            };
            if self
                .open_file_table(&file, &path.to_string_lossy())
                .is_some()
            {
                loaded += 1;
            }
            let Ok(image) = ElfImage::parse(ElfSource::File(&file)) else {
                continue;
            };
            for name in image.needed() {
                if let Some(found) = LIBRARY_DIRS
                    .iter()
                    .map(|dir| Path::new(dir).join(&name))
                    .find(|candidate| candidate.exists())
                {
                    pending.push(found);
                }
            }
        }
        loaded
    }

    fn vdso_table(&mut self, pid: u32, start: u64, end: u64) -> Option<Arc<LoadedTable>> {
        let mem = File::open(format!("/proc/{pid}/mem")).ok()?;
        let mut image = vec![0; usize::try_from(end - start).ok()?];
        mem.read_exact_at(&mut image, start).ok()?;
        let mut hasher = DefaultHasher::new();
        image.hash(&mut hasher);
        let key = FileKey::Vdso(hasher.finish());
        if let Some(known) = self.tables.get(&key) {
            return known.clone();
        }
        let loaded = self.load_image(ElfSource::Memory(&image), VDSO);
        self.tables.insert(key, loaded.clone());
        loaded
    }

    /// Builds (or reads from the cache) and loads the table of one image, on this thread.
    fn load_image(&mut self, source: ElfSource<'_>, name: &str) -> Option<Arc<LoadedTable>> {
        let started = Instant::now();
        match build_image(source, name, self.builders.cache()) {
            Ok(built) => self.load_built(built, name, started.elapsed()),
            Err(err) => {
                self.failures.push(err);
                None
            }
        }
    }

    /// Loads a built table into the BPF arrays, or finds the same table by build-id.
    fn load_built(
        &mut self,
        built: BuiltTable,
        name: &str,
        elapsed: Duration,
    ) -> Option<Arc<LoadedTable>> {
        if let Some(known) = built
            .build_id
            .as_ref()
            .and_then(|id| self.by_build_id.get(id))
        {
            return Some(known.clone());
        }
        let mut stored = self.store(&built.table, built.loads, name)?;
        stored.code_vaddr_minus_offset = built.code_vaddr_minus_offset;
        self.builds.push(TableBuild {
            name: name.to_owned(),
            rows: stored.rows,
            bytes: (u64::from(stored.rows) + u64::from(stored.pages)) * 8,
            elapsed,
            cached: built.cached,
        });
        let loaded = Arc::new(stored);
        if let Some(id) = built.build_id {
            self.by_build_id.insert(id, loaded.clone());
        }
        Some(loaded)
    }

    fn store(
        &mut self,
        table: &CompactTable,
        loads: Vec<elf::LoadSegment>,
        name: &str,
    ) -> Option<LoadedTable> {
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
        if index.len() > (self.pages.capacity - self.pages.used) as usize {
            self.failures.push(format!(
                "{name}: its {} pages do not fit in `{}` ({} of {} used)",
                index.len(),
                self.pages.name,
                self.pages.used,
                self.pages.capacity
            ));
            return None;
        }
        let Some(first_row) = self.arena.push(&rows) else {
            self.failures.push(format!(
                "{name}: {} rows do not fit in `{}` ({} of {} used)",
                rows.len(),
                self.arena.name,
                self.arena.used,
                self.arena.capacity
            ));
            return None;
        };
        let first_page = self.pages.push(&index)?;
        Some(LoadedTable {
            first_row,
            rows: rows.len() as u32,
            first_page,
            pages: index.len() as u32,
            base: table.base,
            loads,
            code_vaddr_minus_offset: None,
        })
    }
}

/// True for glibc's libc (`libc.so.6`, `libc-2.31.so`), where nearly every wait is.
fn is_libc(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("libc.so") || (name.starts_with("libc-") && name.ends_with(".so"))
}

/// The file `program` names, as execvp finds it: a path if it has a slash, else on PATH.
fn find_program(program: &OsStr) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    crate::launch::exec_candidates(program)
        .into_iter()
        .map(|candidate| PathBuf::from(std::ffi::OsString::from_vec(candidate)))
        .find(|candidate| candidate.is_file())
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

/// The bytes of a plain `#[repr(C)]` value.
///
/// # Safety
/// `T` must have no padding bytes.
unsafe fn as_bytes<T>(value: &T) -> &[u8] {
    // SAFETY: `value` is a valid reference to size_of::<T>() initialized bytes (no padding, per
    // the caller), borrowed for the returned lifetime.
    unsafe {
        std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>())
    }
}
