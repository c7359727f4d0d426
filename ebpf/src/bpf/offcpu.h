/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Structures and enums shared by offcpu.bpf.c and its Rust loader (src/probes/offcpu.rs).
 */
#ifndef LOCKSCOPE_OFFCPU_H
#define LOCKSCOPE_OFFCPU_H

#include "common.h"

/* Where a thread is, as far as the scheduler tracepoints tell. */
enum offcpu_state {
	/* Running on a CPU. */
	LKS_STATE_ON_CPU = 0,
	/* Switched out in a sleeping state, not woken yet. */
	LKS_STATE_SLEEPING = 1,
	/* Switched out while runnable (preempted): waiting for a CPU. */
	LKS_STATE_PREEMPTED = 2,
	/* Woken (or new), waiting for a CPU. */
	LKS_STATE_RUN_QUEUE = 3,
	/* Exited: accounting ended at its last switch-out. */
	LKS_STATE_DEAD = 4,
};

/* What a thread's time went to, per thread (the wall-time breakdown). A sleep is classed by the
 * system call the thread was in when it switched out. */
enum time_class {
	LKS_TIME_ON_CPU = 0,
	LKS_TIME_RUN_QUEUE = 1,
	/* futex waits (user space splits them into lock / condvar / other by their stacks). */
	LKS_TIME_FUTEX = 2,
	/* poll, select, epoll_wait and friends. */
	LKS_TIME_POLL = 3,
	/* read/write/recv/send/accept/connect/fsync/io_uring... */
	LKS_TIME_IO = 4,
	/* nanosleep, clock_nanosleep, pause, sigsuspend, sigtimedwait. */
	LKS_TIME_SLEEP = 5,
	/* Any other sleep: other system calls, page faults, or not in a system call. */
	LKS_TIME_OTHER = 6,
	LKS_TIME_CLASSES = 7,
};

/* Who ended a sleep, as sched_waking's context tells. */
enum waker_class {
	/* No wakeup seen: the sleep ended at its switch-in without one (a missed or racing
	 * sched_waking), or the interval is no sleep (preempted, a new thread). */
	LKS_WOKEN_UNKNOWN = 0,
	/* A thread of the recorded program, in task context: the sleep waited for that thread. */
	LKS_WOKEN_BY_PROGRAM = 1,
	/* A thread outside the recorded program in task context (a client, a kernel thread). */
	LKS_WOKEN_BY_OUTSIDE = 2,
	/* Interrupt context (hardirq, softirq, NMI): a timer, a device, the network. */
	LKS_WOKEN_BY_INTERRUPT = 3,
	LKS_WAKER_CLASSES = 4,
};

/* Entries of the system call class table (targ_syscall_class, by system call number). */
#define LKS_SYSCALL_CLASS_SLOTS 512

/* Who woke a thread (waker_of, in the waker's context): its class (LKS_WOKEN_UNKNOWN: no
 * wakeup seen) and, for a thread of the program or outside it, its ids and name. */
struct offcpu_waker {
	enum waker_class by;
	__u32 tgid;
	__u32 tid;
	char comm[LKS_COMM_LEN];
};

/* A wakeup that came as a thread left its CPU (offcpu_thread.early_wakeups): its waker (`by`
 * LKS_WOKEN_UNKNOWN: none kept), and the thread's count of switch-ins when it came (the
 * kernel's sched_info.pcount, 0 without CONFIG_SCHED_INFO), which names the stretch on a CPU it
 * came in. */
struct offcpu_early_wakeup {
	struct offcpu_waker waker;
	__u64 switch_ins;
};

