//! Snapshots of the executable mappings of traced processes, so user stacks can be symbolized
//! after the processes exited.
//!
//! A stack address is resolved with the newest snapshot that covers it, into the mapped file and
//! the file offset. Each mapped file is opened when first seen ([`open_mapped_file`]: through
//! `/proc/PID/map_files/`, else its path inside the process's root, checking the inode; the one
//! place that opens a traced process's files, which the unwinder and other symbolizers use too)
//! and kept open until the
//! recording ends: the symbolizer reads it through `/proc/self/fd/N`, which works after the
//! process exited, after the file was deleted or replaced, and across mount namespaces.
//!
//! A forked child starts with its parent's newest snapshot ([`MapsCache::inherit`]: the same
//! address space), so a short-lived worker symbolizes even if it exits before its own snapshot;
//! an exec drops the snapshots taken before it ([`MapsCache::exec`]).

use lockscope_probes::symbols::open_in_root;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One executable mapping of a process.
#[derive(Clone, Debug)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset mapped at `start`.
    pub offset: u64,
    /// Path as the process sees it (`/usr/lib/x86_64-linux-gnu/libc.so.6`), or a pseudo-name
    /// (`[vdso]`); empty for anonymous memory.
    pub path: String,
    /// The mapped file, kept open; `None` when it is not a file or could not be opened.
    pub file: Option<Arc<File>>,
}

impl PartialEq for Mapping {
    /// Same range, offset and path, and the same opened file.
    fn eq(&self, other: &Self) -> bool {
        (self.start, self.end, self.offset, &self.path)
            == (other.start, other.end, other.offset, &other.path)
            && match (&self.file, &other.file) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }
}

impl Mapping {
    /// The module name of frames in this mapping: the file name of its path.
    pub fn module_name(&self) -> Option<String> {
        if self.path.is_empty() {
            return None;
        }
        Some(
            Path::new(&self.path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| self.path.clone()),
        )
    }

    /// Offset of `address` in the mapped file.
    pub fn file_offset(&self, address: u64) -> u64 {
        address - self.start + self.offset
    }

    /// A path through which the file can be read for as long as this mapping lives.
    pub fn readable_path(&self) -> Option<PathBuf> {
        self.file
            .as_ref()
            .map(|f| PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())))
    }
}

pub(crate) use lockscope_probes::symbols::{parse_maps_line, MapsLine};

