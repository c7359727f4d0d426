//! The probes beyond futex: `offcpu`, `syscall`, `lifecycle`, `klock`, `mutex-hold` and `cpu`
//! (its loader in `crate::cpu`), each its own BPF object (`bpf/NAME.bpf.c`) sharing the maps of
//! [`SharedMaps`].
//!
//! A [`ProbeSet`] loads the selected ones, attaches them, and at the end drains their maps into
//! raw records ([`Drained`]) that [`resolve`] turns into profile records. A probe that fails to
//! load or attach is reported as [`AttachStatus::Failed`] with the reason, and the others keep
//! working.

use crate::bpf::{read_plain, ObjectStorage, Plain};
use crate::cpu::CpuProbe;
use crate::error::Error;
use crate::libbpf_log;
use crate::procmaps::MapsCache;
use crate::shared::{SharedMaps, MAX_KERNEL_STACK_DEPTH};
use crate::skels::{hold, klock, lifecycle, offcpu, syscall};
use crate::symbolize::{user_stack_complete, StackSymbolizer};
use crate::syscalls::{errno_name, syscall_name, syscall_number};
use crate::variant::ProgramVariant;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags};
use lockscope_probes::{
    AddressSpace, AttachStatus, Log2Histogram, Losses, ProbeAttachment, Stack, StackId,
    StackInterner, ThreadInfo, ThreadTime, TimeClass, WaitKind, WaitRecord, WaitStats,
    WakeupRecord,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::CStr;
use std::time::Duration;

/// Names of the probes this module implements, in catalog order.
pub const PROBE_NAMES: [&str; 7] = [
    "offcpu",
    "wakeup",
    "syscall",
    "lifecycle",
    "klock",
    "mutex-hold",
    "cpu",
];

/// Waker name of the wakeups done from interrupt context (timers, I/O completion).
pub const INTERRUPT_WAKER: &str = "[interrupt]";

/// Environment variable naming probes whose attach fails on purpose (comma-separated): lets a
/// test, or a user checking their monitoring, see what a failed probe looks like.
pub const FAIL_ATTACH_ENV: &str = "LOCKSCOPE_FAIL_ATTACH";

/// Settings of the offcpu, syscall, lifecycle, klock and cpu probes.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProbeSettings {
    /// Shortest off-CPU interval aggregated with its stacks and waker (`offcpu`); shorter ones
    /// still count in the per-thread times. Default: 10 µs.
    pub min_block: Duration,
    /// Names of the system calls to record (`syscall`); empty: all. Default: empty.
    pub syscalls: Vec<String>,
    /// System calls at least this long get their stacks (`syscall`). Default: 1 ms.
    pub slow_syscall: Duration,
    /// Samples per second and CPU of the `cpu` probe (1 to [`crate::MAX_FREQUENCY_HZ`]).
    /// Default: [`crate::DEFAULT_FREQUENCY_HZ`] (99).
    pub frequency_hz: u32,
}

impl Default for ProbeSettings {
    fn default() -> Self {
        ProbeSettings {
            min_block: Duration::from_micros(10),
            syscalls: Vec::new(),
            slow_syscall: Duration::from_millis(1),
            frequency_hz: crate::cpu::DEFAULT_FREQUENCY_HZ,
        }
    }
}

/// A loaded BPF object with its links.
pub(crate) struct ProbeObject<S> {
    // Field order is drop order: links, skeleton, then the storage it borrows.
    pub(crate) links: Vec<Link>,
    pub(crate) skel: S,
    _storage: ObjectStorage,
}

// SAFETY (for all impls below): generated #[repr(C)] structs of integers and [i8; N] arrays, and
// #[repr(transparent)] u32 enums: valid for every bit pattern.
unsafe impl Plain for offcpu::types::offcpu_key {}
// SAFETY: as above.
unsafe impl Plain for offcpu::types::offcpu_thread {}
// SAFETY: as above.
unsafe impl Plain for offcpu::types::wakeup_key {}
// SAFETY: as above.
unsafe impl Plain for offcpu::types::lks_stats {}
// SAFETY: as above.
unsafe impl Plain for offcpu::types::lks_counters {}
// SAFETY: as above.
unsafe impl Plain for syscall::types::syscall_key {}
// SAFETY: as above.
unsafe impl Plain for lifecycle::types::lifecycle_key {}
// SAFETY: as above.
unsafe impl Plain for klock::types::klock_key {}
// SAFETY: as above.
unsafe impl Plain for hold::types::hold_key {}
// SAFETY: an integer.
unsafe impl Plain for u32 {}

/// Opens an object with `builder`, lets `configure` set its globals, makes it reuse the shared
/// maps, and loads it.
/// On failure: why, with the verifier's or libbpf's reason.
fn load_object<B, O, S>(
    builder: B,
    shared: &SharedMaps,
    configure: impl FnOnce(&mut O),
) -> Result<ProbeObject<S>, String>
where
    B: SkelBuilder<'static, Output = O>,
    O: OpenSkel<'static, Output = S>,
    S: Skel<'static>,
{
    load_variant(ProgramVariant::current(), builder, shared, configure)
}

/// [`load_object`] with the programs of `variant`.
pub(crate) fn load_variant<B, O, S>(
    variant: ProgramVariant,
    builder: B,
    shared: &SharedMaps,
    configure: impl FnOnce(&mut O),
) -> Result<ProbeObject<S>, String>
where
    B: SkelBuilder<'static, Output = O>,
    O: OpenSkel<'static, Output = S>,
    S: Skel<'static>,
{
    let storage = ObjectStorage::new();
    let (skel, reason) = libbpf_log::capture(|| {
        // SAFETY: the only borrow of this fresh storage; the skeleton is dropped before it (on
        // error here, being declared later; else by ProbeObject's field order).
        let mut open = builder.open(unsafe { storage.borrow() })?;
        configure(&mut open);
        variant.select(open.open_object_mut());
        shared.reuse_in(open.open_object_mut())?;
        open.load()
    });
    match skel {
        Ok(skel) => Ok(ProbeObject {
            links: Vec::new(),
            skel,
            _storage: storage,
        }),
        Err(e) => Err(match reason {
            Some(reason) => format!("failed to load: {reason}"),
            None => format!("failed to load: {e}"),
        }),
    }
}

impl<S: Skel<'static>> ProbeObject<S> {
    /// Attaches every loaded program of the object (the other variant's were not loaded).
    fn attach(&mut self) -> Result<(), libbpf_rs::Error> {
        let mut links = Vec::new();
        for program in self.skel.object().progs_mut().filter(|p| p.autoload()) {
            links.push(program.attach()?);
        }
        self.links = links;
        Ok(())
    }
}

