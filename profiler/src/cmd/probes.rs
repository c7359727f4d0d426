//! `lockscope probes`: both backends' probes, and for the eBPF ones whether each loads on this
//! kernel (tried as `record` would load it); with `--names`, the catalog's probe names alone, for
//! shell scripts.

use anyhow::Result;
use clap::Args;
use std::io::Write;

/// Arguments of `lockscope probes`.
#[derive(Debug, Args)]
pub struct ProbesArgs {
    /// Print only the names of the OS-neutral catalog's probes (every one the eBPF backend
    /// records), one per line, in listing order: for shell scripts.
    #[arg(long)]
    pub names: bool,
}

/// Runs `lockscope probes`.
pub fn run(args: &ProbesArgs) -> Result<()> {
    if args.names {
        return super::write_stdout("the probe names", |out| Ok(print_names(out)?));
    }
    super::write_stdout("the probe list", |out| Ok(print_probes(out)?))
}

/// The catalog's probe names, one per line.
fn print_names(out: &mut dyn Write) -> std::io::Result<()> {
    for probe in lockscope_probes::CATALOG {
        writeln!(out, "{}", probe.name)?;
    }
    Ok(())
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
    let mut settings = lockscope_ebpf::ProbeSettings::default();
    crate::session::probe_settings_from_env(&mut settings);
    let support = lockscope_ebpf::probe_support(&settings)
        .into_iter()
        .map(|(name, support)| match support {
            ProbeSupport::Loads => (name, "loads", None),
            ProbeSupport::Fails(why) => (name, "fails", Some(why)),
            ProbeSupport::Absent(why) => (name, "absent", Some(why)),
        })
        .collect();
    let programs = settings.variant().describe().to_owned();
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
        writeln!(out, "  {:<55} hooks: {}", "", probe.ebpf_hooks)?;
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
