/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Structures shared by syscall.bpf.c and the Rust loader (src/probes/syscall.rs). */
#ifndef LOCKSCOPE_SYSCALL_H
#define LOCKSCOPE_SYSCALL_H

#include "common.h"

/* Highest x86_64 system call number + 1 that the filter covers. */
#define LKS_MAX_SYSCALLS 512

/* A system call in flight, by thread id. */
struct syscall_start {
	__u64 start_ns;
	__s32 nr;
	__u32 pad;
};

/* Aggregation key: one entry per (thread, call, errno, stacks). */
struct syscall_key {
	__u32 tgid;
	__u32 tid;
	__s32 nr;
	/* errno of a failed call (return value in [-4095, -1]), 0 on success. */
	__s32 err;
	/* Stacks, captured only for calls of at least targ_slow_ns (-1 otherwise). */
	__s32 user_stack_id;
	__s32 kernel_stack_id;
};

#endif /* LOCKSCOPE_SYSCALL_H */
