//! `lockscope chart`: a sweep's scaling chart, SVG or PNG by the output's extension.

use crate::cli::ChartArgs;
use anyhow::{bail, Result};

/// Runs `lockscope chart`.
pub fn run(args: &ChartArgs) -> Result<()> {
    let (sweep, _) = lockscope::sweep::read_sweep(&args.sweep)?;
    let mut options = lockscope::sweep::chart::ChartOptions::default();
    options.title = args.title.clone();
    match args.output.extension().and_then(|e| e.to_str()) {
        Some("svg") => {
            let svg = lockscope::sweep::chart::scaling_svg(&sweep, &options);
            super::write_file(&args.output, |out| Ok(out.write_all(svg.as_bytes())?))
        }
        Some("png") => {
            let png = lockscope::sweep::chart::scaling_png(&sweep, &options)?;
            super::write_file(&args.output, |out| Ok(out.write_all(&png)?))
        }
        other => bail!(
            "cannot write chart `{}`: the extension says the format, .svg or .png (got {})",
            args.output.display(),
            other.map_or("no extension".to_string(), |e| format!(".{e}"))
        ),
    }
}
