//! One cause summed from its records: its time and share, the root threads, the sites of the
//! waits it explains, who held the CPUs or ended the sleeps, what the roots ran (the `cpu`
//! probe's samples, [`Sampled`]), the root's kernel stack and the sleeping kernel lock its time
//! was spent under ([`kernel_lock`]), and one chain that leads there.

use super::model::{Cause, CauseKey, CauseKind, HopRow, KernelLock, NamedTime, Site, StackShare};
use super::select::ThreadNames;
use super::stacks::{place_names, site_frames, stack_names, HOP_FRAMES};
use lockscope_probes::bottleneck::{
    Blame, BottleneckAnalysis, RootKind, SampleRole, ThreadRef, WaitPart, WokenBy,
};
use lockscope_probes::{Profile, StackId, WaitKind};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Stacks listed in a cause's `ran_at` and `ended_at`.
const MAX_STACK_SHARES: usize = 5;

/// Sums `records` of one cause into a [`Cause`].
pub(super) fn cause(
    profile: &Profile,
    names: &ThreadNames,
    sampled: &Sampled,
    key: CauseKey,
    records: &[&Blame],
    wall_ns: u64,
) -> Cause {
    let mut tally = Tally::default();
    for b in records {
        tally.add(profile, names, b);
    }
    let Tally {
        total_ns,
        waits,
        threads,
        holders,
        ended_by,
        sites,
        kernel_stacks,
        release_stacks,
    } = tally;
    let chain = records
        .iter()
        .max_by_key(|b| b.total_ns)
        .map(|b| chain(profile, names, b))
        .unwrap_or_default();
    let (ran_at, ended_at) = ran_and_ended_at(profile, sampled, &key, records);
    // Causes are told apart by the lock their records were spent under (`record_lock`, in
    // `CauseKey::kernel_lock`): all of a cause's time was spent under its key's.
    let kernel_lock =
        key.kernel_lock
            .clone()
            .filter(|_| total_ns > 0)
            .map(|(lock, stack, slept)| KernelLock {
                lock,
                stack,
                slept,
                total_ns,
            });
    Cause {
        rank: 0,
        kind: key.kind.unwrap_or(CauseKind::Unknown),
        stack: shown_stack(profile, &key, records, &ran_at),
        kernel_stack: heaviest_of(&kernel_stacks)
            .map(|(stack, _)| stack)
            .unwrap_or_default(),
        release_stack: heaviest_of(&release_stacks)
            .map(|(stack, _)| stack)
            .unwrap_or_default(),
        kernel_lock,
        call: key.call.clone(),
        share: if wall_ns == 0 {
            0.0
        } else {
            total_ns as f64 / wall_ns as f64
        },
        total_ns,
        waits,
        threads: named_times(threads),
        sites: site_rows(sites),
        holders: named_times(holders),
        ended_by: named_times(ended_by),
        ran_at: stack_shares(ran_at),
        ended_at: if key.kind == Some(CauseKind::Cpu) {
            stack_shares(ended_at)
        } else {
            Vec::new()
        },
        chain,
        key,
    }
}

/// A wait site of a cause: its telling frames, kind, call, object and part.
type SiteKey = (Vec<String>, WaitKind, Option<String>, u64, WaitPart);

/// A kernel lock a cause's time was spent under: its kind, path and who slept on it.
pub(super) type LockKey = (&'static str, Vec<String>, &'static str);

/// The sleeping kernel lock a record's time was spent under: the root's own sleep on one
/// first (a root on a CPU did not sleep: its kernel stack is where it released the waiter);
/// else the waiting thread's, which a thread of the program woke (the lock's holder, at its
/// release), so that the chain went on to it, or, for the wait for a CPU after that sleep, the
/// lock whose release woke it: without the sleep on the lock there would have been no wakeup to
/// wait for a CPU after.
pub(super) fn record_lock(profile: &Profile, b: &Blame) -> Option<LockKey> {
    let root = (b.root.kind != RootKind::Cpu)
        .then(|| kernel_lock(&stack_names(profile, b.root.kernel_stack)))
        .flatten()
        .map(|(lock, path)| (lock, path, "root"));
    root.or_else(|| {
        kernel_lock(&stack_names(profile, b.kernel_stack)).map(|(lock, path)| (lock, path, "waits"))
    })
}

