//! The `lockscope` binary: command line, recording loop and the commands that read profiles.
//!
//! The library half of this crate (`lockscope::report`, `fold`, `flamegraph`, `export`) renders
//! profiles; this half parses the command line ([`cli`]), drives a backend ([`record`]) and
//! turns every failure into one line on stderr and a non-zero exit.

mod cli;
mod record;
mod sweep_cmd;

use anyhow::{Context, Result};
use clap::Parser;
use cli::{Cli, Command, ExportFormatArg};
use lockscope_probes::Profile;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lockscope: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Record(args) => record::run(&args),
        Command::Report(args) => {
            let options = args.to_options()?;
            let profile = read(&args.profile)?;
            let mut out = std::io::stdout().lock();
            lockscope::report::write_report(&profile, &options, &mut out)
                .and_then(|()| out.flush())
                .or_else(ignore_broken_pipe)
                .context("failed to write the report")
        }
        Command::Flamegraph(args) => {
            let profile = read(&args.profile)?;
            let fold = args.fold.to_options(&profile)?;
            let mut options = lockscope::flamegraph::FlamegraphOptions::default();
            options.fold = fold;
            options.title = args.title.clone();
            options.wakeups = args.wakeups;
            write_file(&args.output, |out| {
                lockscope::flamegraph::write_flamegraph(&profile, &options, out)
            })
        }
        Command::Export(args) => {
            let profile = read(&args.profile)?;
            let fold = args.fold.to_options(&profile)?;
            if fold.wall && !matches!(args.format, ExportFormatArg::Folded) {
                anyhow::bail!("--wall needs --format folded");
            }
            if args.wakeups && !matches!(args.format, ExportFormatArg::Folded) {
                anyhow::bail!(
                    "--wakeups needs --format folded (--format json always holds the wakeups)"
                );
            }
            let format = match args.format {
                ExportFormatArg::Folded => lockscope::export::ExportFormat::Folded,
                ExportFormatArg::Json => lockscope::export::ExportFormat::Json,
                ExportFormatArg::Pprof | ExportFormatArg::Speedscope => {
                    return export_ecosystem(&args, &profile, fold);
                }
            };
            let export = |out: &mut dyn Write| {
                if args.wakeups {
                    lockscope::export::write_wakeup_chains(&profile, &fold, out)
                } else {
                    lockscope::export::write_export(&profile, format, &fold, out)
                }
            };
            match &args.output {
                Some(path) => write_file(path, export),
                None => {
                    let mut out = std::io::stdout().lock();
                    export(&mut out)
                        .and_then(|()| out.flush().map_err(Into::into))
                        .or_else(|e| match e.downcast::<std::io::Error>() {
                            Ok(io) => ignore_broken_pipe(io).map_err(Into::into),
                            Err(e) => Err(e),
                        })
                        .context("failed to write the export")
                }
            }
        }
        Command::Import(args) => {
            let bytes = std::fs::read(&args.input)
                .with_context(|| format!("failed to read `{}`", args.input.display()))?;
            let profile = match args.format {
                cli::ImportFormatArg::Dtrace => {
                    let mut profile = lockscope_dtrace::import_capture(
                        &bytes,
                        args.os.map(cli::OsArg::into_target_os),
                    )
                    .with_context(|| format!("failed to import `{}`", args.input.display()))?;
                    lockscope::import::mark_dtrace_samples(&mut profile);
                    profile
                }
                cli::ImportFormatArg::PerfScript | cli::ImportFormatArg::Folded => {
                    import_other(&args, &bytes)?
                }
            };
            lockscope_probes::write_profile(&profile, &args.output)
                .with_context(|| format!("failed to write profile `{}`", args.output.display()))?;
            eprintln!(
                "lockscope: wrote `{}`: {} records, {} stacks",
                args.output.display(),
                profile.waits.len(),
                profile.stacks.len()
            );
            Ok(())
        }
        Command::Bench(args) => bench(&args),
        Command::Diff(args) => diff(&args),
        Command::Sweep(args) => sweep_cmd::run(&args),
        Command::Html(args) => sweep_cmd::html(&args),
        Command::Chart(args) => sweep_cmd::chart(&args),
        Command::Probes => {
            let mut out = std::io::stdout().lock();
            print_probes(&mut out)
                .and_then(|()| out.flush())
                .or_else(ignore_broken_pipe)
                .context("failed to write the probe list")
        }
    }
}

