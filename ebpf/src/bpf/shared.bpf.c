// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The shared-maps owner: the first object loaded in every recording. Its maps are those of
 * common.bpf.h (the `targets` set and its configuration, and the stack maps of stacks.bpf.h);
 * every probe object loaded after it reuses them (src/shared.rs). Its programs follow the
 * recorded processes, whichever probes are selected:
 * - a child of a recorded process is recorded too (added to `targets`, unless every process
 *   is), and starts with a copy of its parent's unwind table: the address space is the same
 *   until it execs, and its first waits (a server's new worker's) unwind completely;
 * - an exec drops the process's unwind table (its mappings are new);
 * - each fork, exec and exit of a recorded process goes to `process_events`, for the process
 *   table of the profile (src/target_set.rs).
 */
#include "common.bpf.h"
#include "common.h"
#include "shared.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* 256 KiB: some 4,000 events between two polls of user space (100 ms). */
#define LKS_PROCESS_EVENTS_BYTES (256 * 1024)

/* Never read: instances of the enums whose constants the unwinder's user space uses (unwind.h),
 * so that this object's skeleton generates their Rust types (which it does only for the types
 * of maps and globals), as libbpf-bootstrap does for its event structs. */
enum unwind_cfa_kind lks_unwind_cfa_kind_type = LKS_CFA_NONE;
enum unwind_constants lks_unwind_constants_type = (enum unwind_constants)0;
/* ... and of the bottleneck stream's records (common.h) the user space reads. */
struct lks_cpu_sample lks_cpu_sample_type = {};
enum lks_event_type lks_event_type_type = LKS_EVENT_INTERVAL;
/* The same for the process events of `process_events` (a ring buffer has no value type). */
struct process_event lks_process_event_type = {};
enum process_event_flags lks_process_event_flags_type = (enum process_event_flags)0;

/* Children the `targets` map had no room for (their events are missing). */
__u64 lks_targets_full = 0;
/* Process events the ring buffer had no room for. */
__u64 lks_process_events_lost = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, LKS_PROCESS_EVENTS_BYTES);
} process_events SEC(".maps");

static __always_inline void send_event(enum process_event_kind kind, struct task_struct *task,
				       __u32 pid, __u32 parent, __u32 flags)
{
	struct process_event *event;

	event = bpf_ringbuf_reserve(&process_events, sizeof(*event), 0);
	if (!event) {
		__sync_fetch_and_add(&lks_process_events_lost, 1);
		return;
	}
	event->time_ns = bpf_ktime_get_ns();
	event->kind = kind;
	event->flags = flags;
	if (BPF_CORE_READ(task, flags) & LKS_PF_KTHREAD)
		event->flags |= LKS_PROCESS_KTHREAD;
	event->pid = pid;
	event->parent = parent;
	event->exit_code = kind == LKS_PROCESS_EXIT ? BPF_CORE_READ(task, exit_code) : 0;
	event->pad = 0;
	BPF_CORE_READ_STR_INTO(&event->comm, task, comm);
	bpf_ringbuf_submit(event, 0);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(lks_follow_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid = parent->tgid;
	__u32 child_tgid = child->tgid;
	struct unwind_proc *table;
	__u32 flags = 0;
	__u8 yes = 1;

	if (child_tgid == parent_tgid || !is_target(parent_tgid))
		return 0;
	if (!all_targets() && bpf_map_update_elem(&targets, &child_tgid, &yes, BPF_ANY) != 0) {
		__sync_fetch_and_add(&lks_targets_full, 1);
		return 0;
	}
	table = bpf_map_lookup_elem(&unwind_procs, &parent_tgid);
	if (table && bpf_map_update_elem(&unwind_procs, &child_tgid, table, BPF_NOEXIST) == 0)
		flags |= LKS_PROCESS_UNWIND_COPIED;
	send_event(LKS_PROCESS_FORK, child, child_tgid, parent_tgid, flags);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(lks_follow_exec, struct task_struct *task)
{
	__u32 tgid = task->tgid;

	if (!is_target(tgid))
		return 0;
	bpf_map_delete_elem(&unwind_procs, &tgid);
	send_event(LKS_PROCESS_EXEC, task, tgid, 0, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(lks_follow_exit, struct task_struct *task)
{
	__u32 tgid = task->tgid;

	if (!is_target(tgid))
		return 0;
	/* Every thread's exit comes here; the process ends with the last one (signal->live, which
	 * do_exit decrements before this tracepoint, is then 0). */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	send_event(LKS_PROCESS_EXIT, task, tgid, 0, 0);
	return 0;
}