/// Every `(key, value)` of a hash map.
fn entries<K: Plain, V: Plain>(
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

/// The per-CPU counters of a probe, summed.
pub(crate) fn sum_counters(map: &impl MapCore) -> Result<offcpu::types::lks_counters, Error> {
    let per_cpu = map
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(|source| Error::Map {
            map: "counters",
            source,
        })?
        .unwrap_or_default();
    let mut sum = offcpu::types::lks_counters::default();
    for c in per_cpu
        .iter()
        .filter_map(|b| read_plain::<offcpu::types::lks_counters>(b))
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

/// One probe of the set: its object once loaded, and what became of it.
pub(crate) struct Slot<S> {
    pub(crate) object: Option<ProbeObject<S>>,
    pub(crate) hook: String,
    pub(crate) failure: Option<String>,
}

/// The reason of a failure simulated for probe `name` ([`FAIL_ATTACH_ENV`]), if one is asked for.
pub(crate) fn simulated_failure(name: &str) -> Option<String> {
    std::env::var(FAIL_ATTACH_ENV)
        .is_ok_and(|v| v.split(',').any(|n| n.trim() == name))
        .then(|| format!("simulated failure ({FAIL_ATTACH_ENV})"))
}

impl<S: Skel<'static>> Slot<S> {
    pub(crate) fn new(hook: &'static str, loaded: Result<ProbeObject<S>, String>) -> Self {
        match loaded {
            Ok(object) => Slot {
                object: Some(object),
                hook: hook.to_owned(),
                failure: None,
            },
            Err(failure) => Slot {
                object: None,
                hook: hook.to_owned(),
                failure: Some(failure),
            },
        }
    }

    fn attach(&mut self, name: &str) {
        let Some(object) = &mut self.object else {
            return;
        };
        let result = match simulated_failure(name) {
            Some(reason) => Err(reason),
            None => object
                .attach()
                .map_err(|e| format!("failed to attach: {e}")),
        };
        if let Err(reason) = result {
            self.failure = Some(reason);
            self.object = None;
        }
    }

    pub(crate) fn status(&self, name: &str) -> ProbeAttachment {
        ProbeAttachment {
            probe: name.to_owned(),
            hook: self.hook.clone(),
            status: match &self.failure {
                None => AttachStatus::Attached,
                Some(reason) => AttachStatus::Failed {
                    reason: reason.clone(),
                },
            },
        }
    }

    pub(crate) fn detach(&mut self) {
        if let Some(object) = &mut self.object {
            object.links.clear();
        }
    }
}

/// Hooks of each probe, as listed in profiles.
const OFFCPU_HOOKS: &str = "tp_btf/sched_switch, tp_btf/sched_waking, tp_btf/sched_wakeup_new";
const SYSCALL_HOOKS: &str = "tp_btf/sys_enter, tp_btf/sys_exit";
const LIFECYCLE_HOOKS: &str = "tp_btf/sys_enter, tp_btf/sys_exit, tp_btf/sched_process_exit";
const KLOCK_HOOKS: &str = "tp_btf/contention_begin, tp_btf/contention_end";
const HOLD_HOOKS: &str =
    "uprobe libc.so.6:pthread_mutex_lock (entry, return), pthread_mutex_unlock";
/// The C library the `mutex-hold` uprobes go into (libbpf finds it on the library path).
const LIBC: &str = "libc.so.6";
/// Lock+unlock pairs timed to measure what the `mutex-hold` uprobes cost.
const CALIBRATION_CALLS: u32 = 2000;

/// The loaded probes of this module.
#[derive(Default)]
pub(crate) struct ProbeSet {
    offcpu: Option<Slot<offcpu::OffcpuSkel<'static>>>,
    syscall: Option<Slot<syscall::SyscallSkel<'static>>>,
    lifecycle: Option<Slot<lifecycle::LifecycleSkel<'static>>>,
    klock: Option<Slot<klock::KlockSkel<'static>>>,
    hold: Option<Slot<hold::HoldSkel<'static>>>,
    cpu: Option<CpuProbe>,
    /// CLOCK_MONOTONIC when the probes were detached: the end of the per-thread times.
    ended_ns: Option<u64>,
}

/// Checks `--syscalls` names; their numbers.
pub fn syscall_numbers(names: &[String]) -> Result<Vec<u32>, Error> {
    names
        .iter()
        .map(|name| {
            syscall_number(name.trim()).ok_or_else(|| Error::UnknownSyscall {
                name: name.trim().to_owned(),
            })
        })
        .collect()
}

impl ProbeSet {
    /// Loads the probes of this module named in `names` (other names are ignored). A probe that
    /// fails to load is kept as failed.
    pub fn load(
        names: &[String],
        shared: &SharedMaps,
        settings: &ProbeSettings,
    ) -> Result<ProbeSet, Error> {
        let wants = |n: &str| names.iter().any(|x| x == n);
        let mut set = ProbeSet::default();
        // `wakeup` is the offcpu object taking its wakers' stacks too: one object serves both.
        if wants("offcpu") || wants("wakeup") {
            let min_block = settings.min_block.as_nanos() as u64;
            let waker_stacks = wants("wakeup");
            set.offcpu = Some(Slot::new(
                OFFCPU_HOOKS,
                load_object(
                    offcpu::OffcpuSkelBuilder::default(),
                    shared,
                    |open: &mut offcpu::OpenOffcpuSkel<'static>| {
                        if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
                            rodata.targ_min_block_ns = min_block;
                            rodata.targ_waker_stacks = waker_stacks;
                        }
                    },
                ),
            ));
        }
        if wants("syscall") {
            let numbers = syscall_numbers(&settings.syscalls)?;
            let slow = settings.slow_syscall.as_nanos() as u64;
            let filter = !numbers.is_empty();
            let mut slot = Slot::new(
                SYSCALL_HOOKS,
                load_object(
                    syscall::SyscallSkelBuilder::default(),
                    shared,
                    |open: &mut syscall::OpenSyscallSkel<'static>| {
                        if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
                            rodata.targ_filter = filter;
                            rodata.targ_slow_ns = slow;
                        }
                    },
                ),
            );
            if let Some(object) = &slot.object {
                for nr in &numbers {
                    if let Err(e) =
                        object
                            .skel
                            .maps
                            .selected
                            .update(&nr.to_ne_bytes(), &[1u8], MapFlags::ANY)
                    {
                        slot.failure = Some(format!("failed to set the syscall filter: {e}"));
                    }
                }
                if slot.failure.is_some() {
                    slot.object = None;
                }
            }
            set.syscall = Some(slot);
        }
        if wants("lifecycle") {
            set.lifecycle = Some(Slot::new(
                LIFECYCLE_HOOKS,
                load_object(lifecycle::LifecycleSkelBuilder::default(), shared, |_| {}),
            ));
        }
        if wants("klock") {
            set.klock = Some(Slot::new(
                KLOCK_HOOKS,
                match absent_reason("klock") {
                    Some(reason) => Err(format!("absent: {reason}")),
                    None => load_object(klock::KlockSkelBuilder::default(), shared, |_| {}),
                },
            ));
        }
        if wants("mutex-hold") {
            set.hold = Some(Slot::new(
                HOLD_HOOKS,
                load_object(hold::HoldSkelBuilder::default(), shared, |_| {}),
            ));
        }
        if wants("cpu") {
            set.cpu = Some(CpuProbe::load(shared, settings.frequency_hz));
        }
        Ok(set)
    }

    /// Attaches every loaded probe (the uprobes of `mutex-hold` into process `pid`); one that
    /// fails is kept as failed and detached.
    pub fn attach(&mut self, pid: u32) {
        if let Some(slot) = &mut self.offcpu {
            if let Some(object) = &mut slot.object {
                if let Some(bss) = object.skel.maps.bss_data.as_deref_mut() {
                    bss.lks_start_ns = monotonic_ns();
                }
            }
            slot.attach("offcpu");
        }
        if let Some(slot) = &mut self.syscall {
            slot.attach("syscall");
        }
        if let Some(slot) = &mut self.lifecycle {
            slot.attach("lifecycle");
        }
        if let Some(slot) = &mut self.klock {
            slot.attach("klock");
        }
        if let Some(slot) = &mut self.hold {
            attach_hold(slot, pid);
        }
        if let Some(cpu) = &mut self.cpu {
            cpu.attach();
        }
    }

    /// Detaches every probe; the maps stay readable. The first call ends the per-thread times.
    pub fn detach(&mut self) {
        self.ended_ns.get_or_insert_with(monotonic_ns);
        if let Some(slot) = &mut self.offcpu {
            slot.detach();
        }
        if let Some(slot) = &mut self.syscall {
            slot.detach();
        }
        if let Some(slot) = &mut self.lifecycle {
            slot.detach();
        }
        if let Some(slot) = &mut self.klock {
            slot.detach();
        }
        if let Some(slot) = &mut self.hold {
            slot.detach();
        }
        if let Some(cpu) = &mut self.cpu {
            cpu.detach();
        }
    }

    /// What became of probe `name`, if this set handles it.
    pub fn status(&self, name: &str) -> Option<ProbeAttachment> {
        match name {
            "offcpu" | "wakeup" => self.offcpu.as_ref().map(|s| s.status(name)),
            "syscall" => self.syscall.as_ref().map(|s| s.status(name)),
            "lifecycle" => self.lifecycle.as_ref().map(|s| s.status(name)),
            "klock" => self.klock.as_ref().map(|s| s.status(name)),
            "mutex-hold" => self.hold.as_ref().map(|s| s.status(name)),
            "cpu" => self.cpu.as_ref().map(CpuProbe::status),
            _ => None,
        }
    }

    /// Events and losses of every working probe, summed.
    pub fn counters(&self) -> Result<(u64, Losses), Error> {
        let mut all = Vec::new();
        if let Some(o) = self.offcpu.as_ref().and_then(|s| s.object.as_ref()) {
            all.push(sum_counters(&o.skel.maps.counters)?);
        }
        if let Some(o) = self.syscall.as_ref().and_then(|s| s.object.as_ref()) {
            all.push(sum_counters(&o.skel.maps.counters)?);
        }
        if let Some(o) = self.lifecycle.as_ref().and_then(|s| s.object.as_ref()) {
            all.push(sum_counters(&o.skel.maps.counters)?);
        }
        if let Some(o) = self.klock.as_ref().and_then(|s| s.object.as_ref()) {
            all.push(sum_counters(&o.skel.maps.counters)?);
        }
        if let Some(o) = self.hold.as_ref().and_then(|s| s.object.as_ref()) {
            all.push(sum_counters(&o.skel.maps.counters)?);
        }
        if let Some(c) = self
            .cpu
            .as_ref()
            .map(CpuProbe::counters)
            .transpose()?
            .flatten()
        {
            all.push(c);
        }
        let mut events = 0;
        let mut losses = Losses::default();
        for c in all {
            events += c.events;
            losses.user_stack_failures += c.user_stack_failures;
            losses.kernel_stack_failures += c.kernel_stack_failures;
            losses.map_full += c.agg_map_full + c.start_map_full;
            losses.dropped += c.dropped;
        }
        Ok((events, losses))
    }

    /// Reads every probe's maps (call after [`ProbeSet::detach`]). `targets` are the recorded
    /// processes: their threads that never ran during the recording get their times from
    /// `/proc` (asleep all along, in the system call they are blocked in).
    pub fn drain(&self, targets: &[u32]) -> Result<Drained, Error> {
        let mut drained = Drained::default();
        if let Some(o) = self.offcpu.as_ref().and_then(|s| s.object.as_ref()) {
            let end = self.ended_ns.unwrap_or_else(monotonic_ns);
            drain_offcpu(o, targets, end, &mut drained)?;
        }
        if let Some(o) = self.syscall.as_ref().and_then(|s| s.object.as_ref()) {
            drain_records::<syscall::types::syscall_key>(&o.skel.maps.calls, &mut drained)?;
        }
        if let Some(o) = self.lifecycle.as_ref().and_then(|s| s.object.as_ref()) {
            drain_records::<lifecycle::types::lifecycle_key>(&o.skel.maps.events, &mut drained)?;
        }
        if let Some(o) = self.klock.as_ref().and_then(|s| s.object.as_ref()) {
            drain_records::<klock::types::klock_key>(&o.skel.maps.contentions, &mut drained)?;
        }
        if let Some(o) = self.hold.as_ref().and_then(|s| s.object.as_ref()) {
            drain_records::<hold::types::hold_key>(&o.skel.maps.holds, &mut drained)?;
        }
        if let Some(cpu) = &self.cpu {
            cpu.drain(&mut drained)?;
        }
        Ok(drained)
    }
}

