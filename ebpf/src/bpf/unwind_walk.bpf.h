/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The frame walk of the in-kernel unwinder (part of unwind.bpf.h): per frame, the pc's row, the
 * CFA, the return address and the saved frame pointer read from user memory (by frame pointer
 * where a pc has no CFI; through the signal frame after a signal; past uretprobe trampolines),
 * recording for the memo the words the walk depends on; as a bpf_loop callback, or a few frames
 * per global function call on kernels without bpf_loop.
 */
#ifndef LOCKSCOPE_UNWIND_WALK_BPF_H
#define LOCKSCOPE_UNWIND_WALK_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "unwind_maps.bpf.h"
#include "unwind_lookup.bpf.h"

/* Sets the walk's uretprobe state (see struct unwind_scratch) for the current thread: one read
 * for a thread that never hit a uprobe. */
static __always_inline void lks_pending_uretprobes(struct unwind_scratch *s)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct uprobe_task *utask = BPF_CORE_READ(task, utask);

	s->return_instance = utask ? (__u64)BPF_CORE_READ(utask, return_instances) : 0;
	s->uretprobe_trampoline =
		s->return_instance ? BPF_CORE_READ(task, mm, uprobes_state.xol_area, vaddr) : 0;
}

static __always_inline long lks_walk_truncated(struct unwind_scratch *s)
{
	s->end = LKS_WALK_TRUNCATED;
	return 1;
}

/* A read that the memo's check could not repeat: this walk is not memoized. */
static __always_inline long lks_walk_unrepeatable(struct unwind_scratch *s)
{
	s->memo_ok = 0;
	return lks_walk_truncated(s);
}

/* Records for the memo that the walk read `value` at `addr`. */
static __always_inline void lks_memo_note(struct unwind_scratch *s, __u64 addr, __u64 value)
{
	struct unwind_memo *m = &s->memo;
	__u32 n = m->words;
	__u64 offset = addr - m->sp;

	if (!s->memo_ok)
		return;
	if (addr < m->sp || offset > LKS_MEMO_SPAN - sizeof(__u64) || n >= LKS_MEMO_WORDS) {
		s->memo_ok = 0;
		return;
	}
	m->offsets[n & (LKS_MEMO_WORDS - 1)] = offset;
	m->values[n & (LKS_MEMO_WORDS - 1)] = value;
	m->words = n + 1;
	if (offset + sizeof(__u64) > m->span)
		m->span = offset + sizeof(__u64);
}

/*
 * The frame pointer is a general register in code built without frame pointers: its saved
 * values are often loop counters or pointers that change from one wait to the next without
 * changing the stack. A walk depends on an FP value only where a frame's rule uses it (CFA from
 * FP, or a frame-pointer frame), so the word it came from is recorded then, not when it is read:
 * the last FP read is kept pending (memo_fp: LKS_MEMO_FP_WORD), or the FP register the walk
 * started from (LKS_MEMO_FP_REGISTER: then the memo compares the register, memo.fp_used).
 */
enum unwind_memo_fp {
	/* The current FP value is recorded already (or needs no record). */
	LKS_MEMO_FP_RECORDED = 0,
	/* It is the starting register. */
	LKS_MEMO_FP_REGISTER = 1,
	/* It is the word at memo_fp_addr. */
	LKS_MEMO_FP_WORD = 2,
};

/* The walk read the FP value `value` at `addr`: pending until a rule uses it. */
static __always_inline void lks_memo_fp_read(struct unwind_scratch *s, __u64 addr, __u64 value)
{
	s->memo_fp = LKS_MEMO_FP_WORD;
	s->memo_fp_addr = addr;
	s->memo_fp_value = value;
}

/* A rule uses the current FP value: the memo must compare where it came from. */
static __always_inline void lks_memo_use_fp(struct unwind_scratch *s)
{
	if (s->memo_fp == LKS_MEMO_FP_WORD)
		lks_memo_note(s, s->memo_fp_addr, s->memo_fp_value);
	else if (s->memo_fp == LKS_MEMO_FP_REGISTER)
		s->memo.fp_used = 1;
	s->memo_fp = LKS_MEMO_FP_RECORDED;
}

/* One frame: records the current pc, then computes the caller's registers; 1 when the walk
 * ended. `compat`: the program runs where bpf_find_vma does not exist. */
