//! `lockscope why BASE OTHER`: the changes in causes between two recordings of one program (two
//! kernels, two concurrency levels, before and after a change), ranked by how much of the
//! difference in the analysed threads' time each explains.
//!
//! Each side is explained by [`Why::build`] (all its causes, idle too); a cause on one side
//! matches the cause on the other with the same kind, canonical stack
//! ([`canonical_place`]: OS-neutral frames, at the leaf alone when the two sides walked their
//! stacks differently, as `lockscope diff` compares sites), call and the sleeping kernel lock its
//! time was spent under (a sleep under `rwsem_down_read_slowpath` is not one in `futex_wait`
//! at the same user stack: one kernel took a lock there, the other did not). The kinds that are one cause
//! per kind (`cpu-saturation`, `wakeup-latency`, `cycle`, `depth-limit`, `unknown`) match by kind
//! alone. A cause most of whose time was spent under a sleeping kernel lock (its waits', or its
//! root's, sleep on it) is part of a `kernel-lock` change instead, one per lock and kernel entry
//! (`rwsem` taken from `exc_page_fault`, [`lock_entry`]; named by its first caller,
//! `lock_mm_and_find_vma`): one kernel takes a lock that another does not, and the time it costs
//! is spread over causes of several kinds (the holder on a CPU, the wakeup's latency, ...),
//! which the change lists as its parts. A cause on one side only is `new` or `gone`. A change is
//! named by its telling frame (the program's own, past the plumbing), with its kernel lock; its
//! `kernel_stack` is the root's kernel stack on the side where it weighs more, or else the path
//! of its kernel lock (for `kernel-lock`, always the lock's path), and its `release_stack` where
//! the holder released the waiters in the kernel.
//!
//! **The basis** ([`Basis`]) makes the two sides comparable:
//! - per analysed thread-second (the default): a cause's share of the analysed threads' wall
//!   time. Shares sum to one on each side (causes, idle, the threads' own CPU time, what was not
//!   analysed), so without a measure of the work done nothing is "more": time moves between
//!   parts, and a change's `explains` is its part of the time that moved (the sum of every
//!   part's growth);
//! - per second of recording (`--per-sec`): nanoseconds per second, the threads in the cause on
//!   average; `explains` as above, of the time that moved;
//! - per operation (`--per-op N_BASE,N_OTHER`): nanoseconds of the analysed threads' time per
//!   unit of work. The difference is then real (each operation costs this much more thread time)
//!   and each part's delta sums to it: `explains` is the change's part of that net difference.
//!
//! One [`WhyDiff`] value renders as text ([`WhyDiff::to_text`], in `compare_text`) and JSON
//! (`docs/WHY-JSON.md`, schema `lockscope-why-diff`, version [`WHY_DIFF_JSON_VERSION`]).

use super::model::{Cause, CauseKind, KernelLock, NamedTime, Site};
use super::{Why, WhyError, WhyOptions};
use crate::analysis::canonical::{canonical_place, site_depth, SiteDepth};
use crate::diff::{mismatches, DiffOptions, Normalization};
use lockscope_probes::Profile;
use serde::Serialize;
use std::collections::BTreeMap;
use thiserror::Error;

/// Version of the comparison's JSON schema (`docs/WHY-JSON.md`); bumped on incompatible changes.
pub const WHY_DIFF_JSON_VERSION: u32 = 1;

/// Why two recordings could not be compared.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WhyDiffError {
    /// One side could not be explained (no bottleneck analysis, no matching thread).
    #[error("`{path}` ({side}): {error}")]
    Side {
        /// `base` or `other`.
        side: &'static str,
        /// The profile file as given.
        path: String,
        /// What `why` said of it.
        error: WhyError,
    },
    /// Per-operation basis with a count of 0.
    #[error("invalid operation counts {ops_base},{ops_other}: both must be at least 1")]
    InvalidOperationCounts {
        /// Operations of the base recording.
        ops_base: u64,
        /// Operations of the other recording.
        ops_other: u64,
    },
}

/// What the two sides' times are compared per.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Basis {
    /// Per second of the analysed threads' wall time: shares (the default).
    #[default]
    PerThreadSecond,
    /// Per second of each recording.
    PerSecond,
    /// Per operation, given each side's number of operations.
    PerOperation {
        /// Operations done during the base recording (at least 1).
        ops_base: u64,
        /// Operations done during the other recording (at least 1).
        ops_other: u64,
    },
}

impl Basis {
    /// Its name in the JSON (`per-thread-second`, `per-second`, `per-operation`).
    pub fn name(self) -> &'static str {
        match self {
            Basis::PerThreadSecond => "per-thread-second",
            Basis::PerSecond => "per-second",
            Basis::PerOperation { .. } => "per-operation",
        }
    }

    /// The unit of a normalized value: `share` (a fraction of the threads' time), `ns/s`,
    /// `ns/op`.
    pub fn unit(self) -> &'static str {
        match self {
            Basis::PerThreadSecond => "share",
            Basis::PerSecond => "ns/s",
            Basis::PerOperation { .. } => "ns/op",
        }
    }

    /// Whether the parts' deltas sum to a real difference (per operation), rather than to the
    /// time that moved between parts.
    fn is_net(self) -> bool {
        matches!(self, Basis::PerOperation { .. })
    }

    /// What `ns` of a side's threads' time is on this basis.
    fn normalize(self, ns: u64, side: &SideSummary, first: bool) -> f64 {
        let divisor = match self {
            Basis::PerThreadSecond => side.wall_ns as f64,
            Basis::PerSecond => side.duration_ns as f64 / 1e9,
            Basis::PerOperation {
                ops_base,
                ops_other,
            } => {
                if first {
                    ops_base as f64
                } else {
                    ops_other as f64
                }
            }
        };
        if divisor > 0.0 {
            ns as f64 / divisor
        } else {
            0.0
        }
    }

    /// The same basis as `lockscope diff`'s normalization, for its warnings.
    fn as_normalization(self) -> Normalization {
        match self {
            Basis::PerOperation {
                ops_base,
                ops_other,
            } => Normalization::PerOperation {
                ops_a: ops_base,
                ops_b: ops_other,
            },
            _ => Normalization::PerSecond,
        }
    }
}

