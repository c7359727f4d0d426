//! The `offcpu` probe (`bpf/offcpu.bpf.c`, `bpf/offcpu.h`), which also serves `wakeup`,
//! `preempt` and `waitfor`: every thread's wall time split by where it went (on CPU, run queue,
//! futex, poll, I/O, sleep, other) and by who ended its sleeps, the off-CPU intervals with their
//! stacks and who ended them, (for `wakeup`) who woke each sleep, from where, (for `preempt`) the
//! user stack each preempted thread was running, and (for `waitfor`) every interval streamed to
//! the bottleneck analysis (`crate::bottleneck`) as the recording goes.

use super::load_object;
use crate::error::{Error, ProbeError};
use crate::object::{comm, entries, wait_stats, Counters, LksStats, LoadedObject, Plain};
use crate::probe::{
    monotonic_ns, AttachContext, DrainContext, Drained, LoadContext, Probe, ProbeInfo, RawRecord,
    RawThreadTime, RawWakeup, Registered, StackMapId,
};
use crate::skel::offcpu::types::{
    offcpu_interval, offcpu_key, offcpu_state as State, offcpu_thread, time_class, waker_class,
    wakeup_key,
};
use crate::skel::offcpu::{OffcpuSkel, OffcpuSkelBuilder, OpenOffcpuSkel};
use crate::syscalls::{syscall_name, syscall_number};
use lockscope_probes::bottleneck::{Interval, IntervalKind, ThreadRef, WokenBy};
use lockscope_probes::catalog::{self, offcpu_operation};
use lockscope_probes::linux_syscalls;
use lockscope_probes::{ThreadTime, TimeClass, WaitKind};
use std::collections::{BTreeMap, HashSet};

// SAFETY: (and for the impls below) generated #[repr(C)] structs of integers and [i8; N]
// arrays, and #[repr(transparent)] u32 enums: valid for every bit pattern.
unsafe impl Plain for offcpu_key {}
// SAFETY: as above.
unsafe impl Plain for offcpu_thread {}
// SAFETY: as above.
unsafe impl Plain for wakeup_key {}
// SAFETY: as above.
unsafe impl Plain for offcpu_interval {}

/// How often the `preempt` probe takes a thread's user stack at its preemptions: at most once per
/// 10 ms of each thread (`targ_preempted_stack_interval_ns`; in between, the preemptions keep
/// their time without a stack). The walks at every preemption cost more than the rest of
/// `--probes bottleneck` together on a CPU-bound server (docs/BOTTLENECK.md); 10 ms is what a
/// 100 Hz sampler takes of a thread that runs all along.
const PREEMPTED_STACK_INTERVAL_NS: u64 = 10_000_000;

/// How often the `wakeup` probe takes the kernel stack of an interrupt that wakes a thread: at
/// most once per 10 ms of each sleeping thread (`targ_interrupt_waker_stack_interval_ns`; in
/// between, those wakeups keep their time without the handler's stack). In interrupt context a
/// kernel stack costs about 1 µs, and a server's threads are woken mostly by the network's
/// softirq: at every wakeup, the waker stacks cost MariaDB under sysbench 12% of its TPS
/// (docs/BOTTLENECK.md).
const INTERRUPT_WAKER_STACK_INTERVAL_NS: u64 = 10_000_000;

/// The system calls whose sleeps are not `other` time, by class. The loader turns them into
/// the BPF program's table by number (`targ_syscall_class`), and the threads that never ran are
/// classed by the same table. The program walks the kernel stack of a `poll` or `sleep` call's
/// interruptible sleep once per call and reuses it (offcpu.bpf.h's sleep_kernel_stack): a call
/// listed there must sleep at one site only. The lists are `lockscope_probes::linux_syscalls`',
/// which the DTrace backend classes sleeps by too.
const SYSCALL_CLASSES: [(time_class, &[&str]); 4] = [
    (time_class::LKS_TIME_FUTEX, linux_syscalls::FUTEX_WAIT_CALLS),
    (time_class::LKS_TIME_POLL, linux_syscalls::POLL_CALLS),
    (time_class::LKS_TIME_IO, linux_syscalls::IO_CALLS),
    (time_class::LKS_TIME_SLEEP, linux_syscalls::SLEEP_CALLS),
];

