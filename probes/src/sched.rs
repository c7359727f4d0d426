//! Scheduler-level data of a profile: where each thread's wall time went ([`ThreadTime`], per
//! [`TimeClass`]) and who woke whom ([`WakeupRecord`]), recorded by the `offcpu` probe and absent
//! (empty) in profiles without it; and what each wait was ([`wait_roles`]): contention (waiting
//! on another thread of the program) or idle (waiting for something outside it), by who ended
//! its sleeps where the profile says, by a rule of thumb on any other profile.

use crate::bottleneck::WokenBy;
use crate::catalog::{offcpu_operation, OFFCPU};
use crate::linux_syscalls::{FILE_IO_CALLS, INPUT_CALLS, POLL_CALLS, SLEEP_CALLS};
use crate::overlap::{futex_wakers, offcpu_call, SeenTwice, Wakers};
use crate::profile::{Profile, StackId, WaitRecord, WaitStats};
use crate::wait::WaitKind;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// What a slice of a thread's wall time went to. The classes of one thread add up to its wall
/// time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeClass {
    /// Running on a CPU.
    OnCpu,
    /// Runnable (woken, or preempted) but waiting for a CPU.
    RunQueue,
    /// Asleep waiting for a mutex or a reader-writer lock (futex waits classified so).
    Lock,
    /// Asleep on a condition variable.
    Condvar,
    /// Asleep in another futex wait (semaphore, join, or one whose purpose is unknown).
    Futex,
    /// Asleep in poll, select or epoll: typically waiting for clients.
    Poll,
    /// Asleep in file or network I/O (read, write, recv, send, accept, fsync, io_uring, ...).
    Io,
    /// Asleep on purpose (nanosleep, clock_nanosleep, pause, sigsuspend, sigtimedwait).
    Sleep,
    /// Asleep anywhere else (other system calls, page faults).
    Other,
}

impl TimeClass {
    /// Every class, in report order.
    pub const ALL: [TimeClass; 9] = [
        TimeClass::OnCpu,
        TimeClass::RunQueue,
        TimeClass::Lock,
        TimeClass::Condvar,
        TimeClass::Futex,
        TimeClass::Poll,
        TimeClass::Io,
        TimeClass::Sleep,
        TimeClass::Other,
    ];

    /// The class's name as printed in reports and stored in profiles.
    pub fn name(self) -> &'static str {
        match self {
            TimeClass::OnCpu => "on-cpu",
            TimeClass::RunQueue => "run-queue",
            TimeClass::Lock => "lock",
            TimeClass::Condvar => "condvar",
            TimeClass::Futex => "futex",
            TimeClass::Poll => "poll",
            TimeClass::Io => "io",
            TimeClass::Sleep => "sleep",
            TimeClass::Other => "other",
        }
    }
}

impl fmt::Display for TimeClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where one thread's wall time went during the recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadTime {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The part of the recording the thread lived through, nanoseconds (from the recording's
    /// start or the thread's creation to its end or the thread's exit).
    pub wall_ns: u64,
    /// Nanoseconds per class; they add up to `wall_ns`.
    pub time_ns: BTreeMap<TimeClass, u64>,
    /// Times the thread blocked (voluntary context switches).
    pub voluntary_switches: u64,
    /// Times the thread was preempted (involuntary context switches).
    pub involuntary_switches: u64,
    /// Nanoseconds asleep (any class but on-cpu and run-queue) by who ended the sleeps; the
    /// sleeps no wakeup was seen for are missing (so the values add up to at most the sleeps).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub woken_ns: BTreeMap<WokenBy, u64>,
}

impl ThreadTime {
    /// Nanoseconds spent in `class`.
    pub fn ns(&self, class: TimeClass) -> u64 {
        self.time_ns.get(&class).copied().unwrap_or(0)
    }

    /// Sum of every class (equal to `wall_ns` in a consistent record).
    pub fn accounted_ns(&self) -> u64 {
        self.time_ns
            .values()
            .fold(0u64, |a, &b| a.saturating_add(b))
    }
}

/// Sleeps of one thread ended by one waker, aggregated per (sleeper, sleeper's stacks, waker,
/// waker's stacks): who hands the lock to whom, and from where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeupRecord {
    /// Process id of the sleeper.
    pub pid: u32,
    /// Thread id of the sleeper.
    pub tid: u32,
    /// System call the sleeper slept in (`futex`), when it was in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    /// The sleeper's user stack at switch-out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_stack: Option<StackId>,
    /// The sleeper's kernel stack at switch-out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_stack: Option<StackId>,
    /// Process id of the waker; 0 with thread id 0 for a wakeup from interrupt context (a timer
    /// expiring, I/O completing), whose waker name is then `[interrupt]` and whose only stack is
    /// the kernel one (the handler).
    pub waker_pid: u32,
    /// Thread id of the waker.
    pub waker_tid: u32,
    /// Name of the waker thread.
    pub waker_name: String,
    /// The waker's user stack at the wakeup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker_user_stack: Option<StackId>,
    /// The waker's kernel stack at the wakeup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker_kernel_stack: Option<StackId>,
    /// Number of sleeps and their durations (until the wakeup).
    #[serde(flatten)]
    pub stats: WaitStats,
}

