/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The x86_64 part of the user-stack unwinder: where the user registers are, and the layout of a
 * signal frame. Everything else in unwind.bpf.h and its parts is architecture-neutral (SP, FP,
 * PC, and a return address at CFA - 8), so another architecture adds a header like this one.
 */
#ifndef LOCKSCOPE_UNWIND_X86_64_BPF_H
#define LOCKSCOPE_UNWIND_X86_64_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/* The registers the unwinder follows. */
struct unwind_regs {
	__u64 pc;
	__u64 sp;
	__u64 fp;
};

/* The return address is the word just below the CFA (pushed by `call`). */
#define LKS_RA_CFA_OFFSET (-8)
/* A frame-pointer frame: saved FP at [FP], return address at [FP + 8], CFA = FP + 16. */
#define LKS_FP_FRAME_SIZE 16

/* x86_64's kernel stack size without KASAN (THREAD_SIZE: 4 pages), which distribution kernels
 * do not enable; the user registers are saved at its top. */
#define LKS_THREAD_SIZE (4 * 4096)

/*
 * The user registers that `task` saved at kernel entry: bpf_task_pt_regs (Linux 5.15+), else
 * computed as the kernel's task_pt_regs() does on x86_64, from the top of the task's stack
 * (TOP_OF_KERNEL_STACK_PADDING is 0 there before FRED, which came after the helper).
 */
static __always_inline struct pt_regs *lks_task_pt_regs(struct task_struct *task)
{
	void *stack;

	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return (struct pt_regs *)bpf_task_pt_regs(task);
	stack = BPF_CORE_READ(task, stack);
	if (!stack)
		return NULL;
	return (struct pt_regs *)(stack + LKS_THREAD_SIZE) - 1;
}

/* The registers the current thread saved at kernel entry (lks_task_pt_regs of `current`). */
static __always_inline struct pt_regs *lks_current_pt_regs(void)
{
	/* bpf_task_pt_regs wants a BTF task pointer (5.11+, before the helper itself). */
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return lks_task_pt_regs(bpf_get_current_task_btf());
	return lks_task_pt_regs((struct task_struct *)bpf_get_current_task());
}

/*
 * The user registers of the current thread: those saved at kernel entry (for a syscall, the
 * registers of the `syscall` instruction; its pc is the instruction after it).
 */
static __always_inline bool lks_user_regs(struct unwind_regs *regs)
{
	struct pt_regs *saved = lks_current_pt_regs();

	if (!saved)
		return false;
	regs->pc = BPF_CORE_READ(saved, ip);
	regs->sp = BPF_CORE_READ(saved, sp);
	regs->fp = BPF_CORE_READ(saved, bp);
	return regs->pc != 0;
}

/* Whether interrupted registers were in kernel mode: x86_64's kernel lives in the upper half of
 * the address space (cs would say it too, but a perf_event program may read its context's
 * registers only as whole longs). */
static __always_inline bool lks_kernel_mode(struct pt_regs *regs)
{
	return (__s64)regs->ip < 0;
}

/*
 * In a signal trampoline (glibc's __restore_rt, the kernel's rt_sigreturn caller), SP points at
 * the `struct ucontext` of the rt_sigframe (the handler's `ret` popped pretcode). uc_mcontext (a
 * struct sigcontext) follows uc_flags, uc_link and uc_stack; these offsets are the uapi ABI.
 */
#define LKS_UCONTEXT_MCONTEXT 40
#define LKS_SIGCONTEXT_RBP 80
#define LKS_SIGCONTEXT_RSP 120
#define LKS_SIGCONTEXT_RIP 128

/* Replaces `regs` with the interrupted registers of the signal frame at regs->sp. */
static __always_inline bool lks_signal_frame_regs(struct unwind_regs *regs)
{
	__u64 sc = regs->sp + LKS_UCONTEXT_MCONTEXT;
	__u64 pc, sp, fp;

	if (bpf_probe_read_user(&pc, sizeof(pc), (void *)(sc + LKS_SIGCONTEXT_RIP)) ||
	    bpf_probe_read_user(&sp, sizeof(sp), (void *)(sc + LKS_SIGCONTEXT_RSP)) ||
	    bpf_probe_read_user(&fp, sizeof(fp), (void *)(sc + LKS_SIGCONTEXT_RBP)))
		return false;
	regs->pc = pc;
	regs->sp = sp;
	regs->fp = fp;
	return true;
}

#endif /* LOCKSCOPE_UNWIND_X86_64_BPF_H */
