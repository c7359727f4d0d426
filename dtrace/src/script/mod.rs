//! D script generation: one script per recording, aggregating in the kernel.
//!
//! Every probe family aggregates into up to four aggregations that share one key,
//! `[op, pid, tid, object, execname, ustack()(, stack())]`: `count()`, `sum(ns)`, `max(ns)` and
//! `quantize(ns)`. In `END` one `printa()` per family prints them joined, framed by lines that
//! start with `=== ` which [`crate::parse`] reads (the format is lockscope's, not guessed):
//!
//! ```text
//! === lockscope begin os=macos format=1
//!
//! === lockscope record probe=psynch kind=auto
//! === key op=psynch_mutexwait pid=42 tid=1234 object=0x600000c04010
//! === thread myserver
//! === ustack
//!               libsystem_kernel.dylib`__psynch_mutexwait+0xa
//!               ...
//! === count 12
//! === total_ns 480000
//! === max_ns 90000
//! === histogram
//!            value  ------------- Distribution ------------- count
//!            ...
//! === end
//!
//! === lockscope done
//! ```
//!
//! `kind=auto` means the parser derives the category from `op` (psynch syscall, decoded
//! `_umtx_op`/`ulock_wait` operation, plockstat event) or, for `lwp_park` and compare-and-wait
//! operations that name no purpose, from the user stack.
//!
//! This module writes the script's frame in [`generate_script`]: its options, `BEGIN`, the
//! tick that ends a timed recording, `END` and its `printa()`s. The rest is split by part:
//! `options` ([`ScriptOptions`] and the probes they select), `target` ([`ScriptTarget`] and
//! the rewriting of clauses for it), `family` (the aggregations of one probe family and their
//! `printa()`) and `syscall_wait` (the clauses of a wait timed from a syscall's entry to its
//! return), which the probes' own files (`crate::probes`, one per probe) use to write their
//! clauses.

pub(crate) mod family;
mod options;
pub(crate) mod syscall_wait;
mod target;

pub use crate::probes::WAKER_KERNEL_FRAMES;
pub use options::ScriptOptions;
pub use target::ScriptTarget;

use crate::catalog::{DtraceProbe, TargetOs};
use crate::Error;
use family::Family;
use lockscope_probes::catalog::WAITFOR;
use std::fmt::Write as _;
use std::time::Duration;
use target::retarget;

/// Version of the record framing; printed in the `=== lockscope begin` line.
pub const FORMAT_VERSION: u32 = 1;

fn size_option(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{}m", bytes >> 20)
    } else if bytes.is_multiple_of(1 << 10) {
        format!("{}k", bytes >> 10)
    } else {
        bytes.to_string()
    }
}

fn tick_clause(duration: Duration) -> String {
    let ms = duration.as_millis().max(1);
    if ms.is_multiple_of(1000) {
        format!("profile:::tick-{}s", ms / 1000)
    } else {
        format!("profile:::tick-{ms}ms")
    }
}

/// The probe and the probe set of the bottleneck analysis (`lockscope why`).
const WAIT_FOR_PROBES: &[&str] = &[WAITFOR.name, BOTTLENECK_SET];

/// The smallest principal buffer (`bufsize`, per CPU) of a script with the bottleneck stream.
pub const WAITFOR_BUFSIZE: u64 = 32 << 20;

/// The probe set of `lockscope why`: the OS's defaults and `waitfor`.
pub const BOTTLENECK_SET: &str = lockscope_probes::catalog::BOTTLENECK.name;

/// Writes the D script for one recording.
///
/// Errors: [`Error::NotOffered`] for a probe of the catalog that the DTrace backend records on
/// no OS, [`Error::UnknownProbe`] for a probe that does not exist on `options.os`,
/// [`Error::InvalidOption`] for out-of-range sizes or a zero duration.
pub fn generate_script(options: &ScriptOptions) -> Result<String, Error> {
    options.validate()?;
    let probes = options.selected_probes()?;
    let names: Vec<&str> = probes.iter().map(|p| p.name).collect();
    let streams = names.contains(&WAITFOR.name);
    let mut out = String::new();
    write_preamble(&mut out, options, &names, streams);
    if let ScriptTarget::Pids { pids, tree: false } = &options.target {
        write_traced_set(&mut out, options.os, pids);
    }
    let _ = writeln!(
        out,
        "dtrace:::BEGIN\n{{\n\tprintf(\"=== lockscope begin os={} format={FORMAT_VERSION}\\n\");\n}}\n",
        options.os
    );
    let mut families: Vec<Family> = Vec::new();
    for probe in &probes {
        write_probe(&mut out, &mut families, probe, options)?;
    }
    if let Some(duration) = options.duration {
        let _ = writeln!(out, "{}\n{{\n\texit(0);\n}}\n", tick_clause(duration));
    }
    let _ = writeln!(out, "dtrace:::END\n{{");
    if streams {
        // The stream's end: the analysis' clock stops here, before END's records print.
        let _ = writeln!(out, "\tprintf(\"=== wf end %d\\n\", timestamp);");
    }
    for family in &families {
        family.printa(&mut out);
    }
    let _ = writeln!(out, "\tprintf(\"\\n=== lockscope done\\n\");\n}}");
    Ok(out)
}

