//! `lockscope diff`: two profiles compared site by site; the table (or its JSON) on standard
//! output, the differential flamegraph and folded pairs to files.

use crate::cli::DiffArgs;
use anyhow::Result;

/// Runs `lockscope diff`.
pub fn run(args: &DiffArgs) -> Result<()> {
    let options = args.to_options()?;
    let a = super::read(&args.a)?;
    let b = super::read(&args.b)?;
    if let Some(path) = &args.output {
        super::write_file(path, |out| {
            lockscope::diff::write_diff_flamegraph(&a, &b, &options, out)
        })?;
    }
    if let Some(path) = &args.folded {
        let lines = lockscope::diff::differential_lines(&a, &b, &options)?;
        super::write_file(path, |out| {
            for line in &lines {
                writeln!(out, "{line}")?;
            }
            Ok(())
        })?;
    }
    let (pa, pb) = (args.a.display().to_string(), args.b.display().to_string());
    super::write_stdout("the diff", |out| {
        if args.json {
            lockscope::diff::write_diff_json(&a, &b, (&pa, &pb), &options, out)?;
        } else {
            lockscope::diff::write_diff_table(&a, &b, (&pa, &pb), &options, out)?;
        }
        Ok(())
    })
}
