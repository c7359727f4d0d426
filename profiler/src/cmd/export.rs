//! `lockscope export`: a profile as folded stacks, JSON, pprof or speedscope, to a file or
//! standard output; its arguments, and which of them each format takes.

use crate::cli::FoldArgs;
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use lockscope::analysis::fold::FoldOptions;
use lockscope_probes::Profile;
use std::io::Write;
use std::path::PathBuf;

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
    /// Profile to read (default: `lockscope.lsp`, the one `record` writes by default).
    #[arg(value_name = "FILE")]
    pub profile: Option<PathBuf>,

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

impl ExportArgs {
    /// Validated fold options for `profile`; `--wall` and `--wakeups` are the folded format's
    /// alone.
    fn to_fold_options(&self, profile: &Profile) -> Result<FoldOptions> {
        let fold = self.fold.to_options(profile)?;
        let folded = matches!(self.format, ExportFormatArg::Folded);
        if fold.wall && !folded {
            bail!("--wall needs --format folded");
        }
        if self.wakeups && !folded {
            bail!("--wakeups needs --format folded (--format json always holds the wakeups)");
        }
        Ok(fold)
    }
}

/// Runs `lockscope export`.
pub fn run(args: &ExportArgs) -> Result<()> {
    let profile = super::read_or_default(args.profile.as_deref())?;
    let fold = args.to_fold_options(&profile)?;
    let format = match args.format {
        ExportFormatArg::Folded => lockscope::export::ExportFormat::Folded,
        ExportFormatArg::Json => lockscope::export::ExportFormat::Json,
        ExportFormatArg::Pprof | ExportFormatArg::Speedscope => {
            return export_ecosystem(args, &profile, fold);
        }
    };
    super::write_output(args.output.as_deref(), "the export", |out| {
        if args.wakeups {
            lockscope::export::write_wakeup_chains(&profile, &fold, out)?;
        } else {
            lockscope::export::write_export(&profile, format, &fold, out)?;
        }
        Ok(())
    })
}

/// `export --format pprof|speedscope`, to the output file or standard output.
fn export_ecosystem(args: &ExportArgs, profile: &Profile, fold: FoldOptions) -> Result<()> {
    let pprof = matches!(args.format, ExportFormatArg::Pprof);
    if !profile.wakeups.is_empty() {
        // Neither format has a place for who woke whom next to the waits: say so rather than
        // drop them silently.
        eprintln!(
            "lockscope: note: the {} export holds the waits only; this profile's {} wakeup \
             records are in `--format json` and `--format folded --wakeups`",
            if pprof { "pprof" } else { "speedscope" },
            profile.wakeups.len()
        );
    }
    super::write_output(
        args.output.as_deref(),
        "the export",
        |out: &mut dyn Write| {
            if pprof {
                let mut options = lockscope::export::pprof::PprofOptions::default();
                options.fold = fold.clone();
                options.concurrency = args.concurrency;
                lockscope::export::pprof::write_pprof(profile, &options, out)?;
            } else {
                lockscope::export::speedscope::write_speedscope(profile, &fold, out)?;
            }
            Ok(())
        },
    )
}