/// How to compare two recordings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WhyDiffOptions {
    /// Which threads and waits each side's `why` analyses (`threads`, `site`); its `top` and
    /// `json` are ignored. Default: [`WhyOptions::default`].
    pub why: WhyOptions,
    /// What times are compared per. Default: [`Basis::PerThreadSecond`].
    pub basis: Basis,
    /// Changes listed, largest first; `0` lists all. Default: 10.
    pub top: usize,
}

impl Default for WhyDiffOptions {
    fn default() -> Self {
        WhyDiffOptions {
            why: WhyOptions::default(),
            basis: Basis::default(),
            top: 10,
        }
    }
}

/// The comparison: both recordings, the difference in their threads' time, the changes in
/// causes largest first.
#[derive(Debug, Serialize)]
pub struct WhyDiff {
    schema: &'static str,
    version: u32,
    /// What times are compared per.
    pub basis: BasisRow,
    /// The base recording.
    pub base: SideSummary,
    /// The other recording.
    pub other: SideSummary,
    /// True when `warnings` is empty.
    pub comparable: bool,
    /// Everything that makes the comparison unfair (`lockscope diff`'s sentences).
    pub warnings: Vec<String>,
    /// How causes were matched: `full` (whole canonical stacks) or `leaf` (the two sides walked
    /// their stacks differently: the first canonical frame).
    pub matched_at: &'static str,
    /// The analysed threads' time on each side, on the basis, and its change.
    pub difference: Difference,
    /// The parts of their time that are not causes: their own time on a CPU, and what was not
    /// analysed (sleeps still going on at the end).
    pub rest: Vec<PartChange>,
    /// Changes before the `top` cut.
    pub changes_total: usize,
    /// The changes in causes, largest absolute delta first.
    pub changes: Vec<CauseChange>,
}

/// [`Basis`] as the JSON and the text name it.
#[derive(Debug, Serialize)]
pub struct BasisRow {
    /// `per-thread-second`, `per-second` or `per-operation`.
    pub mode: &'static str,
    /// `share`, `ns/s` or `ns/op`: the unit of every `normalized` value and delta.
    pub unit: &'static str,
    /// What each change's `explains` is a part of: `net` (the difference per operation) or
    /// `moved` (the time that moved between parts).
    pub explains_of: &'static str,
    #[serde(skip)]
    pub(super) basis: Basis,
}

/// One recording and its analysed threads.
#[derive(Debug, Serialize)]
pub struct SideSummary {
    /// The profile file as given.
    pub path: String,
    /// Target command line.
    pub command: Vec<String>,
    /// Target pid.
    pub pid: u32,
    /// `ebpf` or `dtrace`.
    pub backend: String,
    /// OS it was recorded on.
    pub os: String,
    /// Kernel release.
    pub kernel_release: String,
    /// Length of the recording.
    pub duration_ns: u64,
    /// Online CPUs.
    pub cpu_count: u32,
    /// The operations given with `--per-op`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operations: Option<u64>,
    /// Threads analysed.
    pub threads: usize,
    /// Their groups (`worker-*`).
    pub groups: Vec<String>,
    /// Their wall time together.
    pub wall_ns: u64,
    /// Their own time on a CPU.
    pub on_cpu_ns: u64,
    /// Their waiting the analysis followed (every cause, idle too).
    pub waits_ns: u64,
}

/// The analysed threads' time on each side, on the basis.
#[derive(Debug, Serialize)]
pub struct Difference {
    /// Base's (1 per thread-second).
    pub base: f64,
    /// Other's.
    pub other: f64,
    /// Other minus base: what the parts' deltas sum to.
    pub delta: f64,
    /// The sum of the parts' growths (causes, own CPU, not analysed): the time that moved.
    pub moved: f64,
}

/// A part of the threads' time that is not a cause, on both sides.
#[derive(Debug, Serialize)]
pub struct PartChange {
    /// `on-cpu` (the threads' own CPU time) or `not-analysed`.
    pub part: &'static str,
    /// Base's.
    pub base: PartSide,
    /// Other's.
    pub other: PartSide,
    /// Other's share minus base's.
    pub delta_share: f64,
    /// Other's normalized value minus base's.
    pub delta_normalized: f64,
    /// Its part of the difference (`basis.explains_of`); absent when that is zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explains: Option<f64>,
}

/// A part's time on one side.
#[derive(Debug, Serialize)]
pub struct PartSide {
    /// Nanoseconds.
    pub total_ns: u64,
    /// Share of the side's analysed threads' wall time.
    pub share: f64,
    /// On the basis.
    pub normalized: f64,
}

/// Whether a cause appeared, went, grew, shrank or stayed the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeStatus {
    /// On the other side only.
    New,
    /// On the base side only.
    Gone,
    /// On both, larger on the other (on the basis).
    Grew,
    /// On both, smaller on the other.
    Shrank,
    /// On both, the same on the basis.
    Same,
}

impl ChangeStatus {
    /// Its name in the text and JSON.
    pub fn name(self) -> &'static str {
        match self {
            ChangeStatus::New => "new",
            ChangeStatus::Gone => "gone",
            ChangeStatus::Grew => "grew",
            ChangeStatus::Shrank => "shrank",
            ChangeStatus::Same => "same",
        }
    }
}

/// What a change is: a cause's kind, or the causes a kernel lock's sleeps cost together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChangeKind {
    /// Causes of one kind (`cpu`, `sleep`, ...).
    Cause(CauseKind),
    /// The causes whose time was spent under one sleeping kernel lock, taken by one kernel
    /// caller (`kernel-lock`).
    KernelLock,
}

impl ChangeKind {
    /// Its name in the text and JSON: the cause kind's, or `kernel-lock`.
    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Cause(kind) => kind.name(),
            ChangeKind::KernelLock => "kernel-lock",
        }
    }
}

impl Serialize for ChangeKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl PartialEq<CauseKind> for ChangeKind {
    fn eq(&self, other: &CauseKind) -> bool {
        *self == ChangeKind::Cause(*other)
    }
}

