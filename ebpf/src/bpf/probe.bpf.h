/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Helpers of the probes built on common.h: per-object event counters and a log2-histogram
 * aggregation into a hash map of `struct lks_stats`. Private to each object (not shared).
 */
#ifndef LOCKSCOPE_PROBE_BPF_H
#define LOCKSCOPE_PROBE_BPF_H

#include "common.bpf.h"
#include "common.h"

/* Template for new aggregation entries (too big for the 512-byte BPF stack); its counts stay 0. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lks_stats);
} fresh_stats SEC(".maps");

/* Event and loss counters, per CPU so that counting never contends between CPUs. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lks_counters);
} counters SEC(".maps");

static __always_inline struct lks_counters *this_cpu_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

/* Per-CPU copy: only this CPU writes it, and a BPF program is not migrated while it runs. */
#define COUNT(field)                                            \
	do {                                                    \
		struct lks_counters *c = this_cpu_counters();   \
		if (c)                                          \
			c->field++;                             \
	} while (0)

/* Counts the stack captures that failed (a kernel thread's user stack is none, not a failure). */
static __always_inline void count_stack_failures(struct stack_ids ids)
{
	if (ids.user < 0 && !current_is_kernel_thread())
		COUNT(user_stack_failures);
	if (ids.kernel < 0)
		COUNT(kernel_stack_failures);
}

/* Whether `key` may carry its stacks into the aggregation `map`: yes when it is there already or
 * a unit of `budget` is left (spent here); no once the budget is spent, and the caller then
 * strips its stacks (counting them as failures) so that the time goes to a stackless key, which
 * the rest of the map keeps room for: every place busy threads run or meet at is a key, and a
 * map they fill loses the time of the stackless keys too. `*entry` gets the key's entry when it
 * is there already (NULL otherwise), for add_duration. */
static __always_inline bool lks_key_keeps_stacks(void *map, const void *key, __s64 *budget,
						 struct lks_stats **entry)
{
	/* The entry found is handed back (add_duration): a second lookup of the same key, a
	 * hash of 40 bytes, was a fifth of a wakeup's cost with waker stacks. */
	*entry = bpf_map_lookup_elem(map, key);
	return *entry || lks_spend(budget);
}

/* Stores the start of the current thread's event in flight: `start` under its thread id `tid` in
 * the hash `starts`. When that fails, the event's end will find nothing: it is counted as seen
 * here, and lost to the full map (or dropped, on any other error). */
static __always_inline void store_start(void *starts, __u32 *tid, void *start)
{
	long err = bpf_map_update_elem(starts, tid, start, BPF_ANY);

	if (err) {
		COUNT(events);
		if (err == -E2BIG)
			COUNT(start_map_full);
		else
			COUNT(dropped);
	}
}

/* The errno of a system call that returned `ret`: -ret for a failure (in [-4095, -1]), else 0. */
static __always_inline __s32 syscall_errno(long ret)
{
	return ret < 0 && ret >= -4095 ? -ret : 0;
}

/* Adds one duration to `stats`, an entry of an aggregation map. */
static __always_inline void add_duration(struct lks_stats *stats, __u64 duration)
{
	__u64 slot;

	__sync_fetch_and_add(&stats->count, 1);
	/* Not for a constant 0 (lifecycle's exits): clang turns that add into an atomic OR, which
	 * kernels before 5.12 reject ("BPF_STX uses reserved fields"). */
	if (duration)
		__sync_fetch_and_add(&stats->total_ns, duration);
	/* A duration's bit length is at most 63 (2^63 ns is 292 years). The mask bounds the index
	 * for every verifier: a compare is done on a 32-bit copy that older ones (6.1) lose. */
	slot = hist_slot(duration) & 63;
	__sync_fetch_and_add(&stats->hist[slot], 1);
	/* Racy only between threads sharing a key; a lost max update is within one event. */
	if (duration > stats->max_ns)
		stats->max_ns = duration;
}

/* Adds one duration to the entry of `key` in `map` (a hash of key -> struct lks_stats), creating
 * it with the name of `task` (NULL: the current thread). Returns -E2BIG, counting nothing, when
 * the map is full (the caller may retry with a coarser key); counts any other loss. */
static __always_inline long try_aggregate(void *map, void *key, __u64 duration,
					  struct task_struct *task)
{
	struct lks_stats *stats = bpf_map_lookup_elem(map, key);
	long err;

	if (!stats) {
		__u32 zero = 0;
		struct lks_stats *fresh = bpf_map_lookup_elem(&fresh_stats, &zero);

		if (!fresh) {
			COUNT(dropped);
			return 0;
		}
		if (task)
			bpf_probe_read_kernel_str(fresh->comm, sizeof(fresh->comm), task->comm);
		else
			bpf_get_current_comm(fresh->comm, sizeof(fresh->comm));
		err = bpf_map_update_elem(map, key, fresh, BPF_NOEXIST);
		if (err && err != -EEXIST) {
			if (err == -E2BIG)
				return err;
			COUNT(dropped);
			return 0;
		}
		stats = bpf_map_lookup_elem(map, key);
		if (!stats) {
			COUNT(dropped);
			return 0;
		}
	}
	add_duration(stats, duration);
	return 0;
}

/* try_aggregate, counting the loss when the map is full. */
static __always_inline void aggregate(void *map, void *key, __u64 duration, struct task_struct *task)
{
	if (try_aggregate(map, key, duration, task) == -E2BIG)
		COUNT(agg_map_full);
}

#endif /* LOCKSCOPE_PROBE_BPF_H */
