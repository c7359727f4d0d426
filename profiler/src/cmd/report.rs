//! `lockscope report`: the text (or JSON) report of one profile on standard output.

use crate::cli::ReportArgs;
use anyhow::{anyhow, Result};

/// Runs `lockscope report`.
pub fn run(args: &ReportArgs) -> Result<()> {
    let options = args.to_options()?;
    let profile = super::read(&args.profile)?;
    // A probe the profile does not have would give an empty report: said instead.
    let mut fold = lockscope::analysis::fold::FoldOptions::default();
    fold.probe = options.probe.clone();
    lockscope::analysis::fold::check_probe(&profile, &fold).map_err(|e| anyhow!(e))?;
    super::write_stdout("the report", |out| {
        Ok(lockscope::report::write_report(&profile, &options, out)?)
    })
}
