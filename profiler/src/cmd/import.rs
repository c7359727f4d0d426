//! `lockscope import`: a capture from another tool (dtrace's output, `perf script`, folded
//! stacks) as a lockscope profile.

use crate::cli::{ImportArgs, ImportFormatArg, OsArg};
use anyhow::{Context, Result};
use lockscope_probes::Profile;

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
    let mut options = lockscope::import::ImportOptions::default();
    options.format = match args.format {
        ImportFormatArg::Folded => lockscope::import::ImportFormat::Folded,
        _ => lockscope::import::ImportFormat::PerfScript,
    };
    if let Some(values) = args.values {
        options.folded_values = values.into_values();
    }
    options.event = args.event.clone();
    options.os = args.os.map(|os| os.into_target_os().name().to_string());
    lockscope::import::import(text, &source, &options)
        .with_context(|| format!("failed to import `{source}`"))
}
