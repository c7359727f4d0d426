//! `lockscope sweep`: throughput and waits of a server across concurrency levels, and where it
//! stops scaling.
//!
//! For each level `c`, [`run_sweep`] has the caller start recording the server (a
//! [`LevelRecorder`]: the `lockscope` binary starts a recording session attached to the server and
//! returns once its probes are attached), starts the load command (`{c}` replaced by the level)
//! with `sh -c`, waits for the recording and the load to finish, and parses the load tool's
//! throughput from its output ([`Throughput`]: built-in parsers for sysbench, ab and wrk, or a regular expression). The result is a [`Sweep`], written
//! as `sweep.json` (schema in `docs/SWEEP.md`) beside one profile (`.lsp`, and `.pb.gz`: pprof
//! labelled with the level's concurrency) and one load output per level:
//! throughput per level, scaling against the first level (the seed's "Scaling (Concurrency
//! one=100%)" column), wait time per kind, thread group and canonical site ([`crate::analysis::canonical`]), where
//! the threads' time went ([`Breakdown`], from the `offcpu` probe), what the working threads'
//! waits come down to ([`LevelWhy`]: `lockscope why`'s first causes, for levels recorded with the
//! `waitfor` probe), the knee ([`find_knee`]) and one sentence for a writeup ([`finding`]).
//!
//! Wait time is given in units a reader can picture, never as a percentage of one clock: as
//! **average threads waiting** (wait time over wall time: 31.2 is 31.2 threads waiting all the
//! time) and, when the level has a breakdown, as a **share of thread time** (wait time over the sum
//! of the threads' wall times, 0 to 100%).
//!
//! What keeps a sweep from running, its file from being read or its chart from being drawn as
//! PNG is a [`SweepError`]; the caller's recorder fails with any error ([`RecordError`]).

pub mod chart;
mod error;
mod finding;
mod run;
mod table;
#[cfg(test)]
mod tests;
mod throughput;

pub use error::SweepError;
pub use finding::finding;
pub use run::{run_sweep, LevelRecorder, LevelRecording, RecordError, SweepOptions, SweepTarget};
pub use table::sweep_table;
pub use throughput::{ParsedThroughput, Throughput, ThroughputError};

use crate::analysis::canonical::{canonical_sites, thread_groups};
use crate::render::units::{format_fraction, share};
use crate::why::{Why, WhyOptions};
use lockscope_probes::bottleneck::WokenBy;
use lockscope_probes::catalog;
use lockscope_probes::overlap::offcpu_call;
use lockscope_probes::{wait_roles, Profile, TimeClass, WaitRole, WaitStats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Version of the sweep file schema (`docs/SWEEP.md`); bumped on incompatible changes. Version 2
/// renamed `share_of_wall` to `avg_threads` (the same number, named for what it is) and added
/// shares of thread time and the per-level breakdown.
pub const SWEEP_VERSION: u32 = 2;

/// Oldest sweep file version [`read_sweep`] reads: version 1 files are upgraded as they are read
/// (no breakdown, no shares of thread time, the finding rewritten in today's units).
pub const OLDEST_SWEEP_VERSION: u32 = 1;

/// File name of the sweep file inside a sweep directory.
pub const SWEEP_FILE: &str = "sweep.json";

/// A level whose throughput gains less than this over the previous one has stopped rising.
pub const KNEE_MIN_GAIN: f64 = 0.05;

/// Wait sites and thread groups kept per level, largest first.
const TOP_PER_LEVEL: usize = 10;

/// What a level without a breakdown says in its place, instead of zeros.
pub const NO_BREAKDOWN: &str = "no breakdown: recorded without the offcpu probe";

/// Wait time of one kind, thread group or site at one level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// Kind (`mutex`), thread group (`worker-*`) or canonical site (`f;g;[kernel wait];[mutex]`).
    pub name: String,
    /// Number of waits.
    pub count: u64,
    /// Total wait time, nanoseconds.
    pub total_ns: u64,
    /// `total_ns` over the recording's wall time: how many threads waited on average (1.0 is one
    /// thread waiting all the time). Called `share_of_wall` in sweep files of version 1.
    #[serde(alias = "share_of_wall")]
    pub avg_threads: f64,
    /// `total_ns` over the level's thread time ([`Breakdown::thread_ns`]), 0 to 1; `None` when the
    /// level has no breakdown (recorded without the `offcpu` probe).
    #[serde(default)]
    pub share_of_thread_time: Option<f64>,
}

