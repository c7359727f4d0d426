//! `lockscope record`: a recording [`Session`] until the target exits, the duration elapses or
//! a signal arrives, with a live status line, and the profile written. `bench --record` records
//! its suite the same way ([`record`]). Its arguments are here too, with their checks and their
//! conversion into [`SessionOptions`] ([`RecordArgs::to_session_options`]) or, for
//! `--print-script`, the D script's [`ScriptOptions`].

use crate::cli::{parse_duration, BackendArg, OsArg, ProbeSettingsArgs, TargetArgs};
use crate::session::{Progress, Session, SessionOptions};
use anyhow::{bail, Context, Result};
use clap::Args;
use lockscope_dtrace::{ScriptOptions, ScriptTarget};
use lockscope_probes::{Quantity, Target};
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The profile `record` writes unless told otherwise (`-o`), in the current directory, and the one
/// `report`, `why`, `flamegraph`, `export` and `html` read when given none (as perf's
/// `perf.data`).
pub(crate) const DEFAULT_PROFILE: &str = "lockscope.lsp";

/// `lockscope record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Profile to write (`report`, `why`... read this one when given none).
    #[arg(short, long, value_name = "FILE", default_value = DEFAULT_PROFILE)]
    pub output: PathBuf,

    /// What to attach to (a command after `--` is the other way).
    #[command(flatten)]
    pub target: TargetArgs,

    /// Stop after this long (`30s`, `500ms`, `2m`; a bare number is seconds). Default: until the
    /// target exits, or Ctrl-C / SIGTERM.
    #[arg(short, long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Probes to attach, comma-separated (see `lockscope probes`). Default: the backend's
    /// default probes.
    #[arg(long, value_name = "PROBES", value_delimiter = ',')]
    pub probes: Vec<String>,

    /// Settings of the offcpu and syscall probes.
    #[command(flatten)]
    pub probe_settings: ProbeSettingsArgs,

    /// Recording backend. Default: ebpf on Linux, dtrace elsewhere.
    #[arg(long, value_enum)]
    pub backend: Option<BackendArg>,

    /// OS to write the D script for (dtrace backend). Default: this host's.
    #[arg(long, value_enum)]
    pub os: Option<OsArg>,

    /// Print the D script that would run, and run nothing (dtrace backend; works on any OS).
    #[arg(long)]
    pub print_script: bool,

    /// Directory of the unwind-table cache (ebpf backend): a second attach to the same program
    /// reuses its tables. Default: `$XDG_CACHE_HOME/lockscope`, else `~/.cache/lockscope`.
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    pub cache_dir: Option<PathBuf>,

    /// Build every unwind table from scratch, without reading or writing the cache.
    #[arg(long)]
    pub no_cache: bool,

    /// Command to launch and record until it exits (after `--`).
    #[arg(last = true, value_name = "CMD", conflicts_with_all = ["pid", "cgroup", "all"])]
    pub command: Vec<OsString>,
}

impl RecordArgs {
    /// The backend: `--backend`, else dtrace when a flag only dtrace takes is given, else the
    /// host's.
    pub(crate) fn backend(&self) -> Result<BackendArg> {
        let dtrace_only = self.print_script || self.os.is_some();
        Ok(match self.backend {
            Some(BackendArg::Ebpf) if dtrace_only => {
                bail!("--os and --print-script belong to the dtrace backend, not ebpf")
            }
            Some(backend) => backend,
            None if dtrace_only => BackendArg::Dtrace,
            None => BackendArg::host_default(),
        })
    }

    /// What to record: the target flags or the command after `--`, exactly one of them.
    pub(crate) fn to_target(&self) -> Result<Target> {
        // clap checks `requires` only without a trailing command: checked here for both.
        if self.target.tree && self.target.pid.is_empty() {
            bail!("--tree records the descendants of the processes of -p PID: give -p");
        }
        match (self.target.to_target(), self.command.is_empty()) {
            (Some(target), true) => Ok(target),
            (None, false) => Ok(Target::Command(self.command.clone())),
            (Some(_), false) => {
                bail!("give either what to attach to or a command after `--`, not both")
            }
            (None, true) => Err(TargetArgs::nothing_to_record("a command after `--`")),
        }
    }