/// The sums over one cause's records, by what each view of the cause lists.
#[derive(Default)]
struct Tally {
    total_ns: u64,
    waits: u64,
    /// Time by root thread (group).
    threads: BTreeMap<String, u64>,
    /// Time by the thread that held the CPU a root waited for.
    holders: BTreeMap<String, u64>,
    /// Time of blocked roots by who ended their sleep.
    ended_by: BTreeMap<String, u64>,
    /// The waiting threads and time of each wait site.
    sites: BTreeMap<SiteKey, (BTreeSet<String>, u64)>,
    /// Time by the root's kernel stack where it slept.
    kernel_stacks: BTreeMap<Vec<String>, u64>,
    /// Time by the kernel stack a root on a CPU released the waiter from.
    release_stacks: BTreeMap<Vec<String>, u64>,
}

impl Tally {
    /// Adds one record.
    fn add(&mut self, profile: &Profile, names: &ThreadNames, b: &Blame) {
        self.total_ns += b.total_ns;
        self.waits += b.waits;
        let root_kernel = stack_names(profile, b.root.kernel_stack);
        // A root on a CPU has the kernel stack of its wakeup that ended its stretch of
        // running: what it was doing at the release, not where it slept.
        if !root_kernel.is_empty() && b.root.kind == RootKind::Cpu {
            *self
                .release_stacks
                .entry(release_frames(root_kernel))
                .or_default() += b.total_ns;
        } else if !root_kernel.is_empty() {
            *self.kernel_stacks.entry(root_kernel).or_default() += b.total_ns;
        }
        *self.threads.entry(names.group(b.root.thread)).or_default() += b.total_ns;
        if let Some(holder) = b.root.holder {
            *self.holders.entry(names.group(holder)).or_default() += b.total_ns;
        }
        if b.root.kind == RootKind::Blocked {
            let by = match (b.root.woken_by, &b.root.waker_name) {
                (Some(WokenBy::Outside), Some(name)) => name.clone(),
                (Some(by), _) => format!("[{by}]"),
                (None, _) => "[no wakeup seen]".to_owned(),
            };
            *self.ended_by.entry(by).or_default() += b.total_ns;
        }
        let stack = stack_names(profile, b.user_stack);
        let kind = if b.call.as_deref().is_some_and(|c| c.starts_with("futex")) {
            WaitKind::classify_user_wait(stack.iter().map(String::as_str), WaitKind::Wait)
        } else {
            WaitKind::OffCpu
        };
        let site = self
            .sites
            .entry((site_frames(&stack), kind, b.call.clone(), b.object, b.part))
            .or_default();
        site.0.insert(names.group(b.thread));
        site.1 += b.total_ns;
    }
}

/// What the roots ran (samples: of the CPUs' holders for run-queue waits, of the roots for
/// `cpu` causes), and where a `cpu` cause's stretches of running ended.
fn ran_and_ended_at(
    profile: &Profile,
    sampled: &Sampled,
    key: &CauseKey,
    records: &[&Blame],
) -> (BTreeMap<Vec<String>, u64>, BTreeMap<Vec<String>, u64>) {
    let mut ran_at: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    let mut ended_at: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    if key.kind == Some(CauseKind::CpuSaturation) {
        let holders: BTreeSet<ThreadRef> = records.iter().filter_map(|b| b.root.holder).collect();
        for holder in holders {
            for (stack, weight) in sampled.of_holder(holder) {
                *ran_at.entry(stack.clone()).or_default() += weight;
            }
        }
    }
    if key.kind == Some(CauseKind::Cpu) {
        let mut seen = BTreeSet::new();
        for b in records {
            *ended_at
                .entry(place_names(profile, b.root.user_stack))
                .or_default() += b.total_ns;
            if seen.insert((b.root.thread, b.root.user_stack)) {
                for (stack, weight) in sampled.of_root(b.root.thread, b.root.user_stack) {
                    *ran_at.entry(stack.clone()).or_default() += weight;
                }
            }
        }
    }
    (ran_at, ended_at)
}

