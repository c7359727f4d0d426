//! The `mutex-hold` probe (`bpf/mutex_hold.bpf.c`, `bpf/mutex_hold.h`): how long the targets hold pthread
//! mutexes, by mutex and by how it was acquired (free, spun, blocked), with the stacks of the
//! lock. Uprobes in the target's C library: about three hits per lock+unlock, so off by default;
//! the attach measures that cost and shows it in the probe's hooks.

use super::{load_object, Aggregating, AggregationKey};
use crate::error::ProbeError;
use crate::object::{LoadedObject, Plain};
use crate::probe::{AttachContext, LoadContext, PrivilegedHook, ProbeInfo, Registered};
use crate::skel::mutex_hold::types::{hold_acquire as How, hold_key};
use crate::skel::mutex_hold::{MutexHoldSkel, MutexHoldSkelBuilder};
use crate::variant::ProgramVariant;
use libbpf_rs::Link;
use lockscope_probes::{catalog, WaitKind};

/// The probe's loader, found by `probes::all`: it aggregates by `struct hold_key`.
pub(crate) const REGISTERED: fn() -> Registered = Registered::of::<Aggregating<hold_key>>;

/// The C library the uprobes go into (libbpf finds it on the library path).
const LIBC: &str = "libc.so.6";
/// Lock+unlock pairs timed to measure what the uprobes cost.
const CALIBRATION_CALLS: u32 = 2000;

/// A lock call that took this much longer than the uprobes' own time, without blocking, spun.
const SPIN_NS: u64 = 1000;

// SAFETY: a generated #[repr(C)] struct of integers and a #[repr(transparent)] u32 enum: valid
// for every bit pattern.
unsafe impl Plain for hold_key {}

impl AggregationKey for hold_key {
    type Skel = MutexHoldSkel<'static>;
    const MAP: &'static str = "holds";
    const KIND: WaitKind = WaitKind::Hold;

    fn info() -> ProbeInfo {
        ProbeInfo {
            descriptor: &catalog::MUTEX_HOLD,
            also_serves: &[],
            needs: &[],
            privileged: &[PrivilegedHook::Uprobes],
        }
    }

    fn load(cx: &LoadContext<'_>) -> Result<LoadedObject<Self::Skel>, ProbeError> {
        load_object(MutexHoldSkelBuilder::default(), cx, |_| {})
    }

    /// Attaches into `cx.pid` (every process without one), after measuring what the uprobes cost: the same probes attached
    /// to this process (not a target: each hit returns after one lookup) slow a lock+unlock pair
    /// of its own by the cost of three uprobe hits, shown in the probe's hooks.
    fn attach(
        object: &mut LoadedObject<Self::Skel>,
        cx: &AttachContext,
    ) -> Result<Option<String>, ProbeError> {
        let baseline = time_lock_pairs();
        let cost = links(object.skel(), cx.variant, std::process::id() as i32).map(|links| {
            let traced = time_lock_pairs();
            drop(links);
            (traced - baseline).max(0.0)
        });
        // Without one process, every process's C library (-1), filtered by `targets` in BPF.
        let pid = cx.pid.map_or(-1, |pid| pid as i32);
        // The uprobes' own time between a lock call's entry and its return is about half a
        // pair's cost (three hits, the return one the dearest): past two thirds of it, and 1 µs
        // more, a call that did not block spun.
        let spin_ns = cost
            .as_ref()
            .map_or(SPIN_NS, |&ns| SPIN_NS + (ns * 2.0 / 3.0) as u64);
        if let Some(data) = object.skel_mut().maps.data_data.as_deref_mut() {
            data.lks_spin_ns = spin_ns;
        }
        let links = links(object.skel(), cx.variant, pid)?;
        object.keep(links);
        Ok(cost.ok().map(|ns| {
            format!(
                "{}; measured {:.1} µs per lock+unlock, so spun: a call of over {:.1} µs",
                catalog::MUTEX_HOLD.ebpf_hooks,
                ns / 1000.0,
                spin_ns as f64 / 1000.0
            )
        }))
    }

    fn thread(&self) -> (u32, u32) {
        (self.tgid, self.tid)
    }

    fn object(&self) -> u64 {
        self.mutex
    }

    fn operation(&self) -> String {
        match self.how {
            How::LKS_ACQUIRE_BLOCKED => "hold (blocked)",
            How::LKS_ACQUIRE_SPUN => "hold (spun)",
            _ => "hold (free)",
        }
        .to_owned()
    }

    fn stack_ids(&self) -> (i32, i32) {
        (self.user_stack_id, self.kernel_stack_id)
    }
}

/// Attaches the three uprobes into process `pid`'s C library.
fn links(
    skel: &MutexHoldSkel<'static>,
    variant: ProgramVariant,
    pid: i32,
) -> Result<Vec<Link>, ProbeError> {
    let progs = &skel.progs;
    let locked = variant.pick(&progs.lks_hold_locked, &progs.lks_hold_locked_compat);
    let probes = [
        (&progs.lks_hold_lock, "pthread_mutex_lock", false),
        (locked, "pthread_mutex_lock", true),
        (&progs.lks_hold_unlock, "pthread_mutex_unlock", false),
    ];
    let mut links = Vec::new();
    for (program, function, retprobe) in probes {
        let opts = libbpf_rs::UprobeOpts {
            func_name: Some(function.to_owned()),
            retprobe,
            ..Default::default()
        };
        let link = program
            .attach_uprobe_with_opts(pid, LIBC, 0, opts)
            .map_err(|source| ProbeError::Attach {
                hook: format!(
                    "{LIBC}:{function}{}",
                    if retprobe { " (return)" } else { "" }
                ),
                source,
            })?;
        links.push(link);
    }
    Ok(links)
}

/// Nanoseconds per lock+unlock pair of a private mutex in this process.
fn time_lock_pairs() -> f64 {
    let mut mutex = Box::new(libc::PTHREAD_MUTEX_INITIALIZER);
    let start = std::time::Instant::now();
    for _ in 0..CALIBRATION_CALLS {
        // SAFETY: a private, initialized mutex, locked and unlocked by this thread.
        unsafe {
            libc::pthread_mutex_lock(&mut *mutex);
            libc::pthread_mutex_unlock(&mut *mutex);
        }
    }
    start.elapsed().as_nanos() as f64 / f64::from(CALIBRATION_CALLS)
}
