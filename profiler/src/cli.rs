//! The command line, in one place: clap derive types and their conversion into the validated
//! options of the library modules and backends.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use lockscope_probes::Profile;
use std::ffi::OsString;
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
    Probes,
    /// Measure kernel and pthread primitives (lmbench-style) as one comparable table.
    Bench(BenchArgs),
}

/// `lockscope bench`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    /// Compare two saved runs instead of measuring.
    #[command(subcommand)]
    pub action: Option<BenchAction>,

    /// Fewer and shorter repetitions: the whole suite in seconds, with noisier numbers.
    #[arg(long)]
    pub quick: bool,

    /// Print the results as JSON (schema in docs/BENCH-JSON.md) instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Run only these benchmarks, comma-separated (default: all).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub only: Vec<String>,

    /// Thread counts of the thread-scaling tests, comma-separated (default: 1,2,5,10,20,35,50).
    #[arg(long, value_name = "COUNTS", value_delimiter = ',')]
    pub threads: Vec<u32>,

    /// Run the suite under the recorder (Linux, root): each benchmark runs in threads named after
    /// it, so `lockscope report FILE --by thread` shows where each line's time went.
    #[arg(long)]
    pub record: bool,

    /// Profile to write with --record.
    #[arg(
        short,
        long,
        value_name = "FILE",
        default_value = "lockscope-bench.lsp",
        requires = "record"
    )]
    pub output: PathBuf,
}

/// `lockscope bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchAction {
    /// Print two saved runs (`lockscope bench --json`) side by side with ratios B/A.
    Diff {
        /// First run (A).
        #[arg(value_name = "A.json")]
        a: PathBuf,
        /// Second run (B).
        #[arg(value_name = "B.json")]
        b: PathBuf,
    },
}

impl BenchArgs {
    /// The arguments that run the same suite without recording (for the recorded child).
    pub fn suite_arguments(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = vec!["bench".into()];
        if self.quick {
            args.push("--quick".into());
        }
        if self.json {
            args.push("--json".into());
        }
        if !self.only.is_empty() {
            args.push("--only".into());
            args.push(self.only.join(",").into());
        }
        if !self.threads.is_empty() {
            let counts: Vec<String> = self.threads.iter().map(u32::to_string).collect();
            args.push("--threads".into());
            args.push(counts.join(",").into());
        }
        args
    }

    /// Validated bench options.
    pub fn to_options(&self) -> Result<lockscope::bench::BenchOptions> {
        lockscope::bench::check_names(&self.only)?;
        let mut options = lockscope::bench::BenchOptions::default();
        options.quick = self.quick;
        options.only = self.only.clone();
        if !self.threads.is_empty() {
            options.threads = self.threads.clone();
        }
        Ok(options)
    }
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

/// `lockscope record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Profile to write.
    #[arg(short, long, value_name = "FILE", default_value = "lockscope.lsp")]
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

    /// Samples per second and CPU of the `cpu` probe (1 to 10000). Default: 99.
    #[arg(long, value_name = "HZ", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub frequency: Option<u32>,

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
    /// The session target these flags name; `None` when none was given.
    pub fn session_target(&self) -> Option<crate::session::SessionTarget> {
        session_target(&self.pid, self.tree, self.cgroup.as_deref(), self.all)
    }
}

/// Settings of the offcpu and syscall probes: `record` takes them, and `sweep` passes them on to
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
}

/// Grouping of `lockscope report`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum GroupByArg {
    /// One row per user stack and wait kind.
    Stack,
    /// One row per thread.
    Thread,
    /// One row per lock (waited-on address and operation).
    Lock,
    /// One row per process (with its command line).
    Process,
}