/// One cause compared.
#[derive(Debug, Serialize)]
pub struct CauseChange {
    /// Rank, 1 for the largest absolute delta.
    pub rank: usize,
    /// What it is.
    pub kind: ChangeKind,
    /// New, gone, grew, shrank or same.
    pub status: ChangeStatus,
    /// The canonical stack it was matched by, leaf first (empty for the kinds matched by kind
    /// alone, and for `kernel-lock`, matched by its lock).
    pub stack: Vec<String>,
    /// For `kernel-lock`, the kernel path of its lock on the side where it weighs more;
    /// otherwise its root's kernel stack, leaf first, on that side, or else the kernel path of
    /// its kernel lock; empty when neither (a root on a CPU, a backend without kernel stacks).
    pub kernel_stack: Vec<String>,
    /// Where its root (the holder, on a CPU) let the waiters go in the kernel, leaf first from
    /// the release (`up_write`, `__vm_munmap`, ...), on the side where it weighs more (for
    /// `kernel-lock`, of its heaviest part that has one); empty when not recorded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub release_stack: Vec<String>,
    /// The sleeping kernel lock its time was spent under, on the side where it weighs more
    /// (part of what it was matched by).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_lock: Option<KernelLock>,
    /// The system call the root slept in (`sleep`, `io`, `idle`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// The frame that tells where: the first of the program's own (past the synchronization and
    /// system-call plumbing) in the stack of the side where it weighs more, with its caller when
    /// another change listed of its kind has the same frame.
    #[serde(rename = "where")]
    pub place: String,
    /// The base side's part (zeros when `new`).
    pub base: CauseSide,
    /// The other side's part (zeros when `gone`).
    pub other: CauseSide,
    /// Other's share minus base's.
    pub delta_share: f64,
    /// Other's normalized value minus base's.
    pub delta_normalized: f64,
    /// Its part of the difference (`basis.explains_of`); absent when that is zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explains: Option<f64>,
}

/// A cause on one side.
#[derive(Debug, Default, Serialize)]
pub struct CauseSide {
    /// Its time, nanoseconds.
    pub total_ns: u64,
    /// Share of the side's analysed threads' wall time.
    pub share: f64,
    /// On the basis.
    pub normalized: f64,
    /// Waits it explains part of.
    pub waits: u64,
    /// The side's own stack of the cause, leaf first (as `why` shows it).
    pub stack: Vec<String>,
    /// The root threads, by group, heaviest first.
    pub threads: Vec<NamedTime>,
    /// The waits it explains, heaviest first.
    pub sites: Vec<Site>,
    /// For `kernel-lock`: the causes it gathers on this side, heaviest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<LockPart>,
}

/// One of the causes a `kernel-lock` change gathers on one side.
#[derive(Debug, Serialize)]
pub struct LockPart {
    /// The cause's kind.
    pub kind: CauseKind,
    /// Its root's stack, leaf first, a few frames (as `why` shows it).
    pub stack: Vec<String>,
    /// Its time, nanoseconds.
    pub total_ns: u64,
}

/// Frames of a [`LockPart`]'s stack kept.
const PART_FRAMES: usize = 4;

/// Rounds a value for the JSON: fractions to 6 decimals, nanoseconds to 0.01.
fn round(value: f64, unit: &str) -> f64 {
    let scale = if unit == "share" { 1e6 } else { 1e2 };
    (value * scale).round() / scale
}

/// What one cause is matched by.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct MatchKey {
    kind: ChangeKind,
    /// The canonical user stack; for `kernel-lock`, the lock's kernel caller.
    stack: Vec<String>,
    call: Option<String>,
    /// The kernel lock's slow path (`rwsem_down_read_slowpath`), as the kernel names it across
    /// builds (without a `.constprop.0`).
    kernel_lock: Option<&'static str>,
}

/// Whether causes of `kind` are one per root stack (else one per kind, whose stack is only the
/// heaviest root's and must not split the match).
fn by_stack(kind: CauseKind) -> bool {
    matches!(
        kind,
        CauseKind::Cpu | CauseKind::Sleep | CauseKind::Io | CauseKind::Idle
    )
}

fn match_key(cause: &Cause, depth: SiteDepth) -> MatchKey {
    if let Some(key) = lock_key(cause) {
        return key;
    }
    let keep = by_stack(cause.kind);
    MatchKey {
        kind: ChangeKind::Cause(cause.kind),
        stack: if keep {
            canonical_place(&cause.stack, depth)
        } else {
            Vec::new()
        },
        call: cause.call.clone().filter(|_| keep),
        kernel_lock: cause
            .kernel_lock
            .as_ref()
            .filter(|_| keep)
            .and_then(|lock| lock_sleep(&lock.stack)),
    }
}

/// The `kernel-lock` change a cause is part of: its kernel lock's slow path and where the
/// kernel was entered to take it ([`lock_entry`]), so that one mechanism matches across kernels
/// whose functions between the two differ; `None` without a kernel lock.
fn lock_key(cause: &Cause) -> Option<MatchKey> {
    let lock = cause.kernel_lock.as_ref()?;
    let sleep = lock_sleep(&lock.stack)?;
    Some(MatchKey {
        kind: ChangeKind::KernelLock,
        stack: lock_entry(lock).into_iter().collect(),
        call: None,
        kernel_lock: Some(sleep),
    })
}

/// Where the kernel was entered on a kernel lock's path: its system call (`__x64_sys_munmap`)
/// or its exception handler (`exc_page_fault`), the first frame from the lock out that is one;
/// else (a path cut short) the first caller past the lock's entry points. Without compiler
/// suffixes (`.constprop.0`). The functions in between change across kernels: 6.1 takes the
/// mmap_lock at a fault in `lock_mm_and_find_vma`, 5.10 in `do_user_addr_fault` itself.
fn lock_entry(lock: &KernelLock) -> Option<String> {
    let bare = |f: &String| f.split('.').next().unwrap_or(f).to_string();
    let entry = |f: &&String| {
        let f = f.trim_start_matches('_');
        f.contains("_sys_") || f.starts_with("exc_") || f == "do_page_fault"
    };
    lock.stack
        .iter()
        .find(entry)
        .or(lock.callers().first())
        .map(bare)
}

/// The slow path a kernel lock's path (leaf first) sleeps in: the entry of
/// [`KERNEL_LOCK_SLEEPS`](lockscope_probes::kernel_frames::KERNEL_LOCK_SLEEPS) its first frame starts
/// with.
fn lock_sleep(path: &[String]) -> Option<&'static str> {
    let leaf = path.first()?;
    lockscope_probes::kernel_frames::KERNEL_LOCK_SLEEPS
        .iter()
        .copied()
        .find(|p| leaf.starts_with(p))
}

