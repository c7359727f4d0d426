/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The memo of the in-kernel unwinder (part of unwind.bpf.h): a thread's stack recognised without
 * unwinding it again. The walk records what it read (unwind_walk.bpf.h, lks_memo_note); here the
 * proof that a memo's stack is the stack, and the check and store of a thread's memos.
 */
#ifndef LOCKSCOPE_UNWIND_MEMO_BPF_H
#define LOCKSCOPE_UNWIND_MEMO_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "unwind_maps.bpf.h"

/*
 * The memo: a thread's stack recognised without unwinding it again.
 *
 * A walk (lks_unwind_frame, from lks_user_regs's registers) is a function of
 *   (1) the registers it starts from: pc, sp and fp are the only ones it reads (x86_64 keeps
 *       every return address on the stack; an architecture with a link register would add it);
 *   (2) the process's mapping table (by tgid) and the rows and page indexes it points to;
 *   (3) the user-memory words it reads, at addresses computed from (1), (2) and earlier words:
 *       every return address, and the saved FP values that a later frame's rule uses (a saved
 *       FP no rule uses, like the starting fp when no rule uses it, changes nothing: see
 *       lks_memo_use_fp);
 *   (4) and, where used, the VMAs and executable of the file fallback, signal frames and the
 *       kernel's uretprobe records.
 * A walk that used none of (4) and read its words within LKS_MEMO_SPAN bytes above sp (at most
 * LKS_MEMO_WORDS words) is kept in `unwind_memos`, as its thread's memo for a hash of its pc and
 * sp (one of 1 << LKS_MEMO_WAY_BITS per thread): its tgid, the tables' generation when it
 * started, (1), every (offset above sp, value) of (3), and the id of the stack it stored. A
 * later walk of the same thread starting from the same pc and sp (and fp, if a rule used it), in
 * the same process, with the same generation (user space bumps it after every table change, so the
 * same generation means the same tables, or a change made during that walk, which a walk
 * started at the old generation could have seen as well) and no uretprobe pending, reads the
 * memo's span of its stack in one copy and compares every recorded word. All equal: by
 * induction on the frames the walk would look up the same rows for the same pcs, compute the
 * same addresses, use the same values and end the same way, so it would find the same stack,
 * which is the memo's id: user_stacks entries are never replaced or deleted while recording.
 * Any word differing (a return, another call, a changed saved register), any other register,
 * an exec (another mapping table comes with a new generation), a tid reused by another process
 * (another tgid), new tables, or a failed read: the stack is unwound as without the memo.
 * Words a walk did not read (below sp, between slots) cannot change what it finds.
 * LKS_MEMO_VERIFY unwinds every stack anyway and counts memo answers that differ.
 */

/* The key of the memo for the walk described in `m` (its registers) of thread `tid`. */
static __always_inline struct unwind_memo_key lks_memo_key(__u32 tid, struct unwind_memo *m)
{
	struct unwind_memo_key key = { .tid = tid };

	key.way = ((m->pc ^ (m->sp >> 4)) * 0x9e3779b97f4a7c15ULL) >> (64 - LKS_MEMO_WAY_BITS);
	return key;
}

/* Global (verified once, on its own, like lks_fallback_mapping; no pointer arguments for
 * kernels before 5.12): the id the current thread's memo gives for the walk described in the
 * task scratch's `memo` header (tgid, generation, registers), or -1. On a hit, copies the memo's
 * depth, flags and frame-pointer frames into that header for the counters. */
__noinline int lks_memo_check(__u32 tid)
{
	struct unwind_scratch *s = lks_unwind_scratch(LKS_UNWIND_SLOT_TASK);
	struct unwind_memo_buf *buf;
	struct unwind_memo_key key;
	struct unwind_memo *m;
	__u32 zero = 0, words;
	__u64 span, sp;

	if (!s)
		return -1;
	key = lks_memo_key(tid, &s->memo);
	m = bpf_map_lookup_elem(&unwind_memos, &key);
	if (!m || m->id < 0 || m->tgid != s->memo.tgid || m->generation != s->memo.generation ||
	    m->pc != s->memo.pc || m->sp != s->memo.sp || (m->fp_used && m->fp != s->memo.fp))
		return -1;
	span = m->span;
	words = m->words;
	sp = m->sp;
	if (span == 0 || span > LKS_MEMO_SPAN || words > LKS_MEMO_WORDS)
		return -1;
	buf = bpf_map_lookup_elem(&unwind_memo_buf, &zero);
	if (!buf || bpf_probe_read_user(buf->bytes, span, (void *)sp))
		return -1;
	for (int i = 0; i < LKS_MEMO_WORDS; i++) {
		__u32 offset;

		if (i >= words)
			break;
		offset = m->offsets[i] & (LKS_MEMO_SPAN - 1);
		if (*(__u64 *)(buf->bytes + offset) != m->values[i])
			return -1;
	}
	s->memo.depth = m->depth;
	s->memo.flags = m->flags;
	s->memo.fp_frames = m->fp_frames;
	return m->id;
}

/* Global, as lks_memo_check: keeps the walk just recorded in the task scratch as the current
 * thread's memo, with the id of the stack it stored. */
__noinline int lks_memo_store(__u32 tid, __s32 id)
{
	struct unwind_scratch *s = lks_unwind_scratch(LKS_UNWIND_SLOT_TASK);
	struct unwind_memo_key key;
	struct unwind_memo *m;
	__u32 words;

	if (!s)
		return 0;
	s->memo.id = id;
	s->memo.depth = s->stack.depth;
	s->memo.flags = s->stack.flags;
	key = lks_memo_key(tid, &s->memo);
	m = bpf_map_lookup_elem(&unwind_memos, &key);
	if (!m)
		return bpf_map_update_elem(&unwind_memos, &key, &s->memo, BPF_ANY) == 0;
	/* In place: nothing else reads this thread's entry meanwhile (see unwind_memos). The id
	 * first, so that a memo is never whole with another walk's words. */
	words = s->memo.words;
	if (words > LKS_MEMO_WORDS)
		return 0;
	m->id = -1;
	for (int i = 0; i < LKS_MEMO_WORDS; i++) {
		if (i >= words)
			break;
		m->offsets[i] = s->memo.offsets[i];
		m->values[i] = s->memo.values[i];
	}
	m->tgid = s->memo.tgid;
	m->words = words;
	m->generation = s->memo.generation;
	m->pc = s->memo.pc;
	m->sp = s->memo.sp;
	m->fp = s->memo.fp;
	m->fp_used = s->memo.fp_used;
	m->depth = s->memo.depth;
	m->fp_frames = s->memo.fp_frames;
	m->flags = s->memo.flags;
	m->span = s->memo.span;
	m->id = id;
	return 1;
}

#endif /* LOCKSCOPE_UNWIND_MEMO_BPF_H */