/// `lockscope report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Profile to read.
    #[arg(value_name = "FILE")]
    pub profile: PathBuf,

    /// How to group the waits.
    #[arg(long, value_enum, default_value = "stack")]
    pub by: GroupByArg,

    /// How many groups to show, largest total wait first (0: all).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,

    /// Print JSON instead of text (schema in docs/REPORT-JSON.md).
    #[arg(long)]
    pub json: bool,

    /// Also print kernel stacks.
    #[arg(long)]
    pub kernel_stacks: bool,

    /// Only this probe's records (`--probe cpu`: the on-CPU samples alone, ranked by CPU time,
    /// in a recording of waits and samples). Default: all probes.
    #[arg(long, value_name = "PROBE")]
    pub probe: Option<String>,
}

/// `lockscope why`.
#[derive(Debug, Args)]
pub struct WhyArgs {
    /// Profile to read (recorded with `--probes bottleneck`).
    #[arg(value_name = "FILE")]
    pub profile: PathBuf,

    /// Threads to analyse: names as globs (`worker-*`) or thread ids, comma-separated. Default:
    /// the groups that did the work (threads that wait on each other form a group; the groups
    /// with at least a tenth of the busiest group's CPU time).
    #[arg(long, value_name = "PATTERN")]
    pub threads: Option<String>,

    /// Only the waits whose stack has a frame containing this (a function name).
    #[arg(long, value_name = "FUNCTION")]
    pub site: Option<String>,

    /// How many causes to show, best first (0: all).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub top: usize,

    /// Print JSON instead of text (schema in docs/WHY-JSON.md).
    #[arg(long)]
    pub json: bool,
}

impl WhyArgs {
    /// The validated options.
    pub fn to_options(&self) -> lockscope::why::WhyOptions {
        let mut options = lockscope::why::WhyOptions::default();
        options.threads = self.threads.clone();
        options.site = self.site.clone().filter(|s| !s.is_empty());
        options.top = self.top;
        options.json = self.json;
        options
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

/// `lockscope flamegraph`.
#[derive(Debug, Args)]
pub struct FlamegraphArgs {
    /// Profile to read.
    #[arg(value_name = "FILE")]
    pub profile: PathBuf,

    /// SVG file to write.
    #[arg(short, long, value_name = "SVG")]
    pub output: PathBuf,

    /// Title (default: the target command and the recording's duration).
    #[arg(long)]
    pub title: Option<String>,

    /// Draw who woke whom (the `offcpu` probe's wakeups: waker stacks above the sleepers'
    /// stacks) instead of the waits.
    #[arg(long, conflicts_with = "wall")]
    pub wakeups: bool,

    /// Selection and weighting.
    #[command(flatten)]
    pub fold: FoldArgs,
}

/// Export formats.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ExportFormatArg {
    /// Brendan Gregg's folded stacks, root first: `thread;frame;...;leaf value`.
    Folded,
    /// The whole profile as JSON.
    Json,
    /// pprof's profile.proto, gzip-compressed (`go tool pprof`, Grafana Pyroscope); sample types
    /// contentions/count and delay/nanoseconds (docs/EXPORTS.md).
    Pprof,
    /// speedscope's JSON file format, with wait-time and wait-count profiles.
    Speedscope,
}

/// `lockscope export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Profile to read.
    #[arg(value_name = "FILE")]
    pub profile: PathBuf,

    /// Output format.
    #[arg(long, value_enum)]
    pub format: ExportFormatArg,

    /// File to write (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Concurrency level to label every pprof sample with (`concurrency`), e.g. a sweep level.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<u64>,

    /// Export who woke whom (the `offcpu` probe's wakeups) as folded chains, sleeper stack
    /// first, instead of the waits (folded only; the json format always holds the wakeups).
    #[arg(long, conflicts_with = "wall")]
    pub wakeups: bool,

    /// Selection and weighting (folded only).
    #[command(flatten)]
    pub fold: FoldArgs,
}

/// Formats `lockscope import` reads.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ImportFormatArg {
    /// dtrace(1) text output: lockscope's own D scripts, or aggregations such as
    /// `@[ustack()] = count()`.
    Dtrace,
    /// `perf script` output of a `perf record` capture, folded by inferno's perf collapser
    /// (stackcollapse-perf's rules).
    PerfScript,
    /// Folded stacks (`frame;frame;leaf VALUE` per line), as stackcollapse-* scripts write them.
    Folded,
}