/// A thread is parked at a wait site (idle, without who ended its sleeps) when that one site
/// holds at least this share of the recording.
pub const IDLE_SHARE: f64 = 0.5;

/// True for waits that can be a thread waiting for work rather than for another thread's lock:
/// condition variables, semaphores, joins (a supervisor waiting for its workers' end),
/// unclassified futex waits, and off-CPU sleeps in poll, epoll,
/// select, reads and receives, accept, nanosleep and signal waits ([`POLL_CALLS`],
/// [`INPUT_CALLS`], [`SLEEP_CALLS`]). The rule of thumb for profiles that do not say who ended
/// their sleeps ([`wait_roles`]).
pub fn may_be_idle(record: &WaitRecord) -> bool {
    match record.kind {
        WaitKind::Condvar | WaitKind::Semaphore | WaitKind::Wait | WaitKind::Join => true,
        WaitKind::OffCpu => offcpu_call(record).is_some_and(|call| {
            [POLL_CALLS, INPUT_CALLS, SLEEP_CALLS]
                .iter()
                .any(|calls| calls.contains(&call))
        }),
        _ => false,
    }
}

/// What a wait was, told by who ended it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitRole {
    /// Waiting on another thread of the program: for a lock, or in any sleep another thread of
    /// the program ended (a futex, a semaphore, a latch on an eventfd or a pipe, `epoll_wait`, a
    /// signal): a dependency on that thread, contention.
    Contention,
    /// Waiting for something outside the program: a sleep a client, another process, a timer or
    /// the network ended (not disk I/O), or, without who ended it, a thread parked most of its
    /// window at one site that may be idle.
    Idle,
}

impl WaitRole {
    /// Its name in reports (`contention`, `idle`).
    pub fn name(self) -> &'static str {
        match self {
            WaitRole::Contention => "contention",
            WaitRole::Idle => "idle",
        }
    }
}

/// How a wait's [`WaitRole`] was told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoleBasis {
    /// By who ended its sleeps (the `offcpu` probe's wakeups): the program's threads (at least
    /// half of the time whose waker is known) or something outside.
    Waker,
    /// By its kind: a mutex, rwlock or kernel-lock wait ends when another thread releases the
    /// lock.
    Lock,
    /// Without who ended it (profiles without the `offcpu` probe, old profiles, DTrace): a wait
    /// that [`may_be_idle`] at a site holding at least [`IDLE_SHARE`] of the recording.
    Window,
    /// A sleep through at least [`IDLE_SHARE`] of the recording at the site, whoever ended it: a
    /// thread parked for the recording (a pool released at shutdown, a supervisor woken when a
    /// child exits) waited on nobody while it lasted. A thread that lived for one wait (a worker
    /// waiting on its producer's signal) is not parked: it waited on the producer.
    Parked,
    /// By where the bottleneck analysis (the `waitfor` probe: [`crate::bottleneck`]) followed its
    /// time, thread to thread: idle when at least half of it ends in a sleep something outside the
    /// program ended (a pool waiting for tasks from threads that wait for their clients), else
    /// contention (a thread on a CPU or waiting for one, a cycle, disk I/O down the chain).
    Chain,
}

impl RoleBasis {
    /// Its name in reports (`waker`, `lock`, `window`, `parked`, `chain`).
    pub fn name(self) -> &'static str {
        match self {
            RoleBasis::Waker => "waker",
            RoleBasis::Lock => "lock",
            RoleBasis::Window => "window",
            RoleBasis::Parked => "parked",
            RoleBasis::Chain => "chain",
        }
    }
}

/// The role of one wait record, how it was told, and who ended its sleeps where known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleOf {
    /// Contention or idle.
    pub role: WaitRole,
    /// How it was told.
    pub basis: RoleBasis,
    /// Nanoseconds of its sleeps by who ended them (the record's own for an `offcpu` sleep; the
    /// `offcpu` probe's futex sleeps at its thread and stack for a futex wait); empty when not
    /// known.
    pub woken_ns: BTreeMap<WokenBy, u64>,
}

/// True for a sleep in disk or file I/O: a file system call, or `io_schedule` (how the kernel
/// waits for block I/O and page locks) on its kernel stack.
fn is_io_sleep(profile: &Profile, record: &WaitRecord) -> bool {
    offcpu_call(record).is_some_and(|call| FILE_IO_CALLS.contains(&call))
        || profile
            .stack(record.kernel_stack)
            .is_some_and(has_io_schedule)
}

