// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The opt-in `mutex-hold` probe: pthread mutex hold times (plockstat -H semantics), from uprobes
 * on the C library's pthread_mutex_lock (entry and return) and pthread_mutex_unlock (entry), with
 * how each acquisition went (free, spun, blocked) and the stacks where it was acquired. A uprobe
 * costs microseconds per hit, so this probe is never on by default.
 *
 * Holds are matched by (thread, mutex); a mutex released inside pthread_cond_wait (glibc calls its
 * internal unlock, not the traced one) counts as held through the wait.
 */
#include "probe.bpf.h"
#include "mutex_hold.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAX_CALLS 16384
#define MAX_HELD 65536
#define MAX_HOLD_KEYS 16384

/* A lock call that took longer than this without blocking spun (or was slowed), one faster found
 * the mutex free. The uprobes' own time between the call's entry and its return is more than a
 * free acquisition (15-20 µs here, on a 1 ns lock): the loader sets this after measuring them,
 * to 1 µs past two thirds of a lock+unlock pair's measured cost (1 µs when it could not). */
__u64 lks_spin_ns = 1000;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_CALLS);
	__type(key, __u32);
	__type(value, struct hold_call);
} calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_HELD);
	__type(key, struct held_key);
	__type(value, struct held);
} held SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_HOLD_KEYS);
	__type(key, struct hold_key);
	__type(value, struct lks_stats);
} holds SEC(".maps");

static __always_inline __u64 voluntary_switches(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	return BPF_CORE_READ(task, nvcsw);
}

SEC("uprobe")
int BPF_UPROBE(lks_hold_lock, void *mutex)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct hold_call call = {};

	if (!is_target(pid_tgid >> 32))
		return 0;
	call.start_ns = bpf_ktime_get_ns();
	call.mutex = (__u64)mutex;
	call.nvcsw = voluntary_switches();
	if (bpf_map_update_elem(&calls, &tid, &call, BPF_ANY) != 0)
		COUNT(start_map_full);
	return 0;
}

static __always_inline int on_locked(void *ctx, int ret, const bool compat)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct held_key key = {};
	struct held value = {};
	struct hold_call *call;
	struct stack_ids ids;
	__u64 now;

	if (!is_target(pid_tgid >> 32))
		return 0;
	call = bpf_map_lookup_elem(&calls, &tid);
	if (!call)
		return 0;
	now = bpf_ktime_get_ns();
	key.tid = tid;
	key.mutex = call->mutex;
	if (voluntary_switches() != call->nvcsw)
		value.how = LKS_ACQUIRE_BLOCKED;
	else if (now - call->start_ns >= lks_spin_ns)
		value.how = LKS_ACQUIRE_SPUN;
	else
		value.how = LKS_ACQUIRE_FREE;
	bpf_map_delete_elem(&calls, &tid);
	if (ret != 0)
		return 0;
	ids = capture_stacks(ctx, compat);
	/* A uprobe runs with no kernel stack of interest: only a user stack failure is one. */
	if (ids.user < 0)
		COUNT(user_stack_failures);
	value.user_stack_id = ids.user < 0 ? -1 : ids.user;
	value.kernel_stack_id = ids.kernel < 0 ? -1 : ids.kernel;
	value.acquired_ns = now;
	if (bpf_map_update_elem(&held, &key, &value, BPF_ANY) != 0)
		COUNT(start_map_full);
	return 0;
}

SEC("uretprobe")
int BPF_URETPROBE(lks_hold_locked, int ret)
{
	return on_locked(ctx, ret, false);
}

SEC("uretprobe")
int BPF_URETPROBE(lks_hold_locked_compat, int ret)
{
	return on_locked(ctx, ret, true);
}

SEC("uprobe")
int BPF_UPROBE(lks_hold_unlock, void *mutex)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct held_key key = {};
	struct hold_key agg = {};
	struct held *h;

	if (!is_target(pid_tgid >> 32))
		return 0;
	key.tid = (__u32)pid_tgid;
	key.mutex = (__u64)mutex;
	h = bpf_map_lookup_elem(&held, &key);
	if (!h)
		return 0;
	agg.tgid = pid_tgid >> 32;
	agg.tid = key.tid;
	agg.mutex = key.mutex;
	agg.how = h->how;
	agg.user_stack_id = h->user_stack_id;
	agg.kernel_stack_id = h->kernel_stack_id;
	COUNT(events);
	aggregate(&holds, &agg, bpf_ktime_get_ns() - h->acquired_ns, NULL);
	bpf_map_delete_elem(&held, &key);
	return 0;
}
