//! `lockscope record`: runs a backend's recorder until the target exits, the duration elapses or
//! a signal arrives, with a live status line, and writes the profile.

use crate::cli::{BackendArg, RecordArgs};
use anyhow::{bail, Context, Result};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the recorder is polled (and the status line redrawn).
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Why a recording stopped, as stored in the profile.
fn end_reason(signal: Option<&str>, duration_elapsed: bool) -> String {
    match (signal, duration_elapsed) {
        (Some(name), _) => format!("interrupted ({name})"),
        (None, true) => "duration elapsed".to_string(),
        (None, false) => "target exited".to_string(),
    }
}

/// Why a recording stopped when its target went away: a launched command's exit status or the
/// signal that killed it; an attached process, which is not lockscope's child, only "exited".
#[cfg(target_os = "linux")]
fn target_exit_reason(status: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.map(|s| (s.signal(), s.code())) {
        Some((Some(signal), _)) => match signal_name(signal) {
            Some(name) => format!("target killed by {name}"),
            None => format!("target killed by signal {signal}"),
        },
        Some((None, Some(code))) if code != 0 => format!("target exited with status {code}"),
        _ => end_reason(None, false),
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
fn check_output_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!("cannot write profile `{}`: is a directory", path.display());
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let probe = dir.join(format!(
        ".{}.lockscope-write-check",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    std::fs::File::create(&probe)
        .with_context(|| format!("cannot write profile `{}`", path.display()))?;
    // Removing our own empty probe file cannot lose data; a failure only leaves it behind.
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// One status line on stderr, redrawn in place; silent when stderr is not a terminal.
struct StatusLine {
    enabled: bool,
    drawn: bool,
}

impl StatusLine {
    fn new() -> Self {
        StatusLine {
            enabled: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    fn draw(&mut self, elapsed: Duration, events: u64, lost: u64, stack_failures: u64) {
        if !self.enabled {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[Klockscope: recording {:>7.1} s  {events} waits  {lost} lost  {stack_failures} stack failures",
            elapsed.as_secs_f64()
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

/// What `lockscope record` was asked to record.
enum RecordTarget {
    Pid(u32),
    Command(Vec<std::ffi::OsString>),
}

fn record_target(args: &RecordArgs) -> Result<RecordTarget> {
    match (args.pid, args.command.is_empty()) {
        (Some(pid), true) => Ok(RecordTarget::Pid(pid)),
        (None, false) => Ok(RecordTarget::Command(args.command.clone())),
        (Some(_), false) => bail!("give either -p PID or a command after `--`, not both"),
        (None, true) => bail!("nothing to record: give -p PID or a command after `--`"),
    }
}

/// Runs `lockscope record`.
pub fn run(args: &RecordArgs) -> Result<()> {
    let dtrace_only = args.print_script || args.os.is_some();
    let backend = match args.backend {
        Some(BackendArg::Ebpf) if dtrace_only => {
            bail!("--os and --print-script belong to the dtrace backend, not ebpf")
        }
        Some(backend) => backend,
        None if dtrace_only => BackendArg::Dtrace,
        None => BackendArg::host_default(),
    };
    if args.frequency.is_some() && !args.probes.iter().any(|p| p.trim() == "cpu") {
        bail!("--frequency sets the `cpu` probe's sampling rate: add `cpu` to --probes");
    }
    let target = record_target(args)?;
    match backend {
        BackendArg::Ebpf => run_ebpf(args, target),
        BackendArg::Dtrace => run_dtrace(args, target),
    }
}

/// Records with the eBPF backend.
#[cfg(target_os = "linux")]
fn run_ebpf(args: &RecordArgs, target: RecordTarget) -> Result<()> {
    use lockscope_ebpf::{RecordOptions, Recorder, TargetSpec};

    let probes = crate::cli::validate_probes(&args.probes)?;
    let syscalls = args.probe_settings.validated_syscalls()?;
    // Missing privileges first: for someone without them, that is the one thing to fix.
    lockscope_ebpf::check_environment()?;
    check_output_writable(&args.output)?;

    let probe_list = probes.join(",");
    let mut options = RecordOptions::new(match target {
        RecordTarget::Pid(pid) => TargetSpec::Pid(pid),
        RecordTarget::Command(argv) => TargetSpec::Command(argv),
    });
    options.probes = probes;
    if let Some(min_block) = args.probe_settings.min_block {
        options.probe_settings.min_block = min_block;
    }
    options.probe_settings.syscalls = syscalls;
    if let Some(hz) = args.frequency {
        options.probe_settings.frequency_hz = hz;
    }
    options.unwind.cache_dir = cache_dir(args);
    // The server keeps running while its less used libraries' tables are built: attaching
    // waits only for the main executable's and libc's (issue 14).
    options.unwind.background = true;
    // Handlers go in before the target starts, so a Ctrl-C during start-up is not lost.
    let signals = StopSignals::install()?;
    let mut recorder = Recorder::start(options)?;
    let started = Instant::now();
    // Always said, terminal or not: scripts and tests wait for this line before loading the target.
    eprintln!(
        "lockscope: recording pid {} with probes {probe_list}; Ctrl-C to stop",
        recorder.target_pid()
    );
    let mut status_line = StatusLine::new();

    let reason = loop {
        std::thread::sleep(if recorder.wants_early_polls() {
            Recorder::EARLY_POLL_INTERVAL
        } else {
            POLL_INTERVAL
        });
        let status = match recorder.poll() {
            Ok(status) => status,
            Err(e) => {
                status_line.clear();
                // Save what was recorded so far before reporting the failure.
                let profile = recorder
                    .finish("recorder failed")
                    .context("failed to finish the recording")?;
                save(&profile, &args.output)?;
                return Err(anyhow::Error::from(e).context("recording failed"));
            }
        };
        status_line.draw(
            status.elapsed,
            status.events,
            status.losses.lost_events(),
            status.losses.user_stack_failures + status.losses.kernel_stack_failures,
        );
        let duration_elapsed = args.duration.is_some_and(|d| started.elapsed() >= d);
        if let Some(signal) = signals.received() {
            break end_reason(Some(signal), false);
        }
        if duration_elapsed {
            break end_reason(None, true);
        }
        if status.target_exited {
            break target_exit_reason(recorder.target_exit_status());
        }
    };
    status_line.clear();
    if let Ok(Some(stats)) = recorder.unwind_stats() {
        if let Some(line) = unwind_summary(&stats) {
            eprintln!("lockscope: {line}");
        }
    }

    let profile = recorder
        .finish(&reason)
        .context("failed to finish the recording")?;
    save(&profile, &args.output)
}

/// The unwind-table cache directory: `--cache-dir`, else `$XDG_CACHE_HOME/lockscope`, else
/// `~/.cache/lockscope`; `None` with `--no-cache` or without a home.
#[cfg(target_os = "linux")]
fn cache_dir(args: &RecordArgs) -> Option<std::path::PathBuf> {
    if args.no_cache {
        return None;
    }
    default_cache_dir(
        args.cache_dir.clone(),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`cache_dir`] from its inputs. Per the XDG spec an empty or relative `XDG_CACHE_HOME` is
/// ignored.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
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

/// One line on the user stacks: how many were cut short, and how many of those at a file whose
/// unwind table was still being built (the first moments of an attach), and where the tables
/// came from. `None` when nothing was unwound.
#[cfg(target_os = "linux")]
fn unwind_summary(stats: &lockscope_ebpf::UnwindStats) -> Option<String> {
    if stats.stacks == 0 && stats.table_builds.is_empty() {
        return None;
    }
    let cached = stats.table_builds.iter().filter(|b| b.cached).count();
    Some(format!(
        "unwinding: {} user stacks, {} cut short ({} at a file whose table was still being built); {} tables ({cached} from the cache), {} still building",
        stats.stacks,
        stats.truncated,
        stats.table_pending,
        stats.table_builds.len(),
        stats.tables_pending,
    ))
}

/// Records with the eBPF backend where there is none.
#[cfg(not(target_os = "linux"))]
fn run_ebpf(_args: &RecordArgs, _target: RecordTarget) -> Result<()> {
    bail!("the ebpf backend is Linux-only; use --backend dtrace")
}

/// Records with the DTrace backend, or prints its script with `--print-script`.
fn run_dtrace(args: &RecordArgs, target: RecordTarget) -> Result<()> {
    use lockscope_dtrace::{Driver, DriverOptions, DriverTarget, ScriptOptions, ScriptTarget};

    let os = match args.os {
        Some(os) => os.into_target_os(),
        None => lockscope_dtrace::TargetOs::host().context(
            "this host has no DTrace backend of its own: give --os macos, freebsd, illumos or linux",
        )?,
    };
    let mut script = ScriptOptions::new(os);
    script.probes = args.probes.iter().map(|p| p.trim().to_string()).collect();
    script.duration = args.duration;
    if args.print_script {
        script.target = match target {
            RecordTarget::Pid(pid) => ScriptTarget::Pid(pid),
            RecordTarget::Command(_) => ScriptTarget::Command,
        };
        let text = lockscope_dtrace::generate_script(&script)?;
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("failed to print the script")?;
        return Ok(());
    }

    check_output_writable(&args.output)?;
    let driver_target = match target {
        RecordTarget::Pid(pid) => DriverTarget::Pid(pid),
        RecordTarget::Command(argv) => DriverTarget::Command(
            argv.into_iter()
                .map(|a| {
                    a.into_string().map_err(|a| {
                        anyhow::anyhow!(
                            "command argument {a:?} is not UTF-8, which dtrace -c needs"
                        )
                    })
                })
                .collect::<Result<_>>()?,
        ),
    };
    let mut options = DriverOptions::new(script, driver_target);
    // A command dtrace launches prints into dtrace's stdout: pass it on, as if run directly.
    options.echo_target_output = true;
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&options.stop))
            .context("failed to install a signal handler")?;
    }
    let began = Arc::clone(&options.began);
    let driver = Driver::new(options)?;
    eprintln!("lockscope: starting dtrace on {os}; Ctrl-C to stop");
    // Said once dtrace has enabled every probe (it takes a second or more): scripts and tests
    // wait for this line before they load the target, as with the eBPF backend's line.
    let announcer = std::thread::spawn(move || {
        while !began.load(Ordering::Acquire) {
            if Arc::strong_count(&began) == 1 {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("lockscope: recording with dtrace on {os} (probes enabled)");
    });
    let recording = driver.run();
    // The driver (and its options) are gone: the announcer sees the last reference and ends.
    let _ = announcer.join();
    let recording = recording?;
    for warning in &recording.warnings {
        eprintln!("lockscope: warning: {warning}");
    }
    save(&recording.profile, &args.output)
}

/// Writes the profile and says what it holds.
fn save(profile: &lockscope_probes::Profile, output: &Path) -> Result<()> {
    lockscope_probes::write_profile(profile, output)
        .with_context(|| format!("failed to write profile `{}`", output.display()))?;
    let meta = &profile.metadata;
    eprintln!(
        "lockscope: wrote `{}`: {} waits in {} records from {} threads over {:.2} s ({}); {} lost, {} stack failures",
        output.display(),
        meta.events,
        profile.waits.len(),
        profile.threads.len(),
        meta.duration_ns as f64 / 1e9,
        meta.end_reason,
        meta.losses.lost_events(),
        meta.losses.user_stack_failures + meta.losses.kernel_stack_failures,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end reason names the signal, the duration or the target's exit.
    #[test]
    fn end_reasons() {
        assert_eq!(end_reason(Some("SIGTERM"), true), "interrupted (SIGTERM)");
        assert_eq!(end_reason(None, true), "duration elapsed");
        assert_eq!(end_reason(None, false), "target exited");
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
            "cannot write profile `/nonexistent-dir/run.lsp`: No such file or directory (os error 2)"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        check_output_writable(&dir.path().join("ok.lsp")).expect("writable");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
    }
}
