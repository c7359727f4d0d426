//! The one step that turns what the probes drained ([`Drained`]) into the records, threads,
//! stacks, per-thread times and wakeups of a profile: every stack is read from the shared stack
//! maps once, symbolized once and interned in one [`StackInterner`], whichever probe captured
//! it, so identical stacks are stored once. Records of probes that ask for it are classified by
//! their user stacks (mutex, condvar, rwlock...), and each thread's futex time is split into
//! lock, condvar and other futex time in the proportions of its classified futex sleeps.

use crate::error::Error;
use crate::probe::Drained;
use crate::probe::{DrainedBottleneck, RawRecord, RawThreadTime, RawWakeup, StackMapId};
use crate::procmaps::MapsCache;
use crate::shared::{KernelStack, SharedMaps, UnwoundStack};
use crate::symbolize::{user_stack_complete, StackSymbolizer};
use crate::syscalls::syscall_name;
use lockscope_probes::bottleneck::{Blame, BottleneckAnalysis, Hop, Root, SampledCpu};
use lockscope_probes::kernel_frames::is_interrupt_frame;
use lockscope_probes::{
    AddressSpace, Stack, StackId, StackInterner, ThreadInfo, ThreadTime, TimeClass, WaitKind,
    WaitRecord, WakeupRecord,
};
use std::collections::{BTreeMap, HashMap};

/// Waker name of the wakeups done from interrupt context (timers, I/O completion).
const INTERRUPT_WAKER: &str = "[interrupt]";

/// Where the stack ids of drained records lead: the shared stack maps (a fake in tests).
pub(crate) trait StackSource {
    /// User stack `id` as the BPF unwinder stored it.
    fn user_stack(&self, id: i32) -> Result<Option<UnwoundStack>, Error>;
    /// Kernel stack `id`.
    fn kernel_stack(&self, id: i32) -> Result<Option<KernelStack>, Error>;
}

impl StackSource for SharedMaps {
    fn user_stack(&self, id: i32) -> Result<Option<UnwoundStack>, Error> {
        SharedMaps::user_stack(self, id)
    }

    fn kernel_stack(&self, id: i32) -> Result<Option<KernelStack>, Error> {
        SharedMaps::kernel_stack(self, id)
    }
}

/// What [`resolve`] makes of [`Drained`]: records, threads and stacks of a profile.
#[derive(Default)]
pub(crate) struct Resolved {
    pub waits: Vec<WaitRecord>,
    pub threads: Vec<ThreadInfo>,
    pub stacks: Vec<Stack>,
    pub thread_times: Vec<ThreadTime>,
    pub wakeups: Vec<WakeupRecord>,
    pub bottleneck: Option<BottleneckAnalysis>,
    /// Files whose symbols could not be read, with why (their frames are addresses).
    pub symbol_failures: Vec<String>,
}

/// An interned user stack and its function names, leaf first (for classification).
type UserStack = Option<(StackId, Vec<String>)>;

/// What resolving remembers from one call to the next: the symbolizer (what it read of the
/// files), the stacks interned so far, whose ids then stay the same from call to call, and what
/// each stack map id resolved to (the maps never replace an id's stack during a recording). A
/// live view's snapshots so read and symbolize each stack once, not once a second.
#[derive(Default)]
pub(crate) struct ResolveCache {
    symbolizer: StackSymbolizer,
    interner: StackInterner,
    user: HashMap<(u32, i32), UserStack>,
    kernel: HashMap<i32, Option<StackId>>,
    kernel_names: HashMap<StackId, Vec<String>>,
    /// Stacks [`ResolveCache::new_stacks`] already gave.
    given: usize,
}

impl ResolveCache {
    /// The stacks interned since the last call, in id order (the first has id `given`).
    pub(crate) fn new_stacks(&mut self) -> (usize, Vec<Stack>) {
        let from = self.given;
        let new = self.interner.stacks()[from..].to_vec();
        self.given += new.len();
        (from, new)
    }

    /// Every stack interned so far, in id order.
    pub(crate) fn stacks(&self) -> Vec<Stack> {
        self.interner.stacks().to_vec()
    }
}

/// Symbolizes and interns stacks, remembering what it already did.
struct Resolver<'a> {
    stacks: &'a dyn StackSource,
    maps: &'a MapsCache,
    cache: &'a mut ResolveCache,
}

