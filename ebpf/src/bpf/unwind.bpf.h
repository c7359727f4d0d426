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
 */
#ifndef LOCKSCOPE_UNWIND_BPF_H
#define LOCKSCOPE_UNWIND_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "unwind.h"
#include "unwind_x86_64.bpf.h"

/* Files with a table that a VMA lookup can find. */
#define LKS_UNWIND_MAX_FILES 4096
/* Distinct user stacks kept. */
#define LKS_USER_STACK_ENTRIES 16384

#ifndef EEXIST
#define EEXIST 17
#endif
#ifndef ENOENT
#define ENOENT 2
#endif
#ifndef ENOMEM
#define ENOMEM 12
#endif
#ifndef ENOSPC
#define ENOSPC 28
#endif
#ifndef EBUSY
#define EBUSY 16
#endif

/* The rows of every loaded unwind table; written by user space through mmap. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, LKS_UNWIND_ROWS);
	__type(key, __u32);
	__type(value, struct unwind_row);
} unwind_rows SEC(".maps");

/* The page indexes of every loaded unwind table (see struct unwind_mapping); mmap'ed too. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, LKS_UNWIND_PAGES);
	__type(key, __u32);
	/* Row index (relative to the table's first row) in effect at the page's start. */
	__type(value, __u64);
} unwind_pages SEC(".maps");

/* Mapping table of each traced process, by tgid. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* Replaced values are freed after an RCU grace period, never reused under a reader. */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, LKS_UNWIND_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct unwind_proc);
} unwind_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unwind_config);
} unwind_config SEC(".maps");

/* Tables by file, for mappings not (yet) in a process table. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LKS_UNWIND_MAX_FILES);
	__type(key, struct unwind_file_key);
	__type(value, struct unwind_file);
} unwind_files SEC(".maps");

/* Unwound user stacks by id (a hash of their pcs and flags). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LKS_USER_STACK_ENTRIES);
	__type(key, __u32);
	__type(value, struct user_stack);
} user_stacks SEC(".maps");

/* Memos kept (see lks_memo_check), and per thread: a thread that waits at a few sites in turn
 * (a condition variable's wait, then its mutex) keeps one for each, by a hash of pc and sp. */
#define LKS_UNWIND_MAX_MEMOS 16384
#define LKS_MEMO_WAY_BITS 4

struct unwind_memo_key {
	__u32 tid;
	__u32 way;
};

/* The last walks of each thread, by thread id and way. Not preallocated: a deleted value is freed
 * after an RCU grace period, never reused under a reader (an LRU map would hand an evicted
 * element to another thread at once). Only the thread itself reads and writes its entries, from
 * its own CPU; user space deletes those of threads that are gone. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, LKS_UNWIND_MAX_MEMOS);
	__type(key, struct unwind_memo_key);
	__type(value, struct unwind_memo);
} unwind_memos SEC(".maps");

/* The stack memory a memo's check reads, per CPU (8 bytes more than the span: a word may start
 * at any offset below it). */
struct unwind_memo_buf {
	__u8 bytes[LKS_MEMO_SPAN + 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unwind_memo_buf);
} unwind_memo_buf SEC(".maps");

/* Generation of the unwind tables: user space adds one after every change to `unwind_procs`,
 * `unwind_files`, `unwind_rows` or `unwind_pages` (after the change: see lks_memo_lookup). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} unwind_generation SEC(".maps");

/* How a walk ended. */
enum unwind_end {
	LKS_WALK_GOING = 0,
	LKS_WALK_COMPLETE = 1,
	LKS_WALK_TRUNCATED = 2,
};

/* The file fallback's state across the frames of one walk (see lks_fallback_mapping). */
struct unwind_fallback {
	/* The answer for the current pc. */
	struct unwind_mapping out;
	/* The last VMA found, and the main executable once found: later frames in them need no
	 * VMA walk. */
	struct unwind_mapping vma;
	struct unwind_mapping exe;
	__u32 vma_found;
	__u32 exe_found;
};

/* The state of one walk, per CPU and context (enum unwind_slot): the stack being built and
 * everything that changes from frame to frame. In a map, not on the BPF stack: the probe, the
 * frame step, the file fallback and its VMA callback share 512 bytes of stack (older verifiers
 * count all four). */
