/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Structures shared by mutex_hold.bpf.c and the Rust loader (src/probes/mutex_hold.rs). */
#ifndef LOCKSCOPE_MUTEX_HOLD_H
#define LOCKSCOPE_MUTEX_HOLD_H

#include "common.h"

/* How a mutex was acquired. */
enum hold_acquire {
	/* The lock call returned within targ_spin_ns without blocking. */
	LKS_ACQUIRE_FREE = 0,
	/* It took longer, without blocking (adaptive spinning, or preemption). */
	LKS_ACQUIRE_SPUN = 1,
	/* The thread blocked in the call (its voluntary context switches grew). */
	LKS_ACQUIRE_BLOCKED = 2,
};

/* A pthread_mutex_lock call in flight, by thread id. */
struct hold_call {
	__u64 start_ns;
	__u64 mutex;
	__u64 nvcsw;
};

/* A mutex held, by (thread, mutex). */
struct held_key {
	__u32 tid;
	__u32 pad;
	__u64 mutex;
};

struct held {
	__u64 acquired_ns;
	enum hold_acquire how;
	__s32 user_stack_id;
	__s32 kernel_stack_id;
	__u32 pad;
};

/* Aggregation key of hold times. */
struct hold_key {
	__u32 tgid;
	__u32 tid;
	__u64 mutex;
	enum hold_acquire how;
	/* Stacks where the mutex was acquired. */
	__s32 user_stack_id;
	__s32 kernel_stack_id;
	__u32 pad;
};

#endif /* LOCKSCOPE_MUTEX_HOLD_H */
