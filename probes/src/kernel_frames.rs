//! The kernel functions lockscope recognizes on a kernel stack, written once for both backends
//! and every analysis: one list per concept, each with the predicate that reads it.
//!
//! - [`is_interrupt_frame`] ([`INTERRUPT_FRAMES`]): code that runs only in interrupt context, so
//!   a wakeup under it was done by an interrupt handler, not by the thread it interrupted (the
//!   eBPF resolver's and the DTrace bottleneck stream's [`crate::bottleneck::WokenBy::Interrupt`]);
//! - [`is_io_schedule_frame`] ([`IO_SCHEDULE`]): the kernel's sleep for block I/O and page
//!   locks (the report's I/O sleeps, [`crate::sched::wait_roles`]);
//! - [`is_io_frame`] ([`IO_WAIT_FRAMES`]): a sleep for a device or a file system, more broadly
//!   (the bottleneck analysis's `io` causes, [`crate::bottleneck::cause_kind`]);
//! - [`is_kernel_lock_sleep_frame`] ([`KERNEL_LOCK_SLEEPS`]): where a thread sleeps on a
//!   sleeping kernel lock (the kind of an `offcpu` sleep, and the sleeps the `klock` probe saw
//!   too, [`crate::overlap`]);
//! - [`is_kernel_lock_internal`] ([`KERNEL_LOCK_INTERNALS`]): the lock implementation and the
//!   scheduler and tracing under it, skipped to name a kernel lock's caller.
//!
//! Every list is matched as prefixes of a function's name: compilers add suffixes
//! (`.constprop.0`, `.isra.0`, `.cold`) and kernels add variants (`_percpu`, `_interruptible`),
//! so a prefix keeps the lists short and stable across kernel versions.

/// Prefixes of the kernel functions that run only in interrupt context (a timer, a device, a
/// softirq, an NMI), on Linux, illumos and FreeBSD. The union of what the eBPF resolver and the
/// DTrace bottleneck stream each had, which differed by seven entries; every one is interrupt
/// context on the kernel it names, and none names a function of another kernel's thread context,
/// so both backends take them all.
pub const INTERRUPT_FRAMES: &[&str] = &[
    // Linux: the x86 IDT entries of system vectors (the local APIC timer, IPIs) and device
    // interrupts (arch/x86/include/asm/idtentry.h) and their bodies.
    "asm_sysvec_",
    "sysvec_",
    "__sysvec_",
    "asm_common_interrupt",
    "common_interrupt",
    // Was DTrace's only: `common_interrupt`'s body (arch/x86/kernel/irq.c), which
    // `common_interrupt` (a prefix, not a suffix) does not match.
    "__common_interrupt",
    // Was eBPF's only: the x86 NMI entry (arch/x86/entry/entry_64.S). Nothing in NMI context
    // runs on the interrupted thread's behalf, whatever it then does.
    "asm_exc_nmi",
    // Linux: high-resolution timers, which end timed sleeps (`hrtimer_wakeup` is the callback of
    // `nanosleep` and of a timed futex wait) from the timer interrupt.
    "hrtimer_wakeup",
    "hrtimer_interrupt",
    "__hrtimer_run_queues",
    // Linux: softirqs, run on the way out of an interrupt or by `ksoftirqd` (kernel/softirq.c).
    "handle_softirqs",
    "__do_softirq",
    "irq_exit",
    // Was DTrace's only: `irq_exit_rcu`'s body, which runs the pending softirqs; `irq_exit`
    // does not match its leading underscores.
    "__irq_exit_rcu",
    // Was DTrace's only: the timer-wheel softirq and its callback runner (kernel/time/timer.c),
    // which end `schedule_timeout` sleeps (`process_timeout`) when the softirq's frames above
    // them were not captured.
    "run_timer_softirq",
    "call_timer_fn",
    // Linux: the generic interrupt layer (kernel/irq/handle.c, chip.c) under a device's handler.
    "handle_irq_event",
    // Was DTrace's only: `__handle_irq_event_percpu`, the loop over a line's handlers, which
    // `handle_irq_event` does not match.
    "__handle_irq_event",
    // Was DTrace's only: the flow handler of edge-triggered lines (MSI, most PCIe devices).
    "handle_edge_irq",
    // illumos: interrupt threads, the callout (timeout) and cyclic (timer) subsystems, and the
    // device interrupt dispatcher.
    "intr_thread",
    "callout_",
    "cyclic_",
    "av_dispatch",
    // FreeBSD: interrupt threads and their handlers, the callout (timeout) softclock, and the
    // sleep queue's timeout, which ends a timed sleep.
    "ithread_loop",
    "intr_event_execute_handlers",
    "softclock",
    "callout_process",
    "sleepq_timeout",
];

