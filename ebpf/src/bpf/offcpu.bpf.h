/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Helpers of the `offcpu` probe (offcpu.bpf.c): the kernel facts it reads a switch-out by, whether
 * this CPU is in interrupt context (hooks on handlers, softirqs and hrtimer callbacks: a wakeup
 * from one has no thread as its waker), the owner of the lock a futex sleep waits for, and the
 * kernel stacks of sleeps and wakes whose path is fixed, walked once and reused.
 */
#ifndef LOCKSCOPE_OFFCPU_BPF_H
#define LOCKSCOPE_OFFCPU_BPF_H

#include "probe.bpf.h"
#include "offcpu.h"

/* x86_64 entry code stores -ENOSYS in pt_regs->ax until the system call returns: with orig_ax >= 0
 * that tells a thread inside a system call from one that entered the kernel otherwise (fault,
 * interrupt), whose orig_ax holds an error code or a vector. */
#define ENOSYS 38
/* futex(2)'s number on x86_64. */
#define LKS_NR_FUTEX 202
/* Task state bits: TASK_INTERRUPTIBLE, TASK_UNINTERRUPTIBLE, TASK_DEAD, TASK_WAKEKILL. */
#define LKS_TASK_INTERRUPTIBLE 0x1
#define LKS_TASK_UNINTERRUPTIBLE 0x2
#define LKS_TASK_DEAD 0x80
#define LKS_TASK_WAKEKILL 0x100

/* Interrupt handlers, softirqs and hrtimer callbacks running on each CPU, nested: sched_waking
 * from one of them has an interrupt, not `current`, as its waker. (The CPU's preempt count would
 * tell without hooks, but reading a per-CPU variable takes its address from kallsyms, which
 * kernels without CONFIG_KALLSYMS_ALL do not list. Nor does the stack the program runs on: x86_64
 * runs an interrupt from user mode, and the softirqs at its exit, on the interrupted thread's own
 * stack, so a timer's wakeup read as that thread's.) */
struct interrupt_nesting {
	__u32 depth;
	__u32 pad;
	/* When the outermost one began. */
	__u64 since_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct interrupt_nesting);
} interrupt_depth SEC(".maps");

/* No handler, softirq or hrtimer callback runs this long (softirqs yield to ksoftirqd within 2
 * ms): a nesting older than this lost its exit (the hooks attaching between an entry and its
 * exit) and is forgotten. */
#define LKS_INTERRUPT_MAX_NS 20000000ULL

static __always_inline int enter_interrupt(void)
{
	__u32 zero = 0;
	struct interrupt_nesting *n = bpf_map_lookup_elem(&interrupt_depth, &zero);

	if (!n)
		return 0;
	if (!n->depth)
		n->since_ns = bpf_ktime_get_ns();
	n->depth++;
	return 0;
}

/* An exit whose entry came before the attach finds 0: nothing to undo. */
static __always_inline int exit_interrupt(void)
{
	__u32 zero = 0;
	struct interrupt_nesting *n = bpf_map_lookup_elem(&interrupt_depth, &zero);

	if (n && n->depth)
		n->depth--;
	return 0;
}

/* True inside an interrupt handler, a softirq or an hrtimer callback on this CPU. */
static __always_inline bool in_interrupt_context(__u64 now)
{
	__u32 zero = 0;
	struct interrupt_nesting *n = bpf_map_lookup_elem(&interrupt_depth, &zero);

	if (!n || !n->depth)
		return false;
	if (now - n->since_ns > LKS_INTERRUPT_MAX_NS) {
		n->depth = 0;
		return false;
	}
	return true;
}

/* FUTEX_* commands whose word holds the owner's thread id (PI futexes). */
#define LKS_FUTEX_CMD_MASK 0x7f
#define LKS_FUTEX_WAIT 0
#define LKS_FUTEX_LOCK_PI 6
#define LKS_FUTEX_WAIT_BITSET 9
#define LKS_FUTEX_LOCK_PI2 13
#define LKS_FUTEX_TID_MASK 0x3fffffff
/* Offset of glibc's pthread_mutex_t.__owner from its futex word (__lock) on every 64-bit ABI. */
#define LKS_GLIBC_MUTEX_OWNER_OFFSET 8

/* The owner of the lock a futex sleep at `uaddr` (op `op`) waits for, as the word says: a PI
 * word holds it; for a plain wait, glibc's mutex keeps it beside the word (user space uses that
 * only for waits its stack shows in pthread_mutex_lock). 0 when unread. Reads the current
 * thread's memory: at switch-out the sleeper is current. */
static __always_inline __u32 futex_owner(__u64 uaddr, __u64 op)
{
	__u32 word = 0;

	switch (op & LKS_FUTEX_CMD_MASK) {
	case LKS_FUTEX_LOCK_PI:
	case LKS_FUTEX_LOCK_PI2:
		if (bpf_probe_read_user(&word, sizeof(word), (void *)uaddr))
			return 0;
		return word & LKS_FUTEX_TID_MASK;
	case LKS_FUTEX_WAIT:
	case LKS_FUTEX_WAIT_BITSET:
		if (bpf_probe_read_user(&word, sizeof(word),
					(void *)(uaddr + LKS_GLIBC_MUTEX_OWNER_OFFSET)))
			return 0;
		return word;
	default:
		return 0;
	}
}

