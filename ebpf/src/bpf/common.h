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

/* Records of the shared `bottleneck_events` ring buffer (the `waitfor` probe), told apart by their
 * first field. */
enum lks_event_type {
	/* struct offcpu_interval (offcpu.h): an off-CPU interval of a target thread. */
	LKS_EVENT_INTERVAL = 1,
	/* struct lks_cpu_sample: a `cpu` probe sample of a target thread. */
	LKS_EVENT_CPU_SAMPLE = 2,
};

/* A sample of a target thread on a CPU, with the time it was taken: the bottleneck analysis reads
 * what a thread others waited for was running. */
struct lks_cpu_sample {
	enum lks_event_type type;
	__u32 tgid;
	__u32 tid;
	/* Its user stack (the `cpu` probe's unwinding), -1 when not captured. */
	__s32 user_stack_id;
	__u64 time_ns;
};

/* What the `targets` set holds besides its tgids (`targets_config`'s one entry). */
struct lks_targets_config {
	/* Non-zero: every process is a target (`record -a`), kernel threads included. */
	__u32 all;
	/* With `all`: the process left out (lockscope's own). */
	__u32 exclude_tgid;
};

#endif /* LOCKSCOPE_COMMON_H */
