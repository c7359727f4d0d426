//! The `futex` BPF object: opening, loading, attaching with the raw_tp fallback, and reading its
//! maps. Everything BPF lives in one [`FutexObject`]; dropping it detaches every link and closes
//! every program and map.

use crate::error::Error;
use crate::libbpf_log;
use crate::shared::SharedMaps;
use crate::skel::types::{futex_wait_key, lks_counters, lks_stats};
use crate::skel::{FutexSkel, FutexSkelBuilder};
use crate::unwind::decode_user_stack;
use crate::variant::ProgramVariant;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject, ProgramMut, TracepointCategory};
use lockscope_probes::AttachStatus;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// Name of the BPF object in errors.
const OBJECT: &str = "futex";
/// tracefs's event directories, where a mounted tracefs lists the per-syscall tracepoints.
const TRACEFS_EVENTS: [&str; 2] = [
    "/sys/kernel/debug/tracing/events",
    "/sys/kernel/tracing/events",
];

/// Heap storage for the libbpf object that the skeleton borrows. It lives in a [`FutexObject`]
/// next to the skeleton, so the skeleton's borrow is given a `'static` lifetime; the field order of
/// [`FutexObject`] guarantees the skeleton is dropped first.
pub(crate) struct ObjectStorage(NonNull<MaybeUninit<OpenObject>>);

impl ObjectStorage {
    pub(crate) fn new() -> Self {
        Self(NonNull::from(Box::leak(Box::new(MaybeUninit::uninit()))))
    }

    /// The storage, for a skeleton to open into.
    ///
    /// # Safety
    /// Call at most once per storage, and drop the borrowing skeleton before the storage.
    pub(crate) unsafe fn borrow(&self) -> &'static mut MaybeUninit<OpenObject> {
        // SAFETY: the pointer comes from Box::leak and stays valid until `drop`; the caller
        // guarantees this is the only borrow and that it ends before `drop`.
        unsafe { &mut *self.0.as_ptr() }
    }
}