struct unwind_scratch {
	struct user_stack stack;
	struct unwind_regs regs;
	/* The current pc was interrupted by a signal, not a return address: look it up as is. */
	__u32 after_signal;
	/* enum unwind_end */
	__u32 end;
	/* Pending uretprobes of the thread: the address of their trampoline, which replaced the
	 * return addresses of the probed calls on the stack, and the kernel's record of the next
	 * one to restore (struct return_instance, innermost first); 0 when none. */
	__u64 uretprobe_trampoline;
	__u64 return_instance;
	struct unwind_fallback fallback;
	/* The walk being recorded for the thread's memo, and whether it still may be (cleared by
	 * whatever the memo's check would not see: a signal frame, the file fallback, a failed
	 * read, more words or a wider span than a memo holds). */
	struct unwind_memo memo;
	__u32 memo_ok;
	/* enum unwind_memo_fp: where the current FP value came from (see lks_memo_use_fp). */
	__u32 memo_fp;
	__u64 memo_fp_addr;
	__u64 memo_fp_value;
	/* A walk is in progress in this entry (see lks_unwind_user_stack_budget). */
	__u32 busy;
};

/*
 * Which scratch (and counters) entry of its CPU a walk uses. Tracepoint and raw_tp programs run
 * with interrupts enabled (sys_enter, sys_exit, contention_end) and do not take bpf_prog_active,
 * so the `cpu` probe's perf_event program (a cpu-clock hrtimer, in hard interrupt context) can
 * interrupt one of their walks on the same CPU: it walks in an entry of its own, and nothing
 * interrupts it in turn (hrtimer interrupts do not nest, and no other program uses its entry).
 */
enum unwind_slot {
	/* Programs running in the thread's context: tracepoints, raw_tp, tp_btf, uprobes. */
	LKS_UNWIND_SLOT_TASK = 0,
	/* The perf_event program of the `cpu` probe. */
	LKS_UNWIND_SLOT_INTERRUPT = 1,
};
#define LKS_UNWIND_SLOTS 2

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LKS_UNWIND_SLOTS);
	__type(key, __u32);
	__type(value, struct unwind_scratch);
} unwind_scratch SEC(".maps");

/* Per CPU and slot, so that an interrupting walk's counts are not lost to the walk it
 * interrupted (the Rust side sums both). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LKS_UNWIND_SLOTS);
	__type(key, __u32);
	__type(value, struct unwind_counters);
} unwind_counters SEC(".maps");

/* The pointers of one walk, on the BPF stack (a map value cannot hold pointers). */
struct unwind_walk {
	struct unwind_scratch *s;
	struct unwind_proc *proc;
	struct unwind_counters *counters;
	/* The mapping of the previous frame: consecutive frames are often in the same one. */
	struct unwind_mapping *last_mapping;
	/* enum unwind_slot of the walk. */
	__u32 slot;
	/* The walk cannot use the process tables (`unwind_procs`): a pc outside the executable
	 * and the VMAs the file fallback finds ends it, as a pc outside a known table does. */
	__u32 no_procs;
};

static __always_inline struct unwind_scratch *lks_unwind_scratch(__u32 slot)
{
	__u32 key = slot;

	return bpf_map_lookup_elem(&unwind_scratch, &key);
}

/* Into `m`: the table of `file` for the VMA [start, end) that maps it from `file_offset`. */
static __always_inline void lks_describe_vma(struct unwind_mapping *m, struct unwind_file *file,
					     __u64 start, __u64 end, __u64 file_offset)
{
	m->start = start;
	m->end = end;
	/* rel = pc - start + file_offset + vaddr_minus_offset - base */
	m->bias = start - file_offset - file->vaddr_minus_offset + file->base;
	m->first_row = file->first_row;
	m->rows = file->rows;
	m->first_page = file->first_page;
	m->pages = file->pages;
}

/* The table of the file a VMA maps, if loaded. */
static __always_inline struct unwind_file *lks_vma_file(struct vm_area_struct *vma)
{
	struct unwind_file_key key = {};
	struct file *vm_file = BPF_CORE_READ(vma, vm_file);

	if (!vm_file)
		return NULL;
	key.ino = BPF_CORE_READ(vm_file, f_inode, i_ino);
	key.dev = BPF_CORE_READ(vm_file, f_inode, i_sb, s_dev);
	return bpf_map_lookup_elem(&unwind_files, &key);
}

/*
 * Into `m`: the main executable's code (mm->start_code to end_code) through mm->exe_file's
 * table, without a VMA walk. False when pc is elsewhere or the file has no table.
 */
