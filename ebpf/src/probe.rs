//! What every probe of the eBPF backend is: the [`Probe`] trait, what its loader, attach and
//! drain get, and the raw records it drains ([`Drained`]).
//!
//! A probe is one BPF object (`bpf/NAME.bpf.c`, its structs and enums in `bpf/NAME.h`) with one
//! Rust loader implementing [`Probe`] (`probes/NAME.rs`, whose `REGISTERED` build.rs lists for
//! `probes::all`), registered on its catalog descriptor ([`ProbeInfo::descriptor`]). The
//! `ProbeSet` of a recording (`probe_set.rs`) holds them as a list; the `resolve` step
//! (`resolve.rs`) turns their drained records into the profile.

use crate::error::{Error, ProbeError};
use crate::object::Counters;
use crate::shared::SharedMaps;
use crate::syscalls::syscall_number;
use crate::variant::ProgramVariant;
use lockscope_probes::bottleneck::{EngineCounts, EngineLimits, RawBlame, RawSampled, WokenBy};
use lockscope_probes::{AttachStatus, ProbeDescriptor, ThreadTime, WaitKind, WaitStats};
use std::time::Duration;

/// Settings of the probes that take any.
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
    /// Probes whose attach fails on purpose, with "simulated failure": lets a test, or a user
    /// checking their monitoring, see what a failed probe looks like (the `lockscope` binary
    /// takes them from `LOCKSCOPE_FAIL_ATTACH`). Default: none.
    pub fail_attach: Vec<String>,
    /// Which variant of the stack-capturing programs to load; `None`: the one this kernel
    /// takes ([`ProgramVariant::detect`]). Default: `None`.
    pub program_variant: Option<ProgramVariant>,
}

impl Default for ProbeSettings {
    fn default() -> Self {
        ProbeSettings {
            min_block: Duration::from_micros(10),
            syscalls: Vec::new(),
            slow_syscall: Duration::from_millis(1),
            frequency_hz: crate::DEFAULT_FREQUENCY_HZ,
            fail_attach: Vec::new(),
            program_variant: None,
        }
    }
}

impl ProbeSettings {
    /// The program variant to load: the one asked for, else the one this kernel takes.
    pub fn variant(&self) -> ProgramVariant {
        self.program_variant.unwrap_or_else(ProgramVariant::detect)
    }
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

/// What the kernel must have for a probe to exist at all (whatever its programs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KernelFeature {
    /// A tracepoint with a tp_btf type (`btf_trace_NAME` in the kernel's BTF).
    BtfTracepoint {
        /// Its tracefs system (`lock`).
        system: &'static str,
        /// Its name (`contention_begin`).
        name: &'static str,
        /// The Linux release that brought it.
        since: &'static str,
    },
}

impl KernelFeature {
    /// Why the kernel lacks it; `None` when it has it (or its BTF cannot be read: the load then
    /// says what is wrong). Decided by the kernel's BTF, not by its version.
    fn missing(self) -> Option<String> {
        match self {
            KernelFeature::BtfTracepoint {
                system,
                name,
                since,
            } => (!kernel_has_tracepoint(name)).then(|| {
                format!("the kernel has no {system}:{name} tracepoint (it came in Linux {since})")
            }),
        }
    }
}

/// True when the kernel's BTF has the tp_btf type of tracepoint `name` (or cannot be read).
/// Parsing the kernel's BTF takes tens of milliseconds: it is parsed once per process.
fn kernel_has_tracepoint(name: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static KNOWN: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let known = KNOWN.get_or_init(Mutex::default);
    let mut known = known.lock().unwrap_or_else(|e| e.into_inner());
    *known.entry(name.to_owned()).or_insert_with(|| {
        libbpf_rs::btf::Btf::from_vmlinux().map_or(true, |btf| {
            btf.type_by_name::<libbpf_rs::btf::types::Typedef<'_>>(&format!("btf_trace_{name}"))
                .is_some()
        })
    })
}

