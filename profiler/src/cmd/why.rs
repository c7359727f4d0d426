//! `lockscope why`: the causes behind a profile's waits, as text or JSON on standard output;
//! its arguments and their conversion into [`WhyOptions`].

use anyhow::Result;
use clap::Args;
use lockscope::why::{Why, WhyOptions};
use std::path::PathBuf;

/// `lockscope why`.
#[derive(Debug, Args)]
pub struct WhyArgs {
    /// Profile to read (recorded with `--probes bottleneck`; default: `lockscope.lsp`, the one
    /// `record` writes by default).
    #[arg(value_name = "FILE")]
    pub profile: Option<PathBuf>,

    /// Threads to analyse: names as globs (`worker-*`) or thread ids, comma-separated. Default:
    /// the groups that did the work (threads that wait on each other form a group; the groups
    /// with at least a tenth of the busiest group's CPU time).
    #[arg(long, value_name = "PATTERN")]
    pub threads: Option<String>,

    /// Only the waits whose stack has a frame containing this (a function name).
    #[arg(long, value_name = "FUNCTION")]
    pub site: Option<String>,

    /// How many causes to show, best first (0: all).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub top: usize,

    /// Print JSON instead of text (schema in docs/WHY-JSON.md).
    #[arg(long)]
    pub json: bool,
}

impl WhyArgs {
    /// The analysis' options; an empty `--site` filters nothing. The `--threads` pattern is
    /// parsed by the analysis, which names the profile's threads when it matches none.
    fn to_options(&self) -> WhyOptions {
        let mut options = WhyOptions::default();
        options.threads = self.threads.clone();
        options.site = self.site.clone().filter(|s| !s.is_empty());
        options.top = self.top;
        options.json = self.json;
        options
    }
}

/// Runs `lockscope why`.
pub fn run(args: &WhyArgs) -> Result<()> {
    let options = args.to_options();
    let profile = super::read_or_default(args.profile.as_deref())?;
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
