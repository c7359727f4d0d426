//! Sleeps two probes saw, and what the `offcpu` probe's sleeps waited for.
//!
//! Futex sleeps: with the `futex` and `offcpu` probes recorded together, one futex sleep is both
//! a futex probe wait (from the system call's entry to its return, classified by its user stack,
//! with its futex word) and an `offcpu` interval (`sleeping in futex`, from the switch-out to the
//! wakeup, with who ended it). Every total, share, ranking and flamegraph counts it once, as the
//! futex probe's wait, and keeps the `offcpu` probe's sleeps in every other system call
//! ([`Profile::counted_waits`]); so is the `offcpu` run-queue delay after such a sleep, which
//! lies inside the futex wait (it lasts until the system call returns). The `offcpu` records stay
//! in the profile: their [`WaitRecord::woken_by`] says who ended the futex waits
//! ([`futex_wakers`]). A thread's `offcpu` futex sleeps are the futex probe's waits when the
//! futex probe recorded that thread: it sees every futex wait of the threads it traces. The
//! `offcpu` futex sleeps of a thread the futex probe has no record of (it ran before the futex
//! probe's hooks were in, or the probe was not asked for) are kept. Linux only: the sleeps are
//! told by their system call (`sleeping in futex` from the eBPF backend, `futex` from DTrace for
//! Linux's `offcpu`).
//!
//! Kernel-lock sleeps: likewise with the `klock` and `offcpu` probes, an `offcpu` sleep under a
//! sleeping kernel lock ([`sleeps_on_kernel_lock`], its kernel stack) of a thread the `klock`
//! probe recorded is that probe's contention, and counts once, as the `klock` probe's wait, with
//! the run-queue delay after it ([`SeenTwice`]; [`SeenTwice::merged`] and
//! [`SeenTwice::merged_kernel_locks`] say what was merged, for the report's notes).
//!
//! The kind of an `offcpu` sleep: its stacks tell more than "off CPU" ([`offcpu_sleep_kind`]): a
//! sleep under a sleeping kernel lock is a `kernel-lock` wait, as the `klock` probe would have
//! recorded it; a futex sleep is what its user stack says (`mutex`, `condvar`...), as the `futex`
//! probe classifies its waits; so one sleep has one kind whichever probe saw it.
//! [`classify_offcpu_sleeps`] gives every `offcpu` sleep of a profile that kind (the eBPF backend
//! when it builds a profile, and every profile read from a file).
//!
//! Records that are not waits beside waits: the `syscall` and `lifecycle` probes' time in system
//! calls (a futex wait is also a `futex` call), the `mutex-hold` probe's holds (time held) and the
//! `cpu` probe's samples (CPU time) are never summed with wait time ([`MixedMeasures`]).

use crate::bottleneck::WokenBy;
use crate::catalog::{offcpu_operation, ProbeDescriptor, FUTEX, KLOCK, OFFCPU};
use crate::kernel_frames::is_kernel_lock_sleep_frame;
use crate::linux_syscalls::FUTEX_WAIT_CALLS;
use crate::profile::{Frame, Profile, Stack, StackId, WaitRecord, WaitStats};
use crate::wait::{Quantity, WaitKind};
use std::collections::{BTreeMap, BTreeSet};

/// The system call an `offcpu` record slept in, when it names one: `sleeping in CALL` (eBPF),
/// or the call itself (DTrace for Linux).
pub fn offcpu_call(record: &WaitRecord) -> Option<&str> {
    if !record.is_from(&OFFCPU) {
        return None;
    }
    let op = record.operation.as_str();
    match op.strip_prefix(offcpu_operation::SLEEPING_IN) {
        Some(call) => Some(call),
        None if op != offcpu_operation::SLEEPING
            && !offcpu_operation::is_cpu_wait(op)
            && !op.is_empty() =>
        {
            Some(op)
        }
        None => None,
    }
}

/// True for an `offcpu` sleep in a futex system call.
pub fn is_offcpu_futex_sleep(record: &WaitRecord) -> bool {
    offcpu_call(record).is_some_and(|call| FUTEX_WAIT_CALLS.contains(&call))
}

