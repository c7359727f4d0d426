//! `lockscope flamegraph`: an SVG flamegraph of one profile, drawn by inferno.

use crate::cli::FlamegraphArgs;
use anyhow::Result;

/// Runs `lockscope flamegraph`.
pub fn run(args: &FlamegraphArgs) -> Result<()> {
    let profile = super::read(&args.profile)?;
    let fold = args.fold.to_options(&profile)?;
    let mut options = lockscope::render::flamegraph::FlamegraphOptions::default();
    options.fold = fold;
    options.title = args.title.clone();
    options.wakeups = args.wakeups;
    super::write_file(&args.output, |out| {
        lockscope::render::flamegraph::write_flamegraph(&profile, &options, out)
    })
}