/// The time all threads together spent in one [`TimeClass`] at one level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassTime {
    /// The class (`on-cpu`, `run-queue`, `lock`, `condvar`, `futex`, `poll`, `io`, `sleep`,
    /// `other`).
    pub name: String,
    /// Time in the class summed over the threads, nanoseconds.
    pub total_ns: u64,
    /// `total_ns` over the recording's wall time: how many threads were in the class on average.
    pub avg_threads: f64,
    /// `total_ns` over the level's thread time, 0 to 1.
    pub share_of_thread_time: f64,
}

/// Where the threads' time went at one level: the per-thread wall-time breakdown of the `offcpu`
/// probe ([`lockscope_probes::ThreadTime`]), summed over the threads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Threads with a breakdown.
    pub threads: u64,
    /// Thread time: the threads' wall times (each the part of the recording it lived through)
    /// summed, nanoseconds.
    pub thread_ns: u64,
    /// `thread_ns` over the recording's wall time: how many threads lived on average.
    pub avg_threads: f64,
    /// Every class, in [`TimeClass::ALL`] order (zeros included: they were measured).
    pub classes: Vec<ClassTime>,
    /// The threads' time asleep by who ended the sleeps, whatever they slept in: `program`
    /// (another thread of the program: waiting on it), `outside` (another process), `interrupt`
    /// (a timer, a device, the network); empty when the profile does not say (recorded before
    /// lockscope kept it, or in sweep files older than this field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub woken: Vec<ClassTime>,
    /// The threads' waits as the report tells them where who ended their sleeps is known
    /// (`lockscope_probes::wait_roles`, summed by [`crate::report::Classified`], the same totals
    /// as the report's `classified`): `contention` (waiting on other threads of the program,
    /// whatever the call) and `idle` (waiting for something outside it); empty when the profile
    /// does not say who ended its sleeps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<ClassTime>,
    /// The system calls the `contention` waits slept in, largest first (at most 3): what the
    /// threads waited on each other in (`epoll_wait`, `futex`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub program_calls: Vec<ClassTime>,
}

/// The names of [`Breakdown::woken`], in order.
pub const WOKEN_BY: [WokenBy; 3] = [WokenBy::Program, WokenBy::Outside, WokenBy::Interrupt];

impl Breakdown {
    /// The breakdown of `profile`'s thread times, or `None` when it has none (no `offcpu` probe).
    pub fn of(profile: &Profile) -> Option<Breakdown> {
        if profile.thread_times.is_empty() {
            return None;
        }
        let wall_ns = profile.metadata.duration_ns;
        let thread_ns = profile
            .thread_times
            .iter()
            .fold(0u64, |a, t| a.saturating_add(t.wall_ns));
        let classes = TimeClass::ALL
            .iter()
            .map(|&class| {
                let total_ns = profile
                    .thread_times
                    .iter()
                    .fold(0u64, |a, t| a.saturating_add(t.ns(class)));
                ClassTime {
                    name: class.name().to_string(),
                    total_ns,
                    avg_threads: share(total_ns, wall_ns),
                    share_of_thread_time: share(total_ns, thread_ns),
                }
            })
            .collect();
        let time = |name: &str, total_ns: u64| ClassTime {
            name: name.to_string(),
            total_ns,
            avg_threads: share(total_ns, wall_ns),
            share_of_thread_time: share(total_ns, thread_ns),
        };
        let knows_wakers = profile.thread_times.iter().any(|t| !t.woken_ns.is_empty());
        let woken = if knows_wakers {
            WOKEN_BY
                .iter()
                .map(|&by| {
                    let ns = profile.thread_times.iter().fold(0u64, |a, t| {
                        a.saturating_add(t.woken_ns.get(&by).copied().unwrap_or(0))
                    });
                    time(by.name(), ns)
                })
                .collect()
        } else {
            Vec::new()
        };
        // The report's contention and idle waits, summed once for every view
        // (`report::Classified`), where who ended them is known, and the calls the contention
        // slept in.
        let classified = crate::report::Classified::of(profile);
        let mut calls: BTreeMap<&str, u64> = BTreeMap::new();
        let roles = if classified.wakers_known {
            for (w, role) in profile.waits.iter().zip(wait_roles(profile)) {
                if role.is_some_and(|r| r.role == WaitRole::Contention) {
                    let call = offcpu_call(w).unwrap_or(if w.is_from(&catalog::FUTEX) {
                        // The futex probe's waits are all in the system call of that name.
                        "futex"
                    } else {
                        ""
                    });
                    if !call.is_empty() {
                        *calls.entry(call).or_default() += w.stats.total_ns;
                    }
                }
            }
            vec![
                time(WaitRole::Contention.name(), classified.contention_ns),
                time(WaitRole::Idle.name(), classified.idle_ns),
            ]
        } else {
            Vec::new()
        };
        let mut program_calls: Vec<ClassTime> =
            calls.into_iter().map(|(call, ns)| time(call, ns)).collect();
        program_calls.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        program_calls.truncate(3);
        Some(Breakdown {
            threads: profile.thread_times.len() as u64,
            thread_ns,
            avg_threads: share(thread_ns, wall_ns),
            classes,
            woken,
            roles,
            program_calls,
        })
    }