/// True when `stack` sleeps under a sleeping kernel lock: a frame of [`KERNEL_LOCK_SLEEPS`](crate::kernel_frames::KERNEL_LOCK_SLEEPS)
/// ([`is_kernel_lock_sleep_frame`]).
pub fn sleeps_on_kernel_lock(stack: &Stack) -> bool {
    stack.frames.iter().any(|f| {
        f.function
            .as_deref()
            .is_some_and(is_kernel_lock_sleep_frame)
    })
}

/// What an `offcpu` sleep waited for, as its stacks tell it, where they tell more than "off
/// CPU": a sleep under a sleeping kernel lock is [`WaitKind::KernelLock`] (its kernel stack,
/// as the `klock` probe would have seen it); a futex sleep is what its user stack says, as the
/// `futex` probe classifies its waits ([`WaitKind::classify_user_wait`]: `mutex` under
/// `pthread_mutex_lock`, `condvar` under `pthread_cond_wait`...). `None` for every other record,
/// and for a sleep whose stacks say nothing more.
///
/// So the same sleep has the same kind whichever probe saw it: a mutex convoy is `mutex`, and
/// contention, with `--probes offcpu` as with the default `futex`.
pub fn offcpu_sleep_kind(profile: &Profile, record: &WaitRecord) -> Option<WaitKind> {
    if !record.is_from(&OFFCPU)
        || record.kind != WaitKind::OffCpu
        || offcpu_operation::is_cpu_wait(&record.operation)
    {
        return None;
    }
    if profile
        .stack(record.kernel_stack)
        .is_some_and(sleeps_on_kernel_lock)
    {
        return Some(WaitKind::KernelLock);
    }
    if !is_offcpu_futex_sleep(record) {
        return None;
    }
    let stack = profile.stack(record.user_stack)?;
    let names: Vec<String> = stack.frames.iter().map(Frame::display_name).collect();
    match WaitKind::classify_user_wait(names.iter().map(String::as_str), WaitKind::OffCpu) {
        WaitKind::OffCpu | WaitKind::Wait => None,
        kind => Some(kind),
    }
}

/// Gives every `offcpu` sleep of `profile` the kind its stacks tell ([`offcpu_sleep_kind`]).
/// The eBPF backend does so when it builds a profile, and every profile read from a file is
/// given it ([`crate::format::read_profile`]), so profiles recorded before it say the same.
pub fn classify_offcpu_sleeps(profile: &mut Profile) {
    let kinds: Vec<Option<WaitKind>> = profile
        .waits
        .iter()
        .map(|w| offcpu_sleep_kind(profile, w))
        .collect();
    for (w, kind) in profile.waits.iter_mut().zip(kinds) {
        if let Some(kind) = kind {
            w.kind = kind;
        }
    }
}

/// The records of a profile whose time another probe's waits already hold:
///
/// - the `offcpu` probe's futex sleeps of the threads the `futex` probe recorded, and the
///   `offcpu` run-queue delays that followed them (a run-queue interval carries the user stack
///   of the sleep it woke from; a futex wait lasts until its system call returns, so the delay
///   is inside it);
/// - the `offcpu` probe's sleeps under a sleeping kernel lock (`KERNEL_LOCK_SLEEPS` on their
///   kernel stack) of the threads the `klock` probe recorded, and the run-queue delays after
///   them (they carry the sleep's kernel stack): `klock` sees every contention of the threads it
///   traces, from before the sleep to the lock's acquisition.
#[derive(Clone, Debug, Default)]
pub struct SeenTwice {
    /// Threads (pid, tid) with futex probe records.
    futex_threads: BTreeSet<(u32, u32)>,
    /// (pid, tid, user stack) of the futex probe's waits.
    futex_sites: BTreeSet<(u32, u32, StackId)>,
    /// Threads (pid, tid) with klock probe records.
    klock_threads: BTreeSet<(u32, u32)>,
    /// Kernel stacks of those threads' `offcpu` records that sleep under a kernel lock.
    lock_stacks: BTreeSet<StackId>,
}

