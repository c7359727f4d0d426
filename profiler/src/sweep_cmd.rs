//! `lockscope sweep`, `html` and `chart`: the commands over sweeps. A sweep records each level
//! with `lockscope record -p PID -d DURATION -o level-N.lsp`, run as a child of this lockscope.

use crate::cli::{ChartArgs, HtmlArgs, SweepArgs};
use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

/// A server lockscope started for a sweep; stopped (SIGTERM, then SIGKILL) when dropped.
struct Server {
    child: std::process::Child,
}

impl Server {
    fn start(command: &str, startup: Duration) -> Result<Server> {
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("exec {command}"))
            .stdin(std::process::Stdio::null())
            .spawn()
            .with_context(|| format!("failed to start server `{command}`"))?;
        let mut server = Server { child };
        std::thread::sleep(startup);
        if let Some(status) = server
            .child
            .try_wait()
            .with_context(|| format!("failed to watch server `{command}`"))?
        {
            bail!("server `{command}` exited during start-up ({status})");
        }
        Ok(server)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let Ok(pid) = libc::pid_t::try_from(self.child.id()) else {
            return;
        };
        // SAFETY: kill has no memory preconditions; the pid is our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The arguments of the `lockscope record` that records `level`:
/// `record -o FILE -p PID -d DURATION [--probes P,Q] [--min-block DURATION] [--syscalls S,T]`,
/// each optional one only when the sweep was given it (else the recording's default applies).
fn record_arguments(level: &lockscope::sweep::LevelRecording) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["record".into(), "-o".into()];
    args.push(level.output.clone().into_os_string());
    args.push("-p".into());
    args.push(level.pid.to_string().into());
    args.push("-d".into());
    args.push(format!("{}ms", level.duration.as_millis().max(1)).into());
    if !level.probes.is_empty() {
        args.push("--probes".into());
        args.push(level.probes.join(",").into());
    }
    if let Some(min_block) = level.min_block {
        // In microseconds with a fraction: `record` reads sub-microsecond values back exactly.
        args.push("--min-block".into());
        args.push(format!("{}us", min_block.as_nanos() as f64 / 1e3).into());
    }
    if !level.syscalls.is_empty() {
        args.push("--syscalls".into());
        args.push(level.syscalls.join(",").into());
    }
    args
}

/// Records each level with `lockscope record -p PID -d DURATION -o FILE`, run as a child of this
/// lockscope: the same code path as the command, and a start-up line to wait for, so the load
/// starts only once the probes are attached (attaching builds the unwinding tables of every
/// library the server maps, which takes seconds).
#[derive(Default)]
struct ChildRecorder {
    child: Option<(std::process::Child, std::thread::JoinHandle<Vec<String>>)>,
}

impl lockscope::sweep::LevelRecorder for ChildRecorder {
    fn start(&mut self, level: &lockscope::sweep::LevelRecording) -> Result<()> {
        use std::io::BufRead;
        let exe = std::env::current_exe().context("cannot find the lockscope executable")?;
        let mut child = std::process::Command::new(exe)
            .args(record_arguments(level))
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .context("failed to start `lockscope record`")?;
        let stderr = child
            .stderr
            .take()
            .context("no stderr from `lockscope record`")?;
        let mut lines = std::io::BufReader::new(stderr).lines();
        let mut seen = Vec::new();
        let attached = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    eprintln!("{line}");
                    let started = line.starts_with("lockscope: recording pid");
                    seen.push(line);
                    if started {
                        break true;
                    }
                }
                _ => break false,
            }
        };
        if !attached {
            let status = child
                .wait()
                .context("failed to wait for `lockscope record`")?;
            bail!(
                "`lockscope record -p {}` ended before recording ({status}): {}",
                level.pid,
                seen.join(" / ")
            );
        }
        // The rest of its output goes on to ours, and its last lines back for errors.
        let forward = std::thread::spawn(move || {
            let mut tail = Vec::new();
            for line in lines.map_while(std::result::Result::ok) {
                eprintln!("{line}");
                tail.push(line);
            }
            tail
        });
        self.child = Some((child, forward));
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        let Some((mut child, forward)) = self.child.take() else {
            bail!("no recording was started");
        };
        let status = child
            .wait()
            .context("failed to wait for `lockscope record`")?;
        let tail = forward.join().unwrap_or_default();
        if !status.success() {
            bail!(
                "`lockscope record` failed ({status}): {}",
                tail.last().map_or("", String::as_str)
            );
        }
        Ok(())
    }
}

