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
 * or walked, stored by id in `user_stacks` and counted (lks_unwind_user_stack): the walk and the
 * store as global functions, which the verifier checks once per program (lks_unwind_task).
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
 * count. The one budget rule of every probe (the stacks of lks_unwind_user_stack_budget, which
 * reads before its walk and spends after its store, and probe.bpf.h's keys). */
static __always_inline bool lks_spend(__s64 *budget)
{
	if (*budget <= 0)
		return false;
	__sync_fetch_and_add(budget, -1);
	return true;
}

/* Bits of the `how` argument of the global unwinding functions (lks_unwind_task...). */
/* A stack not stored yet may be added to `user_stacks` (the caller's budget allows it). */
#define LKS_UNWIND_MAY_ADD 1u
/* The caller took the stack itself (frame pointers: bpf_get_stack into the scratch's stack and
 * end): store it, nothing to walk. */
#define LKS_UNWIND_TAKEN 2u
/* Set in their result (beside the stack's id) when the store added the stack to `user_stacks`:
 * the caller spends a unit of its budget. */
#define LKS_UNWIND_ADDED (1LL << 32)

/* Stores `stack` in `user_stacks`, adding it only if `may_add` (else -ENOSPC): its id, or a
 * negative errno; `*added` says whether this call added it. */
static __always_inline __s32 lks_store_stack(struct user_stack *stack,
					     struct unwind_counters *counters, bool may_add,
					     bool *added)
{
	struct user_stack *stored;
	__u32 id = lks_stack_hash(stack);
	long err;

	*added = false;
	stored = bpf_map_lookup_elem(&user_stacks, &id);
	if (stored) {
		if (lks_same_stack(stored, stack))
			return id;
		counters->store_failures++;
		return -EEXIST;
	}
	if (!may_add)
		return -ENOSPC;
	err = bpf_map_update_elem(&user_stacks, &id, stack, BPF_NOEXIST);
	if (err && err != -EEXIST) {
		counters->store_failures++;
		return err;
	}
	*added = !err;
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

/* Global (verified once, on its own: inlined, its loops over the frames were explored again for
 * every state of the walk that reached them): stores the stack of this CPU's scratch entry
 * `slot` (lks_store_stack, adding it only if `may_add`); its id, with LKS_UNWIND_ADDED when
 * this call added it, or a negative errno. */
__noinline __s64 lks_store_scratch_stack(__u32 slot, __u32 may_add)
{
	struct unwind_scratch *s = lks_unwind_scratch(slot);
	struct unwind_counters *counters;
	__u32 key = slot;
	bool added;
	__s32 id;

	counters = bpf_map_lookup_elem(&unwind_counters, &key);
	if (!s || !counters)
		return -ENOMEM;
	id = lks_store_stack(&s->stack, counters, may_add, &added);
	if (id < 0)
		return id;
	return added ? id | LKS_UNWIND_ADDED : id;
}

/* Global, as lks_store_scratch_stack: whether the stack stored as `id` is the one in the task
 * scratch entry (LKS_MEMO_VERIFY: the memo's answer against the walk's). */
__noinline int lks_memo_verified(__s32 id)
{
	struct unwind_scratch *s = lks_unwind_scratch(LKS_UNWIND_SLOT_TASK);
	struct user_stack *remembered = bpf_map_lookup_elem(&user_stacks, &id);

	return s && remembered && lks_same_stack(remembered, &s->stack);
}

/*
 * The body of the global unwinding functions (lks_unwind_task and its variants): the current
 * thread's user stack walked in its CPU's scratch entry `slot` (reserved by the caller, see
 * lks_unwind_user_stack_budget), from its memo when that shows it unchanged, and stored. `how`:
 * LKS_UNWIND_* bits. Returns the stack's id (with LKS_UNWIND_ADDED when the store added it), or a
 * negative errno. `compat`: for kernels without bpf_loop and bpf_find_vma. `procs`: whether the
 * process tables may be used (see lks_unwind_user_stack_budget). The memo is used in the task
 * slot with the process tables.
 */
static __always_inline __s64 lks_unwind_walk_store(const bool compat, const __u32 slot,
						   const bool procs, __u32 how)
{
	const bool memo = slot == LKS_UNWIND_SLOT_TASK && procs;
	__u64 *generation;
	/* The ids read where used, not kept across the walk: a stack slot fewer in the frame, and
	 * the chain of calls from a program through the walk to bpf_find_vma's callback is at the
	 * 512 bytes of BPF stack that 6.1 allows. */
	__u32 zero = 0, key = slot, tgid = bpf_get_current_pid_tgid() >> 32;
	struct unwind_scratch *s = lks_unwind_scratch(slot);
	struct unwind_walk walk = {};
	struct unwind_counters *counters;
	struct unwind_config *config;
	struct user_stack *stack;
	__s64 stored;
	__s32 hit = -1;
	bool use_memo = false;

	counters = bpf_map_lookup_elem(&unwind_counters, &key);
	config = bpf_map_lookup_elem(&unwind_config, &zero);
	if (!s || !counters || !config)
		return -ENOMEM;
	stack = &s->stack;
	if (how & LKS_UNWIND_TAKEN)
		goto store;
	stack->depth = 0;
	stack->flags = 0;
	s->end = LKS_WALK_GOING;
	s->after_signal = 0;
	s->fallback.vma_found = 0;
	s->fallback.exe_found = 0;
	s->memo_ok = 0;
	lks_pending_uretprobes(s);
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
			hit = lks_memo_check((__u32)bpf_get_current_pid_tgid());
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
	stored = lks_store_scratch_stack(slot, how & LKS_UNWIND_MAY_ADD);
	if (use_memo) {
		if (hit >= 0) {
			counters->memo_hits++;
			if (!lks_memo_verified(hit))
				counters->memo_mismatches++;
		}
		if (stored >= 0 && s->memo_ok && s->end != LKS_WALK_GOING &&
		    lks_memo_store((__u32)bpf_get_current_pid_tgid(), stored & 0x7fffffff))
			counters->memo_stores++;
	}
	return stored;
}

/*
 * The unwinding as global functions, one per variant of walk a program may take: the verifier
 * checks a global function once, on its own, whatever the states of its callers, where inlined
 * (as it was) the whole unwinder was verified again for every path of the program reaching it,
 * which was most of the verifier's time on the probes that load with the recorder (0.2-0.7 s of
 * system time before each recording). Scalars only, as every global function here: before Linux
 * 5.12 a global function could take no pointer but the context, and these take none (their state
 * is in the scratch map). Each program carries only those it calls.
 */
/* Programs in the thread's context (the task slot), with the process tables. */
__noinline __s64 lks_unwind_task(__u32 how)
{
	return lks_unwind_walk_store(false, LKS_UNWIND_SLOT_TASK, true, how);
}

__noinline __s64 lks_unwind_task_compat(__u32 how)
{
	return lks_unwind_walk_store(true, LKS_UNWIND_SLOT_TASK, true, how);
}

/* The `cpu` probe's perf_event program (the interrupt slot): with the process tables where it
 * is not compat, without them where it is (a perf_event program on a kernel before 6.1 may not
 * use maps that are not preallocated, and `unwind_procs` is not). */
__noinline __s64 lks_unwind_interrupt(__u32 how)
{
	return lks_unwind_walk_store(false, LKS_UNWIND_SLOT_INTERRUPT, true, how);
}

__noinline __s64 lks_unwind_interrupt_compat(__u32 how)
{
	return lks_unwind_walk_store(true, LKS_UNWIND_SLOT_INTERRUPT, false, how);
}

/*
 * Unwinds the current thread's user stack from the registers saved at kernel entry (or at the
 * interrupt that entered the kernel from user mode) and stores it in `user_stacks`; returns its
 * id, or a negative errno when nothing could be stored. A stack the thread's memo shows unchanged
 * is not unwound again (see lks_memo_check).
 * `compat`: for kernels without bpf_loop and bpf_find_vma (before 5.17). `slot`: the scratch
 * entry (enum unwind_slot). The task slot's walks use the process tables; the interrupt slot's
 * (a perf_event program, the `cpu` probe's) use them only where not `compat`: a perf_event
 * program on a kernel before 6.1 may not (its verifier refuses any map that is not preallocated
 * to perf_event programs, and `unwind_procs` is not), so it unwinds through the executable's and
 * the VMAs' file tables alone. `budget` (a constant NULL, or a global) with `spend`: how many
 * stacks not stored yet this caller may still add to `user_stacks` (decremented per addition; at
 * 0 such a stack is not stored: -ENOSPC), so that a caller with as many distinct stacks as events
 * cannot fill the map the others share; read before the walk and spent after the store (the rule
 * of lks_spend). `spend` may vary at run time; a pointer that may be NULL at run time would not
 * pass older verifiers.
 * A program that interrupts another's walk on the same CPU and slot (tracepoint programs run
 * with interrupts enabled: a wakeup from a hard interrupt during a system call's program) gets
 * no user stack (-EBUSY, counted) rather than overwrite the walk under way; nesting is LIFO on
 * one CPU, so a flag set before the scratch is touched and cleared after is enough.
 * Only this part is inlined in the programs: the walk and the store are global functions
 * (lks_unwind_task...), and the frame-pointer walk, which needs the context, is taken here.
 */
static __always_inline __s32 lks_unwind_user_stack_budget(void *ctx, const bool compat, __u32 slot,
							  __s64 *budget, bool spend)
{
	__u32 zero = 0, key = slot, how = 0;
	struct unwind_config *config = bpf_map_lookup_elem(&unwind_config, &zero);
	struct unwind_scratch *s = lks_unwind_scratch(slot);
	struct unwind_counters *counters;
	struct user_stack *stack;
	__s64 result;
	long err;

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
	if (!budget || !spend || *budget > 0)
		how |= LKS_UNWIND_MAY_ADD;
	if (config->user_stacks == LKS_USER_STACKS_FRAME_POINTERS) {
		stack = &s->stack;
		err = bpf_get_stack(ctx, stack->pcs, sizeof(stack->pcs), BPF_F_USER_STACK);
		if (err < 0) {
			result = err;
			goto done;
		}
		stack->depth = err / sizeof(stack->pcs[0]);
		stack->flags = LKS_STACK_FP_USED;
		s->end = stack->depth < LKS_MAX_USER_FRAMES ? LKS_WALK_COMPLETE : LKS_WALK_TRUNCATED;
		how |= LKS_UNWIND_TAKEN;
	}
	if (slot == LKS_UNWIND_SLOT_TASK)
		result = compat ? lks_unwind_task_compat(how) : lks_unwind_task(how);
	else
		result = compat ? lks_unwind_interrupt_compat(how) : lks_unwind_interrupt(how);
done:
	asm volatile("" ::: "memory");
	s->busy = 0;
	if (result < 0)
		return result;
	if ((result & LKS_UNWIND_ADDED) && budget && spend)
		__sync_fetch_and_add(budget, -1);
	return (__s32)(result & 0x7fffffff);
}

/* lks_unwind_user_stack_budget without a budget. */
static __always_inline __s32 lks_unwind_user_stack_in(void *ctx, const bool compat, __u32 slot)
{
	return lks_unwind_user_stack_budget(ctx, compat, slot, NULL, false);
}

/* lks_unwind_user_stack_in for programs in the thread's context. */
static __always_inline __s32 lks_unwind_user_stack(void *ctx, const bool compat)
{
	return lks_unwind_user_stack_in(ctx, compat, LKS_UNWIND_SLOT_TASK);
}

#endif /* LOCKSCOPE_UNWIND_BPF_H */
