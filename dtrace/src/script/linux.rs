//! The clauses of DTrace for Linux's futex waits and off-CPU time.

use super::family::{family_of, Family};
use super::shared;
use super::syscall_wait::{emit_syscall_wait, SyscallWait};
use crate::catalog::{FUTEX_ENTRY_POINTS, FUTEX_WAIT_CMDS};
use std::fmt::Write as _;

/// Linux futex waits: `syscall::futex` entry to return for the blocking commands, the op and
/// (with `entry_points`) the libc entry point the wait runs under in the key as `op/ctx`.
pub(super) fn emit_linux_futex(out: &mut String, families: &mut Vec<Family>, entry_points: bool) {
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
        &SyscallWait {
            family: family_of("futex", shared::FUTEX, "auto", false, true),
            functions: &["futex"],
            entry_filter: Some(cmds.join(" || ")),
            object: "arg0",
            op_at_entry: Some("arg1"),
            op_at_return: &op_at_return,
        },
    );
    families.push(family_of("futex", shared::FUTEX, "auto", false, true));
}

/// Linux off-CPU time. `sched:::on-cpu` never fires on DTrace for Linux, and the switch back
/// in (seen as the off-cpu of the thread it replaces, whose `args[0]` is the next thread) was
/// missed too often to be used (most switches in come from the idle task, and global arrays
/// shared between CPUs lost updates on a real dtrace). So the time is measured in the
/// thread's own context, from its first switch-out inside a system call to that call's return,
/// and aggregated there with the call's name and its user stack (the one it slept with): the
/// off-CPU time of a wait inside a system call, plus the microseconds between the switch back
/// in and the return. Time off the CPU outside system calls (preemption in user code) is not
/// counted.
pub(super) fn emit_linux_offcpu(out: &mut String, families: &mut Vec<Family>) {
    let family = family_of("offcpu", shared::OFFCPU, "off-cpu", false, true);
    let _ = writeln!(
        out,
        "sched:::off-cpu\n/pid == $target && !self->lockscope_offcpu_ts/\n{{\n\t\
         self->lockscope_offcpu_ts = timestamp;\n}}\n"
    );
    let _ = writeln!(out, "syscall:::return\n/self->lockscope_offcpu_ts/\n{{");
    let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_offcpu_ts;");
    family.aggregate(out, "probefunc", "0", "this->ns");
    let _ = writeln!(out, "\tself->lockscope_offcpu_ts = 0;\n}}\n");
    families.push(family);
}