static __always_inline long lks_unwind_frame(struct unwind_walk *w, const bool compat)
{
	struct unwind_scratch *s = w->s;
	struct user_stack *stack = &s->stack;
	struct unwind_counters *counters = w->counters;
	struct unwind_mapping *mapping = NULL;
	struct unwind_row row = {};
	__u64 pc = s->regs.pc, lookup, cfa, ra, fp = s->regs.fp;
	__u32 depth = stack->depth;
	__u8 kind = LKS_CFA_NONE;
	__s8 fp_offset8 = 0;

	if (depth >= LKS_MAX_USER_FRAMES) {
		counters->too_deep++;
		return lks_walk_unrepeatable(s);
	}
	stack->pcs[depth] = pc;
	stack->depth = depth + 1;
	counters->frames++;

	/* A return address is after its call, which may be the last instruction of the function:
	 * the call itself is at pc - 1. The leaf pc and an interrupted pc are exact. */
	lookup = (depth == 0 || s->after_signal) ? pc : pc - 1;
	s->after_signal = 0;
	if (w->last_mapping && w->last_mapping->start <= lookup && lookup < w->last_mapping->end) {
		mapping = w->last_mapping;
	} else if (w->proc) {
		mapping = lks_find_mapping(w->proc, lookup);
		w->last_mapping = mapping;
	}
	if (!mapping) {
		/* Code mapped since the last refresh (dlopen, exec), JIT code, or a bad return
		 * address: use the file's table if the VMA has one loaded. The VMAs are not among
		 * what a memo's check sees. */
		s->memo_ok = 0;
		if (w->proc)
			counters->unknown_mapping++;
		if (compat ? lks_fallback_mapping_compat(lookup, w->slot)
			   : lks_fallback_mapping(lookup, w->slot)) {
			mapping = &s->fallback.out;
			counters->file_fallbacks++;
		} else if (w->proc || w->no_procs)
			/* A frame-pointer guess from here could invent frames. */
			return lks_walk_truncated(s);
	}
	if (mapping && !mapping->rows && mapping->first_row == LKS_UNWIND_TABLE_PENDING) {
		/* Its table is still being built: walking on by frame pointer could invent frames
		 * through code built without them, so the stack ends here, flagged and counted. */
		stack->flags |= LKS_STACK_TABLE_PENDING;
		counters->table_pending++;
		return lks_walk_unrepeatable(s);
	}
	if (mapping && mapping->rows) {
		__u64 packed = lks_find_row(mapping->first_row, mapping->rows, mapping->first_page,
					    mapping->pages, lookup - mapping->bias);

		__builtin_memcpy(&row, &packed, sizeof(row));
		kind = row.kind;
		fp_offset8 = row.fp_offset8;
	}

	switch (kind) {
	case LKS_CFA_END:
		s->end = LKS_WALK_COMPLETE;
		return 1;
	case LKS_CFA_SIGNAL:
		/* The signal frame's words are not recorded: such a walk is not memoized. */
		s->memo_ok = 0;
		if (!lks_signal_frame_regs(&s->regs)) {
			counters->read_failures++;
			return lks_walk_truncated(s);
		}
		s->after_signal = 1;
		return 0;
	case LKS_CFA_SP:
		cfa = s->regs.sp + row.cfa_offset;
		break;
	case LKS_CFA_FP:
		lks_memo_use_fp(s);
		cfa = fp + row.cfa_offset;
		break;
	case LKS_CFA_NONE:
		/* No CFI: a frame-pointer frame, if FP plausibly points into this stack. */
		lks_memo_use_fp(s);
		if (fp < s->regs.sp || fp - s->regs.sp > (8 << 20))
			return lks_walk_truncated(s);
		stack->flags |= LKS_STACK_FP_USED;
		counters->fp_frames++;
		s->memo.fp_frames++;
		cfa = fp + LKS_FP_FRAME_SIZE;
		fp_offset8 = -LKS_FP_FRAME_SIZE / 8;
		break;
	default:
		counters->unsupported++;
		return lks_walk_truncated(s);
	}

	if (fp_offset8 * 8 == LKS_RA_CFA_OFFSET - 8) {
		/* The usual frame: saved FP just below the return address; one read for both. */
		__u64 pair[2];

		if (bpf_probe_read_user(pair, sizeof(pair), (void *)(cfa + LKS_RA_CFA_OFFSET - 8))) {
			counters->read_failures++;
			return lks_walk_unrepeatable(s);
		}
		fp = pair[0];
		ra = pair[1];
		lks_memo_note(s, cfa + LKS_RA_CFA_OFFSET, ra);
		lks_memo_fp_read(s, cfa + LKS_RA_CFA_OFFSET - 8, fp);
	} else {
		if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa + LKS_RA_CFA_OFFSET))) {
			counters->read_failures++;
			return lks_walk_unrepeatable(s);
		}
		lks_memo_note(s, cfa + LKS_RA_CFA_OFFSET, ra);
		if (fp_offset8) {
			if (bpf_probe_read_user(&fp, sizeof(fp),
						(void *)(cfa + (__s64)fp_offset8 * 8))) {
				counters->read_failures++;
				return lks_walk_unrepeatable(s);
			}
			lks_memo_fp_read(s, cfa + (__s64)fp_offset8 * 8, fp);
		}
	}
	if (ra == s->uretprobe_trampoline && s->return_instance) {
		/* A uretprobe (the mutex-hold probe's, anyone's) is pending on this call: its return
		 * address is in the kernel's record of the hit. */
		struct return_instance *ri = (void *)s->return_instance;

		ra = BPF_CORE_READ(ri, orig_ret_vaddr);
		s->return_instance = (__u64)BPF_CORE_READ(ri, next);
	}
	if (ra == 0) {
		/* A zero return address ends frame-pointer chains (and some hand-written entries). */
		s->end = LKS_WALK_COMPLETE;
		return 1;
	}
	/* The stack grows down: a caller's frame is above its callee's. Anything else is a loop. */
	if (cfa <= s->regs.sp)
		return lks_walk_truncated(s);
	s->regs.pc = ra;
	s->regs.sp = cfa;
	s->regs.fp = fp;
	return 0;
}

