//! `lockscope flamegraph`: an SVG flamegraph of one profile, drawn by inferno; its arguments and
//! their conversion into [`FlamegraphOptions`].

use crate::cli::FoldArgs;
use anyhow::Result;
use clap::Args;
use lockscope::render::flamegraph::FlamegraphOptions;
use lockscope_probes::Profile;
use std::path::PathBuf;

/// `lockscope flamegraph`.
#[derive(Debug, Args)]
pub struct FlamegraphArgs {
    /// Profile to read (default: `lockscope.lsp`, the one `record` writes by default).
    #[arg(value_name = "FILE")]
    pub profile: Option<PathBuf>,

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

impl FlamegraphArgs {
    /// Validated flamegraph options for `profile` (the fold options depend on what it holds).
    fn to_options(&self, profile: &Profile) -> Result<FlamegraphOptions> {
        let mut options = FlamegraphOptions::default();
        options.fold = self.fold.to_options(profile)?;
        options.title = self.title.clone();
        options.wakeups = self.wakeups;
        Ok(options)
    }
}

/// Runs `lockscope flamegraph`.
pub fn run(args: &FlamegraphArgs) -> Result<()> {
    let profile = super::read_or_default(args.profile.as_deref())?;
    let options = args.to_options(&profile)?;
    super::write_file(&args.output, |out| {
        Ok(lockscope::render::flamegraph::write_flamegraph(
            &profile, &options, out,
        )?)
    })
}