impl Drop for ChildRecorder {
    fn drop(&mut self) {
        if let Some((mut child, _)) = self.child.take() {
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: kill has no memory preconditions; the pid is our own unreaped child.
                // SIGINT ends a recording cleanly, writing what it has.
                unsafe { libc::kill(pid, libc::SIGINT) };
            }
            let _ = child.wait();
        }
    }
}

/// Runs `lockscope sweep`.
pub fn run(args: &SweepArgs) -> Result<()> {
    let options = args.to_options()?;
    let server = match &args.server {
        Some(command) => Some(Server::start(command, args.server_startup)?),
        None => None,
    };
    let pid = match (&server, args.pid) {
        (Some(server), _) => server.pid(),
        (None, Some(pid)) => pid,
        (None, None) => bail!("nothing to record: give -p PID or --server CMD"),
    };
    let sweep = lockscope::sweep::run_sweep(
        &options,
        pid,
        args.server.clone(),
        &mut ChildRecorder::default(),
        &mut |line| eprintln!("lockscope: sweep: {line}"),
    )?;
    drop(server);
    print!("{}", lockscope::sweep::sweep_table(&sweep));
    eprintln!(
        "lockscope: wrote `{}`",
        options
            .output_dir
            .join(lockscope::sweep::SWEEP_FILE)
            .display()
    );
    Ok(())
}

/// An input of `lockscope html`: a sweep (directory or `.json`) or a profile.
fn html_input(path: &Path) -> Result<lockscope::html::Input> {
    let is_sweep = path.is_dir() || path.extension().is_some_and(|e| e == "json");
    if is_sweep {
        let (sweep, dir) = lockscope::sweep::read_sweep(path)?;
        Ok(lockscope::html::Input::Sweep {
            path: path.to_path_buf(),
            dir,
            sweep: Box::new(sweep),
        })
    } else {
        let profile = lockscope_probes::read_profile(path)
            .with_context(|| format!("failed to read profile `{}`", path.display()))?;
        Ok(lockscope::html::Input::Run {
            path: path.to_path_buf(),
            profile: Box::new(profile),
        })
    }
}

/// Writes `text` to `path`, naming it in any error.
fn write_text(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write `{}`", path.display()))
}

/// Runs `lockscope html`.
pub fn html(args: &HtmlArgs) -> Result<()> {
    let options = args.to_options();
    let inputs = args
        .inputs
        .iter()
        .map(|p| html_input(p))
        .collect::<Result<Vec<_>>>()?;
    let page = lockscope::html::render_html(&inputs, &options)?;
    write_text(&args.output, &page)?;
    eprintln!(
        "lockscope: wrote `{}` ({} KiB)",
        args.output.display(),
        page.len() / 1024
    );
    Ok(())
}

