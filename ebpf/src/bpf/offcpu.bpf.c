// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The `offcpu` probe: where the target's threads spend their time off the CPU.
 *
 * Hooks: sched_switch (switch-out: state, system call in progress, stacks; switch-in: end of the
 * interval), sched_waking (end of a sleep, and who woke it: the waker runs this hook) and
 * sched_wakeup_new (a new thread enters the run queue). All tp_btf.
 *
 * Per thread it keeps a state machine and the time spent in each class (enum time_class), so
 * that on-CPU + run-queue + every kind of sleep adds up to the thread's wall time. Intervals of
 * at least `targ_min_block_ns` are also aggregated with their stacks (`offcpu`), and, for the
 * `wakeup` probe (`targ_waker_stacks`), the sleeps among them with their waker's stacks
 * (`wakeups`, offwaketime's idea, aggregated in the kernel). For the `preempt` probe
 * (`targ_preempted_stacks`) a preemption takes the user stack the thread was running. For the
 * `waitfor` probe (`targ_intervals`) every interval goes to user space as it ends (the shared
 * `bottleneck_events` ring buffer),
 * with who woke it: the bottleneck analysis follows each wait to what the waker was doing.
 *
 * Every sleep's waker is classed (enum waker_class): a thread of the program, one outside it,
 * or interrupt context (where `current` is just the thread the interrupt happened to land on),
 * told by hooks on interrupt handlers, softirqs and hrtimer callbacks. A wakeup may come before
 * the switch-out of the sleep it ends (on_waking): it is kept and ends that sleep as it began.
 * Futex sleeps also read the lock word's owner at switch-out.
 *
 * offcpu.bpf.h has its helpers: interrupt context, a futex's lock owner, and the kernel stacks of
 * sleeps and wakes whose path is fixed.
 */
#include "probe.bpf.h"
#include "offcpu.h"
#include "offcpu.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAX_THREADS 16384
#define MAX_OFFCPU_KEYS 16384
#define MAX_WAKEUP_KEYS 16384

/* Shortest interval aggregated with stacks (the per-thread times count every interval). */
const volatile __u64 targ_min_block_ns = 10000;
/* Aggregate each sleep with its waker's stacks too (the `wakeup` probe). Off by default: taking
 * the waker's stacks costs as much as the sleeper's, on every wakeup. */
const volatile bool targ_waker_stacks = false;

/* Take the user stack of a preempted thread too (the `preempt` probe): where it was running when
 * the scheduler took its CPU away. Off by default: one unwinding per preemption. */
const volatile bool targ_preempted_stacks = false;

/* The `preempt` probe takes a thread's user stack at most once per this many nanoseconds of its
 * preemptions (0: at every one). A CPU-bound thread is preempted every millisecond or so (41,000
 * preemptions a second among 50 MariaDB threads on 2 CPUs, nine in ten of their switches), each
 * at a new pc that no memo knows, and those walks were the largest cost of `--probes
 * bottleneck`. Sampled, a preemption's time is still kept whole: without a stack between
 * samples, counted per thread (preempted_unsampled). */
const volatile __u64 targ_preempted_stack_interval_ns = 0;

/* The `wakeup` probe takes the kernel stack of an interrupt that ends a thread's sleep at most
 * once per this many nanoseconds of that thread's sleeps (0: at every one). In interrupt context
 * bpf_get_stackid costs about 1 µs whatever the depth (993 ns at 12 frames, 1,074 at 127, against
 * 141 ns for the whole program without it), and servers are woken mostly so: 99.95% of MariaDB's
 * 74,000 wakeups a second under sysbench came from the loopback's network softirq, which made
 * the waker stacks cost 8.6% of a CPU. Sampled, such a wakeup's time is still kept whole: without
 * the handler's stack between samples, counted per thread (interrupt_waker_unsampled). */
const volatile __u64 targ_interrupt_waker_stack_interval_ns = 0;

/* Stream every interval to `intervals` (the `waitfor` probe). */
const volatile bool targ_intervals = false;

/* Distinct user stacks preemptions may add to the `user_stacks` map every probe shares (a
 * quarter of it): a CPU-bound thread is preempted at a new pc almost every time. Past it, a
 * preemption keeps its stack when an earlier event stored the same one, else it has none
 * (counted as a user stack failure); its time is kept either way. */
__s64 lks_preempted_stack_budget = LKS_USER_STACK_ENTRIES / 4;

/* Keys with a user stack preemptions may add to `offcpu` (a quarter of it): the stacks are
 * budgeted in `user_stacks`, but keyed per thread they multiply, and in a 10-minute soak of 50
 * busy MariaDB threads they filled the map, leaving no room for the sleeps (49,346 lost). Past
 * it, a preemption at a place not keyed yet goes to its thread's stackless key (counted as a
 * user stack failure); its time is kept either way. */
__s64 lks_preempted_key_budget = MAX_OFFCPU_KEYS / 4;

/* Keys with stacks wakeups may add to `wakeups` (three quarters of it): a pair of threads makes
 * a key per pair of places they meet at, and in a 10-minute soak of 50 busy MariaDB threads
 * the map filled (50,016 wakeups lost). Past it, a wakeup at stacks not keyed yet goes to its
 * pair of threads' stackless key, which the last quarter keeps room for (its stacks counted as
 * failures); its time is kept either way. */
__s64 lks_wakeup_stack_key_budget = MAX_WAKEUP_KEYS / 4 * 3;

/* CLOCK_MONOTONIC when the probes were attached, written by user space; threads first seen later
 * count from here. */
__u64 lks_start_ns = 0;

/* Scheduler events that did not fit the state machine (a missed or reordered event): a switch-out
 * of a thread not on the CPU, a switch-in of a thread already on it. Their interval is still
 * accounted, so the classes keep adding up to wall time: split by the kernel's own clocks of the
 * thread where they say how (recover_unseen_wakeup, recover_unseen_switch_in), else to the state
 * the thread was in. */
__u64 lks_out_of_order = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct offcpu_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_OFFCPU_KEYS);
	__type(key, struct offcpu_key);
	__type(value, struct lks_stats);
} offcpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WAKEUP_KEYS);
	__type(key, struct wakeup_key);
	__type(value, struct lks_stats);
} wakeups SEC(".maps");

