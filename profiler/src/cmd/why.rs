//! `lockscope why`: the causes behind a profile's waits, as text or JSON on standard output.

use crate::cli::WhyArgs;
use anyhow::Result;
use lockscope::why::Why;

/// Runs `lockscope why`.
pub fn run(args: &WhyArgs) -> Result<()> {
    let options = args.to_options();
    let profile = super::read(&args.profile)?;
    let why = Why::build(&profile, &options)?;
    super::write_stdout("the causes", |out| {
        if options.json {
            serde_json::to_writer_pretty(&mut *out, &why)?;
            writeln!(out)?;
        } else {
            out.write_all(why.to_text().as_bytes())?;
        }
        Ok(())
    })
}
