//! D script generation: one script per recording, aggregating in the kernel.
//!
//! Every probe family aggregates into up to four aggregations that share one key,
//! `[op, pid, tid, object, execname, ustack()(, stack())]`: `count()`, `sum(ns)`, `max(ns)` and
//! `quantize(ns)`. In `END` one `printa()` per family prints them joined, framed by lines that
//! start with `=== ` which [`crate::parse`] reads (the format is lockscope's, not guessed):
//!
//! ```text
//! === lockscope begin os=macos format=1
//!
//! === lockscope record probe=psynch kind=auto
//! === key op=psynch_mutexwait pid=42 tid=1234 object=0x600000c04010
//! === thread myserver
//! === ustack
//!               libsystem_kernel.dylib`__psynch_mutexwait+0xa
//!               ...
//! === count 12
//! === total_ns 480000
//! === max_ns 90000
//! === histogram
//!            value  ------------- Distribution ------------- count
//!            ...
//! === end
//!
//! === lockscope done
//! ```
//!
//! `kind=auto` means the parser derives the category from `op` (psynch syscall, decoded
//! `_umtx_op`/`ulock_wait` operation, plockstat event) or, for `lwp_park` and compare-and-wait
//! operations that name no purpose, from the user stack.

use crate::catalog::{self, TargetOs, FUTEX_ENTRY_POINTS, FUTEX_WAIT_CMDS, UMTX_WAIT_OPS};
use crate::Error;
use lockscope_probes::catalog::WAITFOR;
use std::fmt::Write as _;
use std::time::Duration;

/// The names of the probes this backend shares with the OS-neutral catalog, from their
/// descriptors, as constants a `match` arm can take.
pub(crate) mod shared {
    use lockscope_probes::catalog;
    pub(crate) const FUTEX: &str = catalog::FUTEX.name;
    pub(crate) const OFFCPU: &str = catalog::OFFCPU.name;
    pub(crate) const WAITFOR: &str = catalog::WAITFOR.name;
    pub(crate) const MUTEX_HOLD: &str = catalog::MUTEX_HOLD.name;
    pub(crate) const KLOCK: &str = catalog::KLOCK.name;
    pub(crate) const LIFECYCLE: &str = catalog::LIFECYCLE.name;
    pub(crate) const CPU: &str = catalog::CPU.name;
    pub(crate) const SYSCALL: &str = catalog::SYSCALL.name;
}

/// Version of the record framing; printed in the `=== lockscope begin` line.
pub const FORMAT_VERSION: u32 = 1;

/// What the script traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptTarget {
    /// A running process, attached with `dtrace -p PID`.
    Pid(u32),
    /// A command that dtrace launches (`dtrace -c CMD`).
    Command,
    /// Running processes, without `-p`: every clause tests them in place of `pid == $target`.
    /// Without `tree` it is a global set of pids, which `proc:::create` extends with the
    /// children they fork; with `tree`, `progenyof()` of each (the process and every
    /// descendant, existing or new). The per-process providers (`pid$target`,
    /// `plockstat$target`) cannot be named: their probes are refused.
    Pids {
        /// The processes.
        pids: Vec<u32>,
        /// Their descendants too.
        tree: bool,
    },
    /// Every process: the clauses have no pid predicate. The per-process providers are refused
    /// as for [`ScriptTarget::Pids`].
    All,
}

impl ScriptTarget {
    /// True for one process (`-p`, `-c`): the script may use `$target`.
    fn is_one_process(&self) -> bool {
        matches!(self, ScriptTarget::Pid(_) | ScriptTarget::Command)
    }

    /// The predicate that stands for `pid == $target`; `None` for every process.
    fn predicate(&self) -> Option<String> {
        match self {
            ScriptTarget::Pid(_) | ScriptTarget::Command => Some("pid == $target".to_string()),
            ScriptTarget::Pids { tree: false, .. } => Some("lockscope_traced[pid]".to_string()),
            ScriptTarget::Pids { pids, tree: true } => Some(
                pids.iter()
                    .map(|p| format!("progenyof({p})"))
                    .collect::<Vec<_>>()
                    .join(" || "),
            ),
            ScriptTarget::All => None,
        }
    }
}

/// True when probe `name`'s clauses for `options` name a per-process provider (`$target`) even
/// once retargeted: it can record one process only.
fn needs_one_process(name: &str, options: &ScriptOptions) -> bool {
    let mut clauses = String::new();
    emit_probe(&mut clauses, &mut Vec::new(), name, options);
    retarget(&clauses, &options.target).contains("$target")
}

/// The clauses of `text`, written for one process (`pid == $target`), rewritten for `target`.
fn retarget(text: &str, target: &ScriptTarget) -> String {
    match target.predicate() {
        _ if target.is_one_process() => text.to_string(),
        None => text
            .replace("/pid == $target/\n", "")
            .replace("/pid == $target && ", "/"),
        Some(predicate) => text.replace("pid == $target", &format!("({predicate})")),
    }
}

