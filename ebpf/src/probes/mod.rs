//! The probes of the eBPF backend, one file each, named as the probe's BPF object
//! (`bpf/NAME.bpf.c`, `bpf/NAME.h`; Rust names take `_` for `-`: `mutex_hold.rs` is the
//! `mutex-hold` probe). One object may serve several catalog probes (`offcpu` also serves
//! `wakeup`, `preempt` and `waitfor`).
//!
//! Each implements [`Probe`]. Most aggregate into one map of `lks_stats` by a key of their own
//! (probe.bpf.h's `aggregate`) and attach every program by its section: they implement
//! [`AggregationKey`] for their key, and [`Aggregating`] is their [`Probe`]. Each is registered on
//! the descriptor of the catalog probe it implements (`ProbeInfo::descriptor`, from
//! `lockscope_probes::catalog`), which gives its name and the hooks stored in profiles; a test
//! checks that every descriptor has exactly one loader.
//!
//! Nothing here lists the probes: build.rs declares a module for every file of this directory
//! and lists their registrations, each file's `pub(crate) const REGISTERED: fn() -> Registered`
//! (`Registered::of::<ItsProbe>`), and [`all`] puts them in catalog order. Adding a probe: its
//! `.bpf.c` and `.h` (build.rs finds the `.bpf.c` and makes its skeleton module), its file here
//! with its `REGISTERED`, its descriptor in the OS-neutral catalog, and its report section in the
//! profiler.

// `mod NAME;` for every `NAME.rs` here, and `REGISTRATIONS`, their `NAME::REGISTERED`. rustfmt
// does not follow modules declared in an included file: `.ci/run` checks these files by name.
include!(concat!(env!("OUT_DIR"), "/probes.rs"));

use crate::error::{Error, ProbeError};
use crate::libbpf_log;
use crate::object::{comm, entries, wait_stats, Counters, LksStats, LoadedObject, Plain};
use crate::probe::{
    AttachContext, DrainContext, Drained, LoadContext, Probe, ProbeInfo, RawRecord, Registered,
};
use crate::syscalls::errno_name;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use lockscope_probes::{ProbeDescriptor, WaitKind, CATALOG};

pub use cpu::{DEFAULT_FREQUENCY_HZ, MAX_FREQUENCY_HZ};
pub(crate) use offcpu::interval as offcpu_interval;

/// Every probe, in catalog order (of the descriptors they are registered on).
pub(crate) fn all() -> Vec<Registered> {
    let mut all: Vec<Registered> = REGISTRATIONS
        .iter()
        .map(|registered| registered())
        .collect();
    all.sort_by_key(|registered| catalog_position(registered.info.descriptor));
    all
}

/// Where `descriptor` is in the catalog; past its end when it is not there (a loader the test
/// below refuses).
fn catalog_position(descriptor: &ProbeDescriptor) -> usize {
    CATALOG
        .iter()
        .position(|d| d.name == descriptor.name)
        .unwrap_or(CATALOG.len())
}

/// The key of a probe's aggregation map whose values are `lks_stats`: each such probe has its
/// own key type, and says here what it is and how its keys become records.
pub(crate) trait AggregationKey: Plain + 'static {
    /// The probe's skeleton.
    type Skel: Skel<'static> + 'static;
    /// Name of the aggregation map.
    const MAP: &'static str;
    /// What the probe's records are.
    const KIND: WaitKind;
    /// The probe's names, hooks and needs.
    fn info() -> ProbeInfo;
    /// Opens and loads the object ([`load_object`] with the probe's settings).
    fn load(cx: &LoadContext<'_>) -> Result<LoadedObject<Self::Skel>, ProbeError>;
    /// Attaches the loaded object; the hooks to list when they say more than
    /// [`ProbeInfo::hooks`]. Default: every loaded program by its section.
    fn attach(
        object: &mut LoadedObject<Self::Skel>,
        _cx: &AttachContext,
    ) -> Result<Option<String>, ProbeError> {
        object.attach_all().map(|()| None)
    }
    /// `(tgid, tid)` of the key's thread.
    fn thread(&self) -> (u32, u32);
    /// The object waited on (0: none).
    fn object(&self) -> u64 {
        0
    }
    /// The record's operation.
    fn operation(&self) -> String;
    /// `(user, kernel)` stack ids, negative when not captured.
    fn stack_ids(&self) -> (i32, i32);
}

