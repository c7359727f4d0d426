//! User-stack unwinding without frame pointers: a service of the eBPF backend that every probe
//! uses through `capture_stacks()` (`bpf/stacks.bpf.h`).
//!
//! User space builds a compact unwind table per ELF file ([`table`], from .eh_frame and
//! .debug_frame with gimli). [`Unwinder`] reads `/proc/PID/maps` and keeps two stores:
//! - the file store ([`files`]): the tables of the files the traced processes map, keyed by
//!   device and inode (the vDSO by a hash of its image), shared by every process that maps the
//!   file and by files with the same build-id; their rows and page indexes are in the mmap'ed
//!   `unwind_rows` and `unwind_pages` BPF arrays, and each file is in `unwind_files` for the BPF
//!   file fallback. Files are reference-counted by the processes that map them and freed (rows
//!   back to the arrays' free ranges, `unwind_files` entry deleted) when none does any more: after
//!   an exec, or when the process is gone ([`Unwinder::remove_process`]);
//! - the process store ([`processes`]): per traced process, the sorted mapping table (address
//!   range → rows + bias) in `unwind_procs`, rewritten by [`Unwinder::refresh`] when the mappings
//!   change.
//!
//! Both write the maps through one trait ([`maps::UnwindMaps`]): the real maps in a recording, an
//! in-memory fake in the unit tests, which check the bookkeeping without root. In the kernel,
//! `bpf/unwind.bpf.h` walks the stack with the tables and stores the pcs, with a `truncated`
//! flag, in `user_stacks`; a thread's stack that its memo of an earlier walk shows unchanged (the
//! same registers, stack words and table generation) is not walked again ([`StackMemo`]). Every
//! write to the tables bumps their generation ([`maps`]); [`Unwinder::prune_memos`] deletes the
//! memos of threads that are gone.
//!
//! Tables are built on builder threads ([`builder`]: one per CPU, below the target's priority,
//! the main executable and libc first) and kept in a persistent cache keyed by build-id
//! ([`cache`]). With [`UnwindOptions::background`] a process is attached as soon as its
//! executable's and libc's tables are ready; its other mappings are marked pending
//! (`LKS_UNWIND_TABLE_PENDING`) until theirs are, and the BPF walk stops at a pending mapping
//! (flag and counter `table_pending`) rather than guess on by frame pointer.
//!
//! The maps are declared in `bpf/unwind_maps.bpf.h`, included by every probe object through
//! `stacks.bpf.h`; the loader shares them between objects by name (libbpf `reuse_fd`), so all
//! probes unwind with the same tables into the same stack map. [`Unwinder::new`] takes them from
//! any object that has them.
//!
//! What the caller gives the unwinder (its maps, [`UnwindOptions`]) is in `options`, what it
//! reads back ([`UnwindStats`]) in `stats`.

mod builder;
mod cache;
mod elf;
mod files;
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzzing;
mod maps;
mod options;
mod processes;
mod stats;
mod table;
#[cfg(test)]
mod tests;
mod x86_64;

use crate::error::Error;
use crate::procmaps::{open_mapped_file, parse_maps_line, MapsLine};
use crate::skel::shared::types::{
    unwind_config, unwind_constants, unwind_memo_mode, unwind_user_stacks,
};
use builder::{build_image, builder_nice, Builders, Done};
use cache::TableCache;
use elf::{ElfImage, ElfSource};
use files::{FileState, FileStore};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use maps::{as_bytes, handle, BpfMaps, UnwindMaps};
use processes::{MappedRange, ProcessStore};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use cache::DEFAULT_MAX_BYTES as DEFAULT_CACHE_MAX_BYTES;
pub use options::{StackMaps, StackMemo, UnwindOptions, UserStacks};
pub use stats::{TableBuild, UnwindStats};

/// `unwind_mapping.first_row` of a mapping whose table is being built (from `bpf/unwind.h`).
const TABLE_PENDING: u32 = unwind_constants::LKS_UNWIND_TABLE_PENDING.0;
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
/// Largest vDSO image read (the kernel's is 8 KiB on x86_64).
const MAX_VDSO_BYTES: u64 = 1 << 20;
/// How often [`Unwinder::prune_memos`] looks for the stack memos of threads that are gone.
const MEMO_PRUNE_INTERVAL: Duration = Duration::from_secs(5);
/// Pseudo-path of the vDSO in `/proc/PID/maps`.
const VDSO: &str = "[vdso]";

