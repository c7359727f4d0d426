/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * THE stack-capture seam. Probes ask for stacks only through this file: capture_stacks() for both,
 * lks_kernel_stack() and lks_kernel_stack_by_key() for the kernel's alone. User stacks are
 * unwound in the kernel from CFI tables (unwind.bpf.h; frame pointers where a pc has no CFI) into
 * `user_stacks`; kernel stacks are ORC / frame-pointer walks by bpf_get_stackid into a
 * STACK_TRACE map.
 */
#ifndef LOCKSCOPE_STACKS_BPF_H
#define LOCKSCOPE_STACKS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "unwind.bpf.h"

/* perf_event_max_stack's default: deeper stacks are cut (bpf_get_stackid keeps the leaf end). */
#define LKS_MAX_STACK_DEPTH 127
#define LKS_STACK_ENTRIES 8192

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, LKS_STACK_ENTRIES);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, LKS_MAX_STACK_DEPTH * sizeof(__u64));
} kernel_stacks SEC(".maps");

struct stack_ids {
	/* Id in user_stacks (unwind.bpf.h), negative (an errno) when the capture failed. */
	__s32 user;
	/* Id in kernel_stacks, negative when the capture failed. */
	__s32 kernel;
};

/* The current thread's kernel stack: its id in kernel_stacks, negative when the walk failed. */
static __always_inline __s32 lks_kernel_stack(void *ctx)
{
	return bpf_get_stackid(ctx, &kernel_stacks, 0);
}

/*
 * Captures the current thread's user and kernel stacks. The user stack starts from the registers
 * saved at kernel entry (at sys_exit: those of the syscall that waited), so it is the same from any
 * hook that runs in the thread's context.
 * No BPF_F_REUSE_STACKID: on a hash collision the capture fails (and is counted) rather than
 * silently rewriting a stack that an earlier key already refers to.
 *
 * `compat` is a constant of the calling program: every program that captures stacks comes in two
 * variants, NAME (bpf_loop and bpf_find_vma, Linux 5.17+) and NAME_compat (neither, for older
 * kernels: their verifiers reject a program that merely contains a callback), and the loader
 * loads the one the kernel supports (src/variant.rs).
 */
static __always_inline struct stack_ids capture_stacks(void *ctx, const bool compat)
{
	struct stack_ids ids;

	ids.user = lks_unwind_user_stack(ctx, compat);
	ids.kernel = lks_kernel_stack(ctx);
	return ids;
}

/*
 * The kernel stack of a sleep whose path through the kernel the caller knows to be a function of
 * `key` alone: the first such sleep's walk, kept in `memo` (an array map of __s32, ids plus one:
 * 0 is none yet) and reused. The walk is most of what a switch-out costs: an ORC walk of a dozen
 * frames, ~550 of lks_offcpu_switch's ~850 ns a run here. A failed walk is not kept.
 */
static __always_inline __s32 lks_kernel_stack_by_key(void *ctx, void *memo, __u32 key)
{
	__s32 *kept = bpf_map_lookup_elem(memo, &key);
	__s32 id;

	if (kept && *kept > 0)
		return *kept - 1;
	id = lks_kernel_stack(ctx);
	if (kept && id >= 0)
		*kept = id + 1;
	return id;
}

#endif /* LOCKSCOPE_STACKS_BPF_H */