static __always_inline bool lks_exe_mapping(struct unwind_mapping *m, __u64 pc)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 start = BPF_CORE_READ(task, mm, start_code), end = BPF_CORE_READ(task, mm, end_code);
	struct unwind_file_key key = {};
	struct unwind_file *file;
	struct file *exe;

	if (pc < start || pc >= end)
		return false;
	exe = BPF_CORE_READ(task, mm, exe_file);
	if (!exe)
		return false;
	key.ino = BPF_CORE_READ(exe, f_inode, i_ino);
	key.dev = BPF_CORE_READ(exe, f_inode, i_sb, s_dev);
	file = bpf_map_lookup_elem(&unwind_files, &key);
	/* The kernel's start_code/end_code span the executable segments on current kernels; older
	 * ones started start_code at the lowest segment of any kind, which would shift the bias: the
	 * span must match the file's, else the VMA walk decides. */
	if (!file || start < file->text_vaddr ||
	    end - start != file->text_end_vaddr - file->text_vaddr)
		return false;
	m->start = start;
	m->end = end;
	/* rel = pc - load bias - base, load bias = start_code - text_vaddr */
	m->bias = start - file->text_vaddr + file->base;
	m->first_row = file->first_row;
	m->rows = file->rows;
	m->first_page = file->first_page;
	m->pages = file->pages;
	return true;
}

/* What lks_vma_callback found. */
struct unwind_vma_search {
	struct unwind_mapping mapping;
	__u32 found;
};

/* bpf_find_vma callback: describes the VMA with its file's table, if loaded. */
static long lks_vma_callback(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct unwind_vma_search *s = data;
	struct unwind_file *file = lks_vma_file(vma);

	if (!file)
		return 0;
	lks_describe_vma(&s->mapping, file, BPF_CORE_READ(vma, vm_start), BPF_CORE_READ(vma, vm_end),
			 BPF_CORE_READ(vma, vm_pgoff) << 12);
	s->found = 1;
	return 0;
}

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

/* Before Linux 6.1 a process's VMAs were a list sorted by address (mm->mmap, vma->vm_next); the
 * vendored vmlinux.h is newer, so these flavors name the old fields for CO-RE. */
struct mm_struct___vma_list {
	struct vm_area_struct *mmap;
} __attribute__((preserve_access_index));

struct vm_area_struct___vma_list {
	struct vm_area_struct *vm_next;
} __attribute__((preserve_access_index));

/* VMAs the compat fallback looks at before giving up (a small program maps its libraries within
 * the first few dozen). */
#define LKS_COMPAT_MAX_VMAS 96

/* Into `out`: the VMA holding `pc`, walked on the VMA list, when it maps a file with a table.
 * The list is read without the mmap lock, as every read here is: a VMA changing under the walk
 * gives a wrong answer at worst (a cut or wrong stack), never a fault. */
static __always_inline bool lks_vma_list_mapping(struct unwind_mapping *out, __u64 pc)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct mm_struct___vma_list *mm = (void *)BPF_CORE_READ(task, mm);
	struct vm_area_struct *vma;
	struct unwind_file *file;
	__u64 start, end;

	if (!mm || !bpf_core_field_exists(mm->mmap))
		return false;
	vma = BPF_CORE_READ(mm, mmap);
	for (int i = 0; i < LKS_COMPAT_MAX_VMAS && vma; i++) {
		start = BPF_CORE_READ(vma, vm_start);
		if (start > pc)
			return false;
		end = BPF_CORE_READ(vma, vm_end);
		if (pc < end) {
			file = lks_vma_file(vma);
			if (!file)
				return false;
			lks_describe_vma(out, file, start, end, BPF_CORE_READ(vma, vm_pgoff) << 12);
			return true;
		}
		vma = BPF_CORE_READ((struct vm_area_struct___vma_list *)vma, vm_next);
	}
	return false;
}

/*
 * The file fallback, for a pc outside the process's mapping table: sets the walk's fallback.out
 * to the mapping of `pc` through the VMA or executable found for an earlier frame, else through
 * the main executable, else through the process's VMA and its file's table; returns 1, or 0 for
 * none. The VMA comes from bpf_find_vma (Linux 5.17+), or in `compat` programs from the VMA list
 * (kernels before 6.1). bpf_find_vma succeeds once per program run where interrupts are disabled
 * (sched_switch: its mmap unlock waits in an irq_work until then), so the executable is found
 * without it, and a VMA found is kept for later frames.
 */
static __always_inline int lks_fallback(__u64 pc, __u32 slot, const bool compat)
{
	struct unwind_vma_search search = {};
	struct unwind_scratch *s = lks_unwind_scratch(slot);
	struct unwind_fallback *f;

	if (!s)
		return 0;
	f = &s->fallback;
	if (f->vma_found && f->vma.start <= pc && pc < f->vma.end) {
		f->out = f->vma;
		return 1;
	}
	if (f->exe_found && f->exe.start <= pc && pc < f->exe.end) {
		f->out = f->exe;
		return 1;
	}
	if (!f->exe_found && lks_exe_mapping(&f->exe, pc)) {
		f->exe_found = 1;
		f->out = f->exe;
		return 1;
	}
	if (compat) {
		search.found = lks_vma_list_mapping(&search.mapping, pc);
	} else {
		bpf_find_vma(bpf_get_current_task_btf(), pc, lks_vma_callback, &search, 0);
	}
	if (!search.found)
		return 0;
	f->vma = search.mapping;
	f->vma_found = 1;
	f->out = search.mapping;
	return 1;
}

