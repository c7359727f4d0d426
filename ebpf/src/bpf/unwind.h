/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Structures shared by the in-kernel user-stack unwinder (unwind.bpf.h) and its Rust side
 * (src/unwind/): compact unwind tables built in user space from .eh_frame/.debug_frame, the
 * per-process mapping tables that point into them, and the unwound stacks. The Rust side takes
 * these types from the skeleton (every one is the value type of a map).
 */
#ifndef LOCKSCOPE_UNWIND_H
#define LOCKSCOPE_UNWIND_H

/* Deepest user stack kept; deeper stacks are cut at the root end and marked truncated. */
#define LKS_MAX_USER_FRAMES 127
/* Executable mappings per process that the unwinder can see. */
#define LKS_UNWIND_MAX_MAPPINGS 256
/* Rows of all unwind tables together (8 bytes each: 16 MiB). */
#define LKS_UNWIND_ROWS (1 << 21)
/* Page-index entries of all unwind tables together (8 bytes each, the array's element size:
 * 4 MiB, for 2 GiB of code). */
#define LKS_UNWIND_PAGES (1 << 19)
/* Constants user space uses too: an enum, so that they reach Rust through the skeleton's types
 * (shared.bpf.c has an instance, which makes the skeleton generate them). */
enum unwind_constants {
	/* Bytes of address space per page-index entry: 1 << this. */
	LKS_UNWIND_PAGE_SHIFT = 12,
	/* unwind_mapping.first_row (with rows == 0) of a mapping whose table is still being built:
	 * the walk stops there (a frame-pointer guess through code without frame pointers invents
	 * frames). */
	LKS_UNWIND_TABLE_PENDING = 0xffffffffU,
};
/* Binary-search steps that cover LKS_UNWIND_ROWS rows and LKS_UNWIND_MAX_MAPPINGS mappings. */
#define LKS_UNWIND_ROW_STEPS 22
#define LKS_UNWIND_MAPPING_STEPS 9
/* Processes with a mapping table. */
#define LKS_UNWIND_MAX_PROCS 1024

/* How one row computes the canonical frame address (CFA); names are architecture-neutral. */
enum unwind_cfa_kind {
	/* No CFI covers the address (a gap between FDEs): walk by frame pointer. */
	LKS_CFA_NONE = 0,
	/* CFA = SP + cfa_offset. */
	LKS_CFA_SP = 1,
	/* CFA = FP + cfa_offset. */
	LKS_CFA_FP = 2,
	/* The return address is undefined: the outermost frame (thread or process entry). */
	LKS_CFA_END = 3,
	/* A signal trampoline: the interrupted registers are in the signal frame on the stack. */
	LKS_CFA_SIGNAL = 4,
	/* A rule the unwinder cannot follow (DWARF expression, other register): stack truncated. */
	LKS_CFA_UNSUPPORTED = 5,
};

/* One row: the rules from `pc` up to the next row's pc (pcs relative to the mapping's bias). */
struct unwind_row {
	__u32 pc;
	/* enum unwind_cfa_kind */
	__u8 kind;
	/* 0: the frame pointer is unchanged; else it was saved at CFA + 8 * fp_offset8. */
	__s8 fp_offset8;
	__s16 cfa_offset;
};

/* One executable mapping of a process: [start, end) unwinds with rows
 * [first_row, first_row + rows) at pc - bias; rows == 0 means no table (frame pointers), unless
 * first_row is LKS_UNWIND_TABLE_PENDING: the file's table is still being built.
 * The table's page index ([first_page, first_page + pages) in unwind_pages) gives, for each 4 KiB
 * of (pc - bias), the row in effect at its start, so a lookup searches one page's rows. */
struct unwind_mapping {
	__u64 start;
	__u64 end;
	__u64 bias;
	__u32 first_row;
	__u32 rows;
	__u32 first_page;
	__u32 pages;
};

/* The executable mappings of one process, sorted by start. */
struct unwind_proc {
	__u32 count;
	__u32 pad;
	struct unwind_mapping mappings[LKS_UNWIND_MAX_MAPPINGS];
};

/* A mapped file, as the kernel names it (super block dev_t, inode number). */
struct unwind_file_key {
	__u64 dev;
	__u64 ino;
};

/* The table of one file, for pcs in mappings the process table does not know yet (a library
 * mapped since the last refresh, a process that just exec'ed): found through the VMA. */
struct unwind_file {
	/* Link-time address that row pcs are relative to. */
	__u64 base;
	/* Link-time address minus file offset, in the code segment. */
	__s64 vaddr_minus_offset;
	/* Lowest link-time address of an executable segment: for a process's main executable,
	 * mm->start_code minus this is its load bias (the kernel computes start_code so). */
	__u64 text_vaddr;
	/* End (vaddr + filesz) of the highest executable segment: mm->end_code minus the bias. */
	__u64 text_end_vaddr;
	__u32 first_row;
	__u32 rows;
	__u32 first_page;
	__u32 pages;
};

