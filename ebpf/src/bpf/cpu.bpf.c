// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The `cpu` probe: an on-CPU profile of the target's threads. The loader opens one software
 * cpu-clock perf event per CPU (an hrtimer: works in VMs without a PMU) at the requested
 * frequency and attaches this program to each. A sample of a target thread unwinds its user
 * stack with the in-kernel unwinder (through FP-less code), takes its kernel stack when it
 * interrupted the kernel, and is aggregated here per (thread, user stack, kernel stack): count =
 * samples, total_ns = the CPU time they stand for (sample_ns). Nothing is copied to user space
 * per sample, except for the bottleneck analysis (`targ_stream`): then each sample also goes to
 * the shared `bottleneck_events` ring with its time.
 *
 * The program runs in hard interrupt context, where it can interrupt a tracepoint or raw_tp
 * program of another probe in the middle of its unwinding: it walks in the interrupt slot of the
 * unwinder's scratch map (enum unwind_slot in unwind_maps.bpf.h).
 */
#include "probe.bpf.h"
#include "cpu.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAX_CPU_KEYS 16384

/* Keys with stacks samples may add to `samples` (three quarters of it): every place a busy thread
 * runs is a key, and a 10-minute soak of 50 MariaDB threads filled the map (52,191 samples lost:
 * the thread's stackless key a full map falls back on must find room too). Past it, a sample at
 * a place not keyed yet goes to its thread's stackless key, which the last quarter keeps room
 * for (its stacks counted as failures); its time is kept either way. */
__s64 lks_stack_key_budget = MAX_CPU_KEYS / 4 * 3;

/* Also send each sample, with its time, to the bottleneck analysis (the `waitfor` probe). */
const volatile bool targ_stream = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_CPU_KEYS);
	__type(key, struct cpu_key);
	__type(value, struct lks_stats);
} samples SEC(".maps");

/* A sampled thread's CPU clock, as its kernel charges it (se.sum_exec_runtime), at its last
 * sample, and the part of it no sample has stood for yet. */
struct thread_clock {
	__u64 charged_ns;
	__u64 owed_ns;
	__u64 sampled_at_ns;
};

/* LRU: a thread that exits leaves its entry behind, and a new one must still find room (LRU
 * maps are preallocated, which perf_event programs need before 6.1). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_CPU_KEYS);
	__type(key, __u32);
	__type(value, struct thread_clock);
} thread_clocks SEC(".maps");

/* The CPU time a sample of thread `tid` stands for: the CPU time its kernel charged the thread
 * since its previous sample, never more than the time between the two (the charge comes in
 * lumps, at ticks and switches, and is spread over the samples that follow). Not one period: a
 * timer interrupt that comes late (a vCPU stopped while its guest's clock runs on: QEMU's TCG,
 * whose one thread runs both vCPUs in turn, once gave a spinning thread 34 samples at 997 Hz for
 * 326.8 ms of its clock) makes the hrtimer skip periods the thread's clock counts. Not the CPU's
 * cpu-clock time since its last sample: under KVM that counts the time the hypervisor steals,
 * which the kernel keeps out of the thread's clock (docs/RELIABILITY.md). One period for a
 * thread's first sample, or when its entry cannot be made. */
static __always_inline __u64 sample_ns(struct bpf_perf_event_data *ctx, __u32 tid)
{
	__u64 charged = task_exec_ns((struct task_struct *)bpf_get_current_task());
	__u64 now = bpf_ktime_get_ns();
	struct thread_clock *clock = bpf_map_lookup_elem(&thread_clocks, &tid);
	__u64 ns;

	/* A thread's first sample; or a smaller charge: a new thread with an exited one's id. */
	if (!clock || charged < clock->charged_ns) {
		struct thread_clock first = { .charged_ns = charged, .sampled_at_ns = now };

		bpf_map_update_elem(&thread_clocks, &tid, &first, BPF_ANY);
		return ctx->sample_period;
	}
	clock->owed_ns += charged - clock->charged_ns;
	clock->charged_ns = charged;
	ns = now > clock->sampled_at_ns ? now - clock->sampled_at_ns : 0;
	if (ns > clock->owed_ns)
		ns = clock->owed_ns;
	clock->owed_ns -= ns;
	clock->sampled_at_ns = now;
	return ns;
}

/* `compat`: the program for kernels before 5.17, which also cannot give a perf_event program the
 * process tables (not preallocated, refused before 6.1): its stacks unwind through the file
 * tables of the executable and of the VMAs it finds. */
static __always_inline int on_sample(struct bpf_perf_event_data *ctx, const bool compat)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct cpu_key key = {};
	struct lks_stats *entry = NULL;
	__u64 ns;
	__s32 id;

	if (!is_target(pid_tgid >> 32))
		return 0;
	COUNT(events);
	key.tgid = pid_tgid >> 32;
	key.tid = (__u32)pid_tgid;
	id = lks_unwind_user_stack_in(ctx, compat, LKS_UNWIND_SLOT_INTERRUPT);
	if (id < 0 && !current_is_kernel_thread())
		COUNT(user_stack_failures);
	key.user_stack_id = id < 0 ? -1 : id;
	key.kernel_stack_id = -1;
	if (lks_kernel_mode(&ctx->regs)) {
		id = lks_kernel_stack(ctx);
		if (id < 0)
			COUNT(kernel_stack_failures);
		key.kernel_stack_id = id < 0 ? -1 : id;
	}
	if ((key.user_stack_id >= 0 || key.kernel_stack_id >= 0) &&
	    !lks_key_keeps_stacks(&samples, &key, &lks_stack_key_budget, &entry)) {
		if (key.user_stack_id >= 0)
			COUNT(user_stack_failures);
		if (key.kernel_stack_id >= 0)
			COUNT(kernel_stack_failures);
		key.user_stack_id = -1;
		key.kernel_stack_id = -1;
	}
	ns = sample_ns(ctx, key.tid);
	if (entry)
		add_duration(entry, ns);
	else
		aggregate(&samples, &key, ns, NULL);
	if (targ_stream) {
		struct lks_cpu_sample *e = bpf_ringbuf_reserve(&bottleneck_events, sizeof(*e), 0);

		if (!e) {
			COUNT(dropped);
			return 0;
		}
		e->type = LKS_EVENT_CPU_SAMPLE;
		e->tgid = key.tgid;
		e->tid = key.tid;
		e->user_stack_id = key.user_stack_id;
		e->time_ns = bpf_ktime_get_ns();
		bpf_ringbuf_submit(e, lks_stream_submit_flags());
	}
	return 0;
}

SEC("perf_event")
int lks_cpu_sample(struct bpf_perf_event_data *ctx)
{
	return on_sample(ctx, false);
}

SEC("perf_event")
int lks_cpu_sample_compat(struct bpf_perf_event_data *ctx)
{
	return on_sample(ctx, true);
}