impl SeenTwice {
    /// The records of `profile` seen twice.
    pub fn of(profile: &Profile) -> SeenTwice {
        let futex = || profile.waits.iter().filter(|w| w.is_from(&FUTEX));
        let klock_threads: BTreeSet<(u32, u32)> = profile
            .waits
            .iter()
            .filter(|w| w.is_from(&KLOCK))
            .map(|w| (w.pid, w.tid))
            .collect();
        let lock_stacks = profile
            .waits
            .iter()
            .filter(|w| w.is_from(&OFFCPU) && klock_threads.contains(&(w.pid, w.tid)))
            .filter_map(|w| w.kernel_stack)
            .filter(|&id| profile.stack(Some(id)).is_some_and(sleeps_on_kernel_lock))
            .collect();
        SeenTwice {
            futex_threads: futex().map(|w| (w.pid, w.tid)).collect(),
            futex_sites: futex()
                .filter_map(|w| Some((w.pid, w.tid, w.user_stack?)))
                .collect(),
            klock_threads,
            lock_stacks,
        }
    }

    /// True when `record` is an `offcpu` futex sleep that the futex probe recorded too.
    pub fn is_sleep(&self, record: &WaitRecord) -> bool {
        is_offcpu_futex_sleep(record) && self.futex_threads.contains(&(record.pid, record.tid))
    }

    /// True when `record` is an `offcpu` run-queue delay after a futex sleep the futex probe
    /// recorded (its thread and user stack are a futex wait's).
    pub fn is_run_queue_tail(&self, record: &WaitRecord) -> bool {
        record.is_from(&OFFCPU)
            && record.operation == offcpu_operation::RUN_QUEUE
            && record
                .user_stack
                .is_some_and(|id| self.futex_sites.contains(&(record.pid, record.tid, id)))
    }

    /// True when `record` is an `offcpu` sleep under a kernel lock, or the run-queue delay
    /// after one, of a thread the klock probe recorded (not one the futex probe holds).
    pub fn is_kernel_lock_sleep(&self, record: &WaitRecord) -> bool {
        record.is_from(&OFFCPU)
            && record.operation != offcpu_operation::PREEMPTED
            && self.klock_threads.contains(&(record.pid, record.tid))
            && record
                .kernel_stack
                .is_some_and(|id| self.lock_stacks.contains(&id))
            && !self.is_sleep(record)
            && !self.is_run_queue_tail(record)
    }

    /// True when another probe's waits hold `record`'s time: [`SeenTwice::is_sleep`],
    /// [`SeenTwice::is_run_queue_tail`] or [`SeenTwice::is_kernel_lock_sleep`].
    pub fn contains(&self, record: &WaitRecord) -> bool {
        self.is_sleep(record) || self.is_run_queue_tail(record) || self.is_kernel_lock_sleep(record)
    }

    /// What was merged in `profile` for the futex probe: the `offcpu` sleeps (and run-queue
    /// delays after them) left out, their threads, and the futex probe's waits that stand for
    /// them.
    pub fn merged(&self, profile: &Profile) -> Option<Merged> {
        self.merged_into(
            profile,
            &FUTEX,
            |w| self.is_sleep(w),
            |w| self.is_run_queue_tail(w),
        )
    }

    /// What was merged in `profile` for the klock probe: the `offcpu` sleeps under kernel locks
    /// (and run-queue delays after them) left out, their threads, and the klock probe's waits
    /// of those threads.
    pub fn merged_kernel_locks(&self, profile: &Profile) -> Option<Merged> {
        let tail = |w: &WaitRecord| w.operation == offcpu_operation::RUN_QUEUE;
        self.merged_into(
            profile,
            &KLOCK,
            |w| self.is_kernel_lock_sleep(w) && !tail(w),
            |w| self.is_kernel_lock_sleep(w) && tail(w),
        )
    }

    fn merged_into(
        &self,
        profile: &Profile,
        counted: &ProbeDescriptor,
        is_sleep: impl Fn(&WaitRecord) -> bool,
        is_tail: impl Fn(&WaitRecord) -> bool,
    ) -> Option<Merged> {
        let mut merged = Merged::default();
        let mut threads = BTreeSet::new();
        for w in &profile.waits {
            if is_sleep(w) {
                merged.offcpu.merge(&w.stats);
                threads.insert((w.pid, w.tid));
            } else if is_tail(w) {
                merged.run_queue.merge(&w.stats);
            }
        }
        merged.threads = threads.len();
        for w in &profile.waits {
            if w.is_from(counted) && threads.contains(&(w.pid, w.tid)) {
                merged.counted.merge(&w.stats);
            }
        }
        (merged.offcpu.count > 0).then_some(merged)
    }
}

