//! `lockscope sweep`: throughput and waits of a server across concurrency levels. Each level is
//! recorded in a [`Session`] of its own, as `lockscope record -p PID -d DURATION` would. Its
//! arguments are here too: what they ask to record ([`SweepArgs::recorded`]) and the
//! [`SweepOptions`] they convert into, both checked before the server or any load starts.

use crate::cli::{parse_duration, BackendArg, ProbeSettingsArgs, TargetArgs};
use crate::session::{Session, SessionOptions};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use lockscope::sweep::{RecordError, SweepOptions, SweepTarget, Throughput};
use lockscope_probes::Target;
use std::path::PathBuf;
use std::time::Duration;

/// Built-in throughput parsers of `lockscope sweep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ThroughputArg {
    /// Try sysbench, ab and wrk in turn.
    Auto,
    /// sysbench: `transactions: N (X per sec.)`.
    Sysbench,
    /// ApacheBench: `Requests per second: X`.
    Ab,
    /// wrk: `Requests/sec: X`.
    Wrk,
}

/// `lockscope sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Concurrency levels, comma-separated, in the order to run them.
    #[arg(
        long,
        value_name = "LEVELS",
        value_delimiter = ',',
        default_value = "1,2,5,10"
    )]
    pub levels: Vec<u32>,

    /// Load command, run with `sh -c` once per level; `{c}` is replaced by the level. It should
    /// run about as long as --duration and print its throughput.
    #[arg(long, value_name = "CMD")]
    pub load: String,

    /// What every level records, as `record` takes it.
    #[command(flatten)]
    pub target: TargetArgs,

    /// Start this server command (`sh -c 'exec CMD'`) before the first level, record it with
    /// its whole process tree (or --cgroup, -a), and stop it (SIGTERM) after the last.
    #[arg(long, value_name = "CMD", conflicts_with = "pid")]
    pub server: Option<String>,

    /// How long to wait after starting --server before the first level.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    pub server_startup: Duration,

    /// Recording time per level (`20s`, `500ms`).
    #[arg(short, long, value_name = "DURATION", value_parser = parse_duration, default_value = "20s")]
    pub duration: Duration,

    /// How long the load may run on after a level's recording before it is killed.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
    pub load_grace: Duration,

    /// Pause between levels.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    pub settle: Duration,

    /// Throughput parser for the load's output.
    #[arg(
        long,
        value_enum,
        default_value = "auto",
        conflicts_with = "throughput_regex"
    )]
    pub throughput: ThroughputArg,

    /// Read the throughput with this regular expression instead: its first capture group is the
    /// number (`'([0-9.]+) ops/s'`).
    #[arg(long, value_name = "REGEX")]
    pub throughput_regex: Option<String>,

    /// Sweep directory to write: sweep.json, level-N.lsp and level-N.load.txt.
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,

    /// Probes every level's recording attaches, comma-separated, as `record --probes` (see
    /// `lockscope probes`). Default: the backend's default probes.
    #[arg(long, value_name = "PROBES", value_delimiter = ',')]
    pub probes: Vec<String>,

    /// Settings of the offcpu, syscall and cpu probes, passed on to every level's recording as
    /// `record` takes them.
    #[command(flatten)]
    pub probe_settings: ProbeSettingsArgs,
}

/// What every level of a sweep records, as its arguments say.
#[derive(Debug, PartialEq, Eq)]
enum Recorded {
    /// The target the arguments name.
    Target(SweepTarget),
    /// The server the sweep starts (`--server`), with its whole process tree.
    ServerTree,
}

impl SweepArgs {
    /// What every level records: `-a` or `--cgroup` when given, else the server's tree, else
    /// the processes of `-p`. Refused when none of them is given.
    fn recorded(&self) -> Result<Recorded> {
        let t = &self.target;
        // A server lockscope starts is recorded with its whole tree (its workers), unless a
        // cgroup or every process is asked for.
        Ok(if t.all {
            Recorded::Target(SweepTarget::All)
        } else if let Some(cgroup) = &t.cgroup {
            Recorded::Target(SweepTarget::Cgroup(cgroup.display().to_string()))
        } else if self.server.is_some() {
            Recorded::ServerTree
        } else if t.pid.is_empty() {
            return Err(TargetArgs::nothing_to_record("--server CMD"));
        } else {
            Recorded::Target(SweepTarget::Pids {
                pids: t.pid.clone(),
                tree: t.tree,
            })
        })
    }