/// True for the records [`wait_roles`] tells apart: waits for something (locks, condvars,
/// semaphores, joins, futex words, kernel locks) and sleeps off the CPU, but not the intervals of
/// threads waiting for a CPU (`run-queue`, `preempted`), sleeps with neither a system call nor a
/// stack (one already going on when the recording began), hold times, system-call durations,
/// lifecycle events or samples.
pub fn is_role_candidate(record: &WaitRecord) -> bool {
    let waits = record.kind.is_wait();
    // A sleep with neither a system call nor a stack says nothing of what it waited for: the
    // offcpu probe's record of a sleep already going on when the recording began.
    let unknown = record.operation == offcpu_operation::SLEEPING
        && record.user_stack.is_none()
        && record.kernel_stack.is_none();
    waits && !unknown && !offcpu_operation::is_cpu_wait(&record.operation)
}

/// The role of each record of `profile.waits` (by index; `None`: neither, or not a wait this
/// tells apart, or a sleep another probe's record counts: [`SeenTwice`]):
///
/// 1. a mutex, rwlock or kernel-lock wait is contention ([`RoleBasis::Lock`]);
/// 2. else, where who ended its sleeps is known ([`RoleBasis::Waker`]): contention when threads
///    of the program ended at least half of that time, else idle, unless it is disk or file I/O
///    (a file system call, `io_schedule` on its kernel stack), which is neither; but a site with
///    one sleep through at least [`IDLE_SHARE`] of the recording is idle whoever ended it
///    ([`RoleBasis::Parked`]: a pool parked for the recording and released at its end, a
///    supervisor woken when a child exits);
/// 3. but where the bottleneck analysis followed the time (the `waitfor` probe), where it ended
///    decides ([`RoleBasis::Chain`], after the I/O and parked cases of 2, before the rest): a
///    pool waiting for tasks from threads that wait for their clients is idle, a backend waiting
///    for a lock's holder on a CPU is contention;
/// 4. else (profiles without the `offcpu` probe's wakeups: old ones, futex alone, DTrace) the
///    rule of thumb ([`RoleBasis::Window`]): idle when a thread spent at least [`IDLE_SHARE`] of
///    the recording at one site (probe, kind, operation and user stack) of a kind that
///    [`may_be_idle`]; the rest of those waits is neither (who ended them is not known).
///
/// A mutex, condvar or join is the same whichever probe saw it: the `offcpu` probe's futex
/// sleeps have the kind their user stack says ([`crate::overlap::classify_offcpu_sleeps`]), so
/// a mutex convoy is contention by rule 1 with `futex`, `offcpu` or both.
///
/// Who ended the sleeps is told per thread and site (probe, kind, operation, user stack), so
/// that the few sleeps of a lock wait that a timeout cut short go with the rest: for `offcpu`
/// sleeps, their records' [`WaitRecord::woken_by`] at that site; for a futex wait, the `offcpu`
/// probe's futex sleeps at the same thread and user stack ([`futex_wakers`]). A record's
/// [`RoleOf::woken_ns`] is its own time split that way (an `offcpu` record's own waker when
/// known).
pub fn wait_roles(profile: &Profile) -> Vec<Option<RoleOf>> {
    let sites = RoleSites::of(profile);
    let woken: Vec<BTreeMap<WokenBy, u64>> =
        profile.waits.iter().map(|w| sites.woken_ns(w)).collect();
    let sites = sites.with_parked(&woken);
    profile
        .waits
        .iter()
        .zip(woken)
        .map(|(w, woken_ns)| sites.role_of(w, woken_ns))
        .collect()
}

/// What [`wait_roles`] knows of the candidates' sites (thread, probe, kind, operation, user
/// stack) before it decides each record's role.
struct RoleSites<'a> {
    profile: &'a Profile,
    /// The records seen by two probes: counted once, by the other.
    twice: SeenTwice,
    /// Who ended the sleeps of the futex waits' threads and stacks (the `offcpu` probe's).
    futex: BTreeMap<(u32, u32, Option<StackId>), Wakers>,
    /// Who ended the sleeps at each `offcpu` site, for the records whose wakeup was not seen.
    offcpu: BTreeMap<Site<'a>, Wakers>,
    /// Where the bottleneck analysis's chains ended, per thread and user stack: (contended,
    /// idle) time.
    chains: BTreeMap<(u32, u32, Option<StackId>), (u64, u64)>,
    /// The rule of thumb's sites: time per site of the waits with no waker known.
    parked: BTreeMap<Site<'a>, u64>,
    /// Every candidate site's longest sleep, for the sleeps that lasted the recording.
    longest: BTreeMap<Site<'a>, u64>,
}

impl<'a> RoleSites<'a> {
    /// The wakers of every site and the chains' ends.
    fn of(profile: &'a Profile) -> Self {
        let mut sites = RoleSites {
            profile,
            twice: SeenTwice::of(profile),
            futex: futex_wakers(profile),
            offcpu: BTreeMap::new(),
            chains: chain_ends(profile),
            parked: BTreeMap::new(),
            longest: BTreeMap::new(),
        };
        for w in &profile.waits {
            if w.is_from(&OFFCPU) && sites.candidate(w) {
                let ns = sites
                    .offcpu
                    .entry(site(w))
                    .or_default()
                    .entry(w.woken_by)
                    .or_default();
                *ns = ns.saturating_add(w.stats.total_ns);
            }
        }
        sites
    }