/// The heaviest stacks of `map`, with their shares, at most [`MAX_STACK_SHARES`].
fn stack_shares(map: BTreeMap<Vec<String>, u64>) -> Vec<StackShare> {
    let whole: u64 = map.values().sum();
    let mut rows: Vec<StackShare> = map
        .into_iter()
        .map(|(stack, weight)| StackShare {
            share: crate::render::units::share(weight, whole),
            weight,
            stack,
        })
        .collect();
    rows.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.stack.cmp(&b.stack)));
    rows.truncate(MAX_STACK_SHARES);
    rows
}

/// The wait sites of a cause, heaviest first.
fn site_rows(sites: BTreeMap<SiteKey, (BTreeSet<String>, u64)>) -> Vec<Site> {
    let mut sites: Vec<Site> = sites
        .into_iter()
        .map(
            |((stack, kind, call, object, part), (threads, total_ns))| Site {
                stack,
                kind,
                call,
                object: (object != 0).then(|| format!("{object:#x}")),
                part,
                threads: threads.into_iter().collect(),
                total_ns,
            },
        )
        .collect();
    sites.sort_by_key(|s| std::cmp::Reverse(s.total_ns));
    sites
}

/// The stack a cause is shown at.
fn shown_stack(
    profile: &Profile,
    key: &CauseKey,
    records: &[&Blame],
    ran_at: &BTreeMap<Vec<String>, u64>,
) -> Vec<String> {
    // Waiting for a CPU is known by what held the CPUs, where sampled; a cause grouped by kind
    // alone otherwise shows its heaviest root stack.
    let held_at = (key.kind == Some(CauseKind::CpuSaturation))
        .then(|| {
            ran_at
                .iter()
                .filter(|(stack, _)| !stack.is_empty())
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .map(|(stack, _)| stack.clone())
        })
        .flatten();
    if let Some(held_at) = held_at {
        held_at
    } else if key.stack.is_empty() {
        records
            .iter()
            .max_by_key(|b| b.total_ns)
            .map(|b| place_names(profile, b.root.user_stack))
            .unwrap_or_default()
    } else if key.kind == Some(CauseKind::Cpu) {
        // Keyed from the telling frame up; shown as it ran (where sampled, else where its
        // stretches of running ended), with its heaviest leaf.
        let mut ran: BTreeMap<Vec<String>, u64> = ran_at.clone();
        if ran.is_empty() {
            for b in records {
                *ran.entry(place_names(profile, b.root.user_stack))
                    .or_default() += b.total_ns;
            }
        }
        ran.into_iter()
            .filter(|(stack, _)| stack.ends_with(&key.stack))
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map_or_else(|| key.stack.clone(), |(stack, _)| stack)
    } else {
        key.stack.clone()
    }
}

/// A `cpu` root: its thread and the stack where its stretches of running ended.
type CpuRoot = (ThreadRef, Option<StackId>);

/// The weighted samples of `cpu` roots and of CPU holders: what they ran, by function names.
pub(super) struct Sampled {
    by_root: HashMap<CpuRoot, Vec<(Vec<String>, u64)>>,
    by_holder: HashMap<ThreadRef, Vec<(Vec<String>, u64)>>,
}

