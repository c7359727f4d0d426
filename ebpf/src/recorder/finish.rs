//! Ending a recording ([`Recorder::stop`], [`Recorder::finish`], [`Recorder::finish_reporting`]):
//! detaches the probes (the recording's end, its duration counted from the attach), drains and
//! symbolizes what they aggregated, terminates a launched command still running, and builds the
//! profile with its metadata and process table.

use super::{Recorder, Recording, Scope};
use crate::error::Error;
use crate::object::{add_losses, Counters};
use crate::probe::monotonic_ns;
use crate::resolve::{self, resolve};
use lockscope_probes::{host, Losses, Metadata, ProcessInfo, Profile};

/// Backend name in profiles.
const BACKEND: &str = "ebpf";

impl Recorder {
    /// The profile's metadata as the recorder knows it now: the host, the target, the probes,
    /// the counters' events and losses, and what ended the recording.
    pub(super) fn metadata(
        &self,
        counters: &Counters,
        duration_ns: u64,
        end_reason: &str,
        warnings: Vec<String>,
    ) -> Metadata {
        let uname = host::Uname::current();
        Metadata {
            lockscope_version: env!("CARGO_PKG_VERSION").to_owned(),
            backend: BACKEND.to_owned(),
            os: "linux".to_owned(),
            kernel_release: uname.release,
            hostname: uname.nodename,
            cpu_count: host::online_cpus(),
            libc: host::glibc_version(),
            target: self.target.clone(),
            start_unix_ns: self.start_unix_ns,
            duration_ns,
            probes: self.probes.clone(),
            events: counters.events,
            // Children that could not be followed (`targets` full): their events are missing.
            losses: add_losses(
                counters.losses,
                Losses {
                    dropped: self.shared.targets_full(),
                    ..Losses::default()
                },
            ),
            end_reason: end_reason.to_owned(),
            warnings,
        }
    }

    /// Stops recording and builds the complete profile: drains the aggregated waits, symbolizes
    /// their stacks, releases every BPF program, link and map, then terminates a launched command
    /// that is still running.
    pub fn finish(self, end_reason: &str) -> Result<Profile, Error> {
        self.finish_reporting(end_reason)
            .map(|finished| finished.profile)
    }

    /// Ends the recording's time now, the probes still attached: the profile's duration, from
    /// the attach, which [`Recorder::stop`] then keeps. A caller can so say the end when it comes,
    /// before the detach, which waits for RCU grace periods (half a second for `tp_btf` links on
    /// a loaded machine) and is no recording. Calling it again returns the same duration.
    pub fn end(&mut self) -> std::time::Duration {
        if let Some(recorded) = self.stopped {
            return recorded;
        }
        let recorded = self.started.elapsed();
        self.stopped = Some(recorded);
        recorded
    }

    /// Ends the recording ([`Recorder::end`], when not yet ended) and detaches every probe, so
    /// that nothing after this is recorded; returns the profile's duration. What remains to do
    /// (draining, symbolizing: [`Recorder::finish_reporting`]) can then take its time without
    /// counting as recording. Calling it again returns the same duration.
    pub fn stop(&mut self) -> std::time::Duration {
        let recorded = self.end();
        if !self.detached {
            self.probe_set.detach();
            self.shared.detach();
            self.detached = true;
        }
        recorded
    }

    /// [`Recorder::finish`], with what became of the traced processes' files: the unwinder's
    /// statistics (files without a table among them) and the files whose symbols could not be
    /// read, for the recording's summary.
    pub fn finish_reporting(mut self, end_reason: &str) -> Result<Recording, Error> {
        // First: the per-thread times end here, not after the symbolization below.
        let duration_ns = self.stop().as_nanos() as u64;
        self.apply_process_events();
        self.snapshot_maps(true);
        let counters = self.probe_set.counters()?;
        let running = self.running_targets();
        let mut drained = self.probe_set.drain(&running)?;
        if let Some(bottleneck) = self.bottleneck.take() {
            drained.bottleneck = Some(bottleneck.finish(monotonic_ns())?);
        }
        let probe_warnings = std::mem::take(&mut drained.warnings);
        // The unwinder's tables (mapped BPF arrays: 20 MB for MariaDB) and its parsed files are
        // of no use to the symbolization, which is the recording's peak of memory: freed first.
        let unwind = self.unwind_stats()?;
        self.unwinder = None;
        let resolve::Resolved {
            mut waits,
            threads,
            stacks,
            thread_times,
            wakeups,
            bottleneck,
            symbol_failures,
        } = resolve(drained, &self.shared, &self.maps)?;
        if let Some(child) = &mut self.child {
            child.terminate();
        }
        sort_waits(&mut waits);
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.extend(probe_warnings);
        let lost = self.shared.process_events_lost();
        if lost > 0 {
            warnings.push(format!(
                "{lost} process events (forks, execs, exits) were lost: the process table may \
                 miss processes, their parents or their exit times"
            ));
        }
        let processes = self.process_table(&threads);
        let metadata = self.metadata(&counters, duration_ns, end_reason, warnings);
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
        // A futex sleep is `mutex`, `condvar`... whichever probe saw it.
        lockscope_probes::overlap::classify_offcpu_sleeps(&mut profile);
        Ok(Recording {
            profile,
            unwind,
            symbol_failures,
        })
    }

    /// The process table of the profile: every process of the target set, and any other that
    /// has records (a process the table missed: its events lost), named by its threads.
    fn process_table(&mut self, threads: &[lockscope_probes::ThreadInfo]) -> Vec<ProcessInfo> {
        if matches!(self.scope, Scope::Command) {
            self.processes
                .set_command_if_unknown(self.target.pid, &self.target.command);
        }
        for thread in threads {
            if !self.processes.contains(thread.pid) && !self.processes.observe(thread.pid) {
                let name = process_name(threads, thread);
                self.processes.insert(ProcessInfo {
                    pid: thread.pid,
                    name,
                    ..ProcessInfo::default()
                });
            }
        }
        std::mem::take(&mut self.processes).into_processes()
    }
}

/// A profile's waits, heaviest first (ties by thread and object), at the end and in a snapshot.
pub(super) fn sort_waits(waits: &mut [lockscope_probes::WaitRecord]) {
    waits.sort_by(|a, b| {
        b.stats
            .total_ns
            .cmp(&a.stats.total_ns)
            .then((a.pid, a.tid, a.object).cmp(&(b.pid, b.tid, b.object)))
    });
}

/// The name of `thread`'s process for one the process table lacks: its main thread's, else
/// `thread`'s own.
pub(super) fn process_name(
    threads: &[lockscope_probes::ThreadInfo],
    thread: &lockscope_probes::ThreadInfo,
) -> String {
    threads
        .iter()
        .find(|t| t.pid == thread.pid && t.tid == thread.pid)
        .map_or_else(|| thread.name.clone(), |t| t.name.clone())
}
