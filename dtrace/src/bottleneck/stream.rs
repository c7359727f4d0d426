//! [`BottleneckStream`]: the events of one recording, held [`REORDER_NS`] to act on them in time
//! order, assembled into each thread's off-CPU intervals (with who woke it and who gave the CPU
//! back) and fed to the bottleneck engine, each thread's time added up by class;
//! [`StreamResult`] is what it made of the recording.

use super::event::{is_interrupt_frame, Event, EventKind};
use super::parser::StreamParser;
use crate::catalog::TargetOs;
use crate::parse::ParsedFrame;
use lockscope_probes::bottleneck::{
    Engine, EngineCounts, EngineLimits, Interval, IntervalKind, RawBlame, ThreadRef, WokenBy,
};
use lockscope_probes::{linux_syscalls, AddressSpace, ThreadTime, TimeClass};
use std::collections::{BTreeMap, HashMap};

/// How long an event is kept before it is acted on, nanoseconds: dtrace prints the per-CPU
/// buffers one after the other at each switch-rate pass (10 ms on Linux), so an event of one
/// CPU can print after a later one of another.
pub const REORDER_NS: u64 = 500_000_000;

/// How often (in the events' clock) the engine analyses what has arrived.
const ADVANCE_NS: u64 = 100_000_000;

/// `lwpsinfo_t.pr_state` of a runnable thread (`SRUN`): at a switch-out, a preemption.
const SRUN: u32 = 2;

/// A thread's sleep or preemption in progress.
#[derive(Clone, Debug)]
struct Open {
    start: u64,
    kind: IntervalKind,
    call: Option<String>,
    user_stack: Option<u32>,
    wakeup: Option<Wakeup>,
}

#[derive(Clone, Debug)]
struct Wakeup {
    ts: u64,
    woken_by: WokenBy,
    waker: ThreadRef,
    waker_name: String,
    waker_user_stack: Option<u32>,
    waker_kernel_stack: Option<u32>,
}

/// What the stream knows of one thread of the target.
#[derive(Clone, Debug, Default)]
struct ThreadState {
    pid: u32,
    name: String,
    /// The next interval's number.
    seq: u32,
    created: Option<u64>,
    exited: Option<u64>,
    /// It has been seen on a CPU or leaving one.
    ran: bool,
    open: Option<Open>,
    /// Nanoseconds per class so far (not on-CPU: that is what is left of its wall time).
    time_ns: BTreeMap<TimeClass, u64>,
    voluntary: u64,
    involuntary: u64,
    /// Where its last interval ended: the next one starts no earlier (see [`BottleneckStream::close`]).
    last_end: u64,
}

/// Stacks by their frames' text, as the engine's handles.
#[derive(Debug, Default)]
struct StackTable {
    index: HashMap<(bool, Vec<String>), u32>,
    stacks: Vec<(AddressSpace, Vec<ParsedFrame>)>,
}

impl StackTable {
    fn intern(&mut self, space: AddressSpace, frames: Vec<ParsedFrame>) -> Option<u32> {
        if frames.is_empty() {
            return None;
        }
        let key = (
            space == AddressSpace::Kernel,
            frames.iter().map(|f| f.text.clone()).collect::<Vec<_>>(),
        );
        if let Some(&id) = self.index.get(&key) {
            return Some(id);
        }
        let id = u32::try_from(self.stacks.len()).ok()?;
        self.stacks.push((space, frames));
        self.index.insert(key, id);
        Some(id)
    }
}

/// The stream of one recording: events in, the engine's analysis out.
pub struct BottleneckStream {
    parser: StreamParser,
    /// Events waiting for [`REORDER_NS`], by time and arrival.
    pending: BTreeMap<(u64, u64), Event>,
    arrived: u64,
    latest: u64,
    begin: Option<u64>,
    end: Option<u64>,
    engine: Option<Engine<u32>>,
    last_advance: u64,
    threads: HashMap<u32, ThreadState>,
    stacks: StackTable,
    calls: Vec<String>,
    call_index: HashMap<String, i32>,
    /// Events read.
    events: u64,
    /// Events that contradicted the thread's state (a lost event before them).
    inconsistent: u64,
    /// The time of the last event acted on.
    acted: u64,
    /// Events that came after a later one had been acted on (more than [`REORDER_NS`] late).
    late: u64,
}