/// Options of [`generate_script`]. Build with [`ScriptOptions::new`] and set fields.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScriptOptions {
    /// The OS the script runs on. Default: the host's, else macOS.
    pub os: TargetOs,
    /// Catalog names of the probes to enable; empty means the defaults for `os` and `target`
    /// (see [`catalog::defaults_for`]). Default: empty.
    pub probes: Vec<String>,
    /// What is traced. Default: [`ScriptTarget::Command`].
    pub target: ScriptTarget,
    /// Most user-stack frames captured (`ustackframes`). Default: 100.
    pub ustack_frames: u32,
    /// Most kernel-stack frames captured (`stackframes`). Default: 40.
    pub kernel_stack_frames: u32,
    /// Recording length: adds a `profile:::tick-N` clause that calls `exit(0)`. Default: none
    /// (until the target exits or lockscope interrupts dtrace).
    pub duration: Option<Duration>,
    /// Aggregation buffer size in bytes (`aggsize`). Default: 32 MiB.
    pub aggsize: u64,
    /// Thread-local variable space in bytes (`dynvarsize`). Default: 16 MiB.
    pub dynvarsize: u64,
    /// Principal buffer size in bytes (`bufsize`). Default: 8 MiB.
    pub bufsize: u64,
    /// Linux `futex` probe: also trace the libc entry points ([`FUTEX_ENTRY_POINTS`]) with
    /// `pid$target` probes to tell condvar, join, rwlock and semaphore waits apart when the
    /// user stack is too short to. The driver turns it off when the target has no such
    /// functions (a static or non-glibc binary: the descriptions match nothing). Default: true.
    pub libc_entry_points: bool,
}

impl Default for ScriptOptions {
    fn default() -> Self {
        Self::new(TargetOs::host().unwrap_or(TargetOs::MacOs))
    }
}

impl ScriptOptions {
    /// Default options for `os`.
    pub fn new(os: TargetOs) -> Self {
        ScriptOptions {
            os,
            probes: Vec::new(),
            target: ScriptTarget::Command,
            ustack_frames: 100,
            kernel_stack_frames: 40,
            duration: None,
            aggsize: 32 << 20,
            dynvarsize: 16 << 20,
            bufsize: 8 << 20,
            libc_entry_points: true,
        }
    }

    /// The catalog probes these options select, in catalog order, after validation (the
    /// `bottleneck` set expanded). The wait-for analysis (`waitfor`, `bottleneck`) exists where
    /// the sched provider has a usable wakeup probe ([`catalog::has_wait_for`]); elsewhere it is
    /// refused by name ([`Error::NoWaitFor`]).
    pub fn selected_probes(&self) -> Result<Vec<&'static catalog::DtraceProbe>, Error> {
        if let ScriptTarget::Pids { pids, .. } = &self.target {
            if pids.is_empty() {
                return Err(Error::InvalidOption {
                    option: "target",
                    reason: "no process given".into(),
                });
            }
        }
        let launched = self.target == ScriptTarget::Command;
        if self.probes.is_empty() {
            // Of several processes, the defaults that need one process's provider are left out.
            return Ok(catalog::defaults_for(self.os, launched)
                .filter(|p| self.target.is_one_process() || !needs_one_process(p.name, self))
                .collect());
        }
        let names = self.expanded_probes();
        for name in &names {
            if WAIT_FOR_PROBES.contains(&name.as_str()) && !catalog::has_wait_for(self.os) {
                return Err(Error::NoWaitFor {
                    probe: name.clone(),
                    os: self.os,
                });
            }
            let known = catalog::find(name)
                .is_some_and(|p| p.supports(self.os) || p.absent_on(self.os).is_some());
            if !known {
                let known: Vec<&str> = catalog::probes_for(self.os).map(|p| p.name).collect();
                return Err(Error::UnknownProbe {
                    probe: name.clone(),
                    os: self.os,
                    known: known.join(", "),
                });
            }
        }
        Ok(catalog::probes_for(self.os)
            .filter(|p| names.iter().any(|n| n == p.name))
            .collect())
    }

    /// The probe names asked for, with the `bottleneck` set expanded: the OS's defaults (the
    /// report's wait sites) and `waitfor` (`lockscope why`), as on the eBPF backend. Sets are
    /// expanded only where the wait-for analysis exists; elsewhere the name stays, to be refused
    /// by name.
    fn expanded_probes(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for name in &self.probes {
            if name == BOTTLENECK_SET && catalog::has_wait_for(self.os) {
                let launched = self.target == ScriptTarget::Command;
                // As when no probe is named: of several processes, not the defaults that need
                // one process's provider.
                names.extend(
                    catalog::defaults_for(self.os, launched)
                        .filter(|p| {
                            self.target.is_one_process() || !needs_one_process(p.name, self)
                        })
                        .map(|p| p.name.to_string()),
                );
                names.push(WAITFOR.name.to_string());
            } else {
                names.push(name.clone());
            }
        }
        names
    }

    /// The probes asked for that cannot fire on this OS's dtrace, with the reason
    /// ([`catalog::DtraceProbe::absent`]); they are left out of the script.
    pub fn absent_probes(&self) -> Vec<(&'static catalog::DtraceProbe, &'static str)> {
        catalog::DTRACE_CATALOG
            .iter()
            .filter(|p| self.probes.iter().any(|n| n == p.name))
            .filter_map(|p| Some((p, p.absent_on(self.os)?)))
            .collect()
    }

    fn validate(&self) -> Result<(), Error> {
        if !(1..=4096).contains(&self.ustack_frames) {
            return Err(Error::InvalidOption {
                option: "ustack_frames",
                reason: format!("{} is not in 1..=4096", self.ustack_frames),
            });
        }
        if !(1..=4096).contains(&self.kernel_stack_frames) {
            return Err(Error::InvalidOption {
                option: "kernel_stack_frames",
                reason: format!("{} is not in 1..=4096", self.kernel_stack_frames),
            });
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return Err(Error::InvalidOption {
                option: "duration",
                reason: "a recording cannot last zero seconds".into(),
            });
        }
        for (option, bytes) in [
            ("aggsize", self.aggsize),
            ("dynvarsize", self.dynvarsize),
            ("bufsize", self.bufsize),
        ] {
            if bytes < 4096 {
                return Err(Error::InvalidOption {
                    option,
                    reason: format!("{bytes} bytes is too small (at least 4096)"),
                });
            }
        }
        Ok(())
    }
}

