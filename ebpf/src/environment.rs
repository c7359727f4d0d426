//! What recording needs from the machine, checked before anything is loaded: kernel BTF, and the
//! capabilities of this process for what was asked.
//!
//! Root has them all; lockscope also runs with file capabilities (`setcap ... =ep`, a systemd
//! unit's `AmbientCapabilities=`, a container's `capabilities.add`), and then needs exactly:
//! - CAP_BPF and CAP_PERFMON, for every probe: loading BPF tracing programs that read kernel
//!   memory, and opening perf events (the `cpu` probe's per-CPU clocks, tracepoints);
//! - CAP_SYS_RESOURCE on kernels before 5.11, which charge BPF maps to `RLIMIT_MEMLOCK`, unless
//!   that limit already holds them;
//! - CAP_SYS_ADMIN for the probes on uprobes (`mutex-hold`) where the kernel reserves uprobes to
//!   it (Linux 6.16 and the stable kernels that took its fix): asked of the kernel itself;
//! - CAP_SYS_PTRACE to record a running process of another user (or one more privileged):
//!   reading the files it maps through `/proc/PID/root`.
//!
//! And it says what a missing optional one costs: CAP_SYSLOG (kernel frames stay addresses when
//! `/proc/kallsyms` hides them), CAP_DAC_READ_SEARCH (a mounted tracefs is closed to non-root, so
//! `futex` takes the generic raw syscall hooks). docs/PRIVILEGES.md has the why of each.
//!
//! The checks look at [`Facts`] gathered from the machine once; [`assess`] is a pure function of
//! them, tested without root.

use crate::error::Error;
use crate::probe::{PrivilegedHook, ProbeInfo};
use crate::probes;
use std::fmt;
use std::io;
use std::path::Path;

/// Where the running kernel exposes its BTF.
pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The first kernel that charges BPF maps to the memory cgroup instead of `RLIMIT_MEMLOCK`.
const MEMCG_ACCOUNTING: (u32, u32) = (5, 11);
/// Where perf lists the uprobe PMU's event type.
const UPROBE_PMU_TYPE: &str = "/sys/bus/event_source/devices/uprobe/type";
/// Where tracefs lists the per-syscall tracepoint `futex` prefers (tracefs mounted at either).
const FUTEX_TRACEPOINTS: [&str; 2] = [
    "/sys/kernel/tracing/events/syscalls/sys_enter_futex",
    "/sys/kernel/debug/tracing/events/syscalls/sys_enter_futex",
];

/// A capability lockscope may need (numbers from linux/capability.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// Reading files and directories whatever their permissions.
    DacReadSearch = 2,
    /// Reading other processes' memory maps and files (ptrace access).
    SysPtrace = 19,
    /// Administration; implies CAP_BPF and CAP_PERFMON, and is what uprobes need on new kernels.
    SysAdmin = 21,
    /// Raising resource limits (`RLIMIT_MEMLOCK`).
    SysResource = 24,
    /// Seeing kernel addresses in `/proc/kallsyms`.
    Syslog = 34,
    /// Performance monitoring: perf events, BPF programs that read kernel memory.
    Perfmon = 38,
    /// Loading BPF programs and creating maps.
    Bpf = 39,
}