    /// Validated sweep options.
    fn to_options(&self) -> Result<SweepOptions> {
        let mut options = SweepOptions::default();
        options.levels = self.levels.clone();
        options.load = self.load.clone();
        options.duration = self.duration;
        options.load_grace = self.load_grace;
        options.settle = self.settle;
        options.output_dir = self.output.clone();
        // Checked here, as `record` checks them, so a typo fails before the server or any load
        // starts; none given leaves the choice to each recording (the backend's defaults).
        if !self.probes.is_empty() {
            options.probes = crate::cli::validate_probes(&self.probes)?;
        }
        options.min_block = self.probe_settings.min_block;
        options.syscalls = self.probe_settings.validated_syscalls()?;
        options.throughput = match (&self.throughput_regex, self.throughput) {
            (Some(pattern), _) => Throughput::Regex(pattern.clone()),
            (None, ThroughputArg::Auto) => Throughput::Auto,
            (None, ThroughputArg::Sysbench) => Throughput::Sysbench,
            (None, ThroughputArg::Ab) => Throughput::Ab,
            (None, ThroughputArg::Wrk) => Throughput::Wrk,
        };
        options.validate()?;
        Ok(options)
    }
}

/// A server lockscope started for a sweep; stopped (SIGTERM, then SIGKILL) when dropped.
struct Server {
    child: std::process::Child,
}

impl Server {
    fn start(command: &str, startup: Duration) -> Result<Server> {
        use std::os::unix::process::CommandExt;
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("exec {command}"))
            .stdin(std::process::Stdio::null())
            // A process group of its own: Apache's prefork parent ends its children by sending
            // SIGTERM to its whole group when it stops, which would end the sweep with them.
            .process_group(0)
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
        let child = &mut self.child;
        let ended = lockscope_probes::host::terminate(child.id(), Duration::from_secs(10), || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        if ended == lockscope_probes::host::Ended::Killed {
            let _ = child.wait();
        }
    }
}

/// Records each level in a [`Session`] attached to the server: `start` returns once the probes
/// are attached, so the load that starts next is recorded from its first request.
#[derive(Default)]
struct SessionRecorder {
    running: Option<(Session, std::path::PathBuf)>,
    /// The `cpu` probe's rate (`--frequency`); `None`: its default.
    frequency_hz: Option<u32>,
}

impl SessionRecorder {
    /// The session options that record `level`: the sweep's probes and settings, else the
    /// recording's defaults, the unwind-table cache as `record` uses it.
    fn options(&self, level: &lockscope::sweep::LevelRecording) -> Result<SessionOptions> {
        let mut options = SessionOptions::new(recorded_target(&level.target));
        options.duration = Some(level.duration);
        options.probes = match options.backend {
            BackendArg::Ebpf => crate::cli::validate_probes(&level.probes)?,
            BackendArg::Dtrace => level.probes.clone(),
        };
        options.min_block = level.min_block;
        options.syscalls = level.syscalls.clone();
        options.frequency_hz = self.frequency_hz;
        options.cache_dir = super::record::cache_dir(None);
        Ok(options)
    }

    /// Starts recording `level`: the recorder's `start`, before its error is boxed into a
    /// [`RecordError`] (which keeps the error's context).
    fn start_level(&mut self, level: &lockscope::sweep::LevelRecording) -> Result<()> {
        super::record::check_output_writable(&level.output)?;
        let options = self.options(level)?;
        let probes = options.probes.join(",");
        let session = Session::start(options)?;
        let target = session
            .target_description()
            .unwrap_or_else(|| level.target.describe());
        eprintln!(
            "lockscope: recording {target} with probes {probes} for level {}",
            level.concurrency
        );
        self.running = Some((session, level.output.clone()));
        Ok(())
    }

    /// Ends the recording started last and saves its profile: the recorder's `finish`, before
    /// its error is boxed into a [`RecordError`].
    fn finish_level(&mut self) -> Result<()> {
        let Some((session, output)) = self.running.take() else {
            bail!("no recording was started");
        };
        let recorded = session.finish()?;
        for note in &recorded.notes {
            eprintln!("lockscope: {note}");
        }
        super::record::save(&recorded.profile, &output)?;
        recorded.failure.map_or(Ok(()), Err)
    }
}

impl lockscope::sweep::LevelRecorder for SessionRecorder {
    fn start(&mut self, level: &lockscope::sweep::LevelRecording) -> Result<(), RecordError> {
        Ok(self.start_level(level)?)
    }

    fn finish(&mut self) -> Result<(), RecordError> {
        Ok(self.finish_level()?)
    }

    #[cfg(target_os = "linux")]
    fn target_processes(
        &mut self,
        target: &SweepTarget,
    ) -> Option<std::collections::BTreeSet<u32>> {
        lockscope_ebpf::target_processes(&recorded_target(target))
    }
}

