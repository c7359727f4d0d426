/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Structures shared by cpu.bpf.c and the Rust loader (src/cpu.rs). */
#ifndef LOCKSCOPE_CPU_H
#define LOCKSCOPE_CPU_H

#include "common.h"

/* Aggregation key: a thread on CPU at a stack. Its value (struct lks_stats) counts the samples
 * and sums their periods: the thread's CPU time at that stack. */
struct cpu_key {
	__u32 tgid;
	__u32 tid;
	/* Id in user_stacks, -1 when the unwind failed. */
	__s32 user_stack_id;
	/* Id in kernel_stacks, -1 when the sample was in user mode (or the capture failed). */
	__s32 kernel_stack_id;
};

#endif /* LOCKSCOPE_CPU_H */
