//! The recorder: loads and attaches the probes for one target, polls them, and builds the
//! [`Profile`] when the recording ends.

use crate::environment::check_privileges;
use crate::error::Error;
use crate::launch::PendingChild;
use crate::object::add_losses;
use crate::priority::RaisedPriority;
use crate::probe::{monotonic_ns, ProbeSettings};
use crate::probe_set::{probe_names, ProbeSet};
use crate::procmaps::MapsCache;
use crate::resolve::{self, resolve};
use crate::shared::{ProcessEventKind, SharedMaps};
use crate::targets::{
    all_processes, descendants, process_alive, process_command, process_tgid, unrecorded_children,
    Cgroup, ProcessTable, TargetSpec,
};
use crate::unwind::{StackMaps, UnwindOptions, UnwindStats, Unwinder};
use crate::waitfor::WaitForStream;
use lockscope_probes::{
    catalog, host, AttachStatus, Losses, Metadata, ProbeAttachment, ProcessInfo, Profile, Target,
};
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Backend name in profiles.
const BACKEND: &str = "ebpf";
/// Minimum time between two `/proc/PID/maps` snapshots of the traced processes.
const SNAPSHOT_INTERVAL: Duration = Duration::from_millis(250);

/// For this long after the start, maps are snapshotted at every poll: a launched program maps
/// its libraries right after exec and its first waits may end before one interval has passed,
/// and a wait whose code has no mapping table yet is unwound only as far as the file fallback.
const EARLY_SNAPSHOTS: Duration = Duration::from_secs(1);
/// How long a launched command gets to exit after SIGTERM before it is killed.
const TERMINATE_GRACE: Duration = Duration::from_secs(2);

/// Options of one recording.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// What to record. No default.
    pub target: TargetSpec,
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
    pub fn new(target: TargetSpec) -> Self {
        Self {
            target,
            probes: catalog::defaults().map(|p| p.name.to_owned()).collect(),
            probe_settings: ProbeSettings::default(),
            unwind: UnwindOptions::default(),
        }
    }
}

/// A finished recording ([`Recorder::finish_reporting`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct Finished {
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

/// A launched command.
#[derive(Debug)]
struct Child {
    pid: libc::pid_t,
    /// Its wait status, once reaped.
    status: Option<ExitStatus>,
}

impl Child {
    /// Reaps the child if it exited; true when it has.
    fn try_reap(&mut self) -> bool {
        if self.status.is_none() {
            let mut status = 0;
            // SAFETY: non-blocking wait for our own child; `status` is a valid out pointer.
            if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } == self.pid {
                self.status = Some(ExitStatus::from_raw(status));
            }
        }
        self.status.is_some()
    }

    /// Asks a still running child to terminate (SIGTERM, then SIGKILL after a grace period) and
    /// reaps it. Its pid is ours until reaped, so it cannot have been reused.
    fn terminate(&mut self) {
        let ended = host::terminate(self.pid as u32, TERMINATE_GRACE, || self.try_reap());
        if ended == host::Ended::Killed {
            let mut status = 0;
            // SAFETY: blocking wait for our own child; `status` is a valid out pointer.
            while unsafe { libc::waitpid(self.pid, &mut status, 0) } < 0
                && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
            {}
            self.status = Some(ExitStatus::from_raw(status));
        }
    }
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
    target: Target,
    scope: Scope,
    /// The processes recorded, for the profile.
    processes: ProcessTable,
    /// Processes that exited (or left the recorded cgroup) during the last poll: taken out of
    /// the target set at the next, once their last events are in.
    leaving: Vec<u32>,
    /// Processes forked or exec'ed less than [`EARLY_SNAPSHOTS`] ago, with when: their maps
    /// are snapshotted at every poll.
    young: HashMap<u32, Instant>,
    /// What the profile and the user are told: optional capabilities this process lacks (from
    /// the privilege check), targets not recorded as asked.
    warnings: Vec<String>,
    /// Process events lost, at the last look (a rise makes the next poll rescan).
    process_events_lost: u64,
    child: Option<Child>,
    maps: MapsCache,
    last_snapshot: Option<Instant>,
    last_rescan: Instant,
    started: Instant,
    start_unix_ns: u64,
    target_exited: bool,
    /// The wait-for analysis' stream and engine (the `waitfor` probe).
    waitfor: Option<WaitForStream>,
}