/// One aggregation family: the aggregations of one tag, printed by one `printa()`.
struct Family {
    /// D identifier part: `@lockscope_<tag>_count`.
    tag: &'static str,
    /// Catalog probe name.
    probe: &'static str,
    /// WaitKind name, or `auto`.
    kind: &'static str,
    /// Key by `stack()` too.
    kernel_stack: bool,
    /// Aggregate durations (count, sum, max, quantize) rather than just count.
    timed: bool,
}

impl Family {
    fn keys(&self, op: &str, object: &str) -> String {
        let mut keys = format!("{op}, pid, tid, (uint64_t)({object}), execname, ustack()");
        if self.kernel_stack {
            keys.push_str(", stack()");
        }
        keys
    }

    /// Statements that add one event to the family's aggregations.
    fn aggregate(&self, out: &mut String, op: &str, object: &str, ns: &str) {
        let keys = self.keys(op, object);
        let tag = self.tag;
        let _ = writeln!(out, "\t@lockscope_{tag}_count[{keys}] = count();");
        if self.timed {
            let _ = writeln!(out, "\t@lockscope_{tag}_total[{keys}] = sum({ns});");
            let _ = writeln!(out, "\t@lockscope_{tag}_max[{keys}] = max({ns});");
            let _ = writeln!(out, "\t@lockscope_{tag}_hist[{keys}] = quantize({ns});");
        }
    }

    /// The `printa()` statement of the `END` clause.
    fn printa(&self, out: &mut String) {
        let mut format = format!(
            "\\n=== lockscope record probe={} kind={}\\n=== key op=%s pid=%d tid=%d \
             object=0x%x\\n=== thread %s\\n=== ustack%k",
            self.probe, self.kind
        );
        if self.kernel_stack {
            format.push_str("=== kstack%k");
        }
        format.push_str("=== count %@d\\n");
        let tag = self.tag;
        let mut aggs = format!("@lockscope_{tag}_count");
        if self.timed {
            format.push_str("=== total_ns %@d\\n=== max_ns %@d\\n=== histogram%@d\\n");
            let _ = write!(
                aggs,
                ", @lockscope_{tag}_total, @lockscope_{tag}_max, @lockscope_{tag}_hist"
            );
        }
        format.push_str("=== end\\n");
        let _ = writeln!(out, "\tprinta(\"{format}\",\n\t    {aggs});");
    }
}

/// Clauses of a syscall timed from entry to return: the entry saves the start time (and the
/// object and op), the return aggregates and clears the thread-local variables.
struct SyscallWait<'a> {
    family: Family,
    functions: &'a [&'a str],
    /// Extra predicate on the entry (after `pid == $target`).
    entry_filter: Option<String>,
    /// Expression of the waited-on object at entry.
    object: &'a str,
    /// Expression of the op key at return (may use `self->lockscope_<tag>_op`).
    op_at_entry: Option<&'a str>,
    op_at_return: &'a str,
}

fn emit_syscall_wait(out: &mut String, w: &SyscallWait<'_>) {
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
}

fn size_option(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{}m", bytes >> 20)
    } else if bytes.is_multiple_of(1 << 10) {
        format!("{}k", bytes >> 10)
    } else {
        bytes.to_string()
    }
}

fn tick_clause(duration: Duration) -> String {
    let ms = duration.as_millis().max(1);
    if ms.is_multiple_of(1000) {
        format!("profile:::tick-{}s", ms / 1000)
    } else {
        format!("profile:::tick-{ms}ms")
    }
}

/// The probe and the probe set of the wait-for analysis (`lockscope why`).
const WAIT_FOR_PROBES: &[&str] = &[WAITFOR.name, BOTTLENECK_SET];

/// The smallest principal buffer (`bufsize`, per CPU) of a script with the wait-for stream.
pub const WAITFOR_BUFSIZE: u64 = 32 << 20;

/// The probe set of `lockscope why`: the OS's defaults and `waitfor`.
pub const BOTTLENECK_SET: &str = lockscope_probes::catalog::BOTTLENECK.name;

