//! The recorder: loads and attaches the probes for one target, polls them, and builds the
//! [`Profile`] when the recording ends.

use crate::environment::check_environment;
use crate::error::Error;
use crate::launch::PendingChild;
use crate::object::add_losses;
use crate::priority::RaisedPriority;
use crate::probe::ProbeSettings;
use crate::probe_set::{probe_names, ProbeSet};
use crate::procmaps::MapsCache;
use crate::resolve::{self, resolve};
use crate::shared::SharedMaps;
use crate::unwind::{StackMaps, UnwindOptions, UnwindStats, Unwinder};
use lockscope_probes::{
    catalog, host, AttachStatus, Losses, Metadata, ProbeAttachment, Profile, Target,
};
use std::ffi::{CStr, OsString};
use std::io;
use std::os::unix::process::ExitStatusExt;
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

/// The process to record.
#[derive(Clone, Debug)]
pub enum TargetSpec {
    /// A running process (all its threads, and the children it forks while recorded).
    Pid(u32),
    /// A command to launch once the probes are attached; argv[0] is searched on PATH.
    Command(Vec<OsString>),
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
    /// True once the target process is gone.
    pub target_exited: bool,
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
    child: Option<Child>,
    maps: MapsCache,
    last_snapshot: Option<Instant>,
    started: Instant,
    start_unix_ns: u64,
    target_exited: bool,
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
        check_environment()?;
        check_probe_names(&options.probes)?;
        if options.probes.iter().any(|p| p == "syscall") {
            crate::probe::syscall_numbers(&options.probe_settings.syscalls)?;
        }
        // Loading is CPU work on this thread (the verifier): on a loaded server it must not wait
        // behind the server's threads. Dropped before a command is forked (it would inherit it).
        let raised = RaisedPriority::raise();
        // The shared maps first: every probe object reuses them.
        let mut shared = SharedMaps::load()?;
        // A probe that fails to load is reported as failed; the others still record.
        let mut probe_set = ProbeSet::load(&options.probes, &shared, &options.probe_settings);

        // Every probe's stacks unwind with the same tables, in the shared maps.
        let mut unwinder = StackMaps::from_shared(&shared)
            .map(|maps| Unwinder::new(maps, &options.unwind))
            .transpose()?;

        // Makes `pid` a target of every probe and attaches them: an error when none attached.
        let mut attach_to = |pid: u32| -> Result<(), Error> {
            shared.add_target(pid)?;
            shared.follow_forks()?;
            probe_set.attach(pid);
            nothing_attached(&attachments(&options.probes, &probe_set))
        };
        let (target, child) = match &options.target {
            TargetSpec::Pid(pid) => {
                let tgid = process_tgid(*pid).ok_or(Error::NoSuchProcess(*pid))?;
                if let Some(unwinder) = &mut unwinder {
                    unwinder.add_process(tgid)?;
                }
                attach_to(tgid)?;
                drop(raised);
                let target = Target {
                    pid: tgid,
                    command: process_command(tgid),
                    launched: false,
                };
                (target, None)
            }
            TargetSpec::Command(argv) => {
                // Tables of the program and its libraries before it runs: its first waits unwind
                // (through the file fallback) before its process table exists.
                if let (Some(unwinder), Some(program)) = (&mut unwinder, argv.first()) {
                    unwinder.preload_command(program);
                }
                drop(raised);
                // Dropping `pending` on any error below makes the child exit unexecuted.
                let pending = PendingChild::fork(argv)?;
                let pid = pending.pid();
                // Returning here drops `pending`: the command never runs.
                attach_to(pid)?;
                pending.release()?;
                let target = Target {
                    pid,
                    command: argv
                        .iter()
                        .map(|a| a.to_string_lossy().into_owned())
                        .collect(),
                    launched: true,
                };
                let child = Child {
                    pid: pid as libc::pid_t,
                    status: None,
                };
                (target, Some(child))
            }
        };

        let probes = attachments(&options.probes, &probe_set);

