//! The command line's top: [`Cli`] and its [`Command`]s, and the argument groups several
//! commands share ([`TargetArgs`], [`ProbeSettingsArgs`], [`FoldArgs`], the backend and OS
//! choices), with their parsers and checks.
//!
//! Each command's own arguments live in its file under `cmd/` (`cmd::record::RecordArgs`...),
//! beside their checks, their conversion into the library's validated options structs and the
//! code that uses them, rather than in a `cli/` module per command: a flag, the check it needs
//! and what it does change together, so adding one touches one file, and no command's file
//! reaches 500 lines. Within a file the layers stay apart, as ripgrep keeps them: the clap
//! struct holds the raw values, a `to_options` method (for record and sweep, a few named ones)
//! turns them into the validated settings, and `run` hands those on, reading from the arguments
//! only its paths and output choices.

use crate::cmd::bench::BenchArgs;
use crate::cmd::chart::ChartArgs;
use crate::cmd::diff::DiffArgs;
use crate::cmd::export::ExportArgs;
use crate::cmd::flamegraph::FlamegraphArgs;
use crate::cmd::html::HtmlArgs;
use crate::cmd::import::ImportArgs;
use crate::cmd::probes::ProbesArgs;
use crate::cmd::record::RecordArgs;
use crate::cmd::report::ReportArgs;
use crate::cmd::sweep::SweepArgs;
use crate::cmd::top::TopArgs;
use crate::cmd::why::WhyArgs;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use lockscope_probes::Profile;
use lockscope_probes::Target;
use std::path::PathBuf;
use std::time::Duration;

/// lockscope: where a threaded server's threads wait, and why throughput collapses as
/// concurrency grows.
#[derive(Debug, Parser)]
#[command(name = "lockscope", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Record the waits of a command, running processes, a cgroup or the whole machine into a
    /// profile.
    Record(RecordArgs),
    /// Watch live where the threads wait, and why, over a sliding window (`q` quits, detaching
    /// everything).
    Top(TopArgs),
    /// Print a profile's top wait sites with their log2 histograms.
    Report(ReportArgs),
    /// Name what the threads' waiting comes down to, best first: the causes behind the waits of a
    /// profile recorded with `--probes bottleneck`.
    Why(WhyArgs),
    /// Write a flamegraph (SVG) of a profile's waits.
    Flamegraph(FlamegraphArgs),
    /// Export a profile as folded stacks or JSON.
    Export(ExportArgs),
    /// Compare two profiles: differential flamegraph and side-by-side table of wait time.
    Diff(DiffArgs),
    /// Run a load at several concurrency levels, recording the server at each: throughput,
    /// scaling, waits and the knee, in a sweep directory.
    Sweep(SweepArgs),
    /// Write one self-contained HTML report of runs and sweeps (no network fetches).
    Html(HtmlArgs),
    /// Draw the scaling chart of a sweep (SVG or PNG).
    Chart(ChartArgs),
    /// Turn output captured by another tool into a profile.
    Import(ImportArgs),
    /// List the probes lockscope can attach, per backend and OS.
    Probes(ProbesArgs),
    /// Measure kernel and pthread primitives (lmbench-style) as one comparable table.
    Bench(BenchArgs),
}

/// Recording backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// eBPF (Linux).
    Ebpf,
    /// dtrace(1) (macOS, FreeBSD, illumos; Linux with Oracle's DTrace for Linux).
    Dtrace,
}

impl BackendArg {
    /// The backend of this host: eBPF on Linux, DTrace elsewhere.
    pub fn host_default() -> BackendArg {
        if cfg!(target_os = "linux") {
            BackendArg::Ebpf
        } else {
            BackendArg::Dtrace
        }
    }
}

/// Operating systems the DTrace backend writes scripts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OsArg {
    /// macOS (psynch, ulock, plockstat).
    Macos,
    /// FreeBSD (_umtx_op, lockstat).
    Freebsd,
    /// illumos (lwp_park, plockstat, lockstat).
    Illumos,
    /// Linux with Oracle's DTrace for Linux (futex, sched, proc, syscall).
    Linux,
}

impl OsArg {
    /// The DTrace backend's OS.
    pub fn into_target_os(self) -> lockscope_dtrace::TargetOs {
        match self {
            OsArg::Macos => lockscope_dtrace::TargetOs::MacOs,
            OsArg::Freebsd => lockscope_dtrace::TargetOs::FreeBsd,
            OsArg::Illumos => lockscope_dtrace::TargetOs::Illumos,
            OsArg::Linux => lockscope_dtrace::TargetOs::Linux,
        }
    }
}

