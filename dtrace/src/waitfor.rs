//! The wait-for stream (`waitfor`, `--probes bottleneck`): the per-event lines the script prints
//! (`script::emit_waitfor`), read as dtrace prints them, assembled into the off-CPU intervals of
//! the target's threads and fed to the OS-neutral wait-for engine
//! ([`lockscope_probes::waitfor::Engine`]), as the eBPF backend feeds it from its ring buffer.
//!
//! Each event is one line, then the stacks it carries (a `=== ustack` or `=== kstack` line, then
//! frames, one per line, indented, as the `ustack()`/`stack()` actions print them):
//!
//! ```text
//! === wf begin TS
//! === wf out TS PID TID STATE CALL EXECNAME        (=== ustack: its user stack)
//! === wf in TS PID TID PREV_PID PREV_TID PREV_EXECNAME
//! === wf wake TS PID TID WAKER_PID WAKER_TID WAKER_EXECNAME   (=== kstack, and for a waker of
//!                                                  the target, === ustack)
//! === wf new TS PID TID
//! === wf exit TS PID TID
//! === wf end TS
//! ```
//!
//! `STATE` is `lwpsinfo_t.pr_state` (2, `SRUN`: preempted; otherwise asleep); `CALL` a system
//! call number on Linux (-1 printed unsigned: none), a name or `-` elsewhere; an `EXECNAME` may
//! hold spaces (it ends the line). dtrace prints each CPU's buffer in turn, so events come in
//! time order per CPU only: [`WaitForStream`] keeps them [`REORDER_NS`] before acting on them in
//! time order. A thread's interval is its `out`, the first `wake` of it after that, and its next
//! `in` (whose `PREV_*` thread is who gave the CPU back). A `sched:::on-cpu` is not needed: the
//! switch-in is the `sched:::off-cpu` of the thread it replaces, which fires on every OS,
//! DTrace for Linux included (where `on-cpu` never fires). A sleep whose wakeup was not seen is
//! asleep to its end, `woken_by` unknown (`why` says `unknown`); an `out` while the thread is
//! already out, or an `in` of a thread not out, means events were dropped: the thread's next
//! interval carries a gap in its numbers, which the engine counts as lost and treats as unknown.

use crate::catalog::TargetOs;
use crate::parse::ParsedFrame;
use lockscope_probes::waitfor::{
    Engine, EngineCounts, EngineLimits, Interval, IntervalKind, RawBlame, ThreadRef, WokenBy,
};
use lockscope_probes::{AddressSpace, ThreadTime, TimeClass};
use std::collections::{BTreeMap, HashMap};

/// How long an event is kept before it is acted on, nanoseconds: dtrace prints the per-CPU
/// buffers one after the other at each switch-rate pass (10 ms on Linux), so an event of one
/// CPU can print after a later one of another.
pub const REORDER_NS: u64 = 500_000_000;

/// How often (in the events' clock) the engine analyses what has arrived.
const ADVANCE_NS: u64 = 100_000_000;

/// `lwpsinfo_t.pr_state` of a runnable thread (`SRUN`): at a switch-out, a preemption.
const SRUN: u32 = 2;

/// What an event says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The recording's start (`BEGIN`).
    Begin,
    /// The recording's end (`END`).
    End,
    /// The thread left its CPU.
    Out {
        /// `lwpsinfo_t.pr_state`.
        state: u32,
        /// The system call it is in, by name.
        call: Option<String>,
        /// Its name (`execname`).
        name: String,
    },
    /// The thread got a CPU from `prev`.
    In {
        /// The thread that had the CPU (pid 0: the idle task).
        prev: ThreadRef,
        /// Its name.
        prev_name: String,
    },
    /// The thread was woken by `waker`.
    Wake {
        /// The waking thread (or the one an interrupt landed on).
        waker: ThreadRef,
        /// Its name.
        waker_name: String,
    },
    /// The thread was created.
    New,
    /// The thread ended.
    Exit,
}

