//! `lockscope why`: the causes behind a profile's waits, or (two profiles) the changes in causes
//! between them, as text or JSON on standard output; its arguments and their conversion into
//! [`WhyOptions`] and [`WhyDiffOptions`].

use anyhow::{bail, Result};
use clap::Args;
use lockscope::report::Classified;
use lockscope::why::{Basis, Why, WhyDiff, WhyDiffOptions, WhyOptions};
use std::path::PathBuf;

/// `lockscope why`.
#[derive(Debug, Args)]
pub struct WhyArgs {
    /// Profile to read (recorded with `--probes bottleneck`; default: `lockscope.lsp`, the one
    /// `record` writes by default).
    #[arg(value_name = "FILE")]
    pub profile: Option<PathBuf>,

    /// A second profile of the same program (another kernel, concurrency level or build): the
    /// changes in causes from FILE (the base) to this one, largest first.
    #[arg(value_name = "OTHER")]
    pub other: Option<PathBuf>,

    /// With OTHER: compare per operation, given the number of operations the load did during
    /// each recording (`--per-op 120000,95000`). Default: per second of the analysed threads'
    /// time (shares of it).
    #[arg(
        long,
        value_name = "N_BASE,N_OTHER",
        value_delimiter = ',',
        requires = "other"
    )]
    pub per_op: Vec<u64>,

    /// With OTHER: compare per second of each recording (the threads in each cause on average).
    #[arg(long, conflicts_with = "per_op", requires = "other")]
    pub per_sec: bool,

    /// Threads to analyse: names as globs (`worker-*`) or thread ids, comma-separated. Default:
    /// the groups that did the work (threads that wait on each other form a group; the groups
    /// with at least a tenth of the busiest group's CPU time).
    #[arg(long, value_name = "PATTERN")]
    pub threads: Option<String>,

    /// Only the waits whose stack has a frame containing this (a function name).
    #[arg(long, value_name = "FUNCTION")]
    pub site: Option<String>,

    /// How many causes (with OTHER: changes) to show, best first (0: all).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub top: usize,

    /// Print JSON instead of text (schema in docs/WHY-JSON.md).
    #[arg(long)]
    pub json: bool,

    /// Show stacks as recorded: every frame, the language runtime's too, with full names
    /// (generic parameters and all) and lines as long as they are. Default: the program's
    /// frames, the runtime's folded into one marked line, generics elided, within 100 columns
    /// (docs/FRAMES.md).
    #[arg(long)]
    pub full_stacks: bool,
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

    /// The comparison's options: `--per-op` is two positive counts.
    fn to_diff_options(&self) -> Result<WhyDiffOptions> {
        let mut options = WhyDiffOptions::default();
        options.why = self.to_options();
        options.top = self.top;
        options.basis = match self.per_op.as_slice() {
            [] if self.per_sec => Basis::PerSecond,
            [] => Basis::PerThreadSecond,
            &[ops_base, ops_other] => Basis::PerOperation {
                ops_base,
                ops_other,
            },
            other => bail!(
                "--per-op takes two operation counts, N_BASE,N_OTHER (got {} number{})",
                other.len(),
                if other.len() == 1 { "" } else { "s" }
            ),
        };
        Ok(options)
    }
}

/// Runs `lockscope why`.
pub fn run(args: &WhyArgs) -> Result<()> {
    if let Some(other) = &args.other {
        return compare(args, other);
    }
    let options = args.to_options();
    let profile = super::read_or_default(args.profile.as_deref())?;
    let why = Why::build(&profile, &options)?;
    super::write_stdout("the causes", |out| {
        if options.json {
            // The whole profile's waits by role beside the causes: the totals every view prints.
            #[derive(serde::Serialize)]
            struct WithTotals<'a> {
                #[serde(flatten)]
                why: &'a Why,
                classified: Classified,
            }
            let json = WithTotals {
                why: &why,
                classified: Classified::of(&profile),
            };
            serde_json::to_writer_pretty(&mut *out, &json)?;
            writeln!(out)?;
        } else {
            let style = if args.full_stacks {
                lockscope::render::frames::StackStyle::Full
            } else {
                lockscope::render::frames::StackStyle::Readable
            };
            out.write_all(why.to_text_styled(style).as_bytes())?;
        }
        Ok(())
    })
}

/// Runs `lockscope why BASE OTHER`.
fn compare(args: &WhyArgs, other: &std::path::Path) -> Result<()> {
    let options = args.to_diff_options()?;
    // A second profile comes after a first one on the command line.
    let base = args
        .profile
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("`why` compares two profiles: give BASE before OTHER"))?;
    let base_profile = super::read(base)?;
    let other_profile = super::read(other)?;
    let paths = (base.display().to_string(), other.display().to_string());
    let diff = WhyDiff::build(
        &base_profile,
        &other_profile,
        (&paths.0, &paths.1),
        &options,
    )?;
    // Rendered whole first: a reader that goes away (`| head`) is then an I/O error that
    // `write_stdout` recognizes, not one serde_json wrapped.
    let text = if args.json {
        serde_json::to_string_pretty(&diff)? + "\n"
    } else {
        diff.to_text()
    };
    super::write_stdout("the changes in causes", |out| {
        out.write_all(text.as_bytes())?;
        Ok(())
    })
}
