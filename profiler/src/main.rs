//! The `lockscope` binary: the command line's top and the argument groups several commands share
//! ([`cli`]), one file per subcommand with its own arguments, their checks and what it runs
//! ([`cmd`]), and the recording [`session`] that `record`, `sweep` and `bench --record` share
//! over both backends. The library half of this crate (`lockscope::report`, `diff`,
//! `sweep`, `html`...) turns profiles into something to read; this half talks to the kernel
//! through a backend and turns every failure into one line on stderr and a non-zero exit.

mod cli;
mod cmd;
mod session;
mod top;

use clap::error::ErrorKind;
use clap::Parser;
use cli::Cli;
use std::process::ExitCode;

/// The exit status of a usage error, as clap gives it.
const USAGE_ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(&err),
    };
    match cmd::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lockscope: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// A command line clap refused: help and the version printed as clap prints them (exit 0, or
/// clap's status for the help of a bare `lockscope`), any other error in one line (exit 2).
fn usage_error(err: &clap::Error) -> ExitCode {
    match err.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // Printing help fails only when its reader went away: nothing left to tell.
            let _ = err.print();
            ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(USAGE_ERROR))
        }
        _ => {
            let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
            eprintln!("lockscope: error: {}", cli::usage_error_line(err, &argv));
            ExitCode::from(USAGE_ERROR)
        }
    }
}
