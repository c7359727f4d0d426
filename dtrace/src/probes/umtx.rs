//! The `umtx` probe, its catalog entry and its D clauses: freeBSD's blocking `_umtx_op` operations,
//! decoded.

use crate::catalog::UMTX_WAIT_OPS;
use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::syscall_wait::{emit_syscall_wait, SyscallWait};
use crate::script::ScriptOptions;
use lockscope_probes::{catalog, CostClass};

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: "umtx",
    description: "every blocking _umtx_op of the target (MUTEX_WAIT, MUTEX_LOCK, CV_WAIT, \
                  RW_RDLOCK, RW_WRLOCK, WAIT_UINT_PRIVATE, SEM2_WAIT, ...), op decoded",
    kinds: catalog::USER_LOCK_KINDS,
    cost: CostClass::PerSyscall,
    hooks: &[(TargetOs::FreeBsd, &["syscall::_umtx_op:entry/return"])],
    default: true,
    macos_needs_launch: false,
    absent: &[],
    clauses,
};

/// Writes the probe's clauses into `out` and the aggregation families they fill into
/// `families`.
fn clauses(out: &mut String, families: &mut Vec<Family>, _options: &ScriptOptions) {
    let ops: Vec<String> = UMTX_WAIT_OPS
        .iter()
        .map(|op| format!("arg1 == {op}"))
        .collect();
    emit_syscall_wait(
        out,
        families,
        SyscallWait {
            family: family_of("umtx", PROBE.name, "auto", false, true),
            functions: &["_umtx_op"],
            entry_filter: Some(ops.join(" || ")),
            object: "arg0",
            op_at_entry: Some("arg1"),
            op_at_return: "lltostr(self->lockscope_umtx_op)",
        },
    );
}