/// What [`SeenTwice::merged`] or [`SeenTwice::merged_kernel_locks`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Merged {
    /// Threads whose sleeps both probes saw.
    pub threads: usize,
    /// Their `offcpu` sleeps, left out of the totals.
    pub offcpu: WaitStats,
    /// The `offcpu` run-queue delays after them (inside the other probe's waits).
    pub run_queue: WaitStats,
    /// Those threads' waits of the other probe (`futex`, `klock`), which count instead.
    pub counted: WaitStats,
}

/// What the default views of a profile that mixes measures leave out: they show one
/// [`Quantity`], its waits when it has any (beside them, the `syscall` and `lifecycle` probes'
/// records are time in system calls, which holds the waits inside them, the `mutex-hold` probe's
/// are time held and the `cpu` probe's samples CPU time, never wait time: they have their report
/// sections, and are shown with `--probe`), else its system calls, else its holds.
#[derive(Clone, Copy, Debug, Default)]
pub struct MixedMeasures {
    /// The quantity shown ([`Quantity`]'s order); `None`: every record (no records).
    shown: Option<Quantity>,
}

impl MixedMeasures {
    /// What `profile` has.
    pub fn of(profile: &Profile) -> MixedMeasures {
        MixedMeasures {
            shown: profile.waits.iter().map(|w| w.kind.quantity()).min(),
        }
    }

    /// True when the default views leave `record` out.
    pub fn leaves_out(&self, record: &WaitRecord) -> bool {
        self.shown.is_some_and(|q| record.kind.quantity() != q)
    }
}

impl Profile {
    /// The records every total counts: all but the `offcpu` records whose time the `futex` or
    /// `klock` probe's waits hold ([`SeenTwice`]), and in a profile that mixes measures, those of
    /// the one its totals show ([`MixedMeasures`]: beside waits, no call, hold or sample is
    /// summed).
    pub fn counted_waits(&self) -> impl Iterator<Item = &WaitRecord> + '_ {
        let twice = SeenTwice::of(self);
        let mixed = MixedMeasures::of(self);
        self.waits
            .iter()
            .filter(move |w| !mixed.leaves_out(w) && !twice.contains(w))
    }
}

/// Who ended a thread's futex sleeps at one user stack: nanoseconds asleep per waker class
/// (`None`: no wakeup seen), from the `offcpu` probe's futex sleeps.
pub type Wakers = BTreeMap<Option<WokenBy>, u64>;

