//! The maps every BPF object of a recording shares, and their one owner.
//!
//! Each probe is its own BPF object (`bpf/NAME.bpf.c`, its own skeleton), but all of them must
//! see the same `targets` set and write stacks into the same stack maps, so that a process added
//! once is traced by every probe and a stack id means the same stack whoever captured it. The
//! maps are declared in `bpf/common.bpf.h` and the headers it includes (`stacks.bpf.h`, and
//! through it the unwinder's `unwind.bpf.h`), so every object declares identical copies.
//! [`SharedMaps::load`] loads the small `targets` object first (`bpf/targets.bpf.c`: it also
//! follows forks), keeps a handle on each of its maps, and [`SharedMaps::reuse_in`] makes every
//! later object use those maps instead of creating its own (libbpf `reuse_fd`, before load).
//!
//! Adding a shared map (for example a new unwinder table): declare it in `common.bpf.h` or a
//! header it includes; it is shared by name, with nothing to register here. Rust code that
//! fills or reads it (the unwinder in `src/unwind/`) gets it with [`SharedMaps::map`].

use crate::bpf::ObjectStorage;
use crate::error::Error;
use crate::libbpf_log;
use crate::skels::targets::{TargetsSkel, TargetsSkelBuilder};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, OpenObject};
use std::collections::BTreeMap;
use std::os::fd::AsFd;

/// Depth of a kernel stack in `kernel_stacks` (LKS_MAX_STACK_DEPTH in stacks.bpf.h).
pub(crate) const MAX_KERNEL_STACK_DEPTH: usize = 127;

/// The shared maps, owned by the `targets` object, which also follows forks.
pub(crate) struct SharedMaps {
    // Field order is drop order: the link, then the maps' extra handles, the skeleton, and the
    // storage it borrows.
    follow: Option<Link>,
    maps: BTreeMap<String, MapHandle>,
    skel: TargetsSkel<'static>,
    _storage: ObjectStorage,
}

impl SharedMaps {
    /// Loads the owner object and takes a handle on each of its maps (except its own globals).
    pub fn load() -> Result<Self, Error> {
        let storage = ObjectStorage::new();
        // SAFETY: the only borrow of this fresh storage; the skeleton is dropped before it (on
        // error right here, the skeleton being declared later; else by SharedMaps' field order).
        let (skel, reason) = libbpf_log::capture(|| {
            TargetsSkelBuilder::default()
                .open(unsafe { storage.borrow() })?
                .load()
        });
        let skel = skel.map_err(|source| Error::Load {
            object: "targets",
            reason,
            source,
        })?;
        let mut maps = BTreeMap::new();
        for map in skel.object().maps() {
            let name = map.name().to_string_lossy().into_owned();
            // `.rodata`, `.bss`: the object's own globals, not shared.
            if name.contains('.') {
                continue;
            }
            let handle = MapHandle::try_from(&map).map_err(|source| Error::Map {
                map: "targets",
                source,
            })?;
            maps.insert(name, handle);
        }
        Ok(SharedMaps {
            follow: None,
            maps,
            skel,
            _storage: storage,
        })
    }

    /// Makes the maps of an opened (not yet loaded) object that share a name with a shared map
    /// use the shared one.
    pub fn reuse_in(&self, object: &mut OpenObject) -> Result<(), libbpf_rs::Error> {
        for mut map in object.maps_mut() {
            let name = map.name().to_string_lossy();
            if let Some(shared) = self.maps.get(name.as_ref()) {
                map.reuse_fd(shared.as_fd())?;
            }
        }
        Ok(())
    }

    /// A shared map by name (`targets`, `kernel_stacks`, `user_stacks`, the unwinder's maps).
    pub fn map(&self, name: &str) -> Option<&MapHandle> {
        self.maps.get(name)
    }

    /// Starts following forks: children of a target become targets. Attach before the probes.
    pub fn follow_forks(&mut self) -> Result<(), Error> {
        if self.follow.is_none() {
            let link =
                self.skel
                    .progs
                    .lks_follow_fork
                    .attach()
                    .map_err(|source| Error::Attach {
                        hook: "sched_process_fork",
                        source,
                    })?;
            self.follow = Some(link);
        }
        Ok(())
    }

    /// Stops following forks.
    pub fn detach(&mut self) {
        self.follow = None;
    }

    /// Adds a process (tgid) to the recorded set of every probe.
    pub fn add_target(&self, tgid: u32) -> Result<(), Error> {
        self.skel
            .maps
            .targets
            .update(&tgid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(|source| Error::Map {
                map: "targets",
                source,
            })
    }

    /// The processes being recorded: the target and the children it forked since.
    pub fn targets(&self) -> Vec<u32> {
        self.skel
            .maps
            .targets
            .keys()
            .filter_map(|key| key.get(..4)?.try_into().ok().map(u32::from_ne_bytes))
            .collect()
    }

    /// Children that could not be followed because `targets` was full.
    pub fn targets_full(&self) -> u64 {
        self.skel
            .maps
            .bss_data
            .as_ref()
            .map_or(0, |bss| bss.lks_targets_full)
    }

    /// The addresses of kernel stack `id`, leaf first.
    pub fn kernel_stack(&self, id: i32) -> Result<Vec<u64>, Error> {
        let bytes = self
            .skel
            .maps
            .kernel_stacks
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| Error::Map {
                map: "kernel_stacks",
                source,
            })?
            .unwrap_or_default();
        Ok(u64s(&bytes).take_while(|&a| a != 0).collect())
    }

    /// The addresses of user stack `id`, leaf first, and whether the capture was cut short.
    ///
    /// Reads `user_stacks` in either layout `stacks.bpf.h` has had: a `BPF_MAP_TYPE_STACK_TRACE`
    /// (an array of pcs, zero-terminated) or the unwinder's `struct user_stack` (`depth`,
    /// `flags` with bit 0 = truncated, then `pcs`).
    pub fn user_stack(&self, id: i32) -> Result<Option<(Vec<u64>, bool)>, Error> {
        let Some(map) = self.map("user_stacks") else {
            return Ok(None);
        };
        let Some(bytes) = map
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| Error::Map {
                map: "user_stacks",
                source,
            })?
        else {
            return Ok(None);
        };
        if map.map_type() == libbpf_rs::MapType::StackTrace {
            let pcs: Vec<u64> = u64s(&bytes).take_while(|&a| a != 0).collect();
            let truncated = pcs.len() >= MAX_KERNEL_STACK_DEPTH;
            return Ok(Some((pcs, truncated)));
        }
        let header = u64s(&bytes).next().unwrap_or(0);
        let depth = (header & 0xffff_ffff) as usize;
        let flags = header >> 32;
        let pcs = u64s(&bytes).skip(1).take(depth).collect();
        Ok(Some((pcs, flags & 1 != 0)))
    }
}

/// The native-endian u64s of `bytes`.
fn u64s(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
}