/// Writes the D script for one recording.
///
/// Errors: [`Error::UnknownProbe`] for a probe that does not exist on `options.os`,
/// [`Error::InvalidOption`] for out-of-range sizes or a zero duration.
pub fn generate_script(options: &ScriptOptions) -> Result<String, Error> {
    options.validate()?;
    let probes = options.selected_probes()?;
    let os = options.os;
    let mut out = String::new();
    let names: Vec<&str> = probes.iter().map(|p| p.name).collect();
    let list = |pids: &[u32]| {
        pids.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let target = match &options.target {
        ScriptTarget::Pid(pid) => format!("process {pid} (dtrace -p)"),
        ScriptTarget::Command => {
            "a launched command (dtrace -c, or -p once lockscope has started it)".to_string()
        }
        ScriptTarget::Pids { pids, tree: false } => {
            format!("processes {} and the children they fork", list(pids))
        }
        ScriptTarget::Pids { pids, tree: true } => {
            format!("processes {} and their descendants (progenyof)", list(pids))
        }
        ScriptTarget::All => "every process".to_string(),
    };
    let _ = writeln!(
        out,
        "/*\n * Generated by lockscope {} for {os}: probes {}; target {target}.\n * Records \
         are framed by \"=== \" lines that lockscope parses: do not edit the printa formats.\n \
         */",
        env!("CARGO_PKG_VERSION"),
        names.join(", ")
    );
    for (probe, reason) in options.absent_probes() {
        let _ = writeln!(out, "/* absent on {os}: {}: {reason} */", probe.name);
    }
    let _ = writeln!(out, "#pragma D option quiet");
    let _ = writeln!(
        out,
        "#pragma D option ustackframes={}",
        options.ustack_frames
    );
    let _ = writeln!(
        out,
        "#pragma D option stackframes={}",
        options.kernel_stack_frames
    );
    let _ = writeln!(
        out,
        "#pragma D option aggsize={}",
        size_option(options.aggsize)
    );
    let _ = writeln!(
        out,
        "#pragma D option dynvarsize={}",
        size_option(options.dynvarsize)
    );
    let streams = names.contains(&WAITFOR.name);
    // The wait-for stream prints a few hundred bytes per context switch of the target: each
    // CPU's buffer must hold what comes between two passes of the consumer, and a busy
    // consumer (symbolizing stacks) falls behind now and then.
    let bufsize = if streams {
        options.bufsize.max(WAITFOR_BUFSIZE)
    } else {
        options.bufsize
    };
    let _ = writeln!(out, "#pragma D option bufsize={}", size_option(bufsize));
    let _ = writeln!(out, "#pragma D option strsize=256");
    if os == TargetOs::Linux || streams {
        // DTrace for Linux takes 3-7 s to end after exit() or a signal at the default 1 s
        // switch rate; 10 ms ends it in well under a second. And the wait-for stream is read
        // every 10 ms on every OS, not once a second (a second of switches per buffer).
        let _ = writeln!(out, "#pragma D option switchrate=10ms");
    }
    let _ = writeln!(out);
    if let ScriptTarget::Pids { pids, tree: false } = &options.target {
        // The set of traced pids: the ones given, and each child a traced process forks.
        let _ = writeln!(out, "dtrace:::BEGIN\n{{");
        for pid in pids {
            let _ = writeln!(out, "\tlockscope_traced[{pid}] = 1;");
        }
        let child = if os == TargetOs::FreeBsd {
            "args[0]->p_pid"
        } else {
            "args[0]->pr_pid"
        };
        let _ = writeln!(
            out,
            "}}\n\nproc:::create\n/lockscope_traced[pid]/\n{{\n\tlockscope_traced[{child}] = 1;\n}}\n"
        );
    }
    let _ = writeln!(
        out,
        "dtrace:::BEGIN\n{{\n\tprintf(\"=== lockscope begin os={os} format={FORMAT_VERSION}\\n\");\n}}\n"
    );

    let mut families: Vec<Family> = Vec::new();
    for probe in &probes {
        let _ = writeln!(out, "/* {}: {} */", probe.name, probe.description);
        let mut clauses = String::new();
        emit_probe(&mut clauses, &mut families, probe.name, options);
        let clauses = retarget(&clauses, &options.target);
        if !options.target.is_one_process() && clauses.contains("$target") {
            return Err(Error::InvalidOption {
                option: "probes",
                reason: format!(
                    "probe `{}` needs the per-process provider of one process ($target), which \
                     D names only for `dtrace -p PID` or `-c CMD`: record one process, or leave \
                     the probe out",
                    probe.name
                ),
            });
        }
        out.push_str(&clauses);
    }

    if let Some(duration) = options.duration {
        let _ = writeln!(out, "{}\n{{\n\texit(0);\n}}\n", tick_clause(duration));
    }
    let _ = writeln!(out, "dtrace:::END\n{{");
    if names.contains(&WAITFOR.name) {
        // The stream's end: the analysis' clock stops here, before END's records print.
        let _ = writeln!(out, "\tprintf(\"=== wf end %d\\n\", timestamp);");
    }
    for family in &families {
        family.printa(&mut out);
    }
    let _ = writeln!(out, "\tprintf(\"\\n=== lockscope done\\n\");\n}}");
    Ok(out)
}

fn emit_probe(out: &mut String, families: &mut Vec<Family>, name: &str, options: &ScriptOptions) {
    let os = options.os;
    match name {
        // The libc entry points are pid$target probes: one process only.
        shared::FUTEX => emit_linux_futex(
            out,
            families,
            options.libc_entry_points && options.target.is_one_process(),
        ),
        shared::OFFCPU if os == TargetOs::Linux => emit_linux_offcpu(out, families),
        shared::WAITFOR => emit_waitfor(out, os, options.ustack_frames),
        "psynch" => {
            let family = Family {
                tag: "psynch",
                probe: "psynch",
                kind: "auto",
                kernel_stack: false,
                timed: true,
            };
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family,
                    functions: &[
                        "psynch_mutexwait",
                        "psynch_cvwait",
                        "psynch_rw_rdlock",
                        "psynch_rw_wrlock",
                    ],
                    entry_filter: None,
                    object: "arg0",
                    op_at_entry: None,
                    op_at_return: "probefunc",
                },
            );
            families.push(family_of("psynch", "psynch", "auto", false, true));
        }
        "ulock" => {
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family: family_of("ulock", "ulock", "auto", false, true),
                    functions: &["ulock_wait", "ulock_wait2"],
                    entry_filter: None,
                    object: "arg1",
                    op_at_entry: Some("arg0 & 0xff"),
                    op_at_return: "strjoin(probefunc, strjoin(\"/\", \
                                   lltostr(self->lockscope_ulock_op)))",
                },
            );
            families.push(family_of("ulock", "ulock", "auto", false, true));
        }
        "semwait" => {
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family: family_of("semwait", "semwait", "semaphore", false, true),
                    functions: &["__semwait_signal"],
                    entry_filter: None,
                    object: "arg0",
                    op_at_entry: None,
                    op_at_return: "probefunc",
                },
            );
            families.push(family_of("semwait", "semwait", "semaphore", false, true));
        }
        "umtx" => {
            let ops: Vec<String> = UMTX_WAIT_OPS
                .iter()
                .map(|op| format!("arg1 == {op}"))
                .collect();
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family: family_of("umtx", "umtx", "auto", false, true),
                    functions: &["_umtx_op"],
                    entry_filter: Some(ops.join(" || ")),
                    object: "arg0",
                    op_at_entry: Some("arg1"),
                    op_at_return: "lltostr(self->lockscope_umtx_op)",
                },
            );
            families.push(family_of("umtx", "umtx", "auto", false, true));
        }
        "lwp-park" => {
            // lwp_park(which, ...): subcode 0 parks; 1 and 2 unpark and never block.
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family: family_of("lwp_park", "lwp-park", "auto", false, true),
                    functions: &["lwp_park"],
                    entry_filter: Some("arg0 == 0".into()),
                    object: "0",
                    op_at_entry: None,
                    op_at_return: "probefunc",
                },
            );
            families.push(family_of("lwp_park", "lwp-park", "auto", false, true));
        }
        "lwp-mutex" => {
            emit_syscall_wait(
                out,
                &SyscallWait {
                    family: family_of("lwp_mutex", "lwp-mutex", "mutex", false, true),
                    functions: &["lwp_mutex_timedlock"],
                    entry_filter: None,
                    object: "arg0",
                    op_at_entry: None,
                    op_at_return: "probefunc",
                },
            );
            families.push(family_of("lwp_mutex", "lwp-mutex", "mutex", false, true));
        }
        "plockstat" => emit_plockstat(out, families, os),
        shared::MUTEX_HOLD => {
            let family = family_of("mutex_hold", shared::MUTEX_HOLD, "mutex", false, true);
            // arg1 of mutex-acquire is non-zero for a recursive acquisition: time only the
            // outermost one, keyed by lock so nested locks do not clobber each other.
            let _ = writeln!(
                out,
                "plockstat$target:::mutex-acquire\n/arg1 == 0/\n{{\n\tself->lockscope_hold_ts[arg0] \
                 = timestamp;\n}}\n"
            );
            let _ = writeln!(
                out,
                "plockstat$target:::mutex-release\n/arg1 == 0 && self->lockscope_hold_ts[arg0]/\n{{"
            );
            let _ = writeln!(
                out,
                "\tthis->ns = timestamp - self->lockscope_hold_ts[arg0];"
            );
            family.aggregate(out, "\"hold\"", "arg0", "this->ns");
            let _ = writeln!(out, "\tself->lockscope_hold_ts[arg0] = 0;\n}}\n");
            families.push(family);
        }
        shared::KLOCK => {
            let block = family_of("lockstat_block", shared::KLOCK, "kernel-lock", true, true);
            let block_probes: &[&str] = match os {
                TargetOs::FreeBsd => &[
                    "lockstat:::adaptive-block",
                    "lockstat:::rw-block",
                    "lockstat:::sx-block",
                ],
                _ => &["lockstat:::adaptive-block", "lockstat:::rw-block"],
            };
            // arg0 is the lock, arg1 the time blocked in nanoseconds.
            let _ = writeln!(out, "{}\n/pid == $target/\n{{", block_probes.join(",\n"));
            block.aggregate(out, "probename", "arg0", "arg1");
            let _ = writeln!(out, "}}\n");
            // Spin probes report a spin measure whose unit differs between kernels: count only.
            let spin = family_of("lockstat_spin", shared::KLOCK, "kernel-lock", true, false);
            let _ = writeln!(out, "lockstat:::adaptive-spin\n/pid == $target/\n{{");
            spin.aggregate(out, "probename", "arg0", "0");
            let _ = writeln!(out, "}}\n");
            families.push(block);
            families.push(spin);
        }
        shared::OFFCPU => {
            let family = family_of("offcpu", shared::OFFCPU, "off-cpu", true, true);
            // off-cpu fires in the context of the thread leaving the CPU (its args describe the
            // NEXT thread, so they are never read): key by the current thread. on-cpu fires in
            // the context of the thread coming back.
            let _ = writeln!(out, "sched:::off-cpu\n/pid == $target/\n{{");
            let _ = writeln!(out, "\tself->lockscope_offcpu_ts = timestamp;");
            let op = if os == TargetOs::FreeBsd {
                // FreeBSD's sched provider is its own: no Solaris lwpsinfo semantics, but the
                // thread's wait message says why it sleeps ("umtxn", "select", "nanslp").
                let _ = writeln!(
                    out,
                    "\tself->lockscope_offcpu_why = curthread->td_wmesg != NULL ? \
                     stringof(curthread->td_wmesg) : \"preempted\";"
                );
                "self->lockscope_offcpu_why"
            } else {
                "\"off-cpu\""
            };
            let _ = writeln!(out, "}}\n");
            let _ = writeln!(out, "sched:::on-cpu\n/self->lockscope_offcpu_ts/\n{{");
            let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_offcpu_ts;");
            family.aggregate(out, op, "0", "this->ns");
            let _ = writeln!(out, "\tself->lockscope_offcpu_ts = 0;");
            if os == TargetOs::FreeBsd {
                let _ = writeln!(out, "\tself->lockscope_offcpu_why = 0;");
            }
            let _ = writeln!(out, "}}\n");
            families.push(family);
        }
        shared::LIFECYCLE => {
            let family = family_of("lifecycle", shared::LIFECYCLE, "lifecycle", false, false);
            let probes: &[&str] = match os {
                // FreeBSD's proc provider has no lwp-create.
                TargetOs::FreeBsd => &["proc:::create", "proc:::exec-success", "proc:::exit"],
                // lwp-exit fires on Linux; proc:::start and lwp-start abort DTrace for Linux.
                TargetOs::Linux => &[
                    "proc:::create",
                    "proc:::exec-success",
                    "proc:::exit",
                    "proc:::lwp-create",
                    "proc:::lwp-exit",
                ],
                _ => &[
                    "proc:::create",
                    "proc:::exec-success",
                    "proc:::exit",
                    "proc:::lwp-create",
                ],
            };
            let _ = writeln!(out, "{}\n/pid == $target/\n{{", probes.join(",\n"));
            family.aggregate(out, "probename", "0", "0");
            let _ = writeln!(out, "}}\n");
            families.push(family);
        }
        shared::CPU => {
            // A sample of a target thread on CPU: its CPU time is the sampling period. stack()
            // is empty for a sample taken in user mode.
            let family = family_of("cpu", shared::CPU, "on-cpu", true, true);
            let _ = writeln!(
                out,
                "{}\n/pid == $target/\n{{",
                crate::catalog::PROFILE_PROBE
            );
            family.aggregate(
                out,
                "\"profile-997\"",
                "0",
                &crate::catalog::PROFILE_PERIOD_NS.to_string(),
            );
            let _ = writeln!(out, "}}\n");
            families.push(family);
        }
        shared::SYSCALL => {
            let family = family_of("syscall", shared::SYSCALL, "syscall", false, true);
            let _ = writeln!(
                out,
                "syscall:::entry\n/pid == $target/\n{{\n\tself->lockscope_syscall_ts = \
                 timestamp;\n}}\n"
            );
            let _ = writeln!(out, "syscall:::return\n/self->lockscope_syscall_ts/\n{{");
            let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_syscall_ts;");
            family.aggregate(out, "probefunc", "0", "this->ns");
            let _ = writeln!(out, "\tself->lockscope_syscall_ts = 0;\n}}\n");
            families.push(family);
        }
        // selected_probes() only returns catalog names; every one has an arm above.
        _ => {}
    }
}

