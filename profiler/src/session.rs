//! One recording session over either backend: what `record`, `sweep` and `bench --record` share.
//!
//! [`Session::start`] returns once the probes are attached (the eBPF backend's `Recorder` started,
//! or dtrace's BEGIN clause printed), so a caller can start a load knowing it is recorded from its
//! first request. The backend's `Recorder` then records on a thread of its own: the eBPF one is
//! polled there (its ring buffers drained, new processes' tables built), the DTrace one runs
//! dtrace there and reads its output. The
//! recording ends by itself when its duration elapses or the target exits, or when the caller
//! asks ([`Session::stop`]); the eBPF recording says when its probes are off
//! ([`Session::recording_ended`]) before it resolves the stacks, and [`Session::finish`] returns
//! the profile. The duration counts from the attach, and the target's own CPU clocks around the
//! attach and the recording tell an idle target, or a load over before the attach, in the
//! profile's warnings.

use crate::cli::BackendArg;
use anyhow::{bail, Context, Result};
use lockscope_probes::{Profile, Target};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the eBPF recorder is polled.
#[cfg(target_os = "linux")]
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How often [`Session::start`] looks whether the backend is ready, and how often a recording
/// about to end looks for a stop request.
const READY_POLL: Duration = Duration::from_millis(10);

/// What to record and how, validated (built from `record`'s arguments by
/// [`RecordArgs::to_session_options`](crate::cmd::record::RecordArgs::to_session_options), by
/// `sweep` and by `bench --record`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SessionOptions {
    /// What to record.
    pub target: Target,
    /// The backend. Default: the host's (ebpf on Linux, dtrace elsewhere).
    pub backend: BackendArg,
    /// OS of the D script (dtrace backend). Default: `None`, this host's.
    pub dtrace_os: Option<lockscope_dtrace::TargetOs>,
    /// Probes to attach; empty means the backend's defaults. Default: empty.
    pub probes: Vec<String>,
    /// Shortest off-CPU interval the `offcpu` probe records; `None`: its default (10 µs).
    pub min_block: Option<Duration>,
    /// System calls the `syscall` probe records; empty means all. Default: empty.
    pub syscalls: Vec<String>,
    /// Samples per second and CPU of the `cpu` probe; `None`: its default (99 Hz).
    pub frequency_hz: Option<u32>,
    /// How long to record; `None`: until the target exits or [`Session::stop`]. Default: `None`.
    pub duration: Option<Duration>,
    /// The unwind-table cache directory (eBPF); `None` builds every table afresh. Default: `None`.
    pub cache_dir: Option<PathBuf>,
    /// Copy what a command dtrace launches prints to our stdout, as if run directly (dtrace
    /// backend). Default: false.
    pub echo_target_output: bool,
}

impl SessionOptions {
    /// Recording `target` with the host's backend and its defaults.
    pub fn new(target: Target) -> Self {
        SessionOptions {
            target,
            backend: BackendArg::host_default(),
            dtrace_os: None,
            probes: Vec::new(),
            min_block: None,
            syscalls: Vec::new(),
            frequency_hz: None,
            duration: None,
            cache_dir: None,
            echo_target_output: false,
        }
    }
}

/// How far a recording is, for a status line (eBPF backend; dtrace reports nothing until it
/// ends).
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Time since recording started.
    pub elapsed: Duration,
    /// Waits recorded so far.
    pub events: u64,
    /// Events lost so far.
    pub lost: u64,
    /// Stacks that could not be taken so far.
    pub stack_failures: u64,
}

/// The end of a recording, known before its profile is built (eBPF backend).
#[derive(Clone, Debug)]
pub struct Ended {
    /// How long it recorded, from the attach to the detach's start: the profile's duration.
    pub recorded: Duration,
    /// Why it ended, as the profile says.
    pub reason: String,
}

/// What a session's recording produced.
#[derive(Debug)]
pub struct Recording {
    /// The profile, with what was recorded up to the end (or the failure).
    pub profile: Profile,
    /// Lines the user should read (dtrace's warnings, how the user stacks were unwound).
    pub notes: Vec<String>,
    /// The error that ended the recording early, after which `profile` holds what came before.
    pub failure: Option<anyhow::Error>,
}