/* Per-thread state and time accounting, by thread id. */
struct offcpu_thread {
	__u32 tgid;
	enum offcpu_state state;
	/* Start of the accounting (recording start, or the thread's creation). */
	__u64 first_ns;
	/* Start of the current state; for a dead thread, the end of its accounting. */
	__u64 since_ns;
	/* Start of the current off-CPU interval: its switch-out, or a new thread's creation. */
	__u64 out_ns;
	/* When a sleeping thread was woken (state RUN_QUEUE after SLEEPING). */
	__u64 wakeup_ns;
	/* The kernel's own clocks of the thread at its last switch-out: its time on a CPU
	 * (se.sum_exec_runtime) and waiting for one (sched_info.run_delay, 0 without
	 * CONFIG_SCHED_INFO). When its wakeup and switch-in go unseen, they split the time since. */
	__u64 exec_at_out_ns;
	__u64 run_delay_at_out_ns;
	/* Its count of switch-ins (sched_info.pcount) at its last switch-out: grown at a wakeup of
	 * the thread asleep by our account, it ran since by a switch-in we did not see. */
	__u64 switch_ins_at_out;
	/* Nanoseconds per enum time_class. */
	__u64 time_ns[LKS_TIME_CLASSES];
	/* Nanoseconds asleep (any class) per enum waker_class: who ended the sleeps. */
	__u64 woken_ns[LKS_WAKER_CLASSES];
	/* Context switches: blocking (voluntary) and preemptions (involuntary). */
	__u64 voluntary;
	__u64 involuntary;
	/* The current sleep: system call (-1: none), time class, futex word or fd, stacks. */
	__s32 syscall;
	enum time_class sleep_class;
	__u64 object;
	__s32 user_stack_id;
	__s32 kernel_stack_id;
	/* The thread id the current futex sleep's lock word names as its owner (0: none read). */
	__u32 owner_tid;
	/* 1 when the current sleep is a futex wait's own (FUTEX_WAIT or FUTEX_WAIT_BITSET, in an
	 * interruptible sleep): from a thread's context, only a futex wake command ends it. */
	__u32 in_futex_wait;
	/* Who woke the current sleep (once woken), with the waker's stacks (the `wakeup` probe;
	 * -1 otherwise). */
	struct offcpu_waker waker;
	__s32 waker_user_stack_id;
	__s32 waker_kernel_stack_id;
	/* Intervals streamed so far (`targ_intervals`), lost ones included: a gap in the stream's
	 * numbers tells user space which thread's timeline has a hole. */
	__u32 interval_seq;
	/* What the current off-CPU interval is, as streamed: LKS_STATE_SLEEPING, LKS_STATE_PREEMPTED,
	 * or LKS_STATE_RUN_QUEUE (a new thread, or one first seen runnable). */
	enum offcpu_state interval_state;
	char comm[LKS_COMM_LEN];
	/* The `preempt` probe's sampling (targ_preempted_stack_interval_ns): when this thread's
	 * user stack was last taken at a preemption, and its preemptions since the start that were
	 * not sampled (recorded without a stack, their time kept). */
	__u64 preempted_stack_ns;
	__u64 preempted_unsampled;
	/* The `wakeup` probe's sampling of interrupts' stacks (targ_interrupt_waker_stack_interval_ns):
	 * when this thread's sleep last got the kernel stack of an interrupt that woke it, and its
	 * wakeups from interrupt context since the start that did not (their time kept). */
	__u64 interrupt_waker_stack_ns;
	__u64 interrupt_waker_unsampled;
	/* Wakeups seen while the thread was on its CPU (by our account, or after a switch-in we
	 * did not see): the waker's sched_waking, on another CPU, ran before the switch-out of the
	 * sleep it ends (the scheduler had taken the thread off the run queue and was picking what
	 * runs next). Kept by the stretch on a CPU they came in (its count of switch-ins, even or
	 * odd: the stretch whose sleep is being accounted and the one after it, whose wakeup may
	 * come before that, each have their own); the latest of a stretch wins. The sleep that
	 * begins at the switch-out ending that stretch, if no wakeup is seen during it, is ended
	 * by it as it began (take_early_wakeup). */
	struct offcpu_early_wakeup early_wakeups[2];
};

