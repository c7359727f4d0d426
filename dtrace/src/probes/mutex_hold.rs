//! The `mutex-hold` probe, its catalog entry and its D clauses: mutex hold times (acquire to
//! release) per lock, from the `plockstat` provider.

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::ScriptOptions;
use lockscope_probes::{catalog, CostClass, WaitKind};
use std::fmt::Write as _;

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: catalog::MUTEX_HOLD.name,
    description: "mutex hold times (acquire to release) per lock; records carry hold time, \
                  not wait time (operation `hold`); fires on every lock operation",
    kinds: catalog::MUTEX_HOLD.kinds,
    cost: CostClass::PerSyscall,
    hooks: &[
        (
            TargetOs::MacOs,
            &["plockstat$target:::mutex-acquire/mutex-release"],
        ),
        (
            TargetOs::Illumos,
            &["plockstat$target:::mutex-acquire/mutex-release"],
        ),
    ],
    default: false,
    macos_needs_launch: true,
    absent: &[(
        TargetOs::Linux,
        "DTrace for Linux has no plockstat provider (glibc has no plockstat probes)",
    )],
    clauses,
};

/// Writes the probe's clauses into `out` and the aggregation families they fill into
/// `families`.
fn clauses(out: &mut String, families: &mut Vec<Family>, _options: &ScriptOptions) {
    let family = family_of("mutex_hold", PROBE.name, WaitKind::Hold.name(), false, true);
    // arg1 of mutex-acquire is non-zero for a recursive acquisition: time only the
    // outermost one, keyed by lock so nested locks do not clobber each other.
    let _ = writeln!(
        out,
        "plockstat$target:::mutex-acquire\n/arg1 == 0/\n{{\n\tself->lockscope_hold_ts[arg0] \
         = timestamp;\n}}\n"
    );
    let _ = writeln!(
        out,
        "plockstat$target:::mutex-release\n/arg1 == 0 && self->lockscope_hold_ts[arg0]/\n{{"
    );
    let _ = writeln!(
        out,
        "\tthis->ns = timestamp - self->lockscope_hold_ts[arg0];"
    );
    family.aggregate(out, "\"hold\"", "arg0", "this->ns");
    let _ = writeln!(out, "\tself->lockscope_hold_ts[arg0] = 0;\n}}\n");
    families.push(family);
}
