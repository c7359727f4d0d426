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
//! is spread over causes of several kinds (the holder on a CPU, the waiters' waits for a CPU
//! once it released them, ...: `why` keys each by its lock), which the change lists as its
//! parts. A cause on one side only is `new` or `gone`. A change is
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
//!
//! One file per phase: this one holds the value and [`WhyDiff::build`], which explains each
//! side; `matching` merges each side's causes by what they are matched by; `kernel_lock` makes
//! a `kernel-lock` change's key and parts; `rank` makes the changes, their part of the
//! difference, their order and their places.

mod kernel_lock;
mod matching;
mod rank;
#[cfg(test)]
mod tests;

pub use kernel_lock::LockPart;

use super::model::{CauseKind, KernelLock, NamedTime, Site};
use super::{Why, WhyError, WhyOptions};
use crate::analysis::canonical::{site_depth, SiteDepth};
use crate::diff::{mismatches, DiffOptions, Normalization};
use lockscope_probes::Profile;
use matching::side_causes;
use serde::Serialize;
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
    /// For `cpu-saturation`, the scheduler's part: who had the CPUs while the threads waited for
    /// one (preempted, or runnable after a wakeup), by group, heaviest first; with its waits and
    /// time, how the kernel cut them (the same share in twice the waits is a slice half as long).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<NamedTime>,
    /// The waits it explains, heaviest first.
    pub sites: Vec<Site>,
    /// For `kernel-lock`: the causes it gathers on this side, heaviest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<LockPart>,
}

/// One side's recording and analysed threads.
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
        let operations = match basis {
            Basis::PerOperation {
                ops_base,
                ops_other,
            } => {
                if ops_base == 0 || ops_other == 0 {
                    return Err(WhyDiffError::InvalidOperationCounts {
                        ops_base,
                        ops_other,
                    });
                }
                (Some(ops_base), Some(ops_other))
            }
            _ => (None, None),
        };
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
        let base_side = summary(base, &base_why, paths.0, operations.0);
        let other_side = summary(other, &other_why, paths.1, operations.1);
        let sides = (&base_side, &other_side);
        let depth = site_depth(base, other);
        let unfinished = (
            base_why.coverage.unfinished_ns,
            other_why.coverage.unfinished_ns,
        );
        let changes = rank::changes(
            side_causes(base_why, depth),
            side_causes(other_why, depth),
            sides,
            basis,
        );
        let rest = vec![
            rank::part(
                "on-cpu",
                (base_side.on_cpu_ns, other_side.on_cpu_ns),
                sides,
                basis,
            ),
            rank::part("not-analysed", unfinished, sides, basis),
        ];
        let ranked = rank::rank(changes, rest, sides, basis, options.top);
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
                unit: basis.unit(),
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
            difference: ranked.difference,
            rest: ranked.rest,
            changes_total: ranked.changes_total,
            changes: ranked.changes,
        })
    }
}
