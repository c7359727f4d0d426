//! `lockscope bench`: the pthread/futex micro-benchmark suite, `bench diff` of two results, and
//! `bench --record`, the suite recorded like any command; its arguments and their conversion
//! into [`BenchOptions`](lockscope::bench::BenchOptions).

use super::record;
use crate::cli::{self, BackendArg};
use crate::session::SessionOptions;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

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
    fn suite_arguments(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["bench".into()];
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

    /// Validated bench options: `--only` names known benchmarks.
    fn to_options(&self) -> Result<lockscope::bench::BenchOptions> {
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

/// Runs `lockscope bench` and `lockscope bench diff`.
pub fn run(args: &BenchArgs) -> Result<()> {
    if let Some(BenchAction::Diff { a, b }) = &args.action {
        let a = lockscope::bench::read_json(a)?;
        let b = lockscope::bench::read_json(b)?;
        return super::write_stdout("the comparison", |out| {
            Ok(lockscope::bench::write_diff(&a, &b, out)?)
        });
    }
    let options = args.to_options()?;
    if args.record {
        return run_recorded(args);
    }
    let results = lockscope::bench::run_suite(&options, &mut |line| {
        eprintln!("lockscope: {line}");
    })?;
    super::write_stdout("the results", |out| {
        if args.json {
            Ok(lockscope::bench::write_json(&results, out)?)
        } else {
            Ok(lockscope::bench::write_table(&results, out)?)
        }
    })
}

/// `lockscope bench --record`: the same suite in a child lockscope, recorded like any command
/// (with `record`'s defaults: the default probes, the unwind-table cache).
fn run_recorded(args: &BenchArgs) -> Result<()> {
    let exe = std::env::current_exe().context("failed to find the lockscope executable")?;
    let mut argv = vec![exe.into_os_string()];
    argv.extend(args.suite_arguments());
    let mut options = SessionOptions::new(lockscope_probes::Target::Command(argv));
    if options.backend == BackendArg::Ebpf {
        options.probes = cli::validate_probes(&[])?;
        options.cache_dir = record::cache_dir(None);
    }
    record::record(options, &args.output)?;
    eprintln!(
        "lockscope: each benchmark ran in threads named after it: `lockscope report {} --by thread` shows where each line's time went",
        args.output.display()
    );
    Ok(())
}