/// One event of the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// `timestamp`, nanoseconds.
    pub ts: u64,
    /// The thread it is about (the woken one for `wake`, the next one for `in`).
    pub thread: ThreadRef,
    /// What happened.
    pub kind: EventKind,
    /// The user stack printed with it (`out`: the thread's; `wake`: the waker's).
    pub user_stack: Vec<ParsedFrame>,
    /// The kernel stack printed with it (`wake`: the waker's).
    pub kernel_stack: Vec<ParsedFrame>,
}

/// Parses an event line (`=== wf ...`, its newline stripped or not); `None` when it is not
/// one. `os` says how the call is printed.
pub fn parse_event_line(line: &str, os: TargetOs) -> Option<Event> {
    let rest = line.strip_prefix("=== wf ")?.trim_end_matches(['\n', '\r']);
    let (kind, rest) = rest.split_once(' ')?;
    let mut fields = rest.splitn(6, ' ');
    let mut number = || -> Option<u64> { fields.next()?.trim().parse().ok() };
    let ts = number()?;
    let thread_ref = |pid: u64, tid: u64| -> Option<ThreadRef> {
        Some(ThreadRef {
            pid: u32::try_from(pid).ok()?,
            tid: u32::try_from(tid).ok()?,
        })
    };
    let nobody = ThreadRef { pid: 0, tid: 0 };
    let event = |thread, kind| Event {
        ts,
        thread,
        kind,
        user_stack: Vec::new(),
        kernel_stack: Vec::new(),
    };
    match kind {
        "begin" => Some(event(nobody, EventKind::Begin)),
        "end" => Some(event(nobody, EventKind::End)),
        "new" | "exit" => {
            let thread = thread_ref(number()?, number()?)?;
            let kind = if kind == "new" {
                EventKind::New
            } else {
                EventKind::Exit
            };
            Some(event(thread, kind))
        }
        "out" => {
            let thread = thread_ref(number()?, number()?)?;
            let state = u32::try_from(number()?).ok()?;
            let call = fields.next()?;
            let name = fields.next().unwrap_or_default().to_string();
            Some(event(
                thread,
                EventKind::Out {
                    state,
                    call: call_name(call, os),
                    name,
                },
            ))
        }
        "in" | "wake" => {
            let thread = thread_ref(number()?, number()?)?;
            let other = thread_ref(number()?, number()?)?;
            let name = fields.next().unwrap_or_default().to_string();
            let kind = if kind == "in" {
                EventKind::In {
                    prev: other,
                    prev_name: name,
                }
            } else {
                EventKind::Wake {
                    waker: other,
                    waker_name: name,
                }
            };
            Some(event(thread, kind))
        }
        _ => None,
    }
}

/// The call of an `out` line: a number on Linux (`uregs[R_ERR]`, unsigned: -1 is none), else a
/// name (`-`: none).
fn call_name(field: &str, os: TargetOs) -> Option<String> {
    if os == TargetOs::Linux {
        // Printed as an unsigned 64-bit number: -1 (no system call) is 2^64 - 1.
        let nr = field.parse::<u64>().ok()? as i64;
        return lockscope_probes::linux_syscalls::syscall_name(nr).map(str::to_string);
    }
    (field != "-" && !field.is_empty()).then(|| field.to_string())
}

