//! Runs dtrace(1) as a child process on a generated script and turns what it prints into a
//! [`Recording`]: the DTrace backend's [`Recorder`], named as the eBPF backend's, which records
//! the same thing (a target, with the selected probes, into a profile) but is started, polled and
//! finished by its caller where this one runs to the end in one call ([`Recorder::run`]).
//!
//! `dtrace -q -s SCRIPT -p PID` (or `-c CMD`) runs until the target exits, the script's tick
//! clause calls `exit(0)`, or the recorder interrupts it with SIGINT (duration elapsed or the stop
//! flag set): in every case dtrace runs the `END` clause, which prints the aggregations. Its
//! stdout is streamed into [`Parser`]; its stderr is read for errors (made into clear
//! [`Error`]s) and drop reports (counted into [`Losses`]).
//!
//! Launching a command: by default `dtrace -c CMD` starts it. On macOS, when a selected probe
//! needs the introspection libpthread (`plockstat`, `mutex-hold`), the recorder starts the command
//! itself instead ([`Launcher::Recorder`]): `/usr/sbin/dtrace` is protected by System Integrity
//! Protection, and dyld strips `DYLD_*` variables from protected binaries, so
//! `DYLD_LIBRARY_PATH` given to `dtrace -c` never reaches the command. The recorder spawns the
//! command with `DYLD_LIBRARY_PATH` set, stops it with SIGSTOP at once, runs
//! `dtrace -Z -q -s SCRIPT -p PID`, and resumes the command with SIGCONT when the script's
//! `BEGIN` clause has printed (dtrace has enabled every probe by then). `-Z` keeps the plockstat
//! probe descriptions that do not match yet: libpthread registers its plockstat provider when
//! dyld loads it, which may be after the SIGSTOP, and DTrace enables retained descriptions when
//! the provider appears.
//!
//! A probe description that matches nothing (`probe description plockstat4242:::mutex-block
//! does not match any probes`) is pinned to its catalog probe; the recorder runs dtrace again
//! without that probe and records it as [`AttachStatus::Failed`] with dtrace's message, as the
//! eBPF backend does for a probe that fails to attach.
//!
//! [`RecordOptions::dtrace`] names the binary; the `lockscope` binary sets it from
//! `LOCKSCOPE_DTRACE=/path/to/dtrace` ([`DTRACE_ENV`], [`dtrace_binary`]): the tests run a fake
//! one.
//!
//! The code is split by job: the public types and [`Recorder::new`], [`Recorder::run`] here;
//! `launch.rs` starts a command the recorder launches and each run of dtrace (leaving out a probe
//! that matches nothing); `supervise.rs` waits for dtrace and ends it; `process.rs` controls and
//! watches processes (signals, `/proc`); `output.rs` reads dtrace's stdout and stderr;
//! `diagnose.rs` classifies its stderr into errors and warnings; `finish.rs` turns the run that
//! recorded into a [`Recording`]; `tests.rs` holds the unit tests.
//!
//! [`Parser`]: crate::parse::Parser
//! [`Losses`]: lockscope_probes::Losses
//! [`AttachStatus::Failed`]: lockscope_probes::AttachStatus::Failed

use crate::catalog::{DtraceProbe, TargetOs, MACOS_INTROSPECTION};
use crate::parse::Output;
use crate::script::{generate_script, ScriptOptions, ScriptTarget};
use crate::Error;
use lockscope_probes::{Profile, Target};
use process::{end_launched_command, LaunchedTarget};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

mod diagnose;
mod finish;
mod launch;
mod output;
mod process;
mod supervise;
#[cfg(test)]
mod tests;

pub use diagnose::{diagnose, probe_of_message, Diagnosis};
pub use finish::libc_description;

/// Environment variable naming the dtrace binary to run instead of `dtrace` from `PATH` (read by
/// the `lockscope` binary, not by this library).
pub const DTRACE_ENV: &str = "LOCKSCOPE_DTRACE";

/// Who starts a [`Target::Command`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Launcher {
    /// [`Launcher::Recorder`] on macOS when a selected probe needs the introspection libpthread,
    /// else [`Launcher::Dtrace`].
    #[default]
    Auto,
    /// `dtrace -c CMD`: dtrace starts the command stopped and runs it once its probes are
    /// enabled. Environment variables reach it through dtrace (not `DYLD_*` on macOS: SIP
    /// strips them from the protected dtrace binary).
    Dtrace,
    /// The recorder starts the command with the environment it needs, stops it (SIGSTOP) at once,
    /// attaches with `dtrace -Z -p PID` and resumes it (SIGCONT) when the script's `BEGIN`
    /// clause has printed. The command may have run for the microseconds between its start and
    /// the SIGSTOP (inside dyld or the dynamic linker, before `main`). Arguments may contain
    /// white space.
    Recorder,
}