/// What the values of imported folded stacks measure.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ValuesArg {
    /// Numbers of samples.
    Samples,
    /// Numbers of samples (the name older lockscope versions used).
    Count,
    /// Numbers of events (summed perf periods of cycles, faults, switches).
    Events,
    /// Nanoseconds of wait (lockscope's own folded export).
    Ns,
    /// Nanoseconds of CPU time (summed cpu-clock periods).
    CpuNs,
}

impl ValuesArg {
    /// The library's name for it.
    pub fn into_values(self) -> lockscope::import::FoldedValues {
        use lockscope::import::FoldedValues;
        match self {
            ValuesArg::Samples | ValuesArg::Count => FoldedValues::Samples,
            ValuesArg::Events => FoldedValues::Events,
            ValuesArg::Ns => FoldedValues::WaitNs,
            ValuesArg::CpuNs => FoldedValues::CpuNs,
        }
    }
}

/// `lockscope import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Format of the captured output.
    #[arg(value_enum)]
    pub format: ImportFormatArg,

    /// File holding the captured output.
    #[arg(value_name = "FILE")]
    pub input: PathBuf,

    /// Profile to write.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,

    /// What the values of folded input measure (folded only). Default: samples.
    #[arg(long, value_enum, value_name = "MEASURE")]
    pub values: Option<ValuesArg>,

    /// Keep the samples of this perf event (perf-script only): its name as the headers print
    /// it (`sched:sched_switch`, `cycles:u`) or without modifiers (`cycles`). Default: the
    /// first event of the capture, as stackcollapse-perf.
    #[arg(long, value_name = "EVENT")]
    pub event: Option<String>,

    /// OS the capture was made on (recorded in the profile's metadata). Default: unknown.
    #[arg(long, value_enum)]
    pub os: Option<OsArg>,
}

/// `lockscope diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Profile A (before).
    #[arg(value_name = "A")]
    pub a: PathBuf,

    /// Profile B (after).
    #[arg(value_name = "B")]
    pub b: PathBuf,

    /// Differential flamegraph (SVG) to write: widths are B's wait, red grew from A to B, blue
    /// shrank.
    #[arg(short, long, value_name = "SVG")]
    pub output: Option<PathBuf>,

    /// Normalize wait time per second of each recording's wall time (the default).
    #[arg(long, conflicts_with = "per_op")]
    pub per_sec: bool,

    /// Normalize wait time per operation: the number of operations the load did during A and
    /// during B (`--per-op 120000,95000`).
    #[arg(long, value_name = "N_A,N_B", value_delimiter = ',')]
    pub per_op: Vec<u64>,

    /// How many wait sites to show, largest change first (0: all).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,

    /// Title of the flamegraph (default: both target commands).
    #[arg(long)]
    pub title: Option<String>,

    /// Draw widths from A instead of B, so frames that vanished in B show.
    #[arg(long)]
    pub negate: bool,

    /// Also write the paired, normalized folded stacks (`stack A B` per line) to this file.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,

    /// Print the comparison as JSON instead of the table (schema in docs/DIFF.md).
    #[arg(long)]
    pub json: bool,
}

impl DiffArgs {
    /// Validated diff options.
    pub fn to_options(&self) -> Result<lockscope::diff::DiffOptions> {
        let mut options = lockscope::diff::DiffOptions::default();
        options.normalization = match self.per_op.as_slice() {
            [] => lockscope::diff::Normalization::PerSecond,
            &[ops_a, ops_b] => lockscope::diff::Normalization::PerOperation { ops_a, ops_b },
            other => bail!(
                "--per-op takes two operation counts, N_A,N_B (got {} numbers)",
                other.len()
            ),
        };
        options.normalization.validate()?;
        options.top = self.top;
        options.title = self.title.clone();
        options.negate = self.negate;
        Ok(options)
    }
}

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

    /// Settings of the offcpu and syscall probes, passed on to every level's recording as
    /// `record` takes them.
    #[command(flatten)]
    pub probe_settings: ProbeSettingsArgs,
}

