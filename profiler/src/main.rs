//! The `lockscope` binary: the command line's top and the argument groups several commands share
//! ([`cli`]), one file per subcommand with its own arguments, their checks and what it runs
//! ([`cmd`]), and the recording [`session`] that `record`, `sweep` and `bench --record` share
//! over both backends. The library half of this crate (`lockscope::report`, `diff`,
//! `sweep`, `html`...) turns profiles into something to read; this half talks to the kernel
//! through a backend and turns every failure into one line on stderr and a non-zero exit.

mod cli;
mod cmd;
mod session;

use clap::Parser;
use cli::Cli;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cmd::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lockscope: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
