//! `lockscope sweep`: throughput and waits of a server across concurrency levels. Each level is
//! recorded in a [`Session`] of its own, as `lockscope record -p PID -d DURATION` would.

use crate::cli::{BackendArg, SweepArgs};
use crate::session::{Session, SessionOptions, SessionTarget};
use anyhow::{bail, Context, Result};
use lockscope::sweep::SweepTarget;
use std::time::Duration;

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
}

impl SessionRecorder {
    /// The session options that record `level`: the sweep's probes and settings, else the
    /// recording's defaults, the unwind-table cache as `record` uses it.
    fn options(level: &lockscope::sweep::LevelRecording) -> Result<SessionOptions> {
        let mut options = SessionOptions::new(session_target(&level.target));
        options.duration = Some(level.duration);
        options.probes = match options.backend {
            BackendArg::Ebpf => crate::cli::validate_probes(&level.probes)?,
            BackendArg::Dtrace => level.probes.clone(),
        };
        options.min_block = level.min_block;
        options.syscalls = level.syscalls.clone();
        options.cache_dir = super::record::cache_dir(None);
        Ok(options)
    }
}

impl lockscope::sweep::LevelRecorder for SessionRecorder {
    fn start(&mut self, level: &lockscope::sweep::LevelRecording) -> Result<()> {
        super::record::check_output_writable(&level.output)?;
        let options = Self::options(level)?;
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

    fn finish(&mut self) -> Result<()> {
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

    #[cfg(target_os = "linux")]
    fn target_processes(
        &mut self,
        target: &SweepTarget,
    ) -> Option<std::collections::BTreeSet<u32>> {
        use lockscope_ebpf::TargetSpec;
        lockscope_ebpf::target_processes(&match session_target(target) {
            SessionTarget::Pids { pids, tree } => TargetSpec::Pids { pids, tree },
            SessionTarget::Cgroup(path) => TargetSpec::Cgroup(path),
            SessionTarget::All => TargetSpec::All,
            SessionTarget::Command(argv) => TargetSpec::Command(argv),
        })
    }
}

/// The session target of a sweep's target.
fn session_target(target: &SweepTarget) -> SessionTarget {
    match target {
        SweepTarget::Pids { pids, tree } => SessionTarget::Pids {
            pids: pids.clone(),
            tree: *tree,
        },
        SweepTarget::Cgroup(path) => SessionTarget::Cgroup(path.into()),
        SweepTarget::All => SessionTarget::All,
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
    let options = args.to_options()?;
    let server = match &args.server {
        Some(command) => Some(Server::start(command, args.server_startup)?),
        None => None,
    };
    // A server lockscope started is recorded with its whole tree (its workers), unless a
    // cgroup or every process is asked for.
    let t = &args.target;
    let target = match (&server, &t.cgroup, t.all, t.pid.as_slice()) {
        (_, _, true, _) => SweepTarget::All,
        (_, Some(cgroup), _, _) => SweepTarget::Cgroup(cgroup.display().to_string()),
        (Some(server), None, false, _) => SweepTarget::Pids {
            pids: vec![server.pid()],
            tree: true,
        },
        (None, None, false, []) => {
            bail!("nothing to record: give -p PID, --cgroup PATH, -a or --server CMD")
        }
        (None, None, false, pids) => SweepTarget::Pids {
            pids: pids.to_vec(),
            tree: t.tree,
        },
    };
    let sweep = lockscope::sweep::run_sweep(
        &options,
        target,
        args.server.clone(),
        &mut SessionRecorder::default(),
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
        let options = SessionRecorder::options(&level).expect("options");
        assert_eq!(
            options.target,
            SessionTarget::Pids {
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
        let options = SessionRecorder::options(&level).expect("options");
        assert_eq!(options.probes, ["futex", "offcpu"]);
        assert_eq!(options.min_block, Some(Duration::from_nanos(1500)));
        assert_eq!(options.syscalls, ["read", "epoll_wait"]);

        level.probes = vec!["futx".to_string()];
        let err = SessionRecorder::options(&level).expect_err("unknown probe");
        assert!(err.to_string().starts_with("unknown probe `futx`"), "{err}");
    }
}