/// What `record` and `sweep` attach to: running processes, a cgroup, or every process.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Attach to these running processes, comma-separated or repeated (`-p 12,34 -p 56`): all
    /// their threads, including threads created later, and the children they fork while
    /// recorded.
    #[arg(
        short,
        long,
        value_name = "PID",
        value_delimiter = ',',
        value_parser = parse_pid
    )]
    pub pid: Vec<u32>,

    /// With -p: the processes' existing descendants too, the whole process tree (children
    /// forked while recording are recorded either way).
    #[arg(long, requires = "pid")]
    pub tree: bool,

    /// Record every process of this cgroup (v2) and of its descendant cgroups, now and later: a
    /// path (`/sys/fs/cgroup/system.slice/nginx.service`), a path from the hierarchy's root
    /// (`/system.slice/nginx.service`, as /proc/PID/cgroup says) or a unit's name
    /// (`nginx.service`).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["pid", "all"])]
    pub cgroup: Option<PathBuf>,

    /// Record every process of the machine, kernel threads included (for the offcpu, cpu and
    /// klock probes), lockscope's own left out; for -d or until Ctrl-C.
    #[arg(short = 'a', long, conflicts_with = "pid")]
    pub all: bool,
}

impl TargetArgs {
    /// The target these flags name, each pid once; `None` when none was given.
    pub fn to_target(&self) -> Option<Target> {
        if self.all {
            Some(Target::All)
        } else if let Some(cgroup) = &self.cgroup {
            Some(Target::Cgroup(cgroup.clone()))
        } else if !self.pid.is_empty() {
            let mut unique: Vec<u32> = Vec::new();
            for &pid in &self.pid {
                if !unique.contains(&pid) {
                    unique.push(pid);
                }
            }
            Some(Target::Pids {
                pids: unique,
                tree: self.tree,
            })
        } else {
            None
        }
    }

    /// The error of a command given none of these flags nor `alternative`, its own other way to
    /// say what to record (a command after `--`, `--server CMD`).
    pub fn nothing_to_record(alternative: &str) -> anyhow::Error {
        anyhow!("nothing to record: give -p PID, --cgroup PATH, -a or {alternative}")
    }
}

/// Settings of the offcpu, syscall and cpu probes: `record` takes them, and `sweep` passes them on to
/// every level's recording.
#[derive(Debug, Args)]
pub struct ProbeSettingsArgs {
    /// Shortest off-CPU interval the `offcpu` probe records with its stacks and waker (`10us`,
    /// `1ms`); shorter ones still count in the per-thread time breakdown. Default: 10us.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub min_block: Option<Duration>,

    /// System calls the `syscall` probe records, comma-separated (`read,write`). Default: all.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub syscalls: Vec<String>,

    /// Samples per second and CPU of the `cpu` probe (1 to 10000), `-F` as perf's. Default: 99.
    #[arg(
        short = 'F',
        long,
        value_name = "HZ",
        value_parser = clap::value_parser!(u32).range(1..=10_000)
    )]
    pub frequency: Option<u32>,
}

impl ProbeSettingsArgs {
    /// The `--syscalls` names, trimmed; an unknown one is refused with the eBPF backend's own
    /// message (``unknown system call `reed` ``), so a typo fails before anything is recorded.
    /// Elsewhere than Linux the names are not checked: only the eBPF backend reads them.
    pub fn validated_syscalls(&self) -> Result<Vec<String>> {
        #[cfg(target_os = "linux")]
        lockscope_ebpf::syscall_numbers(&self.syscalls)?;
        Ok(self.syscalls.iter().map(|n| n.trim().to_string()).collect())
    }

    /// `--frequency` sets the `cpu` probe's rate, so it needs that probe among `probes`, given
    /// by its name or by a set that has it (`bottleneck`). An unknown name is left to the
    /// probes' own check.
    pub fn check_frequency(&self, probes: &[String]) -> Result<()> {
        let samples_cpu = lockscope_probes::catalog::select(probes).map_or(true, |probes| {
            probes.contains(&lockscope_probes::catalog::CPU.name)
        });
        if self.frequency.is_some() && !samples_cpu {
            bail!(
                "--frequency sets the `{cpu}` probe's sampling rate: add `{cpu}` to --probes",
                cpu = lockscope_probes::catalog::CPU.name
            );
        }
        Ok(())
    }
}

/// What a flamegraph or folded stack is weighted by.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum WeightArg {
    /// Total wait time in nanoseconds.
    Ns,
    /// Number of waits.
    Count,
}

