/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Structures shared by lifecycle.bpf.c and the Rust loader (src/probes/lifecycle.rs). */
#ifndef LOCKSCOPE_LIFECYCLE_H
#define LOCKSCOPE_LIFECYCLE_H

#include "common.h"

/* What a lifecycle event was. */
enum lifecycle_op {
	/* A new process sharing nothing (fork(2), clone without CLONE_VM). */
	LKS_LIFE_FORK = 0,
	/* A new process borrowing the parent's memory until it execs (vfork, CLONE_VFORK). */
	LKS_LIFE_VFORK = 1,
	/* A new thread (CLONE_THREAD). */
	LKS_LIFE_THREAD = 2,
	/* execve / execveat. */
	LKS_LIFE_EXEC = 3,
	/* A thread other than the main one exited. */
	LKS_LIFE_EXIT_THREAD = 4,
	/* A process's main thread exited. */
	LKS_LIFE_EXIT_PROCESS = 5,
	/* clone that shares memory without CLONE_THREAD or CLONE_VFORK. */
	LKS_LIFE_CLONE = 6,
};

/* A fork/clone/exec in flight, by thread id (stacks captured at entry: who forks). */
struct lifecycle_start {
	__u64 start_ns;
	enum lifecycle_op op;
	__s32 nr;
	__s32 user_stack_id;
	__s32 kernel_stack_id;
};

/* Aggregation key. */
struct lifecycle_key {
	__u32 tgid;
	__u32 tid;
	enum lifecycle_op op;
	/* System call (-1 for exits). */
	__s32 nr;
	/* errno of a failed call, 0 on success. */
	__s32 err;
	__s32 user_stack_id;
	__s32 kernel_stack_id;
	__u32 pad;
};

#endif /* LOCKSCOPE_LIFECYCLE_H */