impl Drop for ObjectStorage {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::leak in `new`, and every borrow (the skeleton) has
        // been dropped: it is declared before the storage wherever both live. Dropping a
        // `MaybeUninit` frees the allocation without touching its content, which the skeleton
        // already closed.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// How one kernel hook was attached.
#[derive(Clone, Debug)]
pub struct HookUse {
    /// Preferred hook (`tp_btf/sys_enter`).
    pub preferred: String,
    /// Hook actually used.
    pub used: String,
    /// Why the preferred one was not used, when it was not.
    pub fallback_reason: Option<String>,
}

/// The loaded (and, after [`FutexObject::attach`], attached) BPF object.
pub struct FutexObject {
    // Field order is drop order: links (detach), then the skeleton (programs and maps), then the
    // storage the skeleton borrows.
    links: Vec<Link>,
    skel: FutexSkel<'static>,
    _storage: ObjectStorage,
    /// Why the tp_btf programs could not be loaded, when they could not.
    btf_load_error: Option<String>,
    /// Whether to try tracefs's per-syscall tracepoints before the generic hooks (a test of the
    /// generic hooks turns it off).
    syscall_tracepoints: bool,
    hooks: Vec<HookUse>,
}

/// Plain-old-data types of the skeleton that can be read from map bytes.
///
/// # Safety
/// Implement only for `#[repr(C)]` types valid for every bit pattern.
pub(crate) unsafe trait Plain: Copy + Default {}
// SAFETY: generated #[repr(C)] structs of integers (and a #[repr(transparent)] u32 enum).
unsafe impl Plain for futex_wait_key {}
// SAFETY: as above.
unsafe impl Plain for lks_stats {}
// SAFETY: as above.
unsafe impl Plain for lks_counters {}

/// Attaches `hook` by tp_btf (`btf`) unless its programs failed to load (`btf_load_error`) or the
/// kernel refuses it, else by raw_tp (`raw`).
fn attach_generic(
    btf_load_error: Option<&str>,
    hook: &'static str,
    btf: &ProgramMut<'_>,
    raw: &ProgramMut<'_>,
) -> Result<(Link, HookUse), Error> {
    let preferred = format!("tp_btf/{hook}");
    let fallback = format!("raw_tp/{hook}");
    let btf_attempt = match btf_load_error {
        Some(reason) => Err(reason.to_owned()),
        None => btf.attach().map_err(|e| format!("{preferred}: {e}")),
    };
    let (link, used, fallback_reason) = match btf_attempt {
        Ok(link) => (link, preferred.clone(), None),
        Err(reason) => {
            let link = raw
                .attach()
                .map_err(|source| Error::Attach { hook, source })?;
            (link, fallback, Some(reason))
        }
    };
    Ok((
        link,
        HookUse {
            preferred,
            used,
            fallback_reason,
        },
    ))
}

/// Why a per-syscall tracepoint was refused, and the links attached before it.
type RefusedTracepoints = (String, Vec<Link>);

/// Attaches the futex system calls' own tracepoints, every exit before any entry: `Ok(None)` when
/// tracefs is not mounted, `Err((why, links))` when one of them is refused, with what did attach:
/// the caller attaches the generic hooks, then drops those links, so that no wait whose entry was
/// seen loses its exit. A system call the kernel does not have (futex_waitv before Linux 5.16,
/// futex_wait before 6.7) has no events and is skipped.
fn attach_syscall_tracepoints(
    progs: &crate::skel::FutexProgs<'_>,
) -> Result<Option<(Vec<Link>, String)>, RefusedTracepoints> {
    // Where libbpf looks for the events (debugfs's tracing first, when present). Checked first so
    // that a machine without tracefs gets no libbpf warning, just the generic hooks.
    let has_events = |call: &str| {
        TRACEFS_EVENTS.iter().any(|dir| {
            std::path::Path::new(dir)
                .join(format!("syscalls/sys_enter_{call}"))
                .is_dir()
        })
    };
    if !has_events("futex") {
        return Ok(None);
    }
    let variant = ProgramVariant::current();
    let calls: [(&str, &ProgramMut<'_>, &ProgramMut<'_>); 3] = [
        (
            "futex",
            variant.pick(&progs.lks_exit_futex_tp, &progs.lks_exit_futex_tp_compat),
            &progs.lks_enter_futex_tp,
        ),
        (
            "futex_waitv",
            variant.pick(
                &progs.lks_exit_futex_waitv_tp,
                &progs.lks_exit_futex_waitv_tp_compat,
            ),
            &progs.lks_enter_futex_waitv_tp,
        ),
        (
            "futex_wait",
            variant.pick(
                &progs.lks_exit_futex_wait_tp,
                &progs.lks_exit_futex_wait_tp_compat,
            ),
            &progs.lks_enter_futex_wait_tp,
        ),
    ];
    let present: Vec<_> = calls.iter().filter(|(call, ..)| has_events(call)).collect();
    let mut links = Vec::new();
    for (direction, call, program) in present
        .iter()
        .map(|(call, exit, _)| ("exit", *call, *exit))
        .chain(
            present
                .iter()
                .map(|(call, _, enter)| ("enter", *call, *enter)),
        )
    {
        let event = format!("sys_{direction}_{call}");
        match program.attach_tracepoint(TracepointCategory::Syscalls, event.as_str()) {
            Ok(link) => links.push(link),
            Err(e) => return Err((format!("tracepoint/syscalls/{event}: {e}"), links)),
        }
    }
    let used: Vec<&str> = present.iter().map(|(call, ..)| *call).collect();
    let used = used
        .iter()
        .map(|call| format!("tracepoint/syscalls/sys_{{enter,exit}}_{call}"))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Some((links, used)))
}

/// Reads a `T` from the start of `bytes`; `None` when they are too short.
pub(crate) fn read_plain<T: Plain>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < std::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: `bytes` holds at least size_of::<T>() bytes, T is valid for every bit pattern
    // (Plain), and read_unaligned does not need alignment.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

impl FutexObject {
    /// Opens and loads the object: with the tp_btf programs if the kernel accepts them, else
    /// with the raw_tp ones alone.
    pub fn load(shared: Option<&SharedMaps>) -> Result<Self, Error> {
        match libbpf_log::capture(|| Self::load_flavor(true, shared)) {
            (Ok(object), _) => Ok(object),
            (Err(btf_error), btf_reason) => {
                let (object, reason) = libbpf_log::capture(|| Self::load_flavor(false, shared));
                let mut object = object.map_err(|source| Error::Load {
                    object: OBJECT,
                    reason,
                    source,
                })?;
                object.btf_load_error = Some(format!(
                    "tp_btf programs failed to load: {}",
                    btf_reason.unwrap_or_else(|| btf_error.to_string())
                ));
                Ok(object)
            }
        }
    }

