//! Snapshots of the executable mappings of traced processes, so user stacks can be symbolized
//! after the processes exited.
//!
//! A stack address is resolved with the newest snapshot that covers it, into the mapped file and
//! the file offset. Each mapped file is opened when first seen (through `/proc/PID/map_files/`,
//! else `/proc/PID/root/<path>`, else `<path>`, checking the inode) and kept open until the
//! recording ends: the symbolizer reads it through `/proc/self/fd/N`, which works after the
//! process exited, after the file was deleted or replaced, and across mount namespaces.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
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

/// Snapshots of every traced process, and the files they map.
#[derive(Debug, Default)]
pub struct MapsCache {
    /// Per pid, distinct snapshots, oldest first.
    snapshots: HashMap<u32, Vec<Vec<Mapping>>>,
    /// Open files by (path, inode).
    files: HashMap<(String, u64), Option<Arc<File>>>,
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
        if history.last() != Some(&mappings) {
            history.push(mappings);
        }
        true
    }

    fn open_file(&mut self, pid: u32, line: &MapsLine<'_>) -> Option<Arc<File>> {
        // A deleted file shows as "<path> (deleted)": only map_files can still open it.
        let path = line.path.strip_suffix(" (deleted)").unwrap_or(line.path);
        self.files
            .entry((path.to_owned(), line.inode))
            .or_insert_with(|| {
                let candidates = [
                    PathBuf::from(format!(
                        "/proc/{pid}/map_files/{:x}-{:x}",
                        line.start, line.end
                    )),
                    PathBuf::from(format!("/proc/{pid}/root{path}")),
                    PathBuf::from(path),
                ];
                candidates.iter().find_map(|candidate| {
                    let file = File::open(candidate).ok()?;
                    let same_file = file.metadata().ok()?.ino() == line.inode;
                    same_file.then(|| Arc::new(file))
                })
            })
            .clone()
    }

    /// The mapping of `pid` that held `address` in the newest snapshot covering it.
    pub fn resolve(&self, pid: u32, address: u64) -> Option<&Mapping> {
        self.snapshots.get(&pid)?.iter().rev().find_map(|snapshot| {
            snapshot
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
}
