//! `lockscope export`: a profile as folded stacks, JSON, pprof or speedscope, to a file or
//! standard output.

use crate::cli::{ExportArgs, ExportFormatArg};
use anyhow::{bail, Result};
use lockscope_probes::Profile;
use std::io::Write;

/// Runs `lockscope export`.
pub fn run(args: &ExportArgs) -> Result<()> {
    let profile = super::read(&args.profile)?;
    let fold = args.fold.to_options(&profile)?;
    if fold.wall && !matches!(args.format, ExportFormatArg::Folded) {
        bail!("--wall needs --format folded");
    }
    if args.wakeups && !matches!(args.format, ExportFormatArg::Folded) {
        bail!("--wakeups needs --format folded (--format json always holds the wakeups)");
    }
    let format = match args.format {
        ExportFormatArg::Folded => lockscope::export::ExportFormat::Folded,
        ExportFormatArg::Json => lockscope::export::ExportFormat::Json,
        ExportFormatArg::Pprof | ExportFormatArg::Speedscope => {
            return export_ecosystem(args, &profile, fold);
        }
    };
    super::write_output(args.output.as_deref(), "the export", |out| {
        if args.wakeups {
            lockscope::export::write_wakeup_chains(&profile, &fold, out)
        } else {
            lockscope::export::write_export(&profile, format, &fold, out)
        }
    })
}

/// `export --format pprof|speedscope`, to the output file or standard output.
fn export_ecosystem(
    args: &ExportArgs,
    profile: &Profile,
    fold: lockscope::analysis::fold::FoldOptions,
) -> Result<()> {
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
                lockscope::export::pprof::write_pprof(profile, &options, out)
            } else {
                lockscope::export::speedscope::write_speedscope(profile, &fold, out)
            }
        },
    )
}
