//! The target set: the processes a recording's [`Target`] stands for, and the table of the
//! processes it recorded.
//!
//! The target set is the shared `targets` map (`bpf/common.bpf.h`), or every process
//! (`targets_config`). The `shared` object follows its processes in the kernel: a child of a
//! recorded process is recorded from its fork on, and every fork, exec and exit of a recorded
//! process is streamed to user space (`process_events`), where [`ProcessTable`] turns them into
//! the profile's process table. What the kernel cannot follow is found here:
//! - the descendants a process already has (`tree`): one `/proc` scan after the fork hook is
//!   attached, repeated until it finds nothing new, so no process forked in between is missed;
//! - the processes of a cgroup ([`Cgroup`]): its `cgroup.procs` and those of its descendant
//!   cgroups, read at the start and again at every rescan of the recording (250 ms): a process
//!   forked inside is followed by the fork hook at once, one moved in from outside is found by
//!   the next rescan, and one moved out is no longer recorded. A rescan works alike on every
//!   kernel from 5.10 on and on both cgroup layouts (pure v2, and the hybrid one with the v2
//!   hierarchy at `/sys/fs/cgroup/unified`). The kernel's alternatives do not: the
//!   `cgroup_attach_task` tracepoint gives the destination cgroup, whose ancestry changed layout
//!   in 6.2 (`ancestor_ids[]` became `ancestors[]`) and which fires for every v1 hierarchy too,
//!   and `bpf_current_task_under_cgroup` tests only the current task, while the scheduler probes
//!   test the task they switch to or wake.

use crate::error::Error;
use lockscope_probes::{ProcessInfo, Target};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `statfs` magic of a cgroup v2 file system.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
/// `statfs` magic of a cgroup v1 hierarchy.
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
/// Deepest directory a cgroup is searched for by name.
const MAX_CGROUP_DEPTH: usize = 16;

/// A mounted cgroup v2 hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cgroup2Mount {
    /// Where it is mounted (`/sys/fs/cgroup`, `/sys/fs/cgroup/unified`).
    mount_point: PathBuf,
    /// The hierarchy's directory mounted there (`/` unless a sub-tree is bind-mounted).
    root: String,
}

/// The cgroup v2 hierarchies of `/proc/self/mountinfo` (`proc_pid_mountinfo(5)`).
fn cgroup2_mounts() -> Vec<Cgroup2Mount> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    parse_cgroup2_mounts(&text)
}

/// The cgroup2 lines of a mountinfo text: `ID PARENT MAJ:MIN ROOT MOUNT_POINT ... - TYPE ...`.
fn parse_cgroup2_mounts(text: &str) -> Vec<Cgroup2Mount> {
    text.lines()
        .filter_map(|line| {
            let (fields, rest) = line.split_once(" - ")?;
            if rest.split_whitespace().next()? != "cgroup2" {
                return None;
            }
            let fields: Vec<&str> = fields.split_whitespace().collect();
            Some(Cgroup2Mount {
                root: unescape_mountinfo(fields.get(3)?),
                mount_point: PathBuf::from(unescape_mountinfo(fields.get(4)?)),
            })
        })
        .collect()
}

