//! Following the target set during a recording: the target's end, the forks, execs and exits
//! of recorded processes, a cgroup's members rescanned, and the processes still running.

use super::{Child, Recorder, Scope, SNAPSHOT_INTERVAL};
use crate::shared::ProcessEventKind;
use crate::target_set::{all_processes, process_alive};
use std::collections::BTreeSet;
use std::time::Instant;

impl Recorder {
    /// True once the target is gone (see [`RecorderStatus::target_exited`]).
    ///
    /// [`RecorderStatus::target_exited`]: super::RecorderStatus::target_exited
    pub(super) fn target_gone(&mut self) -> bool {
        match &self.scope {
            Scope::Command => self.child.as_mut().is_some_and(Child::try_reap),
            Scope::Pids { given, tree: false } => given.iter().all(|&pid| !process_alive(pid)),
            Scope::Pids { tree: true, .. } => self
                .shared
                .targets()
                .into_iter()
                .all(|pid| !process_alive(pid)),
            Scope::Cgroup(_) | Scope::All => false,
        }
    }

    /// Follows the target set: takes out the processes that left at the last poll, applies
    /// the process events, and rescans a cgroup (every [`SNAPSHOT_INTERVAL`]) or, after lost
    /// events, `/proc` (every process recorded).
    pub(super) fn follow_processes(&mut self) {
        for pid in std::mem::take(&mut self.leaving) {
            if !matches!(self.scope, Scope::All) {
                self.shared.remove_target(pid);
            }
            if let Some(unwinder) = &mut self.unwinder {
                unwinder.remove_process(pid);
            }
        }
        self.apply_process_events();
        let lost = self.shared.process_events_lost();
        let lost_more = lost != self.process_events_lost;
        self.process_events_lost = lost;
        let rescan = self.last_rescan.elapsed() >= SNAPSHOT_INTERVAL;
        match &self.scope {
            Scope::Cgroup(cgroup) if rescan || lost_more => {
                // The set before the cgroup is read: a child forked since is in the cgroup
                // already, and not taken out for missing from the list.
                let before: BTreeSet<u32> = self.shared.targets().into_iter().collect();
                let mut now = cgroup.processes();
                now.remove(&std::process::id());
                for &pid in now.difference(&before) {
                    if self.shared.add_target(pid).is_ok() {
                        self.processes.observe(pid);
                        self.maps.snapshot(pid);
                        if let Some(unwinder) = &mut self.unwinder {
                            let _ = unwinder.refresh(pid);
                        }
                    }
                }
                // Moved out (or exited): not recorded any more.
                self.leaving
                    .extend(before.difference(&now).filter(|&&pid| pid != 0));
                self.last_rescan = Instant::now();
            }
            Scope::All if lost_more => {
                let own = std::process::id();
                for pid in all_processes() {
                    if pid != own && !self.processes.contains(pid) && self.processes.observe(pid) {
                        self.young.insert(pid, Instant::now());
                    }
                }
            }
            _ => {}
        }
    }

    /// Applies the forks, execs and exits of recorded processes since the last call.
    pub(super) fn apply_process_events(&mut self) {
        for event in self.shared.process_events() {
            let pid = event.pid;
            match event.kind {
                ProcessEventKind::Fork { parent, .. } => {
                    self.processes.fork(
                        pid,
                        parent,
                        event.time_ns,
                        &event.comm,
                        event.kernel_thread,
                    );
                    if !event.kernel_thread {
                        self.maps_seen.remove(&pid);
                        self.maps.inherit(pid, parent);
                        if let Some(unwinder) = &mut self.unwinder {
                            let _ = unwinder.inherit(pid, parent);
                        }
                        self.young.insert(pid, Instant::now());
                    }
                }
                ProcessEventKind::Exec => {
                    self.processes.exec(pid, &event.comm);
                    self.maps_seen.remove(&pid);
                    self.maps.exec(pid, event.time_ns);
                    self.maps.snapshot(pid);
                    if let Some(unwinder) = &mut self.unwinder {
                        let _ = unwinder.exec(pid);
                    }
                    self.young.insert(pid, Instant::now());
                }
                ProcessEventKind::Exit { .. } => {
                    self.processes.exit(pid, event.time_ns);
                    self.young.remove(&pid);
                    self.leaving.push(pid);
                }
            }
        }
    }

    /// The processes of the set that still run (those whose threads a probe may list).
    pub(super) fn running_targets(&self) -> Vec<u32> {
        let mut pids = match self.scope {
            Scope::All => self.processes.running(),
            _ => self.shared.targets(),
        };
        pids.retain(|&pid| process_alive(pid));
        pids
    }
}
