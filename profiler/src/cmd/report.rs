//! `lockscope report`: the text (or JSON) report of one profile on standard output.

use crate::cli::ReportArgs;
use anyhow::Result;

/// Runs `lockscope report`.
pub fn run(args: &ReportArgs) -> Result<()> {
    let options = args.to_options()?;
    let profile = super::read(&args.profile)?;
    super::write_stdout("the report", |out| {
        Ok(lockscope::report::write_report(&profile, &options, out)?)
    })
}