impl Resolver<'_> {
    /// Function names of an interned kernel stack, leaf first.
    fn kernel_names(&self, id: StackId) -> Option<&[String]> {
        self.cache.kernel_names.get(&id).map(Vec::as_slice)
    }

    /// User stack `id` of process `pid`, symbolized with the process's maps snapshots.
    fn user(&mut self, pid: u32, id: i32) -> Result<UserStack, Error> {
        if id < 0 {
            return Ok(None);
        }
        if let Some(known) = self.cache.user.get(&(pid, id)) {
            return Ok(known.clone());
        }
        let resolved = match self.stacks.user_stack(id)? {
            Some(stack) if !stack.pcs.is_empty() => {
                let frames = self
                    .cache
                    .symbolizer
                    .user_frames(self.maps, pid, &stack.pcs);
                // A walk that reached an outermost-frame rule is complete; one that relied on
                // frame pointers must also end in a known entry point.
                let truncated =
                    stack.truncated || (stack.used_frame_pointers && !user_stack_complete(&frames));
                let names = frames
                    .iter()
                    .flat_map(|f| {
                        let mut names = f.names_outermost_first();
                        names.reverse();
                        names
                    })
                    .collect();
                (!frames.is_empty()).then(|| {
                    let id = self.cache.interner.intern(Stack {
                        space: AddressSpace::User,
                        frames,
                        truncated,
                    });
                    (id, names)
                })
            }
            _ => None,
        };
        self.cache.user.insert((pid, id), resolved.clone());
        Ok(resolved)
    }

    /// Kernel stack `id`, symbolized with kallsyms.
    fn kernel(&mut self, id: i32) -> Result<Option<StackId>, Error> {
        if id < 0 {
            return Ok(None);
        }
        if let Some(&known) = self.cache.kernel.get(&id) {
            return Ok(known);
        }
        let resolved = match self.stacks.kernel_stack(id)? {
            Some(stack) => {
                let frames = self.cache.symbolizer.kernel_frames(&stack.addresses);
                let names: Vec<String> = frames.iter().map(|f| f.display_name()).collect();
                let resolved = (!frames.is_empty()).then(|| {
                    self.cache.interner.intern(Stack {
                        space: AddressSpace::Kernel,
                        frames,
                        truncated: stack.truncated,
                    })
                });
                if let Some(id) = resolved {
                    self.cache.kernel_names.insert(id, names);
                }
                resolved
            }
            None => None,
        };
        self.cache.kernel.insert(id, resolved);
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
    stacks: &dyn StackSource,
    maps: &MapsCache,
) -> Result<Resolved, Error> {
    let mut cache = ResolveCache::default();
    let mut resolved = resolve_cached(drained, stacks, maps, &mut cache)?;
    resolved.stacks = cache.interner.into_stacks();
    Ok(resolved)
}

/// [`resolve`] with what `cache` remembers of earlier calls (a live view's snapshots resolve
/// the same stacks again and again); the stacks are left in `cache` ([`Resolved::stacks`] is
/// empty), their ids the same from call to call.
pub(crate) fn resolve_cached(
    drained: Drained,
    stacks: &dyn StackSource,
    maps: &MapsCache,
    cache: &mut ResolveCache,
) -> Result<Resolved, Error> {
    let mut resolver = Resolver {
        stacks,
        maps,
        cache,
    };
    let ResolvedWaits {
        waits,
        names,
        futex_split,
    } = resolve_waits(drained.records, &mut resolver)?;
    let wakeups = resolve_wakeups(drained.wakeups, &mut resolver)?;
    let (threads, mut thread_times) =
        resolve_thread_times(drained.threads, names, &futex_split, &mut resolver)?;
    thread_times.sort_by_key(|t| (t.pid, t.tid));
    let bottleneck = drained
        .bottleneck
        .map(|w| resolve_bottleneck(w, &mut resolver))
        .transpose()?;
    Ok(Resolved {
        waits,
        threads: threads
            .into_iter()
            .map(|((pid, tid), name)| ThreadInfo { pid, tid, name })
            .collect(),
        symbol_failures: resolver.cache.symbolizer.failures().to_vec(),
        stacks: Vec::new(),
        thread_times,
        wakeups,
        bottleneck,
    })
}

/// A thread: (pid, tid).
type Thread = (u32, u32);

/// The wait records resolved, with what the thread times need of them.
struct ResolvedWaits {
    waits: Vec<WaitRecord>,
    /// Per thread, the time its records hold under each name they were first seen with.
    names: BTreeMap<Thread, BTreeMap<String, u64>>,
    /// Per thread: futex sleep time by class.
    futex_split: HashMap<Thread, BTreeMap<TimeClass, u64>>,
}