fn family_of(
    tag: &'static str,
    probe: &'static str,
    kind: &'static str,
    kernel_stack: bool,
    timed: bool,
) -> Family {
    Family {
        tag,
        probe,
        kind,
        kernel_stack,
        timed,
    }
}

fn emit_plockstat(out: &mut String, families: &mut Vec<Family>, os: TargetOs) {
    let family = family_of("plockstat", "plockstat", "auto", false, true);
    // mutex-block fires before the thread blocks, mutex-blocked after (arg1: acquired or not).
    let _ = writeln!(
        out,
        "plockstat$target:::mutex-block\n{{\n\tself->lockscope_plock_ts = timestamp;\n}}\n"
    );
    let _ = writeln!(
        out,
        "plockstat$target:::mutex-blocked\n/self->lockscope_plock_ts/\n{{"
    );
    let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_plock_ts;");
    family.aggregate(out, "\"mutex-block\"", "arg0", "this->ns");
    let _ = writeln!(out, "\tself->lockscope_plock_ts = 0;\n}}\n");
    if os == TargetOs::Illumos {
        // mutex-spin/mutex-spun never fire on macOS (its libpthread does not spin that way).
        let _ = writeln!(
            out,
            "plockstat$target:::mutex-spin\n{{\n\tself->lockscope_spin_ts = timestamp;\n}}\n"
        );
        let _ = writeln!(
            out,
            "plockstat$target:::mutex-spun\n/self->lockscope_spin_ts/\n{{"
        );
        let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_spin_ts;");
        family.aggregate(out, "\"mutex-spin\"", "arg0", "this->ns");
        let _ = writeln!(out, "\tself->lockscope_spin_ts = 0;\n}}\n");
    }
    // rw-block/rw-blocked: arg1 is non-zero for a writer.
    let _ = writeln!(
        out,
        "plockstat$target:::rw-block\n{{\n\tself->lockscope_rw_ts = timestamp;\n}}\n"
    );
    let _ = writeln!(
        out,
        "plockstat$target:::rw-blocked\n/self->lockscope_rw_ts/\n{{"
    );
    let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_rw_ts;");
    family.aggregate(
        out,
        "arg1 ? \"rw-wrlock\" : \"rw-rdlock\"",
        "arg0",
        "this->ns",
    );
    let _ = writeln!(out, "\tself->lockscope_rw_ts = 0;\n}}\n");
    families.push(family);
}

