//! The `syscall` probe, its catalog entry and its D clauses: the latency of every system call of
//! the target, per system call and user stack.

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::ScriptOptions;
use lockscope_probes::{catalog, CostClass, WaitKind};
use std::fmt::Write as _;

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: catalog::SYSCALL.name,
    description: "latency of every system call of the target, per syscall and user stack",
    kinds: &[WaitKind::Syscall],
    cost: CostClass::PerSyscall,
    hooks: &[
        (TargetOs::MacOs, &["syscall:::entry/return"]),
        (TargetOs::FreeBsd, &["syscall:::entry/return"]),
        (TargetOs::Illumos, &["syscall:::entry/return"]),
        (TargetOs::Linux, &["syscall:::entry/return"]),
    ],
    default: false,
    macos_needs_launch: false,
    absent: &[],
    clauses,
};

/// Writes the probe's clauses into `out` and the aggregation families they fill into
/// `families`.
fn clauses(out: &mut String, families: &mut Vec<Family>, _options: &ScriptOptions) {
    let family = family_of("syscall", PROBE.name, "syscall", false, true);
    let _ = writeln!(
        out,
        "syscall:::entry\n/pid == $target/\n{{\n\tself->lockscope_syscall_ts = \
         timestamp;\n}}\n"
    );
    let _ = writeln!(out, "syscall:::return\n/self->lockscope_syscall_ts/\n{{");
    let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_syscall_ts;");
    family.aggregate(out, "probefunc", "0", "this->ns");
    let _ = writeln!(out, "\tself->lockscope_syscall_ts = 0;\n}}\n");
    families.push(family);
}