/// mountinfo's octal escapes (`\040` for a space) decoded.
fn unescape_mountinfo(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let digits: String = chars.clone().take(3).collect();
            if digits.len() == 3 {
                if let Ok(byte) = u8::from_str_radix(&digits, 8) {
                    out.push(byte as char);
                    for _ in 0..3 {
                        chars.next();
                    }
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

/// The `statfs` magic of the file system holding `path`.
fn fs_magic(path: &Path) -> Option<i64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statfs is a valid value of this plain C struct.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `stat` a valid out pointer.
    if unsafe { libc::statfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    Some(stat.f_type as i64)
}

/// A cgroup of the v2 hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cgroup {
    /// Its directory in the mounted hierarchy.
    pub dir: PathBuf,
    /// Its path from the hierarchy's root (`/system.slice/apache2.service`).
    pub path: String,
}

impl Cgroup {
    /// The cgroup `given` names (see [`Target::Cgroup`]).
    pub fn resolve(given: &Path) -> Result<Cgroup, Error> {
        let mounts = cgroup2_mounts();
        let invalid = |reason: String| Error::Cgroup {
            cgroup: given.display().to_string(),
            reason,
        };
        let Some(mount) = mounts.first() else {
            return Err(invalid(
                "this host has no cgroup v2 hierarchy mounted (no cgroup2 in \
                 /proc/self/mountinfo)"
                    .into(),
            ));
        };
        // A directory of the mounted hierarchy.
        if given.is_absolute() {
            if let Some((mount, rel)) = mounts
                .iter()
                .find_map(|m| Some((m, given.strip_prefix(&m.mount_point).ok()?)))
            {
                return if given.is_dir() {
                    Ok(Cgroup::at(mount, rel))
                } else {
                    Err(invalid(format!(
                        "no such cgroup in the v2 hierarchy mounted at {}",
                        mount.mount_point.display()
                    )))
                };
            }
            if given.is_dir() && fs_magic(given) == Some(CGROUP_SUPER_MAGIC) {
                return Err(invalid(format!(
                    "a cgroup v1 hierarchy: give a cgroup of the v2 (unified) hierarchy, \
                     mounted at {}",
                    mount.mount_point.display()
                )));
            }
        }
        // A path from the hierarchy's root, as /proc/PID/cgroup and systemctl print it.
        let rel = given.to_string_lossy().trim_start_matches('/').to_string();
        let candidate = mount.mount_point.join(&rel);
        if !rel.is_empty()
            && candidate.is_dir()
            && fs_magic(&candidate) == Some(CGROUP2_SUPER_MAGIC)
        {
            return Ok(Cgroup::at(mount, Path::new(&rel)));
        }
        if given.as_os_str() == "/" {
            return Ok(Cgroup::at(mount, Path::new("")));
        }
        // A unit's name: the one cgroup of that name.
        if !rel.is_empty() && !rel.contains('/') {
            let mut found = Vec::new();
            find_named(&mount.mount_point, &rel, 0, &mut found);
            match found.as_slice() {
                [one] => {
                    let rel = one.strip_prefix(&mount.mount_point).unwrap_or(one);
                    return Ok(Cgroup::at(mount, rel));
                }
                [] => {}
                many => {
                    let paths: Vec<String> = many
                        .iter()
                        .map(|p| {
                            Cgroup::at(mount, p.strip_prefix(&mount.mount_point).unwrap_or(p)).path
                        })
                        .collect();
                    return Err(invalid(format!(
                        "{} cgroups have that name ({}): give its path",
                        many.len(),
                        paths.join(", ")
                    )));
                }
            }
        }
        Err(invalid(format!(
            "no such cgroup in the v2 hierarchy mounted at {}",
            mount.mount_point.display()
        )))
    }

    /// The cgroup at `rel` under `mount`.
    fn at(mount: &Cgroup2Mount, rel: &Path) -> Cgroup {
        let root = mount.root.trim_end_matches('/');
        let rel = rel.to_string_lossy();
        let rel = rel.trim_matches('/');
        Cgroup {
            dir: mount.mount_point.join(rel),
            path: if rel.is_empty() && root.is_empty() {
                "/".to_string()
            } else if rel.is_empty() {
                root.to_string()
            } else {
                format!("{root}/{rel}")
            },
        }
    }

    /// The processes of this cgroup and of its descendant cgroups, now; empty when it is gone.
    pub fn processes(&self) -> BTreeSet<u32> {
        let mut pids = BTreeSet::new();
        collect_procs(&self.dir, 0, &mut pids);
        pids
    }
}

/// Directories named `name` under `dir`, down to [`MAX_CGROUP_DEPTH`].
fn find_named(dir: &Path, name: &str, depth: usize, found: &mut Vec<PathBuf>) {
    if depth > MAX_CGROUP_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        if entry.file_name() == name {
            found.push(path.clone());
        }
        find_named(&path, name, depth + 1, found);
    }
}

/// The pids of `dir/cgroup.procs` and of every cgroup under it.
fn collect_procs(dir: &Path, depth: usize, pids: &mut BTreeSet<u32>) {
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    if depth > MAX_CGROUP_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            collect_procs(&entry.path(), depth + 1, pids);
        }
    }
}

pub(crate) use lockscope_probes::procfs::{all_processes, descendants, proc_stat};

/// The command line of a process, `argv[0]` first (empty for kernel threads or when unreadable).
pub(crate) fn process_command(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The cgroup v2 path of a process (`0::/system.slice/x.service` in `/proc/PID/cgroup`).
fn process_cgroup(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

/// The process (thread group) id of `pid`, which may be a thread id; `None` when it does not
/// exist.
pub(crate) fn process_tgid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|t| t.trim().parse().ok())
}