/// Selection and weighting shared by `flamegraph` and `export`.
#[derive(Debug, Args)]
pub struct FoldArgs {
    /// Weight frames by wait time or by number of waits. Default: ns, or count for a profile
    /// that holds no times (such as an imported `@[ustack()] = count()` capture).
    #[arg(long, value_enum)]
    pub weight: Option<WeightArg>,

    /// Only this probe's waits (default: all probes).
    #[arg(long, value_name = "PROBE")]
    pub probe: Option<String>,

    /// Append kernel frames (suffixed `_[k]`) above the user frames.
    #[arg(long)]
    pub kernel_stacks: bool,

    /// Wall-clock view: the `cpu` probe's on-CPU samples and the `offcpu` probe's off-CPU
    /// intervals together, weighted by time, each stack topped by what the thread was doing
    /// (recorded with --probes cpu,offcpu).
    #[arg(long, conflicts_with = "probe")]
    pub wall: bool,

    /// Begin each stack with its process (`apache2-1234`: name and pid, as
    /// stackcollapse-perf.pl --pid), above the thread: the processes of a recording of many
    /// apart.
    #[arg(long)]
    pub process: bool,
}

/// The one line a usage error (an unknown flag, a bad value, a missing argument) is told in,
/// without `lockscope: error: `: what is wrong, naming the flag and what it wants, and the help
/// to read (`see 'lockscope record --help'`), from clap's error context. `argv` (without the
/// program) names the subcommand whose help is meant. clap's own hint to pass an unknown flag
/// after `--` is left out: after `record`, that would launch the flag as a command.
pub fn usage_error_line(err: &clap::Error, argv: &[std::ffi::OsString]) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let get = |kind: ContextKind| err.get(kind).map(ContextValue::to_string);
    let quoted_list = |kind: ContextKind| match err.get(kind) {
        Some(ContextValue::Strings(values)) => values
            .iter()
            .map(|v| format!("'{v}'"))
            .collect::<Vec<_>>()
            .join(", "),
        Some(value) => format!("'{value}'"),
        None => String::new(),
    };
    let arg = get(ContextKind::InvalidArg).unwrap_or_default();
    let suggestion = |kind: ContextKind| {
        err.get(kind)
            .map(|s| format!("; did you mean {}?", quoted_one(s)))
            .unwrap_or_default()
    };
    let what = match err.kind() {
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            let value = get(ContextKind::InvalidValue).unwrap_or_default();
            let why = match std::error::Error::source(err) {
                Some(source) => source.to_string(),
                None if value.is_empty() => "a value is required".to_string(),
                None => format!(
                    "expected one of {}{}",
                    quoted_list(ContextKind::ValidValue),
                    suggestion(ContextKind::SuggestedValue)
                ),
            };
            format!("invalid value '{value}' for '{arg}': {why}")
        }
        ErrorKind::UnknownArgument => format!(
            "unexpected argument '{arg}'{}",
            suggestion(ContextKind::SuggestedArg)
        ),
        ErrorKind::InvalidSubcommand => format!(
            "unrecognized subcommand '{}'{}",
            get(ContextKind::InvalidSubcommand).unwrap_or_default(),
            suggestion(ContextKind::SuggestedSubcommand)
        ),
        ErrorKind::MissingRequiredArgument => {
            let several = matches!(
                err.get(ContextKind::InvalidArg),
                Some(ContextValue::Strings(args)) if args.len() > 1
            );
            format!(
                "missing required argument{} {}",
                if several { "s" } else { "" },
                quoted_list(ContextKind::InvalidArg)
            )
        }
        ErrorKind::ArgumentConflict => format!(
            "'{arg}' cannot be used with {}",
            quoted_list(ContextKind::PriorArg)
        ),
        // The rest (a wrong number of values, `--flag value` where `=` is required...): clap's
        // own first line, which names the argument.
        _ => err
            .render()
            .to_string()
            .lines()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("invalid arguments")
            .trim_start_matches("error: ")
            .to_string(),
    };
    format!("{what} (see '{} --help')", command_path(argv).join(" "))
}

/// A suggestion as said: one value quoted, several listed.
fn quoted_one(value: &clap::error::ContextValue) -> String {
    match value {
        clap::error::ContextValue::Strings(values) => values
            .iter()
            .map(|v| format!("'{v}'"))
            .collect::<Vec<_>>()
            .join(" or "),
        other => format!("'{other}'"),
    }
}