/* Aggregation key of off-CPU intervals at least `targ_min_block_ns` long. */
struct offcpu_key {
	__u32 tgid;
	__u32 tid;
	/* LKS_STATE_SLEEPING (time asleep), LKS_STATE_PREEMPTED (preempted until back on a CPU) or
	 * LKS_STATE_RUN_QUEUE (woken until back on a CPU). */
	enum offcpu_state state;
	/* System call in progress at switch-out, -1 when none. */
	__s32 syscall;
	/* Always 0: not keyed by the futex word (the futex probe has it); kept for the layout. */
	__u64 object;
	/* Who ended the sleep (for a run-queue interval, the sleep it woke from); unknown for a
	 * preemption. */
	enum waker_class woken_by;
	__u32 pad;
	/* Stacks at a sleep's switch-out; for a run-queue interval (woken until back on a CPU),
	 * those of the sleep it woke from; for a preempted one, with the `preempt` probe, the user
	 * stack it was running (no kernel stack). -1 when not captured: preempted intervals
	 * without `preempt`, a new thread's first run-queue delay, failures. */
	__s32 user_stack_id;
	__s32 kernel_stack_id;
};

/* Aggregation key of wakeups: who woke a sleeping thread, from where. */
struct wakeup_key {
	__u32 tgid;
	__u32 tid;
	__u32 waker_tgid;
	__u32 waker_tid;
	/* The sleeper's stacks at switch-out, and the waker's at the wakeup. */
	__s32 user_stack_id;
	__s32 kernel_stack_id;
	__s32 waker_user_stack_id;
	__s32 waker_kernel_stack_id;
	/* System call the sleeper was in, -1 when none. */
	__s32 syscall;
	__u32 pad;
};

/* One off-CPU interval of a target thread, streamed to user space for the bottleneck analysis
 * (`targ_intervals`, the `waitfor` probe): switched out at start_ns, woken at wakeup_ns (equal to
 * start_ns when it was preempted: runnable all along), back on a CPU at end_ns. Between one
 * interval's end and the thread's next start it was on a CPU. */
struct offcpu_interval {
	/* LKS_EVENT_INTERVAL: the first field of every `bottleneck_events` record. */
	enum lks_event_type type;
	__u32 pad;
	__u64 start_ns;
	__u64 wakeup_ns;
	__u64 end_ns;
	/* Futex word of a futex sleep, else 0. */
	__u64 object;
	__u32 tgid;
	__u32 tid;
	/* The thread's interval number (offcpu_thread.interval_seq). */
	__u32 seq;
	/* LKS_STATE_SLEEPING (a sleep), LKS_STATE_PREEMPTED, or LKS_STATE_RUN_QUEUE (a new thread's
	 * first wait for a CPU: start_ns is its creation). */
	enum offcpu_state state;
	/* System call the sleep was in, -1 when none. */
	__s32 syscall;
	enum waker_class woken_by;
	__u32 waker_tgid;
	__u32 waker_tid;
	/* The sleeper's stacks at switch-out (a preemption's user stack with `preempt`), and the
	 * waker's at the wakeup (with `wakeup`); -1 when not taken. */
	__s32 user_stack_id;
	__s32 kernel_stack_id;
	__s32 waker_user_stack_id;
	__s32 waker_kernel_stack_id;
	/* offcpu_thread.owner_tid at the switch-out. */
	__u32 owner_tid;
	/* The task that had the CPU until this one got it back (the idle task, pid 0, when the CPU
	 * was idle): for a thread waiting for a CPU, who held it. Unknown (holder_comm empty) when
	 * the switch-in went unseen. */
	__u32 holder_tgid;
	__u32 holder_tid;
	char waker_comm[LKS_COMM_LEN];
	char holder_comm[LKS_COMM_LEN];
};

#endif /* LOCKSCOPE_OFFCPU_H */