/// True while the process exists and is not a zombie.
pub(crate) fn process_alive(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|s| s.alive())
}

/// Conversions of the kernel's clocks to Unix time.
#[derive(Clone, Copy, Debug)]
struct Clocks {
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, nanoseconds.
    monotonic_to_unix: i128,
    /// CLOCK_REALTIME − CLOCK_BOOTTIME, nanoseconds.
    boot_to_unix: i128,
    /// Clock ticks per second of `/proc/PID/stat`.
    ticks_per_second: u64,
}

/// Nanoseconds of `clock` now.
fn clock_ns(clock: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer; the clocks used here always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

impl Clocks {
    fn now() -> Clocks {
        let realtime = clock_ns(libc::CLOCK_REALTIME);
        // SAFETY: sysconf has no memory-safety preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        Clocks {
            monotonic_to_unix: realtime - clock_ns(libc::CLOCK_MONOTONIC),
            boot_to_unix: realtime - clock_ns(libc::CLOCK_BOOTTIME),
            ticks_per_second: u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100),
        }
    }

    fn unix_of_monotonic(&self, ns: u64) -> u64 {
        u64::try_from(i128::from(ns) + self.monotonic_to_unix).unwrap_or(0)
    }

    fn unix_of_ticks(&self, ticks: u64) -> u64 {
        let boot_ns = i128::from(ticks) * 1_000_000_000 / i128::from(self.ticks_per_second);
        u64::try_from(boot_ns + self.boot_to_unix).unwrap_or(0)
    }
}

/// The processes of a recording's target set, as the profile lists them.
#[derive(Debug)]
pub(crate) struct ProcessTable {
    processes: BTreeMap<u32, ProcessInfo>,
    clocks: Clocks,
}

impl Default for ProcessTable {
    fn default() -> Self {
        ProcessTable {
            processes: BTreeMap::new(),
            clocks: Clocks::now(),
        }
    }
}

impl ProcessTable {
    /// True when `pid` is in the table.
    pub fn contains(&self, pid: u32) -> bool {
        self.processes.contains_key(&pid)
    }

    /// The entry of `pid`.
    pub fn get(&self, pid: u32) -> Option<&ProcessInfo> {
        self.processes.get(&pid)
    }

    /// Adds `pid` as `/proc` shows it now, unless it is known; fills in a command line still
    /// missing (read after an exec). False when the process is gone and unknown.
    pub fn observe(&mut self, pid: u32) -> bool {
        if let Some(known) = self.processes.get_mut(&pid) {
            if known.command.is_empty() && !known.kernel_thread && known.exit_unix_ns.is_none() {
                known.command = process_command(pid);
            }
            return true;
        }
        let Some(stat) = proc_stat(pid) else {
            return false;
        };
        let info = ProcessInfo {
            pid,
            parent: (stat.parent != 0).then_some(stat.parent),
            name: stat.name,
            command: if stat.kernel_thread {
                Vec::new()
            } else {
                process_command(pid)
            },
            cgroup: process_cgroup(pid),
            start_unix_ns: Some(self.clocks.unix_of_ticks(stat.start_ticks)),
            exit_unix_ns: None,
            kernel_thread: stat.kernel_thread,
        };
        self.processes.insert(pid, info);
        true
    }

    /// `parent` forked `pid` at `time_ns` (CLOCK_MONOTONIC): until it execs, the child runs
    /// its parent's program, in its parent's cgroup.
    pub fn fork(&mut self, pid: u32, parent: u32, time_ns: u64, name: &str, kernel_thread: bool) {
        let inherited = self.processes.get(&parent).cloned();
        let start = self.clocks.unix_of_monotonic(time_ns);
        let entry = self.processes.entry(pid).or_insert_with(|| ProcessInfo {
            pid,
            name: name.to_string(),
            command: inherited
                .as_ref()
                .map(|p| p.command.clone())
                .unwrap_or_default(),
            cgroup: inherited.as_ref().and_then(|p| p.cgroup.clone()),
            kernel_thread,
            ..ProcessInfo::default()
        });
        entry.parent = Some(parent);
        entry.start_unix_ns = Some(start);
    }