    /// Loads one flavor; with `shared`, its `targets` and stack maps are the shared ones.
    fn load_flavor(with_btf: bool, shared: Option<&SharedMaps>) -> Result<Self, libbpf_rs::Error> {
        let storage = ObjectStorage::new();
        // SAFETY: the only borrow of this fresh storage; the skeleton that holds it is either
        // dropped below (on error, before `storage`, being declared later) or moved into a
        // FutexObject next to the storage, declared before it.
        let mut open = FutexSkelBuilder::default().open(unsafe { storage.borrow() })?;
        ProgramVariant::current().select(open.open_object_mut());
        if !with_btf {
            for mut program in open.open_object_mut().progs_mut() {
                if program.section().to_string_lossy().starts_with("tp_btf/") {
                    program.set_autoload(false);
                }
            }
        }
        if let Some(shared) = shared {
            shared.reuse_in(open.open_object_mut())?;
        }
        let skel = open.load()?;
        Ok(FutexObject {
            links: Vec::new(),
            skel,
            _storage: storage,
            btf_load_error: None,
            syscall_tracepoints: true,
            hooks: Vec::new(),
        })
    }

    /// Adds a process (tgid) to the recorded set.
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

    /// Attaches sched_process_fork and sched_process_exit, then the system call exits, then their
    /// entries (so no wait starts before its end can be seen). The system calls go through
    /// tracefs's per-syscall tracepoints when it is mounted (only futex calls then run BPF),
    /// else through the generic sys_enter/sys_exit; every generic hook by tp_btf when loaded and
    /// accepted, else by raw_tp.
    pub fn attach(&mut self) -> Result<(), Error> {
        let progs = &self.skel.progs;
        let btf_load_error = self.btf_load_error.as_deref();
        let syscall_tracepoints = self.syscall_tracepoints;
        let mut links = Vec::new();
        let mut hooks = Vec::new();
        let result = (|| {
            let variant = ProgramVariant::current();
            for (hook, btf, raw) in [
                (
                    "sched_process_fork",
                    &progs.lks_fork_btf,
                    &progs.lks_fork_raw,
                ),
                (
                    "sched_process_exit",
                    variant.pick(&progs.lks_texit_btf, &progs.lks_texit_btf_compat),
                    variant.pick(&progs.lks_texit_raw, &progs.lks_texit_raw_compat),
                ),
            ] {
                let (link, used) = attach_generic(btf_load_error, hook, btf, raw)?;
                links.push(link);
                hooks.push(used);
            }
            let mut partial = Vec::new();
            let tracepoints = if syscall_tracepoints {
                attach_syscall_tracepoints(progs)
            } else {
                Ok(None)
            };
            let tracepoints_failed = match tracepoints {
                Ok(Some((syscall_links, used))) => {
                    links.extend(syscall_links);
                    hooks.push(HookUse {
                        preferred: used.clone(),
                        used,
                        fallback_reason: None,
                    });
                    return Ok(());
                }
                Ok(None) => None,
                Err((reason, attached)) => {
                    partial = attached;
                    Some(reason)
                }
            };
            for (hook, btf, raw) in [
                (
                    "sys_exit",
                    variant.pick(&progs.lks_exit_btf, &progs.lks_exit_btf_compat),
                    variant.pick(&progs.lks_exit_raw, &progs.lks_exit_raw_compat),
                ),
                ("sys_enter", &progs.lks_enter_btf, &progs.lks_enter_raw),
            ] {
                let (link, mut used) = attach_generic(btf_load_error, hook, btf, raw)?;
                // tracefs is mounted but its tracepoints were refused: say so, as a fallback.
                if let Some(reason) = &tracepoints_failed {
                    used.preferred = format!("tracepoint/syscalls/{hook}_futex");
                    used.fallback_reason = Some(reason.clone());
                }
                links.push(link);
                hooks.push(used);
            }
            // The generic hooks are in: the refused set's links can go.
            drop(partial);
            Ok(())
        })();
        // Kept even on failure, so that what did attach is detached by drop like the rest.
        self.links.extend(links);
        self.hooks.extend(hooks);
        result
    }

    /// Detaches every program; the maps stay readable.
    pub fn detach(&mut self) {
        self.links.clear();
    }

