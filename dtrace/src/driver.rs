//! Runs dtrace(1) as a child process on a generated script and turns what it prints into a
//! [`Recording`].
//!
//! `dtrace -q -s SCRIPT -p PID` (or `-c CMD`) runs until the target exits, the script's tick
//! clause calls `exit(0)`, or the driver interrupts it with SIGINT (duration elapsed or the stop
//! flag set): in every case dtrace runs the `END` clause, which prints the aggregations. Its
//! stdout is streamed into [`Parser`]; its stderr is read for errors (made into clear
//! [`Error`]s) and drop reports (counted into [`Losses`]).
//!
//! Launching a command: by default `dtrace -c CMD` starts it. On macOS, when a selected probe
//! needs the introspection libpthread (`plockstat`, `mutex-hold`), the driver starts the command
//! itself instead ([`Launcher::Driver`]): `/usr/sbin/dtrace` is protected by System Integrity
//! Protection, and dyld strips `DYLD_*` variables from protected binaries, so
//! `DYLD_LIBRARY_PATH` given to `dtrace -c` never reaches the command. The driver spawns the
//! command with `DYLD_LIBRARY_PATH` set, stops it with SIGSTOP at once, runs
//! `dtrace -Z -q -s SCRIPT -p PID`, and resumes the command with SIGCONT when the script's
//! `BEGIN` clause has printed (dtrace has enabled every probe by then). `-Z` keeps the plockstat
//! probe descriptions that do not match yet: libpthread registers its plockstat provider when
//! dyld loads it, which may be after the SIGSTOP, and DTrace enables retained descriptions when
//! the provider appears.
//!
//! A probe description that matches nothing (`probe description plockstat4242:::mutex-block
//! does not match any probes`) is pinned to its catalog probe; the driver runs dtrace again
//! without that probe and records it as [`AttachStatus::Failed`] with dtrace's message, as the
//! eBPF backend does for a probe that fails to attach.
//!
//! [`DriverOptions::dtrace`] names the binary; the `lockscope` binary sets it from
//! `LOCKSCOPE_DTRACE=/path/to/dtrace` ([`DTRACE_ENV`], [`dtrace_binary`]): the tests run a fake
//! one.

use crate::catalog::{DtraceProbe, TargetOs, MACOS_INTROSPECTION};
use crate::parse::{Output, Parser};
use crate::script::{generate_script, ScriptOptions, ScriptTarget};
use crate::waitfor::WaitForStream;
use crate::{profile, Error};
use lockscope_probes::{AttachStatus, Losses, ProbeAttachment, Profile, Target};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Environment variable naming the dtrace binary to run instead of `dtrace` from `PATH` (read by
/// the `lockscope` binary, not by this library).
pub const DTRACE_ENV: &str = "LOCKSCOPE_DTRACE";

/// How long a launched command gets to exit after SIGTERM, when the recording ends before it
/// does, before it is killed.
const TERMINATE_GRACE: Duration = Duration::from_secs(2);

/// What dtrace traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverTarget {
    /// Attach to a running process (`-p PID`).
    Pid(u32),
    /// Launch a command, argv[0] first. With [`Launcher::Dtrace`] it goes to `dtrace -c CMD`,
    /// which splits its string on white space, so no argument may contain any.
    Command(Vec<String>),
    /// Running processes, without `-p` ([`ScriptTarget::Pids`]: a pid set extended by
    /// `proc:::create`, or `progenyof()` with `tree`). Their frames are symbolized by dtrace
    /// itself (the Linux driver reads one target's mappings only), and the recording ends with
    /// its duration or a stop, not when they exit.
    Pids {
        /// The processes.
        pids: Vec<u32>,
        /// Their descendants too.
        tree: bool,
    },
    /// Every process ([`ScriptTarget::All`]): no pid predicate; ends with its duration or a
    /// stop.
    All,
}

/// Who starts a [`DriverTarget::Command`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Launcher {
    /// [`Launcher::Driver`] on macOS when a selected probe needs the introspection libpthread,
    /// else [`Launcher::Dtrace`].
    #[default]
    Auto,
    /// `dtrace -c CMD`: dtrace starts the command stopped and runs it once its probes are
    /// enabled. Environment variables reach it through dtrace (not `DYLD_*` on macOS: SIP
    /// strips them from the protected dtrace binary).
    Dtrace,
    /// The driver starts the command with the environment it needs, stops it (SIGSTOP) at once,
    /// attaches with `dtrace -Z -p PID` and resumes it (SIGCONT) when the script's `BEGIN`
    /// clause has printed. The command may have run for the microseconds between its start and
    /// the SIGSTOP (inside dyld or the dynamic linker, before `main`). Arguments may contain
    /// white space.
    Driver,
}

/// Options of a [`Driver`]. Build with [`DriverOptions::new`] and set fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DriverOptions {
    /// The script to generate; its `target` is set from [`DriverOptions::target`] and its
    /// `duration` is also enforced by the driver (SIGINT when it elapses).
    pub script: ScriptOptions,
    /// What to trace.
    pub target: DriverTarget,
    /// The dtrace binary. Default: `dtrace` (looked up in `PATH`).
    pub dtrace: PathBuf,
    /// Set to true to end the recording (dtrace gets SIGINT and prints its aggregations).
    /// Default: a flag nobody sets.
    pub stop: Arc<AtomicBool>,
    /// Extra environment variables for dtrace and a launched command. Default: empty; on macOS,
    /// when launching a command with a plockstat probe selected, the driver adds
    /// `DYLD_LIBRARY_PATH=/usr/lib/system/introspection` for the command.
    pub env: Vec<(OsString, OsString)>,
    /// Who starts a launched command. Default: [`Launcher::Auto`].
    pub launcher: Launcher,
    /// How long dtrace may take to print its aggregations after SIGINT before it is killed
    /// (and the recording lost). Default: 30 s.
    pub grace: Duration,
    /// Set by the driver when dtrace's BEGIN clause has printed: every probe is enabled and
    /// the recording has started (for a status line, or a test that starts the load then).
    pub began: Arc<AtomicBool>,
    /// Copy what a command launched by `dtrace -c` prints to lockscope's stdout. Its stdout is
    /// dtrace's, which the driver reads; with `quiet` dtrace prints nothing of its own until
    /// END, so the lines between `BEGIN` and the first record are the command's. Default:
    /// false (they are counted as skipped lines).
    pub echo_target_output: bool,
}

impl DriverOptions {
    /// Default options for tracing `target` with `script`.
    pub fn new(script: ScriptOptions, target: DriverTarget) -> Self {
        DriverOptions {
            script,
            target,
            dtrace: dtrace_binary(None),
            stop: Arc::new(AtomicBool::new(false)),
            env: Vec::new(),
            launcher: Launcher::Auto,
            grace: Duration::from_secs(30),
            began: Arc::new(AtomicBool::new(false)),
            echo_target_output: false,
        }
    }
}

/// The dtrace binary to run given the value of `LOCKSCOPE_DTRACE`.
pub fn dtrace_binary(env_value: Option<OsString>) -> PathBuf {
    env_value
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("dtrace"), PathBuf::from)
}

/// What a recording produced.
#[derive(Clone, Debug)]
pub struct Recording {
    /// The profile (metadata, threads, stacks, waits, losses).
    pub profile: Profile,
    /// The parsed output, for callers who want lockscope's raw records.
    pub output: Output,
    /// Things the user should know that did not stop the recording (SIP on, output cut short).
    pub warnings: Vec<String>,
}

/// Runs one recording. See the [module documentation](self).
#[derive(Debug)]
pub struct Driver {
    options: DriverOptions,
    script: String,
    /// The driver starts the command itself ([`Launcher::Driver`], resolved).
    self_launch: bool,
}

/// A command the driver started and stopped, until dtrace has attached.
struct LaunchedTarget {
    child: Child,
    /// Resumed with SIGCONT after dtrace's BEGIN clause printed.
    resumed: bool,
    /// Reaped (its exit status collected).
    exited: bool,
}