/* How user stacks are captured (unwind_config.user_stacks); for measuring what unwinding costs. */
enum unwind_user_stacks {
	/* CFI tables, frame pointers where a pc has none: the default. */
	LKS_USER_STACKS_CFI = 0,
	/* The kernel's frame-pointer walk alone (bpf_get_stack). */
	LKS_USER_STACKS_FRAME_POINTERS = 1,
	/* No user stacks. */
	LKS_USER_STACKS_NONE = 2,
};

/* Whether a thread's stack that a memo shows unchanged is taken from it instead of unwound
 * again (unwind_config.memo; the memo is described in unwind_memo.bpf.h). */
enum unwind_memo_mode {
	/* Use the memo: the default. */
	LKS_MEMO_ON = 0,
	/* Unwind every stack (for measuring what the memo saves). */
	LKS_MEMO_OFF = 1,
	/* Unwind every stack and compare it with the memo's answer where there is one
	 * (unwind_counters.memo_mismatches): for tests. */
	LKS_MEMO_VERIFY = 2,
};

/* Settings of the unwinder, written by user space (one entry). */
struct unwind_config {
	enum unwind_user_stacks user_stacks;
	enum unwind_memo_mode memo;
};

/* Stack-memory words one memo holds, and the bytes above the stack pointer they may span (the
 * memo's check reads that much in one copy). */
#define LKS_MEMO_WORDS 128
#define LKS_MEMO_SPAN 16384

/*
 * A thread's last walk, for the memo (unwind_memo.bpf.h): what the walk depended on and what
 * it found.
 * offsets[i] (bytes above sp) held values[i] when the walk read it; nothing else the walk read
 * changed what it found.
 */
struct unwind_memo {
	/* The process whose mapping table the walk used, and the tables' generation. */
	__u32 tgid;
	/* Words recorded. */
	__u32 words;
	__u64 generation;
	/* The registers the walk started from (the only ones it uses). */
	__u64 pc;
	__u64 sp;
	__u64 fp;
	/* The stack found: its id in user_stacks; depth, frames found by frame pointer and flags
	 * for the counters. */
	__s32 id;
	__u32 depth;
	__u32 fp_frames;
	/* enum user_stack_flags */
	__u32 flags;
	/* Bytes from sp that cover every word. */
	__u32 span;
	/* The walk used the fp it started from (else fp may differ). */
	__u32 fp_used;
	__u16 offsets[LKS_MEMO_WORDS];
	__u64 values[LKS_MEMO_WORDS];
};

/* Bits of user_stack.flags (an enum so that the Rust loader gets them from the skeleton). */
enum user_stack_flags {
	/* The walk stopped before the outermost frame. */
	LKS_STACK_TRUNCATED = 1,
	/* At least one frame was found by frame pointer (no CFI for its caller's pc). */
	LKS_STACK_FP_USED = 2,
	/* The walk stopped at a mapping whose table was still being built
	 * (LKS_UNWIND_TABLE_PENDING). */
	LKS_STACK_TABLE_PENDING = 4,
};

/* An unwound user stack: pcs[0] is the leaf (the user pc at the event). */
struct user_stack {
	__u32 depth;
	/* enum user_stack_flags, or'ed */
	enum user_stack_flags flags;
	__u64 pcs[LKS_MAX_USER_FRAMES];
};

/* Unwinder counters, one copy per CPU. */
struct unwind_counters {
	/* User stacks unwound. */
	__u64 stacks;
	/* ... of which reached the outermost frame. */
	__u64 complete;
	/* ... of which were cut short (flag LKS_STACK_TRUNCATED); causes below. */
	__u64 truncated;
	/* Frames unwound, and those found by frame pointer. */
	__u64 frames;
	__u64 fp_frames;
	/* Stacks of a process without a mapping table (walked by frame pointer alone). */
	__u64 unknown_process;
	/* Frames whose pc is in no mapping of the process table (new mapping not loaded yet, JIT
	 * code) ... */
	__u64 unknown_mapping;
	/* ... of which were unwound anyway with their file's table, found through the VMA. */
	__u64 file_fallbacks;
	/* Stack memory that could not be read. */
	__u64 read_failures;
	/* Rows with a rule the unwinder cannot follow. */
	__u64 unsupported;
	/* Stacks deeper than LKS_MAX_USER_FRAMES. */
	__u64 too_deep;
	/* Stacks not stored: the stack map was full, or a different stack had the same id. */
	__u64 store_failures;
	/* Stacks cut at a mapping whose table was still being built (LKS_STACK_TABLE_PENDING). */
	__u64 table_pending;
	/* Stacks (of `stacks`) taken from the thread's memo instead of unwound. */
	__u64 memo_hits;
	/* With LKS_MEMO_VERIFY: memo answers that differed from the walk (must stay 0). */
	__u64 memo_mismatches;
	/* Walks recorded in a memo. */
	__u64 memo_stores;
	/* Stacks not taken: the unwinder was interrupted on its CPU by a program that wanted a
	 * stack in the same slot (a wakeup from a hard interrupt during a system call's program). */
	__u64 busy;
};

#endif /* LOCKSCOPE_UNWIND_H */