impl std::fmt::Debug for BottleneckStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BottleneckStream")
            .field("events", &self.events)
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}

/// What the stream made of a recording, for the profile (`crate::profile`).
#[derive(Debug)]
pub struct StreamResult {
    /// The engine's limits.
    pub limits: EngineLimits,
    /// The engine's counts.
    pub counts: EngineCounts,
    /// Its blame, stacks as indexes into `stacks`, calls as indexes into `calls`.
    pub blame: Vec<RawBlame<u32>>,
    /// Every stack the blame names, with its address space.
    pub stacks: Vec<(AddressSpace, Vec<ParsedFrame>)>,
    /// System call names.
    pub calls: Vec<String>,
    /// Where each thread's wall time went.
    pub thread_times: Vec<ThreadTime>,
    /// Each thread's name (its last `execname` at a switch-out).
    pub names: Vec<(ThreadRef, String)>,
    /// Events read.
    pub events: u64,
    /// Events that contradicted a thread's state: one was lost before each.
    pub inconsistent: u64,
    /// Events that came more than [`REORDER_NS`] after a later one (acted on out of order).
    pub late: u64,
}

impl BottleneckStream {
    /// A stream for a script written for `os`.
    pub fn new(os: TargetOs) -> Self {
        BottleneckStream {
            parser: StreamParser::new(os),
            pending: BTreeMap::new(),
            arrived: 0,
            latest: 0,
            begin: None,
            end: None,
            engine: None,
            last_advance: 0,
            threads: HashMap::new(),
            stacks: StackTable::default(),
            calls: Vec::new(),
            call_index: HashMap::new(),
            events: 0,
            inconsistent: 0,
            acted: 0,
            late: 0,
        }
    }

    /// Takes `line` (without its newline) when it belongs to the stream (see
    /// [`StreamParser::feed_line`]), and acts on the events old enough.
    pub fn feed_line(&mut self, line: &str) -> bool {
        let taken = self.parser.feed_line(line);
        self.take_parsed();
        taken
    }