/* Never read: makes the skeleton generate the Rust type of the ring buffer's records (it does
 * only for the types of maps and globals). */
struct offcpu_interval lks_offcpu_interval_type = {};

/* Template for new `threads` entries (bigger than the BPF stack allows comfortably). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_thread);
} fresh_thread SEC(".maps");

/* The time class of a sleep in each system call, by number (`enum time_class`), written by the
 * loader before load (src/probes/offcpu.rs, from the system calls' names): one table for this
 * program and for user space, which classes the threads that never ran by it. Numbers past
 * the table are LKS_TIME_OTHER. */
const volatile __u8 targ_syscall_class[LKS_SYSCALL_CLASS_SLOTS] = {};

static __always_inline enum time_class class_of_syscall(__s32 nr)
{
	if (nr < 0 || nr >= LKS_SYSCALL_CLASS_SLOTS)
		return LKS_TIME_OTHER;
	return targ_syscall_class[nr];
}

/* The hooks that track interrupt context (interrupt_depth, offcpu.bpf.h). The exits come first:
 * attached in this order, no entry is counted before its exit can be. */
SEC("tp_btf/irq_handler_exit")
int BPF_PROG(lks_offcpu_irq_exit) { return exit_interrupt(); }
SEC("tp_btf/softirq_exit")
int BPF_PROG(lks_offcpu_softirq_exit) { return exit_interrupt(); }
SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(lks_offcpu_hrtimer_exit) { return exit_interrupt(); }
SEC("tp_btf/irq_handler_entry")
int BPF_PROG(lks_offcpu_irq_entry) { return enter_interrupt(); }
SEC("tp_btf/softirq_entry")
int BPF_PROG(lks_offcpu_softirq_entry) { return enter_interrupt(); }
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(lks_offcpu_hrtimer_entry) { return enter_interrupt(); }

static __always_inline __u64 start_ns(__u64 now)
{
	__u64 start = lks_start_ns;

	return start && start < now ? start : now;
}

/* sched_info of kernels built without CONFIG_SCHED_INFO (CO-RE flavor: the field is absent). */
struct task_struct___sched_info {
	struct sched_info sched_info;
} __attribute__((preserve_access_index));

/* The kernel's count of the time `task` spent waiting for a CPU (0 without CONFIG_SCHED_INFO). */
static __always_inline __u64 task_run_delay_ns(struct task_struct *task)
{
	struct task_struct___sched_info *t = (void *)task;

	if (!bpf_core_field_exists(t->sched_info))
		return 0;
	return BPF_CORE_READ(t, sched_info.run_delay);
}

/* The kernel's count of the times `task` was given a CPU (0 without CONFIG_SCHED_INFO). */
static __always_inline __u64 task_switch_ins(struct task_struct *task)
{
	struct task_struct___sched_info *t = (void *)task;

	if (!bpf_core_field_exists(t->sched_info))
		return 0;
	return BPF_CORE_READ(t, sched_info.pcount);
}

/* The entry of thread `tid` (`task`), created in `state` since `since` when missing. A thread
 * first seen off a CPU has not run since its last switch-out: its clocks now are its clocks then,
 * which the recovery of an unseen switch-in measures from. */
