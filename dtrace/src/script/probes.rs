//! Each probe's clauses ([`emit_probe`]), per OS, and the aggregation families they fill.

use super::family::{family_of, Family};
use super::linux::{emit_linux_futex, emit_linux_offcpu};
use super::options::ScriptOptions;
use super::plockstat::emit_plockstat;
use super::shared;
use super::syscall_wait::{emit_syscall_wait, SyscallWait};
use super::waitfor::emit_waitfor;
use crate::catalog::{TargetOs, UMTX_WAIT_OPS};
use lockscope_probes::WaitKind;
use std::fmt::Write as _;

pub(super) fn emit_probe(
    out: &mut String,
    families: &mut Vec<Family>,
    name: &str,
    options: &ScriptOptions,
) {
    let os = options.os;
    match name {
        // The libc entry points are pid$target probes: one process only.
        shared::FUTEX => emit_linux_futex(
            out,
            families,
            options.libc_entry_points && options.target.is_one_process(),
        ),
        shared::OFFCPU if os == TargetOs::Linux => emit_linux_offcpu(out, families),
        shared::WAITFOR => emit_waitfor(out, os, options.ustack_frames),
        "psynch" => {
            let family = Family {
                tag: "psynch",
                probe: "psynch",
                kind: "auto",
                kernel_stack: false,
                timed: true,
            };
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family,
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
            families.push(family_of("psynch", "psynch", "auto", false, true));
        }
        "ulock" => {
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family: family_of("ulock", "ulock", "auto", false, true),
                    functions: &["ulock_wait", "ulock_wait2"],
                    entry_filter: None,
                    object: "arg1",
                    op_at_entry: Some("arg0 & 0xff"),
                    op_at_return: "strjoin(probefunc, strjoin(\"/\", \
                                   lltostr(self->lockscope_ulock_op)))",
                },
            );
            families.push(family_of("ulock", "ulock", "auto", false, true));
        }
        "semwait" => {
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family: family_of("semwait", "semwait", "semaphore", false, true),
                    functions: &["__semwait_signal"],
                    entry_filter: None,
                    object: "arg0",
                    op_at_entry: None,
                    op_at_return: "probefunc",
                },
            );
            families.push(family_of("semwait", "semwait", "semaphore", false, true));
        }
        "umtx" => {
            let ops: Vec<String> = UMTX_WAIT_OPS
                .iter()
                .map(|op| format!("arg1 == {op}"))
                .collect();
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family: family_of("umtx", "umtx", "auto", false, true),
                    functions: &["_umtx_op"],
                    entry_filter: Some(ops.join(" || ")),
                    object: "arg0",
                    op_at_entry: Some("arg1"),
                    op_at_return: "lltostr(self->lockscope_umtx_op)",
                },
            );
            families.push(family_of("umtx", "umtx", "auto", false, true));
        }
        "lwp-park" => {
            // lwp_park(which, ...): subcode 0 parks; 1 and 2 unpark and never block.
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family: family_of("lwp_park", "lwp-park", "auto", false, true),
                    functions: &["lwp_park"],
                    entry_filter: Some("arg0 == 0".into()),
                    object: "0",
                    op_at_entry: None,
                    op_at_return: "probefunc",
                },
            );
            families.push(family_of("lwp_park", "lwp-park", "auto", false, true));
        }
        "lwp-mutex" => {
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family: family_of("lwp_mutex", "lwp-mutex", "mutex", false, true),
                    functions: &["lwp_mutex_timedlock"],
                    entry_filter: None,
                    object: "arg0",
                    op_at_entry: None,
                    op_at_return: "probefunc",
                },
            );
            families.push(family_of("lwp_mutex", "lwp-mutex", "mutex", false, true));
        }
        "plockstat" => emit_plockstat(out, families, os),
        shared::MUTEX_HOLD => {
            let family = family_of(
                "mutex_hold",
                shared::MUTEX_HOLD,
                WaitKind::Hold.name(),
                false,
                true,
            );
            // arg1 of mutex-acquire is non-zero for a recursive acquisition: time only the
            // outermost one, keyed by lock so nested locks do not clobber each other.
            let _ = writeln!(
                out,
                "plockstat$target:::mutex-acquire\n/arg1 == 0/\n{{\n\tself->lockscope_hold_ts[arg0] \
                 = timestamp;\n}}\n"
            );
            let _ = writeln!(
                out,
                "plockstat$target:::mutex-release\n/arg1 == 0 && self->lockscope_hold_ts[arg0]/\n{{"
            );
            let _ = writeln!(
                out,
                "\tthis->ns = timestamp - self->lockscope_hold_ts[arg0];"
            );
            family.aggregate(out, "\"hold\"", "arg0", "this->ns");
            let _ = writeln!(out, "\tself->lockscope_hold_ts[arg0] = 0;\n}}\n");
            families.push(family);
        }
        shared::KLOCK => {
            let block = family_of("lockstat_block", shared::KLOCK, "kernel-lock", true, true);
            let block_probes: &[&str] = match os {
                TargetOs::FreeBsd => &[
                    "lockstat:::adaptive-block",
                    "lockstat:::rw-block",
                    "lockstat:::sx-block",
                ],
                _ => &["lockstat:::adaptive-block", "lockstat:::rw-block"],
            };
            // arg0 is the lock, arg1 the time blocked in nanoseconds.
            let _ = writeln!(out, "{}\n/pid == $target/\n{{", block_probes.join(",\n"));
            block.aggregate(out, "probename", "arg0", "arg1");
            let _ = writeln!(out, "}}\n");
            // Spin probes report a spin measure whose unit differs between kernels: count only.
            let spin = family_of("lockstat_spin", shared::KLOCK, "kernel-lock", true, false);
            let _ = writeln!(out, "lockstat:::adaptive-spin\n/pid == $target/\n{{");
            spin.aggregate(out, "probename", "arg0", "0");
            let _ = writeln!(out, "}}\n");
            families.push(block);
            families.push(spin);
        }
        shared::OFFCPU => {
            let family = family_of("offcpu", shared::OFFCPU, "off-cpu", true, true);
            // off-cpu fires in the context of the thread leaving the CPU (its args describe the
            // NEXT thread, so they are never read): key by the current thread. on-cpu fires in
            // the context of the thread coming back.
            let _ = writeln!(out, "sched:::off-cpu\n/pid == $target/\n{{");
            let _ = writeln!(out, "\tself->lockscope_offcpu_ts = timestamp;");
            let op = if os == TargetOs::FreeBsd {
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
            if os == TargetOs::FreeBsd {
                let _ = writeln!(out, "\tself->lockscope_offcpu_why = 0;");
            }
            let _ = writeln!(out, "}}\n");
            families.push(family);
        }
        shared::LIFECYCLE => {
            let family = family_of("lifecycle", shared::LIFECYCLE, "lifecycle", false, false);
            let probes: &[&str] = match os {
                // FreeBSD's proc provider has no lwp-create.
                TargetOs::FreeBsd => &["proc:::create", "proc:::exec-success", "proc:::exit"],
                // lwp-exit fires on Linux; proc:::start and lwp-start abort DTrace for Linux.
                TargetOs::Linux => &[
                    "proc:::create",
                    "proc:::exec-success",
                    "proc:::exit",
                    "proc:::lwp-create",
                    "proc:::lwp-exit",
                ],
                _ => &[
                    "proc:::create",
                    "proc:::exec-success",
                    "proc:::exit",
                    "proc:::lwp-create",
                ],
            };
            let _ = writeln!(out, "{}\n/pid == $target/\n{{", probes.join(",\n"));
            family.aggregate(out, "probename", "0", "0");
            let _ = writeln!(out, "}}\n");
            families.push(family);
        }
        shared::CPU => {
            // A sample of a target thread on CPU: its CPU time is the sampling period. stack()
            // is empty for a sample taken in user mode.
            let family = family_of("cpu", shared::CPU, "on-cpu", true, true);
            let _ = writeln!(
                out,
                "{}\n/pid == $target/\n{{",
                crate::catalog::PROFILE_PROBE
            );
            family.aggregate(
                out,
                "\"profile-997\"",
                "0",
                &crate::catalog::PROFILE_PERIOD_NS.to_string(),
            );
            let _ = writeln!(out, "}}\n");
            families.push(family);
        }
        shared::SYSCALL => {
            let family = family_of("syscall", shared::SYSCALL, "syscall", false, true);
            let _ = writeln!(
                out,
                "syscall:::entry\n/pid == $target/\n{{\n\tself->lockscope_syscall_ts = \
                 timestamp;\n}}\n"
            );
            let _ = writeln!(out, "syscall:::return\n/self->lockscope_syscall_ts/\n{{");
            let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_syscall_ts;");
            family.aggregate(out, "probefunc", "0", "this->ns");
            let _ = writeln!(out, "\tself->lockscope_syscall_ts = 0;\n}}\n");
            families.push(family);
        }
        // selected_probes() only returns catalog names; every one has an arm above.
        _ => {}
    }
}