/// The class table by system call number, `slots` long (the BPF program's
/// `targ_syscall_class`); numbers not listed are `other`.
fn syscall_class_table(slots: usize) -> Vec<u8> {
    let mut table = vec![time_class::LKS_TIME_OTHER.0 as u8; slots];
    for (class, names) in SYSCALL_CLASSES {
        for name in names {
            // Every name is in the table of syscalls.rs (a unit test checks it).
            if let Some(slot) = syscall_number(name).and_then(|nr| table.get_mut(nr as usize)) {
                *slot = class.0 as u8;
            }
        }
    }
    table
}

/// The time class of a sleep in system call `nr`, as the BPF program classes it.
fn class_of_syscall(nr: i32) -> time_class {
    let class = SYSCALL_CLASSES.iter().find(|(_, names)| {
        names
            .iter()
            .any(|n| syscall_number(n) == u32::try_from(nr).ok())
    });
    class.map_or(time_class::LKS_TIME_OTHER, |(class, _)| *class)
}

/// A kernel time class in profile terms; futex time is split later by `resolve`.
fn profile_class(class: time_class) -> TimeClass {
    match class {
        time_class::LKS_TIME_ON_CPU => TimeClass::OnCpu,
        time_class::LKS_TIME_RUN_QUEUE => TimeClass::RunQueue,
        time_class::LKS_TIME_FUTEX => TimeClass::Futex,
        time_class::LKS_TIME_POLL => TimeClass::Poll,
        time_class::LKS_TIME_IO => TimeClass::Io,
        time_class::LKS_TIME_SLEEP => TimeClass::Sleep,
        _ => TimeClass::Other,
    }
}

/// The probe's loader, found by `probes::all`.
pub(crate) const REGISTERED: fn() -> Registered = Registered::of::<OffcpuProbe>;

/// The loaded offcpu object.
pub(crate) struct OffcpuProbe {
    object: LoadedObject<OffcpuSkel<'static>>,
}

/// A streamed interval in the bottleneck engine's terms.
pub(crate) fn interval(e: &offcpu_interval) -> Interval<StackMapId> {
    let stack = StackMapId::new;
    let woken_by = woken_by(e.woken_by);
    Interval {
        thread: ThreadRef {
            pid: e.tgid,
            tid: e.tid,
        },
        seq: Some(e.seq),
        start_ns: e.start_ns,
        wakeup_ns: e.wakeup_ns,
        end_ns: e.end_ns,
        kind: match e.state {
            State::LKS_STATE_PREEMPTED => IntervalKind::Preempted,
            State::LKS_STATE_RUN_QUEUE => IntervalKind::New,
            _ => IntervalKind::Sleep,
        },
        call: e.syscall,
        object: e.object,
        woken_by,
        waker: (woken_by == Some(WokenBy::Program)).then_some(ThreadRef {
            pid: e.waker_tgid,
            tid: e.waker_tid,
        }),
        user_stack: stack(e.user_stack_id),
        kernel_stack: stack(e.kernel_stack_id),
        waker_user_stack: stack(e.waker_user_stack_id),
        waker_kernel_stack: stack(e.waker_kernel_stack_id),
        // No name: the switch-in went unseen (the idle task's is `swapper/N`).
        holder: (e.holder_comm[0] != 0).then_some(ThreadRef {
            pid: e.holder_tgid,
            tid: e.holder_tid,
        }),
    }
}

/// Who ended a sleep, in profile terms.
pub(crate) fn woken_by(class: waker_class) -> Option<WokenBy> {
    match class {
        waker_class::LKS_WOKEN_BY_PROGRAM => Some(WokenBy::Program),
        waker_class::LKS_WOKEN_BY_OUTSIDE => Some(WokenBy::Outside),
        waker_class::LKS_WOKEN_BY_INTERRUPT => Some(WokenBy::Interrupt),
        _ => None,
    }
}

impl Probe for OffcpuProbe {
    fn info() -> ProbeInfo {
        ProbeInfo {
            descriptor: &catalog::OFFCPU,
            also_serves: &[catalog::WAKEUP, catalog::PREEMPT, catalog::WAITFOR],
            needs: &[],
            privileged: &[],
        }
    }

