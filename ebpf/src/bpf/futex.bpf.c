// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The `futex` probe: every futex wait of the target processes, timed from syscall entry to exit
 * and aggregated in the kernel per (thread, futex word, op, user stack, kernel stack). Nothing is
 * streamed to user space: it reads the `waits` map once, when the recording ends.
 *
 * Hooks, to time waits: the futex system calls' own tracepoints
 * (syscalls/sys_{enter,exit}_futex{,_waitv,_wait}) when tracefs is mounted, else the generic
 * sys_enter / sys_exit; and sched_process_exit (waits ended by the thread's exit). Children of a
 * target are followed once for every probe, by shared.bpf.c. Every generic hook comes in a tp_btf flavor and a
 * raw_tp fallback; the loader attaches one flavor of each. The generic sys_enter and sys_exit run
 * on every system call of the machine: they test the system call number before anything else, so
 * every other call costs a compare (a target lookup on every call cost ~135 ns, 2.3% of this
 * 2-CPU machine under MariaDB; docs/BENCHMARKS.md).
 */
#include "probe.bpf.h"
#include "futex.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* x86_64 syscall numbers. */
#define NR_FUTEX 202
#define NR_FUTEX_WAITV 449
#define NR_FUTEX_WAIT 455 /* Linux 6.7+ */

/* struct futex_waitv of the uapi (Linux 5.16+), declared here: its layout is ABI, and a CO-RE
 * relocation against the kernel's type would fail on kernels that predate it. */
struct lks_futex_waitv {
	__u64 val;
	__u64 uaddr;
	__u32 flags;
	__u32 reserved;
};

#define MAX_IN_FLIGHT 16384
#define MAX_WAIT_KEYS 10240

/* Waits in flight, by thread id. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_IN_FLIGHT);
	__type(key, __u32);
	__type(value, struct futex_wait_start);
} starts SEC(".maps");

/* The aggregated waits: what the recording produces. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WAIT_KEYS);
	__type(key, struct futex_wait_key);
	__type(value, struct lks_stats);
} waits SEC(".maps");

/* True for the futex(2) commands that block: the ones lockscope records. */
static __always_inline bool is_wait_cmd(__u32 op)
{
	switch (op & ~LKS_FUTEX_FLAGS) {
	case LKS_FUTEX_WAIT:
	case LKS_FUTEX_LOCK_PI:
	case LKS_FUTEX_WAIT_BITSET:
	case LKS_FUTEX_WAIT_REQUEUE_PI:
	case LKS_FUTEX_LOCK_PI2:
		return true;
	default:
		return false;
	}
}

/* True for the system calls that may wait on a futex. Tested before anything else: these hooks
 * run on every system call of the machine, and for all but these a compare is all they cost. */
static __always_inline bool is_futex_syscall(long id)
{
	return id == NR_FUTEX || id == NR_FUTEX_WAITV || id == NR_FUTEX_WAIT;
}

/* A futex system call starting with arguments `arg0` (the futex word or the futex_waitv array) and
 * `arg1` (futex(2)'s op). */
static __always_inline int on_sys_enter(long id, __u64 arg0, __u64 arg1)
{
	struct futex_wait_start start = {};
	__u64 pid_tgid;
	__u32 tid;

	pid_tgid = bpf_get_current_pid_tgid();
	if (!is_target(pid_tgid >> 32))
		return 0;
	tid = (__u32)pid_tgid;

	if (id == NR_FUTEX) {
		__u32 op = (__u32)arg1;

		if (!is_wait_cmd(op))
			return 0;
		start.op = op;
		start.uaddr = arg0;
	} else if (id == NR_FUTEX_WAITV) {
		/* futex_waitv(struct futex_waitv *waiters, ...): name the wait by its first futex
		 * word (futex_waitv.uaddr, the second u64 of the first entry); when the array is
		 * unreadable, by the array's address itself. */
		__u64 waiters = arg0;
		__u64 first_uaddr;

		start.op = LKS_OP_FUTEX_WAITV;
		if (bpf_probe_read_user(&first_uaddr, sizeof(first_uaddr),
					(void *)(waiters + offsetof(struct lks_futex_waitv, uaddr))) == 0)
			start.uaddr = first_uaddr;
		else
			start.uaddr = waiters;
	} else if (id == NR_FUTEX_WAIT) {
		start.op = LKS_OP_FUTEX_WAIT;
		start.uaddr = arg0;
	} else {
		return 0;
	}

	start.start_ns = bpf_ktime_get_ns();
	store_start(&starts, &tid, &start);
	return 0;
}

/* Ends the current thread's wait in flight, if it has one: from the futex system calls' exit, and
 * from the thread's exit (for an entry whose call's exit was not seen). `compat`: see
 * capture_stacks. `kernel_stack`: only at the thread's exit. At a futex call's exit the kernel
 * stack is the return path, the same for every wait: taking it there cost ~0.5 µs a wait for
 * nothing (docs/BENCHMARKS.md), and the per-syscall tracepoints' programs could not anyway
 * (their context holds the system call's user registers on older kernels; on 6.1 every kernel
 * stack failed there), so a wait records the same key on either hook. */
static __always_inline int on_wait_end(void *ctx, const bool compat, const bool kernel_stack)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct futex_wait_start *start;
	struct futex_wait_key key = {};
	struct stack_ids stacks;
	__u64 duration;

	/* No target lookup: a thread has an entry in flight only if it is a target's. */
	start = bpf_map_lookup_elem(&starts, &tid);
	if (!start)
		return 0;
	duration = bpf_ktime_get_ns() - start->start_ns;
	key.tgid = pid_tgid >> 32;
	key.tid = tid;
	key.uaddr = start->uaddr;
	key.op = start->op;
	bpf_map_delete_elem(&starts, &tid);
	COUNT(events);

	if (kernel_stack) {
		stacks = capture_stacks(ctx, compat);
	} else {
		stacks.user = lks_unwind_user_stack(ctx, compat);
		stacks.kernel = 0;
	}
	count_stack_failures(stacks);
	key.user_stack_id = stacks.user < 0 ? -1 : stacks.user;
	key.kernel_stack_id = kernel_stack && stacks.kernel >= 0 ? stacks.kernel : -1;

	/* The key holds the thread id and a thread waits in one syscall at a time, so no other CPU
	 * updates this entry concurrently: its max is exact. */
	aggregate(&waits, &key, duration, NULL);
	return 0;
}