impl Capability {
    /// `CAP_BPF`.
    pub fn name(self) -> &'static str {
        match self {
            Capability::DacReadSearch => "CAP_DAC_READ_SEARCH",
            Capability::SysPtrace => "CAP_SYS_PTRACE",
            Capability::SysAdmin => "CAP_SYS_ADMIN",
            Capability::SysResource => "CAP_SYS_RESOURCE",
            Capability::Syslog => "CAP_SYSLOG",
            Capability::Perfmon => "CAP_PERFMON",
            Capability::Bpf => "CAP_BPF",
        }
    }

    /// `cap_bpf`, as setcap(8) and capsh(1) spell it.
    fn setcap_name(self) -> String {
        self.name().to_ascii_lowercase()
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of capabilities, as the hex of `CapEff:` in `/proc/PID/status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CapabilitySet(u64);

impl CapabilitySet {
    /// The set parsed from `hex`; an unparsable one counts as empty.
    pub fn from_hex(hex: &str) -> Self {
        CapabilitySet(u64::from_str_radix(hex.trim(), 16).unwrap_or(0))
    }

    /// This process's effective set.
    fn of_this_process() -> Result<Self, Error> {
        let status = std::fs::read_to_string("/proc/self/status")
            .map_err(|e| Error::io("read `/proc/self/status`", e))?;
        Ok(CapabilitySet::from_hex(
            status
                .lines()
                .find_map(|line| line.strip_prefix("CapEff:"))
                .unwrap_or("0"),
        ))
    }

    /// Whether the set grants what `capability` grants (CAP_SYS_ADMIN also passes the kernel's
    /// CAP_BPF and CAP_PERFMON checks: `bpf_capable()`, `perfmon_capable()`).
    pub fn grants(self, capability: Capability) -> bool {
        let has = |c: Capability| self.0 & (1u64 << c as u32) != 0;
        has(capability)
            || (matches!(capability, Capability::Bpf | Capability::Perfmon)
                && has(Capability::SysAdmin))
    }
}

/// One capability a recording needs, with what needs it and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    /// The capability.
    pub capability: Capability,
    /// What needs it: `every probe`, a probe's name, `pid 42`.
    pub needed_by: String,
    /// Why, in a few words.
    pub why: String,
}

/// What a recording lacks, as [`Error::MissingCapabilities`] says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingCapabilities {
    /// The capabilities that are not in the effective set, in the order of the checks.
    pub missing: Vec<Need>,
    /// Every capability the recording uses, held or not: what to grant with setcap.
    pub grant: Vec<Capability>,
    /// This program's path, for the setcap line (`<path>` when unknown).
    pub program: String,
}

impl MissingCapabilities {
    /// The names of the missing capabilities, each once, in order (`CAP_BPF`, `CAP_PERFMON`).
    pub fn names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        for need in &self.missing {
            if !names.contains(&need.capability.name()) {
                names.push(need.capability.name());
            }
        }
        names
    }
}

impl fmt::Display for MissingCapabilities {
    /// `missing capabilities CAP_BPF, CAP_PERFMON (every probe: ...); CAP_SYS_ADMIN
    /// (mutex-hold: ...): run lockscope as root (sudo) or grant them with `setcap ...``: the
    /// capabilities that share a reason are named together.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut groups: Vec<(Vec<&str>, &str, &str)> = Vec::new();
        for need in &self.missing {
            match groups
                .iter_mut()
                .find(|(_, by, why)| *by == need.needed_by && *why == need.why)
            {
                Some((names, _, _)) => names.push(need.capability.name()),
                None => groups.push((vec![need.capability.name()], &need.needed_by, &need.why)),
            }
        }
        let reasons: Vec<String> = groups
            .iter()
            .map(|(names, by, why)| format!("{} ({by}: {why})", names.join(", ")))
            .collect();
        let grant: Vec<String> = self.grant.iter().map(|c| c.setcap_name()).collect();
        write!(
            f,
            "missing capabilities {}: run lockscope as root (sudo) or grant them with \
             `setcap {}=ep {}`",
            reasons.join("; "),
            grant.join(","),
            self.program
        )
    }
}

/// Whether a running process's memory maps can be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TargetAccess {
    /// No running process to read (a command to launch: it runs as this user), or it can be read.
    Readable,
    /// The kernel refused to let this process into `/proc/PID/root`.
    Denied {
        pid: u32,
        /// The process's real uid, when known.
        uid: Option<u32>,
    },
}

/// What the checks look at.
#[derive(Clone, Debug)]
pub(crate) struct Facts {
    pub capabilities: CapabilitySet,
    /// The kernel's (major, minor) release; `None` when unreadable.
    pub kernel: Option<(u32, u32)>,
    /// `RLIMIT_MEMLOCK` (soft, hard) in bytes, `None` for unlimited.
    pub memlock: (Option<u64>, Option<u64>),
    /// Bytes of the maps every recording creates (what a kernel before 5.11 charges).
    pub map_bytes: u64,
    /// Whether the kernel lets this process create uprobes; `None` when not asked (no probe
    /// needs them, or the process has CAP_SYS_ADMIN).
    pub uprobes_allowed: Option<bool>,
    /// Whether `/proc/kallsyms` shows this process kernel addresses.
    pub kernel_symbols_visible: bool,
    /// tracefs is mounted but its per-syscall tracepoints are closed to this process.
    pub tracefs_closed: bool,
    pub target: TargetAccess,
}

