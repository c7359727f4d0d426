//! `lockscope diff`: two profiles compared site by site; the table (or its JSON) on standard
//! output, the differential flamegraph and folded pairs to files. Its arguments and their
//! conversion into [`DiffOptions`] are here too.

use anyhow::{bail, Result};
use clap::Args;
use lockscope::diff::{DiffOptions, Normalization};
use std::path::PathBuf;

/// `lockscope diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Profile A (before).
    #[arg(value_name = "A")]
    pub a: PathBuf,

    /// Profile B (after).
    #[arg(value_name = "B")]
    pub b: PathBuf,

    /// Differential flamegraph (SVG) to write: widths are B's wait, red grew from A to B, blue
    /// shrank.
    #[arg(short, long, value_name = "SVG")]
    pub output: Option<PathBuf>,

    /// Normalize wait time per second of each recording's wall time (the default).
    #[arg(long, conflicts_with = "per_op")]
    pub per_sec: bool,

    /// Normalize wait time per operation: the number of operations the load did during A and
    /// during B (`--per-op 120000,95000`).
    #[arg(long, value_name = "N_A,N_B", value_delimiter = ',')]
    pub per_op: Vec<u64>,

    /// How many wait sites to show, largest change first (0: all).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,

    /// Title of the flamegraph (default: both target commands).
    #[arg(long)]
    pub title: Option<String>,

    /// Draw widths from A instead of B, so frames that vanished in B show.
    #[arg(long)]
    pub negate: bool,

    /// Also write the paired, normalized folded stacks (`stack A B` per line) to this file.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,

    /// Print the comparison as JSON instead of the table (schema in docs/DIFF.md).
    #[arg(long)]
    pub json: bool,

    /// Show stacks as recorded: every frame, the language runtime's too, with full names
    /// (generic parameters and all) and lines as long as they are. Default: the program's
    /// frames, the runtime's folded into one marked line, generics elided, within 100 columns
    /// (docs/FRAMES.md).
    #[arg(long)]
    pub full_stacks: bool,
}

impl DiffArgs {
    /// Validated diff options: `--per-op` is two positive counts.
    fn to_options(&self) -> Result<DiffOptions> {
        let mut options = DiffOptions::default();
        options.normalization = match self.per_op.as_slice() {
            [] => Normalization::PerSecond,
            &[ops_a, ops_b] => Normalization::PerOperation { ops_a, ops_b },
            other => bail!(
                "--per-op takes two operation counts, N_A,N_B (got {} numbers)",
                other.len()
            ),
        };
        options.normalization.validate()?;
        options.top = self.top;
        options.title = self.title.clone();
        options.negate = self.negate;
        options.stack_style = if self.full_stacks {
            lockscope::render::frames::StackStyle::Full
        } else {
            lockscope::render::frames::StackStyle::Readable
        };
        Ok(options)
    }
}

/// Runs `lockscope diff`.
pub fn run(args: &DiffArgs) -> Result<()> {
    let options = args.to_options()?;
    let a = super::read(&args.a)?;
    let b = super::read(&args.b)?;
    if let Some(path) = &args.output {
        super::write_file(path, |out| {
            Ok(lockscope::diff::write_diff_flamegraph(
                &a, &b, &options, out,
            )?)
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