/// State shared between the caller and the backend's thread.
#[derive(Default)]
struct Shared {
    /// Set once the probes are attached (by the DTrace recorder itself: its `began` flag).
    ready: Arc<AtomicBool>,
    /// The target's pid, once known.
    pid: Mutex<Option<u32>>,
    /// What is recorded, in words, once the recording started (eBPF).
    description: Mutex<Option<String>>,
    /// What the user should know of the target set from the start (eBPF).
    warnings: Mutex<Vec<String>>,
    /// Set by [`Session::stop`], with the reason the profile gives.
    stop: Mutex<Option<String>>,
    /// The same request as a flag, as the DTrace recorder takes it.
    stop_flag: Arc<AtomicBool>,
    progress: Mutex<Progress>,
    /// Set once the probes are detached, while the profile is still being built (eBPF).
    ended: Mutex<Option<Ended>>,
}

/// A recording in progress.
pub struct Session {
    shared: Arc<Shared>,
    worker: JoinHandle<Result<Recording>>,
}

impl Session {
    /// Starts recording; returns once the probes are attached, or with the error that kept
    /// them from it.
    pub fn start(options: SessionOptions) -> Result<Session> {
        let shared = Arc::new(Shared::default());
        let worker = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("lockscope-record".into())
                .spawn(move || match options.backend {
                    BackendArg::Ebpf => record_ebpf(options, &shared),
                    BackendArg::Dtrace => record_dtrace(options, &shared),
                })
                .context("failed to start the recording thread")?
        };
        while !shared.ready.load(Ordering::Acquire) {
            if worker.is_finished() {
                return match worker.join() {
                    Ok(Ok(_)) => bail!("the recording ended before it started"),
                    Ok(Err(e)) => Err(e),
                    Err(_) => bail!("the recording thread panicked"),
                };
            }
            std::thread::sleep(READY_POLL);
        }
        Ok(Session { shared, worker })
    }

    /// The pid being recorded (a launched command's, once known).
    pub fn target_pid(&self) -> Option<u32> {
        *lock(&self.shared.pid)
    }

    /// What is recorded, in words (`pids 12, 34 and their descendants (5 processes)`), once
    /// known (eBPF).
    pub fn target_description(&self) -> Option<String> {
        lock(&self.shared.description).clone()
    }

    /// What the user should know of the target set as the recording starts (descendants not
    /// recorded, an empty cgroup); the profile carries them too.
    pub fn warnings(&self) -> Vec<String> {
        lock(&self.shared.warnings).clone()
    }

    /// How far the recording is.
    pub fn progress(&self) -> Progress {
        *lock(&self.shared.progress)
    }

    /// Whether the recording ended by itself (duration, target exit, failure) and its profile
    /// is built.
    pub fn ended(&self) -> bool {
        self.worker.is_finished()
    }

    /// The recording's end once its probes are detached, while its stacks are still being
    /// resolved (eBPF backend; `None` before, and with dtrace).
    pub fn recording_ended(&self) -> Option<Ended> {
        lock(&self.shared.ended).clone()
    }

    /// Asks the recording to end; `reason` is what the profile says of it (eBPF backend; dtrace
    /// says "interrupted").
    pub fn stop(&self, reason: &str) {
        lock(&self.shared.stop).get_or_insert_with(|| reason.to_string());
        self.shared.stop_flag.store(true, Ordering::Release);
    }

    /// Waits for the recording to end (call [`Session::stop`] first to end it now).
    pub fn finish(self) -> Result<Recording> {
        match self.worker.join() {
            Ok(result) => result,
            Err(_) => bail!("the recording thread panicked"),
        }
    }
}

