//! The recorder: loads and attaches the probes for one target, polls them, and builds the
//! [`Profile`] when the recording ends.
//!
//! This module holds the recorder's state, its options and status, and the poll; the rest is
//! split by job: `start` (checking, loading, attaching, launching a command), `initial_set` (the
//! target set a recording starts with), `processes` (following forks, execs, exits and a
//! cgroup's members), `snapshots` (the `/proc/PID/maps` snapshots and unwind table refreshes),
//! `child` (a launched command's reaping and termination), `finish` (draining and building
//! the profile) and `window` (the profile so far, for a live view).

mod child;
mod finish;
mod initial_set;
mod processes;
mod snapshots;
mod start;
mod window;
pub use window::LiveSnapshot;

use crate::bottleneck::BottleneckStream;
use crate::error::Error;
use crate::probe::{monotonic_ns, ProbeSettings};
use crate::probe_set::ProbeSet;
use crate::procmaps::MapsCache;
use crate::shared::SharedMaps;
use crate::target_set::{Cgroup, ProcessTable};
use crate::unwind::{UnwindOptions, UnwindStats, Unwinder};
use child::Child;
use lockscope_probes::{catalog, Losses, ProbeAttachment, Profile, RecordedTarget, Target};
use std::collections::{BTreeSet, HashMap};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// Minimum time between two `/proc/PID/maps` snapshots of the traced processes.
const SNAPSHOT_INTERVAL: Duration = Duration::from_millis(250);

/// For this long after the start, maps are snapshotted at every poll: a launched program maps
/// its libraries right after exec and its first waits may end before one interval has passed,
/// and a wait whose code has no mapping table yet is unwound only as far as the file fallback.
const EARLY_SNAPSHOTS: Duration = Duration::from_secs(1);

/// Options of one recording.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// What to record. No default.
    pub target: Target,
    /// Catalog names of probes to attach. Default: the catalog's default probes (`["futex"]`).
    pub probes: Vec<String>,
    /// Settings of the probes. Default: [`ProbeSettings::default`].
    pub probe_settings: ProbeSettings,
    /// How user-stack unwinding tables are built and cached. Default:
    /// [`UnwindOptions::default`] (no cache; every table ready before recording).
    pub unwind: UnwindOptions,
}

impl RecordOptions {
    /// Options recording `target` with the default probes.
    pub fn new(target: Target) -> Self {
        Self {
            target,
            probes: catalog::defaults().map(|p| p.name.to_owned()).collect(),
            probe_settings: ProbeSettings::default(),
            unwind: UnwindOptions::default(),
        }
    }
}

/// What a recording produced ([`Recorder::finish_reporting`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct Recording {
    /// The profile.
    pub profile: Profile,
    /// What the user-stack unwinder did (`None` without a probe that captures stacks).
    pub unwind: Option<UnwindStats>,
    /// Files whose symbols could not be read, with why: their frames are addresses.
    pub symbol_failures: Vec<String>,
}

/// What [`Recorder::poll`] reports.
#[derive(Clone, Copy, Debug)]
pub struct RecorderStatus {
    /// Time since the probes were attached.
    pub elapsed: Duration,
    /// Waits seen so far.
    pub events: u64,
    /// What could not be recorded so far.
    pub losses: Losses,
    /// True once the target is gone: the launched command, or every process given (with a
    /// tree, every process of the set). Never for a cgroup or all processes.
    pub target_exited: bool,
}

/// How the target set is kept up to date.
#[derive(Debug)]
enum Scope {
    /// Processes given by pid, and their descendants with `tree`.
    Pids { given: BTreeSet<u32>, tree: bool },
    /// A cgroup's processes, rescanned.
    Cgroup(Cgroup),
    /// Every process.
    All,
    /// A launched command.
    Command,
}

/// One recording in progress.
pub struct Recorder {
    /// The requested probes. Dropping them (and `shared`) releases every BPF object.
    probe_set: ProbeSet,
    /// The maps every probe shares (`targets`, stacks); also follows forks.
    shared: SharedMaps,
    /// Unwind tables of the traced processes (with the futex probe).
    unwinder: Option<Unwinder>,
    /// The unwinder's count of pcs it could not place, at the last refresh: when it grows, a
    /// process mapped new code (dlopen, exec) and its tables are refreshed at the next poll.
    unwind_misses: u64,
    probes: Vec<ProbeAttachment>,
    target: RecordedTarget,
    scope: Scope,
    /// The processes recorded, for the profile.
    processes: ProcessTable,
    /// Processes that exited (or left the recorded cgroup) during the last poll: taken out of
    /// the target set at the next, once their last events are in.
    leaving: Vec<u32>,
    /// Processes forked or exec'ed less than [`EARLY_SNAPSHOTS`] ago, with when: their maps
    /// are snapshotted at every poll.
    young: HashMap<u32, Instant>,
    /// Each process's `/proc/PID/maps` at its last snapshot: a periodic snapshot that reads the
    /// same text skips the parsing, the files' opening and the unwind table refresh, which cost
    /// more than the rest of a poll of a server that maps nothing new.
    maps_seen: HashMap<u32, String>,
    /// The unwinder had tables still being built at the last poll.
    tables_pending: bool,
    /// What the profile and the user are told: optional capabilities this process lacks (from
    /// the privilege check), targets not recorded as asked.
    warnings: Vec<String>,
    /// Process events lost, at the last look (a rise makes the next poll rescan).
    process_events_lost: u64,
    child: Option<Child>,
    maps: MapsCache,
    last_snapshot: Option<Instant>,
    last_rescan: Instant,
    /// When the probes were attached: the recording's start, which its duration counts from.
    started: Instant,
    /// How long it recorded, once [`Recorder::end`] (or [`Recorder::stop`]) ended it.
    stopped: Option<Duration>,
    /// True once [`Recorder::stop`] detached the probes.
    detached: bool,
    start_unix_ns: u64,
    target_exited: bool,
    /// The bottleneck analysis' stream and engine (the `waitfor` probe).
    bottleneck: Option<BottleneckStream>,
    /// What the snapshots resolved (the symbolizer, the stacks and their ids), kept between
    /// snapshots (`window`).
    snapshot_cache: Option<crate::resolve::ResolveCache>,
}

