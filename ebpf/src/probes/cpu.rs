//! The `cpu` probe (`bpf/cpu.bpf.c`, `bpf/cpu.h`): an on-CPU profile of the target's threads.
//!
//! One software `cpu-clock` perf event per online CPU (an hrtimer, so it works in VMs without a
//! PMU) fires at the requested frequency; its program keeps the samples of target threads,
//! aggregated in the kernel per (thread, user stack, kernel stack) with the CPU time they stand
//! for: each sample the CPU time the kernel charged its thread since the thread's previous
//! sample (its `se.sum_exec_runtime`, the thread's own CPU clock), which is the period where
//! timer interrupts come on time, and not where they come late (a stopped vCPU whose guest's
//! clock runs on: the hrtimer skips the periods it missed, which the thread's clock counts).
//! The drained records are of kind [`WaitKind::OnCpu`]: `count` samples standing
//! for `total_ns` of CPU time, never a wait.
//!
//! On kernels before 6.1 a perf_event program may use only preallocated hash maps, and the
//! unwinder's process tables are not: there the compat program (which unwinds through the file
//! tables of the executable and of the VMAs it finds) is loaded, also on 5.17 to 6.0, whose
//! kernels take the default variant of the other probes.

use super::{load_object, Aggregating, AggregationKey};
use crate::error::ProbeError;
use crate::object::{LoadedObject, Plain};
use crate::probe::{AttachContext, LoadContext, ProbeInfo, Registered};
use crate::skel::cpu::types::cpu_key;
use crate::skel::cpu::{CpuSkel, CpuSkelBuilder, OpenCpuSkel};
use crate::variant::ProgramVariant;
use libbpf_rs::libbpf_sys::{
    perf_event_attr, PERF_COUNT_SW_CPU_CLOCK, PERF_FLAG_FD_CLOEXEC, PERF_TYPE_SOFTWARE,
};
use libbpf_rs::Link;
use lockscope_probes::{catalog, WaitKind};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

/// The `cpu` probe's default sampling frequency: a prime, so that sampling does not run in
/// lockstep with periodic work (bcc's `profile`, bpftrace's `profile:hz:99`).
pub const DEFAULT_FREQUENCY_HZ: u32 = 99;
/// The highest frequency accepted: 10 kHz is 100 µs between samples on each CPU.
pub const MAX_FREQUENCY_HZ: u32 = 10_000;

/// Operation of the `cpu` probe's records: the event sampled.
const OPERATION: &str = "cpu-clock";
/// Where the online CPUs are listed.
const ONLINE_CPUS: &str = "/sys/devices/system/cpu/online";

/// The probe's loader, found by `probes::all`: it aggregates by `struct cpu_key`.
pub(crate) const REGISTERED: fn() -> Registered = Registered::of::<Aggregating<cpu_key>>;

// SAFETY: a generated #[repr(C)] struct of integers, valid for every bit pattern.
unsafe impl Plain for cpu_key {}

impl AggregationKey for cpu_key {
    type Skel = CpuSkel<'static>;
    const MAP: &'static str = "samples";
    const KIND: WaitKind = WaitKind::OnCpu;

    fn info() -> ProbeInfo {
        ProbeInfo {
            descriptor: &catalog::CPU,
            also_serves: &[],
            needs: &[],
            privileged: &[],
        }
    }