    /// One object serves the four names: `wakeup` makes it take its wakers' stacks too,
    /// `preempt` the user stacks of preempted threads, `waitfor` stream every interval.
    fn load(cx: &LoadContext<'_>) -> Result<Self, ProbeError> {
        let min_block = u64::try_from(cx.settings.min_block.as_nanos()).unwrap_or(u64::MAX);
        let waker_stacks = cx.wants(&catalog::WAKEUP);
        let preempted_stacks = cx.wants(&catalog::PREEMPT);
        let stream = cx.wants(&catalog::WAITFOR);
        let object = load_object(
            OffcpuSkelBuilder::default(),
            cx,
            |open: &mut OpenOffcpuSkel<'static>| {
                if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
                    rodata.targ_min_block_ns = min_block;
                    rodata.targ_waker_stacks = waker_stacks;
                    rodata.targ_preempted_stacks = preempted_stacks;
                    rodata.targ_preempted_stack_interval_ns = PREEMPTED_STACK_INTERVAL_NS;
                    rodata.targ_interrupt_waker_stack_interval_ns =
                        INTERRUPT_WAKER_STACK_INTERVAL_NS;
                    rodata.targ_intervals = stream;
                    let table = syscall_class_table(rodata.targ_syscall_class.len());
                    rodata.targ_syscall_class.copy_from_slice(&table);
                }
            },
        )?;
        Ok(OffcpuProbe { object })
    }

    fn attach(&mut self, _cx: &AttachContext) -> Result<(), ProbeError> {
        if let Some(bss) = self.object.skel_mut().maps.bss_data.as_deref_mut() {
            bss.lks_start_ns = monotonic_ns();
        }
        self.object.attach_all()
    }

    fn detach(&mut self) {
        self.object.detach();
    }

    fn counters(&self) -> Result<Counters, Error> {
        let mut counters = self.object.counters()?;
        if let Some(bss) = self.object.skel().maps.bss_data.as_deref() {
            counters.losses.out_of_order = bss.lks_out_of_order;
        }
        Ok(counters)
    }

    /// The off-CPU intervals, the wakeups, and every thread's times; the targets' threads that
    /// never ran during the recording get their times from `/proc` (asleep all along, in the
    /// system call they are blocked in).
    fn drain(&self, cx: &DrainContext<'_>, out: &mut Drained) -> Result<(), Error> {
        let maps = &self.object.skel().maps;
        for (k, v) in entries::<offcpu_key, LksStats>(&maps.offcpu, "offcpu")? {
            out.records.push(RawRecord {
                probe: catalog::OFFCPU.name,
                kind: WaitKind::OffCpu,
                classify: false,
                pid: k.tgid,
                tid: k.tid,
                object: k.object,
                operation: operation(k.state, k.syscall),
                user_stack_id: k.user_stack_id,
                kernel_stack_id: k.kernel_stack_id,
                comm: comm(&v.comm),
                woken_by: woken_by(k.woken_by),
                stats: wait_stats(&v),
                futex_sleep: k.state == State::LKS_STATE_SLEEPING
                    && class_of_syscall(k.syscall) == time_class::LKS_TIME_FUTEX,
            });
        }
        for (k, v) in entries::<wakeup_key, LksStats>(&maps.wakeups, "wakeups")? {
            out.wakeups.push(RawWakeup {
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
                stats: wait_stats(&v),
            });
        }
        let now = cx.ended_ns;
        let mut seen = HashSet::new();
        let (mut preemptions, mut unsampled, mut interrupt_unsampled) = (0u64, 0u64, 0u64);
        for (tid, t) in entries::<u32, offcpu_thread>(&maps.threads, "threads")? {
            seen.insert(tid);
            preemptions += t.involuntary;
            unsampled += t.preempted_unsampled;
            interrupt_unsampled += t.interrupt_waker_unsampled;
            out.threads.push(thread_time(tid, &t, now));
        }
        if interrupt_unsampled > 0 {
            out.warnings.push(format!(
                "{interrupt_unsampled} wakeups from interrupt context have no kernel stack: the \
                 `wakeup` probe takes an interrupt's stack at most once per {} ms of each \
                 thread's sleeps (their time is kept whole, woken by `[interrupt]` without a \
                 stack)",
                INTERRUPT_WAKER_STACK_INTERVAL_NS / 1_000_000
            ));
        }
        if unsampled > 0 {
            out.warnings.push(format!(
                "{unsampled} of {preemptions} preemptions have no user stack: the `preempt` \
                 probe takes a thread's stack at most once per {} ms of its preemptions (their \
                 time is kept whole, as `[preempted]` without a stack)",
                PREEMPTED_STACK_INTERVAL_NS / 1_000_000
            ));
        }
        let start = maps.bss_data.as_ref().map_or(now, |bss| bss.lks_start_ns);
        out.threads
            .extend(never_ran(cx.targets, &seen, now.saturating_sub(start)));
        Ok(())
    }
}