/// Kernel functions that run only in interrupt context (a timer, a device, a softirq): a wakeup
/// under one of them was done by an interrupt handler, not by the thread it interrupted (Linux,
/// illumos and FreeBSD names). `frame` is as dtrace prints it (``module`symbol+0xoff``).
pub fn is_interrupt_frame(frame: &str) -> bool {
    const PREFIXES: &[&str] = &[
        // Linux
        "asm_sysvec_",
        "sysvec_",
        "__sysvec_",
        "asm_common_interrupt",
        "common_interrupt",
        "__common_interrupt",
        "hrtimer_wakeup",
        "hrtimer_interrupt",
        "__hrtimer_run_queues",
        "handle_softirqs",
        "__do_softirq",
        "irq_exit",
        "__irq_exit_rcu",
        "run_timer_softirq",
        "call_timer_fn",
        "handle_irq_event",
        "__handle_irq_event",
        "handle_edge_irq",
        // illumos
        "intr_thread",
        "callout_",
        "cyclic_",
        "av_dispatch",
        // FreeBSD
        "ithread_loop",
        "intr_event_execute_handlers",
        "softclock",
        "callout_process",
        "sleepq_timeout",
    ];
    let symbol = frame.trim();
    let symbol = symbol.split_once('`').map_or(symbol, |(_, s)| s);
    PREFIXES.iter().any(|p| symbol.starts_with(p))
}

/// Which stack the frame lines that follow belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StackPart {
    User,
    Kernel,
}

/// Reads the stream's lines out of dtrace's stdout, as they come.
#[derive(Debug)]
pub struct StreamParser {
    os: TargetOs,
    current: Option<Event>,
    part: Option<StackPart>,
    /// Events parsed, for the stream to act on.
    done: Vec<Event>,
}

impl StreamParser {
    /// A parser for a script written for `os`.
    pub fn new(os: TargetOs) -> Self {
        StreamParser {
            os,
            current: None,
            part: None,
            done: Vec::new(),
        }
    }

    /// Takes `line` (without its newline) when it belongs to the stream: an event line, or a
    /// stack header, frame or empty line of the event being read. False: not the stream's (the
    /// event being read, if any, is complete).
    pub fn feed_line(&mut self, line: &str) -> bool {
        if line.starts_with("=== wf ") {
            self.flush();
            match parse_event_line(line, self.os) {
                Some(event) => self.current = Some(event),
                None => return true,
            }
            return true;
        }
        let Some(event) = self.current.as_mut() else {
            return false;
        };
        if line == "=== ustack" {
            self.part = Some(StackPart::User);
            return true;
        }
        if line == "=== kstack" {
            self.part = Some(StackPart::Kernel);
            return true;
        }
        if line.trim().is_empty() {
            return true;
        }
        if line.starts_with(char::is_whitespace) {
            let frame = ParsedFrame {
                text: line.trim().to_string(),
                annotation: None,
            };
            match self.part {
                Some(StackPart::User) => event.user_stack.push(frame),
                Some(StackPart::Kernel) => event.kernel_stack.push(frame),
                None => return false,
            }
            return true;
        }
        self.flush();
        false
    }

    /// Ends the event being read.
    pub fn flush(&mut self) {
        if let Some(event) = self.current.take() {
            self.done.push(event);
        }
        self.part = None;
    }