/// Linux futex waits: `syscall::futex` entry to return for the blocking commands, the op and
/// (with `entry_points`) the libc entry point the wait runs under in the key as `op/ctx`.
fn emit_linux_futex(out: &mut String, families: &mut Vec<Family>, entry_points: bool) {
    if entry_points {
        // One clause per entry point: its code is its index plus one (see
        // catalog::FUTEX_ENTRY_POINTS); cleared when the function returns.
        for (i, (function, _)) in FUTEX_ENTRY_POINTS.iter().enumerate() {
            let _ = writeln!(
                out,
                "pid$target::{function}:entry\n{{\n\tself->lockscope_futex_ctx = {};\n}}\n",
                i + 1
            );
        }
        let returns: Vec<String> = FUTEX_ENTRY_POINTS
            .iter()
            .map(|(function, _)| format!("pid$target::{function}:return"))
            .collect();
        let _ = writeln!(
            out,
            "{}\n{{\n\tself->lockscope_futex_ctx = 0;\n}}\n",
            returns.join(",\n")
        );
    }
    let cmds: Vec<String> = FUTEX_WAIT_CMDS
        .iter()
        .map(|cmd| format!("(arg1 & 0x7f) == {cmd}"))
        .collect();
    let ctx = if entry_points {
        "lltostr(self->lockscope_futex_ctx)"
    } else {
        "\"0\""
    };
    let op_at_return = format!("strjoin(lltostr(self->lockscope_futex_op), strjoin(\"/\", {ctx}))");
    emit_syscall_wait(
        out,
        &SyscallWait {
            family: family_of("futex", shared::FUTEX, "auto", false, true),
            functions: &["futex"],
            entry_filter: Some(cmds.join(" || ")),
            object: "arg0",
            op_at_entry: Some("arg1"),
            op_at_return: &op_at_return,
        },
    );
    families.push(family_of("futex", shared::FUTEX, "auto", false, true));
}