impl Sampled {
    pub(super) fn of(profile: &Profile, bottleneck: &BottleneckAnalysis) -> Self {
        let mut by_root: HashMap<CpuRoot, BTreeMap<Vec<String>, u64>> = HashMap::new();
        let mut by_holder: HashMap<ThreadRef, BTreeMap<Vec<String>, u64>> = HashMap::new();
        for s in &bottleneck.sampled {
            let stacks = match s.role {
                SampleRole::Root => by_root.entry((s.thread, s.end_stack)).or_default(),
                SampleRole::Holder => by_holder.entry(s.thread).or_default(),
            };
            *stacks
                .entry(place_names(profile, s.user_stack))
                .or_default() += s.weight;
        }
        fn lists<K: std::hash::Hash + Eq>(
            map: HashMap<K, BTreeMap<Vec<String>, u64>>,
        ) -> HashMap<K, Vec<(Vec<String>, u64)>> {
            map.into_iter()
                .map(|(k, v)| (k, v.into_iter().collect()))
                .collect()
        }
        Sampled {
            by_root: lists(by_root),
            by_holder: lists(by_holder),
        }
    }

    fn of_holder(&self, thread: ThreadRef) -> &[(Vec<String>, u64)] {
        self.by_holder.get(&thread).map_or(&[], Vec::as_slice)
    }

    fn of_root(&self, thread: ThreadRef, end_stack: Option<StackId>) -> &[(Vec<String>, u64)] {
        self.by_root
            .get(&(thread, end_stack))
            .map_or(&[], Vec::as_slice)
    }

    /// The stack the root's samples were at most, in the stretches that ended at `end_stack`.
    pub(super) fn dominant(
        &self,
        thread: ThreadRef,
        end_stack: Option<StackId>,
    ) -> Option<Vec<String>> {
        self.of_root(thread, end_stack)
            .iter()
            .filter(|(stack, _)| !stack.is_empty())
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(stack, _)| stack.clone())
    }
}

/// The sleeping kernel lock a kernel stack (`names`, leaf first) sleeps on, and its path from
/// the lock's slow path out: `("rwsem", ["rwsem_down_read_slowpath", "down_read", ...])`.
pub(super) fn kernel_lock(names: &[String]) -> Option<(&'static str, Vec<String>)> {
    let at = names
        .iter()
        .position(|name| lockscope_probes::kernel_frames::is_kernel_lock_sleep_frame(name))?;
    let name = names[at].as_str();
    let lock = if name.starts_with("rwsem") {
        "rwsem"
    } else if name.starts_with("percpu") {
        "percpu-rwsem"
    } else if name.starts_with("__down") {
        "semaphore"
    } else if name.contains("rt_mutex") || name.starts_with("rtlock") {
        "rt-mutex"
    } else {
        "mutex"
    };
    Some((lock, names[at..].to_vec()))
}

impl KernelLock {
    /// Who took the lock: its path past the slow path and the lock's own entry points
    /// (`down_read`, `down_write_killable`, `mutex_lock_killable`), leaf first
    /// (`lock_mm_and_find_vma`, `do_user_addr_fault`, ...).
    pub fn callers(&self) -> &[String] {
        let past = self
            .stack
            .iter()
            .skip(1)
            .take_while(|f| is_lock_entry(f))
            .count();
        self.stack.get(1 + past..).unwrap_or_default()
    }
}

/// A waker's kernel stack from the release on: past the tracing and the wakeup's own frames
/// (`try_to_wake_up`, `wake_up_q`, `rwsem_wake`, ...), so that it starts where the root let go
/// (`up_write`, `futex_wake`); whole when every frame is one of those.
fn release_frames(stack: Vec<String>) -> Vec<String> {
    let plumbing = |f: &String| {
        // As the kernel names it across builds: `rwsem_wake.isra.0` is `rwsem_wake`.
        let f = f.split('.').next().unwrap_or(f).trim_start_matches('_');
        f.contains("bpf")
            || f.contains("trace")
            || f.contains("wake_up")
            || f.starts_with("ttwu")
            || f.ends_with("_wake")
            || f.starts_with("wake_q")
    };
    match stack.iter().position(|f| !plumbing(f)) {
        Some(first) => stack[first..].to_vec(),
        None => stack,
    }
}