/// Locks `mutex`, also after a panic elsewhere (the values are plain data).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Environment variable naming probes whose attach fails on purpose (comma-separated): lets a
/// test, or a user checking their monitoring, see what a failed probe looks like.
#[cfg(target_os = "linux")]
const FAIL_ATTACH_ENV: &str = "LOCKSCOPE_FAIL_ATTACH";
/// Environment variable forcing the eBPF programs' variant (`default` or `compat`) instead of
/// asking the kernel: lets the tests run the compat programs on a current kernel.
#[cfg(target_os = "linux")]
const PROGRAM_VARIANT_ENV: &str = "LOCKSCOPE_BPF_PROGRAMS";
/// Environment variable selecting how user stacks are captured, to measure what unwinding
/// costs: `cfi` (the default), `frame-pointers` or `none`.
#[cfg(target_os = "linux")]
const USER_STACKS_ENV: &str = "LOCKSCOPE_USER_STACKS";
/// Environment variable turning the unwinder's per-thread stack memo `on` (the default), `off`
/// (every stack unwound: to measure what the memo saves) or to `verify` (every stack unwound and
/// compared with the memo's answer: for tests).
#[cfg(target_os = "linux")]
const STACK_MEMO_ENV: &str = "LOCKSCOPE_STACK_MEMO";

/// The eBPF probes' settings that enter through the environment (tests and measurements),
/// read here: the libraries read none.
#[cfg(target_os = "linux")]
pub(crate) fn probe_settings_from_env(settings: &mut lockscope_ebpf::ProbeSettings) {
    if let Some(names) = std::env::var_os(FAIL_ATTACH_ENV) {
        settings.fail_attach = names
            .to_string_lossy()
            .split(',')
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect();
    }
    // Anything but `default` or `compat` means: ask the kernel.
    settings.program_variant = std::env::var(PROGRAM_VARIANT_ENV)
        .ok()
        .and_then(|name| lockscope_ebpf::ProgramVariant::from_name(&name));
}

/// How user stacks are captured, from the environment (default: CFI).
#[cfg(target_os = "linux")]
fn user_stacks_from_env() -> Result<lockscope_ebpf::UserStacks> {
    let Some(mode) = std::env::var_os(USER_STACKS_ENV) else {
        return Ok(lockscope_ebpf::UserStacks::default());
    };
    let mode = mode.to_string_lossy();
    lockscope_ebpf::UserStacks::from_name(&mode).with_context(|| {
        format!("{USER_STACKS_ENV}: `{mode}` is not one of cfi, frame-pointers, none")
    })
}

/// The stack memo's mode, from the environment (default: on).
#[cfg(target_os = "linux")]
fn stack_memo_from_env() -> Result<lockscope_ebpf::StackMemo> {
    let Some(mode) = std::env::var_os(STACK_MEMO_ENV) else {
        return Ok(lockscope_ebpf::StackMemo::default());
    };
    let mode = mode.to_string_lossy();
    lockscope_ebpf::StackMemo::from_name(&mode)
        .with_context(|| format!("{STACK_MEMO_ENV}: `{mode}` is not one of on, off, verify"))
}

/// The eBPF recorder's options of a session: its target, probes and settings, with those that
/// enter through the environment (`record`'s, and `top`'s, which drives the recorder itself).
#[cfg(target_os = "linux")]
pub(crate) fn ebpf_record_options(
    options: &SessionOptions,
) -> Result<lockscope_ebpf::RecordOptions> {
    let mut record = lockscope_ebpf::RecordOptions::new(options.target.clone());
    record.probes.clone_from(&options.probes);
    if let Some(min_block) = options.min_block {
        record.probe_settings.min_block = min_block;
    }
    record.probe_settings.syscalls.clone_from(&options.syscalls);
    if let Some(hz) = options.frequency_hz {
        record.probe_settings.frequency_hz = hz;
    }
    record.unwind.cache_dir.clone_from(&options.cache_dir);
    // The server keeps running while its less used libraries' tables are built: attaching
    // waits only for the main executable's and libc's (issue 14).
    record.unwind.background = true;
    probe_settings_from_env(&mut record.probe_settings);
    record.unwind.user_stacks = user_stacks_from_env()?;
    record.unwind.stack_memo = stack_memo_from_env()?;
    Ok(record)
}

