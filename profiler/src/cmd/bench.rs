//! `lockscope bench`: the pthread/futex micro-benchmark suite, `bench diff` of two results, and
//! `bench --record`, the suite recorded like any command.

use super::record;
use crate::cli::{self, BenchAction, BenchArgs};
use crate::session::{SessionOptions, SessionTarget};
use anyhow::{Context, Result};

/// Runs `lockscope bench` and `lockscope bench diff`.
pub fn run(args: &BenchArgs) -> Result<()> {
    if let Some(BenchAction::Diff { a, b }) = &args.action {
        let a = lockscope::bench::read_json(a)?;
        let b = lockscope::bench::read_json(b)?;
        return super::write_stdout("the comparison", |out| {
            Ok(lockscope::bench::write_diff(&a, &b, out)?)
        });
    }
    let options = args.to_options()?;
    if args.record {
        return run_recorded(args);
    }
    let results = lockscope::bench::run_suite(&options, &mut |line| {
        eprintln!("lockscope: {line}");
    })?;
    super::write_stdout("the results", |out| {
        if args.json {
            lockscope::bench::write_json(&results, out)
        } else {
            Ok(lockscope::bench::write_table(&results, out)?)
        }
    })
}

/// `lockscope bench --record`: the same suite in a child lockscope, recorded like any command
/// (with `record`'s defaults: the default probes, the unwind-table cache).
fn run_recorded(args: &BenchArgs) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the lockscope executable")?;
    let mut argv = vec![exe.into_os_string()];
    argv.extend(args.suite_arguments());
    let mut options = SessionOptions::new(SessionTarget::Command(argv));
    if options.backend == cli::BackendArg::Ebpf {
        options.probes = cli::validate_probes(&[])?;
        options.cache_dir = record::cache_dir(None);
    }
    record::record(options, &args.output)?;
    eprintln!(
        "lockscope: each benchmark ran in threads named after it: `lockscope report {} --by thread` shows where each line's time went",
        args.output.display()
    );
    Ok(())
}
