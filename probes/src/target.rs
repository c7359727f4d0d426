//! [`Target`]: what a recording records, as both backends take it.
//!
//! The command line (`-p`, `--tree`, `--cgroup`, `-a`, a command after `--`), `sweep` and
//! `bench --record` build one; the eBPF backend records it as given, the DTrace backend resolves
//! it into the form its script and dtrace(1)'s flags need (`lockscope_dtrace::ScriptTarget`).
//! What was recorded is stored in the profile as a [`RecordedTarget`](crate::RecordedTarget).

use std::ffi::OsString;
use std::path::PathBuf;

/// What to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Running processes (all their threads, including later ones, and the children they fork
    /// while recorded); with `tree`, the descendants they already have too. A thread id stands
    /// for its process.
    Pids {
        /// The processes, in the order given.
        pids: Vec<u32>,
        /// Their existing descendants too.
        tree: bool,
    },
    /// Every process of a cgroup (v2) and of its descendant cgroups, now and later (eBPF only:
    /// D has no variable for a process's cgroup): a path in the mounted hierarchy
    /// (`/sys/fs/cgroup/system.slice/apache2.service`), a path from its root
    /// (`/system.slice/apache2.service`, as `/proc/PID/cgroup` prints it), or a systemd unit's
    /// name (`apache2.service`).
    Cgroup(PathBuf),
    /// Every process of the machine, kernel threads included; lockscope's own left out.
    All,
    /// A command to launch once the probes are attached, `argv[0]` first (searched on `PATH`),
    /// recorded until it exits.
    Command(Vec<OsString>),
}

impl Target {
    /// One running process, without its existing descendants.
    pub fn pid(pid: u32) -> Self {
        Target::Pids {
            pids: vec![pid],
            tree: false,
        }
    }

    /// The one process recorded when it is a single running process without its existing
    /// descendants (`-p PID`): the DTrace backend attaches to it with `dtrace -p`.
    pub fn single_pid(&self) -> Option<u32> {
        match self {
            Target::Pids { pids, tree: false } if pids.len() == 1 => Some(pids[0]),
            _ => None,
        }
    }

    /// The running processes given (empty for a cgroup, every process or a command).
    pub fn given_pids(&self) -> &[u32] {
        match self {
            Target::Pids { pids, .. } => pids,
            Target::Cgroup(_) | Target::All | Target::Command(_) => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pid without `tree` is a single process; several, or one with its tree, are not.
    #[test]
    fn single_pid() {
        assert_eq!(Target::pid(12).single_pid(), Some(12));
        assert_eq!(Target::pid(12).given_pids(), [12]);
        let tree = Target::Pids {
            pids: vec![12],
            tree: true,
        };
        assert_eq!(tree.single_pid(), None);
        let two = Target::Pids {
            pids: vec![12, 34],
            tree: false,
        };
        assert_eq!(two.single_pid(), None);
        assert_eq!(Target::All.single_pid(), None);
        assert!(Target::Command(vec!["true".into()]).given_pids().is_empty());
    }
}