/// Identity of a mapped file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum FileKey {
    /// A file, by device and inode.
    Inode { dev: u64, ino: u64 },
    /// The vDSO, by a hash of its image.
    Vdso(u64),
}

/// A file mapping whose file could not be opened when the process's maps were read.
#[derive(Debug)]
struct Unopened {
    start: u64,
    end: u64,
    inode: u64,
    path: String,
}

/// The mappings of `unopened` that `pid` maps now (none when it is gone).
fn still_mapped(pid: u32, unopened: Vec<Unopened>) -> Vec<Unopened> {
    if unopened.is_empty() {
        return unopened;
    }
    let now = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let lines: Vec<MapsLine<'_>> = now.lines().filter_map(parse_maps_line).collect();
    unopened
        .into_iter()
        .filter(|gone| {
            lines.iter().any(|line| {
                line.start == gone.start && line.end == gone.end && line.inode == gone.inode
            })
        })
        .collect()
}

/// Builds and loads unwind tables for traced processes, and reads the stacks BPF unwound.
pub struct Unwinder {
    maps: BpfMaps,
    counters: MapHandle,
    /// `unwind_memos`, and when [`Unwinder::prune_memos`] last went through it.
    memos: MapHandle,
    memos_pruned: Instant,
    /// The tables of the files the processes map.
    files: FileStore,
    /// The processes' mapping tables.
    processes: ProcessStore,
    /// Builder threads (and the cache).
    builders: Builders,
    background: bool,
    urgent_wait: Duration,
}

impl Unwinder {
    /// An unwinder over the maps of a loaded object; no process is known yet.
    pub fn new(maps: StackMaps<'_>, options: &UnwindOptions) -> Result<Self, Error> {
        let mode = match options.user_stacks {
            UserStacks::Cfi => unwind_user_stacks::LKS_USER_STACKS_CFI,
            UserStacks::FramePointers => unwind_user_stacks::LKS_USER_STACKS_FRAME_POINTERS,
            UserStacks::None => unwind_user_stacks::LKS_USER_STACKS_NONE,
        };
        let memo = match options.stack_memo {
            StackMemo::On => unwind_memo_mode::LKS_MEMO_ON,
            StackMemo::Off => unwind_memo_mode::LKS_MEMO_OFF,
            StackMemo::Verify => unwind_memo_mode::LKS_MEMO_VERIFY,
        };
        let config = unwind_config {
            user_stacks: mode,
            memo,
        };
        // SAFETY: unwind_config is two u32 enums: no padding.
        let value = unsafe { as_bytes(&config) };
        maps.config
            .update(&0u32.to_ne_bytes(), value, MapFlags::ANY)
            .map_err(|source| Error::Map {
                map: "unwind_config",
                source,
            })?;
        let bpf_maps = BpfMaps::new(&maps)?;
        Ok(Unwinder {
            files: FileStore::new(bpf_maps.row_capacity(), bpf_maps.page_capacity()),
            maps: bpf_maps,
            counters: handle(maps.counters, "unwind_counters")?,
            memos: handle(maps.memos, "unwind_memos")?,
            memos_pruned: Instant::now(),
            processes: ProcessStore::default(),
            builders: Builders::new(
                options
                    .cache_dir
                    .clone()
                    .map(|dir| TableCache::new(dir, options.cache_max_bytes)),
                options.builder_threads,
            ),
            background: options.background,
            urgent_wait: options.urgent_wait,
        })
    }

    /// Starts unwinding `pid`'s stacks with CFI: builds the tables of its executable mappings
    /// (in the background, all but the urgent ones, with [`UnwindOptions::background`]).
    pub fn add_process(&mut self, pid: u32) -> Result<(), Error> {
        self.refresh_process(pid, true).map(|_| ())
    }