/// The records with their stacks interned and their kinds told by their user stacks.
fn resolve_waits(
    records: Vec<RawRecord>,
    resolver: &mut Resolver<'_>,
) -> Result<ResolvedWaits, Error> {
    // Per thread, the time its records hold under each name they were first seen with. A thread
    // runs under its creator's name until it names itself, and a record first seen in those
    // moments (a CPU sample of its start, under emulation) must not name it.
    let mut names: BTreeMap<(u32, u32), BTreeMap<String, u64>> = BTreeMap::new();
    // Per thread: futex sleep time by class.
    let mut futex_split: HashMap<(u32, u32), BTreeMap<TimeClass, u64>> = HashMap::new();
    let mut waits = Vec::new();
    for r in records {
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
        let kind = match (&user, r.classify) {
            (Some((_, names)), true) => {
                WaitKind::classify_user_wait(names.iter().map(String::as_str), r.kind)
            }
            _ => r.kind,
        };
        *names
            .entry((r.pid, r.tid))
            .or_default()
            .entry(r.comm)
            .or_insert(0) += r.stats.total_ns;
        waits.push(WaitRecord {
            probe: r.probe.to_owned(),
            kind,
            pid: r.pid,
            tid: r.tid,
            object: r.object,
            operation: r.operation,
            user_stack: user.map(|(id, _)| id),
            kernel_stack: kernel,
            woken_by: r.woken_by,
            stats: r.stats,
        });
    }
    Ok(ResolvedWaits {
        waits,
        names,
        futex_split,
    })
}