impl Recorder {
    /// Pid of the target (the launched child, or the first pid attached to); 0 for a cgroup or
    /// all processes.
    pub fn target_pid(&self) -> u32 {
        self.target.pid
    }

    /// What is recorded, as the profile will say it.
    pub fn target(&self) -> &RecordedTarget {
        &self.target
    }

    /// What the user should know now: optional capabilities this process lacks (kernel frames
    /// stay addresses without CAP_SYSLOG, ...), targets not recorded as asked (descendants not
    /// recorded, an empty cgroup); the profile's metadata carries them too.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The processes recorded now (every process of the machine's for `-a`).
    pub fn recorded_pids(&self) -> Vec<u32> {
        match self.scope {
            Scope::All => self.processes.running_user(),
            _ => self.shared.targets(),
        }
    }

    /// How many processes were recorded so far (running or not).
    pub fn processes_recorded(&self) -> usize {
        self.processes.len()
    }

    /// Exit status of a launched command once it exited and was reaped (by [`Recorder::poll`]).
    pub fn target_exit_status(&self) -> Option<ExitStatus> {
        self.child.as_ref().and_then(|c| c.status)
    }

    /// Reads the counters, follows the target set (forks, execs and exits; a cgroup's
    /// processes), checks whether the target is still alive, and snapshots the memory maps of
    /// every traced process at most every 250 ms, of a new one at every poll during its first
    /// second (so that symbolization works after they exited). Cheap: call it often, and every
    /// [`Recorder::EARLY_POLL_INTERVAL`] while [`Recorder::wants_early_polls`] says so.
    pub fn poll(&mut self) -> Result<RecorderStatus, Error> {
        if let Some(bottleneck) = &mut self.bottleneck {
            bottleneck.consume(monotonic_ns())?;
        }
        let counters = self.probe_set.counters()?;
        self.follow_processes();
        if !self.target_exited {
            self.target_exited = self.target_gone();
        }
        // Tables built in the background replace their mappings' pending marks at the refresh.
        let tables_ready = self.unwinder.as_mut().is_some_and(Unwinder::collect_ready);
        let refresh = self.unwinder_missed()? || tables_ready;
        if refresh
            || self
                .last_snapshot
                .is_none_or(|last| last.elapsed() >= SNAPSHOT_INTERVAL)
            || self.early()
        {
            self.snapshot_maps(refresh);
        } else {
            self.snapshot_young();
        }
        Ok(RecorderStatus {
            elapsed: self.started.elapsed(),
            events: counters.events,
            losses: counters.losses,
            target_exited: self.target_exited,
        })
    }

    /// Waits `timeout` before the next [`Recorder::poll`], or less when the bottleneck stream's
    /// ring fills up meanwhile (its programs then wake the recorder), so that a burst is read
    /// before the ring is full. A plain sleep without the stream.
    pub fn wait(&self, timeout: Duration) {
        match &self.bottleneck {
            Some(bottleneck) => bottleneck.wait(timeout),
            None => std::thread::sleep(timeout),
        }
    }

    /// How often to poll while [`Recorder::wants_early_polls`]: each poll then snapshots the
    /// maps of the processes that are new, so that a program's unwinding tables follow its
    /// libraries within this long of their mapping.
    pub const EARLY_POLL_INTERVAL: Duration = Duration::from_millis(10);

    /// True during the recording's first second, and during the first second of any process
    /// forked or exec'ed since, when frequent polls (every [`Recorder::EARLY_POLL_INTERVAL`])
    /// shorten the time a new program's stacks are unwound by the file fallback alone. That
    /// fallback resolves at most one library per stack where interrupts are disabled (the
    /// `offcpu` probe's sched_switch: bpf_find_vma's unlock work is then still pending), so such
    /// stacks are cut short until the process's table exists.
    pub fn wants_early_polls(&self) -> bool {
        self.early() || !self.young.is_empty()
    }

    /// True during the recording's first second when a program may still be mapping its
    /// libraries, or be unwound without the tables of some: a launched command (just exec'ed),
    /// a cgroup's or the machine's processes (found as the recording goes), or processes
    /// given by pid whose tables are still being built. Processes given by pid with their
    /// tables ready map nothing new for being recorded: polling them every 10 ms for a second
    /// cost more than the rest of an `offcpu` recording's polls.
    fn early(&self) -> bool {
        self.started.elapsed() < EARLY_SNAPSHOTS
            && (!matches!(self.scope, Scope::Pids { .. }) || self.tables_pending)
    }

    /// Time since the probes were attached (the recording's duration so far), or the whole
    /// recording's once [`Recorder::end`] ended it.
    pub fn elapsed(&self) -> Duration {
        self.stopped.unwrap_or_else(|| self.started.elapsed())
    }

    /// What the user-stack unwinder did so far (`None` without a probe that captures stacks).
    pub fn unwind_stats(&self) -> Result<Option<UnwindStats>, Error> {
        self.unwinder.as_ref().map(Unwinder::stats).transpose()
    }
}

impl Drop for Recorder {
    /// A recorder dropped without [`Recorder::finish`] still leaves no launched command behind.
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            child.terminate();
        }
    }
}
