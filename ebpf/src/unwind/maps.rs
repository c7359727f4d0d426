//! The unwinder's writes to its BPF maps, behind one trait ([`UnwindMaps`]): [`BpfMaps`] writes
//! the real ones (rows and page indexes into the mmap'ed `unwind_rows` and `unwind_pages`
//! arrays, entries of the `unwind_files` and `unwind_procs` hash maps); the unit tests' fake
//! keeps them in memory, so the stores' bookkeeping ([`super::files`], [`super::processes`]) is
//! tested without root.
//!
//! Where rows go is the file store's decision (it allocates ranges of the arrays); the maps only
//! write where they are told. After every write [`BpfMaps`] adds one to the tables' generation
//! (`unwind_generation`): a thread's stack memo is only used under the generation its walk
//! started in (`bpf/unwind_memo.bpf.h`), so no memo outlives a change to the tables it was made
//! with.

use super::StackMaps;
use crate::error::Error;
use crate::skel::shared::types::{unwind_file, unwind_file_key, unwind_proc, unwind_row};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;

/// Writes to the unwinder's BPF maps (`bpf/unwind_maps.bpf.h`).
pub(crate) trait UnwindMaps {
    /// Entries of `unwind_rows`.
    fn row_capacity(&self) -> u32;
    /// Entries of `unwind_pages`.
    fn page_capacity(&self) -> u32;
    /// Writes `rows` to `unwind_rows` from index `first`.
    fn write_rows(&mut self, first: u32, rows: &[unwind_row]) -> Result<(), Error>;
    /// Writes a page index to `unwind_pages` from index `first`.
    fn write_pages(&mut self, first: u32, pages: &[u64]) -> Result<(), Error>;
    /// Adds or replaces a file's entry in `unwind_files`.
    fn put_file(&mut self, key: &unwind_file_key, file: &unwind_file) -> Result<(), Error>;
    /// Removes a file's entry from `unwind_files` (absent is fine).
    fn delete_file(&mut self, key: &unwind_file_key);
    /// Adds or replaces a process's mapping table in `unwind_procs`.
    fn put_proc(&mut self, pid: u32, proc: &unwind_proc) -> Result<(), Error>;
    /// Removes a process's mapping table from `unwind_procs` (absent is fine).
    fn delete_proc(&mut self, pid: u32);
}

/// The unwinder's maps in the kernel.
pub(crate) struct BpfMaps {
    rows: MmapArray<unwind_row>,
    pages: MmapArray<u64>,
    procs: MapHandle,
    files: MapHandle,
    /// `unwind_generation`, and its value.
    generation_map: MapHandle,
    generation: u64,
}

impl BpfMaps {
    /// Handles on the maps of a loaded object, the two arrays mapped into this process.
    pub fn new(maps: &StackMaps<'_>) -> Result<Self, Error> {
        Ok(BpfMaps {
            rows: MmapArray::new(handle(maps.rows, "unwind_rows")?, "unwind_rows")?,
            pages: MmapArray::new(handle(maps.pages, "unwind_pages")?, "unwind_pages")?,
            procs: handle(maps.procs, "unwind_procs")?,
            files: handle(maps.files, "unwind_files")?,
            generation_map: handle(maps.generation, "unwind_generation")?,
            generation: 0,
        })
    }

    /// Ends a change to the tables (after it, never before: a walk that read the old generation
    /// may have seen the tables before the change). Should the update fail, the memos are
    /// turned off for good rather than trusted: the BPF side uses none under generation
    /// `u64::MAX`, which counting never reaches.
    fn changed(&mut self) {
        self.generation += 1;
        let zero = 0u32.to_ne_bytes();
        if self
            .generation_map
            .update(&zero, &self.generation.to_ne_bytes(), MapFlags::ANY)
            .is_err()
        {
            let _ = self
                .generation_map
                .update(&zero, &u64::MAX.to_ne_bytes(), MapFlags::ANY);
        }
    }
}

impl UnwindMaps for BpfMaps {
    fn row_capacity(&self) -> u32 {
        self.rows.capacity
    }

    fn page_capacity(&self) -> u32 {
        self.pages.capacity
    }

    fn write_rows(&mut self, first: u32, rows: &[unwind_row]) -> Result<(), Error> {
        let written = self.rows.write(first, rows);
        self.changed();
        written
    }

    fn write_pages(&mut self, first: u32, pages: &[u64]) -> Result<(), Error> {
        let written = self.pages.write(first, pages);
        self.changed();
        written
    }

    fn put_file(&mut self, key: &unwind_file_key, file: &unwind_file) -> Result<(), Error> {
        // SAFETY: both are #[repr(C)] structs of integers without padding.
        let (key, value) = unsafe { (as_bytes(key), as_bytes(file)) };
        let written = self
            .files
            .update(key, value, MapFlags::ANY)
            .map_err(|source| Error::Map {
                map: "unwind_files",
                source,
            });
        self.changed();
        written
    }

    fn delete_file(&mut self, key: &unwind_file_key) {
        // SAFETY: a #[repr(C)] struct of two u64s: no padding.
        let key = unsafe { as_bytes(key) };
        // Already absent is fine: the map only has to lose the entry.
        let _ = self.files.delete(key);
        self.changed();
    }

    fn put_proc(&mut self, pid: u32, proc: &unwind_proc) -> Result<(), Error> {
        // SAFETY: unwind_proc is a #[repr(C)] struct of integers without padding.
        let value = unsafe { as_bytes(proc) };
        let written = self
            .procs
            .update(&pid.to_ne_bytes(), value, MapFlags::ANY)
            .map_err(|source| Error::Map {
                map: "unwind_procs",
                source,
            });
        self.changed();
        written
    }