/// Operation of an off-CPU record: `sleeping in nanosleep`, `sleeping`, `preempted`,
/// `run-queue`.
fn operation(state: State, syscall: i32) -> String {
    match state {
        State::LKS_STATE_PREEMPTED => offcpu_operation::PREEMPTED.to_owned(),
        State::LKS_STATE_RUN_QUEUE => offcpu_operation::RUN_QUEUE.to_owned(),
        _ if syscall >= 0 => offcpu_operation::sleeping_in(&syscall_name(syscall)),
        _ => offcpu_operation::SLEEPING.to_owned(),
    }
}

/// Threads of `targets` the scheduler hooks never saw: asleep for the whole `wall_ns`, classed by
/// the system call they are blocked in (`/proc/PID/task/TID/syscall`).
fn never_ran(targets: &[u32], seen: &HashSet<u32>, wall_ns: u64) -> Vec<RawThreadTime> {
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
                .map_or(TimeClass::Other, |nr| profile_class(class_of_syscall(nr)));
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
                    woken_ns: BTreeMap::new(),
                },
            });
        }
    }
    times
}

/// One thread's times, its open interval closed at `now`.
fn thread_time(tid: u32, t: &offcpu_thread, now: u64) -> RawThreadTime {
    let mut ns = t.time_ns;
    let mut open_futex_sleep = None;
    let end = if t.state == State::LKS_STATE_DEAD {
        t.since_ns
    } else {
        let open = now.saturating_sub(t.since_ns);
        let class = match t.state {
            State::LKS_STATE_ON_CPU => time_class::LKS_TIME_ON_CPU,
            State::LKS_STATE_SLEEPING => t.sleep_class,
            _ => time_class::LKS_TIME_RUN_QUEUE,
        };
        if t.state == State::LKS_STATE_SLEEPING && t.sleep_class == time_class::LKS_TIME_FUTEX {
            // A futex sleep still going on: no record ends it, so its own stack classes it.
            open_futex_sleep = Some((open, t.user_stack_id));
        } else if let Some(slot) = ns.get_mut(class.0 as usize) {
            *slot += open;
        }
        now.max(t.since_ns)
    };
    let mut time_ns = BTreeMap::new();
    for (class, value) in ns.into_iter().enumerate() {
        if value > 0 {
            *time_ns
                .entry(profile_class(time_class(class as u32)))
                .or_insert(0) += value;
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
            woken_ns: t
                .woken_ns
                .iter()
                .enumerate()
                .filter(|(_, &ns)| ns > 0)
                .filter_map(|(class, &ns)| Some((woken_by(waker_class(class as u32))?, ns)))
                .collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every classed system call has a number, and the table classes the ones the program
    /// meets most as before (futex, epoll_wait, read, nanosleep; getpid is other).
    #[test]
    fn syscall_classes() {
        for (_, names) in SYSCALL_CLASSES {
            for name in names {
                assert!(syscall_number(name).is_some(), "{name} has no number");
            }
        }
        let table = syscall_class_table(512);
        let class = |nr: i64| time_class(u32::from(table[nr as usize]));
        assert_eq!(class(libc::SYS_futex), time_class::LKS_TIME_FUTEX);
        assert_eq!(class(455), time_class::LKS_TIME_FUTEX);
        assert_eq!(class(libc::SYS_epoll_wait), time_class::LKS_TIME_POLL);
        assert_eq!(class(libc::SYS_read), time_class::LKS_TIME_IO);
        assert_eq!(class(libc::SYS_nanosleep), time_class::LKS_TIME_SLEEP);
        assert_eq!(class(libc::SYS_getpid), time_class::LKS_TIME_OTHER);
        for nr in 0..512 {
            assert_eq!(class(nr), class_of_syscall(nr as i32), "syscall {nr}");
        }
    }
}
