// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The `lifecycle` probe: fork, vfork, clone (process and thread told apart by the clone flags),
 * exec and exit of the target's threads, with the time the caller spent in each system call and
 * the stacks of who forks, creates threads and execs (captured at entry, before an exec replaces
 * the image). Exits come from sched_process_exit (every thread exit, whatever ended it).
 */
#include "probe.bpf.h"
#include "lifecycle.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAX_IN_FLIGHT 4096
#define MAX_LIFECYCLE_KEYS 8192

#define NR_CLONE 56
#define NR_FORK 57
#define NR_VFORK 58
#define NR_EXECVE 59
#define NR_EXECVEAT 322
#define NR_CLONE3 435

#define LKS_CLONE_VM 0x00000100
#define LKS_CLONE_VFORK 0x00004000
#define LKS_CLONE_THREAD 0x00010000

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_IN_FLIGHT);
	__type(key, __u32);
	__type(value, struct lifecycle_start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LIFECYCLE_KEYS);
	__type(key, struct lifecycle_key);
	__type(value, struct lks_stats);
} events SEC(".maps");

static __always_inline enum lifecycle_op clone_op(__u64 flags)
{
	if (flags & LKS_CLONE_THREAD)
		return LKS_LIFE_THREAD;
	if (flags & LKS_CLONE_VFORK)
		return LKS_LIFE_VFORK;
	if (flags & LKS_CLONE_VM)
		return LKS_LIFE_CLONE;
	return LKS_LIFE_FORK;
}

static __always_inline int on_enter(void *ctx, struct pt_regs *regs, long id, const bool compat)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lifecycle_start start = {};
	__u32 tid = (__u32)pid_tgid;
	struct stack_ids ids;
	__u64 flags = 0;

	if (id != NR_CLONE && id != NR_FORK && id != NR_VFORK && id != NR_EXECVE &&
	    id != NR_EXECVEAT && id != NR_CLONE3)
		return 0;
	if (!is_target(pid_tgid >> 32))
		return 0;
	switch (id) {
	case NR_FORK:
		start.op = LKS_LIFE_FORK;
		break;
	case NR_VFORK:
		start.op = LKS_LIFE_VFORK;
		break;
	case NR_CLONE:
		start.op = clone_op(PT_REGS_PARM1_CORE_SYSCALL(regs));
		break;
	case NR_CLONE3:
		/* clone3(struct clone_args *args, size_t size): flags is its first u64. */
		if (bpf_probe_read_user(&flags, sizeof(flags),
					(void *)PT_REGS_PARM1_CORE_SYSCALL(regs)) != 0)
			flags = 0;
		start.op = clone_op(flags);
		break;
	default:
		start.op = LKS_LIFE_EXEC;
		break;
	}
	start.nr = id;
	ids = capture_stacks(ctx, compat);
	count_stack_failures(ids);
	start.user_stack_id = ids.user < 0 ? -1 : ids.user;
	start.kernel_stack_id = ids.kernel < 0 ? -1 : ids.kernel;
	start.start_ns = bpf_ktime_get_ns();
	store_start(&starts, &tid, &start);
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(lks_lifecycle_enter, struct pt_regs *regs, long id)
{
	return on_enter(ctx, regs, id, false);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(lks_lifecycle_enter_compat, struct pt_regs *regs, long id)
{
	return on_enter(ctx, regs, id, true);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(lks_lifecycle_exit, struct pt_regs *regs, long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lifecycle_key key = {};
	struct lifecycle_start *start;
	__u32 tid = (__u32)pid_tgid;
	__u64 duration;

	if (!is_target(pid_tgid >> 32))
		return 0;
	start = bpf_map_lookup_elem(&starts, &tid);
	if (!start)
		return 0;
	duration = bpf_ktime_get_ns() - start->start_ns;
	key.tgid = pid_tgid >> 32;
	key.tid = tid;
	key.op = start->op;
	key.nr = start->nr;
	key.err = syscall_errno(ret);
	key.user_stack_id = start->user_stack_id;
	key.kernel_stack_id = start->kernel_stack_id;
	bpf_map_delete_elem(&starts, &tid);
	COUNT(events);
	aggregate(&events, &key, duration, NULL);
	return 0;
}

static __always_inline int on_thread_exit(void *ctx, const bool compat)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lifecycle_key key = {};
	__u32 tid = (__u32)pid_tgid;
	struct stack_ids ids;

	if (!is_target(pid_tgid >> 32))
		return 0;
	/* An exec or clone that never returned (killed): drop it with the thread. */
	bpf_map_delete_elem(&starts, &tid);
	key.tgid = pid_tgid >> 32;
	key.tid = tid;
	key.op = key.tgid == tid ? LKS_LIFE_EXIT_PROCESS : LKS_LIFE_EXIT_THREAD;
	key.nr = -1;
	ids = capture_stacks(ctx, compat);
	count_stack_failures(ids);
	key.user_stack_id = ids.user < 0 ? -1 : ids.user;
	key.kernel_stack_id = ids.kernel < 0 ? -1 : ids.kernel;
	COUNT(events);
	aggregate(&events, &key, 0, NULL);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(lks_lifecycle_texit)
{
	return on_thread_exit(ctx, false);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(lks_lifecycle_texit_compat)
{
	return on_thread_exit(ctx, true);
}