/// What [`assess`] found: what is missing, and what works less well without an optional
/// capability.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Assessment {
    /// Every capability the recording uses (held or not), in check order.
    pub needs: Vec<Need>,
    /// Lines to show the user: what an optional capability would add.
    pub warnings: Vec<String>,
}

/// What recording `probes` (their infos) with `facts` needs.
pub(crate) fn assess(probes: &[&ProbeInfo], facts: &Facts) -> Assessment {
    let mut out = Assessment::default();
    let caps = facts.capabilities;
    let mut need = |capability, needed_by: &str, why: String| {
        out.needs.push(Need {
            capability,
            needed_by: needed_by.to_owned(),
            why,
        });
    };
    for capability in [Capability::Bpf, Capability::Perfmon] {
        need(
            capability,
            "every probe",
            "loading BPF tracing programs and opening perf events".to_owned(),
        );
    }
    if facts.kernel.is_some_and(|k| k < MEMCG_ACCOUNTING) && !memlock_holds(facts) {
        let (major, minor) = facts.kernel.unwrap_or_default();
        need(
            Capability::SysResource,
            "every probe",
            format!(
                "Linux {major}.{minor} charges BPF maps to the locked-memory limit, {} here, and \
                 lockscope's take {}; or raise the limit (`ulimit -l unlimited`, \
                 LimitMEMLOCK=infinity)",
                limit_text(facts.memlock.0),
                mib(facts.map_bytes)
            ),
        );
    }
    for info in probes {
        for hook in info.privileged {
            match hook {
                PrivilegedHook::Uprobes if facts.uprobes_allowed == Some(false) => need(
                    Capability::SysAdmin,
                    info.name(),
                    "this kernel lets only CAP_SYS_ADMIN create uprobes".to_owned(),
                ),
                PrivilegedHook::Uprobes => {}
                PrivilegedHook::TracefsTracepoints if facts.tracefs_closed => {
                    out_warning(
                        &mut out.warnings,
                        format!(
                            "{}: tracefs is mounted but closed to this user, so the probe takes \
                             the generic system-call hooks (run for every system call) instead \
                             of its per-syscall tracepoints; CAP_DAC_READ_SEARCH opens them",
                            info.name()
                        ),
                    );
                }
                PrivilegedHook::TracefsTracepoints => {}
            }
        }
    }
    if let TargetAccess::Denied { pid, uid } = &facts.target {
        let owner = uid.map_or_else(String::new, |uid| format!(", uid {uid}"));
        need(
            Capability::SysPtrace,
            &format!("pid {pid}"),
            format!(
                "reading the files it maps, through /proc/PID/root, of a process of another \
                 user{owner} or a more privileged one"
            ),
        );
    }
    if !probes.is_empty() && !facts.kernel_symbols_visible && !caps.grants(Capability::Syslog) {
        out_warning(
            &mut out.warnings,
            "kernel frames stay addresses: /proc/kallsyms hides kernel addresses from this \
             process (kernel.kptr_restrict, kernel.perf_event_paranoid); CAP_SYSLOG shows them"
                .to_owned(),
        );
    }
    out
}

fn out_warning(warnings: &mut Vec<String>, warning: String) {
    if !warnings.contains(&warning) {
        warnings.push(warning);
    }
}

/// Whether `RLIMIT_MEMLOCK` already holds the maps: libbpf raises the soft limit to unlimited
/// when the hard one is, which needs no capability.
fn memlock_holds(facts: &Facts) -> bool {
    match facts.memlock {
        (_, None) | (None, _) => true,
        (Some(soft), Some(_)) => soft >= facts.map_bytes,
    }
}

fn limit_text(limit: Option<u64>) -> String {
    limit.map_or_else(|| "unlimited".to_owned(), mib)
}