impl LaunchedTarget {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Collects its exit status if it has exited, so it leaves no zombie behind (dtrace -p
    /// waits for the process to go away).
    fn reap(&mut self) {
        if !self.exited && matches!(self.child.try_wait(), Ok(Some(_))) {
            self.exited = true;
        }
    }

    /// Ends a command that is still running when the recording is over, as the eBPF backend
    /// does: SIGTERM, SIGCONT (it may be stopped; the SIGTERM is then handled before anything
    /// else), then SIGKILL after [`TERMINATE_GRACE`]. A command never resumed (dtrace never
    /// attached) has not reached `main`: it is killed outright.
    fn terminate(&mut self) {
        self.reap();
        if self.exited {
            return;
        }
        if !self.resumed {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.exited = true;
            return;
        }
        let pid = self.pid();
        let ended = lockscope_probes::host::terminate(pid, TERMINATE_GRACE, || {
            self.reap();
            self.exited
        });
        if ended == lockscope_probes::host::Ended::Killed {
            let _ = self.child.wait();
            self.exited = true;
        }
    }
}

/// The run of dtrace that recorded, the probes it ran with, and the probes left out before it
/// (with dtrace's message).
struct Outcome {
    attempt: Attempt,
    probes: Vec<&'static DtraceProbe>,
    failed: Vec<(&'static DtraceProbe, String)>,
    /// Warnings from the attempts before (a probe that went on with less).
    notes: Vec<String>,
}

/// How one run of dtrace ended.
struct Attempt {
    status: ExitStatus,
    stopped_by: Option<&'static str>,
    output: Output,
    /// The wait-for stream, when the `waitfor` probe ran.
    stream: Option<WaitForStream>,
    stderr: Vec<String>,
    watch: TargetWatch,
}

/// How long dtrace may take to exit once it has printed `=== lockscope done` (everything
/// lockscope needs) before it is killed: DTrace for Linux lingers 3-7 s after `END` at the
/// default switch rate, and a recording should not.
const DONE_GRACE: Duration = Duration::from_secs(1);

/// How long a traced process may have been gone before dtrace is interrupted, if it has not
/// noticed by itself (DTrace for Linux with `-p` kept running after its target exited).
const GONE_GRACE: Duration = Duration::from_millis(200);

/// How long dtrace may keep every thread of its target in a tracing stop once the probes are
/// enabled before the recording ends: DTrace for Linux's process control once deadlocked with a
/// `-c` target stopped (its main thread waiting on a futex, its control thread in `wait4`), and
/// the recording waited for the target's exit for 26 minutes. Its own stops last milliseconds.
const HELD_STOPPED_GRACE: Duration = Duration::from_secs(10);

/// How long a dtrace that held its target stopped has to exit after SIGINT before it is killed
/// (a deadlocked dtrace never does; killing it detaches and resumes the target).
const HELD_STOPPED_KILL: Duration = Duration::from_secs(2);

/// Why a recording ended when dtrace held its target stopped (see [`HELD_STOPPED_GRACE`]).
const HELD_STOPPED: &str = "dtrace held the target stopped";

/// The traced process, watched while dtrace runs: on Linux its mappings are snapshotted so
/// that its frames can be symbolized after it exited, and its exit ends the recording.
#[derive(Default)]
struct TargetWatch {
    /// Its pid: the `-p` pid, or found as dtrace's child with `-c` (0 until found).
    pid: u32,
    /// Found as dtrace's child (`-c`), not given.
    child_of_dtrace: bool,
    /// Its start time (`/proc/PID/stat` field 22), to know it is still the same process.
    start_time: Option<u64>,
    /// When it was first seen gone.
    gone_since: Option<Instant>,
    /// Since when every one of its threads has been in a tracing stop of dtrace's, if they are.
    held_since: Option<Instant>,
    /// When dtrace's BEGIN line was seen: the recording starts when the probes are enabled,
    /// not when dtrace starts (it takes a second or more to compile and load them).
    began_at: Option<Instant>,
    /// When the recording ended: the target gone, dtrace interrupted, or END printed.
    ended_at: Option<Instant>,
    /// Every executable mapping seen while it lived.
    #[cfg(target_os = "linux")]
    maps: crate::symbolize::MapsSnapshot,
    /// Without one target (several processes, every process): which processes to watch.
    many: Option<Many>,
    /// ... and each one's mappings seen while it lived, by pid (Linux).
    #[cfg(target_os = "linux")]
    processes: std::collections::BTreeMap<u32, crate::symbolize::MapsSnapshot>,
    /// When they were last scanned.
    last_scan: Option<Instant>,
}

/// The processes a recording without one target watches (on Linux, for their mappings).
#[derive(Clone, Debug)]
enum Many {
    /// These and their descendants (the script follows the children they fork).
    Pids(std::collections::BTreeSet<u32>),
    /// Every process.
    All,
}

/// How often the processes of a recording without one target are scanned for their mappings.
const SCAN_INTERVAL: Duration = Duration::from_millis(250);

impl TargetWatch {
    /// Refreshes what is known about the target; `dtrace_pid` finds a `-c` child.
    fn poll(&mut self, dtrace_pid: u32) {
        if let Some(many) = &self.many {
            #[cfg(target_os = "linux")]
            if self
                .last_scan
                .is_none_or(|at| at.elapsed() >= SCAN_INTERVAL)
            {
                let pids: Vec<u32> = match many {
                    Many::Pids(given) => given
                        .iter()
                        .copied()
                        .chain(lockscope_probes::procfs::descendants(given))
                        .collect(),
                    Many::All => lockscope_probes::procfs::all_processes(),
                };
                let own = std::process::id();
                for pid in pids.into_iter().filter(|&p| p != own && p != dtrace_pid) {
                    self.processes.entry(pid).or_default().refresh(pid);
                }
                self.last_scan = Some(Instant::now());
            }
            #[cfg(not(target_os = "linux"))]
            let _ = many;
            return;
        }
        if self.child_of_dtrace && self.pid == 0 {
            self.pid = first_child(dtrace_pid).unwrap_or(0);
            self.start_time = start_time(self.pid);
        }
        if self.pid == 0 || self.gone_since.is_some() {
            return;
        }
        #[cfg(target_os = "linux")]
        let alive = self.maps.refresh(self.pid) && !is_gone(self.pid);
        #[cfg(not(target_os = "linux"))]
        let alive = send_signal(self.pid, 0).is_ok();
        if !alive {
            self.gone_since = Some(Instant::now());
            return;
        }
        #[cfg(target_os = "linux")]
        if held_stopped(self.pid, dtrace_pid) {
            self.held_since.get_or_insert_with(Instant::now);
        } else {
            self.held_since = None;
        }
    }

    /// True when dtrace has held every thread of the target stopped for longer than `grace`.
    fn held_for(&self, grace: Duration) -> bool {
        self.held_since.is_some_and(|at| at.elapsed() > grace)
    }

    /// True when the target has been gone for longer than `grace`.
    fn gone_for(&self, grace: Duration) -> bool {
        self.gone_since.is_some_and(|at| at.elapsed() > grace)
    }
}

/// Ends a command `dtrace -c` launched that outlives the recording (dtrace does not end it when
/// interrupted), as the eBPF backend ends its launched command: SIGTERM, then SIGKILL after
/// [`TERMINATE_GRACE`]. Only while it is the same process (same start time): once dtrace is
/// gone it is no child of anyone lockscope knows, and its pid could be reused.
fn end_launched_command(watch: &TargetWatch) {
    let Some(started) = watch.start_time else {
        return;
    };
    let same = || watch.pid != 0 && start_time(watch.pid) == Some(started) && !is_gone(watch.pid);
    // `gone` checks it is still the same process before every signal.
    lockscope_probes::host::terminate(watch.pid, TERMINATE_GRACE, || !same());
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks since boot.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces and parentheses), from field 3 on.
    stat.rsplit_once(") ")?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// True when every thread of `pid` is in a tracing stop (state `t`) of a thread of
/// `dtrace_pid`'s. The main thread is read first: a running target costs one read.
#[cfg(target_os = "linux")]
fn held_stopped(pid: u32, dtrace_pid: u32) -> bool {
    let state = |path: std::path::PathBuf| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|stat| stat.rsplit_once(") ")?.1.chars().next())
    };
    let tgid_of = |tid: &str| {
        let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))?
            .trim()
            .parse::<u32>()
            .ok()
    };
    if state(format!("/proc/{pid}/stat").into()) != Some('t') {
        return false;
    }
    let traced_by_dtrace = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let tracer = status.lines().find_map(|l| l.strip_prefix("TracerPid:"))?;
            tgid_of(tracer.trim())
        })
        .is_some_and(|tgid| tgid == dtrace_pid);
    traced_by_dtrace
        && std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| {
            tasks
                .flatten()
                .all(|task| state(task.path().join("stat")) == Some('t'))
        })
}