/// Options of a [`Recorder`]. Build with [`RecordOptions::new`] and set fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RecordOptions {
    /// The script to generate; its `target` is set from [`RecordOptions::target`]
    /// ([`ScriptTarget::of`]) and its `duration` is also enforced by the recorder (SIGINT when it
    /// elapses).
    pub script: ScriptOptions,
    /// What to trace. One running process without its tree is attached to (`-p PID`); several,
    /// or one with its tree, or every process, are selected by the script's predicates (dtrace
    /// symbolizes their frames itself: the Linux recorder reads one target's mappings only) and
    /// recorded until the duration elapses or a stop, not until they exit; a command is
    /// launched (with [`Launcher::Dtrace`] by `dtrace -c CMD`, which splits its string on white
    /// space, so no argument may contain any); a cgroup is refused ([`Error::NoCgroup`]).
    pub target: Target,
    /// The dtrace binary. Default: `dtrace` (looked up in `PATH`).
    pub dtrace: PathBuf,
    /// Set to true to end the recording (dtrace gets SIGINT and prints its aggregations).
    /// Default: a flag nobody sets.
    pub stop: Arc<AtomicBool>,
    /// Extra environment variables for dtrace and a launched command. Default: empty; on macOS,
    /// when launching a command with a plockstat probe selected, the recorder adds
    /// `DYLD_LIBRARY_PATH=/usr/lib/system/introspection` for the command.
    pub env: Vec<(OsString, OsString)>,
    /// Who starts a launched command. Default: [`Launcher::Auto`].
    pub launcher: Launcher,
    /// How long dtrace may take to print its aggregations after SIGINT before it is killed
    /// (and the recording lost). Default: 30 s.
    pub grace: Duration,
    /// Set by the recorder when dtrace's BEGIN clause has printed: every probe is enabled and
    /// the recording has started (for a status line, or a test that starts the load then).
    pub began: Arc<AtomicBool>,
    /// Copy what a command launched by `dtrace -c` prints to lockscope's stdout. Its stdout is
    /// dtrace's, which the recorder reads; with `quiet` dtrace prints nothing of its own until
    /// END, so the lines between `BEGIN` and the first record are the command's. Default:
    /// false (they are counted as skipped lines).
    pub echo_target_output: bool,
}

impl RecordOptions {
    /// Default options for tracing `target` with `script`.
    pub fn new(script: ScriptOptions, target: Target) -> Self {
        RecordOptions {
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
pub struct Recorder {
    options: RecordOptions,
    /// The command to launch (`argv[0]` first), as dtrace -c takes it; empty for other targets.
    command: Vec<String>,
    script: String,
    /// The recorder starts the command itself ([`Launcher::Recorder`], resolved).
    self_launch: bool,
}

impl Recorder {
    /// Validates the options and generates the script.
    pub fn new(mut options: RecordOptions) -> Result<Recorder, Error> {
        let wants_introspection = options.script.os == TargetOs::MacOs
            && options
                .script
                .selected_probes()
                .map(|probes| probes.iter().any(|p| p.macos_needs_launch))
                .unwrap_or(false);
        let mut self_launch = false;
        let mut command = Vec::new();
        options.script.target = ScriptTarget::of(&options.target)?;
        if let Target::Command(argv) = &options.target {
            let argv = argv
                .iter()
                .map(|a| {
                    a.clone()
                        .into_string()
                        .map_err(|argument| Error::NonUtf8Argument { argument })
                })
                .collect::<Result<Vec<String>, Error>>()?;
            self_launch = match options.launcher {
                Launcher::Recorder => true,
                Launcher::Dtrace => false,
                // Never on Linux: DTrace for Linux crashed (4 runs of 4) attaching with -p
                // to a process stopped with SIGSTOP and continued, and `dtrace -c` loses
                // nothing there that the recorder does not restore (symbols: see
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
                             empty or contain spaces (the recorder's own launcher takes them)"
                        .into(),
                });
            }
            command = argv;
        }
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
        Ok(Recorder {
            options,
            command,
            script,
            self_launch,
        })
    }

    /// The D script that [`Recorder::run`] will run (first: a probe that matches nothing is left
    /// out of the next attempt).
    pub fn script(&self) -> &str {
        &self.script
    }

    /// True when the recorder starts the command itself (see [`Launcher::Recorder`]).
    pub fn launches_target(&self) -> bool {
        self.self_launch
    }

    /// The dtrace arguments after the binary, with the script at `script_path`. A command the
    /// recorder launches is traced as `-Z -p` with its pid, which [`Recorder::run`] fills in; here
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
        match &self.options.script.target {
            ScriptTarget::Pid(pid) => {
                args.push("-p".into());
                args.push(pid.to_string().into());
            }
            ScriptTarget::Command if self.self_launch => {
                args.push("-p".into());
                args.push(launched_pid.unwrap_or(0).to_string().into());
            }
            ScriptTarget::Command => {
                args.push("-c".into());
                args.push(self.command.join(" ").into());
            }
            // The script's predicates say which processes: dtrace traces system-wide.
            ScriptTarget::Pids { .. } | ScriptTarget::All => {}
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
        let dtrace_launches = self.options.script.target == ScriptTarget::Command;
        if dtrace_launches && !self.self_launch && self.wants_introspection(probes) {
            env.push(("DYLD_LIBRARY_PATH".into(), MACOS_INTROSPECTION.into()));
        }
        env
    }

    /// Runs dtrace to the end and returns the recording.
    pub fn run(self) -> Result<Recording, Error> {
        let start = SystemTime::now();
        let started = Instant::now();
        let mut launched = match &self.options.script.target {
            ScriptTarget::Command if self.self_launch => Some(self.launch(&self.command)?),
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
}
