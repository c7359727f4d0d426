//! `lockscope report`: the text (or JSON) report of one profile on standard output; its
//! arguments and their conversion into [`ReportOptions`].

use anyhow::Result;
use clap::{Args, ValueEnum};
use lockscope::report::{GroupBy, ReportOptions};
use std::path::PathBuf;

/// Grouping of `lockscope report`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum GroupByArg {
    /// One row per user stack and wait kind.
    Stack,
    /// One row per thread.
    Thread,
    /// One row per lock (waited-on address and operation).
    Lock,
    /// One row per process (with its command line).
    Process,
}

/// `lockscope report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Profile to read (default: `lockscope.lsp`, the one `record` writes by default).
    #[arg(value_name = "FILE")]
    pub profile: Option<PathBuf>,

    /// How to group the waits.
    #[arg(long, value_enum, default_value = "stack")]
    pub by: GroupByArg,

    /// How many groups to show, largest total wait first (0: all).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,

    /// Print JSON instead of text (schema in docs/REPORT-JSON.md).
    #[arg(long)]
    pub json: bool,

    /// Also print kernel stacks.
    #[arg(long)]
    pub kernel_stacks: bool,

    /// Only this probe's records (`--probe cpu`: the on-CPU samples alone, ranked by CPU time,
    /// in a recording of waits and samples). Default: all probes.
    #[arg(long, value_name = "PROBE")]
    pub probe: Option<String>,

    /// Show stacks as recorded: every frame, the language runtime's too, with full names
    /// (generic parameters and all) and lines as long as they are. Default: the program's
    /// frames, the runtime's folded into one marked line, generics elided, within 100 columns
    /// (docs/FRAMES.md).
    #[arg(long)]
    pub full_stacks: bool,
}

impl ReportArgs {
    /// The report's options; whether the profile holds `--probe` is checked once it is read.
    fn to_options(&self) -> ReportOptions {
        let mut options = ReportOptions::default();
        options.group_by = match self.by {
            GroupByArg::Stack => GroupBy::Stack,
            GroupByArg::Thread => GroupBy::Thread,
            GroupByArg::Lock => GroupBy::Lock,
            GroupByArg::Process => GroupBy::Process,
        };
        options.top = self.top;
        options.json = self.json;
        options.show_kernel_stacks = self.kernel_stacks;
        options.probe = self.probe.as_ref().map(|p| p.trim().to_string());
        options.stack_style = if self.full_stacks {
            lockscope::render::frames::StackStyle::Full
        } else {
            lockscope::render::frames::StackStyle::Readable
        };
        options
    }
}

/// Runs `lockscope report`.
pub fn run(args: &ReportArgs) -> Result<()> {
    let options = args.to_options();
    let profile = super::read_or_default(args.profile.as_deref())?;
    // A probe the profile does not have would give an empty report: said instead.
    let mut fold = lockscope::analysis::fold::FoldOptions::default();
    fold.probe = options.probe.clone();
    lockscope::analysis::fold::check_probe(&profile, &fold)?;
    super::write_stdout("the report", |out| {
        Ok(lockscope::report::write_report(&profile, &options, out)?)
    })
}