    /// The share of thread time in the report's `contention` or `idle` waits
    /// ([`Breakdown::roles`]), `None` when unknown.
    pub fn role_share(&self, role: WaitRole) -> Option<f64> {
        self.roles
            .iter()
            .find(|c| c.name == role.name())
            .map(|c| c.share_of_thread_time)
    }

    /// The class named `name`.
    pub fn class(&self, name: &str) -> Option<&ClassTime> {
        self.classes.iter().find(|c| c.name == name)
    }
}

/// Causes kept per level ([`LevelWhy::causes`]).
pub const WHY_PER_LEVEL: usize = 3;

/// Frames kept of a cause's stack ([`LevelCause::stack`]).
const WHY_FRAMES: usize = 4;

/// What a level's waits come down to: `lockscope why`'s first causes for the threads that did
/// the work ([`crate::why`]), for levels recorded with the `waitfor` probe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelWhy {
    /// The analysed thread groups (`one_connection*`), as `why` chose them.
    pub groups: Vec<String>,
    /// Their first causes, best first (at most [`WHY_PER_LEVEL`]; idle left out).
    pub causes: Vec<LevelCause>,
}

/// One cause of a [`LevelWhy`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelCause {
    /// Its kind, as `lockscope why` names it (`cpu`, `cpu-saturation`, `sleep`, `io`, `cycle`,
    /// `depth-limit`, `unknown`; `docs/WHY-JSON.md`).
    pub kind: String,
    /// The root's user stack by function, leaf first, its first few frames (empty when unknown).
    pub stack: Vec<String>,
    /// The system call the root slept in (`sleep`, `io`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// Share of the analysed threads' wall time, 0 to 1.
    pub share: f64,
    /// The root threads' groups, heaviest first (at most three).
    pub threads: Vec<String>,
}

impl LevelWhy {
    /// `lockscope why`'s answer for `profile` with its default choice of threads, or `None` when
    /// the profile has no bottleneck analysis.
    pub fn of(profile: &Profile) -> Option<LevelWhy> {
        let options = WhyOptions {
            top: WHY_PER_LEVEL,
            ..WhyOptions::default()
        };
        let why = Why::build(profile, &options).ok()?;
        Some(LevelWhy {
            groups: why
                .analysed
                .groups
                .iter()
                .map(|g| g.group.clone())
                .collect(),
            causes: why
                .causes
                .iter()
                .map(|c| LevelCause {
                    kind: c.kind.name().to_string(),
                    stack: c.stack.iter().take(WHY_FRAMES).cloned().collect(),
                    call: c.call.clone(),
                    share: c.share,
                    threads: c.threads.iter().take(3).map(|t| t.name.clone()).collect(),
                })
                .collect(),
        })
    }

