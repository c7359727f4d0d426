/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The in-kernel user-stack unwinder. User space (src/unwind/) turns the CFI of every executable
 * mapping of a traced process (.eh_frame, .debug_frame) into compact rows (unwind.h) in the
 * mmap'ed `unwind_rows` array, and describes each process's mappings in `unwind_procs`. Here, per
 * frame: find the mapping of the pc (binary search), its row (binary search), compute the CFA,
 * read the return address and the saved frame pointer from user memory. No CFI for a pc: walk by
 * frame pointer. A signal trampoline: continue with the registers saved in the signal frame.
 *
 * Every BPF object that includes this header declares the same maps; the loader shares them
 * between objects (libbpf reuse_fd), so tables are built once for all probes.
 *
 * The parts, by job: unwind_maps.bpf.h (the maps and a walk's state), unwind_lookup.bpf.h (the
 * mapping and row of a pc), unwind_walk.bpf.h (the frame walk), unwind_memo.bpf.h (a thread's
 * stack recognised without a walk). Here: the stack of the current thread, taken from its memo
 * or walked, stored by id in `user_stacks` and counted (lks_unwind_user_stack).
 */
#ifndef LOCKSCOPE_UNWIND_BPF_H
#define LOCKSCOPE_UNWIND_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "unwind.h"
#include "unwind_x86_64.bpf.h"
#include "unwind_maps.bpf.h"
#include "unwind_lookup.bpf.h"
#include "unwind_walk.bpf.h"
#include "unwind_memo.bpf.h"

/* 64-bit mix of the stack's pcs and flags; the id is 31 bits of it (non-negative). */
static __always_inline __u32 lks_stack_hash(struct user_stack *stack)
{
	__u64 h = 0xcbf29ce484222325ULL ^ stack->flags;
	__u32 depth = stack->depth;

	for (int i = 0; i < LKS_MAX_USER_FRAMES; i++) {
		if (i >= depth)
			break;
		h ^= stack->pcs[i];
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	h ^= h >> 32;
	return (__u32)h & 0x7fffffff;
}

static __always_inline bool lks_same_stack(struct user_stack *a, struct user_stack *b)
{
	__u32 depth = a->depth;

	if (depth != b->depth || a->flags != b->flags)
		return false;
	for (int i = 0; i < LKS_MAX_USER_FRAMES; i++) {
		if (i >= depth)
			break;
		if (a->pcs[i] != b->pcs[i])
			return false;
	}
	return true;
}

/* Spends one unit of `budget` (a global counting down what may still be added to a map): false
 * when none is left. Read, then an add whose result is unused (kernels before 5.12 have no atomic
 * fetch): racing callers may overdraw it by one each, a bound on the order of the map, not a
 * count. The one budget rule of every probe (lks_store_stack's stacks, probe.bpf.h's keys). */
static __always_inline bool lks_spend(__s64 *budget)
{
	if (*budget <= 0)
		return false;
	__sync_fetch_and_add(budget, -1);
	return true;
}

/* Stores `stack` in `user_stacks` (see lks_unwind_user_stack_budget for `budget` and `spend`):
 * its id, or a negative errno. */
static __always_inline __s32 lks_store_stack(struct user_stack *stack,
					     struct unwind_counters *counters, __s64 *budget,
					     bool spend)
{
	struct user_stack *stored;
	__u32 id = lks_stack_hash(stack);
	long err;

	stored = bpf_map_lookup_elem(&user_stacks, &id);
	if (stored) {
		if (lks_same_stack(stored, stack))
			return id;
		counters->store_failures++;
		return -EEXIST;
	}
	if (budget && spend && !lks_spend(budget))
		return -ENOSPC;
	err = bpf_map_update_elem(&user_stacks, &id, stack, BPF_NOEXIST);
	if (err && err != -EEXIST) {
		counters->store_failures++;
		return err;
	}
	return id;
}

/* Counts a stack with `flags` (LKS_STACK_TRUNCATED or not) as taken. */
static __always_inline void lks_count_stack(struct unwind_counters *counters, __u32 flags)
{
	counters->stacks++;
	if (flags & LKS_STACK_TRUNCATED)
		counters->truncated++;
	else
		counters->complete++;
}

/* lks_unwind_user_stack_budget once its scratch entry `s` is reserved. `memo`: a constant, true
 * where the memo may be used (the task slot with the process tables). */
static __always_inline __s32 lks_unwind_user_stack_reserved(void *ctx, const bool compat,
							    __u32 slot, const bool procs,
							    __s64 *budget, bool spend,
							    struct unwind_scratch *s,
							    struct unwind_counters *counters,
							    struct unwind_config *config,
							    const bool memo)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), *generation;
	__u32 zero = 0, tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct unwind_walk walk = {};
	struct user_stack *stack, *remembered;
	__s32 id, hit = -1;
	bool use_memo = false;
	long err;

	stack = &s->stack;
	stack->depth = 0;
	stack->flags = 0;
	s->end = LKS_WALK_GOING;
	s->after_signal = 0;
	s->fallback.vma_found = 0;
	s->fallback.exe_found = 0;
	s->memo_ok = 0;
	lks_pending_uretprobes(s);
	if (config->user_stacks == LKS_USER_STACKS_FRAME_POINTERS) {
		err = bpf_get_stack(ctx, stack->pcs, sizeof(stack->pcs), BPF_F_USER_STACK);
		if (err < 0)
			return err;
		stack->depth = err / sizeof(stack->pcs[0]);
		stack->flags = LKS_STACK_FP_USED;
		s->end = stack->depth < LKS_MAX_USER_FRAMES ? LKS_WALK_COMPLETE : LKS_WALK_TRUNCATED;
		goto store;
	}
	if (!lks_user_regs(&s->regs))
		return -ENOENT;
	if (procs) {
		walk.proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
		if (!walk.proc)
			counters->unknown_process++;
	}
	if (memo && config->memo != LKS_MEMO_OFF && walk.proc && !s->return_instance) {
		generation = bpf_map_lookup_elem(&unwind_generation, &zero);
		/* ~0: user space could not publish a change (src/unwind/maps.rs): no memo. */
		if (generation && *generation != ~0ULL) {
			use_memo = true;
			s->memo.tgid = tgid;
			s->memo.generation = *generation;
			s->memo.pc = s->regs.pc;
			s->memo.sp = s->regs.sp;
			s->memo.fp = s->regs.fp;
			s->memo.words = 0;
			s->memo.span = 0;
			s->memo.fp_frames = 0;
			s->memo.fp_used = 0;
			hit = lks_memo_check(tid);
			if (hit >= 0 && config->memo == LKS_MEMO_ON) {
				lks_count_stack(counters, s->memo.flags);
				counters->frames += s->memo.depth;
				counters->fp_frames += s->memo.fp_frames;
				counters->memo_hits++;
				return hit;
			}
			s->memo.fp_frames = 0;
			s->memo_ok = 1;
			s->memo_fp = LKS_MEMO_FP_REGISTER;
		}
	}
	if (compat) {
		for (int i = 0; i < LKS_COMPAT_CALLS; i++) {
			if (procs ? lks_unwind_frames_compat(tgid)
				  : lks_unwind_frames_compat_interrupt(tgid))
				break;
		}
	} else {
		walk.s = s;
		walk.counters = counters;
		walk.slot = slot;
		walk.no_procs = !procs;
		bpf_loop(LKS_MAX_USER_FRAMES + 1, lks_unwind_step, &walk, 0);
	}