    /// What became of the hooks, as one probe attachment status: `(preferred hooks, status)`.
    pub fn attach_status(&self) -> (String, AttachStatus) {
        let preferred = self
            .hooks
            .iter()
            .map(|h| h.preferred.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let reasons: Vec<&str> = self
            .hooks
            .iter()
            .filter_map(|h| h.fallback_reason.as_deref())
            .collect();
        let status = if reasons.is_empty() {
            AttachStatus::Attached
        } else {
            let mut reasons = reasons;
            reasons.dedup();
            AttachStatus::FellBack {
                hook: self
                    .hooks
                    .iter()
                    .map(|h| h.used.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                reason: reasons.join("; "),
            }
        };
        (preferred, status)
    }

    /// The counters, summed over CPUs.
    pub fn counters(&self) -> Result<lks_counters, Error> {
        let map_error = |source| Error::Map {
            map: "counters",
            source,
        };
        let per_cpu = self
            .skel
            .maps
            .counters
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(map_error)?
            .unwrap_or_default();
        let mut sum = lks_counters::default();
        for c in per_cpu
            .iter()
            .filter_map(|bytes| read_plain::<lks_counters>(bytes))
        {
            sum.events += c.events;
            sum.user_stack_failures += c.user_stack_failures;
            sum.kernel_stack_failures += c.kernel_stack_failures;
            sum.agg_map_full += c.agg_map_full;
            sum.start_map_full += c.start_map_full;
            sum.dropped += c.dropped;
        }
        Ok(sum)
    }

    /// Every aggregated wait.
    pub fn waits(&self) -> Result<Vec<(futex_wait_key, lks_stats)>, Error> {
        let map = &self.skel.maps.waits;
        let mut waits = Vec::new();
        for key_bytes in map.keys() {
            let value = map
                .lookup(&key_bytes, MapFlags::ANY)
                .map_err(|source| Error::Map {
                    map: "waits",
                    source,
                })?;
            if let (Some(key), Some(value)) = (
                read_plain::<futex_wait_key>(&key_bytes),
                value.as_deref().and_then(read_plain::<lks_stats>),
            ) {
                waits.push((key, value));
            }
        }
        Ok(waits)
    }

    /// The addresses of a captured stack, leaf first (`kernel`: from the kernel stack map).
    pub fn stack(&self, id: i32, kernel: bool) -> Result<Vec<u64>, Error> {
        let (map, name) = if kernel {
            (&self.skel.maps.kernel_stacks, "kernel_stacks")
        } else {
            (&self.skel.maps.user_stacks, "user_stacks")
        };
        let bytes = map
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| Error::Map { map: name, source })?
            .unwrap_or_default();
        if !kernel {
            return Ok(decode_user_stack(&bytes).unwrap_or_default().pcs);
        }
        Ok(bytes
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .take_while(|&addr| addr != 0)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// The raw_tp flavor loads and attaches on its own, is reported as a fallback, and records a
    /// futex wait of this thread with its address, op and duration (on the generic hooks, with
    /// tracefs mounted or not).
    #[test]
    #[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
    fn raw_tp_fallback_records_a_wait() {
        if let Err(why) = crate::environment::check_environment() {
            assert!(
                std::env::var_os("LOCKSCOPE_REQUIRE_BPF").is_none(),
                "cannot run: {why} (LOCKSCOPE_REQUIRE_BPF is set)"
            );
            eprintln!("skipped: {why}");
            return;
        }
        let mut object = FutexObject::load_flavor(false, None).expect("load raw_tp flavor");
        object.btf_load_error = Some("forced by test".into());
        object.syscall_tracepoints = false;
        object.add_target(std::process::id()).expect("add target");
        object.attach().expect("attach raw_tp");

        let word = AtomicU32::new(0);
        let timeout = libc::timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        // SAFETY: futex on a live word with a valid timespec; it times out after 20 ms.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                0u32,
                &timeout as *const libc::timespec,
            )
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        object.detach();

        let waits = object.waits().expect("read waits");
        let mine: Vec<_> = waits
            .iter()
            .filter(|(key, _)| key.tid == tid && key.uaddr == word.as_ptr() as u64)
            .collect();
        assert_eq!(mine.len(), 1, "{waits:?}");
        let (key, stats) = mine[0];
        assert_eq!(
            key.op.0,
            (libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG) as u32
        );
        assert_eq!(stats.count, 1);
        assert!(stats.total_ns >= 20_000_000, "{stats:?}");
        assert!(object.counters().expect("counters").events >= 1);
        let (_, status) = object.attach_status();
        match status {
            AttachStatus::FellBack { hook, reason } => {
                assert!(hook.contains("raw_tp/sys_enter"), "{hook}");
                assert_eq!(reason, "forced by test");
            }
            other => panic!("not reported as a fallback: {other:?}"),
        }
    }
}