/// The prefix of the functions (`io_schedule`, `io_schedule_timeout`) by which Linux sleeps for
/// block I/O and page locks: a task in them is accounted as iowait.
pub const IO_SCHEDULE: &str = "io_schedule";

/// Prefixes of the Linux kernel functions under which a sleep waits for a device or a file
/// system: [`IO_SCHEDULE`], the page-cache and buffer waits that lead there, the block layer,
/// the journals and file systems a server's data lives on, and the page-fault and read paths
/// that read a file.
pub const IO_WAIT_FRAMES: &[&str] = &[
    IO_SCHEDULE,
    "folio_wait",
    "wait_on_page",
    "__lock_page",
    "blk_",
    "jbd2_",
    "ext4_",
    "xfs_",
    "btrfs_",
    "nfs_",
    "submit_bio",
    "bit_wait_io",
    "wait_on_buffer",
    "__wait_on_buffer",
    "filemap_fault",
    "do_read_cache",
];

/// Prefixes of the Linux kernel functions under which a thread sleeps for a sleeping kernel
/// lock, where the lock contention tracepoints of the `klock` probe fire (Linux 5.19 on:
/// mutexes, rwsems, semaphores, rt-mutexes, percpu-rwsems); `__down` covers the semaphore's
/// `__down_interruptible`, `__down_timeout`...
pub const KERNEL_LOCK_SLEEPS: &[&str] = &[
    "rwsem_down_read_slowpath",
    "rwsem_down_write_slowpath",
    "__mutex_lock",
    "__ww_mutex_lock",
    "rt_mutex_slowlock",
    "__rt_mutex_slowlock",
    "rtlock_slowlock",
    "percpu_rwsem_wait",
    "percpu_down_write",
    "__down",
];

/// Prefixes (compared without leading underscores) of the Linux kernel functions that are a
/// kernel lock itself, not its caller: the lock's fast and slow paths, its spinning, the
/// scheduler it sleeps in, and the tracing (BPF, the contention tracepoint) that captured the
/// stack. The first frame outside them is the code that took the lock.
pub const KERNEL_LOCK_INTERNALS: &[&str] = &[
    "__mutex_lock",
    "mutex_lock",
    "__down",
    "down_",
    "rwsem_",
    "osq_lock",
    "mutex_spin_on_owner",
    "queued_",
    "native_queued",
    "pv_queued",
    "pv_wait",
    "lock_acquire",
    "_raw_",
    "do_raw_",
    "rt_mutex",
    "rtlock",
    "percpu_down",
    "percpu_rwsem",
    "schedule",
    "__schedule",
    "preempt_schedule",
    "bpf_",
    "lock_contended",
    "__traceiter",
];

/// True when `frame` runs only in interrupt context ([`INTERRUPT_FRAMES`]). `frame` is a
/// function's name, or a frame as DTrace prints it (``module`symbol+0xoff``).
pub fn is_interrupt_frame(frame: &str) -> bool {
    let symbol = frame.trim();
    let symbol = symbol.split_once('`').map_or(symbol, |(_, s)| s);
    has_prefix(symbol, INTERRUPT_FRAMES)
}

/// True when `name` is the kernel's sleep for block I/O or a page lock ([`IO_SCHEDULE`]).
pub fn is_io_schedule_frame(name: &str) -> bool {
    name.starts_with(IO_SCHEDULE)
}

/// True when a sleep under `name` waits for a device or a file system ([`IO_WAIT_FRAMES`]).
pub fn is_io_frame(name: &str) -> bool {
    has_prefix(name, IO_WAIT_FRAMES)
}