/// Opens an object with `builder`, lets `configure` set its globals, selects `cx.variant`'s
/// programs, makes it reuse the shared maps, and loads it. On failure: why, with the verifier's
/// or libbpf's reason.
pub(crate) fn load_object<B, O, S>(
    builder: B,
    cx: &LoadContext<'_>,
    configure: impl FnOnce(&mut O),
) -> Result<LoadedObject<S>, ProbeError>
where
    B: SkelBuilder<'static, Output = O>,
    O: OpenSkel<'static, Output = S>,
    S: Skel<'static>,
{
    let (object, reason) = libbpf_log::capture(|| {
        LoadedObject::load(builder, |open: &mut O| {
            configure(open);
            cx.variant.select(open.open_object_mut());
            cx.shared.reuse_in(open.open_object_mut())
        })
    });
    object.map_err(|source| ProbeError::Load { reason, source })
}

/// The [`Probe`] of a probe that aggregates by key `K`.
pub(crate) struct Aggregating<K: AggregationKey> {
    object: LoadedObject<K::Skel>,
    /// The hooks, when they say more than the static ones (a measured cost).
    hooks: Option<String>,
}

impl<K: AggregationKey> Probe for Aggregating<K> {
    fn info() -> ProbeInfo {
        K::info()
    }

    fn load(cx: &LoadContext<'_>) -> Result<Self, ProbeError> {
        Ok(Aggregating {
            object: K::load(cx)?,
            hooks: None,
        })
    }

    fn attach(&mut self, cx: &AttachContext) -> Result<(), ProbeError> {
        self.hooks = K::attach(&mut self.object, cx)?;
        Ok(())
    }

    fn detach(&mut self) {
        self.object.detach();
    }

    fn status(&self) -> (String, lockscope_probes::AttachStatus) {
        (
            self.hooks.clone().unwrap_or_default(),
            lockscope_probes::AttachStatus::Attached,
        )
    }

    fn counters(&self) -> Result<Counters, Error> {
        self.object.counters()
    }

    fn drain(&self, _cx: &DrainContext<'_>, out: &mut Drained) -> Result<(), Error> {
        let map = self.object.map(K::MAP)?;
        for (k, v) in entries::<K, LksStats>(&map, K::MAP)? {
            let (pid, tid) = k.thread();
            let (user_stack_id, kernel_stack_id) = k.stack_ids();
            out.records.push(RawRecord {
                probe: K::info().name(),
                kind: K::KIND,
                classify: false,
                pid,
                tid,
                object: k.object(),
                operation: k.operation(),
                user_stack_id,
                kernel_stack_id,
                comm: comm(&v.comm),
                woken_by: None,
                stats: wait_stats(&v),
                futex_sleep: false,
            });
        }
        Ok(())
    }
}

/// `operation` followed by the errno name of `err` when it is not 0 (`openat ENOENT`).
fn with_errno(operation: String, err: i32) -> String {
    if err == 0 {
        operation
    } else {
        format!("{operation} {}", errno_name(err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every probe of the OS-neutral catalog has exactly one loader on Linux (the eBPF backend's
    /// only OS: no probe is absent by design), and the loaders serve the catalog's probes only,
    /// in its order: no probe file registers a descriptor outside the catalog or one another file
    /// registers, and a loader serving several probes serves them in catalog order.
    #[test]
    fn every_descriptor_has_one_loader() {
        let served: Vec<&str> = all().iter().flat_map(|r| r.info.names()).collect();
        let catalog: Vec<&str> = CATALOG.iter().map(|d| d.name).collect();
        assert_eq!(served, catalog);
    }
}
