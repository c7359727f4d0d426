//! `lockscope sweep`, `html` and `chart`: the commands over sweeps. A sweep records each level
//! through `record::run`, exactly as `lockscope record -p PID -d DURATION -o level-N.lsp` would.

use crate::cli::{ChartArgs, Cli, Command, HtmlArgs, SweepArgs};
use crate::record;
use anyhow::{bail, Context, Result};
use clap::Parser;
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

/// Records one level like `lockscope record -p PID -d DURATION -o FILE`.
fn record_level(level: &lockscope::sweep::LevelRecording) -> Result<()> {
    let argv: Vec<std::ffi::OsString> = vec![
        "lockscope".into(),
        "record".into(),
        "-o".into(),
        level.output.clone().into_os_string(),
        "-p".into(),
        level.pid.to_string().into(),
        "-d".into(),
        format!("{}ms", level.duration.as_millis().max(1)).into(),
    ];
    let record = match Cli::try_parse_from(argv).context("cannot build the record command")? {
        Cli {
            command: Command::Record(record),
        } => record,
        _ => bail!("internal error: `record` did not parse as record"),
    };
    record::run(&record)
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
        &mut record_level,
        &mut |line| eprintln!("lockscope: sweep: {line}"),
    )?;
    drop(server);
    println!(
        "{:>12} {:>14} {:>9}  top wait site",
        "concurrency", sweep.throughput_unit, "scaling"
    );
    for level in &sweep.levels {
        let knee = sweep
            .knee
            .as_ref()
            .is_some_and(|k| k.concurrency == level.concurrency);
        println!(
            "{:>12} {:>14.1} {:>8.0}%  {}{}",
            level.concurrency,
            level.throughput,
            level.scaling * 100.0,
            level.top_sites.first().map_or_else(
                || "-".to_string(),
                |s| lockscope::sweep::short_site(&s.name)
            ),
            if knee { "  <- knee" } else { "" }
        );
    }
    println!("{}", sweep.finding);
    for warning in &sweep.warnings {
        println!("WARNING: {warning}");
    }
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
