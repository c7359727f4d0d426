//! The `psynch` probe, its catalog entry and its D clauses: macOS's psynch waits (pthread mutexes,
//! condvars and rwlocks in the kernel).

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::syscall_wait::{emit_syscall_wait, SyscallWait};
use crate::script::ScriptOptions;
use lockscope_probes::{CostClass, WaitKind};

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: "psynch",
    description: "pthread mutex, condvar and rwlock waits in the kernel (psynch syscalls \
                  under libsystem_pthread), with duration, lock address and user stack",
    kinds: &[
        WaitKind::Mutex,
        WaitKind::Condvar,
        WaitKind::RwlockRead,
        WaitKind::RwlockWrite,
    ],
    cost: CostClass::OnContention,
    hooks: &[(
        TargetOs::MacOs,
        &[
            "syscall::psynch_mutexwait:entry/return",
            "syscall::psynch_cvwait:entry/return",
            "syscall::psynch_rw_rdlock:entry/return",
            "syscall::psynch_rw_wrlock:entry/return",
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
            family: family_of("psynch", PROBE.name, "auto", false, true),
            functions: &[
                "psynch_mutexwait",
                "psynch_cvwait",
                "psynch_rw_rdlock",
                "psynch_rw_wrlock",
            ],
            entry_filter: None,
            object: "arg0",
            op_at_entry: None,
            op_at_return: "probefunc",
        },
    );
}
