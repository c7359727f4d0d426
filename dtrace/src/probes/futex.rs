//! The `futex` probe, its catalog entry and its D clauses: Linux's futex waits (DTrace for Linux):
//! `syscall::futex` from entry to return for the blocking commands, with the op and (for one
//! process) the libc entry point the wait runs under.

use crate::catalog::{DtraceProbe, TargetOs};
use crate::catalog::{FUTEX_ENTRY_POINTS, FUTEX_WAIT_CMDS};
use crate::script::family::{family_of, Family};
use crate::script::syscall_wait::{emit_syscall_wait, SyscallWait};
use crate::script::ScriptOptions;
use lockscope_probes::{catalog, CostClass};
use std::fmt::Write as _;

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: catalog::FUTEX.name,
    description: "every blocking futex() wait of the target (FUTEX_WAIT, WAIT_BITSET, LOCK_PI, \
                  LOCK_PI2, WAIT_REQUEUE_PI) with duration, address, op and user stack; \
                  classified by the user stack and by the libc entry point it runs under \
                  (pid$target probes on pthread_join, rwlock, semaphore and condvar calls)",
    kinds: catalog::USER_LOCK_KINDS,
    cost: CostClass::PerSyscall,
    hooks: &[(
        TargetOs::Linux,
        &[
            "syscall::futex:entry/return",
            "pid$target::pthread_cond_wait:entry/return",
            "pid$target::pthread_cond_timedwait:entry/return",
            "pid$target::pthread_cond_clockwait:entry/return",
            "pid$target::pthread_join:entry/return",
            "pid$target::pthread_timedjoin_np:entry/return",
            "pid$target::pthread_clockjoin_np:entry/return",
            "pid$target::pthread_rwlock_rdlock:entry/return",
            "pid$target::pthread_rwlock_timedrdlock:entry/return",
            "pid$target::pthread_rwlock_clockrdlock:entry/return",
            "pid$target::pthread_rwlock_wrlock:entry/return",
            "pid$target::pthread_rwlock_timedwrlock:entry/return",
            "pid$target::pthread_rwlock_clockwrlock:entry/return",
            "pid$target::sem_wait:entry/return",
            "pid$target::sem_timedwait:entry/return",
            "pid$target::sem_clockwait:entry/return",
            "pid$target::pthread_barrier_wait:entry/return",
        ],
    )],
    default: true,
    macos_needs_launch: false,
    absent: &[],
    clauses,
};

/// Writes the probe's clauses into `out` and the aggregation families they fill into
/// `families`.
fn clauses(out: &mut String, families: &mut Vec<Family>, options: &ScriptOptions) {
    // The libc entry points are pid$target probes: one process only.
    let entry_points = options.libc_entry_points && options.target.is_one_process();
    if entry_points {
        // One clause per entry point: its code is its index plus one (see
        // catalog::FUTEX_ENTRY_POINTS); cleared when the function returns.
        for (i, (function, _)) in FUTEX_ENTRY_POINTS.iter().enumerate() {
            let _ = writeln!(
                out,
                "pid$target::{function}:entry\n{{\n\tself->lockscope_futex_ctx = {};\n}}\n",
                i + 1
            );
        }
        let returns: Vec<String> = FUTEX_ENTRY_POINTS
            .iter()
            .map(|(function, _)| format!("pid$target::{function}:return"))
            .collect();
        let _ = writeln!(
            out,
            "{}\n{{\n\tself->lockscope_futex_ctx = 0;\n}}\n",
            returns.join(",\n")
        );
    }
    let cmds: Vec<String> = FUTEX_WAIT_CMDS
        .iter()
        .map(|cmd| format!("(arg1 & 0x7f) == {cmd}"))
        .collect();
    let ctx = if entry_points {
        "lltostr(self->lockscope_futex_ctx)"
    } else {
        "\"0\""
    };
    let op_at_return = format!("strjoin(lltostr(self->lockscope_futex_op), strjoin(\"/\", {ctx}))");
    emit_syscall_wait(
        out,
        families,
        SyscallWait {
            family: family_of("futex", PROBE.name, "auto", false, true),
            functions: &["futex"],
            entry_filter: Some(cmds.join(" || ")),
            object: "arg0",
            op_at_entry: Some("arg1"),
            op_at_return: &op_at_return,
        },
    );
}
