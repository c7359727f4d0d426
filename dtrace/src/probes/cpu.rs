//! The `cpu` probe, its catalog entry and its D clauses, the on-CPU profile: the target's threads
//! sampled on CPU (`profile-997`).

use crate::catalog::{DtraceProbe, TargetOs};
use crate::catalog::{PROFILE_PERIOD_NS, PROFILE_PROBE};
use crate::script::family::{family_of, Family};
use crate::script::ScriptOptions;
use lockscope_probes::{catalog, CostClass, WaitKind};
use std::fmt::Write as _;

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: catalog::CPU.name,
    description: "on-CPU profile: the target's threads sampled on CPU at 997 Hz \
                  (profile-997), per thread, user and kernel stack; records carry CPU time \
                  (samples x period), not wait time",
    kinds: &[WaitKind::OnCpu],
    cost: CostClass::PerSample,
    hooks: &[
        (TargetOs::MacOs, &[PROFILE_PROBE]),
        (TargetOs::FreeBsd, &[PROFILE_PROBE]),
        (TargetOs::Illumos, &[PROFILE_PROBE]),
        (TargetOs::Linux, &[PROFILE_PROBE]),
    ],
    default: false,
    macos_needs_launch: false,
    absent: &[],
    clauses,
};

/// Writes the probe's clauses into `out` and the aggregation families they fill into
/// `families`.
fn clauses(out: &mut String, families: &mut Vec<Family>, _options: &ScriptOptions) {
    // A sample of a target thread on CPU: its CPU time is the sampling period. stack()
    // is empty for a sample taken in user mode.
    let family = family_of("cpu", PROBE.name, "on-cpu", true, true);
    let _ = writeln!(out, "{PROFILE_PROBE}\n/pid == $target/\n{{");
    family.aggregate(out, "\"profile-997\"", "0", &PROFILE_PERIOD_NS.to_string());
    let _ = writeln!(out, "}}\n");
    families.push(family);
}
