//! `lockscope html`: one self-contained page of sweeps, recordings and their comparisons.

use crate::cli::HtmlArgs;
use anyhow::Result;
use std::path::Path;

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
    let inputs = args
        .inputs
        .iter()
        .map(|p| html_input(p))
        .collect::<Result<Vec<_>>>()?;
    let page = lockscope::html::render_html(&inputs, &options)?;
    super::write_file(&args.output, |out| Ok(out.write_all(page.as_bytes())?))?;
    eprintln!(
        "lockscope: wrote `{}` ({} KiB)",
        args.output.display(),
        page.len() / 1024
    );
    Ok(())
}