    /// The events complete since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.done)
    }
}

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
    /// Where its last interval ended: the next one starts no earlier (see [`WaitForStream::close`]).
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
pub struct WaitForStream {
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

impl std::fmt::Debug for WaitForStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitForStream")
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

impl WaitForStream {
    /// A stream for a script written for `os`.
    pub fn new(os: TargetOs) -> Self {
        WaitForStream {
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
        let ts = event.ts;
        match event.kind {
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
            _ => {}
        }
        let thread = event.thread;
        let state = self.threads.entry(thread.tid).or_default();
        if state.pid != thread.pid {
            // A new thread, or a thread id reused by another process.
            *state = ThreadState {
                pid: thread.pid,
                ..ThreadState::default()
            };
        }
        match event.kind {
            EventKind::New => state.created = Some(ts),
            EventKind::Exit => state.exited = Some(ts),
            EventKind::Out {
                state: s,
                call,
                name,
            } => {
                state.ran = true;
                if !name.is_empty() {
                    state.name = name;
                }
                if state.open.take().is_some() {
                    // Out again without an `in`: the switch-in was lost.
                    state.seq = state.seq.wrapping_add(1);
                    self.inconsistent += 1;
                }
                let preempted = s == SRUN;
                let user_stack = self.stacks.intern(AddressSpace::User, event.user_stack);
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
            EventKind::Wake { waker, waker_name } => {
                let asleep = state.open.as_ref().is_some_and(|o| {
                    o.kind == IntervalKind::Sleep && o.wakeup.is_none() && o.start <= ts
                });
                if !asleep {
                    // Woken while running (before its switch-out), or woken again: ends nothing.
                    return;
                }
                let interrupt = waker.pid == 0
                    || event
                        .kernel_stack
                        .iter()
                        .any(|f| is_interrupt_frame(&f.text));
                let woken_by = if interrupt {
                    WokenBy::Interrupt
                } else if waker.pid == thread.pid {
                    WokenBy::Program
                } else {
                    WokenBy::Outside
                };
                let waker_user_stack = if woken_by == WokenBy::Program {
                    self.stacks.intern(AddressSpace::User, event.user_stack)
                } else {
                    None
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
                    });
                }
            }
            EventKind::In { prev, prev_name } => {
                let first_run = !state.ran;
                state.ran = true;
                let open = state.open.take();
                let created = state.created;
                match open {
                    Some(open) => self.close(thread, open, ts, prev, &prev_name),
                    None if first_run && created.is_some() => {
                        let created = created.unwrap_or(ts);
                        self.push_new(thread, created, ts, prev, &prev_name);
                    }
                    None if first_run => {}
                    None => {
                        // In without an out: the switch-out was lost.
                        state.seq = state.seq.wrapping_add(1);
                        self.inconsistent += 1;
                    }
                }
            }
            EventKind::Begin | EventKind::End => {}
        }
        self.advance(ts);
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

/// Where a sleep in `call` goes in a thread's time.
fn time_class(call: Option<&str>) -> TimeClass {
    let Some(call) = call else {
        return TimeClass::Other;
    };
    match call {
        "futex" | "lwp_park" | "_umtx_op" | "lwp_mutex_timedlock" => TimeClass::Futex,
        "nanosleep" | "clock_nanosleep" | "pause" | "rt_sigsuspend" | "rt_sigtimedwait" => {
            TimeClass::Sleep
        }
        "poll" | "ppoll" | "select" | "pselect6" | "epoll_wait" | "epoll_pwait"
        | "epoll_pwait2" | "pollsys" | "kevent" | "port_getn" => TimeClass::Poll,
        "read" | "write" | "readv" | "writev" | "pread64" | "pwrite64" | "preadv" | "pwritev"
        | "preadv2" | "pwritev2" | "fsync" | "fdatasync" | "sync_file_range" | "recvfrom"
        | "recvmsg" | "recvmmsg" | "sendto" | "sendmsg" | "sendmmsg" | "accept" | "accept4"
        | "connect" | "io_getevents" | "io_uring_enter" | "openat" | "open" => TimeClass::Io,
        _ => TimeClass::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockscope_probes::waitfor::{RootKind, WaitPart};

    /// A recording of `sleep_under_lock` (built with frame pointers) by DTrace for Linux with
    /// the `waitfor` script, cut down to request-2's (tid 30472) intervals: a mutex wait that
    /// request-1 ends from `futex_wake`, another, then a `clock_nanosleep` that an hrtimer ends
    /// (in the idle task's context, pid 0), with request-1's own switch-outs between.
    const CAPTURED: &str = "\
=== wf begin 1301150000000
=== wf out 1301154041439 30470 30472 1 202 request-2
=== ustack
              libc.so.6`0x7fd961c3812b
              sul_fp`request_thread+0x22
              libc.so.6`0x7fd961c3b1f5
=== wf wake 1301156136557 30470 30472 30470 30471 request-1
=== kstack
              0xffffffffc002969c
              0xffffffffc0029212
              vmlinux`bpf_trace_run1+0xfe
              vmlinux`try_to_wake_up+0x3b6
              vmlinux`wake_up_q+0x33
              vmlinux`futex_wake+0x199
              vmlinux`do_futex+0x183
              vmlinux`__x64_sys_futex+0x12d
              vmlinux`do_syscall_64+0x71
              vmlinux`entry_SYSCALL_64_after_hwframe+0x76
=== ustack
              libc.so.6`0x7fd961c38193
              libc.so.6`0x7fd961c3b1f5
=== wf out 1301156260671 30470 30471 1 230 request-1
=== ustack
              libc.so.6`clock_nanosleep+0x65
              sul_fp`request_critical_section+0xe
              sul_fp`request_thread+0x27
              libc.so.6`0x7fd961c3b1f5
=== wf in 1301156269045 30470 30472 30470 30471 request-1
=== wf out 1301156279191 30470 30472 1 202 request-2
=== ustack
              libc.so.6`0x7fd961c3812b
              sul_fp`request_thread+0x22
              libc.so.6`0x7fd961c3b1f5
=== wf wake 1301162803996 30470 30472 30470 30471 request-1
=== kstack
              0xffffffffc002969c
              0xffffffffc0029212
              vmlinux`bpf_trace_run1+0xfe
              vmlinux`try_to_wake_up+0x3b6
              vmlinux`wake_up_q+0x33
              vmlinux`futex_wake+0x199
              vmlinux`do_futex+0x183
              vmlinux`__x64_sys_futex+0x12d
              vmlinux`do_syscall_64+0x71
              vmlinux`entry_SYSCALL_64_after_hwframe+0x76
=== ustack
              libc.so.6`0x7fd961c38193
              libc.so.6`0x7fd961c3b1f5
=== wf out 1301162825501 30470 30471 2 202 request-1
=== ustack
              libc.so.6`0x7fd961c38193
              libc.so.6`0x7fd961c3b1f5
=== wf in 1301162835520 30470 30472 30470 30471 request-1
=== wf out 1301162896472 30470 30472 1 230 request-2
=== ustack
              libc.so.6`clock_nanosleep+0x65
              sul_fp`request_critical_section+0xe
              sul_fp`request_thread+0x27
              libc.so.6`0x7fd961c3b1f5
=== wf wake 1301164962488 30470 30472 0 0 swapper/1
=== kstack
              0xffffffffc002a3e4
              0xffffffffc0029233
              vmlinux`bpf_trace_run1+0xfe
              vmlinux`try_to_wake_up+0x3b6
              vmlinux`hrtimer_wakeup+0x1e
              vmlinux`__hrtimer_run_queues+0x12e
              vmlinux`hrtimer_interrupt+0xf8
              vmlinux`__sysvec_apic_timer_interrupt+0x54
              vmlinux`sysvec_apic_timer_interrupt+0x60
              vmlinux`asm_sysvec_apic_timer_interrupt+0x16
              vmlinux`pv_native_safe_halt+0xb
              vmlinux`default_idle+0x5
=== wf in 1301164993449 30470 30472 0 0 swapper/1
=== wf end 1301170000000
";

    const REQUEST_1: ThreadRef = ThreadRef {
        pid: 30470,
        tid: 30471,
    };
    const REQUEST_2: ThreadRef = ThreadRef {
        pid: 30470,
        tid: 30472,
    };

    /// The events of `text`, one per event line (a line with its stack lines).
    fn blocks(text: &str) -> Vec<Vec<&str>> {
        let mut out: Vec<Vec<&str>> = Vec::new();
        for line in text.lines() {
            if line.starts_with("=== wf ") || out.is_empty() {
                out.push(Vec::new());
            }
            if let Some(last) = out.last_mut() {
                last.push(line);
            }
        }
        out
    }

    fn stream_of(blocks: &[Vec<&str>]) -> StreamResult {
        let mut stream = WaitForStream::new(TargetOs::Linux);
        for block in blocks {
            for line in block {
                assert!(stream.feed_line(line), "not taken: {line}");
            }
        }
        stream.finish().expect("the stream began")
    }

    /// Each kind of line gives its fields: the call by number on Linux (-1, printed unsigned,
    /// is none), by name elsewhere (`-`: none), and a name with spaces to the line's end.
    #[test]
    fn event_lines() {
        let out = parse_event_line(
            "=== wf out 1301162896472 30470 30472 1 230 request-2",
            TargetOs::Linux,
        )
        .expect("out");
        assert_eq!((out.ts, out.thread), (1_301_162_896_472, REQUEST_2));
        assert_eq!(
            out.kind,
            EventKind::Out {
                state: 1,
                call: Some("clock_nanosleep".into()),
                name: "request-2".into()
            }
        );
        let preempted = parse_event_line(
            "=== wf out 5 1 2 2 18446744073709551615 lto cgu.06",
            TargetOs::Linux,
        )
        .expect("out");
        assert_eq!(
            preempted.kind,
            EventKind::Out {
                state: 2,
                call: None,
                name: "lto cgu.06".into()
            }
        );
        let illumos =
            parse_event_line("=== wf out 5 1 2 1 lwp_park java", TargetOs::Illumos).expect("out");
        assert!(
            matches!(illumos.kind, EventKind::Out { call: Some(ref c), .. } if c == "lwp_park")
        );
        let none = parse_event_line("=== wf out 5 1 2 1 - java", TargetOs::FreeBsd).expect("out");
        assert!(matches!(none.kind, EventKind::Out { call: None, .. }));
        let wake = parse_event_line(
            "=== wf wake 1301164962488 30470 30472 0 0 swapper/1",
            TargetOs::Linux,
        )
        .expect("wake");
        assert_eq!(
            wake.kind,
            EventKind::Wake {
                waker: ThreadRef { pid: 0, tid: 0 },
                waker_name: "swapper/1".into()
            }
        );
        let switch_in = parse_event_line(
            "=== wf in 1301156269045 30470 30472 30470 30471 request-1",
            TargetOs::Linux,
        )
        .expect("in");
        assert_eq!(switch_in.thread, REQUEST_2);
        assert_eq!(
            switch_in.kind,
            EventKind::In {
                prev: REQUEST_1,
                prev_name: "request-1".into()
            }
        );
        assert_eq!(
            parse_event_line("=== wf new 7 30470 30472", TargetOs::Linux).map(|e| e.kind),
            Some(EventKind::New)
        );
        assert_eq!(
            parse_event_line("=== wf begin 12", TargetOs::Linux).map(|e| (e.ts, e.kind)),
            Some((12, EventKind::Begin))
        );
        assert_eq!(parse_event_line("=== wf out x", TargetOs::Linux), None);
        assert_eq!(
            parse_event_line("=== lockscope done", TargetOs::Linux),
            None
        );
    }

    /// Stack lines go to the event they follow, kernel and user apart; a line that is not the
    /// stream's (the target's own output, END's records) ends the event and is left to the
    /// caller.
    #[test]
    fn stacks_and_foreign_lines() {
        let mut parser = StreamParser::new(TargetOs::Linux);
        for line in blocks(CAPTURED)[2].iter() {
            assert!(parser.feed_line(line), "{line}");
        }
        assert!(!parser.feed_line("throughput: 440.3 units/s (1321 units in 3.000 s)"));
        assert!(!parser.feed_line("=== lockscope record probe=futex kind=auto"));
        assert!(
            !parser.feed_line("=== ustack"),
            "a record's stack is not the stream's"
        );
        let events = parser.take_events();
        assert_eq!(events.len(), 1);
        let wake = &events[0];
        assert_eq!(wake.kernel_stack.len(), 10);
        assert_eq!(wake.kernel_stack[5].text, "vmlinux`futex_wake+0x199");
        let user: Vec<&str> = wake.user_stack.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(
            user,
            ["libc.so.6`0x7fd961c38193", "libc.so.6`0x7fd961c3b1f5"]
        );
        assert!(!wake
            .kernel_stack
            .iter()
            .any(|f| is_interrupt_frame(&f.text)));
        let timer = &parse_all(&blocks(CAPTURED)[10..11])[0];
        assert!(timer
            .kernel_stack
            .iter()
            .any(|f| is_interrupt_frame(&f.text)));
    }

    fn parse_all(blocks: &[Vec<&str>]) -> Vec<Event> {
        let mut parser = StreamParser::new(TargetOs::Linux);
        for line in blocks.iter().flatten() {
            parser.feed_line(line);
        }
        parser.flush();
        parser.take_events()
    }

    /// request-2's three sleeps become three intervals however the CPUs' buffers interleave
    /// them: the two mutex waits woken by request-1 (a thread of the program: followed to it),
    /// the nanosleep by an interrupt (pid 0, a timer's stack): its own sleep, `blocked` in
    /// clock_nanosleep; every nanosecond of each is blamed once, and the thread's classes add up
    /// to its wall time.
    #[test]
    fn captured_intervals_in_any_order() {
        let blocks = blocks(CAPTURED);
        // As two CPUs' buffers print: the odd events first, then the even ones (begin and end
        // stay first and last).
        let (first, last) = (blocks[0].clone(), blocks[blocks.len() - 1].clone());
        let middle = &blocks[1..blocks.len() - 1];
        let mut shuffled = vec![first];
        shuffled.extend(middle.iter().step_by(2).cloned());
        shuffled.extend(middle.iter().skip(1).step_by(2).cloned());
        shuffled.push(last);
        for order in [blocks.clone(), shuffled] {
            let result = stream_of(&order);
            assert_eq!(result.counts.intervals, 3, "request-2's three ({order:?})");
            assert_eq!(result.counts.lost_intervals, 0);
            // The excerpt leaves out request-1's switch-ins between its two switch-outs: as far
            // as the stream can tell, one was lost (request-1 has no interval to mark).
            assert_eq!(result.inconsistent, 1);
            let mine: Vec<&RawBlame<u32>> = result
                .blame
                .iter()
                .filter(|b| b.wait.thread == REQUEST_2)
                .collect();
            let expected = (1_301_156_269_045 - 1_301_154_041_439)
                + (1_301_162_835_520 - 1_301_156_279_191)
                + (1_301_164_993_449 - 1_301_162_896_472);
            assert_eq!(mine.iter().map(|b| b.total_ns).sum::<u64>(), expected);
            let followed: u64 = mine
                .iter()
                .filter(|b| b.wait.woken_by == Some(WokenBy::Program))
                .map(|b| b.total_ns)
                .sum();
            assert_eq!(
                followed,
                (1_301_156_136_557 - 1_301_154_041_439) + (1_301_162_803_996 - 1_301_156_279_191)
            );
            assert!(mine
                .iter()
                .filter(|b| b.wait.woken_by == Some(WokenBy::Program))
                .all(|b| b.wait.waker == Some(REQUEST_1) && b.depth >= 1));
            let timer: Vec<_> = mine
                .iter()
                .filter(|b| b.wait.woken_by == Some(WokenBy::Interrupt))
                .collect();
            assert_eq!(timer.len(), 1, "{timer:?}");
            assert_eq!(timer[0].root.kind, RootKind::Blocked);
            assert_eq!(timer[0].wait.part, WaitPart::Asleep);
            assert_eq!(
                result
                    .calls
                    .get(timer[0].root.call as usize)
                    .map(String::as_str),
                Some("clock_nanosleep")
            );
            assert_eq!(timer[0].total_ns, 1_301_164_962_488 - 1_301_162_896_472);
            // The runnable part after the timer: the idle CPU's latency (holder tid 0).
            let runnable: Vec<_> = mine
                .iter()
                .filter(|b| {
                    b.wait.part == WaitPart::Runnable && b.root.holder.is_some_and(|h| h.tid == 0)
                })
                .collect();
            assert_eq!(
                runnable.iter().map(|b| b.total_ns).sum::<u64>(),
                1_301_164_993_449 - 1_301_164_962_488
            );
            let times = result
                .thread_times
                .iter()
                .find(|t| t.tid == REQUEST_2.tid)
                .expect("request-2's times");
            assert_eq!(times.accounted_ns(), times.wall_ns);
            assert_eq!(times.wall_ns, 1_301_170_000_000 - 1_301_150_000_000);
            assert_eq!(times.voluntary_switches, 3);
            assert!(result.names.contains(&(REQUEST_2, "request-2".to_string())));
        }
    }

    /// A thread's intervals never overlap, even where events came too late to be acted on in
    /// order: its off-CPU time is at most the span its intervals cover.
    #[test]
    fn intervals_of_a_thread_never_overlap() {
        let far = 600_000_000; // past REORDER_NS: the events before it are acted on
        let lines = [
            "=== wf begin 1000".to_string(),
            "=== wf out 1500 1 2 1 202 worker".into(),
            "=== wf in 1800 1 2 0 0 swapper/0".into(),
            "=== wf out 1900 1 2 1 202 worker".into(),
            format!("=== wf out {far} 1 3 1 202 other"),
            // The worker's switch-in at 1600 and switch-out at 1700 come late.
            "=== wf in 1600 1 2 0 0 swapper/0".into(),
            "=== wf out 1700 1 2 1 202 worker".into(),
            "=== wf in 2000 1 2 0 0 swapper/0".into(),
            format!("=== wf end {}", far + 1000),
        ];
        let mut stream = WaitForStream::new(TargetOs::Linux);
        for line in &lines {
            assert!(stream.feed_line(line), "{line}");
        }
        let result = stream.finish().expect("began");
        assert!(result.late > 0);
        let times = result
            .thread_times
            .iter()
            .find(|t| t.tid == 2)
            .expect("worker's times");
        let off: u64 = times
            .time_ns
            .iter()
            .filter(|(class, _)| **class != TimeClass::OnCpu)
            .map(|(_, ns)| ns)
            .sum();
        // Off its CPU from 1500 at the earliest to 2000 at the latest, once at a time.
        assert!(off <= 2000 - 1500, "{times:?}");
        assert!(result.inconsistent > 0);
    }

    /// A lost switch-in (two switch-outs in a row) is counted, and the engine sees a gap in the
    /// thread's interval numbers: lost, and unknown to whoever waited on it then; a wakeup of a
    /// thread that is not asleep ends nothing; a sleep whose wakeup was not seen is asleep to
    /// its end, by an unknown waker.
    #[test]
    fn lost_and_unmatched_events() {
        let lines = [
            "=== wf begin 1000",
            "=== wf out 1500 1 2 1 202 worker",
            "=== wf in 1800 1 2 0 0 swapper/0",
            "=== wf out 2000 1 2 1 202 worker",
            "=== wf out 3000 1 2 1 202 worker",
            "=== wf in 4000 1 2 1 3 other",
            "=== wf wake 4500 1 2 1 3 other",
            "=== wf out 5000 1 2 1 202 worker",
            "=== wf in 6000 1 2 0 0 swapper/0",
            "=== wf end 7000",
        ];
        let mut stream = WaitForStream::new(TargetOs::Linux);
        for line in lines {
            assert!(stream.feed_line(line));
        }
        let result = stream.finish().expect("began");
        assert_eq!(result.inconsistent, 1);
        assert_eq!(result.counts.intervals, 3);
        assert_eq!(result.counts.lost_intervals, 1);
        let unseen: Vec<_> = result
            .blame
            .iter()
            .filter(|b| b.wait.part == WaitPart::Asleep)
            .map(|b| (b.wait.woken_by, b.waits, b.total_ns))
            .collect();
        // 300 + 1000 + 1000: each sleep whole, none ended by the wakeup at 4500.
        assert_eq!(unseen, vec![(None, 3, 2300)], "{:?}", result.blame);
    }
}