/// The command `argv` runs, as words (`lockscope bench diff`): its subcommands up to the first
/// word that is not one (or `--`).
fn command_path(argv: &[std::ffi::OsString]) -> Vec<String> {
    use clap::CommandFactory;
    let mut command = Cli::command();
    let mut path = vec![command.get_name().to_string()];
    for word in argv {
        let Some(word) = word.to_str() else { break };
        if word == "--" {
            break;
        }
        if word.starts_with('-') {
            continue;
        }
        match command.find_subcommand(word) {
            Some(sub) => {
                path.push(sub.get_name().to_string());
                let sub = sub.clone();
                command = sub;
            }
            None => break,
        }
    }
    path
}

/// Parses one process id of `-p`: a positive number.
pub fn parse_pid(text: &str) -> Result<u32> {
    let text = text.trim();
    match text.parse::<u32>() {
        Ok(0) => bail!("pid 0 is no process: -a records every process"),
        Ok(pid) => Ok(pid),
        Err(_) => bail!("invalid pid `{text}`: expected a process id (a positive number)"),
    }
}

/// Parses `30s`, `500ms`, `2m`, `1h`, `1.5s` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .with_context(|| format!("invalid duration `{text}`: expected e.g. 30s, 500ms, 2m"))?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => bail!("invalid duration unit `{other}` in `{text}`: use us, ms, s, m or h"),
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        bail!("invalid duration `{text}`: must be greater than zero");
    }
    // Every duration goes to the kernel and the recorder as u64 nanoseconds (584 years).
    match Duration::try_from_secs_f64(seconds) {
        Ok(duration) if duration <= Duration::from_nanos(u64::MAX) => Ok(duration),
        _ => bail!("invalid duration `{text}`: longer than 584 years"),
    }
}

impl WeightArg {
    /// The library's weight.
    pub fn into_weight(self) -> lockscope::analysis::measure::Weight {
        match self {
            WeightArg::Ns => lockscope::analysis::measure::Weight::Nanoseconds,
            WeightArg::Count => lockscope::analysis::measure::Weight::Count,
        }
    }
}

impl FoldArgs {
    /// Validated fold options for `profile`.
    pub fn to_options(&self, profile: &Profile) -> Result<lockscope::analysis::fold::FoldOptions> {
        if let Some(probe) = &self.probe {
            // An imported capture's probes (`perf:cpu-clock`, `folded`) are not in the catalog.
            if !profile.recorded_probes().contains(&probe.as_str()) {
                lockscope_probes::catalog::lookup(probe)?;
            }
        }
        let mut options = lockscope::analysis::fold::FoldOptions::default();
        let timed = profile.waits.iter().any(|w| w.stats.total_ns > 0);
        let counted = profile.waits.iter().any(|w| w.stats.count > 0);
        options.weight = match self.weight {
            Some(weight) => weight.into_weight(),
            None if !timed && counted => lockscope::analysis::measure::Weight::Count,
            None => lockscope::analysis::measure::Weight::Nanoseconds,
        };
        options.probe = self.probe.clone();
        options.kernel_stacks = self.kernel_stacks;
        options.process = self.process;
        if self.wall {
            if matches!(self.weight, Some(WeightArg::Count)) {
                bail!("--wall weighs by time: samples and intervals do not count alike");
            }
            options.weight = lockscope::analysis::measure::Weight::Nanoseconds;
            options.wall = true;
        }
        Ok(options)
    }
}

