//! One event line of the stream (`=== wf KIND TS PID TID ...`) parsed into an [`Event`], and
//! the frames that tell a wakeup done by an interrupt handler from one done by a thread
//! ([`is_interrupt_frame`], the OS-neutral crate's list, which the eBPF backend reads too).

use crate::catalog::TargetOs;
use crate::parse::ParsedFrame;
use lockscope_probes::bottleneck::ThreadRef;
pub use lockscope_probes::kernel_frames::is_interrupt_frame;

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
