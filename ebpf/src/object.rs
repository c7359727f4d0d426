//! The lifetime of one loaded BPF object, written once for every object of a recording.
//!
//! A libbpf-rs skeleton borrows the storage it was opened into. [`LoadedObject`] owns both, and
//! the links of the programs attached from it, so a probe holds one value and drops it as a
//! whole: links first (detach), then the skeleton (programs and maps), then the storage.
//! It also has the readers of the map values every probe shares the layout of (`common.h`):
//! [`Plain`] values, `lks_stats`, `lks_counters`.

use crate::error::{Error, ProbeError};
use crate::skel;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapType, OpenObject};
use lockscope_probes::{Log2Histogram, Losses, WaitStats};
use std::borrow::Cow;
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;

/// Heap storage for the libbpf object that a skeleton borrows. Private to this module: only
/// [`LoadedObject`] lends it, and its field order drops the skeleton first.
struct ObjectStorage(NonNull<MaybeUninit<OpenObject>>);

impl ObjectStorage {
    fn new() -> Self {
        Self(NonNull::from(Box::leak(Box::new(MaybeUninit::uninit()))))
    }

    /// The storage, for a skeleton to open into.
    ///
    /// # Safety
    /// Call at most once per storage, and drop the borrowing skeleton before the storage.
    unsafe fn borrow(&self) -> &'static mut MaybeUninit<OpenObject> {
        // SAFETY: the pointer comes from Box::leak and stays valid until `drop`; the caller
        // guarantees this is the only borrow and that it ends before `drop`.
        unsafe { &mut *self.0.as_ptr() }
    }
}

impl Drop for ObjectStorage {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::leak in `new`, and the one borrow (the skeleton)
        // has been dropped: it is declared before the storage in LoadedObject, and dropped
        // before it on the error path of `LoadedObject::load`. Dropping a `MaybeUninit` frees
        // the allocation without touching its content, which the skeleton already closed.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// A loaded BPF object (skeleton `S`) and the links of its attached programs.
pub(crate) struct LoadedObject<S> {
    // Field order is drop order: links (detach), the skeleton, then the storage it borrows.
    links: Vec<Link>,
    skel: S,
    _storage: ObjectStorage,
}

impl<S: Skel<'static>> LoadedObject<S> {
    /// Opens an object with `builder`, lets `prepare` set it up (globals, autoload, shared
    /// maps), and loads it.
    pub fn load<B, O>(
        builder: B,
        prepare: impl FnOnce(&mut O) -> Result<(), libbpf_rs::Error>,
    ) -> Result<Self, libbpf_rs::Error>
    where
        B: SkelBuilder<'static, Output = O>,
        O: OpenSkel<'static, Output = S>,
    {
        let storage = ObjectStorage::new();
        let skel = {
            // SAFETY: the only borrow of this fresh storage; the skeleton holding it is dropped
            // before it: right here on error (the open skeleton is a temporary of this block),
            // else by LoadedObject's field order.
            let borrowed = unsafe { storage.borrow() };
            let mut open = builder.open(borrowed)?;
            prepare(&mut open)?;
            open.load()?
        };
        Ok(LoadedObject {
            links: Vec::new(),
            skel,
            _storage: storage,
        })
    }

    /// Attaches every program that was loaded (the other variant's were not) by its section.
    pub fn attach_all(&mut self) -> Result<(), ProbeError> {
        let mut links = Vec::new();
        for program in self.skel.object().progs_mut().filter(|p| p.autoload()) {
            let link = program.attach().map_err(|source| ProbeError::Attach {
                hook: program.section().to_string_lossy().into_owned(),
                source,
            })?;
            links.push(link);
        }
        self.links.extend(links);
        Ok(())
    }

    /// Its map `name`.
    pub fn map(&self, name: &'static str) -> Result<libbpf_rs::Map<'_>, Error> {
        self.skel
            .object()
            .maps()
            .find(|m| m.name() == name)
            .ok_or_else(|| Error::Map {
                map: name,
                source: libbpf_rs::Error::from(std::io::Error::from(std::io::ErrorKind::NotFound)),
            })
    }

    /// Runs of its programs that the kernel skipped (`recursion_misses` of each): the kernel
    /// never runs a program while the same program is running on that CPU, so a hook that fires
    /// in an interrupt of the program (a timer waking a thread while `sched_waking`'s program
    /// runs for another) goes unseen. Each may have lost an event.
    pub fn skipped_runs(&self) -> Result<u64, Error> {
        let mut skipped = 0u64;
        for program in self.skel.object().progs().filter(|p| p.autoload()) {
            let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            // SAFETY: `info` is a bpf_prog_info of `len` bytes, which the kernel fills (no
            // array field asks for more: their pointers are null); the fd is the program's.
            let rc = unsafe {
                libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(
                    program.as_fd().as_raw_fd(),
                    &mut info,
                    &mut len,
                )
            };
            if rc != 0 {
                return Err(Error::io(
                    format!(
                        "read the statistics of BPF program `{}`",
                        program.name().to_string_lossy()
                    ),
                    std::io::Error::from_raw_os_error(-rc),
                ));
            }
            skipped = skipped.saturating_add(info.recursion_misses);
        }
        Ok(skipped)
    }

    /// Its events and losses: the `counters` map every probe has (common.bpf.h), and the runs
    /// of its programs the kernel skipped.
    pub fn counters(&self) -> Result<Counters, Error> {
        let mut counters = read_counters(&self.map("counters")?)?;
        counters.losses.skipped_runs = self.skipped_runs()?;
        Ok(counters)
    }
}

impl<S> LoadedObject<S> {
    /// The skeleton: its programs, maps and globals.
    pub fn skel(&self) -> &S {
        &self.skel
    }