    /// Its causes in words, for the HTML summary: `` request-*: `cpu` at `f <- g` 41.7%,
    /// `cpu-saturation` at `...` 0.4% ``.
    pub fn words(&self) -> String {
        let causes: Vec<String> = self
            .causes
            .iter()
            .map(|c| format!("{} {}", c.words(), format_fraction(c.share)))
            .collect();
        let causes = if causes.is_empty() {
            "no cause in the program".to_string()
        } else {
            causes.join(", ")
        };
        format!("{}: {causes}", self.groups.join(", "))
    }
}

impl LevelCause {
    /// The cause in words: `` `cpu` at `f <- g <- h` `` or `` `io` in `fdatasync` at `...` ``.
    pub fn words(&self) -> String {
        let mut text = format!("`{}`", self.kind);
        if let Some(call) = &self.call {
            let _ = write!(text, " in `{call}`");
        }
        if !self.stack.is_empty() {
            let _ = write!(text, " at `{}`", self.stack.join(" <- "));
        }
        text
    }
}

/// One concurrency level of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// The concurrency (`{c}` in the load command).
    pub concurrency: u32,
    /// Operations per second the load tool reported.
    pub throughput: f64,
    /// `throughput` over the first level's (1.0 = 100%).
    pub scaling: f64,
    /// The profile recorded at this level, relative to the sweep file.
    pub profile: String,
    /// The load command's standard output, relative to the sweep file.
    pub load_output: String,
    /// Wall time of the recording, nanoseconds.
    pub wall_ns: u64,
    /// Waits recorded.
    pub waits: u64,
    /// Total wait time recorded, nanoseconds.
    pub wait_ns: u64,
    /// Waits lost while recording (every share undercounts when non-zero).
    pub lost_events: u64,
    /// Wait time per kind, largest first.
    pub kinds: Vec<Share>,
    /// Wait time per thread group, largest first (at most 10).
    pub threads: Vec<Share>,
    /// Wait time per canonical site, largest first (at most 10).
    pub top_sites: Vec<Share>,
    /// Where the threads' time went; `None` when the level was recorded without the `offcpu`
    /// probe (and in sweep files of version 1).
    #[serde(default)]
    pub breakdown: Option<Breakdown>,
    /// Processes the level recorded (its profile's process table); `None` in sweep files older
    /// than this field, and for profiles without a table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Processes the target had once the level's recording ran; `None` when the recorder cannot
    /// tell (and in older sweep files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_processes: Option<u64>,
    /// How many of [`Level::target_processes`] the level did not record (not in its process
    /// table); more than none is a warning. Counted by pid, not by comparing counts: children
    /// a server forks under the load can make up the number while the workers that existed are
    /// missing. `None` when the recorder cannot tell (and in older sweep files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed_processes: Option<u64>,
    /// Wait time per command of the recorded processes (matched by command, not pid), when the
    /// level recorded several processes; largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandShare>,
    /// What the level's waits come down to (`lockscope why`), when it was recorded with the
    /// `waitfor` probe (`--probes bottleneck`); `None` otherwise and in older sweep files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<LevelWhy>,
}

/// The processes of one command at one level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandShare {
    /// The command line (`/usr/sbin/apache2 -DFOREGROUND`, `[kworker/u*:*]`).
    pub command: String,
    /// Processes with it.
    pub processes: u64,
    /// Their threads with records.
    pub threads: u64,
    /// Their wait time, nanoseconds.
    pub total_ns: u64,
    /// `total_ns` over the recording's wall time.
    pub avg_threads: f64,
}

/// Where throughput stops rising.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// The first level that no later level beats by more than 5%: where throughput stops rising.
    pub concurrency: u32,
    /// Its throughput.
    pub throughput: f64,
    /// Its scaling against the first level.
    pub scaling: f64,
}

