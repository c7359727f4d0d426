// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The `klock` probe: contention on kernel locks (spinlocks, mutexes, rwsems, rwlocks, rtmutexes,
 * percpu-rwsems) by the target's threads, from lock:contention_begin/end, with the lock's
 * address, its type flags, and kernel and user stacks. `perf lock contention -b` without perf's
 * BPF skeletons.
 */
#include "probe.bpf.h"
#include "klock.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAX_IN_FLIGHT 16384
#define MAX_KLOCK_KEYS 8192

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_IN_FLIGHT);
	__type(key, __u32);
	__type(value, struct klock_start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_KLOCK_KEYS);
	__type(key, struct klock_key);
	__type(value, struct lks_stats);
} contentions SEC(".maps");

SEC("tp_btf/contention_begin")
int BPF_PROG(lks_klock_begin, void *lock, unsigned int flags)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct klock_start *start, fresh = {};

	if (!is_target(pid_tgid >> 32))
		return 0;
	/* A mutex spins (one begin) and then sleeps (a second begin) before its one end: keep the
	 * first start, accumulate the flags. */
	start = bpf_map_lookup_elem(&starts, &tid);
	if (start && start->lock == (__u64)lock) {
		start->flags |= flags;
		return 0;
	}
	fresh.start_ns = bpf_ktime_get_ns();
	fresh.lock = (__u64)lock;
	fresh.flags = flags;
	store_start(&starts, &tid, &fresh);
	return 0;
}

static __always_inline int on_end(void *ctx, void *lock, const bool compat)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct klock_start *start;
	struct klock_key key = {};
	struct stack_ids ids;
	__u64 duration;

	if (!is_target(pid_tgid >> 32))
		return 0;
	start = bpf_map_lookup_elem(&starts, &tid);
	if (!start || start->lock != (__u64)lock)
		return 0;
	duration = bpf_ktime_get_ns() - start->start_ns;
	key.tgid = pid_tgid >> 32;
	key.tid = tid;
	key.lock = start->lock;
	key.flags = start->flags;
	bpf_map_delete_elem(&starts, &tid);
	COUNT(events);
	ids = capture_stacks(ctx, compat);
	count_stack_failures(ids);
	key.user_stack_id = ids.user < 0 ? -1 : ids.user;
	key.kernel_stack_id = ids.kernel < 0 ? -1 : ids.kernel;
	aggregate(&contentions, &key, duration, NULL);
	return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(lks_klock_end, void *lock, int ret)
{
	return on_end(ctx, lock, false);
}

SEC("tp_btf/contention_end")
int BPF_PROG(lks_klock_end_compat, void *lock, int ret)
{
	return on_end(ctx, lock, true);
}