    /// The skeleton, to set globals.
    pub fn skel_mut(&mut self) -> &mut S {
        &mut self.skel
    }

    /// Keeps `links` until [`LoadedObject::detach`] or the drop.
    pub fn keep(&mut self, links: impl IntoIterator<Item = Link>) {
        self.links.extend(links);
    }

    /// Whether any program is attached.
    pub fn attached(&self) -> bool {
        !self.links.is_empty()
    }

    /// Detaches every program; the maps stay readable.
    pub fn detach(&mut self) {
        self.links.clear();
    }
}

/// Plain-old-data types of the skeletons that can be read from map bytes.
///
/// # Safety
/// Implement only for `#[repr(C)]` types valid for every bit pattern.
pub(crate) unsafe trait Plain: Copy + Default {}

// SAFETY: an integer.
unsafe impl Plain for u32 {}

/// Reads a `T` from the start of `bytes`; `None` when they are too short.
pub(crate) fn read_plain<T: Plain>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < std::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: `bytes` holds at least size_of::<T>() bytes, T is valid for every bit pattern
    // (Plain), and read_unaligned does not need alignment.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// Every `(key, value)` of hash map `map` (`name` in errors). Read in batches
/// ([`batched_entries`]: one system call per few thousand entries, where reading key by key took
/// two per entry, every second in a live view), else key by key.
pub(crate) fn entries<K: Plain, V: Plain>(
    map: &impl MapCore,
    name: &'static str,
) -> Result<Vec<(K, V)>, Error> {
    if let Some(out) = batched_entries(map) {
        return Ok(out);
    }
    entries_one_by_one(map, name)
}

/// Entries read per `BPF_MAP_LOOKUP_BATCH` call at first (more when a hash bucket holds more).
const BATCH_ENTRIES: usize = 4096;

/// Every `(key, value)` of hash map `map` by `BPF_MAP_LOOKUP_BATCH`; `None` when the map is not
/// a hash map or the kernel refuses the batch (before Linux 5.6, or any other failure): the
/// caller then reads it key by key.
fn batched_entries<K: Plain, V: Plain>(map: &impl MapCore) -> Option<Vec<(K, V)>> {
    // The hash maps' batch token is a bucket index (a u32); other types' are keys.
    if !matches!(map.map_type(), MapType::Hash | MapType::LruHash) {
        return None;
    }
    let key_size = map.key_size() as usize;
    let value_size = map.value_size() as usize;
    if key_size < std::mem::size_of::<K>() || value_size < std::mem::size_of::<V>() {
        return None;
    }
    let token_size = key_size.max(8);
    let (mut token_in, mut token_out) = (vec![0u8; token_size], vec![0u8; token_size]);
    let mut capacity = BATCH_ENTRIES;
    let (mut keys, mut values) = (
        vec![0u8; capacity * key_size],
        vec![0u8; capacity * value_size],
    );
    let opts = libbpf_rs::libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_batch_opts>() as _,
        elem_flags: 0,
        flags: 0,
    };
    let mut out = Vec::new();
    let mut first = true;
    loop {
        let mut count = capacity as u32;
        let in_batch = if first {
            std::ptr::null_mut()
        } else {
            token_in.as_mut_ptr().cast()
        };
        // SAFETY: the fd is the map's, open while `map` is borrowed; `keys` and `values` hold
        // `count` keys and values of the map's sizes, the tokens `token_size` >= 8 bytes (the
        // kernel writes a u32 bucket index for a hash map), `opts` is a valid options struct.
        let ret = unsafe {
            libbpf_rs::libbpf_sys::bpf_map_lookup_batch(
                map.as_fd().as_raw_fd(),
                in_batch,
                token_out.as_mut_ptr().cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        let errno = if ret < 0 { -ret } else { 0 };
        match errno {
            0 | libc::ENOENT => {}
            libc::EINTR => continue,
            // A bucket holds more entries than the buffers: again, with room for them.
            libc::ENOSPC if capacity < (1 << 22) => {
                capacity *= 4;
                keys.resize(capacity * key_size, 0);
                values.resize(capacity * value_size, 0);
                continue;
            }
            _ => return None,
        }
        let count = (count as usize).min(capacity);
        for i in 0..count {
            let key = &keys[i * key_size..(i + 1) * key_size];
            let value = &values[i * value_size..(i + 1) * value_size];
            if let (Some(k), Some(v)) = (read_plain::<K>(key), read_plain::<V>(value)) {
                out.push((k, v));
            }
        }
        if errno == libc::ENOENT {
            return Some(out);
        }
        std::mem::swap(&mut token_in, &mut token_out);
        first = false;
    }
}

/// Every `(key, value)` of hash map `map`, key by key (`name` in errors).
fn entries_one_by_one<K: Plain, V: Plain>(
    map: &impl MapCore,
    name: &'static str,
) -> Result<Vec<(K, V)>, Error> {
    let mut out = Vec::new();
    for key in map.keys() {
        let value = map
            .lookup(&key, MapFlags::ANY)
            .map_err(|source| Error::Map { map: name, source })?;
        if let (Some(k), Some(v)) = (read_plain::<K>(&key), value.as_deref().and_then(read_plain)) {
            out.push((k, v));
        }
    }
    Ok(out)
}

/// `struct lks_stats` of common.h. Every skeleton has its own copy of the type (same layout):
/// this one reads them all.
pub(crate) type LksStats = skel::futex::types::lks_stats;
/// `struct lks_counters` of common.h (see [`LksStats`]).
type LksCounters = skel::futex::types::lks_counters;

// SAFETY: generated #[repr(C)] structs of integers and [i8; N] arrays: valid for every bit
// pattern.
unsafe impl Plain for LksStats {}
// SAFETY: as above.
unsafe impl Plain for LksCounters {}

/// Events seen and losses of one probe.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub events: u64,
    pub losses: Losses,
}

impl Counters {
    /// The sum of two counters.
    pub fn add(self, other: Counters) -> Counters {
        Counters {
            events: self.events + other.events,
            losses: add_losses(self.losses, other.losses),
        }
    }
}

/// The sum of two loss counters.
pub(crate) fn add_losses(a: Losses, b: Losses) -> Losses {
    Losses {
        user_stack_failures: a.user_stack_failures + b.user_stack_failures,
        kernel_stack_failures: a.kernel_stack_failures + b.kernel_stack_failures,
        map_full: a.map_full + b.map_full,
        dropped: a.dropped + b.dropped,
        skipped_runs: a.skipped_runs + b.skipped_runs,
        out_of_order: a.out_of_order + b.out_of_order,
    }
}

/// A probe's per-CPU `counters` map (common.bpf.h), summed.
fn read_counters(map: &impl MapCore) -> Result<Counters, Error> {
    let per_cpu = map
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(|source| Error::Map {
            map: "counters",
            source,
        })?
        .unwrap_or_default();
    let mut sum = Counters::default();
    for c in per_cpu.iter().filter_map(|b| read_plain::<LksCounters>(b)) {
        sum.events += c.events;
        sum.losses.user_stack_failures += c.user_stack_failures;
        sum.losses.kernel_stack_failures += c.kernel_stack_failures;
        sum.losses.map_full += c.agg_map_full + c.start_map_full;
        sum.losses.dropped += c.dropped;
    }
    Ok(sum)
}

/// The profile's statistics of an `lks_stats`.
pub(crate) fn wait_stats(v: &LksStats) -> WaitStats {
    WaitStats {
        count: v.count,
        total_ns: v.total_ns,
        max_ns: v.max_ns,
        histogram: Log2Histogram::from_dense(&v.hist),
    }
}

/// A kernel `comm` (NUL-terminated, at most 16 bytes) as a string.
pub(crate) fn comm(raw: &[i8; 16]) -> String {
    comm_str(&raw.map(|c| c as u8)).into_owned()
}

/// [`comm`] of the bytes of a name, borrowed where it is valid UTF-8 (the bottleneck stream reads
/// two names per interval: no allocation for each).
pub(crate) fn comm_str(bytes: &[u8; 16]) -> Cow<'_, str> {
    CStr::from_bytes_until_nul(bytes).map_or(Cow::Borrowed(""), CStr::to_string_lossy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::MapHandle;

    /// A hash map of more entries than one batch holds reads the same whole by batches as key by
    /// key: every entry once, with its value.
    #[test]
    #[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
    fn batches_read_every_entry() {
        if let Err(why) = crate::environment::check_environment() {
            eprintln!("skipped: {why}");
            return;
        }
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let entries_in = (BATCH_ENTRIES * 2 + 123) as u32;
        let map = MapHandle::create(MapType::Hash, Some("lks_test"), 4, 4, 16384, &opts)
            .expect("create a hash map");
        for key in 0..entries_in {
            map.update(&key.to_ne_bytes(), &(key * 3).to_ne_bytes(), MapFlags::ANY)
                .expect("update");
        }
        let mut batched: Vec<(u32, u32)> = batched_entries(&map).expect("batches on this kernel");
        let mut one_by_one: Vec<(u32, u32)> = entries_one_by_one(&map, "lks_test").expect("keys");
        batched.sort_unstable();
        one_by_one.sort_unstable();
        assert_eq!(batched.len(), entries_in as usize);
        assert!(batched.iter().all(|&(k, v)| v == k * 3));
        assert_eq!(batched, one_by_one);
    }
}
