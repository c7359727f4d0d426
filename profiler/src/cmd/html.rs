//! `lockscope html`: one self-contained page of sweeps, recordings and their comparisons; its
//! arguments and their conversion into [`HtmlOptions`].

use anyhow::Result;
use clap::Args;
use lockscope::html::HtmlOptions;
use std::path::{Path, PathBuf};

/// `lockscope html`.
#[derive(Debug, Args)]
pub struct HtmlArgs {
    /// Runs (`.lsp` profiles) and sweeps (`sweep.json` or its directory) to report on
    /// (default: `lockscope.lsp`, the run `record` writes by default).
    #[arg(value_name = "RUN_OR_SWEEP")]
    pub inputs: Vec<PathBuf>,

    /// HTML file to write.
    #[arg(short, long, value_name = "HTML")]
    pub output: PathBuf,

    /// Page title (default: "lockscope report").
    #[arg(long)]
    pub title: Option<String>,

    /// Top wait sites shown per run, with their histograms.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub top: usize,

    /// Show stacks as recorded: every frame, the language runtime's too, with full names
    /// (generic parameters and all) and lines as long as they are. Default: the program's
    /// frames, the runtime's folded into one marked line, generics elided, within 100 columns
    /// (docs/FRAMES.md).
    #[arg(long)]
    pub full_stacks: bool,
}

impl HtmlArgs {
    /// The page's options; a title not given keeps the library's default.
    fn to_options(&self) -> HtmlOptions {
        let mut options = HtmlOptions::default();
        if let Some(title) = &self.title {
            options.title = title.clone();
        }
        options.top = self.top;
        options.stack_style = if self.full_stacks {
            lockscope::render::frames::StackStyle::Full
        } else {
            lockscope::render::frames::StackStyle::Readable
        };
        options
    }
}

/// An input of `lockscope html`: a sweep (directory or `.json`) or a profile.
fn html_input(path: &Path) -> Result<lockscope::html::Input> {
    let is_sweep = path.is_dir() || path.extension().is_some_and(|e| e == "json");
    if is_sweep {
        let (sweep, dir) = lockscope::sweep::read_sweep(path)?;
        Ok(lockscope::html::Input::Sweep {
            path: path.to_path_buf(),
            dir,
            sweep: Box::new(sweep),
        })
    } else {
        let profile = super::read(path)?;
        Ok(lockscope::html::Input::Run {
            path: path.to_path_buf(),
            profile: Box::new(profile),
        })
    }
}

/// Runs `lockscope html`.
pub fn run(args: &HtmlArgs) -> Result<()> {
    let options = args.to_options();
    let inputs = if args.inputs.is_empty() {
        let profile = super::read_or_default(None)?;
        vec![lockscope::html::Input::Run {
            path: PathBuf::from(super::record::DEFAULT_PROFILE),
            profile: Box::new(profile),
        }]
    } else {
        args.inputs
            .iter()
            .map(|p| html_input(p))
            .collect::<Result<Vec<_>>>()?
    };
    let page = lockscope::html::render_html(&inputs, &options)?;
    super::write_file(&args.output, |out| Ok(out.write_all(page.as_bytes())?))?;
    eprintln!(
        "lockscope: wrote `{}` ({} KiB)",
        args.output.display(),
        page.len() / 1024
    );
    Ok(())
}
