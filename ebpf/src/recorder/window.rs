//! A recording looked at while it goes on, the probes still attached: the profile of everything
//! recorded from the attach to now ([`Recorder::snapshot`]), and a live view's interval
//! ([`Recorder::live_snapshot`]), from which `lockscope top` takes a sliding window.
//!
//! The probes aggregate in BPF maps that only grow while attached, so a snapshot reads them as
//! the end's drain does ([`Recorder::finish_reporting`]), without detaching, ending the per-thread
//! times now, or terminating a launched command. What the snapshots resolved is kept from one to
//! the next (`resolve::ResolveCache`): each stack is read from the maps and symbolized once, and
//! keeps its id, so that a live snapshot carries only the stacks first seen since the previous
//! one. The bottleneck engine's blame grows with the recording: a live snapshot carries only what
//! the intervals analysed since the previous one added (those within the engine's lag come in
//! the next), which a window sums.

use super::finish::{process_name, sort_waits};
use super::{Recorder, Scope};
use crate::error::Error;
use crate::probe::monotonic_ns;
use crate::resolve::{self, resolve_cached, ResolveCache};
use lockscope_probes::bottleneck::BottleneckAnalysis;
use lockscope_probes::{ProcessInfo, Profile, Stack};

/// The end reason a snapshot's profile gives: the recording has not ended.
const SNAPSHOT_REASON: &str = "snapshot of a recording in progress";

/// One interval of a live view ([`Recorder::live_snapshot`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct LiveSnapshot {
    /// Everything recorded from the attach to now, as [`Recorder::snapshot`] gives it, but for
    /// its stacks (none: see `new_stacks`), its bottleneck analysis (none: see `bottleneck`) and
    /// its wakeups (none: a window has none). Its
    /// `offcpu` futex sleeps are not yet classified by the `futex` probe's records
    /// (`overlap::classify_offcpu_sleeps` reads the stacks).
    pub profile: Profile,
    /// The stacks first seen since the previous live snapshot, whose ids run from
    /// `first_new_stack` on: appended to those of every earlier live snapshot of the recording,
    /// they are every stack the profile's records name.
    pub new_stacks: Vec<Stack>,
    /// The id of `new_stacks`' first.
    pub first_new_stack: usize,
    /// The bottleneck analysis (with the `waitfor` probe) of the intervals analysed since the
    /// previous live snapshot (the first: since the attach): the blame and samples they added,
    /// each record with what they added to it; its counts are the totals so far.
    pub bottleneck: Option<BottleneckAnalysis>,
}

impl Recorder {
    /// The profile of what was recorded from the attach to now, every probe still attached: its
    /// duration is the time since the attach, its waits every wait that ended by now (a wait
    /// in progress is in a later snapshot, once it ends). Costs a drain and a copy of the whole
    /// bottleneck analysis: a live view takes [`Recorder::live_snapshot`] every interval, this
    /// when asked to write what it saw.
    pub fn snapshot(&mut self) -> Result<Profile, Error> {
        let mut profile = self.snapshot_profile(true)?;
        profile.stacks = self
            .snapshot_cache
            .as_ref()
            .map_or_else(Vec::new, ResolveCache::stacks);
        // As the end's profile: a futex sleep is `mutex`, `condvar`... whichever probe saw it.
        lockscope_probes::overlap::classify_offcpu_sleeps(&mut profile);
        Ok(profile)
    }

    /// One interval of a live view: what [`Recorder::snapshot`] gives, less what the previous
    /// live snapshot already gave of the stacks and of the bottleneck analysis. Costs a drain,
    /// the symbolization of the new stacks and the blame of the interval: call it at a person's
    /// pace (once a second).
    pub fn live_snapshot(&mut self) -> Result<LiveSnapshot, Error> {
        let mut profile = self.snapshot_profile(false)?;
        let (first_new_stack, new_stacks) = self
            .snapshot_cache
            .as_mut()
            .map_or((0, Vec::new()), ResolveCache::new_stacks);
        let bottleneck = profile.bottleneck.take();
        Ok(LiveSnapshot {
            profile,
            new_stacks,
            first_new_stack,
            bottleneck,
        })
    }

    /// The profile so far without its stacks (in the snapshots' cache), with the whole bottleneck
    /// analysis so far (`whole`) or what it added since the last live snapshot.
    fn snapshot_profile(&mut self, whole: bool) -> Result<Profile, Error> {
        let duration_ns = self.started.elapsed().as_nanos() as u64;
        self.apply_process_events();
        let counters = self.probe_set.counters()?;
        let running = self.running_targets();
        let mut drained = self.probe_set.drain(&running)?;
        if !whole {
            // A live view's window has no wakeups (their records are per waker; `why` reads the
            // bottleneck analysis): not resolved every second for nothing.
            drained.wakeups = Vec::new();
        }
        if let Some(bottleneck) = &mut self.bottleneck {
            let now = monotonic_ns();
            drained.bottleneck = Some(if whole {
                bottleneck.so_far(now)?
            } else {
                bottleneck.changed(now)?
            });
        }
        let probe_warnings = std::mem::take(&mut drained.warnings);
        let resolve::Resolved {
            mut waits,
            threads,
            stacks: _,
            thread_times,
            wakeups,
            bottleneck,
            symbol_failures: _,
        } = resolve_cached(
            drained,
            &self.shared,
            &self.maps,
            self.snapshot_cache
                .get_or_insert_with(ResolveCache::default),
        )?;
        sort_waits(&mut waits);
        let mut warnings = self.warnings.clone();
        warnings.extend(probe_warnings);
        let metadata = self.metadata(&counters, duration_ns, SNAPSHOT_REASON, warnings);
        let processes = self.processes_so_far(&threads);
        Ok(Profile {
            metadata,
            threads,
            stacks: Vec::new(),
            waits,
            thread_times,
            wakeups,
            bottleneck,
            processes,
        })
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
