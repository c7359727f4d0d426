// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The `syscall` probe: every system call of the target, timed from sys_enter to sys_exit and
 * aggregated per (thread, call, errno) into log2 histograms. Stacks are captured only for calls of
 * at least `targ_slow_ns` (the slowest sites), so the common fast call costs two hash lookups and
 * one update. `targ_filter` restricts it to the calls set in `selected` (`--syscalls`).
 */
#include "probe.bpf.h"
#include "syscall.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAX_IN_FLIGHT 16384
#define MAX_SYSCALL_KEYS 16384

/* Only the calls marked in `selected`. */
const volatile bool targ_filter = false;
/* Calls at least this long get their stacks captured. */
const volatile __u64 targ_slow_ns = 1000000;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LKS_MAX_SYSCALLS);
	__type(key, __u32);
	__type(value, __u8);
} selected SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_IN_FLIGHT);
	__type(key, __u32);
	__type(value, struct syscall_start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SYSCALL_KEYS);
	__type(key, struct syscall_key);
	__type(value, struct lks_stats);
} calls SEC(".maps");

SEC("tp_btf/sys_enter")
int BPF_PROG(lks_syscall_enter, struct pt_regs *regs, long id)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct syscall_start start = {};
	__u32 tid = (__u32)pid_tgid, nr = (__u32)id;

	if (!is_target(pid_tgid >> 32) || id < 0)
		return 0;
	if (targ_filter) {
		__u8 *yes = bpf_map_lookup_elem(&selected, &nr);

		if (!yes || !*yes)
			return 0;
	}
	start.start_ns = bpf_ktime_get_ns();
	start.nr = id;
	store_start(&starts, &tid, &start);
	return 0;
}

static __always_inline int on_exit(void *ctx, long ret, const bool compat)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct syscall_key key = {};
	struct syscall_start *start;
	__u32 tid = (__u32)pid_tgid;
	struct stack_ids ids;
	__u64 duration;

	if (!is_target(pid_tgid >> 32))
		return 0;
	start = bpf_map_lookup_elem(&starts, &tid);
	if (!start)
		return 0;
	duration = bpf_ktime_get_ns() - start->start_ns;
	key.tgid = pid_tgid >> 32;
	key.tid = tid;
	key.nr = start->nr;
	key.err = syscall_errno(ret);
	bpf_map_delete_elem(&starts, &tid);
	COUNT(events);
	key.user_stack_id = -1;
	key.kernel_stack_id = -1;
	if (duration >= targ_slow_ns) {
		ids = capture_stacks(ctx, compat);
		count_stack_failures(ids);
		key.user_stack_id = ids.user < 0 ? -1 : ids.user;
		key.kernel_stack_id = ids.kernel < 0 ? -1 : ids.kernel;
	}
	aggregate(&calls, &key, duration, NULL);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(lks_syscall_exit, struct pt_regs *regs, long ret)
{
	return on_exit(ctx, ret, false);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(lks_syscall_exit_compat, struct pt_regs *regs, long ret)
{
	return on_exit(ctx, ret, true);
}
