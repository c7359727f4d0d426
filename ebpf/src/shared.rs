//! The maps every BPF object of a recording shares, and their one owner.
//!
//! Each probe is its own BPF object (`bpf/NAME.bpf.c`, its own skeleton), but all of them must
//! see the same `targets` set and write stacks into the same stack maps, so that a process added
//! once is traced by every probe and a stack id means the same stack whoever captured it. The
//! maps are declared in `bpf/common.bpf.h` and the headers it includes (`stacks.bpf.h`, and
//! through it the unwinder's `unwind.bpf.h`), so every object declares identical copies.
//! [`SharedMaps::load`] loads the small `shared` object first (`bpf/shared.bpf.c`: it also
//! follows forks, execs and exits, into `process_events`), keeps a handle on each of its maps, and [`SharedMaps::reuse_in`] makes every
//! later object use those maps instead of creating its own (libbpf `reuse_fd`, before load).
//!
//! Adding a shared map (for example a new unwinder table): declare it in `common.bpf.h` or a
//! header it includes; it is shared by name, with nothing to register here. Rust code that
//! fills or reads it (the unwinder in `src/unwind/`) gets it with [`SharedMaps::map`].
//!
//! The stack maps are read here and only here: [`SharedMaps::kernel_stack`] and
//! [`SharedMaps::user_stack`] (the unwinder's `struct user_stack`, decoded by
//! [`decode_user_stack`]).

use crate::error::Error;
use crate::libbpf_log;
use crate::object::LoadedObject;
use crate::skel::shared::types::{
    lks_targets_config, process_event, process_event_flags, process_event_kind, user_stack,
    user_stack_flags as Flags,
};
use crate::skel::shared::{SharedSkel, SharedSkelBuilder};
use libbpf_rs::skel::Skel;
use libbpf_rs::{MapCore, MapFlags, MapHandle, OpenObject, RingBuffer, RingBufferBuilder};
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};

/// The shared maps, owned by the `shared` object, which also follows forks.
pub(crate) struct SharedMaps {
    // Field order is drop order: the ring buffer and the maps' extra handles, then the object.
    events: RingBuffer<'static>,
    /// What the ring buffer's callback decoded since the last [`SharedMaps::process_events`].
    received: Arc<Mutex<Vec<ProcessEvent>>>,
    maps: BTreeMap<String, MapHandle>,
    object: LoadedObject<SharedSkel<'static>>,
}

/// What happened to a recorded process (`bpf/shared.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcessEventKind {
    /// `pid` was forked by `parent`.
    Fork {
        /// The forking process.
        parent: u32,
        /// Its unwind table was copied to the child in the kernel.
        unwind_copied: bool,
    },
    /// `pid` executed a new program.
    Exec,
    /// The last thread of `pid` exited, with this wait(2) status.
    Exit {
        /// `status << 8`, or the signal that killed it.
        code: u32,
    },
}

/// A fork, exec or exit of a recorded process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProcessEvent {
    /// CLOCK_MONOTONIC, nanoseconds.
    pub time_ns: u64,
    /// The process.
    pub pid: u32,
    pub kind: ProcessEventKind,
    /// Its name (at a fork, the parent's).
    pub comm: String,
    /// A kernel thread.
    pub kernel_thread: bool,
}

/// Decodes a `struct process_event`; `None` for short or unknown records.
pub(crate) fn decode_process_event(bytes: &[u8]) -> Option<ProcessEvent> {
    if bytes.len() < std::mem::size_of::<process_event>() {
        return None;
    }
    // SAFETY: at least size_of bytes; process_event is plain integers, a #[repr(transparent)]
    // u32 enum and a char array, valid for any bits.
    let event: process_event = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
    let has = |flag: process_event_flags| event.flags & flag.0 != 0;
    let kind = match event.kind {
        process_event_kind::LKS_PROCESS_FORK => ProcessEventKind::Fork {
            parent: event.parent,
            unwind_copied: has(process_event_flags::LKS_PROCESS_UNWIND_COPIED),
        },
        process_event_kind::LKS_PROCESS_EXEC => ProcessEventKind::Exec,
        process_event_kind::LKS_PROCESS_EXIT => ProcessEventKind::Exit {
            code: event.exit_code,
        },
        _ => return None,
    };
    let comm: Vec<u8> = event
        .comm
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Some(ProcessEvent {
        time_ns: event.time_ns,
        pid: event.pid,
        kind,
        comm: String::from_utf8_lossy(&comm).into_owned(),
        kernel_thread: has(process_event_flags::LKS_PROCESS_KTHREAD),
    })
}