/// The script's comment (what it records, for what) and its options.
fn write_preamble(out: &mut String, options: &ScriptOptions, names: &[&str], streams: bool) {
    let os = options.os;
    let list = |pids: &[u32]| {
        pids.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let target = match &options.target {
        ScriptTarget::Pid(pid) => format!("process {pid} (dtrace -p)"),
        ScriptTarget::Command => {
            "a launched command (dtrace -c, or -p once lockscope has started it)".to_string()
        }
        ScriptTarget::Pids { pids, tree: false } => {
            format!("processes {} and the children they fork", list(pids))
        }
        ScriptTarget::Pids { pids, tree: true } => {
            format!("processes {} and their descendants (progenyof)", list(pids))
        }
        ScriptTarget::All => "every process".to_string(),
    };
    let _ = writeln!(
        out,
        "/*\n * Generated by lockscope {} for {os}: probes {}; target {target}.\n * Records \
         are framed by \"=== \" lines that lockscope parses: do not edit the printa formats.\n \
         */",
        env!("CARGO_PKG_VERSION"),
        names.join(", ")
    );
    for (probe, reason) in options.absent_probes() {
        let _ = writeln!(out, "/* absent on {os}: {}: {reason} */", probe.name);
    }
    let _ = writeln!(out, "#pragma D option quiet");
    let _ = writeln!(
        out,
        "#pragma D option ustackframes={}",
        options.ustack_frames
    );
    let _ = writeln!(
        out,
        "#pragma D option stackframes={}",
        options.kernel_stack_frames
    );
    let _ = writeln!(
        out,
        "#pragma D option aggsize={}",
        size_option(options.aggsize)
    );
    let _ = writeln!(
        out,
        "#pragma D option dynvarsize={}",
        size_option(options.dynvarsize)
    );
    // The bottleneck stream prints a few hundred bytes per context switch of the target: each
    // CPU's buffer must hold what comes between two passes of the consumer, and a busy
    // consumer (symbolizing stacks) falls behind now and then.
    let bufsize = if streams {
        options.bufsize.max(WAITFOR_BUFSIZE)
    } else {
        options.bufsize
    };
    let _ = writeln!(out, "#pragma D option bufsize={}", size_option(bufsize));
    let _ = writeln!(out, "#pragma D option strsize=256");
    if os == TargetOs::Linux || streams {
        // DTrace for Linux takes 3-7 s to end after exit() or a signal at the default 1 s
        // switch rate; 10 ms ends it in well under a second. And the bottleneck stream is read
        // every 10 ms on every OS, not once a second (a second of switches per buffer).
        let _ = writeln!(out, "#pragma D option switchrate=10ms");
    }
    let _ = writeln!(out);
}

/// The set of traced pids: the ones given, and each child a traced process forks.
fn write_traced_set(out: &mut String, os: TargetOs, pids: &[u32]) {
    let _ = writeln!(out, "dtrace:::BEGIN\n{{");
    for pid in pids {
        let _ = writeln!(out, "\tlockscope_traced[{pid}] = 1;");
    }
    let child = if os == TargetOs::FreeBsd {
        "args[0]->p_pid"
    } else {
        "args[0]->pr_pid"
    };
    let _ = writeln!(
        out,
        "}}\n\nproc:::create\n/lockscope_traced[pid]/\n{{\n\tlockscope_traced[{child}] = 1;\n}}\n"
    );
}

/// One probe's clauses, rewritten for the script's target; an error for a probe that needs
/// the per-process provider of one process when the target is several.
fn write_probe(
    out: &mut String,
    families: &mut Vec<Family>,
    probe: &DtraceProbe,
    options: &ScriptOptions,
) -> Result<(), Error> {
    let _ = writeln!(out, "/* {}: {} */", probe.name, probe.description);
    let mut clauses = String::new();
    (probe.clauses)(&mut clauses, families, options);
    let clauses = retarget(&clauses, &options.target);
    if !options.target.is_one_process() && clauses.contains("$target") {
        return Err(Error::InvalidOption {
            option: "probes",
            reason: format!(
                "probe `{}` needs the per-process provider of one process ($target), which \
                 D names only for `dtrace -p PID` or `-c CMD`: record one process, or leave \
                 the probe out",
                probe.name
            ),
        });
    }
    out.push_str(&clauses);
    Ok(())
}
