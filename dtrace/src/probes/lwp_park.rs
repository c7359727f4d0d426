//! The `lwp-park` probe, its catalog entry and its D clauses: illumos's `lwp_park` waits.

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::syscall_wait::{emit_syscall_wait, SyscallWait};
use crate::script::ScriptOptions;
use lockscope_probes::{catalog, CostClass};

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: "lwp-park",
    description: "lwp_park waits (illumos libc's mutexes, condvars and rwlocks park here), \
                  classified by the user stack",
    kinds: catalog::USER_LOCK_KINDS,
    cost: CostClass::OnContention,
    hooks: &[(TargetOs::Illumos, &["syscall::lwp_park:entry/return"])],
    default: true,
    macos_needs_launch: false,
    absent: &[],
    clauses,
};

/// Writes the probe's clauses into `out` and the aggregation families they fill into
/// `families`.
fn clauses(out: &mut String, families: &mut Vec<Family>, _options: &ScriptOptions) {
    // lwp_park(which, ...): subcode 0 parks; 1 and 2 unpark and never block.
    emit_syscall_wait(
        out,
        families,
        SyscallWait {
            family: family_of("lwp_park", PROBE.name, "auto", false, true),
            functions: &["lwp_park"],
            entry_filter: Some("arg0 == 0".into()),
            object: "0",
            op_at_entry: None,
            op_at_return: "probefunc",
        },
    );
}