/// Names where each change is: its telling frame in the stack of the side where it weighs more
/// (as every report names a site: [`site_name_index`](crate::render::frames::site_name_index)),
/// with the frame's caller when another change of its kind has the same frame (`spin <-
/// critical_section`, `spin <- outside_work`).
fn name_places(changes: &mut [CauseChange]) {
    let at = |c: &CauseChange, frames: usize| {
        let side = if c.other.total_ns >= c.base.total_ns {
            &c.other
        } else {
            &c.base
        };
        // The wrapper of the system call the root slept in is plumbing that only this cause
        // knows of; past it, the frame is named as every report names a site.
        let call = side
            .stack
            .iter()
            .take_while(|f| Some(f.as_str()) == c.call.as_deref())
            .count();
        let past_call = &side.stack[call.min(side.stack.len().saturating_sub(1))..];
        let telling = crate::render::frames::site_name_index(past_call)
            .map(|i| i + (side.stack.len() - past_call.len()));
        match telling {
            Some(i) => side.stack[i..]
                .iter()
                .take(frames)
                .cloned()
                .collect::<Vec<_>>()
                .join(" <- "),
            None => "[no stack]".to_string(),
        }
    };
    let short: Vec<(ChangeKind, String)> = changes.iter().map(|c| (c.kind, at(c, 1))).collect();
    for (i, c) in changes.iter_mut().enumerate() {
        let shared = short.iter().filter(|p| **p == short[i]).count() > 1;
        c.place = if c.kind == ChangeKind::KernelLock {
            // Where the kernel took the lock: its first caller past the lock's entry points.
            c.kernel_lock
                .as_ref()
                .and_then(|lock| lock.callers().first().or(lock.stack.first()).cloned())
                .unwrap_or_else(|| "[no stack]".to_string())
        } else if shared {
            at(c, 2)
        } else {
            short[i].1.clone()
        };
        if let Some(lock) = &c.kernel_lock {
            c.place = format!("{} [{}]", c.place, lock.lock);
        }
    }
}

/// A change's cause on one side: the causes merged under one match key, and for `kernel-lock`
/// the parts they were.
struct SideCause {
    cause: Cause,
    parts: Vec<LockPart>,
}

/// One side's causes (idle too) merged by their match key.
fn side_causes(why: Why, depth: SiteDepth) -> BTreeMap<MatchKey, SideCause> {
    let mut out: BTreeMap<MatchKey, SideCause> = BTreeMap::new();
    for cause in why.causes.into_iter().chain(why.idle) {
        let key = match_key(&cause, depth);
        let part = (key.kind == ChangeKind::KernelLock).then(|| LockPart {
            kind: cause.kind,
            stack: cause.stack.iter().take(PART_FRAMES).cloned().collect(),
            total_ns: cause.total_ns,
        });
        match out.get_mut(&key) {
            // Two causes of one side that only their OS-specific frames told apart are one.
            Some(into) => {
                merge(&mut into.cause, cause);
                into.parts.extend(part);
            }
            None => {
                let parts = part.into_iter().collect();
                out.insert(key, SideCause { cause, parts });
            }
        }
    }
    for entry in out.values_mut() {
        entry
            .parts
            .sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.kind.cmp(&b.kind)));
    }
    out
}

fn merge(into: &mut Cause, from: Cause) {
    let lock_ns = [&into.kernel_lock, &from.kernel_lock]
        .iter()
        .filter_map(|lock| lock.as_ref().map(|l| l.total_ns))
        .sum();
    // The release of the heaviest part that has one.
    let heavier = from.total_ns > into.total_ns;
    if !from.release_stack.is_empty() && (heavier || into.release_stack.is_empty()) {
        into.release_stack = from.release_stack;
    }
    if heavier {
        into.stack = from.stack;
        into.kernel_stack = from.kernel_stack;
        into.kernel_lock = from.kernel_lock;
    }
    if let Some(lock) = &mut into.kernel_lock {
        lock.total_ns = lock_ns;
    }
    into.total_ns += from.total_ns;
    into.share += from.share;
    into.waits += from.waits;
    for thread in from.threads {
        match into.threads.iter_mut().find(|t| t.name == thread.name) {
            Some(t) => t.total_ns += thread.total_ns,
            None => into.threads.push(thread),
        }
    }
    into.threads
        .sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    into.sites.extend(from.sites);
    into.sites.sort_by_key(|s| std::cmp::Reverse(s.total_ns));
}

fn summary(profile: &Profile, why: &Why, path: &str, operations: Option<u64>) -> SideSummary {
    let md = &profile.metadata;
    SideSummary {
        path: path.to_string(),
        command: md.target.command.clone(),
        pid: md.target.pid,
        backend: md.backend.clone(),
        os: md.os.clone(),
        kernel_release: md.kernel_release.clone(),
        duration_ns: md.duration_ns,
        cpu_count: md.cpu_count,
        operations,
        threads: why.analysed.threads,
        groups: why
            .analysed
            .groups
            .iter()
            .map(|g| g.group.clone())
            .collect(),
        wall_ns: why.analysed.wall_ns,
        on_cpu_ns: why.analysed.on_cpu_ns,
        waits_ns: why.analysed.waits_ns,
    }
}

