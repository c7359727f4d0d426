//! A profile's processes grouped by command, so that recordings of many processes compare by
//! what runs, not by pid: the same server recorded twice has other pids, and its workers share
//! one command line (`lockscope diff`, the sweep's levels).
//!
//! - a process's command is its command line from the profile's process table; a kernel thread's
//!   (or a process without a command line) is its name with every run of digits merged
//!   (`[kworker/u*:*]`, as [`thread_group`] merges thread names), in brackets for a kernel
//!   thread; a profile without a table (recorded before it existed) groups by the name of each
//!   process's main thread;
//! - each group counts its processes and their threads with records, their waits (the records
//!   every total counts, [`Profile::counted_waits`], but not the `cpu` probe's samples and not
//!   the intervals of threads waiting for a CPU) and the `cpu` probe's CPU time.

use crate::analysis::canonical::thread_group;
use lockscope_probes::catalog::offcpu_operation;
use lockscope_probes::{Profile, WaitKind, WaitStats};
use std::collections::{BTreeMap, BTreeSet};

/// The processes of one command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandGroup {
    /// The command (`/usr/sbin/apache2 -DFOREGROUND`, `[kworker/u*:*]`).
    pub command: String,
    /// Processes of the table with this command (with records or not).
    pub processes: usize,
    /// Their threads with records.
    pub threads: usize,
    /// Their waits.
    pub waits: WaitStats,
    /// Their CPU time sampled by the `cpu` probe, nanoseconds.
    pub cpu_ns: u64,
}

/// The command of process `pid` in `profile` (see the module docs).
pub fn command_of(profile: &Profile, pid: u32) -> String {
    match profile.processes.iter().find(|p| p.pid == pid) {
        Some(p) if !p.command.is_empty() => p.command.join(" "),
        Some(p) if p.kernel_thread => format!("[{}]", thread_group(&p.name)),
        Some(p) if !p.name.is_empty() => thread_group(&p.name),
        _ => profile
            .thread_name(pid, pid)
            .map_or_else(|| "[unknown process]".to_string(), thread_group),
    }
}

/// Every command of `profile` with its processes, sorted by command.
pub fn command_groups(profile: &Profile) -> Vec<CommandGroup> {
    let mut groups: BTreeMap<String, CommandGroup> = BTreeMap::new();
    let mut pids: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut threads: BTreeMap<String, BTreeSet<(u32, u32)>> = BTreeMap::new();
    let mut commands: BTreeMap<u32, String> = BTreeMap::new();
    let mut command = |pid: u32| {
        commands
            .entry(pid)
            .or_insert_with(|| command_of(profile, pid))
            .clone()
    };
    for p in &profile.processes {
        pids.entry(command(p.pid)).or_default().insert(p.pid);
    }
    for w in &profile.waits {
        let name = command(w.pid);
        pids.entry(name.clone()).or_default().insert(w.pid);
        threads
            .entry(name.clone())
            .or_default()
            .insert((w.pid, w.tid));
        let group = groups.entry(name).or_default();
        if w.kind == WaitKind::OnCpu {
            group.cpu_ns = group.cpu_ns.saturating_add(w.stats.total_ns);
        }
    }
    for w in profile.counted_waits() {
        if !w.kind.is_sampled() && !offcpu_operation::is_cpu_wait(&w.operation) {
            let group = groups.entry(command(w.pid)).or_default();
            group.waits.merge(&w.stats);
        }
    }
    for (name, pids) in pids {
        let group = groups.entry(name.clone()).or_default();
        group.command = name.clone();
        group.processes = pids.len();
        group.threads = threads.get(&name).map_or(0, BTreeSet::len);
    }
    groups.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockscope_probes::{Log2Histogram, ProcessInfo, WaitRecord};

    fn wait(pid: u32, tid: u32, kind: WaitKind, operation: &str, ns: u64) -> WaitRecord {
        WaitRecord {
            probe: "futex".to_string(),
            kind,
            pid,
            tid,
            object: 0,
            operation: operation.to_string(),
            user_stack: None,
            kernel_stack: None,
            woken_by: None,
            stats: WaitStats {
                count: 1,
                total_ns: ns,
                max_ns: ns,
                histogram: Log2Histogram::new(),
            },
        }
    }

    /// Two workers of one command group together whatever their pids; a kernel thread groups by
    /// its merged name; CPU samples and CPU waits are not waits.
    #[test]
    fn groups_by_command() {
        let worker = |pid| ProcessInfo {
            pid,
            parent: Some(10),
            name: "httpd".to_string(),
            command: vec!["/usr/sbin/httpd".to_string(), "-X".to_string()],
            ..ProcessInfo::default()
        };
        let profile = Profile {
            processes: vec![
                worker(11),
                worker(12),
                worker(13),
                ProcessInfo {
                    pid: 50,
                    name: "kworker/u4:2".to_string(),
                    kernel_thread: true,
                    ..ProcessInfo::default()
                },
            ],
            waits: vec![
                wait(11, 11, WaitKind::Mutex, "FUTEX_WAIT", 100),
                wait(12, 14, WaitKind::Condvar, "FUTEX_WAIT", 50),
                wait(12, 14, WaitKind::OffCpu, "run-queue", 1_000),
                wait(50, 50, WaitKind::OnCpu, "", 7),
            ],
            ..Profile::default()
        };
        let groups = command_groups(&profile);
        assert_eq!(groups.len(), 2, "{groups:#?}");
        let httpd = &groups[0];
        assert_eq!(httpd.command, "/usr/sbin/httpd -X");
        assert_eq!((httpd.processes, httpd.threads), (3, 2));
        assert_eq!((httpd.waits.count, httpd.waits.total_ns), (2, 150));
        let kworker = &groups[1];
        assert_eq!(kworker.command, "[kworker/u*:*]");
        assert_eq!((kworker.processes, kworker.cpu_ns), (1, 7));
        assert_eq!(kworker.waits.count, 0);
    }
}
