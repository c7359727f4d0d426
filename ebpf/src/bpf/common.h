/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Structures shared by every probe and the Rust loader, which takes them from each skeleton's
 * generated `types` (never re-declared).
 */
#ifndef LOCKSCOPE_COMMON_H
#define LOCKSCOPE_COMMON_H

/* One slot per bit length of a u64 duration, plus slot 0 for 0 ns: exactly probes::hist. */
#define LKS_HIST_SLOTS 65
#define LKS_COMM_LEN 16

/* Aggregated durations of one key of a probe's aggregation map. */
struct lks_stats {
	__u64 count;
	__u64 total_ns;
	__u64 max_ns;
	/* hist[bit length of duration_ns] */
	__u64 hist[LKS_HIST_SLOTS];
	/* Thread name when the key was first seen. */
	char comm[LKS_COMM_LEN];
};

/* Loss and event counters of one probe, one copy per CPU. */
struct lks_counters {
	/* Events seen (recorded, or lost). */
	__u64 events;
	/* Events recorded without a user stack. */
	__u64 user_stack_failures;
	/* Events recorded without a kernel stack. */
	__u64 kernel_stack_failures;
	/* Events lost because an aggregation map was full. */
	__u64 agg_map_full;
	/* Events lost because an in-flight or per-thread map was full. */
	__u64 start_map_full;
	/* Events lost for any other reason. */
	__u64 dropped;
};

#endif /* LOCKSCOPE_COMMON_H */