store:
	if (s->end != LKS_WALK_COMPLETE)
		stack->flags |= LKS_STACK_TRUNCATED;
	lks_count_stack(counters, stack->flags);
	id = lks_store_stack(stack, counters, budget, spend);
	if (!use_memo)
		return id;
	if (hit >= 0) {
		/* LKS_MEMO_VERIFY: the memo's answer against the walk's. */
		counters->memo_hits++;
		remembered = bpf_map_lookup_elem(&user_stacks, &hit);
		if (!remembered || !lks_same_stack(remembered, stack))
			counters->memo_mismatches++;
	}
	if (id >= 0 && s->memo_ok && s->end != LKS_WALK_GOING && lks_memo_store(tid, id))
		counters->memo_stores++;
	return id;
}

/*
 * Unwinds the current thread's user stack from the registers saved at kernel entry (or at the
 * interrupt that entered the kernel from user mode) and stores it in `user_stacks`; returns its
 * id, or a negative errno when nothing could be stored. A stack the thread's memo shows unchanged
 * is not unwound again (see lks_memo_check).
 * `compat`: for kernels without bpf_loop and bpf_find_vma (before 5.17). `slot`: the scratch
 * entry (enum unwind_slot). `procs`: whether the process tables may be used; a perf_event program
 * on a kernel before 6.1 may not (its verifier refuses any map that is not preallocated to
 * perf_event programs, and `unwind_procs` is not): it unwinds through the executable's and the
 * VMAs' file tables alone. `budget` (a constant NULL, or a global) with `spend`: how many stacks
 * not stored yet this caller may still add to `user_stacks` (decremented per addition; at 0 such
 * a stack is not stored: -ENOSPC), so that a caller with as many distinct stacks as events cannot
 * fill the map the others share. `spend` may vary at run time; a pointer that may be NULL at
 * run time would not pass older verifiers.
 * A program that interrupts another's walk on the same CPU and slot (tracepoint programs run
 * with interrupts enabled: a wakeup from a hard interrupt during a system call's program) gets
 * no user stack (-EBUSY, counted) rather than overwrite the walk under way; nesting is LIFO on
 * one CPU, so a flag set before the scratch is touched and cleared after is enough.
 */
static __always_inline __s32 lks_unwind_user_stack_budget(void *ctx, const bool compat, __u32 slot,
							  const bool procs, __s64 *budget,
							  bool spend)
{
	__u32 zero = 0, key = slot;
	struct unwind_config *config = bpf_map_lookup_elem(&unwind_config, &zero);
	struct unwind_scratch *s = lks_unwind_scratch(slot);
	struct unwind_counters *counters;
	__s32 id;

	counters = bpf_map_lookup_elem(&unwind_counters, &key);
	if (!s || !counters || !config)
		return -ENOMEM;
	if (config->user_stacks == LKS_USER_STACKS_NONE)
		return -ENOENT;
	if (s->busy) {
		counters->busy++;
		return -EBUSY;
	}
	s->busy = 1;
	asm volatile("" ::: "memory");
	id = lks_unwind_user_stack_reserved(ctx, compat, slot, procs, budget, spend, s, counters,
					    config, slot == LKS_UNWIND_SLOT_TASK && procs);
	asm volatile("" ::: "memory");
	s->busy = 0;
	return id;
}

/* lks_unwind_user_stack_budget without a budget. */
static __always_inline __s32 lks_unwind_user_stack_in(void *ctx, const bool compat, __u32 slot,
						      const bool procs)
{
	return lks_unwind_user_stack_budget(ctx, compat, slot, procs, NULL, false);
}

/* lks_unwind_user_stack_in for programs in the thread's context, with the process tables. */
static __always_inline __s32 lks_unwind_user_stack(void *ctx, const bool compat)
{
	return lks_unwind_user_stack_in(ctx, compat, LKS_UNWIND_SLOT_TASK, true);
}

#endif /* LOCKSCOPE_UNWIND_BPF_H */