/// Who ended the futex sleeps of each (pid, tid, user stack), from the `offcpu` probe's futex
/// sleeps; empty without them. The futex probe's waits at the same thread and stack are those
/// sleeps (both probes take the user stack from the same registers, and equal stacks share an
/// id).
pub fn futex_wakers(profile: &Profile) -> BTreeMap<(u32, u32, Option<StackId>), Wakers> {
    let mut out: BTreeMap<(u32, u32, Option<StackId>), Wakers> = BTreeMap::new();
    for w in profile.waits.iter().filter(|w| is_offcpu_futex_sleep(w)) {
        let ns = out
            .entry((w.pid, w.tid, w.user_stack))
            .or_default()
            .entry(w.woken_by)
            .or_default();
        *ns = ns.saturating_add(w.stats.total_ns);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wait::WaitKind;

    fn record(probe: &str, tid: u32, operation: &str, total_ns: u64) -> WaitRecord {
        WaitRecord {
            probe: probe.into(),
            kind: if probe == "offcpu" {
                WaitKind::OffCpu
            } else {
                WaitKind::Mutex
            },
            pid: 1,
            tid,
            object: 0,
            operation: operation.into(),
            user_stack: Some(0),
            kernel_stack: None,
            woken_by: None,
            stats: WaitStats {
                count: 1,
                total_ns,
                max_ns: total_ns,
                ..WaitStats::default()
            },
        }
    }

    /// A futex-traced thread's offcpu futex sleeps, and the run-queue delay after one (at a
    /// futex wait's stack), are left out; its other sleeps and delays, and the futex sleeps of a
    /// thread the futex probe has no record of, are counted.
    #[test]
    fn futex_sleeps_count_once() {
        let profile = Profile {
            waits: vec![
                record("futex", 2, "FUTEX_WAIT_PRIVATE", 100),
                record("offcpu", 2, "sleeping in futex", 95),
                record("offcpu", 2, "sleeping in epoll_wait", 40),
                record("offcpu", 3, "sleeping in futex", 70),
                record("offcpu", 2, "futex", 5),
                record("offcpu", 2, "preempted", 7),
                record("offcpu", 2, "run-queue", 3),
                WaitRecord {
                    user_stack: Some(1),
                    ..record("offcpu", 2, "run-queue", 11)
                },
            ],
            ..Profile::default()
        };
        let counted: Vec<u64> = profile.counted_waits().map(|w| w.stats.total_ns).collect();
        assert_eq!(counted, [100, 40, 70, 7, 11]);
        let merged = SeenTwice::of(&profile).merged(&profile).expect("merged");
        assert_eq!(merged.threads, 1);
        assert_eq!(merged.offcpu.total_ns, 100);
        assert_eq!(merged.run_queue.total_ns, 3);
        assert_eq!(merged.counted.total_ns, 100);
        let alone = Profile {
            waits: profile.waits[1..].to_vec(),
            ..Profile::default()
        };
        assert_eq!(alone.counted_waits().count(), 7);
        assert!(SeenTwice::of(&alone).merged(&alone).is_none());
    }

    /// Beside waits, the `syscall` probe's calls (a futex wait is also a `futex` call), the
    /// `mutex-hold` probe's holds and the `cpu` probe's samples are never summed with wait time;
    /// without waits, calls are counted, else holds, and samples alone.
    #[test]
    fn other_measures_are_not_waits() {
        let kind = |kind, r: WaitRecord| WaitRecord { kind, ..r };
        let wait = record("futex", 2, "FUTEX_WAIT_PRIVATE", 100);
        let hold = kind(
            WaitKind::Hold,
            record("mutex-hold", 2, "hold (blocked)", 300),
        );
        let sample = kind(WaitKind::OnCpu, record("cpu", 2, "cpu-clock", 20));
        let call = kind(WaitKind::Syscall, record("syscall", 2, "futex", 101));
        let counted = |waits: &[&WaitRecord]| -> Vec<u64> {
            let profile = Profile {
                waits: waits.iter().map(|&w| w.clone()).collect(),
                ..Profile::default()
            };
            profile.counted_waits().map(|w| w.stats.total_ns).collect()
        };
        assert_eq!(counted(&[&wait, &hold, &sample, &call]), [100]);
        assert_eq!(counted(&[&call, &hold, &sample]), [101]);
        assert_eq!(counted(&[&hold, &sample]), [300]);
        assert_eq!(counted(&[&hold]), [300]);
        assert_eq!(counted(&[&sample]), [20]);
    }

    /// A klock-traced thread's offcpu sleeps under a kernel lock (rwsem, mutex: their kernel
    /// stack says so), and the run-queue delays after them, are left out and merged into its
    /// klock waits; its other sleeps, its preemptions and another thread's lock sleeps count.
    #[test]
    fn kernel_lock_sleeps_count_once() {
        use crate::profile::{AddressSpace, Frame, Stack};
        let kernel = |functions: &[&str]| Stack {
            space: AddressSpace::Kernel,
            frames: functions
                .iter()
                .map(|f| Frame {
                    function: Some((*f).into()),
                    ..Frame::unsymbolized(0xffff_ffff_8100_0000)
                })
                .collect(),
            truncated: false,
        };
        let on = |stack: u32, r: WaitRecord| WaitRecord {
            kernel_stack: Some(stack),
            ..r
        };
        let klock = WaitRecord {
            kind: WaitKind::KernelLock,
            ..record("klock", 2, "rwsem-write", 120)
        };
        let profile = Profile {
            stacks: vec![
                kernel(&[
                    "__schedule",
                    "schedule",
                    "rwsem_down_write_slowpath",
                    "__vm_munmap",
                ]),
                kernel(&[
                    "__schedule",
                    "schedule",
                    "__mutex_lock.constprop.0",
                    "do_open",
                ]),
                kernel(&["__schedule", "schedule", "do_nanosleep"]),
            ],
            waits: vec![
                klock,
                on(0, record("offcpu", 2, "sleeping in munmap", 80)),
                on(1, record("offcpu", 2, "sleeping in openat", 30)),
                on(0, record("offcpu", 2, "run-queue", 6)),
                on(2, record("offcpu", 2, "sleeping in clock_nanosleep", 50)),
                record("offcpu", 2, "preempted", 7),
                on(0, record("offcpu", 3, "sleeping in munmap", 40)),
            ],
            ..Profile::default()
        };
        let counted: Vec<u64> = profile.counted_waits().map(|w| w.stats.total_ns).collect();
        assert_eq!(counted, [120, 50, 7, 40]);
        let twice = SeenTwice::of(&profile);
        let merged = twice.merged_kernel_locks(&profile).expect("merged");
        assert_eq!(
            (
                merged.threads,
                merged.offcpu.total_ns,
                merged.run_queue.total_ns
            ),
            (1, 110, 6)
        );
        assert_eq!(merged.counted.total_ns, 120);
        assert!(twice.merged(&profile).is_none());
    }

    /// An `offcpu` sleep takes the kind its stacks say: a futex sleep under glibc's mutex lock
    /// is `mutex`, under a condvar wait `condvar`, a sleep under a kernel rwsem `kernel-lock`;
    /// a futex sleep with no telling frame, a nanosleep, a run-queue delay and another probe's
    /// record keep theirs.
    #[test]
    fn offcpu_sleeps_take_their_stacks_kind() {
        use crate::profile::{AddressSpace, Stack};
        let stack = Stack::named;
        let user = |functions: &[&str]| stack(AddressSpace::User, functions);
        let on = |user: Option<u32>, kernel: Option<u32>, r: WaitRecord| WaitRecord {
            user_stack: user,
            kernel_stack: kernel,
            ..r
        };
        let mut profile = Profile {
            stacks: vec![
                user(&[
                    "futex_wait",
                    "__GI___lll_lock_wait",
                    "___pthread_mutex_lock",
                    "take_order_lock",
                ]),
                user(&[
                    "__futex_abstimed_wait_common",
                    "___pthread_cond_wait",
                    "wait",
                ]),
                user(&["__futex_abstimed_wait_common", "work"]),
                stack(
                    AddressSpace::Kernel,
                    &[
                        "__schedule",
                        "rwsem_down_read_slowpath",
                        "do_user_addr_fault",
                    ],
                ),
            ],
            waits: vec![
                on(Some(0), None, record("offcpu", 2, "sleeping in futex", 10)),
                on(Some(1), None, record("offcpu", 3, "sleeping in futex", 10)),
                on(Some(2), None, record("offcpu", 4, "sleeping in futex", 10)),
                on(Some(2), Some(3), record("offcpu", 5, "sleeping", 10)),
                on(
                    Some(0),
                    None,
                    record("offcpu", 6, "sleeping in nanosleep", 10),
                ),
                on(Some(0), None, record("offcpu", 7, "run-queue", 10)),
                on(Some(1), None, record("futex", 8, "FUTEX_WAIT_PRIVATE", 10)),
            ],
            ..Profile::default()
        };
        classify_offcpu_sleeps(&mut profile);
        let kinds: Vec<WaitKind> = profile.waits.iter().map(|w| w.kind).collect();
        assert_eq!(
            kinds,
            [
                WaitKind::Mutex,
                WaitKind::Condvar,
                WaitKind::OffCpu,
                WaitKind::KernelLock,
                WaitKind::OffCpu,
                WaitKind::OffCpu,
                WaitKind::Mutex,
            ]
        );
        // The probe is still told by its name: the records stay the `offcpu` probe's.
        assert!(profile.waits[0].is_from(&OFFCPU));
    }

    /// Who ended the futex sleeps, per thread and stack, by waker class.
    #[test]
    fn wakers_of_futex_sleeps() {
        let mut by_program = record("offcpu", 2, "sleeping in futex", 60);
        by_program.woken_by = Some(WokenBy::Program);
        let mut by_timer = record("offcpu", 2, "sleeping in futex", 30);
        by_timer.woken_by = Some(WokenBy::Interrupt);
        let profile = Profile {
            waits: vec![
                by_program,
                by_timer,
                record("offcpu", 2, "sleeping in poll", 9),
            ],
            ..Profile::default()
        };
        let wakers = futex_wakers(&profile);
        assert_eq!(
            wakers.get(&(1, 2, Some(0))),
            Some(&BTreeMap::from([
                (Some(WokenBy::Program), 60),
                (Some(WokenBy::Interrupt), 30)
            ]))
        );
        assert_eq!(wakers.len(), 1);
    }
}