impl WhyDiff {
    /// Compares `base` with `other` (their files as given in `paths`) as `options` ask.
    pub fn build(
        base: &Profile,
        other: &Profile,
        paths: (&str, &str),
        options: &WhyDiffOptions,
    ) -> Result<WhyDiff, WhyDiffError> {
        let basis = options.basis;
        if let Basis::PerOperation {
            ops_base,
            ops_other,
        } = basis
        {
            if ops_base == 0 || ops_other == 0 {
                return Err(WhyDiffError::InvalidOperationCounts {
                    ops_base,
                    ops_other,
                });
            }
        }
        let mut why_options = options.why.clone();
        why_options.top = 0;
        why_options.json = false;
        let explain = |profile: &Profile, side: &'static str, path: &str| {
            Why::build(profile, &why_options).map_err(|error| WhyDiffError::Side {
                side,
                path: path.to_string(),
                error,
            })
        };
        let base_why = explain(base, "base", paths.0)?;
        let other_why = explain(other, "other", paths.1)?;
        let (ops_base, ops_other) = match basis {
            Basis::PerOperation {
                ops_base,
                ops_other,
            } => (Some(ops_base), Some(ops_other)),
            _ => (None, None),
        };
        let base_side = summary(base, &base_why, paths.0, ops_base);
        let other_side = summary(other, &other_why, paths.1, ops_other);
        let unit = basis.unit();
        let depth = site_depth(base, other);
        let (base_unfinished, other_unfinished) = (
            base_why.coverage.unfinished_ns,
            other_why.coverage.unfinished_ns,
        );
        let mut base_causes = side_causes(base_why, depth);
        let mut other_causes = side_causes(other_why, depth);
        let keys: Vec<MatchKey> = {
            let mut keys: Vec<MatchKey> = base_causes
                .keys()
                .chain(other_causes.keys())
                .cloned()
                .collect();
            keys.sort();
            keys.dedup();
            keys
        };
        let side = |cause: Option<SideCause>, summary: &SideSummary, first: bool| match cause {
            Some(SideCause { cause: c, parts }) => CauseSide {
                total_ns: c.total_ns,
                share: crate::render::units::share(c.total_ns, summary.wall_ns),
                normalized: basis.normalize(c.total_ns, summary, first),
                waits: c.waits,
                stack: c.stack,
                threads: c.threads,
                sites: c.sites,
                parts,
            },
            None => CauseSide::default(),
        };
        let mut changes: Vec<CauseChange> = keys
            .into_iter()
            .map(|key| {
                let (b, o) = (base_causes.remove(&key), other_causes.remove(&key));
                let present = (b.is_some(), o.is_some());
                let heavier = match (&b, &o) {
                    (Some(b), Some(o)) if b.cause.total_ns > o.cause.total_ns => Some(&b.cause),
                    (_, Some(o)) => Some(&o.cause),
                    (b, None) => b.as_ref().map(|b| &b.cause),
                };
                let kernel_lock = heavier.and_then(|c| c.kernel_lock.clone());
                let release_stack = heavier.map(|c| c.release_stack.clone()).unwrap_or_default();
                let kernel_stack = match heavier {
                    Some(c) if !c.kernel_stack.is_empty() && key.kind != ChangeKind::KernelLock => {
                        c.kernel_stack.clone()
                    }
                    _ => kernel_lock
                        .as_ref()
                        .map(|lock| lock.stack.clone())
                        .unwrap_or_default(),
                };
                let (b, o) = (side(b, &base_side, true), side(o, &other_side, false));
                let status = match present {
                    (false, _) => ChangeStatus::New,
                    (_, false) => ChangeStatus::Gone,
                    _ if o.normalized > b.normalized => ChangeStatus::Grew,
                    _ if o.normalized < b.normalized => ChangeStatus::Shrank,
                    _ => ChangeStatus::Same,
                };
                CauseChange {
                    rank: 0,
                    kind: key.kind,
                    status,
                    place: String::new(),
                    // A kernel lock's change is matched by its lock, not a user stack.
                    stack: if key.kind == ChangeKind::KernelLock {
                        Vec::new()
                    } else {
                        key.stack
                    },
                    kernel_stack,
                    release_stack,
                    kernel_lock,
                    call: key.call,
                    delta_share: o.share - b.share,
                    delta_normalized: o.normalized - b.normalized,
                    explains: None,
                    base: b,
                    other: o,
                }
            })
            .collect();
        let part = |part: &'static str, base_ns: u64, other_ns: u64| {
            let side = |ns: u64, summary: &SideSummary, first: bool| PartSide {
                total_ns: ns,
                share: crate::render::units::share(ns, summary.wall_ns),
                normalized: basis.normalize(ns, summary, first),
            };
            let (b, o) = (
                side(base_ns, &base_side, true),
                side(other_ns, &other_side, false),
            );
            PartChange {
                part,
                delta_share: o.share - b.share,
                delta_normalized: o.normalized - b.normalized,
                explains: None,
                base: b,
                other: o,
            }
        };
        let mut rest = vec![
            part("on-cpu", base_side.on_cpu_ns, other_side.on_cpu_ns),
            part("not-analysed", base_unfinished, other_unfinished),
        ];
        let difference = {
            let (b, o) = (
                basis.normalize(base_side.wall_ns, &base_side, true),
                basis.normalize(other_side.wall_ns, &other_side, false),
            );
            let moved: f64 = changes
                .iter()
                .map(|c| c.delta_normalized)
                .chain(rest.iter().map(|p| p.delta_normalized))
                .filter(|d| *d > 0.0)
                .sum();
            Difference {
                base: b,
                other: o,
                delta: o - b,
                moved,
            }
        };
        let whole = if basis.is_net() {
            difference.delta
        } else {
            difference.moved
        };
        // A whole below a nanosecond (per operation or second), or a millionth of the threads'
        // time, is no difference to explain.
        let explains =
            |delta: f64| (round(whole, unit) != 0.0).then(|| round(delta / whole, "share"));
        for c in &mut changes {
            c.explains = explains(c.delta_normalized);
        }
        for p in &mut rest {
            p.explains = explains(p.delta_normalized);
        }
        changes.sort_by(|a, b| {
            b.delta_normalized
                .abs()
                .total_cmp(&a.delta_normalized.abs())
                .then_with(|| a.kind.cmp(&b.kind))
                .then_with(|| a.stack.cmp(&b.stack))
        });
        let changes_total = changes.len();
        if options.top > 0 {
            changes.truncate(options.top);
        }
        name_places(&mut changes);
        for (i, c) in changes.iter_mut().enumerate() {
            c.rank = i + 1;
            for side in [&mut c.base, &mut c.other] {
                side.normalized = round(side.normalized, unit);
            }
            c.delta_normalized = round(c.delta_normalized, unit);
            c.delta_share = round(c.delta_share, "share");
        }
        for p in &mut rest {
            for side in [&mut p.base, &mut p.other] {
                side.normalized = round(side.normalized, unit);
            }
            p.delta_normalized = round(p.delta_normalized, unit);
            p.delta_share = round(p.delta_share, "share");
        }
        let difference = Difference {
            base: round(difference.base, unit),
            other: round(difference.other, unit),
            delta: round(difference.delta, unit),
            moved: round(difference.moved, unit),
        };
        let diff_options = DiffOptions {
            normalization: basis.as_normalization(),
            labels: ("base".to_string(), "other".to_string()),
            ..DiffOptions::default()
        };
        let warnings = mismatches(base, other, &diff_options);
        Ok(WhyDiff {
            schema: "lockscope-why-diff",
            version: WHY_DIFF_JSON_VERSION,
            basis: BasisRow {
                mode: basis.name(),
                unit,
                explains_of: if basis.is_net() { "net" } else { "moved" },
                basis,
            },
            base: base_side,
            other: other_side,
            comparable: warnings.is_empty(),
            warnings,
            matched_at: match depth {
                SiteDepth::Full => "full",
                SiteDepth::Leaf => "leaf",
            },
            difference,
            rest,
            changes_total,
            changes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockscope_probes::bottleneck::{
        Blame, BottleneckAnalysis, Root, RootKind, ThreadRef, WaitPart, WokenBy,
    };
    use lockscope_probes::{AddressSpace, Frame, Stack, ThreadInfo, ThreadTime, TimeClass};

    const MS: u64 = 1_000_000;
    /// Each worker's wall time.
    const WALL: u64 = 1_000 * MS;

    /// What one hand-made recording of two workers holds: the time their lock waits ended in
    /// the holder's critical section on a CPU, in its backoff sleep (a `sleep` others waited on)
    /// and in its `fsync` (`io`); recorded by the eBPF backend, or by DTrace on macOS (its
    /// frames as ``module`symbol+0x..``).
    #[derive(Clone, Copy)]
    struct Recording {
        critical_ns: u64,
        sleep_ns: u64,
        io_ns: u64,
        dtrace: bool,
    }

    const BASE: Recording = Recording {
        critical_ns: 300 * MS,
        sleep_ns: 100 * MS,
        io_ns: 0,
        dtrace: false,
    };

    fn stack(dtrace: bool, frames: &[(&str, &str)]) -> Stack {
        Stack {
            space: AddressSpace::User,
            frames: frames
                .iter()
                .enumerate()
                .map(|(i, (module, function))| Frame {
                    function: Some(if dtrace {
                        format!("{module}`{function}+0x{:x}", 16 * (i + 1))
                    } else {
                        function.to_string()
                    }),
                    ..Frame::unsymbolized(0x1000 + i as u64)
                })
                .collect(),
            truncated: false,
        }
    }

    fn profile(r: Recording) -> Profile {
        let (libc, unlock, wake) = if r.dtrace {
            (
                "libsystem_pthread.dylib",
                "pthread_mutex_unlock",
                "__psynch_mutexdrop",
            )
        } else {
            ("libc.so.6", "___pthread_mutex_unlock", "__lll_lock_wake")
        };
        let stacks = vec![
            // 0: a worker waits for the lock.
            stack(
                r.dtrace,
                &[
                    (libc, "__lll_lock_wait"),
                    (libc, "pthread_mutex_lock"),
                    ("app", "worker_loop"),
                ],
            ),
            // 1: the holder unlocks, ending its critical section.
            stack(
                r.dtrace,
                &[
                    (libc, wake),
                    (libc, unlock),
                    ("app", "critical_section"),
                    ("app", "worker_loop"),
                ],
            ),
            // 2: the holder sleeps in its backoff.
            stack(
                r.dtrace,
                &[
                    (libc, "clock_nanosleep"),
                    ("app", "backoff"),
                    ("app", "worker_loop"),
                ],
            ),
            // 3: the holder syncs its log.
            stack(
                r.dtrace,
                &[
                    (libc, "fsync"),
                    ("app", "flush_log"),
                    ("app", "worker_loop"),
                ],
            ),
        ];
        let (w1, w2) = (ThreadRef { pid: 1, tid: 2 }, ThreadRef { pid: 1, tid: 3 });
        let blame = |kind: RootKind, call: Option<&str>, root_stack: u32, total_ns: u64| Blame {
            thread: w1,
            part: WaitPart::Asleep,
            call: Some("futex".to_string()),
            object: 0x5000,
            user_stack: Some(0),
            kernel_stack: None,
            woken_by: Some(WokenBy::Program),
            waker: Some(w2),
            root: Root {
                kind,
                thread: w2,
                call: call.map(str::to_string),
                user_stack: Some(root_stack),
                kernel_stack: None,
                woken_by: (kind == RootKind::Blocked).then_some(WokenBy::Interrupt),
                waker_name: None,
                holder: None,
                holder_name: None,
            },
            depth: 1,
            chain: Vec::new(),
            waits: 10,
            total_ns,
        };
        let records = [
            (RootKind::Cpu, None, 1, r.critical_ns),
            (RootKind::Blocked, Some("clock_nanosleep"), 2, r.sleep_ns),
            (RootKind::Blocked, Some("fsync"), 3, r.io_ns),
        ];
        let waits_ns = r.critical_ns + r.sleep_ns + r.io_ns;
        let times = |t: ThreadRef, on_cpu: u64| ThreadTime {
            pid: t.pid,
            tid: t.tid,
            wall_ns: WALL,
            time_ns: [(TimeClass::OnCpu, on_cpu)].into_iter().collect(),
            voluntary_switches: 10,
            involuntary_switches: 0,
            woken_ns: Default::default(),
        };
        let mut profile = Profile {
            threads: [w1, w2]
                .iter()
                .map(|t| ThreadInfo {
                    pid: t.pid,
                    tid: t.tid,
                    name: format!("worker-{}", t.tid - 1),
                })
                .collect(),
            stacks,
            // The waiting worker's other time, and all of the holder's, on a CPU.
            thread_times: vec![times(w1, WALL - waits_ns), times(w2, WALL)],
            bottleneck: Some(BottleneckAnalysis {
                max_depth: 10,
                history_ns: 10_000 * MS,
                intervals: 30,
                blame: records
                    .into_iter()
                    .filter(|r| r.3 > 0)
                    .map(|(kind, call, at, ns)| blame(kind, call, at, ns))
                    .collect(),
                ..BottleneckAnalysis::default()
            }),
            ..Profile::default()
        };
        profile.metadata.target.command = vec!["app".to_string()];
        profile.metadata.duration_ns = WALL;
        profile.metadata.backend = if r.dtrace { "dtrace" } else { "ebpf" }.to_string();
        profile.metadata.os = if r.dtrace { "macos" } else { "linux" }.to_string();
        profile
    }

    fn compare(base: Recording, other: Recording, basis: Basis) -> WhyDiff {
        let mut options = WhyDiffOptions::default();
        options.why.threads = Some("worker-*".to_string());
        options.basis = basis;
        options.top = 0;
        WhyDiff::build(
            &profile(base),
            &profile(other),
            ("a.lsp", "b.lsp"),
            &options,
        )
        .expect("comparable")
    }

    fn change(diff: &WhyDiff, kind: CauseKind) -> &CauseChange {
        diff.changes
            .iter()
            .find(|c| c.kind == kind)
            .unwrap_or_else(|| panic!("no {kind:?} change in {diff:#?}"))
    }

    /// The critical section that grows from 300 ms to 900 ms of the workers' 2 s ranks first,
    /// at its own frame, with the 30 points it grew; the backoff sleep that stayed is last, and
    /// the workers' own CPU time lost what the cause gained: it explains all the time that moved.
    #[test]
    fn the_grown_cause_ranks_first() {
        let other = Recording {
            critical_ns: 900 * MS,
            ..BASE
        };
        let diff = compare(BASE, other, Basis::PerThreadSecond);
        let first = &diff.changes[0];
        assert_eq!(
            (first.kind, first.status, first.place.as_str()),
            (
                ChangeKind::Cause(CauseKind::Cpu),
                ChangeStatus::Grew,
                "critical_section"
            )
        );
        assert_eq!(
            first.stack,
            ["pthread_mutex_unlock", "critical_section", "worker_loop"]
        );
        assert_eq!((first.base.share, first.other.share), (0.15, 0.45));
        assert!((first.delta_share - 0.30).abs() < 1e-9, "{first:?}");
        assert_eq!(first.explains, Some(1.0));
        let sleep = change(&diff, CauseKind::Sleep);
        assert_eq!((sleep.rank, sleep.status), (2, ChangeStatus::Same));
        assert_eq!(sleep.call.as_deref(), Some("clock_nanosleep"));
        let on_cpu = &diff.rest[0];
        assert_eq!(on_cpu.part, "on-cpu");
        assert_eq!(on_cpu.explains, Some(-1.0));
        assert_eq!(diff.difference.delta, 0.0);
    }

    /// A cause on one side only is `new` (the fsync) or `gone` (the backoff sleep), with zeros
    /// on the side without it and its place from the side with it.
    #[test]
    fn new_and_gone_causes() {
        let other = Recording {
            sleep_ns: 0,
            io_ns: 250 * MS,
            ..BASE
        };
        let diff = compare(BASE, other, Basis::PerThreadSecond);
        let io = change(&diff, CauseKind::Io);
        assert_eq!(
            (io.status, io.place.as_str()),
            (ChangeStatus::New, "flush_log")
        );
        assert_eq!((io.base.total_ns, io.other.total_ns), (0, 250 * MS));
        assert_eq!(io.rank, 1, "{diff:#?}");
        let sleep = change(&diff, CauseKind::Sleep);
        assert_eq!(
            (sleep.status, sleep.place.as_str()),
            (ChangeStatus::Gone, "backoff")
        );
        assert_eq!((sleep.base.waits, sleep.other.waits), (10, 0));
        assert!(sleep.delta_share < 0.0);
        assert_eq!(diff.changes_total, 3);
    }

    /// Per operation, the same recording with half the operations costs twice the thread time
    /// per operation: each cause's delta is its time over the base's count, and its part of the
    /// net difference is its share of the threads' time.
    #[test]
    fn per_operation_normalisation() {
        let diff = compare(
            BASE,
            BASE,
            Basis::PerOperation {
                ops_base: 1000,
                ops_other: 500,
            },
        );
        assert_eq!(diff.basis.unit, "ns/op");
        assert_eq!(diff.basis.explains_of, "net");
        // 2 s of thread time per 1000 and per 500 operations.
        assert_eq!(
            (diff.difference.base, diff.difference.other),
            (2_000_000.0, 4_000_000.0)
        );
        let cpu = change(&diff, CauseKind::Cpu);
        assert_eq!(
            (cpu.base.normalized, cpu.other.normalized),
            (300_000.0, 600_000.0)
        );
        assert_eq!(cpu.delta_normalized, 300_000.0);
        assert_eq!(cpu.status, ChangeStatus::Grew);
        assert_eq!(cpu.explains, Some(0.15));
        assert_eq!(cpu.delta_share, 0.0);
        assert_eq!(diff.other.operations, Some(500));
        let text = diff.to_text();
        assert!(
            text.contains("each took 2.00 ms of the analysed threads' time in base, 4.00 ms"),
            "{text}"
        );
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        let err = WhyDiff::build(
            &profile(BASE),
            &profile(BASE),
            ("a.lsp", "b.lsp"),
            &WhyDiffOptions {
                basis: Basis::PerOperation {
                    ops_base: 0,
                    ops_other: 5,
                },
                ..WhyDiffOptions::default()
            },
        )
        .expect_err("no operations");
        assert_eq!(
            err.to_string(),
            "invalid operation counts 0,5: both must be at least 1"
        );
    }

    /// A macOS DTrace recording (frames as ``module`symbol+0x..``, walked by frame pointers)
    /// matches the Linux one's causes at their first canonical frame: the critical section
    /// grew, nothing is new or gone.
    #[test]
    fn causes_match_across_backends() {
        let other = Recording {
            critical_ns: 600 * MS,
            dtrace: true,
            ..BASE
        };
        let diff = compare(BASE, other, Basis::PerThreadSecond);
        assert_eq!(diff.matched_at, "leaf");
        assert!(
            diff.changes
                .iter()
                .all(|c| !matches!(c.status, ChangeStatus::New | ChangeStatus::Gone)),
            "{diff:#?}"
        );
        let cpu = &diff.changes[0];
        assert_eq!(
            (cpu.kind, cpu.status),
            (ChangeKind::Cause(CauseKind::Cpu), ChangeStatus::Grew)
        );
        assert_eq!(cpu.stack, ["pthread_mutex_unlock"]);
        assert_eq!(cpu.other.stack[2], "app`critical_section+0x30");
        assert!(
            diff.warnings
                .iter()
                .any(|w| w.contains("stack depth differs")),
            "{:?}",
            diff.warnings
        );
    }

    /// The JSON: its schema and version, the basis, both sides, and each change with kind,
    /// canonical stack, kernel stack, place, both sides' shares and the deltas, largest first.
    #[test]
    fn json_shape() {
        let other = Recording {
            critical_ns: 800 * MS,
            io_ns: 50 * MS,
            ..BASE
        };
        let json =
            serde_json::to_value(compare(BASE, other, Basis::PerThreadSecond)).expect("json");
        assert_eq!(json["schema"], "lockscope-why-diff");
        assert_eq!(json["version"], WHY_DIFF_JSON_VERSION);
        assert_eq!(json["basis"]["mode"], "per-thread-second");
        assert_eq!(json["base"]["path"], "a.lsp");
        assert_eq!(json["other"]["wall_ns"], 2 * WALL);
        let changes = json["changes"].as_array().expect("changes");
        assert_eq!(changes.len(), 3);
        let first = &changes[0];
        assert_eq!(first["kind"], "cpu");
        assert_eq!(first["where"], "critical_section");
        assert!(first["stack"].is_array() && first["kernel_stack"].is_array());
        assert_eq!(first["base"]["share"], 0.15);
        assert_eq!(first["other"]["share"], 0.4);
        assert_eq!(first["delta_share"], 0.25);
        assert_eq!(changes[1]["kind"], "io");
        assert_eq!(changes[1]["status"], "new");
        let deltas: Vec<f64> = changes
            .iter()
            .map(|c| c["delta_normalized"].as_f64().expect("delta").abs())
            .collect();
        assert!(deltas.windows(2).all(|w| w[0] >= w[1]), "{deltas:?}");
    }

    /// Per second of recording, a recording twice as long with the same causes has half their
    /// nanoseconds per second: every cause shrank while their shares stayed, and no part grew,
    /// so no time moved and nothing is explained.
    #[test]
    fn per_second_normalisation() {
        let mut long = profile(BASE);
        long.metadata.duration_ns = 2 * WALL;
        let mut options = WhyDiffOptions::default();
        options.why.threads = Some("worker-*".to_string());
        options.basis = Basis::PerSecond;
        let diff = WhyDiff::build(&profile(BASE), &long, ("a.lsp", "b.lsp"), &options)
            .expect("comparable");
        assert_eq!(diff.basis.unit, "ns/s");
        let cpu = change(&diff, CauseKind::Cpu);
        assert_eq!(
            (cpu.base.normalized, cpu.other.normalized),
            (300_000_000.0, 150_000_000.0)
        );
        assert_eq!((cpu.status, cpu.delta_share), (ChangeStatus::Shrank, 0.0));
        assert_eq!(diff.difference.moved, 0.0);
        assert_eq!(cpu.explains, None);
    }

    /// A kernel lock's change is keyed by where the kernel was entered to take it: 6.1's fault
    /// path through `lock_mm_and_find_vma` and 5.10's straight from `do_user_addr_fault` are one
    /// mechanism; a path cut short falls back on its first caller past the lock's entry points.
    #[test]
    fn kernel_locks_match_by_entry() {
        let lock = |frames: &[&str]| KernelLock {
            lock: "rwsem",
            stack: frames.iter().map(|f| f.to_string()).collect(),
            slept: "waits",
            total_ns: 1,
        };
        let new = lock(&[
            "rwsem_down_read_slowpath",
            "down_read_killable",
            "lock_mm_and_find_vma",
            "do_user_addr_fault",
            "exc_page_fault",
            "asm_exc_page_fault",
        ]);
        let old = lock(&[
            "rwsem_down_read_slowpath",
            "down_read",
            "do_user_addr_fault.constprop.0",
            "exc_page_fault",
        ]);
        assert_eq!(lock_entry(&new), Some("exc_page_fault".to_string()));
        assert_eq!(lock_entry(&new), lock_entry(&old));
        let unmap = lock(&[
            "rwsem_down_write_slowpath",
            "down_write_killable",
            "__vm_munmap",
        ]);
        assert_eq!(lock_entry(&unmap), Some("__vm_munmap".to_string()));
        let syscall = lock(&[
            "rwsem_down_write_slowpath",
            "__vm_munmap",
            "__x64_sys_munmap",
        ]);
        assert_eq!(lock_entry(&syscall), Some("__x64_sys_munmap".to_string()));
    }

    /// A change's place is its telling frame, past the plumbing; with the frame's caller when
    /// another change of its kind shows the same frame.
    #[test]
    fn places_are_told_apart() {
        let names = |frames: &[&str]| frames.iter().map(|f| f.to_string()).collect::<Vec<_>>();
        let change = |kind: CauseKind, frames: &[&str]| CauseChange {
            rank: 0,
            kind: ChangeKind::Cause(kind),
            status: ChangeStatus::New,
            stack: Vec::new(),
            kernel_stack: Vec::new(),
            release_stack: Vec::new(),
            kernel_lock: None,
            call: None,
            place: String::new(),
            base: CauseSide::default(),
            other: CauseSide {
                total_ns: 1,
                stack: names(frames),
                ..CauseSide::default()
            },
            delta_share: 0.0,
            delta_normalized: 0.0,
            explains: None,
        };
        let mut changes = vec![
            change(CauseKind::Cpu, &["spin", "critical_section", "worker"]),
            change(CauseKind::Cpu, &["spin", "outside_work", "worker"]),
            change(CauseKind::CpuSaturation, &["spin", "outside_work"]),
            change(
                CauseKind::Sleep,
                &["__GI___clock_nanosleep", "std::thread::sleep", "backoff"],
            ),
            change(CauseKind::Unknown, &[]),
        ];
        name_places(&mut changes);
        let places: Vec<&str> = changes.iter().map(|c| c.place.as_str()).collect();
        assert_eq!(
            places,
            [
                "spin <- critical_section",
                "spin <- outside_work",
                "spin",
                "backoff",
                "[no stack]"
            ]
        );
    }

    /// A side without the bottleneck analysis is named, with what to record.
    #[test]
    fn a_side_without_bottleneck_is_named() {
        let err = WhyDiff::build(
            &profile(BASE),
            &Profile::default(),
            ("a.lsp", "b.lsp"),
            &WhyDiffOptions::default(),
        )
        .expect_err("no bottleneck analysis");
        let text = err.to_string();
        assert!(
            text.starts_with("`b.lsp` (other): this profile has no bottleneck analysis")
                && text.contains("--probes bottleneck"),
            "{text}"
        );
    }
}
