//! The `offcpu` probe, its catalog entry and its D clauses: time the target's threads spend off the
//! CPU: `sched:::off-cpu` to `sched:::on-cpu`, or on Linux, where `on-cpu` never fires, to the
//! return of the system call the thread slept in.

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::ScriptOptions;
use lockscope_probes::{catalog, CostClass, WaitKind};
use std::fmt::Write as _;

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: catalog::OFFCPU.name,
    description: "time the target's threads spend switched off the CPU, with kernel and \
                  user stacks (FreeBSD: keyed by the sleep's wait message; Linux: time off \
                  the CPU inside system calls, per system call and user stack)",
    kinds: &[WaitKind::OffCpu],
    cost: CostClass::PerContextSwitch,
    hooks: &[
        (TargetOs::MacOs, &["sched:::off-cpu", "sched:::on-cpu"]),
        (TargetOs::FreeBsd, &["sched:::off-cpu", "sched:::on-cpu"]),
        (TargetOs::Illumos, &["sched:::off-cpu", "sched:::on-cpu"]),
        // sched:::on-cpu never fires on Linux: the time runs from the thread's first
        // switch-out in a system call to that call's return, in its own context.
        (TargetOs::Linux, &["sched:::off-cpu", "syscall:::return"]),
    ],
    default: false,
    macos_needs_launch: false,
    absent: &[],
    clauses,
};

/// Writes the probe's clauses into `out` and the aggregation families they fill into
/// `families`.
fn clauses(out: &mut String, families: &mut Vec<Family>, options: &ScriptOptions) {
    if options.os == TargetOs::Linux {
        return linux_clauses(out, families);
    }
    let family = family_of("offcpu", PROBE.name, "off-cpu", true, true);
    // off-cpu fires in the context of the thread leaving the CPU (its args describe the
    // NEXT thread, so they are never read): key by the current thread. on-cpu fires in
    // the context of the thread coming back.
    let _ = writeln!(out, "sched:::off-cpu\n/pid == $target/\n{{");
    let _ = writeln!(out, "\tself->lockscope_offcpu_ts = timestamp;");
    let op = if options.os == TargetOs::FreeBsd {
        // FreeBSD's sched provider is its own: no Solaris lwpsinfo semantics, but the
        // thread's wait message says why it sleeps ("umtxn", "select", "nanslp").
        let _ = writeln!(
            out,
            "\tself->lockscope_offcpu_why = curthread->td_wmesg != NULL ? \
             stringof(curthread->td_wmesg) : \"preempted\";"
        );
        "self->lockscope_offcpu_why"
    } else {
        "\"off-cpu\""
    };
    let _ = writeln!(out, "}}\n");
    let _ = writeln!(out, "sched:::on-cpu\n/self->lockscope_offcpu_ts/\n{{");
    let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_offcpu_ts;");
    family.aggregate(out, op, "0", "this->ns");
    let _ = writeln!(out, "\tself->lockscope_offcpu_ts = 0;");
    if options.os == TargetOs::FreeBsd {
        let _ = writeln!(out, "\tself->lockscope_offcpu_why = 0;");
    }
    let _ = writeln!(out, "}}\n");
    families.push(family);
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
fn linux_clauses(out: &mut String, families: &mut Vec<Family>) {
    let family = family_of("offcpu", PROBE.name, "off-cpu", false, true);
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