/// True when `pid` no longer runs (gone, or a zombie).
fn is_gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state == 'Z' || state == 'X')
        })
        .unwrap_or(true)
}

/// The first child process of `pid` (Linux: `/proc/PID/task/*/children`).
fn first_child(pid: u32) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    tasks.flatten().find_map(|task| {
        std::fs::read_to_string(task.path().join("children"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

impl Driver {
    /// Validates the options and generates the script.
    pub fn new(mut options: DriverOptions) -> Result<Driver, Error> {
        let wants_introspection = options.script.os == TargetOs::MacOs
            && options
                .script
                .selected_probes()
                .map(|probes| probes.iter().any(|p| p.macos_needs_launch))
                .unwrap_or(false);
        let mut self_launch = false;
        options.script.target = match &options.target {
            DriverTarget::Pid(pid) => ScriptTarget::Pid(*pid),
            DriverTarget::Pids { pids, tree } => ScriptTarget::Pids {
                pids: pids.clone(),
                tree: *tree,
            },
            DriverTarget::All => ScriptTarget::All,
            DriverTarget::Command(argv) => {
                self_launch = match options.launcher {
                    Launcher::Driver => true,
                    Launcher::Dtrace => false,
                    // Never on Linux: DTrace for Linux crashed (4 runs of 4) attaching with -p
                    // to a process stopped with SIGSTOP and continued, and `dtrace -c` loses
                    // nothing there that the driver does not restore (symbols: see
                    // crate::symbolize).
                    Launcher::Auto => wants_introspection,
                };
                if self_launch && options.script.os == TargetOs::Linux {
                    return Err(Error::InvalidOption {
                        option: "launcher",
                        reason: "DTrace for Linux crashed attaching with -p to a process stopped \
                                 with SIGSTOP and then continued (4 runs of 4): on Linux, \
                                 `dtrace -c` launches the command"
                            .into(),
                    });
                }
                if argv.is_empty() || argv[0].is_empty() {
                    return Err(Error::InvalidOption {
                        option: "command",
                        reason: "the command is empty".into(),
                    });
                }
                if !self_launch
                    && argv
                        .iter()
                        .any(|a| a.is_empty() || a.contains(char::is_whitespace))
                {
                    return Err(Error::InvalidOption {
                        option: "command",
                        reason: "dtrace -c splits its command on white space: no argument may be \
                                 empty or contain spaces (the driver's own launcher takes them)"
                            .into(),
                    });
                }
                ScriptTarget::Command
            }
        };
        let absent = options.script.absent_probes();
        if !absent.is_empty() && options.script.selected_probes()?.is_empty() {
            let list: Vec<String> = absent
                .iter()
                .map(|(p, reason)| format!("`{}`: {reason}", p.name))
                .collect();
            return Err(Error::InvalidOption {
                option: "probes",
                reason: format!(
                    "no probe left to record: every probe asked for is absent on {} ({})",
                    options.script.os,
                    list.join("; ")
                ),
            });
        }
        let script = generate_script(&options.script)?;
        Ok(Driver {
            options,
            script,
            self_launch,
        })
    }

    /// The D script that [`Driver::run`] will run (first: a probe that matches nothing is left
    /// out of the next attempt).
    pub fn script(&self) -> &str {
        &self.script
    }

    /// True when the driver starts the command itself (see [`Launcher::Driver`]).
    pub fn launches_target(&self) -> bool {
        self.self_launch
    }

    /// The dtrace arguments after the binary, with the script at `script_path`. A command the
    /// driver launches is traced as `-Z -p` with its pid, which [`Driver::run`] fills in; here
    /// it shows as `-p 0`.
    pub fn arguments(&self, script_path: &Path) -> Vec<OsString> {
        self.arguments_for(script_path, None)
    }

    fn arguments_for(&self, script_path: &Path, launched_pid: Option<u32>) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["-q".into()];
        if self.self_launch {
            args.push("-Z".into());
        }
        args.push("-s".into());
        args.push(script_path.into());
        match &self.options.target {
            DriverTarget::Pid(pid) => {
                args.push("-p".into());
                args.push(pid.to_string().into());
            }
            DriverTarget::Command(_) if self.self_launch => {
                args.push("-p".into());
                args.push(launched_pid.unwrap_or(0).to_string().into());
            }
            DriverTarget::Command(argv) => {
                args.push("-c".into());
                args.push(argv.join(" ").into());
            }
            // The script's predicates say which processes: dtrace traces system-wide.
            DriverTarget::Pids { .. } | DriverTarget::All => {}
        }
        args
    }

    fn wants_introspection(&self, probes: &[&'static DtraceProbe]) -> bool {
        self.options.script.os == TargetOs::MacOs && probes.iter().any(|p| p.macos_needs_launch)
    }

    /// dtrace's environment. With `dtrace -c` and plockstat on macOS, `DYLD_LIBRARY_PATH` is
    /// passed on too (it reaches the command only if dtrace is not SIP-protected).
    fn dtrace_environment(&self, probes: &[&'static DtraceProbe]) -> Vec<(OsString, OsString)> {
        let mut env = self.options.env.clone();
        let dtrace_launches = matches!(self.options.target, DriverTarget::Command(_));
        if dtrace_launches && !self.self_launch && self.wants_introspection(probes) {
            env.push(("DYLD_LIBRARY_PATH".into(), MACOS_INTROSPECTION.into()));
        }
        env
    }

    /// Starts the command, stopped. Its environment is lockscope's, plus `env`, plus the
    /// introspection libpthread when a plockstat probe is selected on macOS.
    fn launch(&self, argv: &[String]) -> Result<LaunchedTarget, Error> {
        let probes = self.options.script.selected_probes()?;
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .envs(self.options.env.iter().cloned());
        if self.wants_introspection(&probes) {
            command.env("DYLD_LIBRARY_PATH", MACOS_INTROSPECTION);
        }
        let child = command.spawn().map_err(|source| Error::Launch {
            command: argv[0].clone(),
            source,
        })?;
        let mut target = LaunchedTarget {
            child,
            resumed: false,
            exited: false,
        };
        // As early as possible: every instruction it runs before this is not traced. Then wait
        // until it has stopped (or exited), so dtrace never finds it running.
        let stopped = send_signal(target.pid(), libc::SIGSTOP)
            .and_then(|()| wait_until_stopped(target.pid()));
        match stopped {
            Ok(true) => Ok(target),
            Ok(false) => {
                // It exited before stopping, and waitpid reaped it: dtrace -p will say so.
                target.exited = true;
                Ok(target)
            }
            Err(source) => {
                target.terminate();
                Err(Error::Signal {
                    action: "stop",
                    pid: target.pid(),
                    source,
                })
            }
        }
    }

    /// Runs dtrace to the end and returns the recording.
    pub fn run(self) -> Result<Recording, Error> {
        let start = SystemTime::now();
        let started = Instant::now();
        let mut launched = match &self.options.target {
            DriverTarget::Command(argv) if self.self_launch => Some(self.launch(argv)?),
            _ => None,
        };
        let result = self.run_attempts(started, launched.as_mut());
        if let Some(target) = launched.as_mut() {
            target.terminate();
        }
        if let Ok(outcome) = &result {
            end_launched_command(&outcome.attempt.watch);
        }
        let launched_pid = launched.as_ref().map(LaunchedTarget::pid);
        self.finish(result?, start, started, launched_pid)
    }

    /// Runs dtrace until it records, leaving out each probe whose description matches nothing.
    fn run_attempts(
        &self,
        started: Instant,
        mut launched: Option<&mut LaunchedTarget>,
    ) -> Result<Outcome, Error> {
        let mut probes = self.options.script.selected_probes()?;
        let mut failed: Vec<(&'static DtraceProbe, String)> = Vec::new();
        let mut script = self.script.clone();
        let mut entry_points = self.options.script.libc_entry_points;
        let mut notes = Vec::new();
        loop {
            let attempt = self.run_dtrace(&script, &probes, started, launched.as_deref_mut())?;
            // A dtrace killed by someone else after its probes were enabled leaves a partial
            // recording (what it printed, often nothing), kept and marked as such.
            let killed = !attempt.output.begin.is_empty() && killed_by_signal(&attempt.status);
            if attempt.status.success() || attempt.output.done || killed {
                return Ok(Outcome {
                    attempt,
                    probes,
                    failed,
                    notes,
                });
            }
            let diagnosis = diagnose(&attempt.stderr);
            // A static binary has no libc to put pid$target probes in: DTrace for Linux
            // refuses the script with "process N is not a dynamically-linked executable".
            let not_dynamic = diagnosis
                .errors
                .iter()
                .find(|e| e.contains("not a dynamically-linked executable"))
                .and_then(|e| Some((crate::catalog::find("futex")?, e.clone())));
            let unmatched = diagnosis
                .no_probe
                .as_ref()
                .and_then(|message| {
                    let probe = probe_of_message(self.options.script.os, &probes, message)?;
                    Some((probe, message.clone()))
                })
                .or(not_dynamic);
            match unmatched {
                // A libc entry point the target lacks (a static or non-glibc binary): the futex
                // probe goes on without them, classifying by stack only.
                Some((probe, message))
                    if probe.name == "futex"
                        && entry_points
                        && attempt.stopped_by.is_none()
                        && (message.contains(":pthread_")
                            || message.contains(":sem_")
                            || message.contains("not a dynamically-linked executable")) =>
                {
                    entry_points = false;
                    notes.push(format!(
                        "probe `futex`: the target has no glibc entry points to tell condvar, \
                         join, rwlock and semaphore waits apart ({message}): they are told by \
                         their user stacks only"
                    ));
                    script = self.regenerate(&probes, entry_points)?;
                }
                Some((probe, message)) if probes.len() > 1 && attempt.stopped_by.is_none() => {
                    probes.retain(|p| p.name != probe.name);
                    failed.push((probe, message));
                    script = self.regenerate(&probes, entry_points)?;
                }
                _ => return Err(self.failure(&attempt.status, &attempt.stderr, &diagnosis)),
            }
        }
    }

    /// The script for `probes`, with or without the futex probe's libc entry points.
    fn regenerate(
        &self,
        probes: &[&'static DtraceProbe],
        entry_points: bool,
    ) -> Result<String, Error> {
        let mut options = self.options.script.clone();
        options.probes = probes.iter().map(|p| p.name.to_string()).collect();
        options.libc_entry_points = entry_points;
        generate_script(&options)
    }

    /// One run of dtrace on `script`.
    fn run_dtrace(
        &self,
        script: &str,
        probes: &[&'static DtraceProbe],
        started: Instant,
        launched: Option<&mut LaunchedTarget>,
    ) -> Result<Attempt, Error> {
        let script_file = ScriptFile::write(script)?;
        let launched_pid = launched.as_ref().map(|t| t.pid());
        let stream = probes
            .iter()
            .any(|p| p.name == "waitfor")
            .then(|| WaitForStream::new(self.options.script.os));
        // The wait-for stream prints all along, through dtrace's stdio buffer, which it flushes
        // at any byte: on the stdout it shares with a `-c` command, the command's lines would
        // land inside dtrace's. So dtrace's output goes to a pipe of its own (`-o /dev/fd/3`),
        // and its stdout carries the command's output alone.
        let output_pipe = match &stream {
            Some(_) => Some(OutputPipe::new()?),
            None => None,
        };
        let mut command = Command::new(&self.options.dtrace);
        if output_pipe.is_some() {
            command.args(["-o", OUTPUT_FD_PATH]);
        }
        command
            .args(self.arguments_for(&script_file.path, launched_pid))
            .envs(self.dtrace_environment(probes))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        restore_stop_signals(&mut command);
        if let Some(pipe) = &output_pipe {
            pipe.give_to(&mut command);
        }
        let mut child = command.spawn().map_err(|source| Error::Spawn {
            program: self.options.dtrace.clone(),
            source,
        })?;
        let flags = Arc::new(StdoutFlags::default());
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let echo = self.options.echo_target_output;
        let (out_thread, output_pipe) = match output_pipe {
            Some(pipe) => {
                let (reader, writer) = pipe.split();
                // Only the command's output is on stdout: passed on whole, or drained. Not
                // joined: a command that outlives dtrace keeps it open.
                if let Some(stdout) = stdout {
                    std::thread::spawn(move || copy_target_output(stdout, echo));
                }
                let flags = Arc::clone(&flags);
                let thread =
                    std::thread::spawn(move || read_stdout(Some(reader), &flags, false, stream));
                (thread, Some(writer))
            }
            None => {
                let flags = Arc::clone(&flags);
                let thread = std::thread::spawn(move || read_stdout(stdout, &flags, echo, stream));
                (thread, None)
            }
        };
        let stderr_lines = Arc::new(Mutex::new(Vec::new()));
        let err_thread = {
            let lines = Arc::clone(&stderr_lines);
            std::thread::spawn(move || read_stderr(stderr, &lines))
        };

        let mut watch = TargetWatch::default();
        match (&self.options.target, launched_pid) {
            (_, Some(pid)) => watch.pid = pid,
            (DriverTarget::Pid(pid), None) => watch.pid = *pid,
            (DriverTarget::Command(_), None) => watch.child_of_dtrace = true,
            (DriverTarget::Pids { pids, .. }, None) => {
                watch.many = Some(Many::Pids(pids.iter().copied().collect()));
            }
            (DriverTarget::All, None) => watch.many = Some(Many::All),
        }
        let supervised = self.supervise(&mut child, started, &flags, launched, &mut watch);
        if supervised.is_err() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(mut writer) = output_pipe {
            // dtrace is gone: its output is all in the pipe, but a `-c` command holds the pipe
            // too (it inherited fd 3), so the reader will see no end of it: tell it.
            let _ = std::io::Write::write_all(&mut writer, OUTPUT_EOF);
        }
        let (output, stream) = out_thread.join().unwrap_or_default();
        let (status, stopped_by) = match supervised? {
            (Some(status), stopped_by) => {
                let _ = err_thread.join();
                (status, stopped_by)
            }
            (None, stopped_by) => {
                // Killed after it printed everything: the kernel takes seconds to tear its
                // probes down, and nothing it says then matters. Reap it in the background.
                std::thread::spawn(move || {
                    let _ = child.wait();
                    let _ = err_thread.join();
                });
                (killed_status(), stopped_by)
            }
        };
        let stderr = stderr_lines.lock().map(|l| l.clone()).unwrap_or_default();
        Ok(Attempt {
            status,
            stopped_by,
            output,
            stream,
            stderr,
            watch,
        })
    }

    /// The recording from the attempt that ran.
    fn finish(
        &self,
        outcome: Outcome,
        start: SystemTime,
        started: Instant,
        launched_pid: Option<u32>,
    ) -> Result<Recording, Error> {
        let Outcome {
            attempt:
                Attempt {
                    status,
                    stopped_by,
                    mut output,
                    stream,
                    stderr,
                    watch,
                },
            probes,
            failed,
            notes,
        } = outcome;
        // The window in which the probes were enabled, when dtrace said so; else all of it.
        let (start, elapsed) = match (watch.began_at, watch.ended_at) {
            (Some(began), Some(ended)) => (
                start + began.duration_since(started),
                ended.saturating_duration_since(began),
            ),
            _ => (start, started.elapsed()),
        };
        let diagnosis = diagnose(&stderr);
        let os = self.options.script.os;
        let mut warnings = notes;
        for (probe, reason) in self.options.script.absent_probes() {
            warnings.push(format!(
                "probe `{}` is absent on {os}: {reason}",
                probe.name
            ));
        }
        for (probe, message) in &failed {
            warnings.push(format!(
                "probe `{}` left out: {message}{}",
                probe.name,
                self.probe_hint(message)
            ));
        }
        if diagnosis.sip {
            warnings.push(
                "system integrity protection is on: dtrace traced what it could (syscall, proc \
                 and sched probes of processes that are not restricted); Apple-signed or \
                 restricted targets and the pid/fbt providers are unavailable"
                    .to_string(),
            );
        }
        if stopped_by == Some(HELD_STOPPED) {
            warnings.push(format!(
                "dtrace(1) held every thread of the target in a tracing stop for more than {} s \
                 (its process control deadlocked): the recording ended there, and dtrace was \
                 killed if it did not exit, which resumes the target",
                HELD_STOPPED_GRACE.as_secs()
            ));
        }
        let killed = (!output.done && killed_by_signal(&status)).then(|| status.to_string());
        if let Some(how) = &killed {
            warnings.push(format!(
                "dtrace(1) was killed ({how}) before it printed its aggregations: the profile \
                 is partial (empty: DTrace keeps everything in the kernel until END)"
            ));
        } else if !output.done {
            warnings.push(
                "dtrace(1) ended before printing all its aggregations: the profile is empty or \
                 partial"
                    .to_string(),
            );
        }
        if !diagnosis.losses.is_zero() {
            warnings.push(format!(
                "dtrace reported drops: {} (raise aggsize/dynvarsize/bufsize)",
                diagnosis.drop_lines.join("; ")
            ));
        }

        let end_reason = match (stopped_by, &killed) {
            (_, Some(how)) => format!("dtrace killed ({how}): partial"),
            (Some(reason), None) => reason.to_string(),
            (None, None) if diagnosis.target_exited || output.done => "target exited".to_string(),
            (None, None) => format!("dtrace exited ({status})"),
        };
        let mut stream = stream.and_then(WaitForStream::finish);
        if let Some(stream) = &stream {
            if stream.inconsistent > 0 || stream.late > 0 {
                warnings.push(format!(
                    "the wait-for stream lost events: {} switches contradicted their thread's \
                     state (counted as lost intervals, or cut where they overlapped the \
                     thread's last one; that time is `unknown` to `lockscope why`), {} came more \
                     than {} ms after later ones of another CPU",
                    stream.inconsistent,
                    stream.late,
                    crate::waitfor::REORDER_NS / 1_000_000
                ));
            }
        }
        let user_stacks = stream.iter_mut().flat_map(|s| {
            s.stacks
                .iter_mut()
                .filter(|(space, _)| *space == lockscope_probes::AddressSpace::User)
                .map(|(_, frames)| frames)
        });
        let resolved = resolve_user_frames(os, &watch, &mut output, user_stacks);
        let mut profile = profile::to_profile_streamed(
            &output,
            Some(os),
            Some(self.options.script.ustack_frames),
            &|frame| resolved.get(&frame.text).cloned(),
            stream,
        );
        if let Some(warning) = silent_plockstat(&profile, &probes, os) {
            warnings.push(warning);
        }
        let host = lockscope_probes::host::Uname::current();
        let m = &mut profile.metadata;
        m.end_reason = end_reason;
        m.losses = diagnosis.losses;
        m.events = m.events.saturating_add(diagnosis.losses.lost_events());
        m.start_unix_ns = start
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        m.duration_ns = elapsed.as_nanos() as u64;
        m.cpu_count = lockscope_probes::host::online_cpus();
        m.hostname = host.nodename;
        m.kernel_release = host.release.clone();
        m.libc = libc_description(os, TargetOs::host(), &host.release);
        m.target = match &self.options.target {
            DriverTarget::Pid(pid) => Target {
                pid: *pid,
                command: Vec::new(),
                launched: false,
                ..Target::default()
            },
            DriverTarget::Command(argv) => Target {
                // dtrace -c does not say the pid: dtrace's child, else the records do.
                pid: launched_pid
                    .or((watch.pid != 0).then_some(watch.pid))
                    .unwrap_or_else(|| profile.threads.first().map_or(0, |t| t.pid)),
                command: argv.clone(),
                launched: true,
                ..Target::default()
            },
            DriverTarget::Pids { pids, tree } => Target {
                pid: pids.first().copied().unwrap_or(0),
                pids: if pids.len() > 1 {
                    pids.clone()
                } else {
                    Vec::new()
                },
                tree: *tree,
                ..Target::default()
            },
            DriverTarget::All => Target {
                all: true,
                ..Target::default()
            },
        };
        let selected = self.options.script.selected_probes().unwrap_or_default();
        let absent = self.options.script.absent_probes();
        m.probes = selected
            .iter()
            .map(|p| {
                let status = match failed.iter().find(|(f, _)| f.name == p.name) {
                    Some((_, message)) => AttachStatus::Failed {
                        reason: format!("{message}{}", self.probe_hint(message)),
                    },
                    None => AttachStatus::Attached,
                };
                ProbeAttachment {
                    probe: p.name.to_string(),
                    hook: p.hooks_on(os).join(", "),
                    status,
                }
            })
            .chain(absent.iter().map(|(p, reason)| ProbeAttachment {
                probe: p.name.to_string(),
                hook: String::new(),
                status: AttachStatus::Failed {
                    reason: format!("absent on {os}: {reason}"),
                },
            }))
            .collect();
        Ok(Recording {
            profile,
            output,
            warnings,
        })
    }

    /// Waits for dtrace, interrupting it when the duration elapses, the stop flag is set or
    /// the target has gone, and killing it when it does not finish within the grace period
    /// after that, or [`DONE_GRACE`] after it printed everything. A command the driver
    /// launched is resumed once dtrace's BEGIN clause has printed.
    fn supervise(
        &self,
        child: &mut Child,
        started: Instant,
        flags: &StdoutFlags,
        mut launched: Option<&mut LaunchedTarget>,
        watch: &mut TargetWatch,
    ) -> Result<(Option<ExitStatus>, Option<&'static str>), Error> {
        let mut interrupted: Option<(Instant, &'static str)> = None;
        let mut done_at: Option<Instant> = None;
        loop {
            if let Some(target) = launched.as_deref_mut() {
                target.reap();
                if !target.resumed && flags.began.load(Ordering::Acquire) {
                    // Never once reaped: its pid may belong to another process by then.
                    if !target.exited {
                        send_signal(target.pid(), libc::SIGCONT).map_err(|source| {
                            Error::Signal {
                                action: "resume",
                                pid: target.pid(),
                                source,
                            }
                        })?;
                    }
                    target.resumed = true;
                }
            }
            // Only once the probes are enabled: before, a -c target does not exist yet.
            if flags.began.load(Ordering::Acquire) && interrupted.is_none() {
                watch.began_at.get_or_insert_with(Instant::now);
                self.options.began.store(true, Ordering::Release);
                watch.poll(child.id());
                if let Some(gone) = watch.gone_since {
                    watch.ended_at.get_or_insert(gone);
                }
            }
            if let Some(status) = child.try_wait().map_err(|source| Error::Process {
                action: "wait for",
                source,
            })? {
                watch.ended_at.get_or_insert_with(Instant::now);
                return Ok((Some(status), interrupted.map(|(_, why)| why)));
            }
            let now = Instant::now();
            // The duration counts from BEGIN, when the probes are enabled (as the script's own
            // tick clause does), not from dtrace's start; a dtrace that never begins is still
            // stopped a duration after its start.
            let deadline = self
                .options
                .script
                .duration
                .map(|d| watch.began_at.unwrap_or(started) + d);
            if flags.done.load(Ordering::Acquire) {
                // Everything is printed: what dtrace does now is not worth waiting for.
                let at = *done_at.get_or_insert(now);
                watch.ended_at.get_or_insert(now);
                if now.duration_since(at) > DONE_GRACE {
                    let _ = child.kill();
                    return Ok((None, interrupted.map(|(_, why)| why)));
                }
            }
            match interrupted {
                None => {
                    let why = if self.options.stop.load(Ordering::Relaxed) {
                        Some("interrupted (stop requested)")
                    } else if deadline.is_some_and(|d| now >= d) {
                        Some("duration elapsed")
                    } else if watch.gone_for(GONE_GRACE) {
                        Some("target exited")
                    } else if watch.held_for(HELD_STOPPED_GRACE) {
                        Some(HELD_STOPPED)
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        watch.ended_at.get_or_insert(now);
                        // A failed signal means dtrace already exited; try_wait sees that next.
                        let _ = send_signal(child.id(), libc::SIGINT);
                        interrupted = Some((now, why));
                    }
                }
                Some((at, why))
                    if now.duration_since(at) > self.options.grace
                        || (why == HELD_STOPPED && now.duration_since(at) > HELD_STOPPED_KILL) =>
                {
                    child.kill().map_err(|source| Error::Process {
                        action: "kill",
                        source,
                    })?;
                }
                Some(_) => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn failure(&self, status: &ExitStatus, stderr: &[String], d: &Diagnosis) -> Error {
        if let Some(message) = &d.bpf_load_failed {
            return verifier_error(message, stderr, d);
        }
        let errors = if d.errors.is_empty() {
            stderr.join("\n")
        } else {
            d.errors.join("\n")
        };
        if let Some(message) = &d.restricted {
            return Error::RestrictedEntitlements {
                message: message.clone(),
            };
        }
        if let Some(message) = &d.no_probe {
            return Error::ProbeNotFound {
                message: message.clone(),
                hint: self.probe_hint(message),
            };
        }
        // "requires additional privileges" is macOS's not-root message; other permission
        // refusals with SIP on are SIP's.
        let not_root = d
            .privileges
            .as_ref()
            .filter(|m| !d.sip || m.contains("additional privileges"));
        if let Some(message) = not_root {
            return Error::NotPrivileged {
                message: message.clone(),
            };
        }
        if d.sip {
            return Error::SipRestricted { message: errors };
        }
        Error::DtraceFailed {
            status: status.to_string(),
            stderr: errors,
        }
    }

    fn probe_hint(&self, message: &str) -> String {
        let os = self.options.script.os;
        if message.contains("plockstat") && os == TargetOs::MacOs {
            return match self.options.target {
                DriverTarget::Pid(pid) => format!(
                    ": macOS has plockstat probes only in the introspection libpthread, and \
                     process {pid} was not started with it; restart it with \
                     DYLD_LIBRARY_PATH={MACOS_INTROSPECTION}, let lockscope launch it, or leave \
                     out the plockstat and mutex-hold probes (psynch and ulock see the same waits \
                     from the kernel side)"
                ),
                DriverTarget::Command(_) => format!(
                    ": the command did not load the introspection libpthread: `dtrace -c` \
                     passes DYLD_LIBRARY_PATH={MACOS_INTROSPECTION} through the SIP-protected \
                     dtrace binary, which drops DYLD_* variables; let lockscope launch it \
                     (the default launcher does for plockstat), or leave out the plockstat and \
                     mutex-hold probes"
                ),
                // The plockstat probes are refused for these targets before dtrace runs.
                DriverTarget::Pids { .. } | DriverTarget::All => String::new(),
            };
        }
        if message.contains("plockstat") {
            return ": the target does not use libc's plockstat-instrumented locks (static or \
                    non-libc binary?); leave out the plockstat probes"
                .to_string();
        }
        if message.contains("lockstat") {
            return ": the lockstat provider is not loaded (FreeBSD: `kldload dtraceall`)"
                .to_string();
        }
        if message.contains("syscall::") {
            return format!(
                ": this kernel lacks a system call the {os} script expects; leave out the probe \
                 that uses it"
            );
        }
        String::new()
    }
}

/// One clear error for a program the kernel refused, with dtrace's whole stderr (thousands of
/// `BPF:` verifier lines) saved to a file rather than printed.
fn verifier_error(message: &str, stderr: &[String], d: &Diagnosis) -> Error {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    let path = std::env::temp_dir().join(format!(
        "lockscope-dtrace-verifier-{}-{nanos}.log",
        std::process::id()
    ));
    let saved = std::fs::write(&path, stderr.join("\n") + "\n").is_ok();
    // The verifier's reason is its last lines ("R1 type=scalar expected=map_ptr", "processed
    // N insns"): the last one that is not the instruction count says why.
    let reason = d
        .verifier_log
        .iter()
        .rev()
        .find(|l| {
            !l.is_empty() && !l.starts_with("processed ") && !l.starts_with("verification time")
        })
        .cloned()
        .unwrap_or_else(|| "no verifier log (set the D option bpflog to get one)".to_string());
    Error::VerifierRejected {
        message: message.to_string(),
        reason,
        log: saved.then_some(path),
        lines: d.verifier_log.len(),
    }
}

/// The status of a dtrace the driver killed with SIGKILL and did not wait for.
fn killed_status() -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    ExitStatus::from_raw(libc::SIGKILL)
}

/// True when dtrace was ended by a signal (SIGKILL from the OOM killer or a user).
fn killed_by_signal(status: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal().is_some()
}

/// On Linux, every user frame read back from the target's mappings (see [`crate::symbolize`]),
/// by frame text, after cutting the frames where the frame-pointer walk went astray; elsewhere
/// nothing (dtrace's own symbols stand).
#[cfg(target_os = "linux")]
fn resolve_user_frames<'s>(
    os: TargetOs,
    watch: &TargetWatch,
    output: &mut Output,
    streamed: impl Iterator<Item = &'s mut Vec<crate::parse::ParsedFrame>>,
) -> std::collections::HashMap<String, lockscope_probes::Frame> {
    if os != TargetOs::Linux {
        return Default::default();
    }
    if watch.many.is_some() {
        // Each process's frames with its own mappings; a frame text seen in two processes
        // (the same library at the same address, as in a forked child) keeps the first.
        let mut resolved = std::collections::HashMap::new();
        for (pid, maps) in &watch.processes {
            if maps.is_empty() {
                continue;
            }
            let frames =
                crate::symbolize::UserSymbolizer::new(maps).resolve_records(output, Some(*pid));
            for (text, frame) in frames {
                resolved.entry(text).or_insert(frame);
            }
        }
        return resolved;
    }
    if watch.maps.is_empty() {
        return Default::default();
    }
    let symbolizer = crate::symbolize::UserSymbolizer::new(&watch.maps);
    let mut resolved = symbolizer.resolve_output(output);
    // The wait-for stream records one process only (its script names `$target`).
    symbolizer.resolve_stacks(streamed, &mut resolved);
    resolved
}

/// Only the Linux driver symbolizes frames itself.
#[cfg(not(target_os = "linux"))]
fn resolve_user_frames<'s>(
    _os: TargetOs,
    _watch: &TargetWatch,
    _output: &mut Output,
    _streamed: impl Iterator<Item = &'s mut Vec<crate::parse::ParsedFrame>>,
) -> std::collections::HashMap<String, lockscope_probes::Frame> {
    Default::default()
}

/// The catalog probe whose hook a "probe description D does not match any probes" message
/// names: same provider (`plockstat4242` is `plockstat$target`), and the function and name when
/// the hook gives them.
pub fn probe_of_message(
    os: TargetOs,
    probes: &[&'static DtraceProbe],
    message: &str,
) -> Option<&'static DtraceProbe> {
    let description = message
        .split_once("probe description ")?
        .1
        .split_once(" does not match")?
        .0
        .trim();
    let mut fields = description.splitn(4, ':');
    let provider = fields
        .next()?
        .trim_end_matches(|c: char| c.is_ascii_digit());
    let (_module, function, name) = (fields.next()?, fields.next()?, fields.next()?);
    probes.iter().copied().find(|p| {
        p.hooks_on(os).iter().any(|hook| {
            let mut h = hook.splitn(4, ':');
            let (Some(h_provider), Some(_), Some(h_function), Some(h_names)) =
                (h.next(), h.next(), h.next(), h.next())
            else {
                return false;
            };
            h_provider.trim_end_matches("$target") == provider
                && (h_function.is_empty() || h_function == function)
                && (h_names.is_empty() || h_names.split('/').any(|n| n == name))
        })
    })
}

/// A warning when the plockstat probes saw nothing on macOS although psynch saw mutex waits:
/// the command most likely did not load the introspection libpthread (a platform binary, whose
/// DYLD_* variables dyld ignores).
fn silent_plockstat(
    profile: &lockscope_probes::Profile,
    probes: &[&'static DtraceProbe],
    os: TargetOs,
) -> Option<String> {
    if os != TargetOs::MacOs || !probes.iter().any(|p| p.name == "plockstat") {
        return None;
    }
    let count = |probe: &str| -> u64 {
        profile
            .waits
            .iter()
            .filter(|w| w.probe == probe && w.kind == lockscope_probes::WaitKind::Mutex)
            .fold(0u64, |sum, w| sum.saturating_add(w.stats.count))
    };
    let psynch = count("psynch");
    (count("plockstat") == 0 && psynch > 0).then(|| {
        format!(
            "plockstat saw no mutex waits although psynch saw {psynch}: the target probably did \
             not load the introspection libpthread ({MACOS_INTROSPECTION}; dyld ignores \
             DYLD_LIBRARY_PATH for platform binaries)"
        )
    })
}

/// The C library of a DTrace OS, which ships with its kernel: named with the kernel release
/// when lockscope runs on that OS (`host`), unknown otherwise.
pub fn libc_description(os: TargetOs, host: Option<TargetOs>, release: &str) -> Option<String> {
    if host != Some(os) || release.is_empty() {
        return None;
    }
    Some(match os {
        TargetOs::MacOs => format!("libSystem (Darwin {release})"),
        TargetOs::FreeBsd => format!("FreeBSD libc {release}"),
        TargetOs::Illumos => format!("illumos libc {release}"),
        TargetOs::Linux => return lockscope_probes::host::glibc_version(),
    })
}

/// dtrace must stop on SIGINT and SIGTERM, which is how the driver ends a recording: a process
/// started in the background by a non-interactive shell inherits SIGINT as ignored (and
/// lockscope's own handlers are reset at exec, but an ignored disposition is not), so the
/// child gets the default dispositions and an empty signal mask back before it runs dtrace.
///
/// And it must get exactly one SIGINT: a second one makes dtrace "impatient", and it exits
/// without running END or printing its aggregations (the recording is lost). A Ctrl-C at the
/// terminal signals the whole foreground process group, so dtrace gets its own process group:
/// the terminal's SIGINT reaches lockscope only, which passes one on.
fn restore_stop_signals(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    // SAFETY: between fork and exec only async-signal-safe calls are made (signal,
    // sigemptyset, sigprocmask), on memory owned by this closure's stack.
    unsafe {
        command.pre_exec(|| {
            for signal in [libc::SIGINT, libc::SIGTERM] {
                if libc::signal(signal, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Sends `signal` to `pid`.
fn send_signal(pid: u32, signal: libc::c_int) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill has no memory-safety preconditions; pid is a child we started (dtrace or the
    // launched command), which we have not reaped yet, so the pid is not reused.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Waits until the child `pid` has stopped (true) or ended (false; it is then reaped, so
/// `Child::try_wait` must not be asked again).
fn wait_until_stopped(pid: u32) -> std::io::Result<bool> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "pid out of range"))?;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid, writable int; pid is our unreaped child.
        let waited = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        if waited == pid {
            return Ok(libc::WIFSTOPPED(status));
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// What dtrace's stdout has shown so far.
#[derive(Default)]
struct StdoutFlags {
    /// The script's `=== lockscope begin` line (its BEGIN clause: every probe is enabled).
    began: AtomicBool,
    /// The `=== lockscope done` line (the end of END: every aggregation is printed).
    done: AtomicBool,
}

/// Feeds dtrace's stdout to the parser and sets `flags` on the script's begin and done lines;
/// with `echo`, lines between `BEGIN` and END's first record (a `-c` command's output) go to
/// lockscope's stdout instead.
fn read_stdout(
    stdout: Option<impl Read>,
    flags: &StdoutFlags,
    echo: bool,
    mut stream: Option<WaitForStream>,
) -> (Output, Option<WaitForStream>) {
    let mut parser = Parser::new();
    let mut in_end = false;
    if let Some(stdout) = stdout {
        for_each_line(stdout, |line| {
            let content = line.strip_suffix(b"\n").unwrap_or(line);
            if content == &OUTPUT_EOF[1..OUTPUT_EOF.len() - 1] {
                return ControlFlow::Break(());
            }
            if content.starts_with(b"=== lockscope begin") {
                flags.began.store(true, Ordering::Release);
            }
            // The wait-for stream's lines, as they come (never the target's output, never a
            // record of END).
            if let Some(stream) = stream.as_mut() {
                if stream.feed_line(&String::from_utf8_lossy(content)) {
                    return ControlFlow::Continue(());
                }
            }
            in_end |= content.starts_with(b"=== lockscope record")
                || content.starts_with(b"=== lockscope done");
            // Empty lines are not passed on: dtrace prints one itself when
            // interrupted, before END (the command's own empty lines are lost).
            if echo
                && !in_end
                && !content.is_empty()
                && flags.began.load(Ordering::Relaxed)
                && !content.starts_with(b"=== lockscope begin")
            {
                let mut out = std::io::stdout().lock();
                let _ = std::io::Write::write_all(&mut out, line);
                let _ = std::io::Write::flush(&mut out);
                return ControlFlow::Continue(());
            }
            parser.feed_bytes(content);
            if content.starts_with(b"=== lockscope done") {
                flags.done.store(true, Ordering::Release);
                // Nothing comes after it, and the pipe may stay open for seconds
                // while the kernel tears dtrace's probes down.
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
    }
    (parser.finish(), stream)
}

/// Where dtrace writes its output when it has a pipe of its own (see [`OutputPipe`]).
const OUTPUT_FD_PATH: &str = "/dev/fd/3";

/// What the driver writes into dtrace's output pipe once dtrace has exited: the reader stops
/// there (a `-c` command that outlives dtrace still holds the pipe open).
const OUTPUT_EOF: &[u8] = b"\n=== lockscope output ends\n";

/// A pipe for dtrace's output (`-o /dev/fd/3`): its write end becomes dtrace's fd 3, its read
/// end is the driver's; the driver keeps a write end too, for [`OUTPUT_EOF`].
struct OutputPipe {
    read: std::os::fd::OwnedFd,
    write: std::os::fd::OwnedFd,
}

impl OutputPipe {
    fn new() -> Result<OutputPipe, Error> {
        use std::os::fd::FromRawFd;
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a valid array of two ints for pipe to fill.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(Error::Process {
                action: "make an output pipe for",
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: pipe just returned these two descriptors, owned by nothing else.
        let (read, write) = unsafe {
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        for fd in [&read, &write] {
            use std::os::fd::AsRawFd;
            // SAFETY: fcntl on a descriptor this function owns.
            unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        Ok(OutputPipe { read, write })
    }

    /// Makes the write end fd 3 of the child `command` starts.
    fn give_to(&self, command: &mut Command) {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let write = self.write.as_raw_fd();
        // SAFETY: between fork and exec only async-signal-safe calls are made (dup2, fcntl).
        unsafe {
            command.pre_exec(move || {
                if write == 3 {
                    // dup2 onto itself keeps close-on-exec: clear it.
                    if libc::fcntl(3, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(write, 3) != 3 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// The read end, and the driver's write end.
    fn split(self) -> (std::fs::File, std::fs::File) {
        (
            std::fs::File::from(self.read),
            std::fs::File::from(self.write),
        )
    }
}

/// Passes what a command launched by `dtrace -c` prints on to lockscope's stdout (`echo`), or
/// drains it, when dtrace's own output has a pipe of its own.
fn copy_target_output(stdout: impl Read, echo: bool) {
    for_each_line(stdout, |line| {
        if echo {
            let mut out = std::io::stdout().lock();
            let _ = std::io::Write::write_all(&mut out, line);
            let _ = std::io::Write::flush(&mut out);
        }
        ControlFlow::Continue(())
    });
}

/// Collects dtrace's stderr lines into `lines` as they come, so that they can be read before
/// dtrace has exited (see [`DONE_GRACE`]).
fn read_stderr(stderr: Option<impl Read>, lines: &Mutex<Vec<String>>) {
    let Some(stderr) = stderr else {
        return;
    };
    for_each_line(stderr, |line| {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\n', '\r']);
        if !text.trim().is_empty() {
            if let Ok(mut lines) = lines.lock() {
                lines.push(text.to_string());
            }
        }
        ControlFlow::Continue(())
    });
}

/// Calls `each` with every line `reader` gives as it comes (its `\n` included; the last one may
/// lack it) until the end, a read error (a pipe's reader has nothing better to do), or `each`
/// breaks.
fn for_each_line(reader: impl Read, mut each: impl FnMut(&[u8]) -> ControlFlow<()>) {
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if each(&line).is_break() {
                    break;
                }
            }
        }
    }
}

/// What dtrace's stderr says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diagnosis {
    /// Drops and errors, counted.
    pub losses: Losses,
    /// The drop and error lines counted in `losses`.
    pub drop_lines: Vec<String>,
    /// SIP warning seen.
    pub sip: bool,
    /// A "probe description ... does not match any probes" line.
    pub no_probe: Option<String>,
    /// A privileges complaint.
    pub privileges: Option<String>,
    /// A "restricted entitlements" refusal.
    pub restricted: Option<String>,
    /// "pid N has exited".
    pub target_exited: bool,
    /// DTrace for Linux's "BPF program load for 'P' failed: ..." line, when the kernel refused
    /// one of its programs.
    pub bpf_load_failed: Option<String>,
    /// The verifier's log lines (`BPF: ...`), without the prefix.
    pub verifier_log: Vec<String>,
    /// Other lines (dtrace's errors), without the `dtrace: ` prefix.
    pub errors: Vec<String>,
}

/// Classifies dtrace's stderr lines.
pub fn diagnose(lines: &[String]) -> Diagnosis {
    let mut d = Diagnosis::default();
    for line in lines {
        // The verifier log comes first: its lines mention registers and "permission denied",
        // which are nothing of the kind here.
        if let Some(log) = line.strip_prefix("BPF:") {
            d.verifier_log.push(log.trim().to_string());
            continue;
        }
        let message = line.strip_prefix("dtrace: ").unwrap_or(line).trim();
        let lower = message.to_ascii_lowercase();
        if lower.contains("bpf program load for") || lower.starts_with("bpf verifier log is") {
            if lower.contains("bpf program load for") {
                d.bpf_load_failed.get_or_insert_with(|| message.to_string());
            }
        } else if lower.starts_with("set dtrace option 'bpflogsize'")
            || lower.starts_with("(current size is")
        {
            // The rest of DTrace's "log is incomplete" note.
        } else if lower.contains("system integrity protection is on") {
            d.sip = true;
        } else if lower.contains("does not match any probes") {
            d.no_probe.get_or_insert_with(|| message.to_string());
        } else if lower.contains("restricted entitlements") {
            d.restricted.get_or_insert_with(|| message.to_string());
        } else if lower.contains("requires additional privileges")
            || lower.contains("permission denied")
            || lower.contains("insufficient privilege")
            || lower.contains("must be root")
        {
            d.privileges.get_or_insert_with(|| message.to_string());
        } else if lower.starts_with("pid ") && lower.ends_with("has exited") {
            d.target_exited = true;
        } else if let Some((count, what)) = drop_report(&lower) {
            if what.starts_with("aggregation drop") || what.starts_with("dynamic variable drop") {
                d.losses.map_full = d.losses.map_full.saturating_add(count);
            } else {
                d.losses.dropped = d.losses.dropped.saturating_add(count);
            }
            d.drop_lines.push(message.to_string());
        } else if lower.starts_with("error on enabled probe") {
            d.losses.dropped = d.losses.dropped.saturating_add(1);
            d.drop_lines.push(message.to_string());
        } else {
            d.errors.push(message.to_string());
        }
    }
    d
}

/// `12 dynamic variable drops`, `5 aggregation drops on CPU 0`, `3 drops on CPU 1`.
fn drop_report(message: &str) -> Option<(u64, &str)> {
    let (count, rest) = message.split_once(' ')?;
    let count = count.parse().ok()?;
    rest.contains("drops").then_some((count, rest))
}

/// The script, in a file dtrace can read, removed when dropped.
struct ScriptFile {
    path: PathBuf,
}

impl ScriptFile {
    fn write(script: &str) -> Result<ScriptFile, Error> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!("lockscope-{}-{nanos}.d", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, script.as_bytes()));
        match written {
            Ok(()) => Ok(ScriptFile { path }),
            Err(source) => Err(Error::WriteScript { path, source }),
        }
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process whose every thread sits in a tracing stop of this process's is held stopped by
    /// it, by no other process, and a running one is not.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_target_in_a_tracing_stop_is_held() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        let own = std::process::id();
        assert!(!held_stopped(pid, own), "running");
        // SAFETY: ptrace and waitpid on our own child, with no pointers passed.
        let attached = unsafe {
            libc::ptrace(libc::PTRACE_ATTACH, pid as libc::pid_t, 0, 0) == 0
                && libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) == pid as i32
        };
        if !attached {
            let _ = child.kill();
            let _ = child.wait();
            eprintln!("skipped: a_target_in_a_tracing_stop_is_held: ptrace is not permitted");
            return;
        }
        let held = held_stopped(pid, own);
        let held_by_init = held_stopped(pid, 1);
        let _ = child.kill();
        let _ = child.wait();
        assert!(held, "in a tracing stop of ours");
        assert!(!held_by_init, "not init's tracing stop");
    }

    /// Drop reports and known refusals are classified; other lines stay errors.
    #[test]
    fn stderr_is_classified() {
        let lines: Vec<String> = [
            "dtrace: 12 dynamic variable drops with non-empty dirty list",
            "dtrace: 5 aggregation drops on CPU 0",
            "dtrace: 3 drops on CPU 1",
            "dtrace: error on enabled probe ID 4 (ID 881: syscall::ulock_wait:return): \
             invalid address (0x0) in action #3",
            "dtrace: system integrity protection is on, some features will not be available",
            "dtrace: pid 4242 has exited",
            "dtrace: something else",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let d = diagnose(&lines);
        assert_eq!(d.losses.map_full, 17);
        assert_eq!(d.losses.dropped, 4);
        assert!(d.sip);
        assert!(d.target_exited);
        assert_eq!(d.errors, vec!["something else".to_string()]);
    }

    /// "does not match any probes" messages name the catalog probe whose hook they quote.
    #[test]
    fn unmatched_descriptions_name_their_probe() {
        let find = |name: &str| crate::catalog::find(name).expect("catalog probe");
        let mac = [find("psynch"), find("plockstat"), find("mutex-hold")];
        let probe = |os, probes: &[&'static DtraceProbe], message: &str| {
            probe_of_message(os, probes, message).map(|p| p.name)
        };
        let message = |description: &str| {
            format!(
                "failed to compile script /tmp/x.d: line 40: probe description {description} \
                 does not match any probes"
            )
        };
        let os = TargetOs::MacOs;
        assert_eq!(
            probe(os, &mac, &message("plockstat4242:::mutex-block")),
            Some("plockstat")
        );
        assert_eq!(
            probe(os, &mac, &message("plockstat4242:::mutex-acquire")),
            Some("mutex-hold")
        );
        assert_eq!(
            probe(os, &mac, &message("syscall::psynch_cvwait:entry")),
            Some("psynch")
        );
        assert_eq!(probe(os, &mac, &message("syscall::read:entry")), None);
        assert_eq!(probe(os, &mac, "something else"), None);
        let bsd = [find("umtx"), find("klock")];
        assert_eq!(
            probe(TargetOs::FreeBsd, &bsd, &message("lockstat:::sx-block")),
            Some("klock")
        );
    }

    /// A verifier rejection (thousands of `BPF:` lines ending in the reason) is one error that
    /// quotes the reason and points to the saved log, not a privileges complaint.
    #[test]
    fn verifier_rejection_is_one_error() {
        let mut lines = vec!["dtrace: could not enable tracing: BPF program load for \
             'syscall:vmlinux:futex:return' failed: Permission denied"
            .to_string()];
        lines.extend((0..3000).map(|i| format!("BPF: {i}: (85) call bpf_map_lookup_elem#1")));
        lines.push("BPF: R1 type=scalar expected=map_ptr".to_string());
        lines.push("BPF: processed 3001 insns (limit 1000000)".to_string());
        let d = diagnose(&lines);
        assert_eq!(d.privileges, None);
        assert_eq!(d.verifier_log.len(), 3002);
        assert!(d.errors.is_empty(), "{:?}", d.errors);
        let message = d.bpf_load_failed.clone().expect("load failure seen");
        let error = verifier_error(&message, &lines, &d);
        let text = error.to_string();
        assert!(text.contains("R1 type=scalar expected=map_ptr"), "{text}");
        assert!(text.contains("'syscall:vmlinux:futex:return'"), "{text}");
        assert!(text.contains("(3002 lines)"), "{text}");
        assert!(!text.contains('\n'), "{text}");
        let Error::VerifierRejected { log: Some(log), .. } = error else {
            panic!("not a saved verifier rejection: {text}");
        };
        let saved = std::fs::read_to_string(&log).expect("log saved");
        assert_eq!(saved.lines().count(), lines.len());
        let _ = std::fs::remove_file(log);
    }

    /// The C library is named only on the OS it belongs to.
    #[test]
    fn libc_is_named_on_its_own_os() {
        assert_eq!(
            libc_description(TargetOs::FreeBsd, Some(TargetOs::FreeBsd), "14.1-RELEASE"),
            Some("FreeBSD libc 14.1-RELEASE".to_string())
        );
        assert_eq!(
            libc_description(TargetOs::MacOs, Some(TargetOs::MacOs), "24.1.0"),
            Some("libSystem (Darwin 24.1.0)".to_string())
        );
        assert_eq!(libc_description(TargetOs::MacOs, None, "6.18.0"), None);
        assert_eq!(
            libc_description(TargetOs::Illumos, Some(TargetOs::MacOs), "24.1.0"),
            None
        );
    }

    /// LOCKSCOPE_DTRACE overrides the binary; unset or empty means `dtrace` from PATH.
    #[test]
    fn binary_override() {
        assert_eq!(dtrace_binary(None), PathBuf::from("dtrace"));
        assert_eq!(dtrace_binary(Some("".into())), PathBuf::from("dtrace"));
        assert_eq!(
            dtrace_binary(Some("/opt/dtrace".into())),
            PathBuf::from("/opt/dtrace")
        );
    }
}