/// Opens the file `pid` maps at [start, end) from `path` (its `/proc/PID/maps` line; inode
/// `inode`): `/proc/PID/map_files/` opens the very file mapped (also a deleted one; it needs
/// CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), else the path as the process sees it, inside its
/// root ([`open_in_root`]: no link followed out of its mount namespace). Either must be the
/// mapped inode (a file replaced since is not the one mapped) and a regular file. `None` when
/// neither opens.
pub(crate) fn open_mapped_file(
    pid: u32,
    start: u64,
    end: u64,
    path: &str,
    inode: u64,
) -> Option<File> {
    let mapped = || {
        // Not a path the process controls: the kernel's link to the mapping's file. O_PATH
        // first, so that nothing but a regular file is ever opened for reading.
        let path = File::options()
            .read(false)
            .custom_flags(libc::O_PATH)
            .open(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
            .ok()?;
        path.metadata()
            .ok()?
            .is_file()
            .then(|| File::open(format!("/proc/self/fd/{}", path.as_raw_fd())).ok())?
    };
    mapped()
        .or_else(|| open_in_root(pid, path).ok())
        .filter(|file| file.metadata().is_ok_and(|m| m.ino() == inode))
}

/// Snapshots of every traced process, and the files they map.
#[derive(Debug, Default)]
pub struct MapsCache {
    /// Per pid, distinct snapshots, oldest first.
    snapshots: HashMap<u32, Vec<Snapshot>>,
    /// Open files by (path, inode).
    files: HashMap<(String, u64), Option<Arc<File>>>,
}

/// One process's executable mappings at one time.
#[derive(Debug)]
struct Snapshot {
    /// CLOCK_MONOTONIC when it was read, nanoseconds.
    taken_ns: u64,
    mappings: Vec<Mapping>,
}

impl MapsCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes a snapshot of `pid`'s executable mappings; false when the process is gone (or its
    /// maps are empty: a zombie).
    pub fn snapshot(&mut self, pid: u32) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return false;
        };
        let mut mappings = Vec::new();
        for line in text.lines().filter_map(parse_maps_line) {
            if !line.executable {
                continue;
            }
            let file = if line.inode != 0 && line.path.starts_with('/') {
                self.open_file(pid, &line)
            } else {
                None
            };
            mappings.push(Mapping {
                start: line.start,
                end: line.end,
                offset: line.offset,
                path: line.path.to_owned(),
                file,
            });
        }
        if mappings.is_empty() {
            return false;
        }
        let history = self.snapshots.entry(pid).or_default();
        if history.last().map(|s| &s.mappings) != Some(&mappings) {
            history.push(Snapshot {
                taken_ns: crate::probe::monotonic_ns(),
                mappings,
            });
        }
        true
    }

    /// Gives a child that `parent` forked its parent's newest mappings: the same address
    /// space, until the child execs. A child that exits before its own snapshot symbolizes
    /// with these. Nothing when the child has snapshots already or the parent has none.
    pub fn inherit(&mut self, child: u32, parent: u32) {
        if self.snapshots.contains_key(&child) {
            return;
        }
        let Some(newest) = self.snapshots.get(&parent).and_then(|h| h.last()) else {
            return;
        };
        let inherited = Snapshot {
            taken_ns: newest.taken_ns,
            mappings: newest.mappings.clone(),
        };
        self.snapshots.insert(child, vec![inherited]);
    }

    /// `pid` executed a new program at `time_ns` (CLOCK_MONOTONIC): the snapshots taken before
    /// are of the old program (or inherited from the parent) and would give its addresses wrong
    /// names.
    pub fn exec(&mut self, pid: u32, time_ns: u64) {
        if let Some(history) = self.snapshots.get_mut(&pid) {
            history.retain(|s| s.taken_ns > time_ns);
        }
    }

    fn open_file(&mut self, pid: u32, line: &MapsLine<'_>) -> Option<Arc<File>> {
        // A deleted file shows as "<path> (deleted)": only map_files can still open it.
        let path = line.path.strip_suffix(" (deleted)").unwrap_or(line.path);
        self.files
            .entry((path.to_owned(), line.inode))
            .or_insert_with(|| {
                open_mapped_file(pid, line.start, line.end, path, line.inode).map(Arc::new)
            })
            .clone()
    }

    /// The mapping of `pid` that held `address` in the newest snapshot covering it.
    pub fn resolve(&self, pid: u32, address: u64) -> Option<&Mapping> {
        self.snapshots.get(&pid)?.iter().rev().find_map(|snapshot| {
            snapshot
                .mappings
                .iter()
                .find(|m| m.start <= address && address < m.end)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Our own libc resolves to an open file whose offset math matches the maps line.
    #[test]
    fn resolves_own_code() {
        let mut cache = MapsCache::new();
        assert!(cache.snapshot(std::process::id()));
        let here = resolves_own_code as fn() as usize as u64;
        let mapping = cache
            .resolve(std::process::id(), here)
            .expect("own code mapped");
        assert!(
            mapping.file.is_some(),
            "test binary not opened: {mapping:?}"
        );
        assert_eq!(mapping.file_offset(mapping.start), mapping.offset);
        assert!(mapping.readable_path().expect("path").exists());
        assert_eq!(cache.resolve(std::process::id(), 0), None);
    }

    /// A forked child resolves with its parent's mappings until it execs; then not any more.
    #[test]
    fn forked_child_inherits_until_exec() {
        let me = std::process::id();
        let mut cache = MapsCache::new();
        assert!(cache.snapshot(me));
        let here = forked_child_inherits_until_exec as fn() as usize as u64;
        let child = 4_000_002;
        assert_eq!(cache.resolve(child, here), None);
        cache.inherit(child, me);
        let inherited = cache.resolve(child, here).expect("inherited mapping");
        assert_eq!(Some(inherited), cache.resolve(me, here));
        cache.exec(child, crate::probe::monotonic_ns());
        assert_eq!(cache.resolve(child, here), None);
    }
}
