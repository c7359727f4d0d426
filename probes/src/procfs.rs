//! What both backends read of a Linux machine's processes in `/proc` (the eBPF recorder's
//! target set, and the DTrace recorder's on Linux, which watches the processes it traces): a
//! process's `stat` line, every process, and the descendants of some. Linux only.

use std::collections::{BTreeSet, HashMap};

/// What `/proc/PID/stat` says of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// Its name (`comm`).
    pub name: String,
    /// Its state (`R`, `S`, `Z`...).
    pub state: char,
    /// Its parent's pid (0 for the kernel's first processes).
    pub parent: u32,
    /// A kernel thread (PF_KTHREAD in its flags).
    pub kernel_thread: bool,
    /// When it started, in clock ticks since boot.
    pub start_ticks: u64,
}

impl ProcStat {
    /// True while it runs (not a zombie).
    pub fn alive(&self) -> bool {
        self.state != 'Z' && self.state != 'X'
    }
}

/// PF_KTHREAD of `/proc/PID/stat`'s flags.
const PF_KTHREAD: u64 = 0x0020_0000;

/// Parses a `/proc/PID/stat` line (`proc_pid_stat(5)`).
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    // The name may itself contain ") ": it ends at the last one.
    let close = text.rfind(") ")?;
    let name = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 2..)?.split_whitespace().collect();
    Some(ProcStat {
        name,
        state: fields.first()?.chars().next()?,
        parent: fields.get(1)?.parse().ok()?,
        kernel_thread: fields.get(6)?.parse::<u64>().ok()? & PF_KTHREAD != 0,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// `/proc/PID/stat` of `pid`, `None` when it is gone.
pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process of `/proc` now, sorted.
pub fn all_processes() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids
}

/// The descendants `roots` have now (children, their children...), without the roots, from one
/// `/proc` scan.
pub fn descendants(roots: &BTreeSet<u32>) -> BTreeSet<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for pid in all_processes() {
        if let Some(stat) = proc_stat(pid) {
            children.entry(stat.parent).or_default().push(pid);
        }
    }
    let mut found = BTreeSet::new();
    let mut pending: Vec<u32> = roots.iter().copied().collect();
    while let Some(pid) = pending.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if !roots.contains(&child) && found.insert(child) {
                pending.push(child);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stat line with a name holding `) (` and spaces parses to its fields.
    #[test]
    fn parses_stat() {
        let line = "1234 (a) (b c) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 3 0 \
                    98765 1000 200 18446744073709551615";
        let stat = parse_stat(line).expect("parses");
        assert_eq!(stat.name, "a) (b c");
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.parent, 1);
        assert!(!stat.kernel_thread && stat.alive());
        assert_eq!(stat.start_ticks, 98765);
        let kthread = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0";
        assert!(parse_stat(kthread).expect("kthreadd").kernel_thread);
        assert_eq!(parse_stat("garbage"), None);
    }

    /// This process is among all, and a child it starts is its descendant.
    #[test]
    fn finds_descendants() {
        let me = std::process::id();
        assert!(all_processes().contains(&me));
        assert!(proc_stat(me).is_some_and(|s| s.alive()));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawn sleep");
        let found = descendants(&BTreeSet::from([me]));
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&child.id()), "{found:?}");
    }
}
