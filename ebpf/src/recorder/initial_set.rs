//! The target set a recording starts with ([`InitialSet`]): the processes given by pid (and their
//! descendants), a cgroup's processes, or every process, entered in the shared maps, the
//! process table and the unwinder.

use super::Scope;
use crate::error::Error;
use crate::shared::SharedMaps;
use crate::target_set::{
    all_processes, descendants, process_command, process_tgid, unrecorded_children, Cgroup,
    ProcessTable,
};
use crate::unwind::Unwinder;
use lockscope_probes::RecordedTarget;
use std::collections::BTreeSet;
use std::path::Path;

/// Enters the processes of `set` in the process table and builds their unwind tables (the
/// urgent ones waited for: see [`Unwinder::add_process`]).
fn observe_and_unwind(
    set: &BTreeSet<u32>,
    processes: &mut ProcessTable,
    unwinder: &mut Option<Unwinder>,
) -> Result<(), Error> {
    for &pid in set {
        processes.observe(pid);
        if let Some(unwinder) = unwinder.as_mut() {
            unwinder.add_process(pid)?;
        }
    }
    Ok(())
}

/// Starting a recording's target set: the shared maps, the unwinder and the process table.
pub(super) struct InitialSet<'a> {
    shared: &'a mut SharedMaps,
    unwinder: &'a mut Option<Unwinder>,
    processes: &'a mut ProcessTable,
}

impl<'a> InitialSet<'a> {
    pub(super) fn new(
        shared: &'a mut SharedMaps,
        unwinder: &'a mut Option<Unwinder>,
        processes: &'a mut ProcessTable,
    ) -> Self {
        InitialSet {
            shared,
            unwinder,
            processes,
        }
    }

    /// Processes `pids` (thread ids stand for their processes), and with `tree` the descendants
    /// they have; without, each descendant not recorded is a warning.
    pub(super) fn pids(
        self,
        pids: &[u32],
        tree: bool,
        warnings: &mut Vec<String>,
    ) -> Result<(RecordedTarget, Scope, Option<u32>), Error> {
        let InitialSet {
            shared,
            unwinder,
            processes,
        } = self;
        let mut given = BTreeSet::new();
        for &pid in pids {
            given.insert(process_tgid(pid).ok_or(Error::NoSuchProcess(pid))?);
        }
        let first = *given.first().ok_or(Error::NoTargets)?;
        for &pid in &given {
            shared.add_target(pid)?;
        }
        // Forks are followed from here on: a scan after it misses no descendant.
        shared.follow_forks()?;
        let mut set = given.clone();
        if tree {
            loop {
                let new: Vec<u32> = descendants(&set)
                    .into_iter()
                    .filter(|pid| !set.contains(pid))
                    .collect();
                if new.is_empty() {
                    break;
                }
                for pid in new {
                    shared.add_target(pid)?;
                    set.insert(pid);
                }
            }
        } else {
            warnings.extend(unrecorded_children(&given));
        }
        observe_and_unwind(&set, processes, unwinder)?;
        let pids: Vec<u32> = if given.len() > 1 {
            given.iter().copied().collect()
        } else {
            Vec::new()
        };
        let target = RecordedTarget {
            pid: first,
            command: process_command(first),
            launched: false,
            pids,
            tree,
            ..RecordedTarget::default()
        };
        let attach_pid = (set.len() == 1).then_some(first);
        Ok((target, Scope::Pids { given, tree }, attach_pid))
    }

    /// The processes of cgroup `path` and its descendant cgroups, lockscope's own (`own`) left
    /// out.
    pub(super) fn cgroup(
        self,
        path: &Path,
        own: u32,
        warnings: &mut Vec<String>,
    ) -> Result<(RecordedTarget, Scope, Option<u32>), Error> {
        let InitialSet {
            shared,
            unwinder,
            processes,
        } = self;
        let cgroup = Cgroup::resolve(path)?;
        let mut set = cgroup.processes();
        set.remove(&own);
        for &pid in &set {
            shared.add_target(pid)?;
        }
        shared.follow_forks()?;
        // Those that entered while the first ones were added.
        for pid in cgroup.processes() {
            if pid != own && set.insert(pid) {
                shared.add_target(pid)?;
            }
        }
        if set.is_empty() {
            warnings.push(format!(
                "cgroup {} has no processes yet: those that enter it are recorded \
                 from then on",
                cgroup.path
            ));
        }
        observe_and_unwind(&set, processes, unwinder)?;
        let target = RecordedTarget {
            cgroup: Some(cgroup.path.clone()),
            ..RecordedTarget::default()
        };
        Ok((target, Scope::Cgroup(cgroup), None))
    }

    /// Every process but `own`.
    pub(super) fn all(self, own: u32) -> Result<(RecordedTarget, Scope, Option<u32>), Error> {
        let InitialSet {
            shared,
            unwinder,
            processes,
        } = self;
        shared.record_all(own)?;
        shared.follow_forks()?;
        for pid in all_processes() {
            if pid == own || !processes.observe(pid) {
                continue;
            }
            // Queued, not waited for: a machine's programs are many, and the tables of
            // those a recording meets first are built first.
            let user = processes.get(pid).is_some_and(|p| !p.kernel_thread);
            if let (true, Some(unwinder)) = (user, unwinder.as_mut()) {
                let _ = unwinder.refresh(pid);
            }
        }
        let target = RecordedTarget {
            all: true,
            ..RecordedTarget::default()
        };
        Ok((target, Scope::All, None))
    }
}