/// True when a sleep under `name` waits for a sleeping kernel lock ([`KERNEL_LOCK_SLEEPS`]).
pub fn is_kernel_lock_sleep_frame(name: &str) -> bool {
    has_prefix(name, KERNEL_LOCK_SLEEPS)
}

/// True when `name` is part of a kernel lock, not its caller ([`KERNEL_LOCK_INTERNALS`]),
/// leading underscores aside (`___mutex_lock` and `mutex_lock_nested` alike).
pub fn is_kernel_lock_internal(name: &str) -> bool {
    let name = name.trim_start_matches('_');
    KERNEL_LOCK_INTERNALS
        .iter()
        .any(|p| name.starts_with(p.trim_start_matches('_')))
}

/// True when `name` starts with one of `prefixes`.
fn has_prefix(name: &str, prefixes: &[&str]) -> bool {
    prefixes.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A predicate, the names it must accept and the names it must reject.
    struct Case {
        name: &'static str,
        predicate: fn(&str) -> bool,
        accepts: &'static [&'static str],
        rejects: &'static [&'static str],
    }

    const CASES: &[Case] = &[
        Case {
            name: "is_interrupt_frame",
            predicate: is_interrupt_frame,
            accepts: &[
                "asm_sysvec_apic_timer_interrupt",
                "sysvec_apic_timer_interrupt",
                "__sysvec_call_function_single",
                "asm_common_interrupt",
                "common_interrupt",
                "hrtimer_wakeup",
                "hrtimer_interrupt",
                "__hrtimer_run_queues",
                "handle_softirqs",
                "__do_softirq",
                "irq_exit_rcu",
                "handle_irq_event",
                "handle_irq_event_percpu",
                // The seven the two backends' lists differed by.
                "__common_interrupt",
                "asm_exc_nmi",
                "__irq_exit_rcu",
                "run_timer_softirq",
                "call_timer_fn",
                "__handle_irq_event_percpu",
                "handle_edge_irq",
                // As DTrace prints them, and other kernels'.
                "vmlinux`hrtimer_wakeup+0x1c",
                "  unix`intr_thread+0x5f",
                "unix`callout_list_expire+0x98",
                "genunix`cyclic_softint+0xdc",
                "unix`av_dispatch_softvect+0x78",
                "kernel`ithread_loop+0x1a6",
                "kernel`intr_event_execute_handlers+0x99",
                "kernel`softclock_call_cc+0x13d",
                "kernel`callout_process+0x1c0",
                "kernel`sleepq_timeout+0x4a",
            ],
            rejects: &[
                "try_to_wake_up",
                "wake_up_q",
                "futex_wake",
                "__schedule",
                "schedule_timeout",
                "do_nanosleep",
                "process_timeout",
                "handle_mm_fault",
                "genunix`cv_signal+0x20",
                "kernel`wakeup_one+0x1c",
                "",
            ],
        },
        Case {
            name: "is_io_schedule_frame",
            predicate: is_io_schedule_frame,
            accepts: &["io_schedule", "io_schedule_timeout"],
            rejects: &[
                "schedule",
                "__schedule",
                "folio_wait_bit_common",
                "blk_mq_submit_bio",
                "rwsem_down_read_slowpath",
            ],
        },
        Case {
            name: "is_io_frame",
            predicate: is_io_frame,
            accepts: &[
                "io_schedule",
                "io_schedule_timeout",
                "folio_wait_bit_common",
                "wait_on_page_bit_common",
                "__lock_page_killable",
                "blk_mq_get_tag",
                "jbd2_log_wait_commit",
                "ext4_sync_file",
                "xfs_file_fsync",
                "btrfs_sync_file",
                "nfs_file_fsync",
                "submit_bio_wait",
                "bit_wait_io",
                "wait_on_buffer",
                "__wait_on_buffer",
                "filemap_fault",
                "do_read_cache_folio",
            ],
            rejects: &[
                "schedule",
                "do_nanosleep",
                "futex_wait_queue",
                "ep_poll",
                "rwsem_down_write_slowpath",
                "hrtimer_wakeup",
            ],
        },
        Case {
            name: "is_kernel_lock_sleep_frame",
            predicate: is_kernel_lock_sleep_frame,
            accepts: &[
                "rwsem_down_read_slowpath",
                "rwsem_down_write_slowpath.constprop.0",
                "__mutex_lock.constprop.0",
                "__mutex_lock_slowpath",
                "__ww_mutex_lock",
                "rt_mutex_slowlock",
                "__rt_mutex_slowlock_locked",
                "rtlock_slowlock_locked",
                "percpu_rwsem_wait",
                "percpu_down_write",
                "__down",
                "__down_interruptible",
                "__down_timeout",
            ],
            rejects: &[
                "mutex_lock",
                "down_read",
                "down_write",
                "rwsem_wake",
                "osq_lock",
                "queued_spin_lock_slowpath",
                "__schedule",
                "io_schedule",
                "futex_wait",
            ],
        },
        Case {
            name: "is_kernel_lock_internal",
            predicate: is_kernel_lock_internal,
            accepts: &[
                "__mutex_lock.constprop.0",
                "mutex_lock",
                "mutex_lock_nested",
                "__down_interruptible",
                "down_read",
                "down_write_killable",
                "rwsem_down_write_slowpath",
                "osq_lock",
                "mutex_spin_on_owner",
                "queued_spin_lock_slowpath",
                "native_queued_spin_lock_slowpath",
                "pv_queued_spin_lock_slowpath",
                "pv_wait",
                "lock_acquire",
                "_raw_spin_lock",
                "do_raw_spin_lock",
                "rt_mutex_slowlock",
                "rtlock_slowlock_locked",
                "percpu_down_write",
                "percpu_rwsem_wait",
                "schedule",
                "__schedule",
                "schedule_preempt_disabled",
                "preempt_schedule_irq",
                "bpf_trace_run2",
                "lock_contended",
                "__traceiter_contention_begin",
            ],
            rejects: &[
                "ext4_buffered_write_iter",
                "do_mmap",
                "vfs_write",
                "mmap_read_lock",
                "try_to_wake_up",
                "handle_mm_fault",
            ],
        },
    ];

    /// Every predicate accepts the names of its table and rejects the others, so a list that
    /// loses or gains an entry fails here.
    #[test]
    fn predicates_accept_and_reject_their_tables() {
        for case in CASES {
            for name in case.accepts {
                assert!((case.predicate)(name), "{} rejects {name:?}", case.name);
            }
            for name in case.rejects {
                assert!(!(case.predicate)(name), "{} accepts {name:?}", case.name);
            }
        }
    }

    /// Every entry of every list is accepted by its predicate as a name of its own, so no entry
    /// is dead (shadowed by the DTrace form's parsing or the underscore trimming).
    #[test]
    fn every_entry_is_accepted() {
        type List = (&'static [&'static str], fn(&str) -> bool);
        let lists: [List; 4] = [
            (INTERRUPT_FRAMES, is_interrupt_frame),
            (IO_WAIT_FRAMES, is_io_frame),
            (KERNEL_LOCK_SLEEPS, is_kernel_lock_sleep_frame),
            (KERNEL_LOCK_INTERNALS, is_kernel_lock_internal),
        ];
        for (list, predicate) in lists {
            for entry in list {
                assert!(predicate(entry), "{entry:?} is not accepted");
            }
        }
        assert!(is_io_schedule_frame(IO_SCHEDULE));
    }

    /// The lists hold what they held when they were gathered here: their lengths, so an entry
    /// added or dropped is a decision this test makes visible.
    #[test]
    fn list_lengths_are_pinned() {
        assert_eq!(INTERRUPT_FRAMES.len(), 28);
        assert_eq!(IO_WAIT_FRAMES.len(), 16);
        assert_eq!(KERNEL_LOCK_SLEEPS.len(), 10);
        assert_eq!(KERNEL_LOCK_INTERNALS.len(), 24);
    }

    /// A sleep in `io_schedule` is an I/O sleep to both I/O predicates, so the report's I/O
    /// sleeps are among the bottleneck analysis's `io` causes.
    #[test]
    fn io_schedule_is_an_io_frame() {
        for name in ["io_schedule", "io_schedule_timeout"] {
            assert!(is_io_schedule_frame(name) && is_io_frame(name), "{name}");
        }
    }
}