/// The key of a probe's aggregation map whose values are `lks_stats` (probe.bpf.h's
/// `aggregate`): each probe has its own key type, and says here how its keys become records.
pub(crate) trait AggregationKey: Plain {
    /// Catalog name of the probe.
    const PROBE: &'static str;
    /// Name of the aggregation map, in errors.
    const MAP: &'static str;
    /// What the probe's records are.
    const KIND: WaitKind;
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

impl AggregationKey for syscall::types::syscall_key {
    const PROBE: &'static str = "syscall";
    const MAP: &'static str = "calls";
    const KIND: WaitKind = WaitKind::Syscall;
    fn thread(&self) -> (u32, u32) {
        (self.tgid, self.tid)
    }
    fn operation(&self) -> String {
        with_errno(syscall_name(self.nr), self.err)
    }
    fn stack_ids(&self) -> (i32, i32) {
        (self.user_stack_id, self.kernel_stack_id)
    }
}

impl AggregationKey for lifecycle::types::lifecycle_key {
    const PROBE: &'static str = "lifecycle";
    const MAP: &'static str = "events";
    const KIND: WaitKind = WaitKind::Lifecycle;
    fn thread(&self) -> (u32, u32) {
        (self.tgid, self.tid)
    }
    fn operation(&self) -> String {
        with_errno(lifecycle_op_name(self.op.0).to_owned(), self.err)
    }
    fn stack_ids(&self) -> (i32, i32) {
        (self.user_stack_id, self.kernel_stack_id)
    }
}

impl AggregationKey for klock::types::klock_key {
    const PROBE: &'static str = "klock";
    const MAP: &'static str = "contentions";
    const KIND: WaitKind = WaitKind::KernelLock;
    fn thread(&self) -> (u32, u32) {
        (self.tgid, self.tid)
    }
    fn object(&self) -> u64 {
        self.lock
    }
    fn operation(&self) -> String {
        klock_flags_name(self.flags)
    }
    fn stack_ids(&self) -> (i32, i32) {
        (self.user_stack_id, self.kernel_stack_id)
    }
}

impl AggregationKey for hold::types::hold_key {
    const PROBE: &'static str = "mutex-hold";
    const MAP: &'static str = "holds";
    const KIND: WaitKind = WaitKind::Mutex;
    fn thread(&self) -> (u32, u32) {
        (self.tgid, self.tid)
    }
    fn object(&self) -> u64 {
        self.mutex
    }
    fn operation(&self) -> String {
        use hold::types::hold_acquire as How;
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

/// `operation` followed by the errno name of `err` when it is not 0 (`openat ENOENT`).
fn with_errno(operation: String, err: i32) -> String {
    if err == 0 {
        operation
    } else {
        format!("{operation} {}", errno_name(err))
    }
}

/// Reads aggregation map `map` of keys `K` into records.
pub(crate) fn drain_records<K: AggregationKey>(
    map: &impl MapCore,
    out: &mut Drained,
) -> Result<(), Error> {
    for (k, v) in entries::<K, offcpu::types::lks_stats>(map, K::MAP)? {
        let (pid, tid) = k.thread();
        let (user_stack_id, kernel_stack_id) = k.stack_ids();
        out.records.push(RawRecord {
            probe: K::PROBE,
            kind: K::KIND,
            pid,
            tid,
            object: k.object(),
            operation: k.operation(),
            user_stack_id,
            kernel_stack_id,
            comm: comm(&v.comm),
            stats: stats(&v),
            futex_sleep: false,
        });
    }
    Ok(())
}

/// Attaches the three `mutex-hold` uprobes into process `pid`'s C library.
fn hold_links(skel: &hold::HoldSkel<'static>, pid: i32) -> Result<Vec<Link>, libbpf_rs::Error> {
    let progs = &skel.progs;
    let locked =
        ProgramVariant::current().pick(&progs.lks_hold_locked, &progs.lks_hold_locked_compat);
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
        links.push(program.attach_uprobe_with_opts(pid, LIBC, 0, opts)?);
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

/// Attaches `mutex-hold` into `pid`, after measuring what its uprobes cost: the same probes
/// attached to this process (not a target: each hit returns after one lookup) slow a
/// lock+unlock pair of its own by the cost of three uprobe hits, shown in the probe's hook.
fn attach_hold(slot: &mut Slot<hold::HoldSkel<'static>>, pid: u32) {
    let Some(object) = &mut slot.object else {
        return;
    };
    if let Some(reason) = simulated_failure("mutex-hold") {
        slot.failure = Some(reason);
        slot.object = None;
        return;
    }
    let baseline = time_lock_pairs();
    let cost = hold_links(&object.skel, std::process::id() as i32).map(|links| {
        let traced = time_lock_pairs();
        drop(links);
        (traced - baseline).max(0.0)
    });
    match hold_links(&object.skel, pid as i32) {
        Ok(links) => {
            object.links = links;
            if let Ok(ns) = cost {
                slot.hook = format!(
                    "{HOLD_HOOKS}; measured {:.1} µs per lock+unlock",
                    ns / 1000.0
                );
            }
        }
        Err(e) => {
            slot.failure = Some(format!("failed to attach: {e}"));
            slot.object = None;
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of bpf_ktime_get_ns.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn comm(raw: &[i8; 16]) -> String {
    let bytes = raw.map(|c| c as u8);
    CStr::from_bytes_until_nul(&bytes)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn stats(v: &offcpu::types::lks_stats) -> WaitStats {
    WaitStats {
        count: v.count,
        total_ns: v.total_ns,
        max_ns: v.max_ns,
        histogram: Log2Histogram::from_dense(&v.hist),
    }
}

/// `enum lifecycle_op` (bpf/lifecycle.h) as profiles name it.
fn lifecycle_op_name(op: u32) -> &'static str {
    use lifecycle::types::lifecycle_op as Op;
    match Op(op) {
        Op::LKS_LIFE_FORK => "fork",
        Op::LKS_LIFE_VFORK => "vfork",
        Op::LKS_LIFE_THREAD => "thread",
        Op::LKS_LIFE_EXEC => "exec",
        Op::LKS_LIFE_EXIT_THREAD => "exit-thread",
        Op::LKS_LIFE_EXIT_PROCESS => "exit-process",
        Op::LKS_LIFE_CLONE => "clone",
        _ => "unknown",
    }
}

/// The lock type of `LCB_F_*` flags (include/trace/events/lock.h), named as `perf lock` does.
pub fn klock_flags_name(flags: u32) -> String {
    const SPIN: u32 = 1;
    const READ: u32 = 2;
    const WRITE: u32 = 4;
    const RT: u32 = 8;
    const PERCPU: u32 = 16;
    const MUTEX: u32 = 32;
    let name = if flags & PERCPU != 0 {
        if flags & WRITE != 0 {
            "percpu-rwsem-write"
        } else {
            "percpu-rwsem-read"
        }
    } else if flags & RT != 0 {
        if flags & READ != 0 {
            "rwlock-rt-read"
        } else if flags & WRITE != 0 {
            "rwlock-rt-write"
        } else {
            "rtmutex"
        }
    } else if flags & MUTEX != 0 {
        if flags & SPIN != 0 {
            "mutex-spin"
        } else {
            "mutex"
        }
    } else if flags & SPIN != 0 {
        if flags & READ != 0 {
            "rwlock-read"
        } else if flags & WRITE != 0 {
            "rwlock-write"
        } else {
            "spinlock"
        }
    } else if flags & READ != 0 {
        "rwsem-read"
    } else if flags & WRITE != 0 {
        "rwsem-write"
    } else {
        return format!("lock-flags-{flags:#x}");
    };
    name.to_owned()
}

/// Operation of an off-CPU record: `sleeping in nanosleep`, `sleeping`, `preempted`,
/// `run-queue`.
fn offcpu_operation(state: u32, syscall: i32) -> String {
    use offcpu::types::offcpu_state as State;
    match State(state) {
        State::LKS_STATE_PREEMPTED => "preempted".to_owned(),
        State::LKS_STATE_RUN_QUEUE => "run-queue".to_owned(),
        _ if syscall >= 0 => format!("sleeping in {}", syscall_name(syscall)),
        _ => "sleeping".to_owned(),
    }
}

fn drain_offcpu(
    o: &ProbeObject<offcpu::OffcpuSkel<'static>>,
    targets: &[u32],
    now: u64,
    drained: &mut Drained,
) -> Result<(), Error> {
    use offcpu::types::offcpu_state as State;
    for (k, v) in entries::<offcpu::types::offcpu_key, offcpu::types::lks_stats>(
        &o.skel.maps.offcpu,
        "offcpu",
    )? {
        drained.records.push(RawRecord {
            probe: "offcpu",
            kind: WaitKind::OffCpu,
            pid: k.tgid,
            tid: k.tid,
            object: k.object,
            operation: offcpu_operation(k.state.0, k.syscall),
            user_stack_id: k.user_stack_id,
            kernel_stack_id: k.kernel_stack_id,
            comm: comm(&v.comm),
            stats: stats(&v),
            futex_sleep: k.state == State::LKS_STATE_SLEEPING && is_futex_syscall(k.syscall),
        });
    }
    for (k, v) in entries::<offcpu::types::wakeup_key, offcpu::types::lks_stats>(
        &o.skel.maps.wakeups,
        "wakeups",
    )? {
        drained.wakeups.push(RawWakeup {
            pid: k.tgid,
            tid: k.tid,
            syscall: (k.syscall >= 0).then(|| syscall_name(k.syscall)),
            user_stack_id: k.user_stack_id,
            kernel_stack_id: k.kernel_stack_id,
            waker_pid: k.waker_tgid,
            waker_tid: k.waker_tid,
            waker_name: comm(&v.comm),
            waker_user_stack_id: k.waker_user_stack_id,
            waker_kernel_stack_id: k.waker_kernel_stack_id,
            stats: stats(&v),
        });
    }
    let mut seen = std::collections::HashSet::new();
    for (tid, t) in entries::<u32, offcpu::types::offcpu_thread>(&o.skel.maps.threads, "threads")? {
        seen.insert(tid);
        drained.threads.push(thread_time(tid, &t, now));
    }
    let start = o
        .skel
        .maps
        .bss_data
        .as_ref()
        .map_or(now, |bss| bss.lks_start_ns);
    drained
        .threads
        .extend(never_ran(targets, &seen, now.saturating_sub(start)));
    Ok(())
}

/// Threads of `targets` the scheduler hooks never saw: asleep for the whole `wall_ns`, classed by
/// the system call they are blocked in (`/proc/PID/task/TID/syscall`).
fn never_ran(
    targets: &[u32],
    seen: &std::collections::HashSet<u32>,
    wall_ns: u64,
) -> Vec<RawThreadTime> {
    let mut times = Vec::new();
    for &pid in targets {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<u32>().ok())
            else {
                continue;
            };
            if seen.contains(&tid) {
                continue;
            }
            let path = task.path();
            let syscall = std::fs::read_to_string(path.join("syscall")).unwrap_or_default();
            let class = syscall
                .split_whitespace()
                .next()
                .and_then(|nr| nr.parse::<i32>().ok())
                .map_or(TimeClass::Other, time_class_of_syscall);
            let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            times.push(RawThreadTime {
                name: name.trim_end().to_owned(),
                open_futex_sleep: None,
                time: ThreadTime {
                    pid,
                    tid,
                    wall_ns,
                    time_ns: BTreeMap::from([(class, wall_ns)]),
                    voluntary_switches: 0,
                    involuntary_switches: 0,
                },
            });
        }
    }
    times
}

/// The time class of a sleep in system call `nr`: `class_of_syscall` of bpf/offcpu.bpf.c (keep
/// the two in step).
fn time_class_of_syscall(nr: i32) -> TimeClass {
    match nr {
        202 | 449 | 455 => TimeClass::Futex,
        7 | 23 | 232 | 270 | 271 | 281 | 441 => TimeClass::Poll,
        0 | 1 | 17 | 18 | 19 | 20 | 40 | 42 | 43 | 44 | 45 | 46 | 47 | 74 | 75 | 208 | 257
        | 277 | 288 | 295 | 296 | 299 | 307 | 327 | 328 | 426 => TimeClass::Io,
        34 | 35 | 128 | 130 | 230 => TimeClass::Sleep,
        _ => TimeClass::Other,
    }
}

fn is_futex_syscall(nr: i32) -> bool {
    matches!(nr, 202 | 449 | 455)
}

/// Kernel time classes (enum time_class in bpf/offcpu.h) in profile terms; futex time is split
/// later by [`resolve`].
const KERNEL_CLASSES: [TimeClass; 7] = [
    TimeClass::OnCpu,
    TimeClass::RunQueue,
    TimeClass::Futex,
    TimeClass::Poll,
    TimeClass::Io,
    TimeClass::Sleep,
    TimeClass::Other,
];

/// One thread's times, its open interval closed at `now`.
fn thread_time(tid: u32, t: &offcpu::types::offcpu_thread, now: u64) -> RawThreadTime {
    use offcpu::types::offcpu_state as State;
    let mut ns = t.time_ns;
    let mut open_futex_sleep = None;
    let end = if t.state == State::LKS_STATE_DEAD {
        t.since_ns
    } else {
        let open = now.saturating_sub(t.since_ns);
        let class = match t.state {
            State::LKS_STATE_ON_CPU => 0,
            State::LKS_STATE_SLEEPING => t.sleep_class.0 as usize,
            _ => 1,
        };
        if t.state == State::LKS_STATE_SLEEPING
            && t.sleep_class == offcpu::types::time_class::LKS_TIME_FUTEX
        {
            // A futex sleep still going on: no record ends it, so its own stack classes it.
            open_futex_sleep = Some((open, t.user_stack_id));
        } else if let Some(slot) = ns.get_mut(class) {
            *slot += open;
        }
        now.max(t.since_ns)
    };
    let mut time_ns = BTreeMap::new();
    for (class, value) in KERNEL_CLASSES.iter().zip(ns) {
        if value > 0 {
            *time_ns.entry(*class).or_insert(0) += value;
        }
    }
    RawThreadTime {
        name: comm(&t.comm),
        open_futex_sleep,
        time: ThreadTime {
            pid: t.tgid,
            tid,
            wall_ns: end.saturating_sub(t.first_ns),
            time_ns,
            voluntary_switches: t.voluntary,
            involuntary_switches: t.involuntary,
        },
    }
}

/// A record before its stacks are symbolized.
pub(crate) struct RawRecord {
    probe: &'static str,
    kind: WaitKind,
    pid: u32,
    tid: u32,
    object: u64,
    operation: String,
    user_stack_id: i32,
    kernel_stack_id: i32,
    comm: String,
    stats: WaitStats,
    /// An off-CPU sleep in a futex call: its user stack classifies futex time.
    futex_sleep: bool,
}

/// A wakeup before its stacks are symbolized.
pub(crate) struct RawWakeup {
    pid: u32,
    tid: u32,
    syscall: Option<String>,
    user_stack_id: i32,
    kernel_stack_id: i32,
    waker_pid: u32,
    waker_tid: u32,
    waker_name: String,
    waker_user_stack_id: i32,
    waker_kernel_stack_id: i32,
    stats: WaitStats,
}

/// A thread's times with its name.
pub(crate) struct RawThreadTime {
    name: String,
    /// A futex sleep in progress when the recording ended: its length and the user stack it
    /// blocked at (classed by that stack, not in the proportions of the finished sleeps).
    open_futex_sleep: Option<(u64, i32)>,
    time: ThreadTime,
}

/// Everything the probes of a set recorded.
#[derive(Default)]
pub(crate) struct Drained {
    records: Vec<RawRecord>,
    wakeups: Vec<RawWakeup>,
    threads: Vec<RawThreadTime>,
}

/// What [`resolve`] makes of [`Drained`]: records, threads and stacks of a profile.
#[derive(Default)]
pub(crate) struct Resolved {
    pub waits: Vec<WaitRecord>,
    pub threads: Vec<ThreadInfo>,
    pub stacks: Vec<Stack>,
    pub thread_times: Vec<ThreadTime>,
    pub wakeups: Vec<WakeupRecord>,
}

impl Resolved {
    /// Appends these records, threads and stacks to a profile's (renumbering stack ids past the
    /// existing ones; threads already named keep their name), and returns the per-thread times
    /// and wakeups.
    pub fn merge_into(
        self,
        waits: &mut Vec<WaitRecord>,
        threads: &mut Vec<ThreadInfo>,
        stacks: &mut Vec<Stack>,
    ) -> (Vec<ThreadTime>, Vec<WakeupRecord>) {
        let offset = stacks.len() as StackId;
        let shift = |id: Option<StackId>| id.map(|id| id + offset);
        stacks.extend(self.stacks);
        waits.extend(self.waits.into_iter().map(|mut w| {
            w.user_stack = shift(w.user_stack);
            w.kernel_stack = shift(w.kernel_stack);
            w
        }));
        let wakeups = self
            .wakeups
            .into_iter()
            .map(|mut w| {
                w.user_stack = shift(w.user_stack);
                w.kernel_stack = shift(w.kernel_stack);
                w.waker_user_stack = shift(w.waker_user_stack);
                w.waker_kernel_stack = shift(w.waker_kernel_stack);
                w
            })
            .collect();
        for t in self.threads {
            if !threads
                .iter()
                .any(|known| (known.pid, known.tid) == (t.pid, t.tid))
            {
                threads.push(t);
            }
        }
        threads.sort_by_key(|t| (t.pid, t.tid));
        (self.thread_times, wakeups)
    }
}

/// The sum of two loss counters.
pub(crate) fn add_losses(a: Losses, b: Losses) -> Losses {
    Losses {
        user_stack_failures: a.user_stack_failures + b.user_stack_failures,
        kernel_stack_failures: a.kernel_stack_failures + b.kernel_stack_failures,
        map_full: a.map_full + b.map_full,
        dropped: a.dropped + b.dropped,
    }
}

/// An interned user stack and its function names, leaf first (for classification).
type UserStack = Option<(StackId, Vec<String>)>;

/// Symbolizes and interns stacks, remembering what it already did.
struct Resolver<'a> {
    shared: &'a SharedMaps,
    maps: &'a MapsCache,
    symbolizer: StackSymbolizer,
    interner: StackInterner,
    user: HashMap<(u32, i32), UserStack>,
    kernel: HashMap<i32, Option<StackId>>,
    kernel_names: HashMap<StackId, Vec<String>>,
}

/// Kernel functions that run only in interrupt context: a wakeup under one of them was done by
/// an interrupt handler, not by the thread it interrupted.
fn is_interrupt_frame(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "asm_sysvec_",
        "sysvec_",
        "__sysvec_",
        "asm_common_interrupt",
        "common_interrupt",
        "hrtimer_wakeup",
        "hrtimer_interrupt",
        "__hrtimer_run_queues",
        "handle_softirqs",
        "__do_softirq",
        "irq_exit",
        "handle_irq_event",
        "asm_exc_nmi",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

impl Resolver<'_> {
    /// Function names of an interned kernel stack, leaf first.
    fn kernel_names(&self, id: StackId) -> Option<&[String]> {
        self.kernel_names.get(&id).map(Vec::as_slice)
    }

    fn user(&mut self, pid: u32, id: i32) -> Result<UserStack, Error> {
        if id < 0 {
            return Ok(None);
        }
        if let Some(known) = self.user.get(&(pid, id)) {
            return Ok(known.clone());
        }
        let resolved = match self.shared.user_stack(id)? {
            Some((pcs, truncated)) if !pcs.is_empty() => {
                let frames = self.symbolizer.user_frames(self.maps, pid, &pcs);
                let names = frames
                    .iter()
                    .flat_map(|f| {
                        let mut names = f.names_outermost_first();
                        names.reverse();
                        names
                    })
                    .collect();
                let truncated = truncated || !user_stack_complete(&frames);
                let id = self.interner.intern(Stack {
                    space: AddressSpace::User,
                    frames,
                    truncated,
                });
                Some((id, names))
            }
            _ => None,
        };
        self.user.insert((pid, id), resolved.clone());
        Ok(resolved)
    }

    fn kernel(&mut self, id: i32) -> Result<Option<StackId>, Error> {
        if id < 0 {
            return Ok(None);
        }
        if let Some(&known) = self.kernel.get(&id) {
            return Ok(known);
        }
        let addresses = self.shared.kernel_stack(id)?;
        let frames = self.symbolizer.kernel_frames(&addresses);
        let names: Vec<String> = frames.iter().map(|f| f.display_name()).collect();
        let resolved = (!frames.is_empty()).then(|| {
            self.interner.intern(Stack {
                space: AddressSpace::Kernel,
                frames,
                truncated: addresses.len() >= MAX_KERNEL_STACK_DEPTH,
            })
        });
        if let Some(id) = resolved {
            self.kernel_names.insert(id, names);
        }
        self.kernel.insert(id, resolved);
        Ok(resolved)
    }
}

/// The breakdown class of a futex sleep, from its user stack.
fn futex_class(names: Option<&[String]>) -> TimeClass {
    let kind = match names {
        Some(names) => {
            WaitKind::classify_user_wait(names.iter().map(String::as_str), WaitKind::Wait)
        }
        None => WaitKind::Wait,
    };
    match kind {
        WaitKind::Mutex | WaitKind::RwlockRead | WaitKind::RwlockWrite => TimeClass::Lock,
        WaitKind::Condvar => TimeClass::Condvar,
        _ => TimeClass::Futex,
    }
}

/// Symbolizes the stacks of `drained` (user stacks with the `/proc/PID/maps` snapshots of
/// `maps`) and splits each thread's futex time into lock, condvar and other futex time in the
/// proportions of its classified futex sleeps.
pub(crate) fn resolve(
    drained: Drained,
    shared: &SharedMaps,
    maps: &MapsCache,
) -> Result<Resolved, Error> {
    let mut resolver = Resolver {
        shared,
        maps,
        symbolizer: StackSymbolizer::new(),
        interner: StackInterner::new(),
        user: HashMap::new(),
        kernel: HashMap::new(),
        kernel_names: HashMap::new(),
    };
    let mut threads: BTreeMap<(u32, u32), String> = BTreeMap::new();
    // Per thread: futex sleep time by class.
    let mut futex_split: HashMap<(u32, u32), BTreeMap<TimeClass, u64>> = HashMap::new();
    let mut waits = Vec::new();
    for r in drained.records {
        let user = resolver.user(r.pid, r.user_stack_id)?;
        let kernel = resolver.kernel(r.kernel_stack_id)?;
        if r.futex_sleep {
            let class = futex_class(user.as_ref().map(|(_, names)| names.as_slice()));
            *futex_split
                .entry((r.pid, r.tid))
                .or_default()
                .entry(class)
                .or_insert(0) += r.stats.total_ns;
        }
        threads.entry((r.pid, r.tid)).or_insert(r.comm);
        waits.push(WaitRecord {
            probe: r.probe.to_owned(),
            kind: r.kind,
            pid: r.pid,
            tid: r.tid,
            object: r.object,
            operation: r.operation,
            user_stack: user.map(|(id, _)| id),
            kernel_stack: kernel,
            stats: r.stats,
        });
    }
    let mut wakeups = Vec::new();
    for mut w in drained.wakeups {
        let waker_kernel = resolver.kernel(w.waker_kernel_stack_id)?;
        if waker_kernel
            .and_then(|id| resolver.kernel_names(id))
            .is_some_and(|names| names.iter().any(|n| is_interrupt_frame(n)))
        {
            // Woken from interrupt context: `current` was whoever the interrupt found running.
            w.waker_pid = 0;
            w.waker_tid = 0;
            w.waker_name = INTERRUPT_WAKER.to_owned();
            w.waker_user_stack_id = -1;
        }
        wakeups.push(WakeupRecord {
            pid: w.pid,
            tid: w.tid,
            syscall: w.syscall,
            user_stack: resolver.user(w.pid, w.user_stack_id)?.map(|(id, _)| id),
            kernel_stack: resolver.kernel(w.kernel_stack_id)?,
            waker_pid: w.waker_pid,
            waker_tid: w.waker_tid,
            waker_name: w.waker_name,
            waker_user_stack: resolver
                .user(w.waker_pid, w.waker_user_stack_id)?
                .map(|(id, _)| id),
            waker_kernel_stack: waker_kernel,
            stats: w.stats,
        });
    }
    let mut thread_times = Vec::new();
    for RawThreadTime {
        name,
        open_futex_sleep,
        mut time,
    } in drained.threads
    {
        let key = (time.pid, time.tid);
        split_futex_time(&mut time, futex_split.get(&key));
        if let Some((ns, stack_id)) = open_futex_sleep {
            let user = resolver.user(time.pid, stack_id)?;
            let class = futex_class(user.as_ref().map(|(_, names)| names.as_slice()));
            *time.time_ns.entry(class).or_insert(0) += ns;
        }
        // The name at the thread's last switch-out: after an exec, the new program's.
        if !name.is_empty() {
            threads.insert((time.pid, time.tid), name);
        }
        thread_times.push(time);
    }
    thread_times.sort_by_key(|t| (t.pid, t.tid));
    Ok(Resolved {
        waits,
        threads: threads
            .into_iter()
            .map(|((pid, tid), name)| ThreadInfo { pid, tid, name })
            .collect(),
        stacks: resolver.interner.into_stacks(),
        thread_times,
        wakeups,
    })
}

/// Moves a thread's futex time into lock / condvar / futex in the proportions of `split`.
fn split_futex_time(time: &mut ThreadTime, split: Option<&BTreeMap<TimeClass, u64>>) {
    let Some(split) = split else {
        return;
    };
    let total: u64 = split.values().sum();
    let futex = time.ns(TimeClass::Futex);
    if total == 0 || futex == 0 {
        return;
    }
    let mut moved = 0u64;
    for (&class, &ns) in split {
        if class == TimeClass::Futex {
            continue;
        }
        let share = (futex as u128 * ns as u128 / total as u128) as u64;
        if share > 0 {
            *time.time_ns.entry(class).or_insert(0) += share;
            moved += share;
        }
    }
    let rest = futex - moved.min(futex);
    if rest > 0 {
        time.time_ns.insert(TimeClass::Futex, rest);
    } else {
        time.time_ns.remove(&TimeClass::Futex);
    }
}

/// An error with its causes, `: `-separated.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Whether a probe of the eBPF backend works on this kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeSupport {
    /// It loads, alone and together with every other probe, as `record` would load it.
    Loads,
    /// Its programs are refused: why (the verifier's last line, or libbpf's complaint).
    Fails(String),
    /// The kernel lacks what it hooks: why.
    Absent(String),
}

/// Why probe `name` cannot exist on this kernel whatever its programs, when its hooks are
/// missing: decided by the kernel's BTF, not by its version.
fn absent_reason(name: &str) -> Option<String> {
    // Parsing the kernel's BTF takes tens of milliseconds; `probes` asks three times.
    static HAS_CONTENTION_BEGIN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    match name {
        "klock"
            if !*HAS_CONTENTION_BEGIN.get_or_init(|| kernel_has_tracepoint("contention_begin")) =>
        {
            Some(
                "the kernel has no lock:contention_begin tracepoint (it came in Linux 5.19)".into(),
            )
        }
        _ => None,
    }
}

/// True when the kernel's BTF has the tp_btf type of tracepoint `name` (or cannot be read: the
/// load then says what is wrong).
fn kernel_has_tracepoint(name: &str) -> bool {
    libbpf_rs::btf::Btf::from_vmlinux().map_or(true, |btf| {
        btf.type_by_name::<libbpf_rs::btf::types::Typedef<'_>>(&format!("btf_trace_{name}"))
            .is_some()
    })
}

/// Loads every probe of the eBPF backend (futex included) as `record` would, without attaching
/// anything: each alone, then all together. A probe loads when both did; else the first reason.
pub fn probe_support() -> Vec<(&'static str, ProbeSupport)> {
    let all_names = || std::iter::once("futex").chain(PROBE_NAMES);
    let shared = match SharedMaps::load() {
        Ok(shared) => shared,
        Err(e) => {
            let reason = error_chain(&e);
            return all_names()
                .map(|n| (n, ProbeSupport::Fails(reason.clone())))
                .collect();
        }
    };
    let futex_loads = || {
        crate::bpf::FutexObject::load(Some(&shared))
            .map(drop)
            .map_err(|e| error_chain(&e))
    };
    // A set of probes loaded at once, and the failure of each.
    let load_set = |names: &[&str]| -> (Option<ProbeSet>, Vec<(String, Option<String>)>) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        match ProbeSet::load(&names, &shared, &ProbeSettings::default()) {
            Ok(set) => {
                let failures = names
                    .iter()
                    .map(|n| {
                        let failure = match set.status(n).map(|s| s.status) {
                            Some(AttachStatus::Failed { reason }) => Some(reason),
                            _ => None,
                        };
                        (n.clone(), failure)
                    })
                    .collect();
                (Some(set), failures)
            }
            Err(e) => {
                let failures = names
                    .iter()
                    .map(|n| (n.clone(), Some(error_chain(&e))))
                    .collect();
                (None, failures)
            }
        }
    };
    // Together: every probe of this module in one set, and futex loaded while it is.
    let (together_set, together) = load_set(&PROBE_NAMES);
    let futex_together = futex_loads();
    drop(together_set);
    all_names()
        .map(|name| {
            if let Some(reason) = absent_reason(name) {
                return (name, ProbeSupport::Absent(reason));
            }
            let (alone, with_others) = if name == "futex" {
                (futex_loads().err(), futex_together.clone().err())
            } else {
                let with_others = together
                    .iter()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, failure)| failure.clone());
                let alone = load_set(&[name]).1.into_iter().next().and_then(|(_, f)| f);
                (alone, with_others)
            };
            let support = match (alone, with_others) {
                (None, None) => ProbeSupport::Loads,
                (Some(reason), _) => ProbeSupport::Fails(reason),
                (None, Some(reason)) => {
                    ProbeSupport::Fails(format!("with the other probes: {reason}"))
                }
            };
            (name, support)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lock flags name the lock types as `perf lock contention` does.
    #[test]
    fn klock_flags() {
        assert_eq!(klock_flags_name(1), "spinlock");
        assert_eq!(klock_flags_name(4), "rwsem-write");
        assert_eq!(klock_flags_name(2), "rwsem-read");
        assert_eq!(klock_flags_name(32), "mutex");
        assert_eq!(klock_flags_name(33), "mutex-spin");
        assert_eq!(klock_flags_name(1 | 2), "rwlock-read");
        assert_eq!(klock_flags_name(16 | 4), "percpu-rwsem-write");
        assert_eq!(klock_flags_name(0), "lock-flags-0x0");
    }

    /// Futex time splits in the proportions of the classified sleeps and still adds up.
    #[test]
    fn futex_split() {
        let mut time = ThreadTime::default();
        time.time_ns.insert(TimeClass::Futex, 1000);
        time.time_ns.insert(TimeClass::OnCpu, 500);
        let split = BTreeMap::from([
            (TimeClass::Lock, 300),
            (TimeClass::Condvar, 600),
            (TimeClass::Futex, 100),
        ]);
        split_futex_time(&mut time, Some(&split));
        assert_eq!(time.ns(TimeClass::Lock), 300);
        assert_eq!(time.ns(TimeClass::Condvar), 600);
        assert_eq!(time.ns(TimeClass::Futex), 100);
        assert_eq!(time.accounted_ns(), 1500);
    }

    /// Unknown `--syscalls` names are refused, known ones give their numbers.
    #[test]
    fn syscall_filter_names() {
        assert_eq!(
            syscall_numbers(&["read".into(), " write".into()]).expect("known"),
            vec![0, 1]
        );
        let err = syscall_numbers(&["reed".into()]).expect_err("unknown");
        assert_eq!(err.to_string(), "unknown system call `reed`");
    }
}