/// Linux off-CPU time. `sched:::on-cpu` never fires on DTrace for Linux, and the switch back
/// in (seen as the off-cpu of the thread it replaces, whose `args[0]` is the next thread) was
/// missed too often to be used (most switches in come from the idle task, and global arrays
/// shared between CPUs lost updates on a real dtrace). So the time is measured in the
/// thread's own context, from its first switch-out inside a system call to that call's return,
/// and aggregated there with the call's name and its user stack (the one it slept with): the
/// off-CPU time of a wait inside a system call, plus the microseconds between the switch back
/// in and the return. Time off the CPU outside system calls (preemption in user code) is not
/// counted.
fn emit_linux_offcpu(out: &mut String, families: &mut Vec<Family>) {
    let family = family_of("offcpu", shared::OFFCPU, "off-cpu", false, true);
    let _ = writeln!(
        out,
        "sched:::off-cpu\n/pid == $target && !self->lockscope_offcpu_ts/\n{{\n\t\
         self->lockscope_offcpu_ts = timestamp;\n}}\n"
    );
    let _ = writeln!(out, "syscall:::return\n/self->lockscope_offcpu_ts/\n{{");
    let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_offcpu_ts;");
    family.aggregate(out, "probefunc", "0", "this->ns");
    let _ = writeln!(out, "\tself->lockscope_offcpu_ts = 0;\n}}\n");
    families.push(family);
}