/* lks_fallback as global functions, one per variant: the verifier checks each once, on its own,
 * instead of in every state of the unwinding loop. They take no pointer, which global functions
 * could not before Linux 5.12 (their state is in the scratch map). */
__noinline int lks_fallback_mapping(__u64 pc, __u32 slot)
{
	return lks_fallback(pc, slot, false);
}

__noinline int lks_fallback_mapping_compat(__u64 pc, __u32 slot)
{
	return lks_fallback(pc, slot, true);
}

/* 1 when a < b, else 0, computed without a branch (Hacker's Delight, 2-12), and hidden from the
 * compiler, which would turn a comparison back into one. */
static __always_inline __u32 lks_below(__u64 a, __u64 b)
{
	__u64 below = ((~a & b) | ((~a | b) & (a - b))) >> 63;

	asm volatile("" : "+r"(below));
	return (__u32)below;
}

/* The mapping of `proc` holding `pc`, or NULL. */
static __always_inline struct unwind_mapping *lks_find_mapping(struct unwind_proc *proc, __u64 pc)
{
	/* Masked, not clamped: a clamp would give the verifier a constant bound and it would then
	 * walk every branch of the search with exact values. Beyond `count` entries are zero (and
	 * the index is masked), so a bad count finds nothing rather than faulting. */
	__u32 lo = 0, hi = proc->count & (2 * LKS_UNWIND_MAX_MAPPINGS - 1), mid;
	struct unwind_mapping *m;

	for (int i = 0; i < LKS_UNWIND_MAPPING_STEPS; i++) {
		if (lo >= hi)
			break;
		mid = (lo + hi) / 2;
		/* Without a branch: in the unwinding loop's callback each outcome of a compare would
		 * be a state of its own (see lks_find_row). */
		__u32 past = lks_below(pc, proc->mappings[mid & (LKS_UNWIND_MAX_MAPPINGS - 1)].start);

		lo += (mid + 1 - lo) & (past - 1);
		hi -= (hi - mid) & -past;
	}
	if (lo == 0)
		return NULL;
	m = &proc->mappings[(lo - 1) & (LKS_UNWIND_MAX_MAPPINGS - 1)];
	return pc < m->end ? m : NULL;
}

/* The row in effect at `rel` (pc - bias) of the table of rows [first, first + rows) whose page
 * index is [first_page, first_page + pages), as the row's 8 bytes; 0 (a row of kind
 * LKS_CFA_NONE) when there is none. A global function, so the verifier checks its binary search
 * once, on its own: inlined in the unwinding loop's callback, each compare's two outcomes were
 * different states there, and 6.18 kernels that compare states in a loop by their ranges
 * explored 2^22 paths and rejected every probe ("BPF program is too large"). Scalars only: see
 * lks_fallback_mapping. */
_Static_assert(sizeof(struct unwind_row) == sizeof(__u64), "a row travels as one __u64");

__noinline __u64 lks_find_row(__u32 first, __u32 rows, __u32 first_page, __u32 pages, __u64 rel)
{
	__u32 lo = 0, hi = rows, page, mid, key;
	struct unwind_row *row;
	__u64 *index, packed = 0;

	if (rel > 0xffffffffULL)
		return 0;
	/* Narrow the search to the rows of rel's page: from the row in effect at its start to the
	 * one in effect at the next page's start. Past the last page: the table's last row. */
	page = rel >> LKS_UNWIND_PAGE_SHIFT;
	if (page < pages) {
		key = first_page + page;
		index = bpf_map_lookup_elem(&unwind_pages, &key);
		if (index && *index < hi)
			lo = *index;
		if (page + 1 < pages) {
			key++;
			index = bpf_map_lookup_elem(&unwind_pages, &key);
			if (index && *index + 1 < hi)
				hi = *index + 1;
		}
	} else if (hi > 0) {
		lo = hi - 1;
	}
	for (int i = 0; i < LKS_UNWIND_ROW_STEPS; i++) {
		if (lo >= hi)
			break;
		mid = lo + (hi - lo) / 2;
		key = first + mid;
		row = bpf_map_lookup_elem(&unwind_rows, &key);
		if (!row)
			return 0;
		if (row->pc <= (__u32)rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	key = first + lo - 1;
	row = bpf_map_lookup_elem(&unwind_rows, &key);
	if (!row)
		return 0;
	__builtin_memcpy(&packed, row, sizeof(*row));
	return packed;
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
 * because before 5.12 a global function could take no pointer. `procs`: see lks_unwind_user_stack.
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