static __always_inline struct offcpu_thread *thread_entry(struct task_struct *task, __u32 tid,
							   __u32 tgid, enum offcpu_state state,
							   __u64 since)
{
	struct offcpu_thread *t = bpf_map_lookup_elem(&threads, &tid);
	__u32 zero = 0;
	long err;

	if (t)
		return t;
	t = bpf_map_lookup_elem(&fresh_thread, &zero);
	if (!t)
		return NULL;
	t->tgid = tgid;
	t->state = state;
	t->first_ns = since;
	t->since_ns = since;
	t->out_ns = since;
	t->wakeup_ns = since;
	t->interval_state = state == LKS_STATE_SLEEPING ? LKS_STATE_SLEEPING : LKS_STATE_RUN_QUEUE;
	t->owner_tid = 0;
	t->in_futex_wait = 0;
	t->syscall = -1;
	t->sleep_class = LKS_TIME_OTHER;
	t->user_stack_id = -1;
	t->kernel_stack_id = -1;
	t->waker.by = LKS_WOKEN_UNKNOWN;
	t->waker_user_stack_id = -1;
	t->waker_kernel_stack_id = -1;
	t->exec_at_out_ns = task_exec_ns(task);
	t->run_delay_at_out_ns = task_run_delay_ns(task);
	t->switch_ins_at_out = task_switch_ins(task);
	err = bpf_map_update_elem(&threads, &tid, t, BPF_NOEXIST);
	if (err && err != -EEXIST) {
		COUNT(start_map_full);
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

static __always_inline void add_time(struct offcpu_thread *t, enum time_class class, __u64 ns)
{
	__u64 i = class;

	if (i >= LKS_TIME_CLASSES)
		return;
	/* The mask keeps the bound for verifiers that lose the compare's (it is on a 32-bit copy);
	 * the barrier keeps clang from dropping the mask as redundant. */
	barrier_var(i);
	t->time_ns[i & 7] += ns;
}

/* Forgets the last sleep's waker (a new interval begins). */
static __always_inline void forget_waker(struct offcpu_thread *t)
{
	t->waker.by = LKS_WOKEN_UNKNOWN;
	t->waker.tgid = 0;
	t->waker.tid = 0;
	t->waker.comm[0] = 0;
	t->waker_user_stack_id = -1;
	t->waker_kernel_stack_id = -1;
}

/* Who is waking a thread, in the waker's context (sched_waking): the waker's class, and for a
 * thread (not interrupt context, where `current` is just the thread the interrupt landed on)
 * its ids and name in `w`, left as they are otherwise; `w->by` is the caller's to write. */
static __always_inline enum waker_class waker_of(__u64 now, struct offcpu_waker *w)
{
	__u64 pid_tgid;

	if (in_interrupt_context(now))
		return LKS_WOKEN_BY_INTERRUPT;
	pid_tgid = bpf_get_current_pid_tgid();
	w->tgid = pid_tgid >> 32;
	w->tid = (__u32)pid_tgid;
	bpf_get_current_comm(w->comm, sizeof(w->comm));
	return is_target(w->tgid) ? LKS_WOKEN_BY_PROGRAM : LKS_WOKEN_BY_OUTSIDE;
}

/* The slot of `t`'s wakeups kept in its stretch on a CPU after `switch_ins` switch-ins. */
static __always_inline struct offcpu_early_wakeup *early_wakeup_of(struct offcpu_thread *t,
								   __u64 switch_ins)
{
	return &t->early_wakeups[switch_ins & 1];
}

/* Whether a wakeup was kept as the thread left its CPU for its current sleep (in the stretch on a
 * CPU that the sleep's switch-out ended, see on_waking): then it ended that sleep. */
static __always_inline bool early_wakeup_ends_sleep(struct offcpu_thread *t)
{
	struct offcpu_early_wakeup *e = early_wakeup_of(t, t->switch_ins_at_out);

	return e->waker.by != LKS_WOKEN_UNKNOWN && e->switch_ins == t->switch_ins_at_out;
}

/* The wakeup kept as the thread left its CPU for its current sleep is that sleep's: its waker
 * becomes the sleep's. */
static __always_inline void adopt_early_waker(struct offcpu_thread *t)
{
	struct offcpu_early_wakeup *e = early_wakeup_of(t, t->switch_ins_at_out);

	t->waker = e->waker;
	e->waker.by = LKS_WOKEN_UNKNOWN;
}

/* Forgets the wakeups kept as the thread left its CPU (a new stretch on one begins). */
static __always_inline void forget_early_wakeups(struct offcpu_thread *t)
{
	t->early_wakeups[0].waker.by = LKS_WOKEN_UNKNOWN;
	t->early_wakeups[1].waker.by = LKS_WOKEN_UNKNOWN;
}

/* Ends the sleep `t` began at its switch-out, `at`, by the wakeup that came as it was leaving
 * its CPU (early_wakeups, see on_waking): asleep for no time, waiting for a CPU since. Too
 * short to aggregate (targ_min_block_ns), the sleep leaves its stacks and its waker to the
 * run-queue interval that follows, as a sleep woken later does. */
static __always_inline void take_early_wakeup(struct offcpu_thread *t, __u64 at)
{
	adopt_early_waker(t);
	t->state = LKS_STATE_RUN_QUEUE;
	t->since_ns = at;
	t->wakeup_ns = at;
}

/* Streams the off-CPU interval of `t` that ends at `now` (`targ_intervals`), where `prev` gave
 * it the CPU (NULL: unknown). Numbered even when not streamed or lost, so that user space sees a
 * gap where one is missing. */
static __always_inline void stream_interval(struct offcpu_thread *t, __u32 tid,
					    struct task_struct *prev, __u64 now)
{
	struct offcpu_interval *e;
	__u32 seq = t->interval_seq++;

	if (!targ_intervals)
		return;
	e = bpf_ringbuf_reserve(&bottleneck_events, sizeof(*e), 0);
	if (!e) {
		COUNT(dropped);
		return;
	}
	e->type = LKS_EVENT_INTERVAL;
	e->pad = 0;
	e->start_ns = t->out_ns;
	switch (t->interval_state) {
	case LKS_STATE_PREEMPTED:
		e->wakeup_ns = t->out_ns;
		break;
	case LKS_STATE_SLEEPING:
		/* Woken (state RUN_QUEUE since), or back on a CPU without a wakeup seen. */
		e->wakeup_ns = t->state == LKS_STATE_RUN_QUEUE ? t->wakeup_ns : now;
		break;
	default:
		e->wakeup_ns = t->wakeup_ns;
		break;
	}
	if (e->wakeup_ns < e->start_ns)
		e->wakeup_ns = e->start_ns;
	if (e->wakeup_ns > now)
		e->wakeup_ns = now;
	e->end_ns = now;
	e->object = t->object;
	e->tgid = t->tgid;
	e->tid = tid;
	e->seq = seq;
	e->state = t->interval_state;
	e->syscall = t->syscall;
	e->woken_by = t->waker.by;
	e->waker_tgid = t->waker.tgid;
	e->waker_tid = t->waker.tid;
	e->user_stack_id = t->user_stack_id;
	e->kernel_stack_id = t->kernel_stack_id;
	e->waker_user_stack_id = t->waker_user_stack_id;
	e->waker_kernel_stack_id = t->waker_kernel_stack_id;
	e->owner_tid = t->owner_tid;
	__builtin_memcpy(e->waker_comm, t->waker.comm, sizeof(e->waker_comm));
	if (prev) {
		e->holder_tgid = prev->tgid;
		e->holder_tid = prev->pid;
		bpf_probe_read_kernel_str(e->holder_comm, sizeof(e->holder_comm), prev->comm);
	} else {
		e->holder_tgid = 0;
		e->holder_tid = 0;
		e->holder_comm[0] = 0;
	}
	bpf_ringbuf_submit(e, lks_stream_submit_flags());
}


static __always_inline void record_interval(struct offcpu_thread *t, __u32 tid,
					    enum offcpu_state state, __u64 ns, bool stacks,
					    struct task_struct *task)
{
	struct offcpu_key key = {};
	struct lks_stats *entry = NULL;

	if (ns < targ_min_block_ns)
		return;
	key.tgid = t->tgid;
	key.tid = tid;
	key.state = state;
	key.syscall = t->syscall;
	/* Not keyed by the futex word: one key per word multiplied the keys (the futex probe has
	 * the words). */
	key.object = 0;
	key.user_stack_id = stacks ? t->user_stack_id : -1;
	key.kernel_stack_id = stacks ? t->kernel_stack_id : -1;
	key.woken_by = state == LKS_STATE_PREEMPTED ? LKS_WOKEN_UNKNOWN : t->waker.by;
	if (state == LKS_STATE_PREEMPTED && key.user_stack_id >= 0 &&
	    !lks_key_keeps_stacks(&offcpu, &key, &lks_preempted_key_budget, &entry)) {
		COUNT(user_stack_failures);
		key.user_stack_id = -1;
		key.kernel_stack_id = -1;
	}
	if (entry) {
		add_duration(entry, ns);
		return;
	}
	if (try_aggregate(&offcpu, &key, ns, task) != -E2BIG)
		return;
	/* Full: a preemption's stacks make as many keys as the places threads run. Its time is kept
	 * under the stackless key of its thread rather than lost. */
	if (state == LKS_STATE_PREEMPTED && key.user_stack_id >= 0) {
		COUNT(user_stack_failures);
		key.user_stack_id = -1;
		key.kernel_stack_id = -1;
		aggregate(&offcpu, &key, ns, task);
		return;
	}
	COUNT(agg_map_full);
}

/* task_struct's state field before Linux 5.14 renamed it __state (CO-RE flavor). */
struct task_struct___state {
	long state;
} __attribute__((preserve_access_index));

/* The scheduling state of `task`, as sched_switch's prev_state argument gives it on Linux 5.18+
 * (older kernels' tracepoint has no such argument): 0 when it was preempted (still runnable). */
static __always_inline unsigned int switch_state(bool preempt, struct task_struct *task)
{
	if (preempt)
		return 0;
	if (bpf_core_field_exists(task->__state))
		return BPF_CORE_READ(task, __state);
	return BPF_CORE_READ((struct task_struct___state *)task, state);
}

/* A switch-out of `task` found it still asleep by our account: its wakeup went unseen, or came
 * as it left its CPU (kept, on_waking), and its switch-in went unseen (a program run the kernel
 * skipped; on some virtual machines no hook runs in the context of the host's agent, so a timer
 * that fires while the agent has the CPU wakes a thread unseen, and the agent's switch to it is
 * not traced). The kernel's own clocks of the thread split the time since the sleep began: it
 * ran for the growth of its CPU time, waited for a CPU for the growth of its run delay, and
 * slept the rest. The sleep is recorded as if seen, with its stacks and the waker kept as it
 * left its CPU, if any (else none); the thread is left woken at the sleep's end. */
static __always_inline void recover_unseen_wakeup(struct offcpu_thread *t, __u32 tid,
						  struct task_struct *task, __u64 now)
{
	__u64 elapsed = now - t->since_ns, ran, queued, slept;

	ran = task_exec_ns(task) - t->exec_at_out_ns;
	queued = task_run_delay_ns(task) - t->run_delay_at_out_ns;
	/* The clocks are the scheduler's, not bpf_ktime_get_ns: bound each by what is left. */
	if (ran > elapsed)
		ran = elapsed;
	if (queued > elapsed - ran)
		queued = elapsed - ran;
	slept = elapsed - ran - queued;
	/* A wakeup kept as the thread left its CPU for this sleep ended it, unseen from then on. */
	if (early_wakeup_ends_sleep(t))
		adopt_early_waker(t);
	add_time(t, t->sleep_class, slept);
	t->woken_ns[t->waker.by & 3] += slept;
	record_interval(t, tid, LKS_STATE_SLEEPING, slept, true, task);
	t->state = LKS_STATE_RUN_QUEUE;
	t->since_ns += slept;
	t->wakeup_ns = t->since_ns;
}

/* A switch-out of `task` found it waiting for a CPU (woken, or preempted): its switch-in went
 * unseen (the host agent's switch-outs are not traced on those virtual machines). It ran for the
 * growth of its CPU time since its last switch-out, and waited for a CPU the rest: that wait is
 * recorded as if seen, its holder unknown. */
static __always_inline void recover_unseen_switch_in(struct offcpu_thread *t, __u32 tid,
						     struct task_struct *task, __u64 now)
{
	__u64 elapsed = now - t->since_ns, ran, queued;

	ran = task_exec_ns(task) - t->exec_at_out_ns;
	if (ran > elapsed)
		ran = elapsed;
	queued = elapsed - ran;
	add_time(t, LKS_TIME_RUN_QUEUE, queued);
	stream_interval(t, tid, NULL, t->since_ns + queued);
	record_interval(t, tid, t->state, queued, true, task);
	add_time(t, LKS_TIME_ON_CPU, ran);
}

static __always_inline void on_switch_out(void *ctx, struct task_struct *prev, unsigned int prev_state,
					  __u64 now, const bool compat)
{
	__u32 tgid = prev->tgid, tid = prev->pid;
	struct offcpu_thread *t;
	struct pt_regs *regs;
	struct stack_ids ids;
	__u64 futex_op = 0;
	bool preempted;

	if (!is_target(tgid))
		return;
	COUNT(events);
	/* First seen running: on the CPU since the recording started. */
	t = thread_entry(prev, tid, tgid, LKS_STATE_ON_CPU, start_ns(now));
	if (!t)
		return;
	/* Another CPU may have moved this thread's clock past our `now` (a waker that read the time
	 * before the sleeper's switch-out was written): never count backwards. */
	if (now < t->since_ns)
		now = t->since_ns;
	switch (t->state) {
	case LKS_STATE_ON_CPU:
		add_time(t, LKS_TIME_ON_CPU, now - t->since_ns);
		break;
	case LKS_STATE_DEAD:
		__sync_fetch_and_add(&lks_out_of_order, 1);
		break;
	default:
		/* Off the CPU by our account: its switch-in (and, asleep, its wakeup) went unseen.
		 * One call site each keeps the program small for old verifiers. */
		__sync_fetch_and_add(&lks_out_of_order, 1);
		/* A wakeup kept stays for the sleep this switch-out begins if it came in the
		 * stretch on a CPU this switch-out ends (on_waking). */
		if (t->state == LKS_STATE_SLEEPING)
			recover_unseen_wakeup(t, tid, prev, now);
		recover_unseen_switch_in(t, tid, prev, now);
		break;
	}
	t->since_ns = now;
	if (prev_state & LKS_TASK_DEAD) {
		t->state = LKS_STATE_DEAD;
		return;
	}
	bpf_get_current_comm(t->comm, sizeof(t->comm));
	t->out_ns = now;
	t->exec_at_out_ns = task_exec_ns(prev);
	t->run_delay_at_out_ns = task_run_delay_ns(prev);
	t->switch_ins_at_out = task_switch_ins(prev);
	t->syscall = -1;
	t->object = 0;
	t->owner_tid = 0;
	t->in_futex_wait = 0;
	forget_waker(t);
	regs = lks_task_pt_regs(prev);
	if (regs) {
		t->syscall = syscall_in_progress(regs);
		if (t->syscall == LKS_NR_FUTEX) {
			t->object = BPF_CORE_READ(regs, di);
			futex_op = BPF_CORE_READ(regs, si);
			t->owner_tid = futex_owner(t->object, futex_op);
		}
	}
	preempted = prev_state == 0;
	t->interval_state = preempted ? LKS_STATE_PREEMPTED : LKS_STATE_SLEEPING;
	if (preempted) {
		/* Preempted: its user stack only with the `preempt` probe (the registers saved when
		 * it entered the kernel, at the interrupt or system call where it lost the CPU); its
		 * kernel stack would be the scheduler's own path. */
		t->state = LKS_STATE_PREEMPTED;
		t->involuntary++;
		/* Still runnable: a wakeup kept only set it running again, and ends no later sleep. */
		early_wakeup_of(t, t->switch_ins_at_out)->waker.by = LKS_WOKEN_UNKNOWN;
		t->user_stack_id = -1;
		t->kernel_stack_id = -1;
		if (!targ_preempted_stacks ||
		    !stack_due(&t->preempted_stack_ns, &t->preempted_unsampled, now,
			       targ_preempted_stack_interval_ns))
			return;
	} else {
		t->state = LKS_STATE_SLEEPING;
		t->voluntary++;
		t->sleep_class = t->syscall < 0 ? LKS_TIME_OTHER : class_of_syscall(t->syscall);
		t->in_futex_wait = t->syscall == LKS_NR_FUTEX && interruptible_sleep(prev_state) &&
				   ((futex_op & LKS_FUTEX_CMD_MASK) == LKS_FUTEX_WAIT ||
				    (futex_op & LKS_FUTEX_CMD_MASK) == LKS_FUTEX_WAIT_BITSET);
	}
	/* One unwinder call site for both: the program stays half the size. */
	ids.user = lks_unwind_user_stack_budget(ctx, compat, LKS_UNWIND_SLOT_TASK,
						&lks_preempted_stack_budget, preempted);
	ids.kernel = preempted ? -1 : sleep_kernel_stack(ctx, t, prev_state, futex_op);
	if (ids.user < 0 && !current_is_kernel_thread())
		COUNT(user_stack_failures);
	if (ids.kernel < 0 && !preempted)
		COUNT(kernel_stack_failures);
	t->user_stack_id = ids.user < 0 ? -1 : ids.user;
	t->kernel_stack_id = ids.kernel < 0 ? -1 : ids.kernel;
}

static __always_inline void on_switch_in(struct task_struct *next, struct task_struct *prev,
					 __u64 now)
{
	__u32 tgid = next->tgid, tid = next->pid;
	struct offcpu_thread *t;
	__u64 ns;

	if (!is_target(tgid))
		return;
	/* First seen switching in: runnable since the recording started (a sleep would have been
	 * seen ending at its wakeup). */
	t = thread_entry(next, tid, tgid, LKS_STATE_RUN_QUEUE, start_ns(now));
	if (!t)
		return;
	/* Another CPU may have moved this thread's clock past our `now` (a waker that read the time
	 * before the sleeper's switch-out was written): never count backwards. */
	if (now < t->since_ns)
		now = t->since_ns;
	/* Back from a sleep no wakeup was seen ending: the wakeup that raced its switch-out
	 * (on_waking) ended it as it began. */
	if (t->state == LKS_STATE_SLEEPING && early_wakeup_ends_sleep(t))
		take_early_wakeup(t, t->since_ns);
	forget_early_wakeups(t);
	ns = now - t->since_ns;
	if (t->state != LKS_STATE_ON_CPU && t->state != LKS_STATE_DEAD)
		stream_interval(t, tid, prev, now);
	switch (t->state) {
	case LKS_STATE_SLEEPING:
		/* No wakeup seen, none kept either (on_waking): all of it was the sleep. */
		add_time(t, t->sleep_class, ns);
		record_interval(t, tid, LKS_STATE_SLEEPING, ns, true, next);
		break;
	case LKS_STATE_PREEMPTED:
		add_time(t, LKS_TIME_RUN_QUEUE, ns);
		record_interval(t, tid, LKS_STATE_PREEMPTED, ns, true, next);
		break;
	case LKS_STATE_RUN_QUEUE:
		add_time(t, LKS_TIME_RUN_QUEUE, ns);
		/* Woken, waiting for a CPU: the delay points at the sleep it woke from (its stacks,
		 * taken at that switch-out; none for a new thread), at no capture of its own. */
		record_interval(t, tid, LKS_STATE_RUN_QUEUE, ns, true, next);
		t->syscall = -1;
		t->object = 0;
		break;
	case LKS_STATE_ON_CPU:
		/* Its switch-out was missed: it was on a CPU until some point in between. */
		__sync_fetch_and_add(&lks_out_of_order, 1);
		add_time(t, LKS_TIME_ON_CPU, ns);
		break;
	default:
		__sync_fetch_and_add(&lks_out_of_order, 1);
		break;
	}
	t->state = LKS_STATE_ON_CPU;
	t->since_ns = now;
}

/* Three arguments: prev_state came in Linux 5.18, and a tp_btf program may not read past what
 * the kernel's tracepoint has. */
static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev,
				     struct task_struct *next, const bool compat)
{
	__u64 now = bpf_ktime_get_ns();

	on_switch_out(ctx, prev, switch_state(preempt, prev), now, compat);
	on_switch_in(next, prev, now);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(lks_offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, preempt, prev, next, false);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(lks_offcpu_switch_compat, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	return on_switch(ctx, preempt, prev, next, true);
}

/* A thread being woken; runs in the waker's context (unlike sched_wakeup, which may run on the
 * wakee's CPU). */
/* Adds a sleep of `ns` that `t`'s waker ended to `wakeups`, under the sleeper's and the waker's
 * stacks. Not inlined: its key stays off on_waking's frame, which is the first of the deepest
 * chain of calls (the unwinder's global functions and bpf_find_vma's callback after it), and
 * 6.1's verifier refuses a chain over 512 bytes, each frame rounded up to 32. */
static __noinline void aggregate_wakeup(struct offcpu_thread *t, __u32 tgid, __u32 tid, __u64 ns)
{
	struct wakeup_key key = {};
	struct lks_stats *entry = NULL;

	key.tgid = tgid;
	key.tid = tid;
	key.waker_tgid = t->waker.tgid;
	key.waker_tid = t->waker.tid;
	key.user_stack_id = t->user_stack_id;
	key.kernel_stack_id = t->kernel_stack_id;
	key.waker_user_stack_id = t->waker_user_stack_id;
	key.waker_kernel_stack_id = t->waker_kernel_stack_id;
	key.syscall = t->syscall;
	if ((key.user_stack_id >= 0 || key.kernel_stack_id >= 0 || key.waker_user_stack_id >= 0 ||
	     key.waker_kernel_stack_id >= 0) &&
	    !lks_key_keeps_stacks(&wakeups, &key, &lks_wakeup_stack_key_budget, &entry)) {
		if (key.user_stack_id >= 0 || key.waker_user_stack_id >= 0)
			COUNT(user_stack_failures);
		if (key.kernel_stack_id >= 0 || key.waker_kernel_stack_id >= 0)
			COUNT(kernel_stack_failures);
		key.user_stack_id = -1;
		key.kernel_stack_id = -1;
		key.waker_user_stack_id = -1;
		key.waker_kernel_stack_id = -1;
	}
	if (entry)
		add_duration(entry, ns);
	else
		aggregate(&wakeups, &key, ns, NULL);
}

static __always_inline int on_waking(void *ctx, struct task_struct *p, const bool compat)
{
	__u32 tgid = p->tgid, tid = p->pid;
	__u64 now = bpf_ktime_get_ns(), ns;
	enum waker_class by;
	struct offcpu_thread *t;
	struct stack_ids ids;
	struct offcpu_early_wakeup *early;
	__u64 switch_ins;

	if (!is_target(tgid))
		return 0;
	/* First seen being woken: asleep (in something unknown) since the recording started. */
	t = thread_entry(p, tid, tgid, LKS_STATE_SLEEPING, start_ns(now));
	if (!t)
		return 0;
	if (t->state == LKS_STATE_DEAD)
		return 0;
	switch_ins = task_switch_ins(p);
	/* On its CPU by our account: the thread has set itself asleep and either gets the CPU
	 * back from this wakeup (still on the run queue: no sleep follows), or is leaving the CPU
	 * for a sleep whose switch-out, on its own CPU, is still to come (the scheduler has taken
	 * it off the run queue and is picking what runs next) and which this wakeup ends. Which
	 * one, only what follows says: the waker is kept, and a sleep begun at the end of this
	 * stretch on a CPU that ends with no wakeup seen is this one's (take_early_wakeup, at its
	 * switch-in). The latest such wakeup is kept; the switch-in forgets it, and a wakeup seen
	 * during the sleep supersedes it. The kernel wakes only a thread that set itself asleep,
	 * so the same holds when our account is behind (docs/RELIABILITY.md): waiting for a CPU
	 * (preempted as it set itself asleep, when no sleep follows, or on its CPU after a
	 * switch-in we did not see), or asleep though given a CPU since its switch-out (its
	 * count of switch-ins grew: that sleep's wakeup and switch-in went unseen; its switch-out
	 * will account for them). Only this stretch's slot of kept wakeups is written here (the
	 * sleep being accounted has the other): the thread's own CPU may be running its
	 * switch-out, which reads that one. */
	if (t->state != LKS_STATE_SLEEPING || switch_ins != t->switch_ins_at_out) {
		early = early_wakeup_of(t, switch_ins);
		early->waker.tgid = 0;
		early->waker.tid = 0;
		early->waker.comm[0] = 0;
		by = waker_of(now, &early->waker);
		early->switch_ins = switch_ins;
		/* The class last: it says the rest is written. */
		asm volatile("" ::: "memory");
		early->waker.by = by;
		return 0;
	}
	/* Seen during the sleep: it supersedes one kept as the thread left its CPU. */
	early_wakeup_of(t, switch_ins)->waker.by = LKS_WOKEN_UNKNOWN;
	/* Another CPU may have moved this thread's clock past our `now` (a waker that read the time
	 * before the sleeper's switch-out was written): never count backwards. */
	if (now < t->since_ns)
		now = t->since_ns;
	ns = now - t->since_ns;
	add_time(t, t->sleep_class, ns);
	t->state = LKS_STATE_RUN_QUEUE;
	t->since_ns = now;
	t->wakeup_ns = now;
	t->waker.by = waker_of(now, &t->waker);
	t->woken_ns[t->waker.by & 3] += ns;
	if (ns < targ_min_block_ns)
		return 0;
	if (targ_waker_stacks) {
		/* In interrupt context the user stack would be the interrupted thread's: only the
		 * handler's kernel stack says anything. */
		if (t->waker.by == LKS_WOKEN_BY_INTERRUPT) {
			ids.user = -1;
			ids.kernel = stack_due(&t->interrupt_waker_stack_ns,
					       &t->interrupt_waker_unsampled, now,
					       targ_interrupt_waker_stack_interval_ns)
					     ? lks_kernel_stack(ctx)
					     : -1;
		} else {
			ids.user = lks_unwind_user_stack(ctx, compat);
			ids.kernel = waker_kernel_stack(ctx, t);
		}
		t->waker_user_stack_id = ids.user < 0 ? -1 : ids.user;
		t->waker_kernel_stack_id = ids.kernel < 0 ? -1 : ids.kernel;
	}
	record_interval(t, tid, LKS_STATE_SLEEPING, ns, true, p);
	if (targ_waker_stacks)
		aggregate_wakeup(t, tgid, tid, ns);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(lks_offcpu_waking, struct task_struct *p)
{
	return on_waking(ctx, p, false);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(lks_offcpu_waking_compat, struct task_struct *p)
{
	return on_waking(ctx, p, true);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(lks_offcpu_wakeup_new, struct task_struct *p)
{
	__u32 tgid = p->tgid, tid = p->pid;
	__u64 now = bpf_ktime_get_ns();
	struct offcpu_thread *t;

	if (!is_target(tgid))
		return 0;
	t = thread_entry(p, tid, tgid, LKS_STATE_RUN_QUEUE, now);
	if (t) {
		/* A reused thread id: start over. */
		if (t->state == LKS_STATE_DEAD) {
			__builtin_memset(t->time_ns, 0, sizeof(t->time_ns));
			__builtin_memset(t->woken_ns, 0, sizeof(t->woken_ns));
			t->first_ns = now;
			t->voluntary = 0;
			t->involuntary = 0;
		}
		t->state = LKS_STATE_RUN_QUEUE;
		t->since_ns = now;
		t->out_ns = now;
		t->wakeup_ns = now;
		/* A new task's clocks start at 0. */
		t->exec_at_out_ns = 0;
		t->run_delay_at_out_ns = 0;
		t->switch_ins_at_out = 0;
		t->interval_state = LKS_STATE_RUN_QUEUE;
		t->syscall = -1;
		t->object = 0;
		t->owner_tid = 0;
		t->in_futex_wait = 0;
		forget_waker(t);
		forget_early_wakeups(t);
		/* No sleep to point at: its first run-queue delay has no stack. */
		t->user_stack_id = -1;
		t->kernel_stack_id = -1;
	}
	return 0;
}