/// The wakeups with their stacks interned, an interrupt's waker named as one.
fn resolve_wakeups(
    raw: Vec<RawWakeup>,
    resolver: &mut Resolver<'_>,
) -> Result<Vec<WakeupRecord>, Error> {
    let mut wakeups = Vec::new();
    for mut w in raw {
        let waker_kernel = resolver.kernel(w.waker_kernel_stack_id)?;
        // The probe tells interrupt context itself (waker 0); older recordings' wakers only by
        // the handler's frames.
        if (w.waker_pid == 0 && w.waker_tid == 0)
            || waker_kernel
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
    Ok(wakeups)
}

/// Each thread's name and its time, its futex time split as its classified sleeps were.
fn resolve_thread_times(
    raw: Vec<RawThreadTime>,
    names: BTreeMap<Thread, BTreeMap<String, u64>>,
    futex_split: &HashMap<Thread, BTreeMap<TimeClass, u64>>,
    resolver: &mut Resolver<'_>,
) -> Result<(BTreeMap<Thread, String>, Vec<ThreadTime>), Error> {
    let mut threads: BTreeMap<(u32, u32), String> = names
        .into_iter()
        .filter_map(|(thread, by_name)| Some((thread, most_time_name(by_name)?)))
        .collect();
    let mut thread_times = Vec::new();
    for RawThreadTime {
        name,
        open_futex_sleep,
        mut time,
    } in raw
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
    Ok((threads, thread_times))
}

/// Of the names a thread's records were seen with, the one holding the most of their time (the
/// first in order on a tie).
fn most_time_name(by_name: BTreeMap<String, u64>) -> Option<String> {
    by_name
        .into_iter()
        .rev()
        .max_by_key(|(_, ns)| *ns)
        .map(|(name, _)| name)
}

/// The bottleneck engine's blame with its stacks symbolized and interned and its calls named.
fn resolve_bottleneck(
    drained: DrainedBottleneck,
    resolver: &mut Resolver<'_>,
) -> Result<BottleneckAnalysis, Error> {
    let call = |nr: i32| (nr >= 0).then(|| syscall_name(nr));
    let mut blame = Vec::with_capacity(drained.blame.len());
    for b in drained.blame {
        let mut chain = Vec::with_capacity(b.chain.len());
        for (thread, stack) in b.chain {
            chain.push(Hop {
                thread,
                user_stack: resolver
                    .user(thread.pid, StackMapId::raw(stack))?
                    .map(|(id, _)| id),
            });
        }
        let (wait, root) = (&b.wait, &b.root);
        blame.push(Blame {
            thread: wait.thread,
            part: wait.part,
            call: call(wait.call),
            object: wait.object,
            user_stack: resolver
                .user(wait.thread.pid, StackMapId::raw(wait.user_stack))?
                .map(|(id, _)| id),
            kernel_stack: resolver.kernel(StackMapId::raw(wait.kernel_stack))?,
            woken_by: wait.woken_by,
            waker: wait.waker,
            root: Root {
                kind: root.kind,
                thread: root.thread,
                call: call(root.call),
                user_stack: resolver
                    .user(root.thread.pid, StackMapId::raw(root.user_stack))?
                    .map(|(id, _)| id),
                kernel_stack: resolver.kernel(StackMapId::raw(root.kernel_stack))?,
                woken_by: root.woken_by,
                waker_name: b.root.waker_name.clone(),
                holder: root.holder,
                holder_name: b.root.holder_name.clone(),
            },
            depth: b.depth,
            chain,
            waits: b.waits,
            total_ns: b.total_ns,
        });
    }
    blame.sort_by_key(|b| std::cmp::Reverse(b.total_ns));
    let mut sampled = Vec::with_capacity(drained.sampled.len());
    for s in drained.sampled {
        let pid = s.thread.pid;
        sampled.push(SampledCpu {
            role: s.role,
            thread: s.thread,
            end_stack: resolver
                .user(pid, StackMapId::raw(s.end_stack))?
                .map(|(id, _)| id),
            user_stack: resolver.user(pid, StackMapId::raw(s.stack))?.map(|(id, _)| id),
            weight: s.weight,
        });
    }
    sampled.sort_by_key(|s| std::cmp::Reverse(s.weight));
    Ok(BottleneckAnalysis {
        max_depth: drained.limits.max_depth,
        history_ns: drained.limits.history_ns,
        intervals: drained.counts.intervals,
        lost_intervals: drained.counts.lost_intervals,
        spurious_wakeups: drained.counts.spurious_wakeups,
        spurious_wakeup_ns: drained.counts.spurious_wakeup_ns,
        stackless_ns: drained.counts.stackless_ns,
        blame,
        sampled,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{RawRecord, RawWakeup};
    use lockscope_probes::{Log2Histogram, WaitStats};

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

    /// Stack maps holding two ids of one stack (pcs in this test binary), and nothing else.
    struct TwoCopies {
        pcs: Vec<u64>,
    }

    impl StackSource for TwoCopies {
        fn user_stack(&self, id: i32) -> Result<Option<UnwoundStack>, Error> {
            Ok((id == 7 || id == 8).then(|| UnwoundStack {
                pcs: self.pcs.clone(),
                ..UnwoundStack::default()
            }))
        }

        fn kernel_stack(&self, _id: i32) -> Result<Option<KernelStack>, Error> {
            Ok(None)
        }
    }

    fn record(probe: &'static str, tid: u32, user_stack_id: i32) -> RawRecord {
        RawRecord {
            probe,
            kind: WaitKind::Wait,
            classify: probe == "futex",
            pid: std::process::id(),
            tid,
            object: 0,
            operation: "op".into(),
            user_stack_id,
            kernel_stack_id: -1,
            comm: "t".into(),
            woken_by: None,
            stats: WaitStats {
                count: 1,
                total_ns: 10,
                max_ns: 10,
                histogram: Log2Histogram::new(),
            },
            futex_sleep: false,
        }
    }

    /// The same stack captured by two probes (the futex probe's wait and an off-CPU sleep, and
    /// a wakeup's sleeper), even under two ids, is one stack of the profile with one id.
    #[test]
    fn identical_stacks_from_two_probes_share_one_id() {
        let pid = std::process::id();
        let mut maps = MapsCache::new();
        assert!(maps.snapshot(pid), "snapshot of this process");
        let pc = identical_stacks_from_two_probes_share_one_id as *const () as usize as u64 + 1;
        let stacks = TwoCopies { pcs: vec![pc] };
        let drained = Drained {
            records: vec![record("futex", 1, 7), record("offcpu", 2, 8)],
            wakeups: vec![RawWakeup {
                pid,
                tid: 2,
                syscall: None,
                user_stack_id: 7,
                kernel_stack_id: -1,
                waker_pid: pid,
                waker_tid: 1,
                waker_name: "w".into(),
                waker_user_stack_id: -1,
                waker_kernel_stack_id: -1,
                stats: record("offcpu", 2, 7).stats,
            }],
            threads: Vec::new(),
            ..Drained::default()
        };
        let resolved = resolve(drained, &stacks, &maps).expect("resolve");
        assert_eq!(resolved.stacks.len(), 1, "{:?}", resolved.stacks);
        let ids: Vec<_> = resolved.waits.iter().map(|w| w.user_stack).collect();
        assert_eq!(ids, vec![Some(0), Some(0)]);
        assert_eq!(resolved.wakeups[0].user_stack, Some(0));
        assert!(resolved.stacks[0].frames[0]
            .function
            .as_deref()
            .is_some_and(|f| f.contains("identical_stacks_from_two_probes_share_one_id")));
    }

    /// A thread whose first record was taken under its creator's name, before it named itself,
    /// is named by the name holding most of its records' time, whatever the drain order.
    #[test]
    fn a_thread_is_named_by_the_name_of_most_of_its_time() {
        let maps = MapsCache::new();
        let stacks = TwoCopies { pcs: Vec::new() };
        let named = |comm: &str, total_ns: u64| {
            let mut r = record("cpu", 3, -1);
            r.comm = comm.into();
            r.stats.total_ns = total_ns;
            r
        };
        for records in [
            vec![
                named("lockscope-demo", 10_101_010),
                named("spinner", 353_000_000),
            ],
            vec![
                named("spinner", 353_000_000),
                named("lockscope-demo", 10_101_010),
            ],
        ] {
            let drained = Drained {
                records,
                ..Drained::default()
            };
            let resolved = resolve(drained, &stacks, &maps).expect("resolve");
            let names: Vec<&str> = resolved.threads.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(names, ["spinner"]);
        }
    }
}