/* bpf_loop callback (Linux 5.17+): one frame. */
static long lks_unwind_step(__u64 index, void *data)
{
	return lks_unwind_frame(data, false);
}

/* Frames per call of lks_unwind_frames_compat, and calls per stack (together one more than
 * LKS_MAX_USER_FRAMES, so that a deeper stack is seen as too deep). */
#define LKS_COMPAT_FRAMES_PER_CALL 4
#define LKS_COMPAT_CALLS ((LKS_MAX_USER_FRAMES + LKS_COMPAT_FRAMES_PER_CALL) / LKS_COMPAT_FRAMES_PER_CALL)

/*
 * Kernels without bpf_loop (before 5.17): unwinds up to LKS_COMPAT_FRAMES_PER_CALL frames of the
 * walk in this CPU's scratch `slot`, of process `tgid`; 1 when the walk ended. Global functions,
 * so the verifier checks a few frames once instead of LKS_MAX_USER_FRAMES frames in every program
 * (a bounded loop of them all is more than older verifiers take); the state is in the scratch map
 * because before 5.12 a global function could take no pointer. `procs`: see
 * lks_unwind_user_stack_budget.
 */
static __always_inline int lks_unwind_frames_compat_in(__u32 tgid, __u32 slot, const bool procs)
{
	struct unwind_walk w = {};
	__u32 key = slot;

	w.s = lks_unwind_scratch(slot);
	w.counters = bpf_map_lookup_elem(&unwind_counters, &key);
	if (!w.s || !w.counters)
		return 1;
	w.slot = slot;
	if (procs)
		w.proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
	else
		w.no_procs = 1;
	for (int i = 0; i < LKS_COMPAT_FRAMES_PER_CALL; i++) {
		if (lks_unwind_frame(&w, true))
			return 1;
	}
	return 0;
}

__noinline int lks_unwind_frames_compat(__u32 tgid)
{
	return lks_unwind_frames_compat_in(tgid, LKS_UNWIND_SLOT_TASK, true);
}

/* The interrupt slot's, without the process tables: only the `cpu` probe's compat program, a
 * perf_event program, calls it (see lks_unwind_user_stack). */
__noinline int lks_unwind_frames_compat_interrupt(__u32 tgid)
{
	return lks_unwind_frames_compat_in(tgid, LKS_UNWIND_SLOT_INTERRUPT, false);
}

#endif /* LOCKSCOPE_UNWIND_WALK_BPF_H */
