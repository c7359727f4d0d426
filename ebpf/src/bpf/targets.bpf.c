// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The shared-maps owner: the first object loaded in every recording. Its maps are those of
 * common.bpf.h (the `targets` set, and the stack maps of stacks.bpf.h); every probe object loaded
 * after it reuses them (src/shared.rs). Its one program follows forks: a child of a recorded
 * process is recorded too, whichever probes are selected.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Never read: instances of the enums whose constants the unwinder's user space uses (unwind.h),
 * so that this object's skeleton generates their Rust types (which it does only for the types
 * of maps and globals), as libbpf-bootstrap does for its event structs. */
enum unwind_cfa_kind lks_unwind_cfa_kind_type = LKS_CFA_NONE;
enum unwind_constants lks_unwind_constants_type = (enum unwind_constants)0;

/* Children the `targets` map had no room for (the one loss this object can have). */
__u64 lks_targets_full = 0;

SEC("tp_btf/sched_process_fork")
int BPF_PROG(lks_follow_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid = parent->tgid;
	__u32 child_tgid = child->tgid;
	__u8 yes = 1;

	if (child_tgid == parent_tgid || !is_target(parent_tgid))
		return 0;
	if (bpf_map_update_elem(&targets, &child_tgid, &yes, BPF_ANY) != 0)
		__sync_fetch_and_add(&lks_targets_full, 1);
	return 0;
}