/// An unwound user stack, as stored by the BPF unwinder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct UnwoundStack {
    /// Pcs, leaf first: the leaf is the exact user pc, the others return addresses.
    pub pcs: Vec<u64>,
    /// The walk stopped before the outermost frame.
    pub truncated: bool,
    /// Some frame was found by frame pointer.
    pub used_frame_pointers: bool,
    /// The walk stopped at a mapping whose table was still being built (also `truncated`).
    pub table_pending: bool,
}

/// A kernel stack: its addresses, leaf first, and whether it was cut at the map's depth.
pub(crate) struct KernelStack {
    pub addresses: Vec<u64>,
    pub truncated: bool,
}

impl SharedMaps {
    /// Loads the owner object and takes a handle on each of its maps (except its own globals);
    /// `events_bytes` sizes the bottleneck stream's ring buffer (`bottleneck_events`, a power of two
    /// of at least a page), or leaves its one page when `None`.
    pub fn load(events_bytes: Option<u32>) -> Result<Self, Error> {
        let (object, reason) = libbpf_log::capture(|| {
            LoadedObject::load(SharedSkelBuilder::default(), |open| match events_bytes {
                Some(bytes) => open.maps.bottleneck_events.set_max_entries(bytes),
                None => Ok(()),
            })
        });
        let object = object.map_err(|source| Error::Load {
            object: "shared",
            reason,
            source,
        })?;
        let mut maps = BTreeMap::new();
        for map in object.skel().object().maps() {
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
        let received = Arc::new(Mutex::new(Vec::new()));
        let events = {
            let received = Arc::clone(&received);
            let error = |source| Error::Map {
                map: "process_events",
                source,
            };
            let mut builder = RingBufferBuilder::new();
            builder
                .add(&object.skel().maps.process_events, move |bytes: &[u8]| {
                    if let Some(event) = decode_process_event(bytes) {
                        received
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(event);
                    }
                    0
                })
                .map_err(error)?;
            builder.build().map_err(error)?
        };
        Ok(SharedMaps {
            events,
            received,
            maps,
            object,
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

    /// Starts following the targets: children of a target become targets, and their forks,
    /// execs and exits go to [`SharedMaps::process_events`]. Attach before the probes.
    pub fn follow_forks(&mut self) -> Result<(), Error> {
        if !self.object.attached() {
            let progs = &self.object.skel().progs;
            let mut links = Vec::new();
            for (program, hook) in [
                (&progs.lks_follow_fork, "sched_process_fork"),
                (&progs.lks_follow_exec, "sched_process_exec"),
                (&progs.lks_follow_exit, "sched_process_exit"),
            ] {
                links.push(
                    program
                        .attach()
                        .map_err(|source| Error::Attach { hook, source })?,
                );
            }
            self.object.keep(links);
        }
        Ok(())
    }

    /// Stops following the targets.
    pub fn detach(&mut self) {
        self.object.detach();
    }

    /// Makes every process a target but `exclude` (lockscope's own), kernel threads included.
    pub fn record_all(&self, exclude: u32) -> Result<(), Error> {
        let config = lks_targets_config {
            all: 1,
            exclude_tgid: exclude,
        };
        // SAFETY: two u32s: no padding.
        let value = unsafe {
            std::slice::from_raw_parts(
                (&config as *const lks_targets_config).cast::<u8>(),
                std::mem::size_of::<lks_targets_config>(),
            )
        };
        self.object
            .skel()
            .maps
            .targets_config
            .update(&0u32.to_ne_bytes(), value, MapFlags::ANY)
            .map_err(|source| Error::Map {
                map: "targets_config",
                source,
            })
    }

    /// The forks, execs and exits of recorded processes since the last call, oldest first.
    pub fn process_events(&self) -> Vec<ProcessEvent> {
        // Consuming only runs the callback; an error leaves the records for the next call.
        let _ = self.events.consume();
        std::mem::take(
            &mut *self
                .received
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Process events the ring buffer had no room for.
    pub fn process_events_lost(&self) -> u64 {
        self.object
            .skel()
            .maps
            .bss_data
            .as_ref()
            .map_or(0, |bss| bss.lks_process_events_lost)
    }

    /// Takes a process (tgid) out of the recorded set (gone, or out of the recorded cgroup).
    pub fn remove_target(&self, tgid: u32) {
        // Absent already: nothing to do.
        let _ = self.object.skel().maps.targets.delete(&tgid.to_ne_bytes());
    }

    /// Adds a process (tgid) to the recorded set of every probe.
    pub fn add_target(&self, tgid: u32) -> Result<(), Error> {
        self.object
            .skel()
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
        self.object
            .skel()
            .maps
            .targets
            .keys()
            .filter_map(|key| key.get(..4)?.try_into().ok().map(u32::from_ne_bytes))
            .collect()
    }

    /// Children that could not be followed because `targets` was full.
    pub fn targets_full(&self) -> u64 {
        self.object
            .skel()
            .maps
            .bss_data
            .as_ref()
            .map_or(0, |bss| bss.lks_targets_full)
    }

    /// Kernel stack `id` (`None` when there is none).
    pub fn kernel_stack(&self, id: i32) -> Result<Option<KernelStack>, Error> {
        let map = &self.object.skel().maps.kernel_stacks;
        let Some(bytes) = map
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| Error::Map {
                map: "kernel_stacks",
                source,
            })?
        else {
            return Ok(None);
        };
        let addresses: Vec<u64> = u64s(&bytes).take_while(|&a| a != 0).collect();
        // bpf_get_stackid cuts a stack at the map's depth (stacks.bpf.h's value_size).
        let depth = map.value_size() as usize / 8;
        Ok(Some(KernelStack {
            truncated: addresses.len() >= depth,
            addresses,
        }))
    }

    /// User stack `id` as the BPF unwinder stored it (`None` when there is none).
    pub fn user_stack(&self, id: i32) -> Result<Option<UnwoundStack>, Error> {
        let bytes = self
            .object
            .skel()
            .maps
            .user_stacks
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| Error::Map {
                map: "user_stacks",
                source,
            })?;
        Ok(bytes.as_deref().and_then(decode_user_stack))
    }
}

/// Decodes a `struct user_stack` value (`bpf/unwind.h`).
pub(crate) fn decode_user_stack(bytes: &[u8]) -> Option<UnwoundStack> {
    if bytes.len() < std::mem::size_of::<user_stack>() {
        return None;
    }
    // SAFETY: at least size_of bytes; user_stack is plain integers (and a #[repr(transparent)]
    // u32 enum), valid for any bits.
    let stack: user_stack = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
    let depth = (stack.depth as usize).min(stack.pcs.len());
    let has = |flag: Flags| stack.flags.0 & flag.0 != 0;
    Some(UnwoundStack {
        pcs: stack.pcs[..depth].to_vec(),
        truncated: has(Flags::LKS_STACK_TRUNCATED),
        used_frame_pointers: has(Flags::LKS_STACK_FP_USED),
        table_pending: has(Flags::LKS_STACK_TABLE_PENDING),
    })
}

/// The native-endian u64s of `bytes`.
fn u64s(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored stack decodes to its first `depth` pcs and its flags; short bytes do not decode.
    #[test]
    fn decodes_user_stack() {
        let mut stack = user_stack {
            depth: 3,
            flags: Flags::LKS_STACK_TRUNCATED,
            ..user_stack::default()
        };
        stack.pcs[..4].copy_from_slice(&[1, 2, 3, 4]);
        // SAFETY: user_stack is two u32 then u64s: no padding; the slice lives as long as
        // `stack`.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&stack as *const user_stack).cast::<u8>(),
                std::mem::size_of::<user_stack>(),
            )
        };
        let decoded = decode_user_stack(bytes).expect("decodes");
        assert_eq!(decoded.pcs, vec![1, 2, 3]);
        assert!(decoded.truncated);
        assert!(!decoded.used_frame_pointers);
        assert_eq!(decode_user_stack(&bytes[..8]), None);
    }
}
