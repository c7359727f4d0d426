/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The table lookup of the in-kernel unwinder (part of unwind.bpf.h): the mapping of a pc in its
 * process's mapping table (binary search), else through the file fallback (the VMA or the main
 * executable, and its file's table in `unwind_files`), and the row in effect at a pc in that
 * mapping's table (page index, then binary search).
 */
#ifndef LOCKSCOPE_UNWIND_LOOKUP_BPF_H
#define LOCKSCOPE_UNWIND_LOOKUP_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "unwind_maps.bpf.h"

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

#endif /* LOCKSCOPE_UNWIND_LOOKUP_BPF_H */