    /// Re-reads `pid`'s executable mappings and loads tables for new ones (a library dlopen'ed
    /// since, an exec); true when the mapping table changed. Files it no longer maps are let go
    /// of (freed when no other process maps them). A process that is gone keeps the table it
    /// had. With [`UnwindOptions::background`] new tables are only queued here.
    pub fn refresh(&mut self, pid: u32) -> Result<bool, Error> {
        self.refresh_process(pid, false)
    }

    /// Gives `child`, which `parent` forked, its parent's mapping table (the same address
    /// space until it execs): the table the kernel copied at the fork (`bpf/shared.bpf.c`),
    /// now held by the store, or written when the kernel could not copy it. False when the
    /// parent has no table.
    pub fn inherit(&mut self, child: u32, parent: u32) -> Result<bool, Error> {
        let Some(ranges) = self.processes.ranges(parent) else {
            return Ok(false);
        };
        self.processes
            .refresh(&mut self.maps, &mut self.files, child, &ranges)
            .map(|_| true)
    }

    /// `pid` executed a new program: the kernel dropped its table (`bpf/shared.bpf.c`); it is
    /// written anew from its mappings now (if it still runs).
    pub fn exec(&mut self, pid: u32) -> Result<bool, Error> {
        self.processes.dropped(pid);
        self.refresh(pid)
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
        let mut ranges = Vec::new();
        let mut urgent = Vec::new();
        let mut wanted = Vec::new();
        let mut unopened = Vec::new();
        for line in text.lines().filter_map(parse_maps_line) {
            if !line.executable {
                continue;
            }
            let file = if line.path == VDSO {
                self.vdso_table(pid, line.start, line.end)
            } else if line.inode != 0 && line.path.starts_with('/') {
                // The main executable and libc first: most waits are in them.
                let is_urgent = exe.as_deref() == Some(Path::new(line.path)) || is_libc(line.path);
                let nice = *nice
                    .entry(is_urgent)
                    .or_insert_with(|| builder_nice(pid, is_urgent));
                let key = self.request_file(pid, &line, is_urgent, nice, &mut unopened);
                if let Some(key) = &key {
                    if is_urgent {
                        urgent.push(key.clone());
                    }
                    wanted.push(key.clone());
                }
                key
            } else {
                None
            };
            ranges.push(MappedRange {
                start: line.start,
                end: line.end,
                offset: line.offset,
                file,
            });
        }
        self.fail_still_mapped(pid, unopened);
        if !self.background {
            self.wait_for(&wanted, None);
        } else if first {
            self.wait_for(&urgent, Some(Instant::now() + self.urgent_wait));
        }
        self.processes
            .refresh(&mut self.maps, &mut self.files, pid, &ranges)
    }

    /// Loads finished tables until none of `keys` is pending, or until `deadline` (`None`: no
    /// limit).
    fn wait_for(&mut self, keys: &[FileKey], deadline: Option<Instant>) {
        while keys.iter().any(|key| self.files.is_pending(key)) {
            // Without a deadline a build always ends (a failure is a result too).
            let until = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            match self.builders.next_done(Some(until)) {
                Some(done) => self.finish_build(done),
                None => return,
            }
        }
    }

    /// The identity of the file `pid` maps in `line`, with its table loaded, queued for the
    /// builders or known to be unusable; `None` when the file cannot be opened (the mapping is
    /// added to `unopened`).
    fn request_file(
        &mut self,
        pid: u32,
        line: &MapsLine<'_>,
        urgent: bool,
        nice: i32,
        unopened: &mut Vec<Unopened>,
    ) -> Option<FileKey> {
        let path = line.path.strip_suffix(" (deleted)").unwrap_or(line.path);
        let Some(file) = open_mapped_file(pid, line.start, line.end, path, line.inode) else {
            unopened.push(Unopened {
                start: line.start,
                end: line.end,
                inode: line.inode,
                path: path.to_owned(),
            });
            return None;
        };
        let key = file_key(&file)?;
        if self.files.start_build(&key) {
            self.builders
                .submit(u8::from(!urgent), key.clone(), file, path.to_owned(), nice);
        }
        Some(key)
    }