/// A whole sweep, as written to `sweep.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// Schema version ([`SWEEP_VERSION`]).
    pub sweep_version: u32,
    /// The load command, with `{c}` where the level goes.
    pub load: String,
    /// The server command lockscope started, if it started one.
    pub server: Option<String>,
    /// The recorded process (the first one given; 0 for a cgroup or all processes).
    pub pid: u32,
    /// What every level recorded, in words (`pid 12 and its descendants`, `cgroup X`); `None`
    /// in sweep files older than this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Recording time per level, nanoseconds.
    pub duration_ns: u64,
    /// Parser that read the throughput (`sysbench`, `ab`, `wrk`, `regex`).
    pub throughput_parser: String,
    /// Unit of the throughput (`transactions/s`).
    pub throughput_unit: String,
    /// The levels in the order run.
    pub levels: Vec<Level>,
    /// The knee, or `None` when throughput rose at every level.
    pub knee: Option<Knee>,
    /// One sentence for a writeup: the knee and the waits that grow across it.
    pub finding: String,
    /// What makes levels hard to compare (lost events, a level with no waits), one sentence
    /// each; empty when nothing is wrong.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The probes every level's recording was asked to attach (`--probes`); `None` when none
    /// were given (the backend's default probes), and in sweep files older than this field.
    #[serde(default)]
    pub probes: Option<Vec<String>>,
    /// The `--min-block` every level was recorded with, nanoseconds; `None` when none was given
    /// (the recording's default, 10 µs), and in sweep files older than this field.
    #[serde(default)]
    pub min_block_ns: Option<u64>,
    /// The `--syscalls` every level was recorded with; `None` when none were given (all system
    /// calls), and in sweep files older than this field.
    #[serde(default)]
    pub syscalls: Option<Vec<String>>,
}

/// Sentences about levels that make the sweep hard to trust: lost events, no waits at all.
pub fn level_warnings(levels: &[Level]) -> Vec<String> {
    let mut out = Vec::new();
    for level in levels {
        if level.lost_events > 0 {
            out.push(format!(
                "level {} lost {} waits while recording: its shares undercount",
                level.concurrency, level.lost_events
            ));
        }
        if let (Some(missed), Some(has)) = (level.missed_processes, level.target_processes) {
            if missed > 0 {
                out.push(format!(
                    "level {} missed {missed} of the {has} {} the target has: its waits are \
                     not the whole server's (record the process tree: --tree, or its cgroup)",
                    level.concurrency,
                    if has == 1 { "process" } else { "processes" }
                ));
            }
        }
        if level.waits == 0 {
            out.push(format!(
                "level {} recorded no waits while the load ran: the recording may have missed the server",
                level.concurrency
            ));
        }
    }
    out
}

/// `stats` as shares of `wall_ns` and of `thread_ns` (when there is a breakdown), largest first,
/// the first `keep` (all when 0).
fn shares(
    stats: BTreeMap<String, WaitStats>,
    wall_ns: u64,
    thread_ns: Option<u64>,
    keep: usize,
) -> Vec<Share> {
    let mut out: Vec<Share> = stats
        .into_iter()
        .map(|(name, s)| Share {
            name,
            count: s.count,
            total_ns: s.total_ns,
            avg_threads: share(s.total_ns, wall_ns),
            share_of_thread_time: thread_ns.map(|t| share(s.total_ns, t)),
        })
        .collect();
    out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    if keep > 0 {
        out.truncate(keep);
    }
    out
}

/// The level summary of one recorded profile (scaling is filled in later).
pub fn summarize_level(
    concurrency: u32,
    throughput: f64,
    profile: &Profile,
    files: (&str, &str),
) -> Level {
    let wall_ns = profile.metadata.duration_ns;
    // The waits as every view counts them: the intervals of threads waiting for a CPU are CPU
    // saturation (the breakdown's run queue), not waits; the top sites keep them, as the diff's
    // stacks do, where the finding names them for what they are.
    let waits = crate::report::waits_only(profile);
    let kinds = waits
        .totals_by_kind()
        .into_iter()
        .map(|(k, s)| (k.name().to_string(), s))
        .collect();
    let breakdown = Breakdown::of(profile);
    let thread_ns = breakdown.as_ref().map(|b| b.thread_ns);
    Level {
        concurrency,
        throughput,
        scaling: 1.0,
        profile: files.0.to_string(),
        load_output: files.1.to_string(),
        wall_ns,
        waits: waits.counted_waits().map(|w| w.stats.count).sum(),
        wait_ns: waits.counted_waits().map(|w| w.stats.total_ns).sum(),
        lost_events: profile.metadata.losses.lost_events(),
        kinds: shares(kinds, wall_ns, thread_ns, 0),
        threads: shares(thread_groups(&waits), wall_ns, thread_ns, TOP_PER_LEVEL),
        top_sites: shares(canonical_sites(profile), wall_ns, thread_ns, TOP_PER_LEVEL),
        breakdown,
        processes: (!profile.processes.is_empty()).then_some(profile.processes.len() as u64),
        target_processes: None,
        missed_processes: None,
        commands: command_shares(profile, wall_ns),
        why: LevelWhy::of(profile),
    }
}

