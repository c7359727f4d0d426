//! The `klock` probe, its catalog entry and its D clauses: kernel lock contention while running for
//! the target, from the `lockstat` provider.

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::ScriptOptions;
use lockscope_probes::{catalog, CostClass, WaitKind};
use std::fmt::Write as _;

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: catalog::KLOCK.name,
    description: "contention on kernel locks while running for the target (adaptive \
                  mutexes, rwlocks, sx locks), with kernel and user stacks",
    kinds: &[WaitKind::KernelLock],
    cost: CostClass::OnContention,
    hooks: &[
        (
            TargetOs::FreeBsd,
            &[
                "lockstat:::adaptive-block",
                "lockstat:::adaptive-spin",
                "lockstat:::rw-block",
                "lockstat:::sx-block",
            ],
        ),
        (
            TargetOs::Illumos,
            &[
                "lockstat:::adaptive-block",
                "lockstat:::adaptive-spin",
                "lockstat:::rw-block",
            ],
        ),
    ],
    default: false,
    macos_needs_launch: false,
    absent: &[(
        TargetOs::Linux,
        "DTrace for Linux accepts the lockstat probes but they never fire: they need the fbt \
         provider (kprobes), which this kernel does not offer",
    )],
    clauses,
};

/// Writes the probe's clauses into `out` and the aggregation families they fill into
/// `families`.
fn clauses(out: &mut String, families: &mut Vec<Family>, options: &ScriptOptions) {
    let block = family_of("lockstat_block", PROBE.name, "kernel-lock", true, true);
    let block_probes: &[&str] = match options.os {
        TargetOs::FreeBsd => &[
            "lockstat:::adaptive-block",
            "lockstat:::rw-block",
            "lockstat:::sx-block",
        ],
        _ => &["lockstat:::adaptive-block", "lockstat:::rw-block"],
    };
    // arg0 is the lock, arg1 the time blocked in nanoseconds.
    let _ = writeln!(out, "{}\n/pid == $target/\n{{", block_probes.join(",\n"));
    block.aggregate(out, "probename", "arg0", "arg1");
    let _ = writeln!(out, "}}\n");
    // Spin probes report a spin measure whose unit differs between kernels: count only.
    let spin = family_of("lockstat_spin", PROBE.name, "kernel-lock", true, false);
    let _ = writeln!(out, "lockstat:::adaptive-spin\n/pid == $target/\n{{");
    spin.aggregate(out, "probename", "arg0", "0");
    let _ = writeln!(out, "}}\n");
    families.push(block);
    families.push(spin);
}
