//! `lockscope chart`: a sweep's scaling chart, SVG or PNG by the output's extension; its
//! arguments and their conversion into [`ChartOptions`].

use anyhow::{bail, Result};
use clap::Args;
use lockscope::sweep::chart::ChartOptions;
use std::path::PathBuf;

/// `lockscope chart`.
#[derive(Debug, Args)]
pub struct ChartArgs {
    /// Sweep file (`sweep.json`) or sweep directory.
    #[arg(value_name = "SWEEP")]
    pub sweep: PathBuf,

    /// Chart to write: `.svg`, or `.png` (rendered at twice the SVG's size).
    #[arg(short, long, value_name = "SVG|PNG")]
    pub output: PathBuf,

    /// Title (default: "Throughput and waits vs concurrency").
    #[arg(long)]
    pub title: Option<String>,
}

impl ChartArgs {
    /// The chart's options (the format is the output's extension, checked when writing).
    fn to_options(&self) -> ChartOptions {
        let mut options = ChartOptions::default();
        options.title = self.title.clone();
        options
    }
}

/// Runs `lockscope chart`.
pub fn run(args: &ChartArgs) -> Result<()> {
    let (sweep, _) = lockscope::sweep::read_sweep(&args.sweep)?;
    let options = args.to_options();
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
