//! The `lifecycle` probe, its catalog entry and its D clauses: process and thread lifecycle of the
//! target (fork, exec, exit, new threads), counted per user stack.

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::ScriptOptions;
use lockscope_probes::{catalog, CostClass, WaitKind};
use std::fmt::Write as _;

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: catalog::LIFECYCLE.name,
    description: "process and thread lifecycle of the target (fork, exec, exit, new \
                  threads), counted per user stack",
    kinds: &[WaitKind::Lifecycle],
    cost: CostClass::OnContention,
    hooks: &[
        (
            TargetOs::MacOs,
            &[
                "proc:::create",
                "proc:::exec-success",
                "proc:::exit",
                "proc:::lwp-create",
            ],
        ),
        (
            TargetOs::FreeBsd,
            &["proc:::create", "proc:::exec-success", "proc:::exit"],
        ),
        (
            TargetOs::Illumos,
            &[
                "proc:::create",
                "proc:::exec-success",
                "proc:::exit",
                "proc:::lwp-create",
            ],
        ),
        (
            TargetOs::Linux,
            &[
                "proc:::create",
                "proc:::exec-success",
                "proc:::exit",
                "proc:::lwp-create",
                "proc:::lwp-exit",
            ],
        ),
    ],
    default: false,
    macos_needs_launch: false,
    absent: &[],
    clauses,
};

/// Writes the probe's clauses into `out` and the aggregation families they fill into
/// `families`.
fn clauses(out: &mut String, families: &mut Vec<Family>, options: &ScriptOptions) {
    let family = family_of("lifecycle", PROBE.name, "lifecycle", false, false);
    let probes: &[&str] = match options.os {
        // FreeBSD's proc provider has no lwp-create.
        TargetOs::FreeBsd => &["proc:::create", "proc:::exec-success", "proc:::exit"],
        // lwp-exit fires on Linux; proc:::start and lwp-start abort DTrace for Linux.
        TargetOs::Linux => &[
            "proc:::create",
            "proc:::exec-success",
            "proc:::exit",
            "proc:::lwp-create",
            "proc:::lwp-exit",
        ],
        _ => &[
            "proc:::create",
            "proc:::exec-success",
            "proc:::exit",
            "proc:::lwp-create",
        ],
    };
    let _ = writeln!(out, "{}\n/pid == $target/\n{{", probes.join(",\n"));
    family.aggregate(out, "probename", "0", "0");
    let _ = writeln!(out, "}}\n");
    families.push(family);
}