/// The eBPF backend on the session's thread: start, poll until the end, finish.
#[cfg(target_os = "linux")]
fn record_ebpf(options: SessionOptions, shared: &Shared) -> Result<Recording> {
    use lockscope::report::Activity;
    use lockscope_ebpf::Recorder;
    use std::collections::HashMap;
    use std::time::Instant;

    // The target's own CPU clocks around the attach and the recording: a target that did
    // nothing while recorded is told apart from one whose load ended during the attach. Not
    // for every process of the machine (-a), which is never idle.
    let measured = !matches!(options.target, Target::All);
    let given = options.target.given_pids().to_vec();
    let record = ebpf_record_options(&options)?;
    let stack_memo = record.unwind.stack_memo;
    let before_attach = (Instant::now(), processes_cpu_ns(&given));
    let mut recorder = Recorder::start(record)?;
    let attach_ns = before_attach.0.elapsed().as_nanos() as u64;
    let at_attach = if measured {
        processes_cpu_ns(&recorder.recorded_pids())
    } else {
        HashMap::new()
    };
    let target = recorder.target();
    if target.pid != 0 {
        *lock(&shared.pid) = Some(recorder.target_pid());
    }
    let description = describe_target(target, recorder.processes_recorded());
    *lock(&shared.description) = Some(description);
    *lock(&shared.warnings) = recorder.warnings().to_vec();
    shared.ready.store(true, Ordering::Release);

    let reason = match poll_until_end(&mut recorder, &options, shared) {
        Ok(reason) => reason,
        Err(failure) => {
            // What was recorded so far is kept, and the failure said after it; when nothing
            // can be kept, the failure is still the error's cause.
            let profile = match recorder.finish("recorder failed") {
                Ok(profile) => profile,
                Err(finish) => {
                    return Err(failure.context(format!(
                        "failed to finish the recording after it failed: {finish:#}"
                    )))
                }
            };
            return Ok(Recording {
                profile,
                notes: Vec::new(),
                failure: Some(failure),
            });
        }
    };
    let at_end = processes_cpu_ns(&at_attach.keys().copied().collect::<Vec<_>>());
    let recorded = recorder.end();
    // Said now: the detach that follows can wait for RCU grace periods, and records nothing.
    *lock(&shared.ended) = Some(Ended {
        recorded,
        reason: reason.clone(),
    });
    recorder.stop();
    // A process gone by the end took its CPU time with it: with none left, nothing is known.
    let still_there = at_end.keys().any(|pid| at_attach.contains_key(pid));
    let activity = (measured && still_there).then(|| Activity {
        attach_ns,
        attach_cpu_ns: cpu_used(&before_attach.1, &at_attach),
        recording_ns: recorded.as_nanos() as u64,
        recording_cpu_ns: cpu_used(&at_attach, &at_end),
    });
    let mut notes: Vec<String> = recorder
        .warnings()
        .iter()
        .map(|w| format!("warning: {w}"))
        .collect();
    let finished = recorder
        .finish_reporting(&reason)
        .context("failed to finish the recording")?;
    notes.extend(unwind_summary(
        finished.unwind.as_ref(),
        &finished.symbol_failures,
        stack_memo,
    ));
    let mut profile = finished.profile;
    // Said where the recording saw nothing, as the reason: the measure reads the processes
    // recorded at the attach, not the children a tree forks later nor those gone by the end.
    let saw_nothing = profile.waits.is_empty();
    if let Some(warning) = activity.filter(|_| saw_nothing).and_then(|a| a.warning()) {
        notes.push(format!("warning: {warning}"));
        profile.metadata.warnings.push(warning);
    }
    Ok(Recording {
        profile,
        notes,
        failure: None,
    })
}