impl SweepArgs {
    /// Validated sweep options.
    pub fn to_options(&self) -> Result<lockscope::sweep::SweepOptions> {
        use lockscope::sweep::Throughput;
        let t = &self.target;
        if t.pid.is_empty() && self.server.is_none() && t.cgroup.is_none() && !t.all {
            bail!("nothing to record: give -p PID, --cgroup PATH, -a or --server CMD");
        }
        let mut options = lockscope::sweep::SweepOptions::default();
        options.levels = self.levels.clone();
        options.load = self.load.clone();
        options.duration = self.duration;
        options.load_grace = self.load_grace;
        options.settle = self.settle;
        options.output_dir = self.output.clone();
        // Checked here, as `record` checks them, so a typo fails before the server or any load
        // starts; none given leaves the choice to each recording (the backend's defaults).
        if !self.probes.is_empty() {
            options.probes = validate_probes(&self.probes)?;
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

/// `lockscope html`.
#[derive(Debug, Args)]
pub struct HtmlArgs {
    /// Runs (`.lsp` profiles) and sweeps (`sweep.json` or its directory) to report on.
    #[arg(value_name = "RUN_OR_SWEEP", required = true)]
    pub inputs: Vec<PathBuf>,

    /// HTML file to write.
    #[arg(short, long, value_name = "HTML")]
    pub output: PathBuf,

    /// Page title (default: "lockscope report").
    #[arg(long)]
    pub title: Option<String>,

    /// Top wait sites shown per run, with their histograms.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub top: usize,
}

impl HtmlArgs {
    /// Validated HTML options.
    pub fn to_options(&self) -> lockscope::html::HtmlOptions {
        let mut options = lockscope::html::HtmlOptions::default();
        if let Some(title) = &self.title {
            options.title = title.clone();
        }
        options.top = self.top;
        options
    }
}

/// `lockscope chart`.
#[derive(Debug, Args)]
pub struct ChartArgs {
    /// Sweep file (`sweep.json`) or sweep directory.
    #[arg(value_name = "SWEEP")]
    pub sweep: PathBuf,

    /// Chart to write: `.svg`, or `.png` (rendered at twice the SVG's size).
    #[arg(short, long, value_name = "SVG|PNG")]
    pub output: PathBuf,

    /// Title (default: "Throughput and waits vs concurrency").
    #[arg(long)]
    pub title: Option<String>,
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

/// What `record` and `sweep` are told to record, from their target flags.
fn session_target(
    pids: &[u32],
    tree: bool,
    cgroup: Option<&std::path::Path>,
    all: bool,
) -> Option<crate::session::SessionTarget> {
    use crate::session::SessionTarget;
    if all {
        Some(SessionTarget::All)
    } else if let Some(cgroup) = cgroup {
        Some(SessionTarget::Cgroup(cgroup.to_path_buf()))
    } else if !pids.is_empty() {
        let mut unique: Vec<u32> = Vec::new();
        for &pid in pids {
            if !unique.contains(&pid) {
                unique.push(pid);
            }
        }
        Some(SessionTarget::Pids { pids: unique, tree })
    } else {
        None
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
        other => bail!("invalid duration unit `{other}` in `{text}`: use ms, s, m or h"),
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        bail!("invalid duration `{text}`: must be greater than zero");
    }
    Ok(Duration::from_secs_f64(seconds))
}

impl WeightArg {
    /// The library's weight.
    pub fn into_weight(self) -> lockscope::analysis::fold::Weight {
        match self {
            WeightArg::Ns => lockscope::analysis::fold::Weight::Nanoseconds,
            WeightArg::Count => lockscope::analysis::fold::Weight::Count,
        }
    }
}

impl FoldArgs {
    /// Validated fold options for `profile`.
    pub fn to_options(&self, profile: &Profile) -> Result<lockscope::analysis::fold::FoldOptions> {
        if let Some(probe) = &self.probe {
            // An imported capture's probes (`perf:cpu-clock`, `folded`) are not in the catalog.
            if lockscope_probes::catalog::find(probe).is_none()
                && !profile.recorded_probes().contains(&probe.as_str())
            {
                bail!(
                    "unknown probe `{probe}`: known probes are {}",
                    known_probe_names()
                );
            }
        }
        let mut options = lockscope::analysis::fold::FoldOptions::default();
        let timed = profile.waits.iter().any(|w| w.stats.total_ns > 0);
        let counted = profile.waits.iter().any(|w| w.stats.count > 0);
        options.weight = match self.weight {
            Some(weight) => weight.into_weight(),
            None if !timed && counted => lockscope::analysis::fold::Weight::Count,
            None => lockscope::analysis::fold::Weight::Nanoseconds,
        };
        options.probe = self.probe.clone();
        options.kernel_stacks = self.kernel_stacks;
        options.process = self.process;
        if self.wall {
            if matches!(self.weight, Some(WeightArg::Count)) {
                bail!("--wall weighs by time: samples and intervals do not count alike");
            }
            options.weight = lockscope::analysis::fold::Weight::Nanoseconds;
            options.wall = true;
        }
        Ok(options)
    }
}

impl ReportArgs {
    /// Validated report options.
    pub fn to_options(&self) -> Result<lockscope::report::ReportOptions> {
        let mut options = lockscope::report::ReportOptions::default();
        options.group_by = match self.by {
            GroupByArg::Stack => lockscope::report::GroupBy::Stack,
            GroupByArg::Thread => lockscope::report::GroupBy::Thread,
            GroupByArg::Lock => lockscope::report::GroupBy::Lock,
            GroupByArg::Process => lockscope::report::GroupBy::Process,
        };
        options.top = self.top;
        options.json = self.json;
        options.show_kernel_stacks = self.kernel_stacks;
        options.probe = self.probe.as_ref().map(|p| p.trim().to_string());
        Ok(options)
    }
}

/// Validates probe names against the catalog; empty means the defaults.
pub fn validate_probes(names: &[String]) -> Result<Vec<String>> {
    if names.is_empty() {
        return Ok(lockscope_probes::catalog::defaults()
            .map(|p| p.name.to_string())
            .collect());
    }
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let name = name.trim();
        let expanded: Vec<&str> = match lockscope_probes::catalog::find_set(name) {
            Some(set) => set.probes.to_vec(),
            None if lockscope_probes::catalog::find(name).is_some() => vec![name],
            None => bail!(
                "unknown probe `{name}`: known probes are {}",
                known_probe_names()
            ),
        };
        for name in expanded {
            if !out.iter().any(|n| n == name) {
                out.push(name.to_string());
            }
        }
    }
    Ok(out)
}

/// The catalog's probes, then its probe sets (`bottleneck`).
fn known_probe_names() -> String {
    let probes = lockscope_probes::CATALOG.iter().map(|p| p.name);
    let sets = lockscope_probes::catalog::SETS.iter().map(|s| s.name);
    let probes = probes.collect::<Vec<_>>().join(", ");
    let sets = sets.collect::<Vec<_>>().join(", ");
    format!("{probes} (sets: {sets})")
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

    /// Probe names are checked against the catalog, and none means the defaults.
    #[test]
    fn probe_validation() {
        assert_eq!(validate_probes(&[]).ok(), Some(vec!["futex".to_string()]));
        let err = validate_probes(&["nosuch".into()]).expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "unknown probe `nosuch`: known probes are futex, offcpu, wakeup, preempt, waitfor, \
             syscall, lifecycle, klock, mutex-hold, cpu (sets: bottleneck)"
        );
        // A set selects its probes, once each.
        assert_eq!(
            validate_probes(&["offcpu".into(), "bottleneck".into()]).ok(),
            Some(
                ["offcpu", "wakeup", "preempt", "waitfor", "cpu"]
                    .map(String::from)
                    .to_vec()
            )
        );
    }
}