/// A kind of hook the kernel guards with more than CAP_BPF and CAP_PERFMON, or with
/// something else (`environment.rs` checks them before anything is loaded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PrivilegedHook {
    /// Uprobes: CAP_SYS_ADMIN on kernels that reserve them to it (Linux 6.16 and the stable
    /// kernels that took its fix), CAP_PERFMON before.
    Uprobes,
    /// tracefs's per-syscall tracepoints, preferred when tracefs is mounted: reading their ids
    /// needs access to tracefs (mode 0700 by default: CAP_DAC_READ_SEARCH); without it the
    /// probe takes the generic system-call hooks.
    TracefsTracepoints,
}

/// What a probe is, before it is loaded.
pub(crate) struct ProbeInfo {
    /// The catalog probe it implements: its name, and its hooks as listed in profiles (a loaded
    /// probe may say more: fallbacks, costs).
    pub descriptor: &'static ProbeDescriptor,
    /// Other catalog probes the same object serves (`offcpu` also serves `wakeup`).
    pub also_serves: &'static [ProbeDescriptor],
    /// What the kernel must have.
    pub needs: &'static [KernelFeature],
    /// Hooks it attaches to that need more than CAP_BPF and CAP_PERFMON.
    pub privileged: &'static [PrivilegedHook],
}

impl ProbeInfo {
    /// Its own catalog name.
    pub fn name(&self) -> &'static str {
        self.descriptor.name
    }

    /// Every catalog name it serves, its own first.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.descriptor.name).chain(self.also_serves.iter().map(|d| d.name))
    }

    /// True when it serves catalog name `name`.
    pub fn serves(&self, name: &str) -> bool {
        self.names().any(|n| n == name)
    }

    /// Its hooks, as listed in profiles when the loaded probe says no more.
    pub fn hooks(&self) -> &'static str {
        self.descriptor.ebpf_hooks
    }
}

/// What a probe's loader gets.
pub(crate) struct LoadContext<'a> {
    /// The maps every object shares: reuse them (`SharedMaps::reuse_in`) before loading.
    pub shared: &'a SharedMaps,
    pub settings: &'a ProbeSettings,
    /// The variant of the stack-capturing programs to load (`ProgramVariant::select`).
    pub variant: ProgramVariant,
    /// Catalog names requested in this recording (a probe serving several sees which).
    pub requested: &'a [String],
}

impl LoadContext<'_> {
    /// Whether catalog probe `probe` was requested.
    pub fn wants(&self, probe: &ProbeDescriptor) -> bool {
        self.requested.iter().any(|n| n == probe.name)
    }
}

/// What a probe attaches to.
pub(crate) struct AttachContext {
    /// The one process recorded (tgid), or `None` when the target set is several processes, a
    /// cgroup or all of them. Tracepoint probes record the processes in the shared `targets`
    /// set, whatever this is; uprobes go into this process's files (into every process's,
    /// filtered by `targets` in BPF, without one); per-CPU events open one per online CPU and
    /// filter by `targets` in BPF.
    pub pid: Option<u32>,
    /// The variant that was loaded.
    pub variant: ProgramVariant,
    /// The `cpu` probe's sampling frequency ([`ProbeSettings::frequency_hz`]).
    pub frequency_hz: u32,
}

/// What a probe's drain gets.
pub(crate) struct DrainContext<'a> {
    /// The recorded processes (the target and its children).
    pub targets: &'a [u32],
    /// CLOCK_MONOTONIC when the probes were detached: the end of the per-thread times.
    pub ended_ns: u64,
}

/// One probe of the eBPF backend: one BPF object and its loader. Each implementor's file
/// registers it (`REGISTERED`, a [`Registered::of`]) for `probes::all`.
pub(crate) trait Probe {
    /// Its names, hooks and the kernel features it needs.
    fn info() -> ProbeInfo
    where
        Self: Sized;

