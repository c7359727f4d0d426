/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Structures shared by klock.bpf.c and the Rust loader (src/probes/klock.rs). */
#ifndef LOCKSCOPE_KLOCK_H
#define LOCKSCOPE_KLOCK_H

#include "common.h"

/* A contention in flight, by thread id. */
struct klock_start {
	__u64 start_ns;
	__u64 lock;
	/* LCB_F_* flags of include/trace/events/lock.h, or-ed over nested begins. */
	__u32 flags;
	__u32 pad;
};

/* Aggregation key. */
struct klock_key {
	__u32 tgid;
	__u32 tid;
	/* Address of the kernel lock. */
	__u64 lock;
	__u32 flags;
	__s32 user_stack_id;
	__s32 kernel_stack_id;
	__u32 pad;
};

#endif /* LOCKSCOPE_KLOCK_H */