/* Kernel stacks of sleeps whose path from the system call to schedule() is fixed: a futex wait's
 * by its command (slots past LKS_SYSCALL_CLASS_SLOTS), a poll-class or sleep-class call's (poll,
 * select, epoll_wait, nanosleep...: one sleep site each) by its number. Walking them at every
 * sleep was most of this probe's cost. Only interruptible sleeps: the call's own sleep is one,
 * while a sleep inside it on something else (mmap_lock or a page's I/O at a fault on its
 * arguments or a shared futex's word, a kernel mutex) is uninterruptible or killable and keeps
 * its own walk. Reads and writes are not among them: where those sleep depends on the file. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LKS_SYSCALL_CLASS_SLOTS + LKS_FUTEX_CMD_MASK + 1);
	__type(key, __u32);
	__type(value, __s32);
} fixed_path_kernel_stacks SEC(".maps");

/* Whether a sleep in state `prev_state` is the interruptible kind: a call's own sleep. */
static __always_inline bool interruptible_sleep(unsigned int prev_state)
{
	return (prev_state & (LKS_TASK_INTERRUPTIBLE | LKS_TASK_UNINTERRUPTIBLE |
			      LKS_TASK_WAKEKILL)) == LKS_TASK_INTERRUPTIBLE;
}

static __always_inline __s32 sleep_kernel_stack(void *ctx, struct offcpu_thread *t,
						unsigned int prev_state, __u64 futex_op)
{
	if (!interruptible_sleep(prev_state) || t->syscall < 0 ||
	    t->syscall >= LKS_SYSCALL_CLASS_SLOTS)
		return lks_kernel_stack(ctx);
	if (t->syscall == LKS_NR_FUTEX)
		return lks_kernel_stack_by_key(ctx, &fixed_path_kernel_stacks,
					       LKS_SYSCALL_CLASS_SLOTS +
						       (futex_op & LKS_FUTEX_CMD_MASK));
	if (t->sleep_class == LKS_TIME_POLL || t->sleep_class == LKS_TIME_SLEEP)
		return lks_kernel_stack_by_key(ctx, &fixed_path_kernel_stacks, t->syscall);
	return lks_kernel_stack(ctx);
}

/* The system call `regs` (saved at kernel entry) are inside, -1 when none (see ENOSYS). */
static __always_inline long syscall_in_progress(struct pt_regs *regs)
{
	long nr = BPF_CORE_READ(regs, orig_ax);

	return nr >= 0 && BPF_CORE_READ(regs, ax) == -ENOSYS ? nr : -1;
}

/* Whether a per-thread sampled stack is due at `now`: at most one per `interval_ns`, kept in
 * `*last_ns`; one not due is counted in `*unsampled` (its time is kept, stackless). */
static __always_inline bool stack_due(__u64 *last_ns, __u64 *unsampled, __u64 now,
				      __u64 interval_ns)
{
	if (now - *last_ns < interval_ns) {
		(*unsampled)++;
		return false;
	}
	*last_ns = now;
	return true;
}

/* FUTEX_* commands that wake waiters by one path each: FUTEX_WAKE, FUTEX_REQUEUE,
 * FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP, FUTEX_WAKE_BITSET (not the PI ones, whose wakes take the
 * rt_mutex's paths or a requeue's, by the state of the lock). */
#define LKS_FUTEX_WAKE 1
#define LKS_FUTEX_REQUEUE 3
#define LKS_FUTEX_CMP_REQUEUE 4
#define LKS_FUTEX_WAKE_OP 5
#define LKS_FUTEX_WAKE_BITSET 10

/* Kernel stacks of the wakers in a futex wake command, by command: see waker_kernel_stack. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LKS_FUTEX_CMD_MASK + 1);
	__type(key, __u32);
	__type(value, __s32);
} fixed_path_waker_kernel_stacks SEC(".maps");

/* The kernel stack of the current thread, waking `sleeper` (the `wakeup` probe). Walking it was
 * most of sched_waking's cost with waker stacks (1.5 µs a run at 72,000 wakeups a second of
 * MariaDB under sysbench). A futex wait's own sleep is ended, from a thread's context, only by a
 * futex wake command (signals come from other system calls, timeouts from interrupts, and
 * the kernel's other wakeups from inside a futex call, such as mmap_lock's at a fault on a
 * shared futex's word, end uninterruptible sleeps); and a wake command reaches the wakeup by one
 * path from the system call's entry (futex_wake, futex_wake_op, futex_requeue: wake_up_q,
 * try_to_wake_up). So when the waker is in a wake command and the sleeper in a futex wait's own
 * sleep, the walk of the first such wakeup per command is reused. */
static __always_inline __s32 waker_kernel_stack(void *ctx, struct offcpu_thread *sleeper)
{
	struct pt_regs *regs;
	__u32 cmd;

	if (!sleeper->in_futex_wait)
		return lks_kernel_stack(ctx);
	regs = lks_current_pt_regs();
	if (!regs || syscall_in_progress(regs) != LKS_NR_FUTEX)
		return lks_kernel_stack(ctx);
	cmd = BPF_CORE_READ(regs, si) & LKS_FUTEX_CMD_MASK;
	switch (cmd) {
	case LKS_FUTEX_WAKE:
	case LKS_FUTEX_REQUEUE:
	case LKS_FUTEX_CMP_REQUEUE:
	case LKS_FUTEX_WAKE_OP:
	case LKS_FUTEX_WAKE_BITSET:
		return lks_kernel_stack_by_key(ctx, &fixed_path_waker_kernel_stacks, cmd);
	default:
		return lks_kernel_stack(ctx);
	}
}

#endif /* LOCKSCOPE_OFFCPU_BPF_H */