/// Wait time per command of a profile of several processes, largest first (empty for one).
fn command_shares(profile: &Profile, wall_ns: u64) -> Vec<CommandShare> {
    let groups = crate::analysis::processes::command_groups(profile);
    if groups.iter().map(|g| g.processes).sum::<usize>() < 2 {
        return Vec::new();
    }
    let mut out: Vec<CommandShare> = groups
        .into_iter()
        .map(|g| CommandShare {
            avg_threads: share(g.waits.total_ns, wall_ns),
            command: g.command,
            processes: g.processes as u64,
            threads: g.threads as u64,
            total_ns: g.waits.total_ns,
        })
        .collect();
    out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.command.cmp(&b.command)));
    out.truncate(TOP_PER_LEVEL);
    out
}

/// Fills in each level's scaling against the first level.
pub fn fill_scaling(levels: &mut [Level]) {
    let base = levels.first().map_or(0.0, |l| l.throughput);
    for level in levels {
        level.scaling = if base > 0.0 {
            level.throughput / base
        } else {
            0.0
        };
    }
}

/// The level of `levels` that `knee` names, `None` without a knee.
pub fn knee_level<'a>(levels: &'a [Level], knee: Option<&Knee>) -> Option<&'a Level> {
    let knee = knee?;
    levels.iter().find(|l| l.concurrency == knee.concurrency)
}

/// The knee: the first level that no later level beats by more than [`KNEE_MIN_GAIN`], i.e.
/// where throughput stops rising for good (a dip that later recovers is not a knee). `None` when
/// throughput still rises at the last level (or there is only one level).
pub fn find_knee(levels: &[Level]) -> Option<Knee> {
    levels
        .iter()
        .enumerate()
        .take(levels.len().saturating_sub(1))
        .find(|(i, here)| {
            levels[i + 1..]
                .iter()
                .all(|later| later.throughput < here.throughput * (1.0 + KNEE_MIN_GAIN))
        })
        .map(|(_, here)| Knee {
            concurrency: here.concurrency,
            throughput: here.throughput,
            scaling: here.scaling,
        })
}

/// Reads a sweep file, or `sweep.json` inside a sweep directory.
pub fn read_sweep(path: &Path) -> Result<(Sweep, PathBuf), SweepError> {
    let file = if path.is_dir() {
        path.join(SWEEP_FILE)
    } else {
        path.to_path_buf()
    };
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(source) => return Err(SweepError::ReadSweep { path: file, source }),
    };
    let mut sweep: Sweep = match serde_json::from_str(&text) {
        Ok(sweep) => sweep,
        Err(source) => return Err(SweepError::NotASweep { path: file, source }),
    };
    if !(OLDEST_SWEEP_VERSION..=SWEEP_VERSION).contains(&sweep.sweep_version) {
        return Err(SweepError::UnknownVersion {
            path: file,
            version: sweep.sweep_version,
        });
    }
    if sweep.sweep_version < SWEEP_VERSION {
        // Its numbers read as today's (`share_of_wall` is `avg_threads`); only its sentence was
        // written in the old units (`2039% of wall time`), so it is written again.
        sweep.finding = finding(&sweep.levels, sweep.knee.as_ref());
        sweep.sweep_version = SWEEP_VERSION;
    }
    let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    Ok((sweep, dir))
}