    /// Counts as failures the mappings of `pid` that could not be opened and that it still
    /// maps. A process that exits (or unmaps the file) between the read of its maps and the
    /// open loses nothing: its table stays as it was, and a dead process needs no new one.
    fn fail_still_mapped(&mut self, pid: u32, unopened: Vec<Unopened>) {
        for gone in still_mapped(pid, unopened) {
            self.files.fail(format!(
                "{}: cannot be opened as pid {pid} maps it (replaced or not readable)",
                gone.path
            ));
        }
    }

    /// Loads a table the builders finished (dropped if no process maps its file any more).
    fn finish_build(&mut self, done: Done) {
        self.files.finish_build(
            &mut self.maps,
            &done.key,
            done.result,
            &done.name,
            done.elapsed,
            false,
        );
    }

    /// Forgets a process that is gone: its mapping table goes, and the tables of the files it
    /// mapped that no other process maps are freed.
    pub fn remove_process(&mut self, pid: u32) {
        self.processes.remove(&mut self.maps, &mut self.files, pid);
    }

    /// Deletes the stack memos of threads that are gone (at most every few seconds; the BPF side
    /// keeps one per thread and way, and a map full of dead threads' memos would leave new
    /// threads without). A memo is only ever used by its own thread, so one deleted by mistake
    /// costs one walk, and a tid reused meanwhile proves itself against the memo like any walk.
    pub fn prune_memos(&mut self) {
        if self.memos_pruned.elapsed() < MEMO_PRUNE_INTERVAL {
            return;
        }
        self.memos_pruned = Instant::now();
        let gone: Vec<Vec<u8>> = self
            .memos
            .keys()
            .filter(|key| {
                // struct unwind_memo_key: the thread id first.
                key.get(..4)
                    .and_then(|tid| tid.try_into().ok())
                    .map(u32::from_ne_bytes)
                    .is_some_and(|tid| !Path::new(&format!("/proc/{tid}")).exists())
            })
            .collect();
        for key in gone {
            let _ = self.memos.delete(&key);
        }
    }

    /// Loads the table of an open ELF file on this thread, unless known, and keeps it while no
    /// process maps it; true when it has a table.
    fn preload_file(&mut self, file: &File, name: &str) -> bool {
        let Some(key) = file_key(file) else {
            return false;
        };
        // A file the builders are on is built here again rather than waited for: the callers
        // need it now, and the builder's result is then dropped.
        if self.files.state(&key).is_none() || self.files.is_pending(&key) {
            let started = Instant::now();
            let result = build_image(ElfSource::File(file), name, self.builders.cache());
            self.files
                .finish_build(&mut self.maps, &key, result, name, started.elapsed(), true);
        }
        self.files.pin(&key);
        matches!(self.files.state(&key), Some(FileState::Loaded(_)))
    }

    /// Builds the tables of a command's executable and of the libraries it needs (DT_NEEDED,
    /// found in the standard directories), before it runs: its first waits then unwind through
    /// the file fallback, before its process table exists. They stay for the recording (the
    /// command maps them once it runs). Returns how many files got a table.
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
            if self.preload_file(&file, &path.to_string_lossy()) {
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

    /// The key of `pid`'s vDSO at [start, end), its table built on the spot (it is small) on
    /// first sight; `None` when its image cannot be read.
    fn vdso_table(&mut self, pid: u32, start: u64, end: u64) -> Option<FileKey> {
        // The kernel's image, a few pages; a larger "[vdso]" is not read.
        if end.checked_sub(start)? > MAX_VDSO_BYTES {
            return None;
        }
        let mem = File::open(format!("/proc/{pid}/mem")).ok()?;
        let mut image = vec![0; usize::try_from(end - start).ok()?];
        mem.read_exact_at(&mut image, start).ok()?;
        let mut hasher = DefaultHasher::new();
        image.hash(&mut hasher);
        let key = FileKey::Vdso(hasher.finish());
        if self.files.state(&key).is_none() {
            let started = Instant::now();
            let result = build_image(ElfSource::Memory(&image), VDSO, self.builders.cache());
            self.files
                .finish_build(&mut self.maps, &key, result, VDSO, started.elapsed(), true);
        }
        Some(key)
    }
}

/// The identity of an open file.
fn file_key(file: &File) -> Option<FileKey> {
    let meta = file.metadata().ok()?;
    Some(FileKey::Inode {
        dev: meta.dev(),
        ino: meta.ino(),
    })
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