    /// Whether `w` gets a role: a candidate, not counted by another probe.
    fn candidate(&self, w: &WaitRecord) -> bool {
        is_role_candidate(w) && !self.twice.contains(w)
    }

    /// A record's time split by who ended its sleeps.
    fn woken_ns(&self, w: &WaitRecord) -> BTreeMap<WokenBy, u64> {
        let total = w.stats.total_ns;
        match (self.candidate(w), w.is_from(&OFFCPU), w.woken_by) {
            (false, ..) => BTreeMap::new(),
            (true, true, Some(by)) => BTreeMap::from([(by, total)]),
            (true, true, None) => self
                .offcpu
                .get(&site(w))
                .map_or_else(BTreeMap::new, |d| split(total, d)),
            (true, false, _) => self
                .futex
                .get(&(w.pid, w.tid, w.user_stack))
                .map_or_else(BTreeMap::new, |d| split(total, d)),
        }
    }

    /// Adds each site's longest sleep and the time of its waits with no waker known (`woken`:
    /// [`Self::woken_ns`] of every record).
    fn with_parked(mut self, woken: &[BTreeMap<WokenBy, u64>]) -> Self {
        for (w, by) in self.profile.waits.iter().zip(woken) {
            if !self.candidate(w) {
                continue;
            }
            let max = self.longest.entry(site(w)).or_default();
            *max = (*max).max(w.stats.max_ns);
            if by.is_empty() && may_be_idle(w) {
                let ns = self.parked.entry(site(w)).or_default();
                *ns = ns.saturating_add(w.stats.total_ns);
            }
        }
        self
    }

    /// Parked for the recording: `ns` is most of the thread's window, and most of the
    /// recording. A thread that lived only for one wait (a worker waiting on its producer's
    /// signal) waited on that producer, not for work from outside.
    fn holds_window(&self, w: &WaitRecord, ns: u64) -> bool {
        let profile = self.profile;
        let window = profile
            .thread_times
            .iter()
            .find(|t| t.pid == w.pid && t.tid == w.tid)
            .map_or(profile.metadata.duration_ns, |t| t.wall_ns)
            .max(profile.metadata.duration_ns);
        window > 0 && ns as f64 >= IDLE_SHARE * window as f64
    }

    /// The time of `w`'s site whose waker is known, and the part the program's threads ended.
    fn known_and_program(&self, w: &WaitRecord, woken_ns: &BTreeMap<WokenBy, u64>) -> (u64, u64) {
        if w.is_from(&OFFCPU) {
            let site = self.offcpu.get(&site(w));
            let of = |by: Option<WokenBy>| site.and_then(|d| d.get(&by)).copied().unwrap_or(0);
            let known = [WokenBy::Program, WokenBy::Outside, WokenBy::Interrupt]
                .into_iter()
                .map(|by| of(Some(by)))
                .sum::<u64>();
            (known, of(Some(WokenBy::Program)))
        } else {
            (
                woken_ns.values().sum(),
                woken_ns.get(&WokenBy::Program).copied().unwrap_or(0),
            )
        }
    }

    /// The role of one record, by the rules of [`wait_roles`].
    fn role_of(&self, w: &WaitRecord, woken_ns: BTreeMap<WokenBy, u64>) -> Option<RoleOf> {
        if !self.candidate(w) {
            return None;
        }
        // The site decides, not each sleep: a lock wait that a timeout cut short (a
        // deadlock check every second) is still a wait for the lock's holder.
        let (known, program) = self.known_and_program(w, &woken_ns);
        let (role, basis) = if matches!(
            w.kind,
            WaitKind::Mutex | WaitKind::RwlockRead | WaitKind::RwlockWrite | WaitKind::KernelLock
        ) {
            (WaitRole::Contention, RoleBasis::Lock)
        } else if known > 0 {
            let by_program = program.saturating_mul(2) >= known;
            let chained = self
                .chains
                .get(&(w.pid, w.tid, w.user_stack))
                .filter(|&&(c, i)| c + i > 0);
            let parked_once =
                self.holds_window(w, self.longest.get(&site(w)).copied().unwrap_or_default());
            if !by_program && is_io_sleep(self.profile, w) {
                return None;
            } else if parked_once {
                (WaitRole::Idle, RoleBasis::Parked)
            } else if let Some(&(contended, idle)) = chained {
                if idle >= contended {
                    (WaitRole::Idle, RoleBasis::Chain)
                } else {
                    (WaitRole::Contention, RoleBasis::Chain)
                }
            } else if by_program {
                (WaitRole::Contention, RoleBasis::Waker)
            } else {
                (WaitRole::Idle, RoleBasis::Waker)
            }
        } else {
            let at_site = self.parked.get(&site(w)).copied().unwrap_or(0);
            if may_be_idle(w) && self.holds_window(w, at_site) {
                (WaitRole::Idle, RoleBasis::Window)
            } else {
                return None;
            }
        };
        Some(RoleOf {
            role,
            basis,
            woken_ns,
        })
    }
}