        let mut recorder = Recorder {
            probe_set,
            shared,
            unwinder,
            unwind_misses: 0,
            probes,
            target,
            child,
            maps: MapsCache::new(),
            last_snapshot: None,
            started: Instant::now(),
            start_unix_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            target_exited: false,
        };
        recorder.snapshot_maps();
        Ok(recorder)
    }

    /// Pid of the target (the launched child, or the attached pid).
    pub fn target_pid(&self) -> u32 {
        self.target.pid
    }

    /// Exit status of a launched command once it exited and was reaped (by [`Recorder::poll`]).
    pub fn target_exit_status(&self) -> Option<ExitStatus> {
        self.child.as_ref().and_then(|c| c.status)
    }

    /// Reads the counters, checks whether the target is still alive, and snapshots the memory
    /// maps of every traced process at most every 250 ms (so that symbolization works after
    /// they exited). Cheap: call it often, and every [`Recorder::EARLY_POLL_INTERVAL`] while
    /// [`Recorder::wants_early_polls`] says so.
    pub fn poll(&mut self) -> Result<RecorderStatus, Error> {
        let counters = self.probe_set.counters()?;
        if !self.target_exited {
            self.target_exited = match &mut self.child {
                Some(child) => child.try_reap(),
                None => !process_alive(self.target.pid),
            };
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
        }
        Ok(RecorderStatus {
            elapsed: self.started.elapsed(),
            events: counters.events,
            losses: counters.losses,
            target_exited: self.target_exited,
        })
    }

    /// How often to poll while [`Recorder::wants_early_polls`]: each poll then snapshots the
    /// traced processes' maps, so a launched program's unwinding tables follow its libraries
    /// within this long of their mapping.
    pub const EARLY_POLL_INTERVAL: Duration = Duration::from_millis(10);

    /// True during the recording's first second, when frequent polls (every
    /// [`Recorder::EARLY_POLL_INTERVAL`]) shorten the time a launched program's stacks are
    /// unwound by the file fallback alone. That fallback resolves at most one library per stack
    /// where interrupts are disabled (the `offcpu` probe's sched_switch: bpf_find_vma's unlock
    /// work is then still pending), so such stacks are cut short until the process's table exists.
    pub fn wants_early_polls(&self) -> bool {
        self.started.elapsed() < EARLY_SNAPSHOTS
    }

    /// Stops recording and builds the complete profile: drains the aggregated waits, symbolizes
    /// their stacks, releases every BPF program, link and map, then terminates a launched command
    /// that is still running.
    pub fn finish(mut self, end_reason: &str) -> Result<Profile, Error> {
        // First: the per-thread times end here, not after the symbolization below.
        self.probe_set.detach();
        self.shared.detach();
        self.snapshot_maps();
        let duration_ns = self.started.elapsed().as_nanos() as u64;
        let counters = self.probe_set.counters()?;
        let drained = self.probe_set.drain(&self.shared.targets())?;
        let resolve::Resolved {
            mut waits,
            threads,
            stacks,
            thread_times,
            wakeups,
        } = resolve(drained, &self.shared, &self.maps)?;
        if let Some(child) = &mut self.child {
            child.terminate();
        }
        waits.sort_by(|a, b| {
            b.stats
                .total_ns
                .cmp(&a.stats.total_ns)
                .then((a.pid, a.tid, a.object).cmp(&(b.pid, b.tid, b.object)))
        });
        let uname = host::Uname::current();
        let metadata = Metadata {
            lockscope_version: env!("CARGO_PKG_VERSION").to_owned(),
            backend: BACKEND.to_owned(),
            os: "linux".to_owned(),
            kernel_release: uname.release,
            hostname: uname.nodename,
            cpu_count: online_cpus(),
            libc: glibc_version(),
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
        };
        Ok(Profile {
            metadata,
            threads,
            stacks,
            waits,
            thread_times,
            wakeups,
        })
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
        Ok(missed)
    }

    /// Snapshots the maps of the target and every process it forked.
    fn snapshot_maps(&mut self) {
        let mut pids = self.shared.targets();
        pids.push(self.target.pid);
        pids.sort_unstable();
        pids.dedup();
        for pid in pids {
            let alive = self.maps.snapshot(pid);
            if let Some(unwinder) = &mut self.unwinder {
                if alive {
                    // A failure leaves the process with its previous table; its stacks fall back
                    // to frame pointers and are counted (unknown_process, unknown_mapping).
                    let _ = unwinder.refresh(pid);
                } else {
                    // Gone: a later process reusing the pid must not unwind with its table.
                    unwinder.remove_process(pid);
                }
            }
        }
        self.last_snapshot = Some(Instant::now());
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

/// The process (thread group) id of `pid`, which may be a thread id; `None` when it does not
/// exist.
fn process_tgid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|t| t.trim().parse().ok())
}

/// The command line of a process, argv[0] first (empty for kernel threads or when unreadable).
fn process_command(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// True while the process exists and is not a zombie.
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesized command, which may itself contain ") ".
        Ok(stat) => stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(1).max(1)
}

fn glibc_version() -> Option<String> {
    // SAFETY: gnu_get_libc_version returns a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(libc::gnu_get_libc_version()) };
    Some(format!("glibc {}", version.to_string_lossy()))
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
             preempt, syscall, lifecycle, klock, mutex-hold, cpu)"
        );
    }

    /// Our own process is alive and its own tgid; a pid beyond pid_max is not a process.
    #[test]
    fn process_queries() {
        let me = std::process::id();
        assert!(process_alive(me));
        assert_eq!(process_tgid(me), Some(me));
        assert_eq!(process_tgid(u32::MAX), None);
        assert!(!process_command(me).is_empty());
        assert!(glibc_version().expect("glibc").starts_with("glibc 2."));
    }
}