/// Validates probe names against the catalog; empty means the defaults.
pub fn validate_probes(names: &[String]) -> Result<Vec<String>> {
    Ok(lockscope_probes::catalog::select(names)?
        .into_iter()
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Durations parse in every documented unit and bad ones are refused with a reason.
    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").ok(), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("30").ok(), Some(Duration::from_secs(30)));
        assert_eq!(
            parse_duration("500ms").ok(),
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse_duration("2m").ok(), Some(Duration::from_secs(120)));
        assert_eq!(
            parse_duration("1.5s").ok(),
            Some(Duration::from_millis(1500))
        );
        let err = parse_duration("5 parsecs").expect_err("bad unit");
        assert!(err.to_string().contains("unit `parsecs`"), "{err}");
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("s").is_err());
        assert_eq!(
            parse_duration("250us").ok(),
            Some(Duration::from_micros(250))
        );
        // Past u64 nanoseconds: refused, never a panic or a wrapped-around value.
        let err = parse_duration("99999999999999999999").expect_err("too long");
        assert!(err.to_string().contains("longer than 584 years"), "{err}");
        assert!(parse_duration("1e400").is_err());
    }

    /// The clap definition is consistent (clap's own debug assertions).
    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    /// Pids come comma-separated or repeated; a bad one is refused naming it.
    #[test]
    fn pid_lists() {
        let cli = Cli::try_parse_from(["lockscope", "record", "-p", "12,34", "-p", "56", "--tree"])
            .expect("parses");
        let Command::Record(args) = cli.command else {
            panic!("not record");
        };
        assert_eq!(args.target.pid, [12, 34, 56]);
        assert!(args.target.tree);
        let err = Cli::try_parse_from(["lockscope", "record", "-p", "12,abc"]).expect_err("abc");
        assert!(
            err.to_string()
                .contains("invalid pid `abc`: expected a process id (a positive number)"),
            "{err}"
        );
        let err = Cli::try_parse_from(["lockscope", "record", "-p", "0"]).expect_err("0");
        assert!(err.to_string().contains("pid 0 is no process"), "{err}");
        let err = Cli::try_parse_from(["lockscope", "record", "--tree"]).expect_err("tree alone");
        assert!(err.to_string().contains("--pid"), "{err}");
        for conflicting in [
            &["lockscope", "record", "-a", "-p", "1"][..],
            &["lockscope", "record", "-a", "--cgroup", "/"][..],
            &["lockscope", "record", "-a", "--", "ls"][..],
        ] {
            assert!(Cli::try_parse_from(conflicting).is_err(), "{conflicting:?}");
        }
    }

    /// `-F` is `--frequency`, as perf's: `record -F 49` reaches the session's options, and
    /// `sweep -F 49` its levels' recorder, instead of being refused as a command to launch.
    #[test]
    fn short_frequency() {
        let cli = Cli::try_parse_from(["lockscope", "record", "-F", "49", "--probes", "cpu", "-a"])
            .expect("parses");
        let Command::Record(args) = cli.command else {
            panic!("not record");
        };
        assert_eq!(args.probe_settings.frequency, Some(49));
        let target = args.target.to_target().expect("-a");
        let options = args
            .to_session_options(BackendArg::Ebpf, target)
            .expect("options");
        assert_eq!(options.frequency_hz, Some(49));
        let cli = Cli::try_parse_from([
            "lockscope",
            "sweep",
            "--load",
            "true",
            "-o",
            "out",
            "-a",
            "-F",
            "49",
        ])
        .expect("parses");
        let Command::Sweep(args) = cli.command else {
            panic!("not sweep");
        };
        assert_eq!(args.probe_settings.frequency, Some(49));
        let err = args
            .probe_settings
            .check_frequency(&args.probes)
            .expect_err("no cpu probe");
        assert!(err.to_string().starts_with("--frequency sets"), "{err}");
    }

    /// A usage error's line names the flag, the value and why, and the help of the command it
    /// was given to; clap's multi-line rendering is not in it.
    #[test]
    fn usage_error_lines() {
        let line = |argv: &[&str]| {
            let err = Cli::try_parse_from(argv).expect_err("a usage error");
            let words: Vec<std::ffi::OsString> = argv[1..].iter().map(Into::into).collect();
            usage_error_line(&err, &words)
        };
        assert_eq!(
            line(&["lockscope", "record", "-d", "5x", "--", "true"]),
            "invalid value '5x' for '--duration <DURATION>': invalid duration unit `x` in `5x`: \
             use us, ms, s, m or h (see 'lockscope record --help')"
        );
        assert_eq!(
            line(&["lockscope", "sweep"]),
            "missing required arguments '--load <CMD>', '--output <DIR>' \
             (see 'lockscope sweep --help')"
        );
        assert_eq!(
            line(&["lockscope", "record", "-a", "-p", "1"]),
            "'--all' cannot be used with '--pid <PID>' (see 'lockscope record --help')"
        );
        assert_eq!(
            line(&["lockscope", "reprot"]),
            "unrecognized subcommand 'reprot'; did you mean 'export' or 'report'? \
             (see 'lockscope --help')"
        );
    }

    /// Probe names are checked against the catalog (an unknown one gets the catalog's message),
    /// and none means the defaults.
    #[test]
    fn probe_validation() {
        use lockscope_probes::catalog::{self, UnknownProbe, BOTTLENECK};
        let names = |probes: &[&str]| probes.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        let defaults: Vec<&str> = catalog::defaults().map(|p| p.name).collect();
        assert_eq!(validate_probes(&[]).ok(), Some(names(&defaults)));
        let err = validate_probes(&["nosuch".into()]).expect_err("unknown");
        let unknown = UnknownProbe {
            name: "nosuch".into(),
        };
        assert_eq!(err.to_string(), unknown.to_string());
        // A set selects its probes, once each: a probe of the set given before it is not repeated.
        assert_eq!(
            validate_probes(&names(&[BOTTLENECK.probes[0], BOTTLENECK.name])).ok(),
            Some(names(BOTTLENECK.probes))
        );
    }
}
