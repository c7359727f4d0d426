/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The in-kernel unwinder's maps and the state of a walk (part of unwind.bpf.h): the tables user
 * space writes (`unwind_rows`, `unwind_pages`, `unwind_procs`, `unwind_files`), the stacks found
 * (`user_stacks`), the threads' memos, the per-CPU scratch of a walk in each context (enum
 * unwind_slot) and the counters.
 */
#ifndef LOCKSCOPE_UNWIND_MAPS_BPF_H
#define LOCKSCOPE_UNWIND_MAPS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
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

#endif /* LOCKSCOPE_UNWIND_MAPS_BPF_H */