/// Polls `recorder` until the duration, a stop or the target's exit ends the recording, and
/// says why it ended; a failed poll is the error.
#[cfg(target_os = "linux")]
fn poll_until_end(
    recorder: &mut lockscope_ebpf::Recorder,
    options: &SessionOptions,
    shared: &Shared,
) -> Result<String> {
    use lockscope_ebpf::Recorder;
    use std::time::Instant;

    // The duration counts from the attach (the recorder's clock), and the recording ends at
    // it: the last sleep stops there, and a poll that would end past it (a poll takes about as
    // long as the one before: draining the bottleneck stream of a busy server takes hundreds of
    // milliseconds) is not started, the end's drain taking what it would have.
    let reason = loop {
        // A sleep can end late on a busy machine: past the end, there is no poll to start.
        if options.duration.is_some_and(|d| recorder.elapsed() >= d) {
            break "duration elapsed".to_string();
        }
        let polled = Instant::now();
        let status = match recorder.poll() {
            Ok(status) => status,
            Err(e) => return Err(anyhow::Error::from(e).context("recording failed")),
        };
        let last_poll = polled.elapsed();
        *lock(&shared.progress) = Progress {
            elapsed: status.elapsed,
            events: status.events,
            lost: status.losses.lost_events(),
            stack_failures: status.losses.user_stack_failures + status.losses.kernel_stack_failures,
        };
        if let Some(reason) = lock(&shared.stop).clone() {
            break reason;
        }
        if status.target_exited {
            break target_exit_reason(recorder.target_exit_status());
        }
        let interval = if recorder.wants_early_polls() {
            Recorder::EARLY_POLL_INTERVAL
        } else {
            POLL_INTERVAL
        };
        if let Some(duration) = options.duration {
            let left = duration.saturating_sub(recorder.elapsed());
            if left <= interval + last_poll {
                break nap(left, shared).unwrap_or_else(|| "duration elapsed".to_string());
            }
        }
        recorder.wait(interval);
    };
    Ok(reason)
}

/// What the recording records, as the progress line says it: `pid N` for one process (scripts
/// wait for that line), else the pids, the cgroup or all processes, and how many processes.
#[cfg(target_os = "linux")]
fn describe_target(target: &lockscope_probes::RecordedTarget, processes: usize) -> String {
    let counted = format!(
        "{processes} {}",
        if processes == 1 {
            "process"
        } else {
            "processes"
        }
    );
    // `recording pid N` as before for one process: scripts wait for that line.
    match (&target.cgroup, target.all, target.tree, target.pids.len()) {
        (_, true, _, _) => format!("all processes ({counted})"),
        (Some(cgroup), _, _, _) => format!("cgroup {cgroup} ({counted})"),
        (None, false, tree, n) if tree || n > 1 => {
            let pids: Vec<String> = if n > 1 {
                target.pids.iter().map(u32::to_string).collect()
            } else {
                vec![target.pid.to_string()]
            };
            format!(
                "{} {}{} ({counted})",
                if n > 1 { "pids" } else { "pid" },
                pids.join(", "),
                match (tree, n > 1) {
                    (false, _) => "",
                    (true, false) => " and its descendants",
                    (true, true) => " and their descendants",
                }
            )
        }
        _ => format!("pid {}", target.pid),
    }
}

/// The CPU time (user and system, of every thread, the exited ones' included) each of `pids`
/// has used since it started, nanoseconds, from `/proc/PID/stat`; a process gone is left out.
#[cfg(target_os = "linux")]
fn processes_cpu_ns(pids: &[u32]) -> std::collections::HashMap<u32, u64> {
    // SAFETY: sysconf reads a constant of the system and has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ns_per_tick = match u64::try_from(ticks_per_s) {
        Ok(ticks) if ticks > 0 => 1_000_000_000 / ticks,
        _ => return std::collections::HashMap::new(),
    };
    pids.iter()
        .filter_map(|&pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // After the command's closing parenthesis (the command may hold spaces): the state,
            // then fields 4 to 13, then utime and stime (proc(5)).
            let fields: Vec<&str> = stat
                .get(stat.rfind(')')? + 1..)?
                .split_whitespace()
                .collect();
            let ticks =
                fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
            Some((pid, ticks.saturating_mul(ns_per_tick)))
        })
        .collect()
}

/// The CPU time the processes of `before` used until `after`, each still there counted.
#[cfg(target_os = "linux")]
fn cpu_used(
    before: &std::collections::HashMap<u32, u64>,
    after: &std::collections::HashMap<u32, u64>,
) -> u64 {
    before
        .iter()
        .filter_map(|(pid, &then)| Some(after.get(pid)?.saturating_sub(then)))
        .fold(0u64, u64::saturating_add)
}