/// The role of the sleeps of each thread and user stack (pid, tid, user stack), as
/// [`wait_roles`] tells them (the heaviest record's where records there differ): what
/// `lockscope why` reads so that a sleep the report calls idle is idle there too, and a lock
/// wait the report calls contention has a cause.
pub fn sleep_site_roles(profile: &Profile) -> BTreeMap<(u32, u32, Option<StackId>), RoleOf> {
    let mut out: BTreeMap<(u32, u32, Option<StackId>), (u64, RoleOf)> = BTreeMap::new();
    for (w, role) in profile.waits.iter().zip(wait_roles(profile)) {
        let Some(role) = role else { continue };
        let key = (w.pid, w.tid, w.user_stack);
        match out.get(&key) {
            Some((ns, _)) if *ns >= w.stats.total_ns => {}
            _ => {
                out.insert(key, (w.stats.total_ns, role));
            }
        }
    }
    out.into_iter().map(|(k, (_, role))| (k, role)).collect()
}

/// Where the bottleneck analysis followed the time each (pid, tid, user stack) slept ended, as
/// nanoseconds (contention, idle), by the kind `lockscope why` names its cause
/// ([`crate::bottleneck::cause_kind`]): contention when the chain ends at a thread on a CPU or
/// waiting for one, in a cycle, at the depth limit, in another thread's sleep in disk or file
/// I/O, or in another thread's sleep on purpose (a lock holder's nanosleep); idle when it ends
/// in the thread's own sleep something outside the program ended, or in one further down the
/// chain that was no sleep on purpose (a client), not disk I/O. Time whose end is unknown, and
/// the thread's own disk I/O, count in neither. Empty without the analysis.
fn chain_ends(profile: &Profile) -> BTreeMap<(u32, u32, Option<StackId>), (u64, u64)> {
    use crate::bottleneck::{cause_kind, waited_on_sleeps, CauseKind, WaitPart};
    let mut out: BTreeMap<(u32, u32, Option<StackId>), (u64, u64)> = BTreeMap::new();
    let Some(bottleneck) = &profile.bottleneck else {
        return out;
    };
    let waited_on = waited_on_sleeps(bottleneck);
    for b in bottleneck
        .blame
        .iter()
        .filter(|b| b.part == WaitPart::Asleep)
    {
        // The same kind `lockscope why` names the cause by: a convoy behind a holder that
        // sleeps on purpose (`sleep`) is contention, a chain that ends in a client (`idle`) not.
        let contended = match cause_kind(profile, b, &waited_on) {
            CauseKind::Cpu
            | CauseKind::CpuSaturation
            | CauseKind::Spin
            | CauseKind::WakeupLatency
            | CauseKind::Cycle
            | CauseKind::DepthLimit => true,
            // Another thread's sleep or disk I/O this one waited for: a dependency. The
            // thread's own sleep a timer ended is idle for itself (it is the cause of the
            // others' waits), as where only who ended it is known; its own disk I/O is neither
            // (the rules of `wait_roles` say so).
            CauseKind::Sleep | CauseKind::Io if b.depth > 0 => true,
            CauseKind::Sleep | CauseKind::Idle => false,
            CauseKind::Io | CauseKind::Unknown => continue,
        };
        let entry = out
            .entry((b.thread.pid, b.thread.tid, b.user_stack))
            .or_default();
        if contended {
            entry.0 = entry.0.saturating_add(b.total_ns);
        } else {
            entry.1 = entry.1.saturating_add(b.total_ns);
        }
    }
    out
}

/// True when `stack` waits for block I/O or a page lock (`io_schedule*`,
/// [`crate::kernel_frames::is_io_schedule_frame`]).
fn has_io_schedule(stack: &crate::profile::Stack) -> bool {
    stack.frames.iter().any(|f| {
        f.function
            .as_deref()
            .is_some_and(crate::kernel_frames::is_io_schedule_frame)
    })
}

/// A thread's wait site: (pid, tid, probe, kind, operation, user stack).
type Site<'a> = (u32, u32, &'a str, WaitKind, &'a str, Option<StackId>);

fn site(w: &WaitRecord) -> Site<'_> {
    (
        w.pid,
        w.tid,
        w.probe.as_str(),
        w.kind,
        w.operation.as_str(),
        w.user_stack,
    )
}

/// `total_ns` split in the proportions of `wakers` (the part whose waker is unknown left out).
fn split(total_ns: u64, wakers: &Wakers) -> BTreeMap<WokenBy, u64> {
    let all: u64 = wakers.values().sum();
    if all == 0 {
        return BTreeMap::new();
    }
    wakers
        .iter()
        .filter_map(|(by, &ns)| {
            let part = (total_ns as u128 * ns as u128 / all as u128) as u64;
            Some(((*by)?, part)).filter(|_| part > 0)
        })
        .collect()
}