    /// `pid` executed a new program named `name`: its command line is read anew.
    pub fn exec(&mut self, pid: u32, name: &str) {
        if !self.processes.contains_key(&pid) && !self.observe(pid) {
            self.processes.insert(
                pid,
                ProcessInfo {
                    pid,
                    ..ProcessInfo::default()
                },
            );
        }
        if let Some(entry) = self.processes.get_mut(&pid) {
            entry.name = name.to_string();
            entry.kernel_thread = false;
            // Gone already: its new command line is unknown (not its old one).
            entry.command = process_command(pid);
        }
    }

    /// `pid` exited at `time_ns` (CLOCK_MONOTONIC).
    pub fn exit(&mut self, pid: u32, time_ns: u64) {
        let time = self.clocks.unix_of_monotonic(time_ns);
        if let Some(entry) = self.processes.get_mut(&pid) {
            entry.exit_unix_ns.get_or_insert(time);
        }
    }

    /// `pid` was found gone without its exit event (lost): it exited by now.
    pub fn gone(&mut self, pid: u32) {
        let now = u64::try_from(clock_ns(libc::CLOCK_REALTIME)).unwrap_or(0);
        if let Some(entry) = self.processes.get_mut(&pid) {
            entry.exit_unix_ns.get_or_insert(now);
        }
    }

    /// Processes in the table.
    pub fn len(&self) -> usize {
        self.processes.len()
    }

    /// Adds (or replaces) an entry.
    pub fn insert(&mut self, info: ProcessInfo) {
        self.processes.insert(info.pid, info);
    }

    /// The processes still running, kernel threads left out (they have no user maps).
    pub fn running_user(&self) -> Vec<u32> {
        self.processes
            .values()
            .filter(|p| p.exit_unix_ns.is_none() && !p.kernel_thread)
            .map(|p| p.pid)
            .collect()
    }

    /// The processes still running (by the table: no exit seen).
    pub fn running(&self) -> Vec<u32> {
        self.processes
            .values()
            .filter(|p| p.exit_unix_ns.is_none())
            .map(|p| p.pid)
            .collect()
    }

    /// Sets the command line of `pid` when the table has none (a launched command that exited
    /// before its command line could be read: lockscope knows it).
    pub fn set_command_if_unknown(&mut self, pid: u32, command: &[String]) {
        if let Some(entry) = self.processes.get_mut(&pid) {
            if entry.command.is_empty() {
                entry.command = command.to_vec();
            }
        }
    }

    /// The table, sorted by pid.
    pub fn into_processes(self) -> Vec<ProcessInfo> {
        self.processes.into_values().collect()
    }

    /// The table as it is now, sorted by pid (a live view's snapshot; the table stays).
    pub fn to_processes(&self) -> Vec<ProcessInfo> {
        self.processes.values().cloned().collect()
    }
}

/// The processes `target` has now: the processes given and all their descendants (what a
/// recording of the whole tree records, `tree` or not), a cgroup's processes, every process but
/// the caller; `None` for a command, or a cgroup that cannot be found. A set of pids rather than
/// a count, so that a caller can tell which of them a recording missed: a count of the processes
/// recorded can match it while the ones that existed are missing (children forked under the
/// load standing in for them).
pub fn target_processes(target: &Target) -> Option<BTreeSet<u32>> {
    match target {
        Target::Pids { pids, .. } => {
            let mut given: BTreeSet<u32> = pids.iter().filter_map(|&p| process_tgid(p)).collect();
            let descendants = descendants(&given);
            given.extend(descendants);
            Some(given)
        }
        Target::Cgroup(path) => {
            let mut pids = Cgroup::resolve(path).ok()?.processes();
            pids.remove(&std::process::id());
            Some(pids)
        }
        Target::All => {
            let mut pids: BTreeSet<u32> = all_processes().into_iter().collect();
            pids.remove(&std::process::id());
            Some(pids)
        }
        Target::Command(_) => None,
    }
}