/// Sleeps `length`, or less when a stop is asked for, whose reason it returns.
#[cfg(target_os = "linux")]
fn nap(length: Duration, shared: &Shared) -> Option<String> {
    let until = std::time::Instant::now() + length;
    loop {
        if let Some(reason) = lock(&shared.stop).clone() {
            return Some(reason);
        }
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        std::thread::sleep(left.min(READY_POLL));
    }
}

/// The eBPF backend where there is none.
#[cfg(not(target_os = "linux"))]
fn record_ebpf(_options: SessionOptions, _shared: &Shared) -> Result<Recording> {
    bail!("the ebpf backend is Linux-only; use --backend dtrace")
}

/// The DTrace backend on the session's thread: the recorder runs dtrace until the end.
fn record_dtrace(options: SessionOptions, shared: &Shared) -> Result<Recording> {
    use lockscope_dtrace::{RecordOptions, Recorder, ScriptOptions};

    let os = dtrace_os(options.dtrace_os)?;
    let mut script = ScriptOptions::new(os);
    script.probes = options.probes;
    script.duration = options.duration;
    if let Some(pid) = options.target.single_pid() {
        *lock(&shared.pid) = Some(pid);
    }
    let mut record = RecordOptions::new(script, options.target);
    // The dtrace binary enters here, from the environment (the tests run a fake one).
    record.dtrace = lockscope_dtrace::recorder::dtrace_binary(std::env::var_os(
        lockscope_dtrace::recorder::DTRACE_ENV,
    ));
    record.echo_target_output = options.echo_target_output;
    record.stop = Arc::clone(&shared.stop_flag);
    // The recorder sets it once dtrace has enabled every probe (a second or more).
    record.began = Arc::clone(&shared.ready);
    let recording = Recorder::new(record)?.run()?;
    Ok(Recording {
        profile: recording.profile,
        notes: recording
            .warnings
            .into_iter()
            .map(|w| format!("warning: {w}"))
            .collect(),
        failure: None,
    })
}

/// The OS to write the D script for: the one given, else this host's.
pub fn dtrace_os(os: Option<lockscope_dtrace::TargetOs>) -> Result<lockscope_dtrace::TargetOs> {
    match os {
        Some(os) => Ok(os),
        None => lockscope_dtrace::TargetOs::host().context(
            "this host has no DTrace backend of its own: give --os macos, freebsd, illumos or linux",
        ),
    }
}

/// Why a recording stopped when its target went away: a launched command's exit status or the
/// signal that killed it; an attached process, which is not lockscope's child, only "exited".
#[cfg(target_os = "linux")]
pub(crate) fn target_exit_reason(status: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.map(|s| (s.signal(), s.code())) {
        Some((Some(signal), _)) => match signal_name(signal) {
            Some(name) => format!("target killed by {name}"),
            None => format!("target killed by signal {signal}"),
        },
        Some((None, Some(code))) if code != 0 => format!("target exited with status {code}"),
        _ => "target exited".to_string(),
    }
}

/// Names of the signals that usually end a process.
#[cfg(target_os = "linux")]
fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return None,
    })
}