/// Indexes (into `profile.waits`) of the idle waits ([`wait_roles`]): sleeps something outside
/// the program ended, or without who ended them, a thread parked most of its window at one site
/// that may be idle. What remains of the waits is contention or neither.
pub fn idle_waits(profile: &Profile) -> BTreeSet<usize> {
    wait_roles(profile)
        .iter()
        .enumerate()
        .filter(|(_, r)| r.as_ref().is_some_and(|r| r.role == WaitRole::Idle))
        .map(|(i, _)| i)
        .collect()
}

/// A lock primitive a thread spins in, on a CPU, while another thread holds the lock: its CPU
/// time there is a wait on the lock's holder (contention), not work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpinPrimitive {
    /// `pthread_spin_lock` (glibc's `__pthread_spin_lock`): a user-space lock that never enters
    /// the kernel, so no probe sees who holds it.
    SpinLock,
}

impl SpinPrimitive {
    /// Its name in reports (`spin-lock`).
    pub fn name(self) -> &'static str {
        match self {
            SpinPrimitive::SpinLock => "spin-lock",
        }
    }

    /// The function the thread spun in.
    pub fn function(self) -> &'static str {
        match self {
            SpinPrimitive::SpinLock => "pthread_spin_lock",
        }
    }
}

/// True for glibc's spinlock entry (`pthread_spin_lock`, `__pthread_spin_lock`, `__GI_`
/// aliases).
fn is_spin_lock_frame(name: &str) -> bool {
    let name = name.trim_start_matches('_');
    let name = name
        .strip_prefix("GI_")
        .map_or(name, |n| n.trim_start_matches('_'));
    name == "pthread_spin_lock"
}

