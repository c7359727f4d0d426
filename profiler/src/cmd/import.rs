//! `lockscope import`: a capture from another tool (dtrace's output, `perf script`, folded
//! stacks) as a lockscope profile; its arguments and their conversion into
//! [`ImportOptions`].

use crate::cli::OsArg;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use lockscope::import::{FoldedValues, ImportFormat, ImportOptions};
use lockscope_probes::Profile;
use std::path::PathBuf;

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
    fn into_values(self) -> FoldedValues {
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

impl ImportArgs {
    /// The import options of the text formats (`perf-script`, `folded`; dtrace's output is
    /// read by the DTrace backend).
    fn to_text_options(&self) -> ImportOptions {
        let mut options = ImportOptions::default();
        options.format = match self.format {
            ImportFormatArg::Folded => ImportFormat::Folded,
            _ => ImportFormat::PerfScript,
        };
        if let Some(values) = self.values {
            options.folded_values = values.into_values();
        }
        options.event = self.event.clone();
        options.os = self.os.map(|os| os.into_target_os().name().to_string());
        options
    }
}

/// Runs `lockscope import`.
pub fn run(args: &ImportArgs) -> Result<()> {
    let bytes = std::fs::read(&args.input)
        .with_context(|| format!("failed to read `{}`", args.input.display()))?;
    let profile = match args.format {
        ImportFormatArg::Dtrace => {
            let mut profile =
                lockscope_dtrace::import_capture(&bytes, args.os.map(OsArg::into_target_os))
                    .with_context(|| format!("failed to import `{}`", args.input.display()))?;
            lockscope::import::mark_dtrace_samples(&mut profile);
            profile
        }
        ImportFormatArg::PerfScript | ImportFormatArg::Folded => import_text(args, &bytes)?,
    };
    lockscope_probes::write_profile(&profile, &args.output)
        .with_context(|| format!("failed to write profile `{}`", args.output.display()))?;
    eprintln!(
        "lockscope: wrote `{}`: {} records, {} stacks",
        args.output.display(),
        profile.waits.len(),
        profile.stacks.len()
    );
    Ok(())
}

/// `import perf-script|folded`.
fn import_text(args: &ImportArgs, bytes: &[u8]) -> Result<Profile> {
    let source = args.input.display().to_string();
    let text = std::str::from_utf8(bytes)
        .with_context(|| format!("failed to import `{source}`: not UTF-8 text"))?;
    let options = args.to_text_options();
    lockscope::import::import(text, &source, &options)
        .with_context(|| format!("failed to import `{source}`"))
}
