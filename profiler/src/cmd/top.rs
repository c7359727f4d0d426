//! `lockscope top`: the live view ([`crate::top`]). Its arguments are `record`'s (the target,
//! the probes and their settings, `-o` the profile `w` writes, `-d` an end), taken whole so that
//! the two never differ, with the view's own: the refresh interval, the window, plain text.

use crate::cli::{parse_duration, BackendArg};
use crate::cmd::record::RecordArgs;
use crate::top::TopOptions;
use anyhow::{bail, Result};
use clap::Args;
use std::time::Duration;

/// `lockscope top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// What to record and how, as `record` takes it (`-o` is the profile the `w` key writes;
    /// `-d` ends the view after that long).
    #[command(flatten)]
    pub record: RecordArgs,

    /// Time between refreshes (`1s`, `500ms`). Default: 1s.
    #[arg(short, long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    pub interval: Duration,

    /// Length of the sliding window the numbers are over (`10s`, `1m`). Default: 10s.
    #[arg(short = 'w', long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub window: Duration,

    /// Print a plain text block per interval even on a terminal (the default when standard
    /// output is not one: `lockscope top -p PID | tee top.log`).
    #[arg(long)]
    pub plain: bool,

    /// Wait sites per block in plain text. Default: 5.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub top: usize,
}

/// The shortest refresh interval: a snapshot drains and symbolizes every stack seen.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

impl TopArgs {
    /// The validated options of the view.
    pub fn to_options(&self) -> Result<TopOptions> {
        let backend = self.record.backend()?;
        if backend == BackendArg::Dtrace {
            bail!(
                "lockscope top needs the ebpf backend (Linux): dtrace prints its aggregations \
                 only at its end; use `lockscope record -d 10s` and `lockscope report` instead"
            );
        }
        if self.interval < MIN_INTERVAL {
            bail!("--interval must be at least 100ms (each refresh reads every probe's maps)");
        }
        if self.window < self.interval {
            bail!("--window must be at least one --interval long");
        }
        self.record
            .probe_settings
            .check_frequency(&self.record.probes)?;
        let target = self.record.to_target()?;
        Ok(TopOptions {
            session: self.record.to_session_options(backend, target)?,
            interval: self.interval,
            window: self.window,
            output: self.record.output.clone(),
            plain: self.plain,
            top: self.top.max(1),
        })
    }
}

/// Runs `lockscope top`.
pub fn run(args: &TopArgs) -> Result<()> {
    let options = args.to_options()?;
    #[cfg(target_os = "linux")]
    lockscope_ebpf::check_privileges(&options.session.probes, options.session.target.given_pids())?;
    crate::top::run(&options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    /// `top` takes `record`'s target and probes, and checks its interval and window.
    #[test]
    fn options() {
        let cli = Cli::try_parse_from(["lockscope", "top", "-p", "12", "--probes", "futex,offcpu"])
            .expect("parses");
        let crate::cli::Command::Top(args) = cli.command else {
            panic!("not top");
        };
        let options = args.to_options().expect("valid");
        assert_eq!(options.interval, Duration::from_secs(1));
        assert_eq!(options.window, Duration::from_secs(10));
        assert_eq!(options.session.probes, ["futex", "offcpu"]);
        for bad in [
            ["lockscope", "top", "-p", "12", "-i", "10ms"],
            ["lockscope", "top", "-p", "12", "-w", "500ms"],
            ["lockscope", "top", "-p", "12", "--backend", "dtrace"],
        ] {
            let cli = Cli::try_parse_from(bad).expect("parses");
            let crate::cli::Command::Top(args) = cli.command else {
                panic!("not top");
            };
            assert!(args.to_options().is_err(), "{bad:?}");
        }
    }
}