/// The target a sweep's level records.
fn recorded_target(target: &SweepTarget) -> Target {
    match target {
        SweepTarget::Pids { pids, tree } => Target::Pids {
            pids: pids.clone(),
            tree: *tree,
        },
        SweepTarget::Cgroup(path) => Target::Cgroup(path.into()),
        SweepTarget::All => Target::All,
    }
}

impl Drop for SessionRecorder {
    /// A sweep that fails between start and finish still ends the recording (its probes
    /// detached) before it returns.
    fn drop(&mut self) {
        if let Some((session, _)) = self.running.take() {
            session.stop("interrupted (sweep failed)");
            let _ = session.finish();
        }
    }
}

/// Runs `lockscope sweep`.
pub fn run(args: &SweepArgs) -> Result<()> {
    let recorded = args.recorded()?;
    let options = args.to_options()?;
    args.probe_settings.check_frequency(&args.probes)?;
    let server = match &args.server {
        Some(command) => Some(Server::start(command, args.server_startup)?),
        None => None,
    };
    let target = match (recorded, &server) {
        (Recorded::Target(target), _) => target,
        (Recorded::ServerTree, Some(server)) => SweepTarget::Pids {
            pids: vec![server.pid()],
            tree: true,
        },
        // `recorded` names the server's tree only with --server, which started it above.
        (Recorded::ServerTree, None) => bail!("no server was started to record"),
    };
    let sweep = lockscope::sweep::run_sweep(
        &options,
        target,
        args.server.clone(),
        &mut SessionRecorder {
            running: None,
            frequency_hz: args.probe_settings.frequency,
        },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What every level records: `-a`, then `--cgroup`, then the server's tree, then `-p`;
    /// none of them is refused with every way to say what to record.
    #[test]
    fn what_every_level_records() {
        use clap::Parser;
        let recorded = |extra: &[&str]| {
            let mut argv = vec!["lockscope", "sweep", "--load", "true", "-o", "out"];
            argv.extend_from_slice(extra);
            let cli = crate::cli::Cli::try_parse_from(argv).expect("parses");
            let crate::cli::Command::Sweep(args) = cli.command else {
                panic!("not sweep");
            };
            args.recorded()
        };
        let target = |target| Some(Recorded::Target(target));
        assert_eq!(
            recorded(&["-a", "--server", "srv"]).ok(),
            target(SweepTarget::All)
        );
        assert_eq!(
            recorded(&["--cgroup", "/x", "--server", "srv"]).ok(),
            target(SweepTarget::Cgroup("/x".into()))
        );
        assert_eq!(
            recorded(&["--server", "srv"]).ok(),
            Some(Recorded::ServerTree)
        );
        assert_eq!(
            recorded(&["-p", "7,8", "--tree"]).ok(),
            target(SweepTarget::Pids {
                pids: vec![7, 8],
                tree: true
            })
        );
        let err = recorded(&[]).expect_err("no target");
        assert_eq!(
            err.to_string(),
            "nothing to record: give -p PID, --cgroup PATH, -a or --server CMD"
        );
    }

    /// Each level's session records the server's pid for the level's duration with the sweep's
    /// probes (the backend's defaults when none were given), `--min-block` and `--syscalls`
    /// exactly as given.
    #[test]
    fn level_sessions_carry_the_sweep_settings() {
        let mut level = lockscope::sweep::LevelRecording::new(
            5,
            SweepTarget::pid(4242),
            Duration::from_millis(1500),
            "sweep/level-5.lsp".into(),
        );
        let recorder = SessionRecorder::default();
        let options = recorder.options(&level).expect("options");
        assert_eq!(
            options.target,
            Target::Pids {
                pids: vec![4242],
                tree: false
            }
        );
        assert_eq!(options.duration, Some(Duration::from_millis(1500)));
        let defaults = crate::cli::validate_probes(&[]).expect("defaults");
        assert_eq!(options.probes, defaults);
        assert_eq!(options.min_block, None);
        assert!(options.syscalls.is_empty());

        level.probes = vec!["futex".to_string(), "offcpu".to_string()];
        level.min_block = Some(Duration::from_nanos(1500));
        level.syscalls = vec!["read".to_string(), "epoll_wait".to_string()];
        let options = recorder.options(&level).expect("options");
        assert_eq!(options.probes, ["futex", "offcpu"]);
        assert_eq!(options.min_block, Some(Duration::from_nanos(1500)));
        assert_eq!(options.syscalls, ["read", "epoll_wait"]);

        level.probes = vec!["futx".to_string()];
        let err = recorder.options(&level).expect_err("unknown probe");
        assert!(err.to_string().starts_with("unknown probe `futx`"), "{err}");
    }
}
