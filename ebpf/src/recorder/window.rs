//! A recording looked at while it goes on ([`Recorder::snapshot`]): the profile of everything
//! recorded from the attach to now, the probes still attached, for a live view (`lockscope top`)
//! that shows a sliding window as the difference of two snapshots.
//!
//! The probes aggregate in BPF maps that only grow while attached, so a snapshot reads them as
//! the end's drain does ([`Recorder::finish_reporting`]), without detaching, ending the per-thread
//! times now, or terminating a launched command; the bottleneck stream's engine gives what it has
//! analysed so far (the intervals within its lag come in the next snapshot). One symbolizer is
//! kept from snapshot to snapshot: a new one would read every file's symbols (and the kernel's)
//! again each time.

use super::finish::{process_name, sort_waits};
use super::{Recorder, Scope};
use crate::error::Error;
use crate::probe::monotonic_ns;
use crate::resolve::{self, resolve_with};
use crate::symbolize::StackSymbolizer;
use lockscope_probes::{ProcessInfo, Profile};

/// The end reason a snapshot's profile gives: the recording has not ended.
const SNAPSHOT_REASON: &str = "snapshot of a recording in progress";

impl Recorder {
    /// The profile of what was recorded from the attach to now, every probe still attached: its
    /// duration is the time since the attach, its waits every wait that ended by now (a wait
    /// in progress is in a later snapshot, once it ends). Costs a drain and a symbolization of
    /// every stack seen, about what the end's does: call it at a person's pace (once a second).
    pub fn snapshot(&mut self) -> Result<Profile, Error> {
        let duration_ns = self.started.elapsed().as_nanos() as u64;
        self.apply_process_events();
        let counters = self.probe_set.counters()?;
        let running = self.running_targets();
        let mut drained = self.probe_set.drain(&running)?;
        if let Some(bottleneck) = &mut self.bottleneck {
            drained.bottleneck = Some(bottleneck.so_far(monotonic_ns())?);
        }
        let probe_warnings = std::mem::take(&mut drained.warnings);
        let resolve::Resolved {
            mut waits,
            threads,
            stacks,
            thread_times,
            wakeups,
            bottleneck,
            symbol_failures: _,
        } = resolve_with(
            drained,
            &self.shared,
            &self.maps,
            self.snapshot_symbolizer
                .get_or_insert_with(StackSymbolizer::new),
        )?;
        sort_waits(&mut waits);
        let mut warnings = self.warnings.clone();
        warnings.extend(probe_warnings);
        let metadata = self.metadata(&counters, duration_ns, SNAPSHOT_REASON, warnings);
        let processes = self.processes_so_far(&threads);
        let mut profile = Profile {
            metadata,
            threads,
            stacks,
            waits,
            thread_times,
            wakeups,
            bottleneck,
            processes,
        };
        // As the end's profile: a futex sleep is `mutex`, `condvar`... whichever probe saw it.
        lockscope_probes::overlap::classify_offcpu_sleeps(&mut profile);
        Ok(profile)
    }

    /// The process table as the end's profile would give it now, the recorder's table kept: the
    /// target set's processes, and any other with records, named by its threads.
    fn processes_so_far(&self, threads: &[lockscope_probes::ThreadInfo]) -> Vec<ProcessInfo> {
        let mut processes = self.processes.to_processes();
        if matches!(self.scope, Scope::Command) {
            if let Some(p) = processes.iter_mut().find(|p| p.pid == self.target.pid) {
                if p.command.is_empty() {
                    p.command = self.target.command.clone();
                }
            }
        }
        for thread in threads {
            if processes.iter().all(|p| p.pid != thread.pid) {
                let name = process_name(threads, thread);
                processes.push(ProcessInfo {
                    pid: thread.pid,
                    name,
                    ..ProcessInfo::default()
                });
            }
        }
        processes.sort_by_key(|p| p.pid);
        processes
    }
}
