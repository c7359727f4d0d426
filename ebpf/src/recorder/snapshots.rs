//! Snapshots of the traced processes' memory maps (`/proc/PID/maps`), kept for symbolization
//! after they exit, the refreshes of their unwind tables that go with them, and the check for
//! code the unwinder could not place (which calls for a snapshot at the next poll).

use super::{Recorder, Scope, EARLY_SNAPSHOTS};
use crate::error::Error;
use crate::target_set::process_alive;
use std::time::Instant;

impl Recorder {
    /// True when the BPF unwinder met pcs it could not place since the last refresh; notes
    /// whether it has tables still being built.
    pub(super) fn unwinder_missed(&mut self) -> Result<bool, Error> {
        let Some(unwinder) = &self.unwinder else {
            self.tables_pending = false;
            return Ok(false);
        };
        let stats = unwinder.stats()?;
        self.tables_pending = stats.tables_pending > 0;
        let misses = stats.unknown_process + stats.unknown_mapping;
        let missed = misses != self.unwind_misses;
        self.unwind_misses = misses;
        // With every process recorded, a JIT or a process without a table misses all the time:
        // snapshotting the whole machine for it is left to the interval.
        Ok(missed && !matches!(self.scope, Scope::All))
    }

    /// Snapshots the maps of every process of the set, and forgets those that are gone. A
    /// process whose `/proc/PID/maps` reads as at its last snapshot is left as it is, unless
    /// `refresh` (the unwinder missed a pc, or has new tables for its mappings).
    pub(super) fn snapshot_maps(&mut self, refresh: bool) {
        let mut pids = match self.scope {
            Scope::All => self.processes.running_user(),
            _ => self.shared.targets(),
        };
        if self.target.pid != 0 {
            pids.push(self.target.pid);
        }
        pids.sort_unstable();
        pids.dedup();
        let mut gone = Vec::new();
        for pid in pids {
            let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok();
            if !refresh && text.is_some() && text.as_ref() == self.maps_seen.get(&pid) {
                continue;
            }
            let alive = self.maps.snapshot(pid);
            match text {
                // Read before the snapshot: a change between the two makes the next one full.
                Some(text) if alive => self.maps_seen.insert(pid, text),
                _ => self.maps_seen.remove(&pid),
            };
            if let Some(unwinder) = &mut self.unwinder {
                if alive {
                    // A failure leaves the process with its previous table; its stacks fall back
                    // to frame pointers and are counted (unknown_process, unknown_mapping).
                    let _ = unwinder.refresh(pid);
                }
            }
            if !alive && !process_alive(pid) {
                gone.push(pid);
            }
        }
        // After every live one's refresh: a child holds the files it shares with its parent
        // before the parent lets go of them.
        for pid in gone {
            self.maps_seen.remove(&pid);
            self.processes.gone(pid);
            if let Some(unwinder) = &mut self.unwinder {
                // Gone: a later process reusing the pid must not unwind with its table.
                unwinder.remove_process(pid);
            }
            if !matches!(self.scope, Scope::All) && !self.leaving.contains(&pid) {
                self.leaving.push(pid);
            }
        }
        self.young
            .retain(|_, since| since.elapsed() < EARLY_SNAPSHOTS);
        if let Some(unwinder) = &mut self.unwinder {
            unwinder.prune_memos();
        }
        self.last_snapshot = Some(Instant::now());
    }

    /// Snapshots the maps of the processes forked or exec'ed in the last second.
    pub(super) fn snapshot_young(&mut self) {
        self.young
            .retain(|_, since| since.elapsed() < EARLY_SNAPSHOTS);
        let young: Vec<u32> = self.young.keys().copied().collect();
        for pid in young {
            if self.maps.snapshot(pid) {
                if let Some(unwinder) = &mut self.unwinder {
                    let _ = unwinder.refresh(pid);
                }
            }
        }
    }
}
