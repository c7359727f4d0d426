/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The process events of the target set (shared.bpf.c), read by the Rust side's process table
 * (src/target_set.rs): the forks, execs and exits of recorded processes, as they happen.
 */
#ifndef LOCKSCOPE_SHARED_H
#define LOCKSCOPE_SHARED_H

#include "common.h"

enum process_event_kind {
	/* A recorded process forked `pid` (a new process, not a thread). */
	LKS_PROCESS_FORK = 1,
	/* `pid` executed a new program: its mappings are new. */
	LKS_PROCESS_EXEC = 2,
	/* The last thread of `pid` exited. */
	LKS_PROCESS_EXIT = 3,
};

enum process_event_flags {
	/* The process is a kernel thread (PF_KTHREAD). */
	LKS_PROCESS_KTHREAD = 1,
	/* Fork: the parent's unwind table was copied to the child. */
	LKS_PROCESS_UNWIND_COPIED = 2,
};

struct process_event {
	/* CLOCK_MONOTONIC (bpf_ktime_get_ns). */
	__u64 time_ns;
	enum process_event_kind kind;
	/* enum process_event_flags */
	__u32 flags;
	/* The process (tgid). */
	__u32 pid;
	/* Fork: the parent (tgid). */
	__u32 parent;
	/* Exit: the exit code as wait(2) reports it (status << 8, or the signal). */
	__u32 exit_code;
	__u32 pad;
	/* The name (comm): at a fork the parent's, which the child keeps until it execs. */
	char comm[LKS_COMM_LEN];
};

#endif /* LOCKSCOPE_SHARED_H */