    /// Validated session options recording `target` with `backend`: the eBPF backend's probes
    /// and settings checked, or, for dtrace, the probes as given (the D script generator
    /// checks them per OS).
    pub fn to_session_options(
        &self,
        backend: BackendArg,
        target: Target,
    ) -> Result<SessionOptions> {
        let mut options = SessionOptions::new(target);
        options.backend = backend;
        options.dtrace_os = self.os.map(OsArg::into_target_os);
        options.duration = self.duration;
        match backend {
            BackendArg::Ebpf => {
                options.probes = crate::cli::validate_probes(&self.probes)?;
                options.min_block = self.probe_settings.min_block;
                options.syscalls = self.probe_settings.validated_syscalls()?;
                options.frequency_hz = self.probe_settings.frequency;
                options.cache_dir = if self.no_cache {
                    None
                } else {
                    cache_dir(self.cache_dir.clone())
                };
            }
            BackendArg::Dtrace => {
                options.probes = self.trimmed_probes();
                // A command dtrace launches prints into dtrace's stdout: pass it on, as if run
                // directly.
                options.echo_target_output = true;
            }
        }
        Ok(options)
    }

    /// The options of the D script `--print-script` prints for `target`.
    fn to_script_options(&self, target: &Target) -> Result<ScriptOptions> {
        let os = crate::session::dtrace_os(self.os.map(OsArg::into_target_os))?;
        let mut script = ScriptOptions::new(os);
        script.probes = self.trimmed_probes();
        script.duration = self.duration;
        script.target = ScriptTarget::of(target)?;
        Ok(script)
    }

    /// `--probes` as given, trimmed (the dtrace backend checks them against its own catalog).
    fn trimmed_probes(&self) -> Vec<String> {
        self.probes.iter().map(|p| p.trim().to_string()).collect()
    }
}

/// How often the session is looked at (and the status line redrawn): its end is said within
/// this long.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Why a recording stopped when a signal ended it, as stored in the profile.
fn interrupted(signal: &str) -> String {
    format!("interrupted ({signal})")
}

/// Signals that end a recording, each with its own flag so the profile can say which one came.
struct StopSignals {
    flags: Vec<(&'static str, Arc<AtomicBool>)>,
}

impl StopSignals {
    fn install() -> Result<Self> {
        let mut flags = Vec::new();
        for (name, signal) in [
            ("SIGINT", signal_hook::consts::SIGINT),
            ("SIGTERM", signal_hook::consts::SIGTERM),
        ] {
            let flag = Arc::new(AtomicBool::new(false));
            signal_hook::flag::register(signal, Arc::clone(&flag))
                .with_context(|| format!("failed to install a handler for {name}"))?;
            flags.push((name, flag));
        }
        Ok(StopSignals { flags })
    }

    fn received(&self) -> Option<&'static str> {
        self.flags
            .iter()
            .find(|(_, flag)| flag.load(Ordering::Relaxed))
            .map(|&(name, _)| name)
    }
}

/// Fails early, before anything is recorded, when `path` cannot be written: a recording that
/// cannot be saved is a recording lost.
pub(crate) fn check_output_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!(
            "failed to write profile `{}`: is a directory",
            path.display()
        );
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // An unnamed file (O_TMPFILE), gone when closed: no name someone could have planted a link
    // at, nothing left behind.
    tempfile::tempfile_in(dir)
        .with_context(|| format!("failed to write profile `{}`", path.display()))?;
    Ok(())
}

/// One status line on stderr, redrawn in place; silent when stderr is not a terminal or the
/// backend reports no progress.
struct StatusLine {
    enabled: bool,
    drawn: bool,
}