/// The spin primitive each record of `profile.waits` spun in (`None` for every record that is
/// no `cpu` probe sample spinning), by the sample's user stack: its innermost frame in
/// `pthread_spin_lock`. Not recognised: glibc's adaptive mutex spin, which is inlined in
/// `___pthread_mutex_lock` with no frame of its own, so a sample there cannot be told from the
/// lock's fast path (which a default mutex, which never spins, shows as well); a program's own
/// spin loops on atomics (no frame names them). docs/BOTTLENECK.md says so.
pub fn spin_samples(profile: &Profile) -> Vec<Option<SpinPrimitive>> {
    profile
        .waits
        .iter()
        .map(|w| {
            if w.kind != WaitKind::OnCpu || w.probe != crate::catalog::CPU.name {
                return None;
            }
            let leaf = profile
                .stack(w.user_stack)?
                .frames
                .first()?
                .names_outermost_first()
                .pop()?;
            is_spin_lock_frame(&leaf).then_some(SpinPrimitive::SpinLock)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Class names round-trip through serde as the names the reports print, also as map keys.
    #[test]
    fn class_names_match_serde() {
        for class in TimeClass::ALL {
            let json = serde_json::to_string(&class).expect("serialize");
            assert_eq!(json, format!("\"{}\"", class.name()));
        }
        let mut time = ThreadTime::default();
        time.time_ns.insert(TimeClass::OnCpu, 5);
        time.time_ns.insert(TimeClass::RunQueue, 7);
        let json = serde_json::to_string(&time).expect("serialize");
        assert!(json.contains("\"on-cpu\":5"), "{json}");
        let back: ThreadTime = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, time);
        assert_eq!(back.accounted_ns(), 12);
    }

    fn wait(tid: u32, kind: WaitKind, operation: &str, total_ns: u64) -> WaitRecord {
        WaitRecord {
            probe: if kind == WaitKind::OffCpu {
                "offcpu".into()
            } else {
                "futex".into()
            },
            kind,
            pid: 1,
            tid,
            object: 0,
            operation: operation.into(),
            user_stack: None,
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

    /// `record` as `count` sleeps of equal length.
    fn times(mut record: WaitRecord, count: u64) -> WaitRecord {
        record.stats.count = count;
        record.stats.max_ns = record.stats.total_ns / count;
        record
    }

    /// A `cpu` probe sample whose leaf is glibc's spinlock is a spin; one in
    /// `pthread_mutex_lock` (its adaptive spin has no frame of its own), elsewhere, or a futex
    /// wait, is not.
    #[test]
    fn spin_samples_by_their_leaf() {
        use crate::profile::{AddressSpace, Stack};
        let mut profile = Profile {
            stacks: vec![
                Stack::named(
                    AddressSpace::User,
                    &["__pthread_spin_lock", "take_spin", "run"],
                ),
                Stack::named(
                    AddressSpace::User,
                    &["___pthread_mutex_lock", "take_order", "run"],
                ),
                Stack::named(AddressSpace::User, &["checksum", "run"]),
            ],
            ..Profile::default()
        };
        let sample = |stack: u32| {
            let mut w = wait(2, WaitKind::OnCpu, "sample", 10);
            w.probe = "cpu".into();
            w.user_stack = Some(stack);
            w
        };
        let mut futex = wait(3, WaitKind::Mutex, "FUTEX_WAIT_PRIVATE", 100);
        futex.user_stack = Some(0);
        profile.waits = vec![sample(0), sample(1), sample(2), futex];
        assert_eq!(
            spin_samples(&profile),
            [Some(SpinPrimitive::SpinLock), None, None, None]
        );
    }

    /// A pool thread parked in one condvar site for most of the window is idle; a mutex wait,
    /// however long, and a short condvar wait are not.
    #[test]
    fn idle_sites() {
        let mut profile = Profile::default();
        profile.metadata.duration_ns = 1000;
        profile.waits = vec![
            wait(2, WaitKind::Condvar, "FUTEX_WAIT_PRIVATE", 900),
            wait(3, WaitKind::Mutex, "FUTEX_WAIT_PRIVATE", 900),
            wait(4, WaitKind::Condvar, "FUTEX_WAIT_PRIVATE", 100),
            wait(5, WaitKind::OffCpu, "sleeping in epoll_wait", 800),
            wait(6, WaitKind::OffCpu, "sleeping in futex", 800),
        ];
        assert_eq!(idle_waits(&profile), BTreeSet::from([0, 3]));
    }

    fn woken(mut record: WaitRecord, by: Option<WokenBy>) -> WaitRecord {
        record.woken_by = by;
        record
    }

    /// Where the profile says who ended a sleep, that decides, per thread and site: a latch in
    /// epoll_wait set by another thread of the program is contention however long the thread
    /// sat there (and so is its sleep a timeout cut short), one a client or a timer ended is
    /// idle (and so is the sleep of that site a thread of the program ended), a condvar wait takes the waker of the offcpu futex
    /// sleeps at its stack (which count once, as the futex wait), a disk wait is neither, and
    /// an offcpu sleep whose wakeup was not seen takes its site's; a mutex wait is contention.
    #[test]
    fn roles_by_waker() {
        use WokenBy::*;
        let mut profile = Profile::default();
        profile.metadata.duration_ns = 1000;
        let mut fsync = woken(
            wait(7, WaitKind::OffCpu, "sleeping in fsync", 500),
            Some(Interrupt),
        );
        fsync.user_stack = Some(9);
        let unseen = wait(2, WaitKind::OffCpu, "sleeping in epoll_wait", 10);
        let mut condvar = times(wait(3, WaitKind::Condvar, "FUTEX_WAIT_PRIVATE", 600), 2);
        condvar.user_stack = Some(4);
        let mut condvar_sleep = woken(
            wait(3, WaitKind::OffCpu, "sleeping in futex", 590),
            Some(Program),
        );
        condvar_sleep.user_stack = Some(4);
        profile.waits = vec![
            times(
                woken(
                    wait(2, WaitKind::OffCpu, "sleeping in epoll_wait", 800),
                    Some(Program),
                ),
                8,
            ),
            woken(
                wait(2, WaitKind::OffCpu, "sleeping in epoll_wait", 20),
                Some(Interrupt),
            ),
            unseen,
            woken(
                wait(5, WaitKind::OffCpu, "sleeping in poll", 100),
                Some(Outside),
            ),
            woken(
                wait(5, WaitKind::OffCpu, "sleeping in poll", 30),
                Some(Program),
            ),
            condvar,
            condvar_sleep,
            fsync,
            wait(8, WaitKind::Mutex, "FUTEX_WAIT_PRIVATE", 5),
            woken(
                wait(9, WaitKind::OffCpu, "sleeping in poll", 900),
                Some(Program),
            ),
        ];
        let roles: Vec<Option<(WaitRole, RoleBasis)>> = wait_roles(&profile)
            .into_iter()
            .map(|r| r.map(|r| (r.role, r.basis)))
            .collect();
        use RoleBasis::*;
        use WaitRole::*;
        assert_eq!(
            roles,
            [
                Some((Contention, Waker)),
                Some((Contention, Waker)),
                Some((Contention, Waker)),
                Some((Idle, Waker)),
                Some((Idle, Waker)),
                Some((Contention, Waker)),
                None,
                None,
                Some((Contention, Lock)),
                Some((Idle, Parked)),
            ]
        );
        let condvar = wait_roles(&profile)[5].clone().expect("a role");
        assert_eq!(condvar.woken_ns, BTreeMap::from([(Program, 600)]));
        assert_eq!(idle_waits(&profile), BTreeSet::from([3, 4, 9]));
    }

    /// One answer whichever probe saw the sleeps: a mutex convoy of threads that lived for
    /// their one wait is contention with `futex` alone and with `offcpu` alone (its futex sleeps
    /// take their stack's kind); a worker that lived for one condvar wait its producer ended is
    /// contention, not parked; a pool parked through most of the recording is idle.
    #[test]
    fn roles_agree_across_probes() {
        use crate::profile::{AddressSpace, Stack};
        let user = |functions: &[&str]| Stack::named(AddressSpace::User, functions);
        let lived = |tid: u32, wall_ns: u64| ThreadTime {
            pid: 1,
            tid,
            wall_ns,
            ..ThreadTime::default()
        };
        let at = |stack: u32, r: WaitRecord| WaitRecord {
            user_stack: Some(stack),
            ..r
        };
        let stacks = vec![
            user(&[
                "__GI___lll_lock_wait",
                "___pthread_mutex_lock",
                "take_order_lock",
            ]),
            user(&["___pthread_cond_wait", "wait_for_signal"]),
        ];
        let roles = |profile: &Profile| -> Vec<Option<(WaitRole, RoleBasis)>> {
            wait_roles(profile)
                .into_iter()
                .map(|r| r.map(|r| (r.role, r.basis)))
                .collect()
        };
        let futex_only = Profile {
            stacks: stacks.clone(),
            waits: vec![at(0, wait(2, WaitKind::Mutex, "FUTEX_WAIT_PRIVATE", 200))],
            metadata: crate::profile::Metadata {
                duration_ns: 1000,
                ..Default::default()
            },
            ..Profile::default()
        };
        let mut offcpu_only = Profile {
            stacks,
            waits: vec![
                at(
                    0,
                    woken(
                        wait(2, WaitKind::OffCpu, "sleeping in futex", 200),
                        Some(WokenBy::Program),
                    ),
                ),
                at(
                    1,
                    woken(
                        wait(3, WaitKind::OffCpu, "sleeping in futex", 300),
                        Some(WokenBy::Program),
                    ),
                ),
                at(
                    1,
                    woken(
                        wait(4, WaitKind::OffCpu, "sleeping in futex", 900),
                        Some(WokenBy::Program),
                    ),
                ),
            ],
            thread_times: vec![lived(2, 210), lived(3, 310), lived(4, 1000)],
            ..futex_only.clone()
        };
        crate::overlap::classify_offcpu_sleeps(&mut offcpu_only);
        use RoleBasis::*;
        use WaitRole::*;
        assert_eq!(roles(&futex_only), [Some((Contention, Lock))]);
        assert_eq!(
            roles(&offcpu_only),
            [
                Some((Contention, Lock)),
                Some((Contention, Waker)),
                Some((Idle, Parked))
            ]
        );
    }

    /// With the bottleneck analysis, where the time ended decides: a pool's sleeps ended by a
    /// thread that was itself waiting for a client are idle; a backend's sleeps ended by a lock
    /// holder on a CPU are contention, and so are sleeps whose chain ends in disk I/O.
    #[test]
    fn roles_by_chain() {
        use crate::bottleneck::{Blame, BottleneckAnalysis, Root, RootKind, ThreadRef, WaitPart};
        let blame = |tid: u32, kind: RootKind, call: Option<&str>, woken_by, ns: u64| Blame {
            thread: ThreadRef { pid: 1, tid },
            part: WaitPart::Asleep,
            call: Some("epoll_wait".into()),
            object: 0,
            user_stack: Some(1),
            kernel_stack: None,
            woken_by: Some(WokenBy::Program),
            waker: Some(ThreadRef { pid: 1, tid: 9 }),
            root: Root {
                kind,
                thread: ThreadRef { pid: 1, tid: 9 },
                call: call.map(str::to_string),
                user_stack: None,
                kernel_stack: None,
                woken_by,
                waker_name: None,
                holder: None,
                holder_name: None,
            },
            depth: 1,
            chain: Vec::new(),
            waits: 1,
            total_ns: ns,
        };
        let site = |tid: u32| {
            let mut w = woken(
                wait(tid, WaitKind::OffCpu, "sleeping in epoll_wait", 400),
                Some(WokenBy::Program),
            );
            w.user_stack = Some(1);
            w.stats.count = 4;
            w
        };
        let mut profile = Profile::default();
        profile.metadata.duration_ns = 1000;
        profile.waits = vec![site(2), site(3), site(4)];
        profile.bottleneck = Some(BottleneckAnalysis {
            blame: vec![
                blame(
                    2,
                    RootKind::Blocked,
                    Some("recvfrom"),
                    Some(WokenBy::Outside),
                    300,
                ),
                blame(2, RootKind::Cpu, None, None, 100),
                blame(3, RootKind::Cpu, None, None, 250),
                blame(
                    3,
                    RootKind::Blocked,
                    Some("poll"),
                    Some(WokenBy::Interrupt),
                    150,
                ),
                blame(
                    4,
                    RootKind::Blocked,
                    Some("fdatasync"),
                    Some(WokenBy::Interrupt),
                    400,
                ),
            ],
            ..BottleneckAnalysis::default()
        });
        let roles: Vec<Option<(WaitRole, RoleBasis)>> = wait_roles(&profile)
            .into_iter()
            .map(|r| r.map(|r| (r.role, r.basis)))
            .collect();
        assert_eq!(
            roles,
            [
                Some((WaitRole::Idle, RoleBasis::Chain)),
                Some((WaitRole::Contention, RoleBasis::Chain)),
                Some((WaitRole::Contention, RoleBasis::Chain)),
            ]
        );
    }
}
