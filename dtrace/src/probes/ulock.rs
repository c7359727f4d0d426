//! The `ulock` probe, its catalog entry and its D clauses: macOS's ulock waits (os_unfair_lock,
//! compare-and-wait).

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::syscall_wait::{emit_syscall_wait, SyscallWait};
use crate::script::ScriptOptions;
use lockscope_probes::{CostClass, WaitKind};

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: "ulock",
    description: "os_unfair_lock and compare-and-wait waits (ulock_wait, ulock_wait2: Rust \
                  std, Swift, libdispatch), with duration, address and operation",
    kinds: &[WaitKind::Mutex, WaitKind::Condvar, WaitKind::Wait],
    cost: CostClass::OnContention,
    hooks: &[(
        TargetOs::MacOs,
        &[
            "syscall::ulock_wait:entry/return",
            "syscall::ulock_wait2:entry/return",
        ],
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
            family: family_of("ulock", PROBE.name, "auto", false, true),
            functions: &["ulock_wait", "ulock_wait2"],
            entry_filter: None,
            object: "arg1",
            op_at_entry: Some("arg0 & 0xff"),
            op_at_return: "strjoin(probefunc, strjoin(\"/\", lltostr(self->lockscope_ulock_op)))",
        },
    );
}