impl StatusLine {
    fn new(has_progress: bool) -> Self {
        StatusLine {
            enabled: has_progress && std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    fn draw(&mut self, progress: Progress) {
        if !self.enabled {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[Klockscope: recording {:>7.1} s  {} waits  {} lost  {} stack failures",
            progress.elapsed.as_secs_f64(),
            progress.events,
            progress.lost,
            progress.stack_failures,
        );
        let _ = err.flush();
        self.drawn = true;
    }

    fn clear(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
            self.drawn = false;
        }
    }
}

/// Runs `lockscope record`.
pub fn run(args: &RecordArgs) -> Result<()> {
    let backend = args.backend()?;
    args.probe_settings.check_frequency(&args.probes)?;
    let target = args.to_target()?;
    if args.print_script {
        return print_script(&args.to_script_options(&target)?);
    }
    record(args.to_session_options(backend, target)?, &args.output)
}

/// Prints the D script `record` would run (dtrace backend), and runs nothing.
fn print_script(script: &ScriptOptions) -> Result<()> {
    let text = lockscope_dtrace::generate_script(script)?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("failed to print the script")
}

/// Records with `options` until the target exits, the duration elapses or SIGINT/SIGTERM
/// arrives, then writes the profile to `output`; what was recorded before a failure is written
/// too.
pub fn record(options: SessionOptions, output: &Path) -> Result<()> {
    let backend = options.backend;
    // Missing privileges first: for someone without them, that is the one thing to fix (the
    // recorder checks again, and says what an optional capability would add).
    #[cfg(target_os = "linux")]
    if backend == BackendArg::Ebpf {
        lockscope_ebpf::check_privileges(&options.probes, options.target.given_pids())?;
    }
    check_output_writable(output)?;
    // Handlers go in before the target starts, so a Ctrl-C during start-up is not lost.
    let signals = StopSignals::install()?;
    let probe_list = options.probes.join(",");
    let os = match backend {
        BackendArg::Dtrace => {
            let os = crate::session::dtrace_os(options.dtrace_os)?;
            eprintln!("lockscope: starting dtrace on {os}; Ctrl-C to stop");
            Some(os)
        }
        BackendArg::Ebpf => None,
    };
    let session = Session::start(options)?;
    // Always said, terminal or not: scripts and tests wait for this line before loading the
    // target (with dtrace, once it has enabled every probe, which takes a second or more).
    for warning in session.warnings() {
        eprintln!("lockscope: warning: {warning}");
    }
    match (os, session.target_description(), session.target_pid()) {
        (Some(os), _, _) => {
            eprintln!("lockscope: recording with dtrace on {os} (probes enabled)");
        }
        (None, Some(target), _) => {
            eprintln!("lockscope: recording {target} with probes {probe_list}; Ctrl-C to stop");
        }
        (None, None, Some(pid)) => {
            eprintln!("lockscope: recording pid {pid} with probes {probe_list}; Ctrl-C to stop");
        }
        (None, None, None) => {
            eprintln!("lockscope: recording with probes {probe_list}; Ctrl-C to stop");
        }
    }
    let mut status_line = StatusLine::new(backend == BackendArg::Ebpf);
    let mut end_said = false;
    while !session.ended() {
        if let Some(ended) = session.recording_ended().filter(|_| !end_said) {
            // The probes are off: what follows is not recording, and can take seconds.
            status_line.clear();
            eprintln!(
                "lockscope: recorded {:.2} s ({}); resolving stacks and writing `{}`...",
                ended.recorded.as_secs_f64(),
                ended.reason,
                output.display()
            );
            end_said = true;
        }
        if !end_said {
            if let Some(signal) = signals.received() {
                session.stop(&interrupted(signal));
            }
            status_line.draw(session.progress());
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    status_line.clear();
    if let Some(ended) = session.recording_ended().filter(|_| !end_said) {
        // Ended and resolved between two looks: the end is still said, the writing follows.
        eprintln!(
            "lockscope: recorded {:.2} s ({}); writing `{}`...",
            ended.recorded.as_secs_f64(),
            ended.reason,
            output.display()
        );
    }
    let recorded = session.finish()?;
    for note in &recorded.notes {
        eprintln!("lockscope: {note}");
    }
    save(&recorded.profile, output)?;
    // Last, where they are read: a recording that saw (almost) nothing says why.
    for warning in lockscope::report::quiet_warnings(&recorded.profile) {
        eprintln!("lockscope: warning: {warning}");
    }
    recorded.failure.map_or(Ok(()), Err)
}

/// The unwind-table cache directory: `flag` (`--cache-dir`), else `$XDG_CACHE_HOME/lockscope`,
/// else `~/.cache/lockscope`; `None` without a home.
pub(crate) fn cache_dir(flag: Option<std::path::PathBuf>) -> Option<std::path::PathBuf> {
    default_cache_dir(
        flag,
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`cache_dir`] from its inputs. Per the XDG spec an empty or relative `XDG_CACHE_HOME` is
/// ignored.
fn default_cache_dir(
    flag: Option<std::path::PathBuf>,
    xdg_cache_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    flag.or_else(|| {
        xdg_cache_home
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                home.map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .map(|h| h.join(".cache"))
            })
            .map(|dir| dir.join("lockscope"))
    })
}

/// Writes the profile and says what it holds.
pub(crate) fn save(profile: &lockscope_probes::Profile, output: &Path) -> Result<()> {
    lockscope_probes::write_profile(profile, output)
        .with_context(|| format!("failed to write profile `{}`", output.display()))?;
    let meta = &profile.metadata;
    // The system calls of the syscall and lifecycle probes, the mutex-hold probe's holds and
    // the cpu probe's samples are events but not waits: said apart (scripts read the line's
    // start, which stays).
    let events_of = |quantity: Quantity| -> u64 {
        profile
            .waits
            .iter()
            .filter(|w| w.kind.quantity() == quantity)
            .map(|w| w.stats.count)
            .sum()
    };
    let mut apart = String::new();
    for (quantity, what) in [
        (Quantity::Calls, "system calls (time in calls, not waits)"),
        (Quantity::Holds, "lock holds (time held, not waits)"),
        (Quantity::Samples, "on-CPU samples (CPU time, not waits)"),
    ] {
        let n = events_of(quantity);
        if n > 0 {
            apart.push_str(&format!("; {n} of the events are {what}"));
        }
    }
    eprintln!(
        "lockscope: wrote `{}`: {} waits in {} records from {} threads over {:.2} s ({}); {} lost, {} stack failures{}",
        output.display(),
        meta.events,
        profile.waits.len(),
        profile.threads.len(),
        meta.duration_ns as f64 / 1e9,
        meta.end_reason,
        meta.losses.lost_events(),
        meta.losses.user_stack_failures + meta.losses.kernel_stack_failures,
        apart
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signal's end reason names the signal.
    #[test]
    fn interrupted_reason() {
        assert_eq!(interrupted("SIGTERM"), "interrupted (SIGTERM)");
    }

    /// The cache directory: the flag wins, then an absolute XDG_CACHE_HOME, then ~/.cache.
    #[test]
    fn cache_dirs() {
        use std::path::PathBuf;
        let os = |s: &str| Some(std::ffi::OsString::from(s));
        assert_eq!(
            default_cache_dir(Some("/c".into()), os("/x"), os("/h")),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(
            default_cache_dir(None, os("/x"), os("/h")),
            Some(PathBuf::from("/x/lockscope"))
        );
        assert_eq!(
            default_cache_dir(None, os("rel"), os("/h")),
            Some(PathBuf::from("/h/.cache/lockscope"))
        );
        assert_eq!(
            default_cache_dir(None, None, os("/h")),
            Some(PathBuf::from("/h/.cache/lockscope"))
        );
        assert_eq!(default_cache_dir(None, None, None), None);
    }

    /// An output in a missing directory is refused before recording, naming the path.
    #[test]
    fn unwritable_output() {
        let err = check_output_writable(Path::new("/nonexistent-dir/run.lsp"))
            .expect_err("missing directory");
        assert_eq!(
            format!("{err:#}"),
            "failed to write profile `/nonexistent-dir/run.lsp`: No such file or directory (os error 2)"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        check_output_writable(&dir.path().join("ok.lsp")).expect("writable");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
    }
}
