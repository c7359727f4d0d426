/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * What every probe object shares. The maps declared here (and in stacks.bpf.h, which this file
 * includes) exist once per recording: the Rust side (src/shared.rs) loads them with the
 * `shared` object first and hands their file descriptors to every later object (libbpf
 * reuse_fd), so a process added to `targets`, or a stack captured by any probe, is seen by all.
 * A map that must be shared is declared in this file or in a header it includes; nothing else is
 * needed on the Rust side.
 */
#ifndef LOCKSCOPE_COMMON_BPF_H
#define LOCKSCOPE_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "stacks.bpf.h"

#include "common.h"

/* Processes of the target set: 100 servers' worth of worker processes, and a build's. */
#define LKS_MAX_TARGETS 8192

/* errno values (vmlinux.h has no macros). */
#ifndef E2BIG
#define E2BIG 7
#endif
#ifndef EEXIST
#define EEXIST 17
#endif

/* Process ids (tgid) being recorded: the targets given (pids, a process tree, a cgroup's
 * processes, a launched command), and every process they fork while recorded. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LKS_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

/* The bottleneck analysis' records (enum lks_event_type), from the `offcpu` and `cpu` objects;
 * sized by user space when it streams (one page otherwise). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} bottleneck_events SEC(".maps");

/* How a record of `bottleneck_events` is submitted: without waking the recorder, which reads the
 * ring on its own schedule (every 100 ms), unless the ring is a quarter full, when it is woken at
 * once so that a burst cannot fill the ring before its next read. (0, the adaptive wakeup, would
 * wake it after each of its reads: a wakeup per poll for nothing.) */
static __always_inline __u64 lks_stream_submit_flags(void)
{
	__u64 size = bpf_ringbuf_query(&bottleneck_events, BPF_RB_RING_SIZE);
	__u64 pending = bpf_ringbuf_query(&bottleneck_events, BPF_RB_AVAIL_DATA);

	return pending > size / 4 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* Whether every process is a target (`record -a`): one `struct lks_targets_config`. An array,
 * whose lookup the verifier inlines: a process outside the set costs one hash lookup and this. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lks_targets_config);
} targets_config SEC(".maps");

/* True when every process is a target. */
static __always_inline bool all_targets(void)
{
	struct lks_targets_config *config;
	__u32 zero = 0;

	config = bpf_map_lookup_elem(&targets_config, &zero);
	return config && config->all;
}

/* True when process `tgid` is recorded: in `targets`, or every process is. */
static __always_inline bool is_target(__u32 tgid)
{
	struct lks_targets_config *config;
	__u32 zero = 0;

	if (bpf_map_lookup_elem(&targets, &tgid))
		return true;
	config = bpf_map_lookup_elem(&targets_config, &zero);
	/* tgid 0 is the idle tasks: no process, never a target. */
	return config && config->all && tgid != 0 && tgid != config->exclude_tgid;
}

#define LKS_PF_KTHREAD 0x00200000

/* True when the current task is a kernel thread: it has no user stack, so none is missing.
 * (bpf_get_current_task, not its BTF variant: 5.10 has only this one.) */
static __always_inline bool current_is_kernel_thread(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	return BPF_CORE_READ(task, flags) & LKS_PF_KTHREAD;
}

/* The kernel's count of the time `task` spent on a CPU (its CPU clock, as charged at the last
 * tick or switch). */
static __always_inline __u64 task_exec_ns(struct task_struct *task)
{
	return BPF_CORE_READ(task, se.sum_exec_runtime);
}

/* Bit length of v (0 for 0): the histogram slot, as probes::hist::Log2Histogram::slot_of. */
static __always_inline __u32 hist_slot(__u64 v)
{
	__u32 n = 0, shift;

	/* Without a branch: each step's test, whether the high half of what is left is non-zero,
	 * is a carry ((x + 2^k - 1) >> k for x < 2^k). Branches here made 2^6 paths for the
	 * verifier at every add_duration a program inlines. */
	shift = (((v >> 32) + 0xffffffffULL) >> 32) << 5;
	v >>= shift;
	n += shift;
	shift = (((v >> 16) + 0xffffULL) >> 16) << 4;
	v >>= shift;
	n += shift;
	shift = (((v >> 8) + 0xffULL) >> 8) << 3;
	v >>= shift;
	n += shift;
	shift = (((v >> 4) + 0xfULL) >> 4) << 2;
	v >>= shift;
	n += shift;
	shift = (((v >> 2) + 0x3ULL) >> 2) << 1;
	v >>= shift;
	n += shift;
	shift = v >> 1;
	v >>= shift;
	n += shift;
	return n + (__u32)v;
}

#endif /* LOCKSCOPE_COMMON_BPF_H */