/// `lockscope bench` and `lockscope bench diff`.
fn bench(args: &cli::BenchArgs) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if let Some(cli::BenchAction::Diff { a, b }) = &args.action {
        let a = lockscope::bench::read_json(a)?;
        let b = lockscope::bench::read_json(b)?;
        return lockscope::bench::write_diff(&a, &b, &mut out)
            .and_then(|()| out.flush())
            .or_else(ignore_broken_pipe)
            .context("failed to write the comparison");
    }
    let options = args.to_options()?;
    if args.record {
        drop(out);
        return bench_recorded(args);
    }
    let results = lockscope::bench::run_suite(&options, &mut |line| {
        eprintln!("lockscope: {line}");
    })?;
    if args.json {
        lockscope::bench::write_json(&results, &mut out)?;
    } else {
        lockscope::bench::write_table(&results, &mut out)?;
    }
    out.flush()
        .or_else(ignore_broken_pipe)
        .context("failed to write the results")
}

/// `lockscope bench --record`: the same suite in a child lockscope, recorded like any command.
fn bench_recorded(args: &cli::BenchArgs) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the lockscope executable")?;
    // Parsed like a typed `lockscope record -o FILE -- lockscope bench ...`, so every record
    // option keeps its documented default.
    let mut argv: Vec<std::ffi::OsString> = vec!["lockscope".into(), "record".into(), "-o".into()];
    argv.push(args.output.clone().into_os_string());
    argv.push("--".into());
    argv.push(exe.into_os_string());
    argv.extend(args.suite_arguments());
    let record = match Cli::try_parse_from(argv).context("cannot build the record command")? {
        Cli {
            command: Command::Record(record),
        } => record,
        _ => anyhow::bail!("internal error: `record` did not parse as record"),
    };
    record::run(&record)?;
    eprintln!(
        "lockscope: each benchmark ran in threads named after it: `lockscope report {} --by thread` shows where each line's time went",
        args.output.display()
    );
    Ok(())
}

/// `lockscope diff`: the table (or its JSON) on stdout, the differential flamegraph and folded
/// pairs to files.
fn diff(args: &cli::DiffArgs) -> Result<()> {
    let options = args.to_options()?;
    let a = read(&args.a)?;
    let b = read(&args.b)?;
    if let Some(path) = &args.output {
        write_file(path, |out| {
            lockscope::diff::write_diff_flamegraph(&a, &b, &options, out)
        })?;
    }
    if let Some(path) = &args.folded {
        let lines = lockscope::diff::differential_lines(&a, &b, &options)?;
        write_file(path, |out| {
            for line in &lines {
                writeln!(out, "{line}")?;
            }
            Ok(())
        })?;
    }
    let (pa, pb) = (args.a.display().to_string(), args.b.display().to_string());
    let mut out = std::io::stdout().lock();
    if args.json {
        lockscope::diff::write_diff_json(&a, &b, (&pa, &pb), &options, &mut out)?;
    } else {
        lockscope::diff::write_diff_table(&a, &b, (&pa, &pb), &options, &mut out)?;
    }
    out.flush()
        .or_else(ignore_broken_pipe)
        .context("failed to write the diff")
}

/// `export --format pprof|speedscope`, to the output file or standard output.
fn export_ecosystem(
    args: &cli::ExportArgs,
    profile: &Profile,
    fold: lockscope::fold::FoldOptions,
) -> Result<()> {
    let pprof = matches!(args.format, ExportFormatArg::Pprof);
    if !profile.wakeups.is_empty() {
        // Neither format has a place for who woke whom next to the waits: say so rather than
        // drop them silently.
        eprintln!(
            "lockscope: note: the {} export holds the waits only; this profile's {} wakeup \
             records are in `--format json` and `--format folded --wakeups`",
            if pprof { "pprof" } else { "speedscope" },
            profile.wakeups.len()
        );
    }
    let export = |out: &mut dyn Write| {
        if pprof {
            let mut options = lockscope::pprof::PprofOptions::default();
            options.fold = fold.clone();
            options.concurrency = args.concurrency;
            lockscope::pprof::write_pprof(profile, &options, out)
        } else {
            lockscope::speedscope::write_speedscope(profile, &fold, out)
        }
    };
    match &args.output {
        Some(path) => write_file(path, export),
        None => {
            let mut out = std::io::stdout().lock();
            export(&mut out)
                .and_then(|()| out.flush().map_err(Into::into))
                .context("failed to write the export")
        }
    }
}