fn mib(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

impl Assessment {
    /// The error naming what is missing, if anything is.
    fn missing(&self, capabilities: CapabilitySet) -> Option<MissingCapabilities> {
        let missing: Vec<Need> = self
            .needs
            .iter()
            .filter(|n| !capabilities.grants(n.capability))
            .cloned()
            .collect();
        if missing.is_empty() {
            return None;
        }
        let mut grant: Vec<Capability> = Vec::new();
        for need in &self.needs {
            if !grant.contains(&need.capability) {
                grant.push(need.capability);
            }
        }
        Some(MissingCapabilities {
            missing,
            grant,
            program: program_path(),
        })
    }
}

/// This program's path (for the setcap line); `<path>` when unknown.
fn program_path() -> String {
    std::fs::read_link("/proc/self/exe")
        .map_or_else(|_| "<path>".to_owned(), |p| p.display().to_string())
}

/// Checks what recording needs before anything is loaded: CAP_BPF and CAP_PERFMON (or
/// CAP_SYS_ADMIN) in the effective set, and kernel BTF at [`KERNEL_BTF`]. What particular
/// probes and targets need besides is [`check_privileges`].
pub fn check_environment() -> Result<(), Error> {
    check_privileges_of(&[], None).map(|_| ())
}

/// Checks the capabilities that recording `probes` (catalog names; empty: the default ones) of
/// the running processes `pids` (empty: a command to launch, or processes found later, a
/// cgroup's or the machine's) needs, and kernel BTF. Returns what would work better with an
/// optional capability (lines for the user, each once), or names every missing capability with
/// what needs it.
pub fn check_privileges(probes: &[String], pids: &[u32]) -> Result<Vec<String>, Error> {
    let names: Vec<String> = if probes.is_empty() {
        lockscope_probes::catalog::defaults()
            .map(|p| p.name.to_owned())
            .collect()
    } else {
        probes.to_vec()
    };
    let Some((&first, others)) = pids.split_first() else {
        return check_privileges_of(&names, None);
    };
    let mut warnings = check_privileges_of(&names, Some(first))?;
    for &pid in others {
        for warning in check_privileges_of(&names, Some(pid))? {
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
        }
    }
    Ok(warnings)
}

fn check_privileges_of(names: &[String], pid: Option<u32>) -> Result<Vec<String>, Error> {
    let registered = probes::all();
    let infos: Vec<&ProbeInfo> = registered
        .iter()
        .map(|r| &r.info)
        .filter(|info| info.names().any(|n| names.iter().any(|w| w == n)))
        .collect();
    let capabilities = CapabilitySet::of_this_process()?;
    let facts = Facts::gather(capabilities, &infos, pid);
    let assessment = assess(&infos, &facts);
    if let Some(missing) = assessment.missing(capabilities) {
        return Err(Error::MissingCapabilities(missing));
    }
    check_kernel_btf(Path::new(KERNEL_BTF))?;
    Ok(assessment.warnings)
}

impl Facts {
    /// Looks at the machine, asking only what the probes in `probes` and `pid` make relevant.
    fn gather(capabilities: CapabilitySet, probes: &[&ProbeInfo], pid: Option<u32>) -> Facts {
        let uses = |hook: PrivilegedHook| probes.iter().any(|p| p.privileged.contains(&hook));
        let kernel = kernel_release();
        let memcg = kernel.is_none_or(|k| k >= MEMCG_ACCOUNTING);
        Facts {
            capabilities,
            kernel,
            memlock: memlock_limit(),
            // Only where it matters: opening the skeleton costs a few milliseconds.
            map_bytes: if memcg { 0 } else { shared_map_bytes() },
            uprobes_allowed: (uses(PrivilegedHook::Uprobes)
                && !capabilities.grants(Capability::SysAdmin)
                && capabilities.grants(Capability::Perfmon))
            .then(kernel_allows_uprobes)
            .flatten(),
            kernel_symbols_visible: kernel_symbols_visible(),
            tracefs_closed: uses(PrivilegedHook::TracefsTracepoints) && tracefs_closed(),
            target: pid.map_or(TargetAccess::Readable, target_access),
        }
    }
}

/// The running kernel's (major, minor).
fn kernel_release() -> Option<(u32, u32)> {
    let release = lockscope_probes::host::Uname::current().release;
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// `RLIMIT_MEMLOCK` (soft, hard), `None` for unlimited.
fn memlock_limit() -> (Option<u64>, Option<u64>) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the valid struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 {
        return (None, None);
    }
    let bytes = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
    (bytes(limit.rlim_cur), bytes(limit.rlim_max))
}

/// Bytes the shared maps declare (keys and values times entries, per CPU for per-CPU maps):
/// what a kernel before 5.11 charges to `RLIMIT_MEMLOCK` at least (the probes' own maps come on
/// top). Read from the `targets` skeleton, opened but not loaded.
fn shared_map_bytes() -> u64 {
    use crate::skel::shared::SharedSkelBuilder;
    use libbpf_rs::skel::{OpenSkel, SkelBuilder};
    use libbpf_rs::MapType;
    let mut storage = std::mem::MaybeUninit::uninit();
    let Ok(open) = SharedSkelBuilder::default().open(&mut storage) else {
        return 0;
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    open.open_object()
        .maps()
        .map(|map| {
            let per_cpu = matches!(
                map.map_type(),
                MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
            );
            let entry = u64::from(map.key_size()) + u64::from(map.value_size());
            entry * u64::from(map.max_entries()) * if per_cpu { cpus } else { 1 }
        })
        .sum()
}

/// Whether the kernel lets this process create uprobes: a uprobe perf event with no path is
/// refused with EACCES before its path is looked at when it does not (the uprobe PMU's first
/// check is the capability); `None` when there is no uprobe PMU to ask.
fn kernel_allows_uprobes() -> Option<bool> {
    let pmu: u32 = std::fs::read_to_string(UPROBE_PMU_TYPE)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    use libbpf_rs::libbpf_sys::{perf_event_attr, PERF_FLAG_FD_CLOEXEC};
    let empty = c"";
    // SAFETY: perf_event_attr is plain old data; all-zero is its "nothing set" value.
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = pmu;
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    // config1 is the uprobe's path, config2 its offset.
    attr.__bindgen_anon_3.config1 = empty.as_ptr() as u64;
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    // SAFETY: perf_event_open reads the attr, which outlives the call, and the path it points to
    // (a static C string); a descriptor it returns is closed below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const perf_event_attr,
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            libc::c_ulong::from(PERF_FLAG_FD_CLOEXEC),
        )
    };
    if fd >= 0 {
        // SAFETY: a descriptor the kernel just returned, owned by nobody else.
        unsafe { libc::close(fd as libc::c_int) };
        return Some(true);
    }
    Some(io::Error::last_os_error().raw_os_error() != Some(libc::EACCES))
}