/// What became of each requested probe.
fn attachments(names: &[String], probe_set: &ProbeSet) -> Vec<ProbeAttachment> {
    names
        .iter()
        .map(|name| {
            probe_set.status(name).unwrap_or_else(|| ProbeAttachment {
                probe: name.clone(),
                hook: String::new(),
                status: AttachStatus::Failed {
                    reason: "not implemented by the eBPF backend".into(),
                },
            })
        })
        .collect()
}

/// An error when not one of `probes` attached: a recording of nothing is no recording.
fn nothing_attached(probes: &[ProbeAttachment]) -> Result<(), Error> {
    if probes
        .iter()
        .any(|p| !matches!(p.status, AttachStatus::Failed { .. }))
    {
        return Ok(());
    }
    Err(Error::NothingAttached {
        reasons: probes
            .iter()
            .map(|p| match &p.status {
                AttachStatus::Failed { reason } => format!("{}: {reason}", p.probe),
                _ => p.probe.clone(),
            })
            .collect::<Vec<_>>()
            .join("; "),
    })
}

impl Recorder {
    /// Checks privileges and BTF, loads and attaches, and (for [`TargetSpec::Command`]) launches
    /// the command only after the probes are attached.
    pub fn start(options: RecordOptions) -> Result<Recorder, Error> {
        check_probe_names(&options.probes)?;
        // The processes given are checked for access (their files are read for symbols); a
        // cgroup's or the machine's are found later, and what cannot be read is said then.
        let given: Vec<u32> = match &options.target {
            TargetSpec::Pid(pid) => vec![*pid],
            TargetSpec::Pids { pids, .. } => pids.clone(),
            TargetSpec::Cgroup(_) | TargetSpec::All | TargetSpec::Command(_) => Vec::new(),
        };
        let mut warnings = check_privileges(&options.probes, &given)?;
        if options.probes.iter().any(|p| p == catalog::SYSCALL.name) {
            crate::probe::syscall_numbers(&options.probe_settings.syscalls)?;
        }
        // Loading is CPU work on this thread (the verifier): on a loaded server it must not wait
        // behind the server's threads. Dropped before a command is forked (it would inherit it).
        let raised = RaisedPriority::raise();
        // The shared maps first: every probe object reuses them (with the wait-for stream's ring
        // sized when it is asked for).
        let stream = options.probes.iter().any(|p| p == catalog::WAITFOR.name);
        let mut shared = SharedMaps::load(stream.then_some(crate::waitfor::EVENTS_BYTES))?;
        let waitfor = stream
            .then(|| WaitForStream::open(&shared, monotonic_ns()))
            .transpose()?;
        // A probe that fails to load is reported as failed; the others still record.
        let mut probe_set = ProbeSet::load(&options.probes, &shared, &options.probe_settings);

        // Every probe's stacks unwind with the same tables, in the shared maps.
        let mut unwinder = StackMaps::from_shared(&shared)
            .map(|maps| Unwinder::new(maps, &options.unwind))
            .transpose()?;

        let own = std::process::id();
        let mut processes = ProcessTable::default();
        let mut child = None;
        let (target, scope, attach_pid) = match &options.target {
            TargetSpec::Pid(pid) => Targets::new(&mut shared, &mut unwinder, &mut processes).pids(
                &[*pid],
                false,
                &mut warnings,
            )?,
            TargetSpec::Pids { pids, tree } => Targets::new(
                &mut shared,
                &mut unwinder,
                &mut processes,
            )
            .pids(pids, *tree, &mut warnings)?,
            TargetSpec::Cgroup(path) => Targets::new(&mut shared, &mut unwinder, &mut processes)
                .cgroup(path, own, &mut warnings)?,
            TargetSpec::All => Targets::new(&mut shared, &mut unwinder, &mut processes).all(own)?,
            TargetSpec::Command(argv) => {
                // Tables of the program and its libraries before it runs: its first waits
                // unwind (through the file fallback) before its process table exists.
                if let (Some(unwinder), Some(program)) = (&mut unwinder, argv.first()) {
                    unwinder.preload_command(program);
                }
                drop(raised);
                // Dropping `pending` on any error below makes the child exit unexecuted.
                let pending = PendingChild::fork(argv)?;
                let pid = pending.pid();
                shared.add_target(pid)?;
                shared.follow_forks()?;
                probe_set.attach(Some(pid));
                // Returning here drops `pending`: the command never runs.
                nothing_attached(&attachments(&options.probes, &probe_set))?;
                pending.release()?;
                let command: Vec<String> = argv
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                // Named as the program until its exec event names it as the kernel does.
                let name = argv
                    .first()
                    .and_then(|p| std::path::Path::new(p).file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                processes.exec(pid, &name);
                child = Some(Child {
                    pid: pid as libc::pid_t,
                    status: None,
                });
                let target = Target {
                    pid,
                    command,
                    launched: true,
                    ..Target::default()
                };
                (target, Scope::Command, Some(pid))
            }
        };
        if !matches!(scope, Scope::Command) {
            probe_set.attach(attach_pid);
            nothing_attached(&attachments(&options.probes, &probe_set))?;
        }

        let probes = attachments(&options.probes, &probe_set);

        let mut recorder = Recorder {
            probe_set,
            shared,
            unwinder,
            unwind_misses: 0,
            probes,
            target,
            scope,
            processes,
            leaving: Vec::new(),
            young: HashMap::new(),
            warnings,
            process_events_lost: 0,
            child,
            maps: MapsCache::new(),
            last_snapshot: None,
            last_rescan: Instant::now(),
            started: Instant::now(),
            start_unix_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            target_exited: false,
            waitfor,
        };
        recorder.snapshot_maps();
        Ok(recorder)
    }

    /// Pid of the target (the launched child, or the first pid attached to); 0 for a cgroup or
    /// all processes.
    pub fn target_pid(&self) -> u32 {
        self.target.pid
    }

    /// What is recorded, as the profile will say it.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// What the user should know now: optional capabilities this process lacks (kernel frames
    /// stay addresses without CAP_SYSLOG, ...), targets not recorded as asked (descendants not
    /// recorded, an empty cgroup); the profile's metadata carries them too.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
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
        if let Some(waitfor) = &mut self.waitfor {
            waitfor.consume(monotonic_ns())?;
        }
        let counters = self.probe_set.counters()?;
        self.follow_processes();
        if !self.target_exited {
            self.target_exited = self.target_gone();
        }
        // Tables built in the background replace their mappings' pending marks at the refresh.
        let tables_ready = self.unwinder.as_mut().is_some_and(Unwinder::collect_ready);
        if self
            .last_snapshot
            .is_none_or(|last| last.elapsed() >= SNAPSHOT_INTERVAL)
            || self.started.elapsed() < EARLY_SNAPSHOTS
            || self.unwinder_missed()?
            || tables_ready
        {
            self.snapshot_maps();
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
        self.started.elapsed() < EARLY_SNAPSHOTS || !self.young.is_empty()
    }

    /// Stops recording and builds the complete profile: drains the aggregated waits, symbolizes
    /// their stacks, releases every BPF program, link and map, then terminates a launched command
    /// that is still running.
    pub fn finish(self, end_reason: &str) -> Result<Profile, Error> {
        self.finish_reporting(end_reason)
            .map(|finished| finished.profile)
    }

    /// [`Recorder::finish`], with what became of the traced processes' files: the unwinder's
    /// statistics (files without a table among them) and the files whose symbols could not be
    /// read, for the recording's summary.
    pub fn finish_reporting(mut self, end_reason: &str) -> Result<Finished, Error> {
        // First: the per-thread times end here, not after the symbolization below.
        self.probe_set.detach();
        self.shared.detach();
        self.apply_process_events();
        self.snapshot_maps();
        let duration_ns = self.started.elapsed().as_nanos() as u64;
        let counters = self.probe_set.counters()?;
        let running = self.running_targets();
        let mut drained = self.probe_set.drain(&running)?;
        if let Some(waitfor) = self.waitfor.take() {
            drained.waitfor = Some(waitfor.finish(monotonic_ns())?);
        }
        let probe_warnings = std::mem::take(&mut drained.warnings);
        let resolve::Resolved {
            mut waits,
            threads,
            stacks,
            thread_times,
            wakeups,
            waitfor,
            symbol_failures,
        } = resolve(drained, &self.shared, &self.maps)?;
        let unwind = self.unwind_stats()?;
        if let Some(child) = &mut self.child {
            child.terminate();
        }
        waits.sort_by(|a, b| {
            b.stats
                .total_ns
                .cmp(&a.stats.total_ns)
                .then((a.pid, a.tid, a.object).cmp(&(b.pid, b.tid, b.object)))
        });
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.extend(probe_warnings);
        let lost = self.shared.process_events_lost();
        if lost > 0 {
            warnings.push(format!(
                "{lost} process events (forks, execs, exits) were lost: the process table may \
                 miss processes, their parents or their exit times"
            ));
        }
        let processes = self.process_table(&threads);
        let uname = host::Uname::current();
        let metadata = Metadata {
            lockscope_version: env!("CARGO_PKG_VERSION").to_owned(),
            backend: BACKEND.to_owned(),
            os: "linux".to_owned(),
            kernel_release: uname.release,
            hostname: uname.nodename,
            cpu_count: host::online_cpus(),
            libc: host::glibc_version(),
            target: self.target.clone(),
            start_unix_ns: self.start_unix_ns,
            duration_ns,
            probes: self.probes.clone(),
            events: counters.events,
            // Children that could not be followed (`targets` full): their events are missing.
            losses: add_losses(
                counters.losses,
                Losses {
                    dropped: self.shared.targets_full(),
                    ..Losses::default()
                },
            ),
            end_reason: end_reason.to_owned(),
            warnings,
        };
        Ok(Finished {
            profile: Profile {
                metadata,
                threads,
                stacks,
                waits,
                thread_times,
                wakeups,
                waitfor,
                processes,
            },
            unwind,
            symbol_failures,
        })
    }

    /// The process table of the profile: every process of the target set, and any other that
    /// has records (a process the table missed: its events lost), named by its threads.
    fn process_table(&mut self, threads: &[lockscope_probes::ThreadInfo]) -> Vec<ProcessInfo> {
        if matches!(self.scope, Scope::Command) {
            self.processes
                .set_command_if_unknown(self.target.pid, &self.target.command);
        }
        for thread in threads {
            if !self.processes.contains(thread.pid) && !self.processes.observe(thread.pid) {
                let name = threads
                    .iter()
                    .find(|t| t.pid == thread.pid && t.tid == thread.pid)
                    .map_or_else(|| thread.name.clone(), |t| t.name.clone());
                self.processes.insert(ProcessInfo {
                    pid: thread.pid,
                    name,
                    ..ProcessInfo::default()
                });
            }
        }
        std::mem::take(&mut self.processes).into_processes()
    }

    /// What the user-stack unwinder did so far (`None` without a probe that captures stacks).
    pub fn unwind_stats(&self) -> Result<Option<UnwindStats>, Error> {
        self.unwinder.as_ref().map(Unwinder::stats).transpose()
    }

    /// True when the BPF unwinder met pcs it could not place since the last refresh.
    fn unwinder_missed(&mut self) -> Result<bool, Error> {
        let Some(unwinder) = &self.unwinder else {
            return Ok(false);
        };
        let stats = unwinder.stats()?;
        let misses = stats.unknown_process + stats.unknown_mapping;
        let missed = misses != self.unwind_misses;
        self.unwind_misses = misses;
        // With every process recorded, a JIT or a process without a table misses all the time:
        // snapshotting the whole machine for it is left to the interval.
        Ok(missed && !matches!(self.scope, Scope::All))
    }

    /// True once the target is gone (see [`RecorderStatus::target_exited`]).
    fn target_gone(&mut self) -> bool {
        match &self.scope {
            Scope::Command => self.child.as_mut().is_some_and(Child::try_reap),
            Scope::Pids { given, tree: false } => given.iter().all(|&pid| !process_alive(pid)),
            Scope::Pids { tree: true, .. } => self
                .shared
                .targets()
                .into_iter()
                .all(|pid| !process_alive(pid)),
            Scope::Cgroup(_) | Scope::All => false,
        }
    }

    /// Follows the target set: takes out the processes that left at the last poll, applies
    /// the process events, and rescans a cgroup (every [`SNAPSHOT_INTERVAL`]) or, after lost
    /// events, `/proc` (every process recorded).
    fn follow_processes(&mut self) {
        for pid in std::mem::take(&mut self.leaving) {
            if !matches!(self.scope, Scope::All) {
                self.shared.remove_target(pid);
            }
            if let Some(unwinder) = &mut self.unwinder {
                unwinder.remove_process(pid);
            }
        }
        self.apply_process_events();
        let lost = self.shared.process_events_lost();
        let lost_more = lost != self.process_events_lost;
        self.process_events_lost = lost;
        let rescan = self.last_rescan.elapsed() >= SNAPSHOT_INTERVAL;
        match &self.scope {
            Scope::Cgroup(cgroup) if rescan || lost_more => {
                // The set before the cgroup is read: a child forked since is in the cgroup
                // already, and not taken out for missing from the list.
                let before: BTreeSet<u32> = self.shared.targets().into_iter().collect();
                let mut now = cgroup.processes();
                now.remove(&std::process::id());
                for &pid in now.difference(&before) {
                    if self.shared.add_target(pid).is_ok() {
                        self.processes.observe(pid);
                        self.maps.snapshot(pid);
                        if let Some(unwinder) = &mut self.unwinder {
                            let _ = unwinder.refresh(pid);
                        }
                    }
                }
                // Moved out (or exited): not recorded any more.
                self.leaving
                    .extend(before.difference(&now).filter(|&&pid| pid != 0));
                self.last_rescan = Instant::now();
            }
            Scope::All if lost_more => {
                let own = std::process::id();
                for pid in all_processes() {
                    if pid != own && !self.processes.contains(pid) && self.processes.observe(pid) {
                        self.young.insert(pid, Instant::now());
                    }
                }
            }
            _ => {}
        }
    }

    /// Applies the forks, execs and exits of recorded processes since the last call.
    fn apply_process_events(&mut self) {
        for event in self.shared.process_events() {
            let pid = event.pid;
            match event.kind {
                ProcessEventKind::Fork { parent, .. } => {
                    self.processes.fork(
                        pid,
                        parent,
                        event.time_ns,
                        &event.comm,
                        event.kernel_thread,
                    );
                    if !event.kernel_thread {
                        self.maps.inherit(pid, parent);
                        if let Some(unwinder) = &mut self.unwinder {
                            let _ = unwinder.inherit(pid, parent);
                        }
                        self.young.insert(pid, Instant::now());
                    }
                }
                ProcessEventKind::Exec => {
                    self.processes.exec(pid, &event.comm);
                    self.maps.exec(pid, event.time_ns);
                    self.maps.snapshot(pid);
                    if let Some(unwinder) = &mut self.unwinder {
                        let _ = unwinder.exec(pid);
                    }
                    self.young.insert(pid, Instant::now());
                }
                ProcessEventKind::Exit { .. } => {
                    self.processes.exit(pid, event.time_ns);
                    self.young.remove(&pid);
                    self.leaving.push(pid);
                }
            }
        }
    }

    /// The processes of the set that still run (those whose threads a probe may list).
    fn running_targets(&self) -> Vec<u32> {
        let mut pids = match self.scope {
            Scope::All => self.processes.running(),
            _ => self.shared.targets(),
        };
        pids.retain(|&pid| process_alive(pid));
        pids
    }

    /// Snapshots the maps of every process of the set, and forgets those that are gone.
    fn snapshot_maps(&mut self) {
        let mut pids = match self.scope {
            Scope::All => self.processes.running_user(),
            _ => self.shared.targets(),
        };
        if self.target.pid != 0 {
            pids.push(self.target.pid);
        }
        pids.sort_unstable();
        pids.dedup();
        let mut gone = Vec::new();
        for pid in pids {
            let alive = self.maps.snapshot(pid);
            if let Some(unwinder) = &mut self.unwinder {
                if alive {
                    // A failure leaves the process with its previous table; its stacks fall back
                    // to frame pointers and are counted (unknown_process, unknown_mapping).
                    let _ = unwinder.refresh(pid);
                }
            }
            if !alive && !process_alive(pid) {
                gone.push(pid);
            }
        }
        // After every live one's refresh: a child holds the files it shares with its parent
        // before the parent lets go of them.
        for pid in gone {
            self.processes.gone(pid);
            if let Some(unwinder) = &mut self.unwinder {
                // Gone: a later process reusing the pid must not unwind with its table.
                unwinder.remove_process(pid);
            }
            if !matches!(self.scope, Scope::All) && !self.leaving.contains(&pid) {
                self.leaving.push(pid);
            }
        }
        self.young
            .retain(|_, since| since.elapsed() < EARLY_SNAPSHOTS);
        if let Some(unwinder) = &mut self.unwinder {
            unwinder.prune_memos();
        }
        self.last_snapshot = Some(Instant::now());
    }

    /// Snapshots the maps of the processes forked or exec'ed in the last second.
    fn snapshot_young(&mut self) {
        self.young
            .retain(|_, since| since.elapsed() < EARLY_SNAPSHOTS);
        let young: Vec<u32> = self.young.keys().copied().collect();
        for pid in young {
            if self.maps.snapshot(pid) {
                if let Some(unwinder) = &mut self.unwinder {
                    let _ = unwinder.refresh(pid);
                }
            }
        }
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

/// Enters the processes of `set` in the process table and builds their unwind tables (the
/// urgent ones waited for: see [`Unwinder::add_process`]).
fn observe_and_unwind(
    set: &BTreeSet<u32>,
    processes: &mut ProcessTable,
    unwinder: &mut Option<Unwinder>,
) -> Result<(), Error> {
    for &pid in set {
        processes.observe(pid);
        if let Some(unwinder) = unwinder.as_mut() {
            unwinder.add_process(pid)?;
        }
    }
    Ok(())
}

/// Starting a recording's target set: the shared maps, the unwinder and the process table.
struct Targets<'a> {
    shared: &'a mut SharedMaps,
    unwinder: &'a mut Option<Unwinder>,
    processes: &'a mut ProcessTable,
}

impl<'a> Targets<'a> {
    fn new(
        shared: &'a mut SharedMaps,
        unwinder: &'a mut Option<Unwinder>,
        processes: &'a mut ProcessTable,
    ) -> Self {
        Targets {
            shared,
            unwinder,
            processes,
        }
    }

    /// Processes `pids` (thread ids stand for their processes), and with `tree` the descendants
    /// they have; without, each descendant not recorded is a warning.
    fn pids(
        self,
        pids: &[u32],
        tree: bool,
        warnings: &mut Vec<String>,
    ) -> Result<(Target, Scope, Option<u32>), Error> {
        let Targets {
            shared,
            unwinder,
            processes,
        } = self;
        let mut given = BTreeSet::new();
        for &pid in pids {
            given.insert(process_tgid(pid).ok_or(Error::NoSuchProcess(pid))?);
        }
        let first = *given.first().ok_or(Error::NoTargets)?;
        for &pid in &given {
            shared.add_target(pid)?;
        }
        // Forks are followed from here on: a scan after it misses no descendant.
        shared.follow_forks()?;
        let mut set = given.clone();
        if tree {
            loop {
                let new: Vec<u32> = descendants(&set)
                    .into_iter()
                    .filter(|pid| !set.contains(pid))
                    .collect();
                if new.is_empty() {
                    break;
                }
                for pid in new {
                    shared.add_target(pid)?;
                    set.insert(pid);
                }
            }
        } else {
            warnings.extend(unrecorded_children(&given));
        }
        observe_and_unwind(&set, processes, unwinder)?;
        let pids: Vec<u32> = if given.len() > 1 {
            given.iter().copied().collect()
        } else {
            Vec::new()
        };
        let target = Target {
            pid: first,
            command: process_command(first),
            launched: false,
            pids,
            tree,
            ..Target::default()
        };
        let attach_pid = (set.len() == 1).then_some(first);
        Ok((target, Scope::Pids { given, tree }, attach_pid))
    }

    /// The processes of cgroup `path` and its descendant cgroups, lockscope's own (`own`) left
    /// out.
    fn cgroup(
        self,
        path: &Path,
        own: u32,
        warnings: &mut Vec<String>,
    ) -> Result<(Target, Scope, Option<u32>), Error> {
        let Targets {
            shared,
            unwinder,
            processes,
        } = self;
        let cgroup = Cgroup::resolve(path)?;
        let mut set = cgroup.processes();
        set.remove(&own);
        for &pid in &set {
            shared.add_target(pid)?;
        }
        shared.follow_forks()?;
        // Those that entered while the first ones were added.
        for pid in cgroup.processes() {
            if pid != own && set.insert(pid) {
                shared.add_target(pid)?;
            }
        }
        if set.is_empty() {
            warnings.push(format!(
                "cgroup {} has no processes yet: those that enter it are recorded \
                 from then on",
                cgroup.path
            ));
        }
        observe_and_unwind(&set, processes, unwinder)?;
        let target = Target {
            cgroup: Some(cgroup.path.clone()),
            ..Target::default()
        };
        Ok((target, Scope::Cgroup(cgroup), None))
    }

    /// Every process but `own`.
    fn all(self, own: u32) -> Result<(Target, Scope, Option<u32>), Error> {
        let Targets {
            shared,
            unwinder,
            processes,
        } = self;
        shared.record_all(own)?;
        shared.follow_forks()?;
        for pid in all_processes() {
            if pid == own || !processes.observe(pid) {
                continue;
            }
            // Queued, not waited for: a machine's programs are many, and the tables of
            // those a recording meets first are built first.
            let user = processes.get(pid).is_some_and(|p| !p.kernel_thread);
            if let (true, Some(unwinder)) = (user, unwinder.as_mut()) {
                let _ = unwinder.refresh(pid);
            }
        }
        let target = Target {
            all: true,
            ..Target::default()
        };
        Ok((target, Scope::All, None))
    }
}

/// Checks the requested probe names.
fn check_probe_names(names: &[String]) -> Result<(), Error> {
    let known = probe_names();
    match names.iter().find(|name| !known.contains(&name.as_str())) {
        Some(name) => Err(Error::UnknownProbe {
            name: name.clone(),
            known: known.join(", "),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default options name the catalog's default probes; unknown names are refused.
    #[test]
    fn probe_names() {
        let options = RecordOptions::new(TargetSpec::Pid(1));
        assert_eq!(options.probes, vec!["futex".to_owned()]);
        check_probe_names(&options.probes).expect("futex known");
        check_probe_names(&["offcpu".to_owned()]).expect("offcpu known");
        let err = check_probe_names(&["nosuch".to_owned()]).expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "unknown probe `nosuch` (the eBPF backend provides: futex, offcpu, wakeup, \
             preempt, waitfor, syscall, lifecycle, klock, mutex-hold, cpu)"
        );
    }
}