/// Runs `lockscope chart`.
pub fn chart(args: &ChartArgs) -> Result<()> {
    let (sweep, _) = lockscope::sweep::read_sweep(&args.sweep)?;
    let mut options = lockscope::chart::ChartOptions::default();
    options.title = args.title.clone();
    match args.output.extension().and_then(|e| e.to_str()) {
        Some("svg") => write_text(
            &args.output,
            &lockscope::chart::scaling_svg(&sweep, &options),
        ),
        Some("png") => {
            let png = lockscope::chart::scaling_png(&sweep, &options)?;
            std::fs::write(&args.output, png)
                .with_context(|| format!("cannot write `{}`", args.output.display()))
        }
        other => bail!(
            "cannot write chart `{}`: the extension says the format, .svg or .png (got {})",
            args.output.display(),
            other.map_or("no extension".to_string(), |e| format!(".{e}"))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each level's recording gets the sweep's probe list as `--probes`, and no `--probes` (the
    /// backend's defaults) when none was given.
    #[test]
    fn record_arguments_carry_the_probes() {
        let mut level = lockscope::sweep::LevelRecording::new(
            5,
            4242,
            Duration::from_millis(1500),
            "sweep/level-5.lsp".into(),
        );
        level.probes = vec!["futex".to_string(), "offcpu".to_string()];
        let text = |args: Vec<OsString>| {
            args.iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            text(record_arguments(&level)),
            "record -o sweep/level-5.lsp -p 4242 -d 1500ms --probes futex,offcpu"
        );
        level.probes.clear();
        assert_eq!(
            text(record_arguments(&level)),
            "record -o sweep/level-5.lsp -p 4242 -d 1500ms"
        );
        // The arguments parse as the `record` command, with the probes where `record` reads them.
        let mut argv: Vec<OsString> = vec!["lockscope".into()];
        level.probes = vec!["offcpu".to_string()];
        argv.extend(record_arguments(&level));
        use clap::Parser;
        match crate::cli::Cli::try_parse_from(argv).expect("parses") {
            crate::cli::Cli {
                command: crate::cli::Command::Record(record),
            } => {
                assert_eq!(record.probes, ["offcpu"]);
                assert_eq!(record.pid, Some(4242));
                assert_eq!(record.duration, Some(Duration::from_millis(1500)));
            }
            other => panic!("not a record command: {other:?}"),
        }
    }

    /// Each level's recording gets the sweep's `--min-block` and `--syscalls` when it was given
    /// them, and neither (the recording's defaults) otherwise; `record` parses them back to the
    /// same values.
    #[test]
    fn record_arguments_carry_the_probe_settings() {
        let mut level = lockscope::sweep::LevelRecording::new(
            2,
            4242,
            Duration::from_secs(3),
            "sweep/level-2.lsp".into(),
        );
        let parse = |level: &lockscope::sweep::LevelRecording| {
            let mut argv: Vec<OsString> = vec!["lockscope".into()];
            argv.extend(record_arguments(level));
            use clap::Parser;
            match crate::cli::Cli::try_parse_from(argv).expect("parses") {
                crate::cli::Cli {
                    command: crate::cli::Command::Record(record),
                } => record,
                other => panic!("not a record command: {other:?}"),
            }
        };
        let given = |level: &lockscope::sweep::LevelRecording, flag: &str| {
            record_arguments(level).iter().any(|a| a == flag)
        };
        assert!(!given(&level, "--min-block") && !given(&level, "--syscalls"));
        let record = parse(&level);
        assert_eq!(record.probe_settings.min_block, None);
        assert!(record.probe_settings.syscalls.is_empty());

        for min_block in [
            Duration::from_micros(1),
            Duration::from_nanos(1500),
            Duration::from_micros(250),
            Duration::from_millis(20),
        ] {
            level.min_block = Some(min_block);
            level.syscalls = vec!["read".to_string(), "epoll_wait".to_string()];
            assert!(given(&level, "--min-block") && given(&level, "--syscalls"));
            let record = parse(&level);
            assert_eq!(record.probe_settings.min_block, Some(min_block));
            assert_eq!(record.probe_settings.syscalls, ["read", "epoll_wait"]);
        }
        level.syscalls.clear();
        assert!(given(&level, "--min-block") && !given(&level, "--syscalls"));
        level.min_block = None;
        level.syscalls = vec!["futex".to_string()];
        assert!(!given(&level, "--min-block") && given(&level, "--syscalls"));
    }
}