/// `import perf-script|folded`.
fn import_other(args: &cli::ImportArgs, bytes: &[u8]) -> Result<Profile> {
    let source = args.input.display().to_string();
    let text = std::str::from_utf8(bytes)
        .with_context(|| format!("failed to import `{source}`: not UTF-8 text"))?;
    let mut options = lockscope::import::ImportOptions::default();
    options.format = match args.format {
        cli::ImportFormatArg::Folded => lockscope::import::ImportFormat::Folded,
        _ => lockscope::import::ImportFormat::PerfScript,
    };
    if let Some(values) = args.values {
        options.folded_values = values.into_values();
    }
    options.event = args.event.clone();
    options.os = args.os.map(|os| os.into_target_os().name().to_string());
    lockscope::import::import(text, &source, &options)
        .with_context(|| format!("failed to import `{source}`"))
}

/// Reads a profile, naming the file in any error.
fn read(path: &Path) -> Result<Profile> {
    lockscope_probes::read_profile(path)
        .with_context(|| format!("failed to read profile `{}`", path.display()))
}

/// Writes an output file completely, or removes what was partly written.
fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("cannot write `{}`", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let result = write(&mut out).and_then(|()| out.flush().map_err(Into::into));
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result.with_context(|| format!("failed to write `{}`", path.display()))
}

/// Per eBPF probe, `(probe, verdict, why)` with the verdict `loads`, `fails` or `absent`; and
/// which programs this kernel takes.
type EbpfSupport = (
    Vec<(&'static str, &'static str, Option<String>)>,
    Option<String>,
);

/// Whether each eBPF probe works on this kernel (empty when that cannot be checked here).
#[cfg(target_os = "linux")]
fn ebpf_probe_support() -> EbpfSupport {
    use lockscope_ebpf::ProbeSupport;
    if lockscope_ebpf::check_environment().is_err() {
        return (Vec::new(), None);
    }
    let support = lockscope_ebpf::probe_support()
        .into_iter()
        .map(|(name, support)| match support {
            ProbeSupport::Loads => (name, "loads", None),
            ProbeSupport::Fails(why) => (name, "fails", Some(why)),
            ProbeSupport::Absent(why) => (name, "absent", Some(why)),
        })
        .collect();
    let programs = lockscope_ebpf::ProgramVariant::current()
        .describe()
        .to_owned();
    (support, Some(programs))
}

#[cfg(not(target_os = "linux"))]
fn ebpf_probe_support() -> EbpfSupport {
    (Vec::new(), None)
}

/// Why the eBPF probes could not be tried here.
fn support_unknown_reason() -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        lockscope_ebpf::check_environment()
            .err()
            .map(|e| format!("not checked: {e}"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        Some("not checked: not Linux".to_string())
    }
}

/// A reader that went away (`lockscope report x | head`) is not an error.
fn ignore_broken_pipe(err: std::io::Error) -> std::io::Result<()> {
    if err.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(err)
    }
}

/// Lists both backends' probes: eBPF (Linux) first, then DTrace with the OSes each exists on.
fn print_probes(out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "eBPF backend (Linux)")?;
    let (support, programs) = ebpf_probe_support();
    if let Some(programs) = programs {
        writeln!(out, "  this kernel takes the {programs}")?;
    }
    writeln!(
        out,
        "  {:<12} {:<20} {:<8} {:<12} DESCRIPTION",
        "PROBE", "COST", "DEFAULT", "THIS KERNEL"
    )?;
    for probe in lockscope_probes::CATALOG {
        let (can, why) = match support.iter().find(|(name, ..)| *name == probe.name) {
            Some((_, verdict, why)) => (*verdict, why.clone()),
            None => ("unknown", support_unknown_reason()),
        };
        writeln!(
            out,
            "  {:<12} {:<20} {:<8} {:<12} {}",
            probe.name,
            probe.cost.name(),
            if probe.default { "yes" } else { "no" },
            can,
            probe.description
        )?;
        writeln!(out, "  {:<55} hooks: {}", "", probe.linux_hooks)?;
        if let Some(why) = why {
            writeln!(out, "  {:<55} why: {why}", "")?;
        }
    }
    writeln!(out, "\nDTrace backend (--backend dtrace --os OS)")?;
    writeln!(
        out,
        "  {:<12} {:<20} {:<8} {:<24} DESCRIPTION",
        "PROBE", "COST", "DEFAULT", "OS"
    )?;
    for probe in lockscope_dtrace::DTRACE_CATALOG {
        let oses: Vec<&str> = lockscope_dtrace::TargetOs::ALL
            .iter()
            .filter(|os| probe.supports(**os))
            .map(|os| os.name())
            .collect();
        writeln!(
            out,
            "  {:<12} {:<20} {:<8} {:<24} {}",
            probe.name,
            probe.cost.name(),
            if probe.default { "yes" } else { "no" },
            oses.join(","),
            probe.description
        )?;
        for (os, reason) in probe.absent {
            writeln!(out, "  {:<66} absent on {os}: {reason}", "")?;
        }
    }
    Ok(())
}