    /// Loads the program the kernel takes (see the module's overview).
    fn load(cx: &LoadContext<'_>) -> Result<LoadedObject<Self::Skel>, ProbeError> {
        let hz = cx.settings.frequency_hz;
        if !(1..=MAX_FREQUENCY_HZ).contains(&hz) {
            return Err(ProbeError::Frequency {
                hz,
                max: MAX_FREQUENCY_HZ,
            });
        }
        // With the bottleneck analysis, every sample also goes to its stream.
        let stream = cx.wants(&catalog::WAITFOR);
        let configure = |open: &mut OpenCpuSkel<'static>| {
            if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
                rodata.targ_stream = stream;
            }
        };
        let loaded = load_object(CpuSkelBuilder::default(), cx, configure);
        if loaded.is_ok() || cx.variant == ProgramVariant::Compat {
            return loaded;
        }
        // 5.17 to 6.0: bpf_loop, but perf_event programs still refused the process tables.
        let compat = LoadContext {
            shared: cx.shared,
            settings: cx.settings,
            variant: ProgramVariant::Compat,
            requested: cx.requested,
        };
        load_object(CpuSkelBuilder::default(), &compat, configure).or(loaded)
    }

    /// Opens the cpu-clock event of every online CPU and attaches the loaded program to each
    /// (the program keeps the target's threads: the shared `targets` set, whatever `cx.pid`).
    fn attach(
        object: &mut LoadedObject<Self::Skel>,
        cx: &AttachContext,
    ) -> Result<Option<String>, ProbeError> {
        let hz = cx.frequency_hz;
        let (links, compat) = attach_cpus(object.skel(), 1_000_000_000 / u64::from(hz.max(1)))?;
        object.keep(links);
        Ok(Some(format!(
            "perf_event software cpu-clock at {hz} Hz on each CPU{}",
            if compat {
                " (compat program: stacks through file tables)"
            } else {
                ""
            }
        )))
    }

    fn thread(&self) -> (u32, u32) {
        (self.tgid, self.tid)
    }

    fn operation(&self) -> String {
        OPERATION.to_owned()
    }

    fn stack_ids(&self) -> (i32, i32) {
        (self.user_stack_id, self.kernel_stack_id)
    }
}

/// Attaches the program the kernel took to a cpu-clock event on each online CPU; whether it is
/// the compat one.
fn attach_cpus(skel: &CpuSkel<'static>, period_ns: u64) -> Result<(Vec<Link>, bool), ProbeError> {
    let progs = &skel.progs;
    // The compat program is loaded when the default one was refused (see `load`).
    let compat = !progs.lks_cpu_sample.autoload();
    let program = if compat {
        &progs.lks_cpu_sample_compat
    } else {
        &progs.lks_cpu_sample
    };
    let cpus = std::fs::read_to_string(ONLINE_CPUS)
        .map_err(|source| ProbeError::OnlineCpus {
            path: ONLINE_CPUS,
            source,
        })
        .and_then(|list| parse_cpu_list(&list))?;
    let mut links = Vec::with_capacity(cpus.len());
    for cpu in cpus {
        let event = open_cpu_clock(cpu, period_ns)
            .map_err(|source| ProbeError::OpenCpuClock { cpu, source })?;
        let link = program
            .attach_perf_event(event.as_raw_fd())
            .map_err(|source| ProbeError::AttachCpuClock { cpu, source })?;
        // The link owns the event now: libbpf closes it when the link is destroyed.
        let _ = event.into_raw_fd();
        links.push(link);
    }
    Ok((links, compat))
}

/// Opens a software cpu-clock event counting on `cpu` for every task, overflowing every
/// `period_ns` nanoseconds.
fn open_cpu_clock(cpu: u32, period_ns: u64) -> io::Result<OwnedFd> {
    // SAFETY: perf_event_attr is plain old data; all-zero is its "nothing set" value.
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = PERF_TYPE_SOFTWARE;
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    attr.config = u64::from(PERF_COUNT_SW_CPU_CLOCK);
    attr.__bindgen_anon_1.sample_period = period_ns;
    // SAFETY: a valid attr that outlives the call; pid -1 with a cpu is a per-CPU event; no
    // group. The kernel reads `size` bytes of attr (later fields zero for older kernels).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const perf_event_attr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            libc::c_ulong::from(PERF_FLAG_FD_CLOEXEC),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The CPUs of a sysfs CPU list (`0-3,8,10-11`).
fn parse_cpu_list(list: &str) -> Result<Vec<u32>, ProbeError> {
    let bad = || ProbeError::CpuList {
        path: ONLINE_CPUS,
        list: list.trim().to_owned(),
    };
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        let first: u32 = first.parse().map_err(|_| bad())?;
        let last: u32 = last.parse().map_err(|_| bad())?;
        if last < first {
            return Err(bad());
        }
        cpus.extend(first..=last);
    }
    if cpus.is_empty() {
        return Err(bad());
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sysfs CPU lists give their CPUs; malformed ones are refused with the list.
    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1\n").expect("valid"), vec![0, 1]);
        assert_eq!(
            parse_cpu_list("0,2-4,7").expect("valid"),
            vec![0, 2, 3, 4, 7]
        );
        assert_eq!(parse_cpu_list("5").expect("valid"), vec![5]);
        let err = parse_cpu_list("3-1").expect_err("reversed");
        assert!(err.to_string().contains("`3-1`"), "{err}");
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("a-b").is_err());
    }
}