/// Whether `/proc/kallsyms` shows this process kernel addresses (it shows zeros otherwise): the
/// address of the first text symbol.
fn kernel_symbols_visible() -> bool {
    use std::io::BufRead;
    let Ok(file) = std::fs::File::open("/proc/kallsyms") else {
        return false;
    };
    io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .take(100_000)
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            let address = fields.next()?;
            matches!(fields.next()?, "T" | "t")
                .then(|| u64::from_str_radix(address, 16).is_ok_and(|a| a != 0))
        })
        .unwrap_or(false)
}

/// Whether tracefs is mounted but its per-syscall tracepoints cannot be looked at (its root is
/// mode 0700 by default).
fn tracefs_closed() -> bool {
    let mounted = std::fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|info| info.lines().any(|l| l.contains(" - tracefs ")));
    mounted
        && !FUTEX_TRACEPOINTS.iter().any(|dir| Path::new(dir).is_dir())
        && FUTEX_TRACEPOINTS.iter().any(|dir| {
            std::fs::metadata(dir).is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied)
        })
}

/// Whether this process may read running process `pid`'s files through `/proc/PID/root` (as
/// the unwinder and the symbolizer will: the kernel checks ptrace access there). Its
/// `/proc/PID/maps` is not the test: CAP_PERFMON alone opens it on current kernels.
fn target_access(pid: u32) -> TargetAccess {
    match std::fs::metadata(format!("/proc/{pid}/root/")) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => TargetAccess::Denied {
            pid,
            uid: std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|status| {
                    status
                        .lines()
                        .find_map(|l| l.strip_prefix("Uid:"))
                        .and_then(|uids| uids.split_whitespace().next()?.parse().ok())
                }),
        },
        // A process that is gone is the recorder's error to report.
        _ => TargetAccess::Readable,
    }
}

/// Checks that kernel BTF exists at `path`.
pub fn check_kernel_btf(path: &Path) -> Result<(), Error> {
    if path.is_file() {
        Ok(())
    } else {
        Err(Error::NoKernelBtf {
            path: path.display().to_string(),
        })
    }
}

#[cfg(test)]
mod tests;
