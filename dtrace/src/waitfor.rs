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
pub const REORDER_NS: u64 = 250_000_000;

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

/// Parses an event line (`=== wf ...`, with or without its `=== wf ` prefix' trailing
/// newline); `None` when it is not one. `os` says how the call is printed.
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
        return crate::linux_syscalls::syscall_name(nr).map(str::to_string);
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
    fn close(&mut self, thread: ThreadRef, open: Open, ts: u64, prev: ThreadRef, prev_name: &str) {
        let (holder, holder_name) = Self::holder(thread, prev, prev_name);
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