/* The generic hooks, for every system call: test the number first. */
static __always_inline int on_any_sys_enter(struct pt_regs *regs, long id)
{
	if (!is_futex_syscall(id))
		return 0;
	return on_sys_enter(id, PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs));
}

SEC("tp_btf/sys_enter")
int BPF_PROG(lks_enter_btf, struct pt_regs *regs, long id)
{
	return on_any_sys_enter(regs, id);
}

/* x86_64 keeps the system call number in orig_ax until the call returns. */
static __always_inline int on_exit_btf(void *ctx, struct pt_regs *regs, const bool compat)
{
	if (!is_futex_syscall(regs->orig_ax))
		return 0;
	return on_wait_end(ctx, compat, false);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(lks_exit_btf, struct pt_regs *regs, long ret)
{
	return on_exit_btf(ctx, regs, false);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(lks_exit_btf_compat, struct pt_regs *regs, long ret)
{
	return on_exit_btf(ctx, regs, true);
}

/* A thread's in-flight entry must not outlive it (a later thread reusing its id would otherwise
 * pick it up). A waiter killed by exit_group still passes sys_exit (the entry code traces the
 * call's exit before the signal ends the thread: measured on 6.18), so this ends
 * only a wait whose exit was not seen, such as one whose call ran when the hooks were detached. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(lks_texit_btf)
{
	return on_wait_end(ctx, false, true);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(lks_texit_btf_compat)
{
	return on_wait_end(ctx, true, true);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(lks_enter_raw, struct pt_regs *regs, long id)
{
	return on_any_sys_enter(regs, id);
}

static __always_inline int on_exit_raw(void *ctx, struct pt_regs *regs, const bool compat)
{
	if (!is_futex_syscall(BPF_CORE_READ(regs, orig_ax)))
		return 0;
	return on_wait_end(ctx, compat, false);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(lks_exit_raw, struct pt_regs *regs, long ret)
{
	return on_exit_raw(ctx, regs, false);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(lks_exit_raw_compat, struct pt_regs *regs, long ret)
{
	return on_exit_raw(ctx, regs, true);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(lks_texit_raw)
{
	return on_wait_end(ctx, false, true);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(lks_texit_raw_compat)
{
	return on_wait_end(ctx, true, true);
}

/*
 * The per-system-call tracepoints (tracefs's syscalls/ events): the kernel dispatches them by
 * number before any BPF runs, so other system calls do not enter BPF at all (the generic hooks
 * cost ~50 ns more per system call of the machine). Attachable only with tracefs mounted; the
 * loader uses them when it is, and the generic hooks otherwise. sys_enter_futex_waitv exists on
 * Linux 5.16+ and sys_enter_futex_wait on 6.7+ only: their programs are attached when their
 * events exist.
 */
/* Each program knows its system call: the record's number field is an int (its upper half in
 * vmlinux.h's `long id` is padding, not zero). */
static __always_inline int on_syscall_tp_enter(long id, struct trace_event_raw_sys_enter *ctx)
{
	return on_sys_enter(id, ctx->args[0], ctx->args[1]);
}

SEC("tracepoint/syscalls/sys_enter_futex")
int lks_enter_futex_tp(struct trace_event_raw_sys_enter *ctx)
{
	return on_syscall_tp_enter(NR_FUTEX, ctx);
}

SEC("tracepoint/syscalls/sys_exit_futex")
int lks_exit_futex_tp(struct trace_event_raw_sys_exit *ctx)
{
	return on_wait_end(ctx, false, false);
}

SEC("tracepoint/syscalls/sys_exit_futex")
int lks_exit_futex_tp_compat(struct trace_event_raw_sys_exit *ctx)
{
	return on_wait_end(ctx, true, false);
}

SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int lks_enter_futex_waitv_tp(struct trace_event_raw_sys_enter *ctx)
{
	return on_syscall_tp_enter(NR_FUTEX_WAITV, ctx);
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int lks_exit_futex_waitv_tp(struct trace_event_raw_sys_exit *ctx)
{
	return on_wait_end(ctx, false, false);
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int lks_exit_futex_waitv_tp_compat(struct trace_event_raw_sys_exit *ctx)
{
	return on_wait_end(ctx, true, false);
}

SEC("tracepoint/syscalls/sys_enter_futex_wait")
int lks_enter_futex_wait_tp(struct trace_event_raw_sys_enter *ctx)
{
	return on_syscall_tp_enter(NR_FUTEX_WAIT, ctx);
}

SEC("tracepoint/syscalls/sys_exit_futex_wait")
int lks_exit_futex_wait_tp(struct trace_event_raw_sys_exit *ctx)
{
	return on_wait_end(ctx, false, false);
}

SEC("tracepoint/syscalls/sys_exit_futex_wait")
int lks_exit_futex_wait_tp_compat(struct trace_event_raw_sys_exit *ctx)
{
	return on_wait_end(ctx, true, false);
}
