//! Starting a recording ([`Recorder::start`]): checks the probe names and privileges, loads
//! the shared maps and the probes, sets up the target set (launching a command once the probes
//! are attached), and fails when not one probe attached.

use super::initial_set::InitialSet;
use super::{Child, RecordOptions, Recorder, Scope};
use crate::bottleneck::BottleneckStream;
use crate::environment::check_privileges;
use crate::error::Error;
use crate::launch::PendingChild;
use crate::priority::RaisedPriority;
use crate::probe::monotonic_ns;
use crate::probe_set::{probe_names, ProbeSet};
use crate::procmaps::MapsCache;
use crate::shared::SharedMaps;
use crate::target_set::ProcessTable;
use crate::unwind::{StackMaps, Unwinder};
use lockscope_probes::catalog::UnknownProbe;
use lockscope_probes::{catalog, AttachStatus, ProbeAttachment, RecordedTarget, Target};
use std::collections::HashMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// What became of each requested probe.
fn attachments(names: &[String], probe_set: &ProbeSet) -> Vec<ProbeAttachment> {
    names
        .iter()
        .map(|name| {
            probe_set.status(name).unwrap_or_else(|| ProbeAttachment {
                probe: name.clone(),
                hook: String::new(),
                status: AttachStatus::Failed {
                    reason: "not implemented by the eBPF backend".into(),
                },
            })
        })
        .collect()
}

/// An error when not one of `probes` attached: a recording of nothing is no recording.
fn nothing_attached(probes: &[ProbeAttachment]) -> Result<(), Error> {
    if probes
        .iter()
        .any(|p| !matches!(p.status, AttachStatus::Failed { .. }))
    {
        return Ok(());
    }
    Err(Error::NothingAttached {
        reasons: probes
            .iter()
            .map(|p| match &p.status {
                AttachStatus::Failed { reason } => format!("{}: {reason}", p.probe),
                _ => p.probe.clone(),
            })
            .collect::<Vec<_>>()
            .join("; "),
    })
}

impl Recorder {
    /// Checks privileges and BTF, loads and attaches, and (for [`Target::Command`]) launches
    /// the command only after the probes are attached.
    pub fn start(options: RecordOptions) -> Result<Recorder, Error> {
        check_probe_names(&options.probes)?;
        // The processes given are checked for access (their files are read for symbols); a
        // cgroup's or the machine's are found later, and what cannot be read is said then.
        let mut warnings = check_privileges(&options.probes, options.target.given_pids())?;
        if options.probes.iter().any(|p| p == catalog::SYSCALL.name) {
            crate::probe::syscall_numbers(&options.probe_settings.syscalls)?;
        }
        // Loading is CPU work on this thread (the verifier): on a loaded server it must not wait
        // behind the server's threads. Dropped before a command is forked (it would inherit it).
        let raised = RaisedPriority::raise();
        // The shared maps first: every probe object reuses them (with the bottleneck stream's ring
        // sized when it is asked for).
        let stream = options.probes.iter().any(|p| p == catalog::WAITFOR.name);
        let mut shared = SharedMaps::load(stream.then_some(crate::bottleneck::EVENTS_BYTES))?;
        let bottleneck = stream
            .then(|| BottleneckStream::open(&shared, monotonic_ns()))
            .transpose()?;
        // A probe that fails to load is reported as failed; the others still record.
        let mut probe_set = ProbeSet::load(&options.probes, &shared, &options.probe_settings);

        // Every probe's stacks unwind with the same tables, in the shared maps.
        let mut unwinder = StackMaps::from_shared(&shared)
            .map(|maps| Unwinder::new(maps, &options.unwind))
            .transpose()?;

        let own = std::process::id();
        let mut processes = ProcessTable::default();
        let mut child = None;
        let (target, scope, attach_pid) = match &options.target {
            Target::Pids { pids, tree } => InitialSet::new(
                &mut shared,
                &mut unwinder,
                &mut processes,
            )
            .pids(pids, *tree, &mut warnings)?,
            Target::Cgroup(path) => InitialSet::new(&mut shared, &mut unwinder, &mut processes)
                .cgroup(path, own, &mut warnings)?,
            Target::All => InitialSet::new(&mut shared, &mut unwinder, &mut processes).all(own)?,
            Target::Command(argv) => {
                // Tables of the program and its libraries before it runs: its first waits
                // unwind (through the file fallback) before its process table exists.
                if let (Some(unwinder), Some(program)) = (&mut unwinder, argv.first()) {
                    unwinder.preload_command(program);
                }
                drop(raised);
                // Dropping `pending` on any error below makes the child exit unexecuted.
                let pending = PendingChild::fork(argv)?;
                let pid = pending.pid();
                shared.add_target(pid)?;
                shared.follow_forks()?;
                probe_set.attach(Some(pid));
                // Returning here drops `pending`: the command never runs.
                nothing_attached(&attachments(&options.probes, &probe_set))?;
                pending.release()?;
                let command: Vec<String> = argv
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                // Named as the program until its exec event names it as the kernel does.
                let name = argv
                    .first()
                    .and_then(|p| std::path::Path::new(p).file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                processes.exec(pid, &name);
                child = Some(Child {
                    pid: pid as libc::pid_t,
                    status: None,
                });
                let target = RecordedTarget {
                    pid,
                    command,
                    launched: true,
                    ..RecordedTarget::default()
                };
                (target, Scope::Command, Some(pid))
            }
        };
        if !matches!(scope, Scope::Command) {
            probe_set.attach(attach_pid);
            nothing_attached(&attachments(&options.probes, &probe_set))?;
        }

        let probes = attachments(&options.probes, &probe_set);

        Ok(Recorder {
            probe_set,
            shared,
            unwinder,
            unwind_misses: 0,
            probes,
            target,
            scope,
            processes,
            leaving: Vec::new(),
            young: HashMap::new(),
            maps_seen: HashMap::new(),
            // Until the first poll says otherwise: its early polls then go on.
            tables_pending: true,
            warnings,
            process_events_lost: 0,
            child,
            maps: MapsCache::new(),
            // The first poll snapshots the maps: `start` returns as soon as the probes are
            // attached, so that the recording's start is said when it is.
            last_snapshot: None,
            last_rescan: Instant::now(),
            started: Instant::now(),
            stopped: None,
            detached: false,
            start_unix_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            target_exited: false,
            bottleneck,
            snapshot_cache: None,
        })
    }
}

/// Checks the requested probe names.
fn check_probe_names(names: &[String]) -> Result<(), Error> {
    let known = probe_names();
    match names.iter().find(|name| !known.contains(&name.as_str())) {
        Some(name) => Err(Error::UnknownProbe(UnknownProbe { name: name.clone() })),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default options name the catalog's default probes; every probe of the catalog is
    /// known, and an unknown name is refused with the catalog's message.
    #[test]
    fn probe_names() {
        let options = RecordOptions::new(Target::pid(1));
        let defaults: Vec<&str> = catalog::defaults().map(|p| p.name).collect();
        assert_eq!(options.probes, defaults);
        check_probe_names(&options.probes).expect("defaults known");
        for probe in catalog::CATALOG {
            check_probe_names(&[probe.name.to_owned()]).expect(probe.name);
        }
        let err = check_probe_names(&["nosuch".to_owned()]).expect_err("unknown");
        let unknown = UnknownProbe {
            name: "nosuch".into(),
        };
        assert_eq!(err.to_string(), unknown.to_string());
    }
}