    fn take_parsed(&mut self) {
        for event in self.parser.take_events() {
            self.events += 1;
            if event.ts < self.acted {
                // Later than REORDER_NS behind another CPU's: acted on out of order.
                self.late += 1;
            }
            self.latest = self.latest.max(event.ts);
            self.pending.insert((event.ts, self.arrived), event);
            self.arrived += 1;
        }
        let horizon = self.latest.saturating_sub(REORDER_NS);
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 >= horizon {
                break;
            }
            let event = entry.remove();
            self.acted = event.ts;
            self.act(event);
        }
    }

    fn intern_call(&mut self, call: Option<String>) -> i32 {
        let Some(call) = call else {
            return -1;
        };
        if let Some(&i) = self.call_index.get(&call) {
            return i;
        }
        let i = i32::try_from(self.calls.len()).unwrap_or(i32::MAX);
        self.calls.push(call.clone());
        self.call_index.insert(call, i);
        i
    }

    /// One event, in time order.
    fn act(&mut self, event: Event) {
        let Event {
            ts,
            thread,
            kind,
            user_stack,
            kernel_stack,
        } = event;
        match kind {
            EventKind::Begin => {
                self.begin.get_or_insert(ts);
                if self.engine.is_none() {
                    self.engine = Some(Engine::new(ts, EngineLimits::default()));
                    self.last_advance = ts;
                }
                return;
            }
            EventKind::End => {
                self.end.get_or_insert(ts);
                return;
            }
            EventKind::New => self.thread_state(thread).created = Some(ts),
            EventKind::Exit => self.thread_state(thread).exited = Some(ts),
            EventKind::Out { state, call, name } => {
                self.switched_out(thread, ts, state == SRUN, call, name, user_stack);
            }
            EventKind::Wake { waker, waker_name } => {
                let wakeup = PendingWakeup {
                    waker,
                    waker_name,
                    user_stack,
                    kernel_stack,
                };
                if !self.woken(thread, ts, wakeup) {
                    return;
                }
            }
            EventKind::In { prev, prev_name } => self.switched_in(thread, ts, prev, &prev_name),
        }
        self.advance(ts);
    }

    /// The state of `thread`, started anew for a new thread or a thread id reused by another
    /// process.
    fn thread_state(&mut self, thread: ThreadRef) -> &mut ThreadState {
        let state = self.threads.entry(thread.tid).or_default();
        if state.pid != thread.pid {
            *state = ThreadState {
                pid: thread.pid,
                ..ThreadState::default()
            };
        }
        state
    }

    /// `thread` leaves its CPU, `preempted` or to sleep, in system call `call` with
    /// `user_stack`: its interval opens.
    fn switched_out(
        &mut self,
        thread: ThreadRef,
        ts: u64,
        preempted: bool,
        call: Option<String>,
        name: String,
        user_stack: Vec<ParsedFrame>,
    ) {
        let state = self.thread_state(thread);
        state.ran = true;
        if !name.is_empty() {
            state.name = name;
        }
        if state.open.take().is_some() {
            // Out again without an `in`: the switch-in was lost.
            state.seq = state.seq.wrapping_add(1);
            self.inconsistent += 1;
        }
        let user_stack = self.stacks.intern(AddressSpace::User, user_stack);
        let state = self.threads.entry(thread.tid).or_default();
        if preempted {
            state.involuntary += 1;
        } else {
            state.voluntary += 1;
        }
        state.open = Some(Open {
            start: ts,
            kind: if preempted {
                IntervalKind::Preempted
            } else {
                IntervalKind::Sleep
            },
            call,
            user_stack,
            wakeup: None,
        });
    }

    /// `thread` is woken: the wakeup ends its sleep when it is asleep and not woken yet.
    /// False when the wakeup ends nothing (woken while running, before its switch-out, or
    /// woken again).
    fn woken(&mut self, thread: ThreadRef, ts: u64, wakeup: PendingWakeup) -> bool {
        let asleep =
            self.thread_state(thread).open.as_ref().is_some_and(|o| {
                o.kind == IntervalKind::Sleep && o.wakeup.is_none() && o.start <= ts
            });
        if !asleep {
            return false;
        }
        let PendingWakeup {
            waker,
            waker_name,
            user_stack,
            kernel_stack,
        } = wakeup;
        let interrupt = waker.pid == 0 || kernel_stack.iter().any(|f| is_interrupt_frame(&f.text));
        let woken_by = if interrupt {
            WokenBy::Interrupt
        } else if waker.pid == thread.pid {
            WokenBy::Program
        } else {
            WokenBy::Outside
        };
        let (waker_user_stack, waker_kernel_stack) = if woken_by == WokenBy::Program {
            (
                self.stacks.intern(AddressSpace::User, user_stack),
                self.stacks.intern(AddressSpace::Kernel, kernel_stack),
            )
        } else {
            (None, None)
        };
        if let Some(open) = self
            .threads
            .get_mut(&thread.tid)
            .and_then(|s| s.open.as_mut())
        {
            open.wakeup = Some(Wakeup {
                ts,
                woken_by,
                waker,
                waker_name,
                waker_user_stack,
                waker_kernel_stack,
            });
        }
        true
    }

    /// `thread` gets a CPU from `prev`: its open interval closes, or its first run after its
    /// creation is its start.
    fn switched_in(&mut self, thread: ThreadRef, ts: u64, prev: ThreadRef, prev_name: &str) {
        let state = self.thread_state(thread);
        let first_run = !state.ran;
        state.ran = true;
        let open = state.open.take();
        let created = state.created;
        match open {
            Some(open) => self.close(thread, open, ts, prev, prev_name),
            None if first_run && created.is_some() => {
                let created = created.unwrap_or(ts);
                self.push_new(thread, created, ts, prev, prev_name);
            }
            None if first_run => {}
            None => {
                // In without an out: the switch-out was lost.
                state.seq = state.seq.wrapping_add(1);
                self.inconsistent += 1;
            }
        }
    }

    /// The thread that gave the CPU back, and its name when it is outside the program.
    fn holder(thread: ThreadRef, prev: ThreadRef, prev_name: &str) -> (ThreadRef, Option<String>) {
        if prev.pid == 0 {
            return (ThreadRef { pid: 0, tid: 0 }, None);
        }
        let name = (prev.pid != thread.pid).then(|| prev_name.to_string());
        (prev, name)
    }

    fn push_new(&mut self, thread: ThreadRef, created: u64, ts: u64, prev: ThreadRef, name: &str) {
        let (holder, holder_name) = Self::holder(thread, prev, name);
        let state = self.threads.entry(thread.tid).or_default();
        let seq = state.seq;
        state.seq = state.seq.wrapping_add(1);
        *state.time_ns.entry(TimeClass::RunQueue).or_insert(0) += ts.saturating_sub(created);
        let interval = Interval {
            thread,
            seq: Some(seq),
            start_ns: created,
            wakeup_ns: created,
            end_ns: ts.max(created),
            kind: IntervalKind::New,
            call: -1,
            object: 0,
            woken_by: None,
            waker: None,
            user_stack: None,
            kernel_stack: None,
            waker_user_stack: None,
            waker_kernel_stack: None,
            holder: Some(holder),
        };
        if let Some(engine) = self.engine.as_mut() {
            engine.push(interval, None, holder_name.as_deref());
        }
    }

    /// Ends `open` of `thread` at `ts`, when `prev` gave it the CPU, and gives it to the engine.
    fn close(
        &mut self,
        thread: ThreadRef,
        mut open: Open,
        ts: u64,
        prev: ThreadRef,
        prev_name: &str,
    ) {
        let (holder, holder_name) = Self::holder(thread, prev, prev_name);
        // A thread is off its CPU once at a time: an interval that would begin before its last
        // one ended begins where that one ended (counted as a contradiction). An event acted on
        // out of order (more than REORDER_NS late: dtrace's consumer fell behind on one CPU)
        // has been seen to leave a thread's intervals overlapping, so that its off-CPU time
        // passed its wall time and its time on a CPU came out 0: `why` then left the request
        // threads of `sleep_under_lock` out of the threads that did the work.
        let last_end = self.threads.get(&thread.tid).map_or(0, |s| s.last_end);
        if open.start < last_end {
            self.inconsistent += 1;
            open.start = last_end;
        }
        let end = ts.max(open.start);
        // Without a wakeup seen, asleep to the end (the runnable part is not known).
        let wakeup_ns = match (&open.kind, &open.wakeup) {
            (IntervalKind::Sleep, Some(w)) => w.ts.clamp(open.start, end),
            (IntervalKind::Sleep, None) => end,
            _ => open.start,
        };
        let class = time_class(open.call.as_deref());
        let call = self.intern_call(open.call.clone());
        let state = self.threads.entry(thread.tid).or_default();
        let seq = state.seq;
        state.seq = state.seq.wrapping_add(1);
        state.last_end = end;
        match open.kind {
            IntervalKind::Sleep => {
                *state.time_ns.entry(class).or_insert(0) += wakeup_ns - open.start;
                *state.time_ns.entry(TimeClass::RunQueue).or_insert(0) += end - wakeup_ns;
            }
            _ => *state.time_ns.entry(TimeClass::RunQueue).or_insert(0) += end - open.start,
        }
        let wakeup = open.wakeup.as_ref();
        let woken_by = wakeup.map(|w| w.woken_by);
        let waker_name = wakeup
            .filter(|w| w.woken_by == WokenBy::Outside)
            .map(|w| w.waker_name.clone());
        let interval = Interval {
            thread,
            seq: Some(seq),
            start_ns: open.start,
            wakeup_ns,
            end_ns: end,
            kind: open.kind,
            call,
            object: 0,
            woken_by,
            waker: wakeup
                .filter(|w| w.woken_by == WokenBy::Program)
                .map(|w| w.waker),
            user_stack: open.user_stack,
            kernel_stack: None,
            waker_user_stack: wakeup.and_then(|w| w.waker_user_stack),
            waker_kernel_stack: wakeup.and_then(|w| w.waker_kernel_stack),
            holder: Some(holder),
        };
        if let Some(engine) = self.engine.as_mut() {
            engine.push(interval, waker_name.as_deref(), holder_name.as_deref());
        }
    }

    fn advance(&mut self, ts: u64) {
        if ts >= self.last_advance + ADVANCE_NS {
            if let Some(engine) = self.engine.as_mut() {
                engine.advance(ts);
            }
            self.last_advance = ts;
        }
    }

    /// Acts on every event left and ends the analysis; `None` when the stream never began
    /// (dtrace printed no `BEGIN` line of the stream).
    pub fn finish(mut self) -> Option<StreamResult> {
        self.parser.flush();
        self.take_parsed();
        for event in std::mem::take(&mut self.pending).into_values() {
            self.act(event);
        }
        let begin = self.begin?;
        let end = self.end.unwrap_or(self.latest).max(begin);
        let engine = self.engine.take()?;
        let limits = engine.limits();
        let (counts, blame, _) = engine.finish();
        let mut thread_times = Vec::new();
        let mut names = Vec::new();
        let mut threads: Vec<(u32, ThreadState)> = self.threads.into_iter().collect();
        threads.sort_by_key(|(tid, s)| (s.pid, *tid));
        for (tid, mut state) in threads {
            let thread = ThreadRef {
                pid: state.pid,
                tid,
            };
            let from = state.created.unwrap_or(begin).max(begin);
            let to = state.exited.unwrap_or(end).min(end).max(from);
            // Still off its CPU at the end: that stretch too (not analysed: it did not end).
            if let Some(open) = state.open.take() {
                let start = open.start.clamp(from, to);
                let class = match open.kind {
                    IntervalKind::Sleep => time_class(open.call.as_deref()),
                    _ => TimeClass::RunQueue,
                };
                *state.time_ns.entry(class).or_insert(0) += to - start;
            }
            let wall_ns = to - from;
            let off: u64 = state.time_ns.values().sum();
            let mut time_ns = state.time_ns;
            time_ns.insert(TimeClass::OnCpu, wall_ns.saturating_sub(off));
            time_ns.retain(|_, ns| *ns > 0);
            thread_times.push(ThreadTime {
                pid: state.pid,
                tid,
                wall_ns,
                time_ns,
                voluntary_switches: state.voluntary,
                involuntary_switches: state.involuntary,
                woken_ns: BTreeMap::new(),
            });
            if !state.name.is_empty() {
                names.push((thread, state.name));
            }
        }
        Some(StreamResult {
            limits,
            counts,
            blame,
            stacks: self.stacks.stacks,
            calls: self.calls,
            thread_times,
            names,
            events: self.events,
            inconsistent: self.inconsistent,
            late: self.late,
        })
    }
}

/// Where a sleep in `call` goes in a thread's time: as the eBPF backend classes it on Linux
/// ([`linux_syscalls::time_class`]), and the other OSes' own calls of those classes.
fn time_class(call: Option<&str>) -> TimeClass {
    let Some(call) = call else {
        return TimeClass::Other;
    };
    linux_syscalls::time_class(call).unwrap_or(match call {
        "lwp_park" | "_umtx_op" | "lwp_mutex_timedlock" => TimeClass::Futex,
        "pollsys" | "kevent" | "port_getn" => TimeClass::Poll,
        "open" => TimeClass::Io,
        _ => TimeClass::Other,
    })
}

/// A wakeup as its event carries it, before it is matched with the woken thread's sleep.
struct PendingWakeup {
    /// The waking thread (pid 0: an interrupt or the idle task).
    waker: ThreadRef,
    /// Its name.
    waker_name: String,
    /// Its user stack (printed for a waker of the target only).
    user_stack: Vec<ParsedFrame>,
    /// Its kernel stack: an interrupt handler there is no thread.
    kernel_stack: Vec<ParsedFrame>,
}
