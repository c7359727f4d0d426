//! The `lwp-mutex` probe, its catalog entry and its D clauses: illumos's kernel-arbitrated mutex
//! waits (`lwp_mutex_timedlock`).

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::syscall_wait::{emit_syscall_wait, SyscallWait};
use crate::script::ScriptOptions;
use lockscope_probes::{CostClass, WaitKind};

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: "lwp-mutex",
    description: "lwp_mutex_timedlock: kernel-arbitrated (process-shared, priority \
                  inheritance) mutex waits",
    kinds: &[WaitKind::Mutex],
    cost: CostClass::OnContention,
    hooks: &[(
        TargetOs::Illumos,
        &["syscall::lwp_mutex_timedlock:entry/return"],
    )],
    default: true,
    macos_needs_launch: false,
    absent: &[],
    clauses,
};

/// Writes the probe's clauses into `out` and the aggregation families they fill into
/// `families`.
fn clauses(out: &mut String, families: &mut Vec<Family>, _options: &ScriptOptions) {
    emit_syscall_wait(
        out,
        families,
        SyscallWait {
            family: family_of("lwp_mutex", PROBE.name, "mutex", false, true),
            functions: &["lwp_mutex_timedlock"],
            entry_filter: None,
            object: "arg0",
            op_at_entry: None,
            op_at_return: "probefunc",
        },
    );
}
