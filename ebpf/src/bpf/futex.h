/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Structures and constants shared by futex.bpf.c and the Rust loader (its aggregated values and
 * counters are common.h's `lks_stats` and `lks_counters`). The Rust side never
 * re-declares them: it uses the skeleton's generated `types::*`, which libbpf-cargo emits from this
 * object's BTF (every type below is referenced by a map definition or a key field, so it is there).
 */
#ifndef LOCKSCOPE_FUTEX_H
#define LOCKSCOPE_FUTEX_H

#include "common.h"

/*
 * What a wait was. For the futex(2) syscall this is its full `op` argument (command plus the
 * FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME flags), so user space can print
 * "FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME"; the named constants are the commands lockscope
 * records and the flags. futex_waitv(2) and futex_wait(2) have no op argument: they get values
 * above every futex(2) op (which fit in 9 bits).
 */
enum futex_wait_op {
	LKS_FUTEX_WAIT = 0,
	LKS_FUTEX_LOCK_PI = 6,
	LKS_FUTEX_WAIT_BITSET = 9,
	LKS_FUTEX_WAIT_REQUEUE_PI = 11,
	LKS_FUTEX_LOCK_PI2 = 13,
	LKS_FUTEX_PRIVATE_FLAG = 128,
	LKS_FUTEX_CLOCK_REALTIME = 256,
	LKS_OP_FUTEX_WAITV = 0x10000,
	LKS_OP_FUTEX_WAIT = 0x20000,
};

/* Bits of a futex(2) op that are flags, not the command (the kernel's ~FUTEX_CMD_MASK). */
#define LKS_FUTEX_FLAGS (LKS_FUTEX_PRIVATE_FLAG | LKS_FUTEX_CLOCK_REALTIME)

/* Aggregation key: one entry per distinct (thread, futex word, op, stacks). */
struct futex_wait_key {
	__u32 tgid;
	__u32 tid;
	/* Futex word; for futex_waitv the first waiter's uaddr, or the waiters array pointer when
	 * that array is unreadable. */
	__u64 uaddr;
	enum futex_wait_op op;
	/* Ids in the user_stacks / kernel_stacks maps, -1 when the capture failed. */
	__s32 user_stack_id;
	__s32 kernel_stack_id;
	/* Explicit, always zero: keys are hashed byte by byte. */
	__u32 pad;
};

/* A wait in flight: written at syscall entry, consumed at exit (keyed by thread id). */
struct futex_wait_start {
	__u64 start_ns;
	__u64 uaddr;
	enum futex_wait_op op;
	__u32 pad;
};

#endif /* LOCKSCOPE_FUTEX_H */