    fn delete_proc(&mut self, pid: u32) {
        // Already absent is fine: the map only has to lose the entry.
        let _ = self.procs.delete(&pid.to_ne_bytes());
        self.changed();
    }
}

/// A `MapHandle` of `map`: a duplicate of its fd, so it outlives the object that declared the
/// map. Not by the map's id: `BPF_MAP_GET_FD_BY_ID` needs CAP_SYS_ADMIN, which a recorder with
/// only CAP_BPF and CAP_PERFMON lacks.
pub(crate) fn handle(map: &MapHandle, name: &'static str) -> Result<MapHandle, Error> {
    MapHandle::try_from(map).map_err(|source| Error::Map { map: name, source })
}

/// A BPF_F_MMAPABLE array mapped into this process: `unwind_rows` and `unwind_pages`. `T` must
/// be the array's value type, 8 bytes (the array's element stride).
struct MmapArray<T: Copy> {
    /// Keeps the map alive while it is mapped.
    _map: MapHandle,
    name: &'static str,
    items: NonNull<T>,
    capacity: u32,
}

impl<T: Copy> MmapArray<T> {
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
        Ok(MmapArray {
            _map: map,
            name,
            items,
            capacity,
        })
    }

    /// Writes `items` from index `first`.
    fn write(&mut self, first: u32, items: &[T]) -> Result<(), Error> {
        let fits = u32::try_from(items.len())
            .ok()
            .and_then(|count| first.checked_add(count))
            .is_some_and(|end| end <= self.capacity);
        if !fits {
            return Err(Error::io(
                format!("write to BPF array `{}`", self.name),
                std::io::Error::other(format!(
                    "{} items from index {first} exceed its {} entries",
                    items.len(),
                    self.capacity
                )),
            ));
        }
        // SAFETY: [first, first + len) is inside the mapped array (checked above), which no Rust
        // reference covers. The file store writes only ranges it allocated, freed only after
        // every map entry pointing at them was replaced or deleted; BPF programs only read them
        // (a walk that read such an entry just before may see the new rows: one wrong stack).
        unsafe {
            std::ptr::copy_nonoverlapping(
                items.as_ptr(),
                self.items.as_ptr().add(first as usize),
                items.len(),
            );
        }
        Ok(())
    }
}

impl<T: Copy> Drop for MmapArray<T> {
    fn drop(&mut self) {
        let bytes = self.capacity as usize * std::mem::size_of::<T>();
        // SAFETY: unmaps exactly the mapping made in `new`; nothing refers to it any more.
        unsafe { libc::munmap(self.items.as_ptr().cast(), bytes) };
    }
}

/// The bytes of a plain `#[repr(C)]` value.
///
/// # Safety
/// `T` must have no padding bytes.
pub(crate) unsafe fn as_bytes<T>(value: &T) -> &[u8] {
    // SAFETY: `value` is a valid reference to size_of::<T>() initialized bytes (no padding, per
    // the caller), borrowed for the returned lifetime.
    unsafe {
        std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>())
    }
}

/// The maps in memory, for the stores' unit tests.
#[cfg(test)]
pub(crate) mod fake {
    use super::*;
    use crate::skel::shared::types::unwind_mapping;
    use std::collections::HashMap;

    /// In-memory `unwind_rows`, `unwind_pages`, `unwind_files` and `unwind_procs`.
    pub(crate) struct FakeMaps {
        pub rows: Vec<unwind_row>,
        pub pages: Vec<u64>,
        /// By (dev, ino): (first_row, rows).
        pub files: HashMap<(u64, u64), (u32, u32)>,
        /// By pid: the mappings.
        pub procs: HashMap<u32, Vec<unwind_mapping>>,
    }

    impl FakeMaps {
        pub fn new(rows: u32, pages: u32) -> Self {
            FakeMaps {
                rows: vec![unwind_row::default(); rows as usize],
                pages: vec![0; pages as usize],
                files: HashMap::new(),
                procs: HashMap::new(),
            }
        }
    }

    fn write<T: Copy>(array: &mut [T], first: u32, items: &[T]) -> Result<(), Error> {
        let range = first as usize..first as usize + items.len();
        array
            .get_mut(range)
            .ok_or_else(|| Error::io("write fake array", std::io::Error::other("out of bounds")))?
            .copy_from_slice(items);
        Ok(())
    }

    impl UnwindMaps for FakeMaps {
        fn row_capacity(&self) -> u32 {
            self.rows.len() as u32
        }

        fn page_capacity(&self) -> u32 {
            self.pages.len() as u32
        }

        fn write_rows(&mut self, first: u32, rows: &[unwind_row]) -> Result<(), Error> {
            write(&mut self.rows, first, rows)
        }

        fn write_pages(&mut self, first: u32, pages: &[u64]) -> Result<(), Error> {
            write(&mut self.pages, first, pages)
        }

        fn put_file(&mut self, key: &unwind_file_key, file: &unwind_file) -> Result<(), Error> {
            self.files
                .insert((key.dev, key.ino), (file.first_row, file.rows));
            Ok(())
        }

        fn delete_file(&mut self, key: &unwind_file_key) {
            self.files.remove(&(key.dev, key.ino));
        }

        fn put_proc(&mut self, pid: u32, proc: &unwind_proc) -> Result<(), Error> {
            self.procs
                .insert(pid, proc.mappings[..proc.count as usize].to_vec());
            Ok(())
        }

        fn delete_proc(&mut self, pid: u32) {
            self.procs.remove(&pid);
        }
    }
}
