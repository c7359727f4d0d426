//! Who each wait waited for (`waitfor`): the probe's catalog entry and its clauses, one `printf`
//! per scheduler event of the target's threads, read back by `crate::bottleneck`.

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::Family;
use crate::script::ScriptOptions;
use lockscope_probes::{catalog, CostClass, WaitKind};
use std::fmt::Write as _;

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: catalog::WAITFOR.name,
    description: "who each wait waited for: every off-CPU interval of the target's threads \
                  (switch-out with its user stack and system call, the wakeup with the \
                  waker thread and its stacks, the switch back in with the thread that gave \
                  the CPU back), streamed as it happens to the bottleneck analysis \
                  (`lockscope why`)",
    kinds: &[WaitKind::OffCpu],
    cost: CostClass::PerContextSwitch,
    hooks: &[
        (
            TargetOs::FreeBsd,
            &[
                "sched:::off-cpu",
                "sched:::wakeup",
                "syscall:::entry/return",
            ],
        ),
        (
            TargetOs::Illumos,
            &[
                "sched:::off-cpu",
                "sched:::wakeup",
                "syscall:::entry/return",
                "proc:::lwp-create",
                "proc:::lwp-exit",
            ],
        ),
        // sched:::wakeup is the sched_wakeup tracepoint here, which the kernel fires on the
        // woken thread's CPU when it queues the wakeup there (an idle CPU): the waker's
        // context is sched_waking's, read raw.
        (
            TargetOs::Linux,
            &[
                "sched:::off-cpu",
                "rawtp:sched::sched_waking",
                "proc:::lwp-create",
                "proc:::lwp-exit",
            ],
        ),
    ],
    default: false,
    macos_needs_launch: false,
    absent: &[],
    clauses,
};

/// Kernel frames taken at a wakeup: the tracing path's own frames (DTrace's trampoline,
/// `bpf_trace_run1`, `try_to_wake_up` on Linux) and enough of the waker's to tell an interrupt
/// handler (a timer, a device) from a thread (`crate::bottleneck::is_interrupt_frame`).
pub const WAKER_KERNEL_FRAMES: u32 = 12;

/// The bottleneck stream (`waitfor`): one `printf` per scheduler event of the target's threads,
/// each a line `=== wf KIND TIMESTAMP ...` that `crate::bottleneck` reads as dtrace prints it
/// (the fields are documented there), with the stacks it needs after it:
///
/// - `out`: a thread of the target leaves its CPU (`sched:::off-cpu`, in its own context): its
///   state (`curlwpsinfo->pr_state`: runnable means preempted), the system call it is in and
///   its user stack;
/// - `in`: a thread of the target gets a CPU. `sched:::on-cpu` never fires on DTrace for Linux,
///   but `sched:::off-cpu` fires on every switch with the next thread as `args[0]`/`args[1]`, so
///   the switch-in is the off-cpu of the thread it replaces (whose tid and name are who held the
///   CPU), on every OS alike;
/// - `wake`: a thread of the target is woken, in the waker's context: the waker's ids and name,
///   its kernel stack ([`WAKER_KERNEL_FRAMES`]: an interrupt handler is no thread) and, for a
///   waker of the target, its user stack (a `ustack()` in a kernel thread aborts the clause);
/// - `new`, `exit`: a thread of the target created (`proc:::lwp-create`) or ending.
///
/// The system call: on Linux the number the kernel saved at entry (`uregs[R_ERR]`, `orig_ax`;
/// -1 outside a call), named by `lockscope_probes::linux_syscalls`; elsewhere the name of the call the
/// thread entered last (`syscall:::entry/return`, a thread-local string).
fn clauses(out: &mut String, _families: &mut Vec<Family>, options: &ScriptOptions) {
    let (os, ustack_frames) = (options.os, options.ustack_frames);
    let _ = writeln!(
        out,
        "dtrace:::BEGIN\n{{\n\tprintf(\"=== wf begin %d\\n\", timestamp);\n}}\n"
    );
    let call = if os == TargetOs::Linux {
        ("%d", "uregs[R_ERR]")
    } else {
        let _ = writeln!(
            out,
            "syscall:::entry\n/pid == $target/\n{{\n\tself->lockscope_wf_call = \
             probefunc;\n\tself->lockscope_wf_in = 1;\n}}\n"
        );
        let _ = writeln!(
            out,
            "syscall:::return\n/self->lockscope_wf_in/\n{{\n\tself->lockscope_wf_in = 0;\n}}\n"
        );
        (
            "%s",
            "self->lockscope_wf_in ? self->lockscope_wf_call : \"-\"",
        )
    };
    let _ = writeln!(
        out,
        "sched:::off-cpu\n/pid == $target/\n{{\n\tprintf(\"=== wf out %d %d %d %d {} %s\\n=== \
         ustack\", timestamp, pid, tid, curlwpsinfo->pr_state, {}, execname);\n\t\
         ustack({ustack_frames});\n}}\n",
        call.0, call.1
    );
    let _ = writeln!(
        out,
        "sched:::off-cpu\n/$target == args[1]->pr_pid/\n{{\n\tprintf(\"=== wf in %d %d %d %d %d \
         %s\\n\", timestamp, args[1]->pr_pid, args[0]->pr_lwpid, pid, tid, execname);\n}}\n"
    );
    let (probe, woken_pid, woken_tid) = if os == TargetOs::Linux {
        (
            "rawtp:sched::sched_waking",
            "((struct task_struct *)arg0)->tgid",
            "((struct task_struct *)arg0)->pid",
        )
    } else {
        ("sched:::wakeup", "args[1]->pr_pid", "args[0]->pr_lwpid")
    };
    for (waker, user) in [("pid == $target", true), ("pid != $target", false)] {
        let _ = write!(
            out,
            "{probe}\n/$target == {woken_pid} && {waker}/\n{{\n\tprintf(\"=== wf wake %d %d %d %d \
             %d %s\\n=== kstack\", timestamp, {woken_pid}, {woken_tid}, pid, tid, execname);\n\t\
             stack({WAKER_KERNEL_FRAMES});\n"
        );
        if user {
            let _ = write!(
                out,
                "\tprintf(\"=== ustack\");\n\tustack({ustack_frames});\n"
            );
        }
        let _ = writeln!(out, "}}\n");
    }
    // FreeBSD's proc provider has no lwp-create: its threads count from the recording's start.
    if os != TargetOs::FreeBsd {
        let _ = writeln!(
            out,
            "proc:::lwp-create\n/pid == $target/\n{{\n\tprintf(\"=== wf new %d %d %d\\n\", \
             timestamp, pid, args[0]->pr_lwpid);\n}}\n"
        );
        let _ = writeln!(
            out,
            "proc:::lwp-exit\n/pid == $target/\n{{\n\tprintf(\"=== wf exit %d %d %d\\n\", \
             timestamp, pid, tid);\n}}\n"
        );
    }
}
