//! The bottleneck stream (`waitfor`, `--probes bottleneck`): the per-event lines the script prints
//! (`crate::probes`'s `waitfor`), read as dtrace prints them, assembled into the off-CPU
//! intervals of the target's threads and fed to the OS-neutral bottleneck engine
//! ([`lockscope_probes::bottleneck::Engine`]), as the eBPF backend feeds it from its ring buffer.
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
//! time order per CPU only: [`BottleneckStream`] keeps them [`REORDER_NS`] before acting on them in
//! time order. A thread's interval is its `out`, the first `wake` of it after that, and its next
//! `in` (whose `PREV_*` thread is who gave the CPU back). A `sched:::on-cpu` is not needed: the
//! switch-in is the `sched:::off-cpu` of the thread it replaces, which fires on every OS,
//! DTrace for Linux included (where `on-cpu` never fires). A sleep whose wakeup was not seen is
//! asleep to its end, `woken_by` unknown (`why` says `unknown`); an `out` while the thread is
//! already out, or an `in` of a thread not out, means events were dropped: the thread's next
//! interval carries a gap in its numbers, which the engine counts as lost and treats as unknown.
//!
//! The parts: `event` reads one event line, `parser` gathers each event with the stack
//! lines that follow it out of dtrace's output, and `stream` puts the events back in time
//! order, assembles each thread's intervals and feeds them to the engine.

mod event;
mod parser;
mod stream;
#[cfg(test)]
mod tests;

pub use event::{is_interrupt_frame, parse_event_line, Event, EventKind};
pub use parser::StreamParser;
pub use stream::{BottleneckStream, StreamResult, REORDER_NS};
