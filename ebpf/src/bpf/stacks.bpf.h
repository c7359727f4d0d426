/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * THE stack-capture seam. futex.bpf.c asks for stacks only through capture_stacks(), so a DWARF
 * unwinder (user stacks without frame pointers) can replace this file without touching the
 * probes. Today: frame-pointer / ORC walks by bpf_get_stackid into STACK_TRACE maps.
 */
#ifndef LOCKSCOPE_STACKS_BPF_H
#define LOCKSCOPE_STACKS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

/* perf_event_max_stack's default: deeper stacks are cut (bpf_get_stackid keeps the leaf end). */
#define LKS_MAX_STACK_DEPTH 127
#define LKS_STACK_ENTRIES 8192

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, LKS_STACK_ENTRIES);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, LKS_MAX_STACK_DEPTH * sizeof(__u64));
} user_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, LKS_STACK_ENTRIES);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, LKS_MAX_STACK_DEPTH * sizeof(__u64));
} kernel_stacks SEC(".maps");

struct stack_ids {
	/* Id in user_stacks, negative (an errno) when the capture failed. */
	__s32 user;
	/* Id in kernel_stacks, negative when the capture failed. */
	__s32 kernel;
};

/*
 * Captures the current thread's user and kernel stacks. Called at sys_exit: the user registers
 * are those of the syscall entry, so the user stack is the one that issued the wait.
 * No BPF_F_REUSE_STACKID: on a hash collision the capture fails (and is counted) rather than
 * silently rewriting a stack that an earlier key already refers to.
 */
static __always_inline struct stack_ids capture_stacks(void *ctx)
{
	struct stack_ids ids;

	ids.user = bpf_get_stackid(ctx, &user_stacks, BPF_F_USER_STACK);
	ids.kernel = bpf_get_stackid(ctx, &kernel_stacks, 0);
	return ids;
}

#endif /* LOCKSCOPE_STACKS_BPF_H */