/// Whether a kernel function is a sleeping lock's entry point, which says nothing of who took it.
fn is_lock_entry(function: &str) -> bool {
    [
        "down",
        "_down",
        "__down",
        "mutex_lock",
        "__mutex_lock",
        "rt_mutex_lock",
        "percpu_down",
    ]
    .iter()
    .any(|p| function.starts_with(p))
}

/// The heaviest key of `map` (the first of equals), and its time.
fn heaviest_of<K: Ord + Clone>(map: &BTreeMap<K, u64>) -> Option<(K, u64)> {
    map.iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(k, ns)| (k.clone(), *ns))
}

/// Names and times, heaviest first.
pub(super) fn named_times(map: BTreeMap<String, u64>) -> Vec<NamedTime> {
    let mut rows: Vec<NamedTime> = map
        .into_iter()
        .map(|(name, total_ns)| NamedTime { name, total_ns })
        .collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    rows
}

/// A record's chain as names and short stacks; the root's hop shows the root's stack.
fn chain(profile: &Profile, names: &ThreadNames, b: &Blame) -> Vec<HopRow> {
    let mut hops: Vec<HopRow> = b
        .chain
        .iter()
        .map(|hop| HopRow {
            thread: names.name(hop.thread),
            stack: site_frames(&stack_names(profile, hop.user_stack)),
        })
        .collect();
    let root = HopRow {
        thread: names.name(b.root.thread),
        stack: stack_names(profile, b.root.user_stack)
            .into_iter()
            .take(HOP_FRAMES)
            .collect(),
    };
    match hops.last_mut() {
        Some(last) if b.depth == 0 || last.thread == root.thread => {
            if last.stack.is_empty() {
                last.stack = root.stack;
            }
        }
        _ => hops.push(root),
    }
    hops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(frames: &[&str]) -> Vec<String> {
        frames.iter().map(|f| f.to_string()).collect()
    }

    /// A waker's kernel stack starts at the release: past the tracing and wakeup frames (with
    /// their compiler suffixes); a stack of those alone stays whole.
    #[test]
    fn release_past_the_wakeup() {
        let stack = names(&[
            "bpf_trace_run2",
            "__bpf_trace_sched_wakeup_template",
            "try_to_wake_up",
            "wake_up_q",
            "rwsem_wake.isra.0",
            "up_write",
            "__vm_munmap",
        ]);
        assert_eq!(release_frames(stack), names(&["up_write", "__vm_munmap"]));
        let wakeups = names(&["try_to_wake_up", "wake_up_q"]);
        assert_eq!(release_frames(wakeups.clone()), wakeups);
    }

    /// A kernel stack sleeps on the lock its slow path names (a compiler's `.constprop.0` too),
    /// its path from the slow path out, and who took it past the lock's entry points; a futex
    /// sleep or a stack without a slow path sleeps on no kernel lock.
    #[test]
    fn kernel_locks_by_slow_path() {
        let fault = names(&[
            "__schedule",
            "schedule",
            "rwsem_down_read_slowpath",
            "down_read",
            "lock_mm_and_find_vma",
            "do_user_addr_fault",
        ]);
        let (lock, stack) = kernel_lock(&fault).expect("an rwsem");
        assert_eq!(lock, "rwsem");
        assert_eq!(stack, fault[2..]);
        let lock = KernelLock {
            lock,
            stack,
            slept: "waits",
            total_ns: 1,
        };
        assert_eq!(lock.callers(), &fault[4..]);
        let mutex = names(&[
            "schedule",
            "__mutex_lock.constprop.0",
            "mutex_lock_killable",
            "x",
        ]);
        assert_eq!(kernel_lock(&mutex).map(|l| l.0), Some("mutex"));
        let sem = names(&["schedule", "__down_interruptible", "down_interruptible"]);
        assert_eq!(kernel_lock(&sem).map(|l| l.0), Some("semaphore"));
        let futex = names(&["__schedule", "schedule", "futex_wait_queue", "futex_wait"]);
        assert_eq!(kernel_lock(&futex), None);
        assert_eq!(kernel_lock(&[]), None);
    }
}