/// Kernel frames taken at a wakeup: the tracing path's own frames (DTrace's trampoline,
/// `bpf_trace_run1`, `try_to_wake_up` on Linux) and enough of the waker's to tell an interrupt
/// handler (a timer, a device) from a thread (`crate::waitfor::is_interrupt_frame`).
pub const WAKER_KERNEL_FRAMES: u32 = 12;

/// The wait-for stream (`waitfor`): one `printf` per scheduler event of the target's threads,
/// each a line `=== wf KIND TIMESTAMP ...` that `crate::waitfor` reads as dtrace prints it
/// (the fields are documented there), with the stacks it needs after it:
///
/// - `out`: a thread of the target leaves its CPU (`sched:::off-cpu`, in its own context): its
///   state (`curlwpsinfo->pr_state`: runnable means preempted), the system call it is in and
///   its user stack;
/// - `in`: a thread of the target gets a CPU. `sched:::on-cpu` never fires on DTrace for Linux,
///   but `sched:::off-cpu` fires on every switch with the next thread as `args[0]`/`args[1]`, so
///   the switch-in is the off-cpu of the thread it replaces (whose tid and name are who held the
///   CPU), on every OS alike;
/// - `wake`: a thread of the target is woken, in the waker's context: the waker's ids and name,
///   its kernel stack ([`WAKER_KERNEL_FRAMES`]: an interrupt handler is no thread) and, for a
///   waker of the target, its user stack (a `ustack()` in a kernel thread aborts the clause);
/// - `new`, `exit`: a thread of the target created (`proc:::lwp-create`) or ending.
///
/// The system call: on Linux the number the kernel saved at entry (`uregs[R_ERR]`, `orig_ax`;
/// -1 outside a call), named by `lockscope_probes::linux_syscalls`; elsewhere the name of the call the
/// thread entered last (`syscall:::entry/return`, a thread-local string).
fn emit_waitfor(out: &mut String, os: TargetOs, ustack_frames: u32) {
    let _ = writeln!(
        out,
        "dtrace:::BEGIN\n{{\n\tprintf(\"=== wf begin %d\\n\", timestamp);\n}}\n"
    );
    let call = if os == TargetOs::Linux {
        ("%d", "uregs[R_ERR]")
    } else {
        let _ = writeln!(
            out,
            "syscall:::entry\n/pid == $target/\n{{\n\tself->lockscope_wf_call = \
             probefunc;\n\tself->lockscope_wf_in = 1;\n}}\n"
        );
        let _ = writeln!(
            out,
            "syscall:::return\n/self->lockscope_wf_in/\n{{\n\tself->lockscope_wf_in = 0;\n}}\n"
        );
        (
            "%s",
            "self->lockscope_wf_in ? self->lockscope_wf_call : \"-\"",
        )
    };
    let _ = writeln!(
        out,
        "sched:::off-cpu\n/pid == $target/\n{{\n\tprintf(\"=== wf out %d %d %d %d {} %s\\n=== \
         ustack\", timestamp, pid, tid, curlwpsinfo->pr_state, {}, execname);\n\t\
         ustack({ustack_frames});\n}}\n",
        call.0, call.1
    );
    let _ = writeln!(
        out,
        "sched:::off-cpu\n/$target == args[1]->pr_pid/\n{{\n\tprintf(\"=== wf in %d %d %d %d %d \
         %s\\n\", timestamp, args[1]->pr_pid, args[0]->pr_lwpid, pid, tid, execname);\n}}\n"
    );
    let (probe, woken_pid, woken_tid) = if os == TargetOs::Linux {
        (
            "rawtp:sched::sched_waking",
            "((struct task_struct *)arg0)->tgid",
            "((struct task_struct *)arg0)->pid",
        )
    } else {
        ("sched:::wakeup", "args[1]->pr_pid", "args[0]->pr_lwpid")
    };
    for (waker, user) in [("pid == $target", true), ("pid != $target", false)] {
        let _ = write!(
            out,
            "{probe}\n/$target == {woken_pid} && {waker}/\n{{\n\tprintf(\"=== wf wake %d %d %d %d \
             %d %s\\n=== kstack\", timestamp, {woken_pid}, {woken_tid}, pid, tid, execname);\n\t\
             stack({WAKER_KERNEL_FRAMES});\n"
        );
        if user {
            let _ = write!(
                out,
                "\tprintf(\"=== ustack\");\n\tustack({ustack_frames});\n"
            );
        }
        let _ = writeln!(out, "}}\n");
    }
    // FreeBSD's proc provider has no lwp-create: its threads count from the recording's start.
    if os != TargetOs::FreeBsd {
        let _ = writeln!(
            out,
            "proc:::lwp-create\n/pid == $target/\n{{\n\tprintf(\"=== wf new %d %d %d\\n\", \
             timestamp, pid, args[0]->pr_lwpid);\n}}\n"
        );
        let _ = writeln!(
            out,
            "proc:::lwp-exit\n/pid == $target/\n{{\n\tprintf(\"=== wf exit %d %d %d\\n\", \
             timestamp, pid, tid);\n}}\n"
        );
    }
}
