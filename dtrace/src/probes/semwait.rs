//! The `semwait` probe, its catalog entry and its D clauses: macOS's `__semwait_signal` waits.

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::syscall_wait::{emit_syscall_wait, SyscallWait};
use crate::script::ScriptOptions;
use lockscope_probes::{CostClass, WaitKind};

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: "semwait",
    description: "__semwait_signal waits (semaphores, and also sleep()/nanosleep())",
    kinds: &[WaitKind::Semaphore],
    cost: CostClass::OnContention,
    hooks: &[(TargetOs::MacOs, &["syscall::__semwait_signal:entry/return"])],
    default: false,
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
            family: family_of("semwait", PROBE.name, "semaphore", false, true),
            functions: &["__semwait_signal"],
            entry_filter: None,
            object: "arg0",
            op_at_entry: None,
            op_at_return: "probefunc",
        },
    );
}