/// What to tell of processes `pids` whose descendants are not recorded (`-p` without `tree`):
/// one line per process that has some, empty when none has.
pub(crate) fn unrecorded_children(pids: &BTreeSet<u32>) -> Vec<String> {
    let mut lines = Vec::new();
    for &pid in pids {
        let missing: Vec<u32> = descendants(&BTreeSet::from([pid]))
            .into_iter()
            .filter(|p| !pids.contains(p))
            .collect();
        if missing.is_empty() {
            continue;
        }
        let name = proc_stat(pid).map(|s| s.name).unwrap_or_default();
        let listed: Vec<String> = missing
            .iter()
            .take(5)
            .map(|p| match proc_stat(*p) {
                Some(stat) => format!("{p} {}", stat.name),
                None => p.to_string(),
            })
            .collect();
        let more = missing.len().saturating_sub(listed.len());
        lines.push(format!(
            "pid {pid} ({name}) has {} descendant {} that {} not recorded ({}{}): --tree records {}",
            missing.len(),
            if missing.len() == 1 { "process" } else { "processes" },
            if missing.len() == 1 { "is" } else { "are" },
            listed.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            },
            if missing.len() == 1 { "it" } else { "them" },
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cgroup2 lines of a hybrid host's mountinfo, and a pure v2 host's.
    #[test]
    fn finds_cgroup2_mounts() {
        let hybrid = "30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n\
                      31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n\
                      32 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        assert_eq!(
            parse_cgroup2_mounts(hybrid),
            [Cgroup2Mount {
                mount_point: "/sys/fs/cgroup/unified".into(),
                root: "/".into()
            }]
        );
        let pure = "35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n";
        assert_eq!(
            parse_cgroup2_mounts(pure)[0].mount_point,
            PathBuf::from("/sys/fs/cgroup")
        );
        let spaced = "35 24 0:30 /a\\040b /mnt/c\\040g rw - cgroup2 cgroup2 rw\n";
        let mount = &parse_cgroup2_mounts(spaced)[0];
        assert_eq!(mount.root, "/a b");
        assert_eq!(mount.mount_point, PathBuf::from("/mnt/c g"));
    }

    /// A cgroup's path from the root: under a whole hierarchy, and under a bind-mounted part.
    #[test]
    fn cgroup_paths() {
        let whole = Cgroup2Mount {
            mount_point: "/sys/fs/cgroup".into(),
            root: "/".into(),
        };
        let unit = Cgroup::at(&whole, Path::new("system.slice/x.service"));
        assert_eq!(unit.path, "/system.slice/x.service");
        assert_eq!(
            unit.dir,
            PathBuf::from("/sys/fs/cgroup/system.slice/x.service")
        );
        assert_eq!(Cgroup::at(&whole, Path::new("")).path, "/");
        let part = Cgroup2Mount {
            mount_point: "/mnt/cg".into(),
            root: "/machine.slice".into(),
        };
        assert_eq!(Cgroup::at(&part, Path::new("c1")).path, "/machine.slice/c1");
    }

    /// This test's own process is in the table as /proc shows it, and a fork and exit of a
    /// child are recorded with its parent, inherited command and times.
    #[test]
    fn table_follows_events() {
        let me = std::process::id();
        let mut table = ProcessTable::default();
        assert!(table.observe(me));
        let own = table.get(me).expect("own entry").clone();
        assert!(!own.command.is_empty());
        assert!(own.start_unix_ns.is_some());
        assert!(!table.observe(u32::MAX));
        table.fork(4_000_001, me, 1_000, "child", false);
        let child = table.get(4_000_001).expect("child");
        assert_eq!(child.parent, Some(me));
        assert_eq!(child.command, own.command);
        table.exit(4_000_001, 2_000);
        let child = table.get(4_000_001).expect("child");
        assert_eq!(
            child.exit_unix_ns.expect("exit") - child.start_unix_ns.expect("start"),
            1_000
        );
        assert_eq!(table.running(), vec![me]);
    }

    /// A process without children has nothing to warn of; a thread id stands for its process.
    #[test]
    fn process_queries() {
        let me = std::process::id();
        assert!(process_alive(me));
        assert_eq!(process_tgid(me), Some(me));
        assert_eq!(process_tgid(u32::MAX), None);
        assert!(all_processes().contains(&me));
        let child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawn sleep");
        let mut child = scopeguard(child);
        let found = descendants(&BTreeSet::from([me]));
        assert!(found.contains(&child.0.id()), "{found:?}");
        let lines = unrecorded_children(&BTreeSet::from([me]));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains(&format!("{} sleep", child.0.id())),
            "{lines:?}"
        );
        let _ = child.0.kill();
    }

    /// Kills the child when dropped.
    struct Guard(std::process::Child);
    impl Drop for Guard {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    fn scopeguard(child: std::process::Child) -> Guard {
        Guard(child)
    }
}
