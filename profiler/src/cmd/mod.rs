//! The subcommands, one file each: its arguments (clap derive), their checks and conversion into
//! the library's validated options, and what it runs (the argument groups several commands take
//! are in [`crate::cli`]). Then the few things they share: reading a profile, writing an output
//! file whole (or not at all), and writing to standard output, where a reader that went away
//! (`lockscope report x.lsp | head`) is not an error.

pub(crate) mod bench;
pub(crate) mod chart;
pub(crate) mod diff;
pub(crate) mod export;
pub(crate) mod flamegraph;
pub(crate) mod html;
pub(crate) mod import;
pub(crate) mod probes;
pub(crate) mod record;
pub(crate) mod report;
pub(crate) mod sweep;
pub(crate) mod top;
pub(crate) mod why;

use crate::cli::{Cli, Command};
use anyhow::{Context, Result};
use lockscope_probes::Profile;
use std::io::Write;
use std::path::Path;

/// Runs the command `cli` names.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Record(args) => record::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Why(args) => why::run(&args),
        Command::Flamegraph(args) => flamegraph::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Import(args) => import::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Diff(args) => diff::run(&args),
        Command::Sweep(args) => sweep::run(&args),
        Command::Html(args) => html::run(&args),
        Command::Chart(args) => chart::run(&args),
        Command::Probes(args) => probes::run(&args),
        Command::Top(args) => top::run(&args),
    }
}

/// Reads a profile, naming the file in any error.
fn read(path: &Path) -> Result<Profile> {
    lockscope_probes::read_profile(path)
        .with_context(|| format!("failed to read profile `{}`", path.display()))
}

/// Reads the profile at `path`, else the one `record` writes by default
/// ([`record::DEFAULT_PROFILE`]); a missing default says how to make one.
fn read_or_default(path: Option<&Path>) -> Result<Profile> {
    if let Some(path) = path {
        return read(path);
    }
    let path = Path::new(record::DEFAULT_PROFILE);
    if !path.exists() {
        anyhow::bail!(
            "no profile `{}` here: run `lockscope record` first, or give a profile file",
            path.display()
        );
    }
    read(path)
}

/// Writes an output file completely, or removes what was partly written.
fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("failed to write `{}`", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let result = write(&mut out).and_then(|()| out.flush().map_err(Into::into));
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result.with_context(|| format!("failed to write `{}`", path.display()))
}

/// Writes `what` to standard output; a reader that went away is not an error.
fn write_stdout(what: &str, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match write(&mut out).and_then(|()| out.flush().map_err(Into::into)) {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        result => result.with_context(|| format!("failed to write {what}")),
    }
}

/// Whether `err` is, or was caused by, a write to a closed pipe.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Writes to `output` when given, else to standard output (as [`write_stdout`]).
fn write_output(
    output: Option<&Path>,
    what: &str,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    match output {
        Some(path) => write_file(path, write),
        None => write_stdout(what, write),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A closed pipe is told apart from other write failures, also under added context.
    #[test]
    fn broken_pipes() {
        let pipe = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(is_broken_pipe(&pipe));
        assert!(is_broken_pipe(&pipe.context("failed to write the report")));
        let full = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::StorageFull));
        assert!(!is_broken_pipe(&full));
        assert!(!is_broken_pipe(&anyhow::anyhow!("broken pipe")));
    }
}