/// One line on the user stacks: how many were cut short, and how many of those at a file whose
/// unwind table was still being built (the first moments of an attach), how many the threads'
/// stack memos gave (with `LOCKSCOPE_STACK_MEMO=verify`: checked, and how many differed), how
/// many an interrupted unwinder could not take and how many walked stacks the stack map did not
/// store, where the tables came from and how many files have none; then one line per file the
/// unwinder or the symbolizer could not use (a traced program's broken or hostile file costs its
/// own table or symbols, named here). Nothing when nothing was unwound or looked up.
#[cfg(target_os = "linux")]
fn unwind_summary(
    stats: Option<&lockscope_ebpf::UnwindStats>,
    symbol_failures: &[String],
    stack_memo: lockscope_ebpf::StackMemo,
) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(stats) = stats.filter(|s| s.stacks > 0 || !s.table_builds.is_empty()) {
        let cached = stats.table_builds.iter().filter(|b| b.cached).count();
        let without = match stats.table_failures.len() {
            0 => String::new(),
            1 => "; 1 file without a table".to_owned(),
            n => format!("; {n} files without a table"),
        };
        let memo = match stack_memo {
            lockscope_ebpf::StackMemo::Verify => format!(
                "{} checked against the stack memo, {} differed",
                stats.memo_hits, stats.memo_mismatches
            ),
            _ => format!("{} from the stack memo", stats.memo_hits),
        };
        // Stacks lost: not taken by a busy unwinder, or walked and not stored (the stack map
        // refused them, or another stack had their id).
        let mut lost = String::new();
        if stats.busy > 0 {
            lost += &format!(", {} not taken (unwinder busy)", stats.busy);
        }
        if stats.store_failures > 0 {
            lost += &format!(", {} not stored (stack map)", stats.store_failures);
        }
        lines.push(format!(
            "unwinding: {} user stacks ({memo}), {} cut short ({} at a file whose table was still being built){lost}; {} tables ({cached} from the cache), {} still building{without}",
            stats.stacks,
            stats.truncated,
            stats.table_pending,
            stats.table_builds.len(),
            stats.tables_pending,
        ));
    }
    for failure in stats.map_or(&[][..], |s| &s.table_failures) {
        lines.push(format!(
            "  without an unwind table (frame pointers only): {failure}"
        ));
    }
    for failure in symbol_failures {
        lines.push(format!(
            "  without symbols (frames are addresses): {failure}"
        ));
    }
    lines
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The summary counts the files without a table and names each, and each file without
    /// symbols; with nothing unwound it says nothing (but still names files without symbols).
    #[test]
    fn unwind_summary_names_unusable_files() {
        let mut stats = lockscope_ebpf::UnwindStats::default();
        stats.stacks = 12;
        stats.truncated = 1;
        stats.table_failures = vec!["/opt/x/libbad.so: failed to read the ELF image".into()];
        stats.memo_hits = 7;
        let on = lockscope_ebpf::StackMemo::On;
        let lines = unwind_summary(
            Some(&stats),
            &["/opt/x/libbad.so: invalid offset".into()],
            on,
        );
        assert_eq!(
            lines,
            [
                "unwinding: 12 user stacks (7 from the stack memo), 1 cut short (0 at a file \
                 whose table was still being built); 0 tables (0 from the cache), 0 still \
                 building; 1 file without a table",
                "  without an unwind table (frame pointers only): /opt/x/libbad.so: failed to \
                 read the ELF image",
                "  without symbols (frames are addresses): /opt/x/libbad.so: invalid offset",
            ]
        );
        stats.busy = 2;
        stats.store_failures = 1;
        let lines = unwind_summary(Some(&stats), &[], on);
        assert!(
            lines[0].contains(
                "cut short (0 at a file whose table was still being built), 2 not taken \
                 (unwinder busy), 1 not stored (stack map);"
            ),
            "{lines:?}"
        );
        assert!(unwind_summary(Some(&lockscope_ebpf::UnwindStats::default()), &[], on).is_empty());
        assert!(unwind_summary(None, &[], on).is_empty());
    }

    /// A launched target's end says how it ended; an attached one (no status) just exited.
    #[cfg(target_os = "linux")]
    #[test]
    fn target_exit_reasons() {
        use std::os::unix::process::ExitStatusExt;
        use std::process::ExitStatus;
        assert_eq!(target_exit_reason(None), "target exited");
        assert_eq!(
            target_exit_reason(Some(ExitStatus::from_raw(0))),
            "target exited"
        );
        assert_eq!(
            target_exit_reason(Some(ExitStatus::from_raw(3 << 8))),
            "target exited with status 3"
        );
        assert_eq!(
            target_exit_reason(Some(ExitStatus::from_raw(libc::SIGKILL))),
            "target killed by SIGKILL"
        );
        assert_eq!(
            target_exit_reason(Some(ExitStatus::from_raw(libc::SIGRTMIN() + 1))),
            format!("target killed by signal {}", libc::SIGRTMIN() + 1)
        );
    }
}
