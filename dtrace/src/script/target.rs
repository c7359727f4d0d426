//! [`ScriptTarget`], what a script traces, and the rewriting of clauses written for one
//! process (`pid == $target`) for it.

use super::options::ScriptOptions;
use crate::catalog::DtraceProbe;
use crate::Error;
use lockscope_probes::Target;

/// What the script traces: a [`Target`] resolved into what D and dtrace(1) can say. A D script
/// names one process as `$target` (`-p PID` or `-c CMD`, whose argv goes to dtrace's command
/// line, not into the script) and several by a predicate on `pid`; it cannot name a cgroup.
/// The script generator and the recorder decide by this form, not by the [`Target`].
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
    /// The form of `target`: one running process without its tree is attached to with `-p`.
    /// Errors: [`Error::NoCgroup`] for a cgroup.
    pub fn of(target: &Target) -> Result<ScriptTarget, Error> {
        if let Some(pid) = target.single_pid() {
            return Ok(ScriptTarget::Pid(pid));
        }
        Ok(match target {
            Target::Pids { pids, tree } => ScriptTarget::Pids {
                pids: pids.clone(),
                tree: *tree,
            },
            Target::All => ScriptTarget::All,
            Target::Command(_) => ScriptTarget::Command,
            Target::Cgroup(_) => return Err(Error::NoCgroup),
        })
    }

    /// True for one process (`-p`, `-c`): the script may use `$target`.
    pub(crate) fn is_one_process(&self) -> bool {
        matches!(self, ScriptTarget::Pid(_) | ScriptTarget::Command)
    }

    /// The predicate that stands for `pid == $target`; `None` for every process.
    pub(super) fn predicate(&self) -> Option<String> {
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
pub(super) fn needs_one_process(probe: &DtraceProbe, options: &ScriptOptions) -> bool {
    let mut clauses = String::new();
    (probe.clauses)(&mut clauses, &mut Vec::new(), options);
    retarget(&clauses, &options.target).contains("$target")
}

/// The clauses of `text`, written for one process (`pid == $target`), rewritten for `target`.
pub(super) fn retarget(text: &str, target: &ScriptTarget) -> String {
    match target.predicate() {
        _ if target.is_one_process() => text.to_string(),
        None => text
            .replace("/pid == $target/\n", "")
            .replace("/pid == $target && ", "/"),
        Some(predicate) => text.replace("pid == $target", &format!("({predicate})")),
    }
}