    /// Opens and loads its object (the shared maps reused, `cx.variant`'s programs selected),
    /// nothing attached. On failure: why, with the verifier's or libbpf's reason.
    fn load(cx: &LoadContext<'_>) -> Result<Self, ProbeError>
    where
        Self: Sized;

    /// Attaches its programs. On failure: why; what did attach is detached by the drop.
    fn attach(&mut self, cx: &AttachContext) -> Result<(), ProbeError>;

    /// Detaches every program; the maps stay readable.
    fn detach(&mut self);

    /// The hooks it uses and how they attached (a fallback is not a failure).
    fn status(&self) -> (String, AttachStatus) {
        (String::new(), AttachStatus::Attached)
    }

    /// Its events and losses so far.
    fn counters(&self) -> Result<Counters, Error>;

    /// Reads its maps into raw records (after [`Probe::detach`]).
    fn drain(&self, cx: &DrainContext<'_>, out: &mut Drained) -> Result<(), Error>;
}

/// A probe implementation, as the set knows it before loading.
pub(crate) struct Registered {
    pub info: ProbeInfo,
    pub load: fn(&LoadContext<'_>) -> Result<Box<dyn Probe>, ProbeError>,
}

impl Registered {
    /// The entry of probe type `P`.
    pub fn of<P: Probe + 'static>() -> Registered {
        Registered {
            info: P::info(),
            load: |cx| P::load(cx).map(|p| Box::new(p) as Box<dyn Probe>),
        }
    }

    /// Why the kernel cannot have it, when it cannot.
    pub fn absent(&self) -> Option<String> {
        self.info.needs.iter().find_map(|need| need.missing())
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of bpf_ktime_get_ns.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A record before its stacks are symbolized.
pub(crate) struct RawRecord {
    pub probe: &'static str,
    /// Its kind; with `classify`, the kind when its user stack names no known entry point.
    pub kind: WaitKind,
    /// Classify by the user stack's entry points (the pthread function that waited).
    pub classify: bool,
    pub pid: u32,
    pub tid: u32,
    pub object: u64,
    pub operation: String,
    pub user_stack_id: i32,
    pub kernel_stack_id: i32,
    pub comm: String,
    /// Who ended the sleeps (`offcpu`), when known.
    pub woken_by: Option<WokenBy>,
    pub stats: WaitStats,
    /// An off-CPU sleep in a futex call: its user stack classifies futex time.
    pub futex_sleep: bool,
}

/// A wakeup before its stacks are symbolized.
pub(crate) struct RawWakeup {
    pub pid: u32,
    pub tid: u32,
    pub syscall: Option<String>,
    pub user_stack_id: i32,
    pub kernel_stack_id: i32,
    pub waker_pid: u32,
    pub waker_tid: u32,
    pub waker_name: String,
    pub waker_user_stack_id: i32,
    pub waker_kernel_stack_id: i32,
    pub stats: WaitStats,
}

/// A thread's times with its name.
pub(crate) struct RawThreadTime {
    pub name: String,
    /// A futex sleep in progress when the recording ended: its length and the user stack it
    /// blocked at (classed by that stack, not in the proportions of the finished sleeps).
    pub open_futex_sleep: Option<(u64, i32)>,
    pub time: ThreadTime,
}

/// A stack's id in a BPF stack map, as the bottleneck engine keeps it: the map's id plus one, so
/// that `Option<StackMapId>` takes 4 bytes, not 8 (the engine holds four of them in each of the
/// hundreds of thousands of intervals of its history).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct StackMapId(std::num::NonZeroU32);

impl StackMapId {
    /// The id a program stored (negative: no stack, the error it met).
    pub fn new(id: i32) -> Option<Self> {
        u32::try_from(id)
            .ok()
            .and_then(|id| std::num::NonZeroU32::new(id.wrapping_add(1)))
            .map(StackMapId)
    }

    /// The map's id back; -1 for none.
    pub fn raw(id: Option<Self>) -> i32 {
        id.and_then(|StackMapId(n)| i32::try_from(n.get() - 1).ok())
            .unwrap_or(-1)
    }
}

/// The bottleneck engine's result (`waitfor`), stacks still as BPF stack ids and calls as system
/// call numbers.
pub(crate) struct DrainedBottleneck {
    pub limits: EngineLimits,
    pub counts: EngineCounts,
    pub blame: Vec<RawBlame<StackMapId>>,
    pub sampled: Vec<RawSampled<StackMapId>>,
}

/// Everything the probes of a set recorded.
#[derive(Default)]
pub(crate) struct Drained {
    pub records: Vec<RawRecord>,
    pub wakeups: Vec<RawWakeup>,
    pub threads: Vec<RawThreadTime>,
    pub bottleneck: Option<DrainedBottleneck>,
    /// What a probe recorded otherwise than asked, for the profile's warnings.
    pub warnings: Vec<String>,
}

pub(crate) use lockscope_probes::error_chain;
