//! The clauses of a wait timed from a system call's entry to its return ([`SyscallWait`]).

use super::family::Family;
use std::fmt::Write as _;

/// Clauses of a syscall timed from entry to return: the entry saves the start time (and the
/// object and op), the return aggregates and clears the thread-local variables.
pub(crate) struct SyscallWait<'a> {
    pub(crate) family: Family,
    pub(crate) functions: &'a [&'a str],
    /// Extra predicate on the entry (after `pid == $target`).
    pub(crate) entry_filter: Option<String>,
    /// Expression of the waited-on object at entry.
    pub(crate) object: &'a str,
    /// Expression of the op key at return (may use `self->lockscope_<tag>_op`).
    pub(crate) op_at_entry: Option<&'a str>,
    pub(crate) op_at_return: &'a str,
}

/// Writes the clauses of `w` into `out` and its family into `families`.
pub(crate) fn emit_syscall_wait(out: &mut String, families: &mut Vec<Family>, w: SyscallWait<'_>) {
    let tag = w.family.tag;
    let probes = |side: &str| {
        w.functions
            .iter()
            .map(|f| format!("syscall::{f}:{side}"))
            .collect::<Vec<_>>()
            .join(",\n")
    };
    let filter = w
        .entry_filter
        .as_ref()
        .map_or(String::new(), |f| format!(" && ({f})"));
    let _ = writeln!(out, "{}\n/pid == $target{filter}/\n{{", probes("entry"));
    let _ = writeln!(out, "\tself->lockscope_{tag}_ts = timestamp;");
    let _ = writeln!(out, "\tself->lockscope_{tag}_obj = {};", w.object);
    if let Some(op) = w.op_at_entry {
        let _ = writeln!(out, "\tself->lockscope_{tag}_op = {op};");
    }
    let _ = writeln!(out, "}}\n");
    let _ = writeln!(out, "{}\n/self->lockscope_{tag}_ts/\n{{", probes("return"));
    let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_{tag}_ts;");
    w.family.aggregate(
        out,
        w.op_at_return,
        &format!("self->lockscope_{tag}_obj"),
        "this->ns",
    );
    let _ = writeln!(out, "\tself->lockscope_{tag}_ts = 0;");
    let _ = writeln!(out, "\tself->lockscope_{tag}_obj = 0;");
    if w.op_at_entry.is_some() {
        let _ = writeln!(out, "\tself->lockscope_{tag}_op = 0;");
    }
    let _ = writeln!(out, "}}\n");
    families.push(w.family);
}
