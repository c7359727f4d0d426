//! Which threads `why` analyses, and their names: by default the groups of threads that did the
//! work, or where they barely waited the groups that waited most ([`default_threads`]), or those
//! `--threads` names ([`ThreadPattern`]).

use super::model::GroupRow;
use super::{WhyError, WhyOptions, WORKING_SHARE};
use crate::analysis::canonical::thread_group;
use lockscope_probes::bottleneck::CauseKind;
use lockscope_probes::bottleneck::{is_idle_cpu, BottleneckAnalysis, ThreadRef};
use lockscope_probes::{Profile, TimeClass};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Thread names by thread, from the profile's threads and the recording's outside names.
pub(super) struct ThreadNames {
    names: HashMap<u32, String>,
}

impl ThreadNames {
    pub(super) fn of(profile: &Profile, bottleneck: &BottleneckAnalysis) -> Self {
        let mut names: HashMap<u32, String> = profile
            .threads
            .iter()
            .map(|t| (t.tid, t.name.clone()))
            .collect();
        // Holders outside the program are known only by the name the probe read.
        for b in &bottleneck.blame {
            if let (Some(holder), Some(name)) = (b.root.holder, &b.root.holder_name) {
                names.entry(holder.tid).or_insert_with(|| name.clone());
            }
        }
        ThreadNames { names }
    }

    pub(super) fn name(&self, thread: ThreadRef) -> String {
        if is_idle_cpu(thread) {
            return "[idle CPU]".to_owned();
        }
        self.names
            .get(&thread.tid)
            .cloned()
            .unwrap_or_else(|| format!("tid {}", thread.tid))
    }

    pub(super) fn group(&self, thread: ThreadRef) -> String {
        thread_group(&self.name(thread))
    }
}

/// The analysed threads.
pub(super) struct Selection {
    pub(super) threads: BTreeSet<ThreadRef>,
    /// How they were chosen: `asked`, `working` or `waiting` ([`default_threads`]).
    pub(super) how: &'static str,
    /// With `waiting`: the groups that did the work, the share of their time they waited on the
    /// program's threads, and the share they waited for CPUs other processes held.
    pub(super) working: Option<(Vec<String>, f64, f64)>,
    pub(super) wall_ns: u64,
    pub(super) on_cpu_ns: u64,
    pub(super) groups: Vec<GroupRow>,
    pub(super) left_out: Vec<GroupRow>,
}

impl Selection {
    /// The threads `options` ask about, else [`default_threads`]; `kinds` are the cause kinds
    /// of `bottleneck.blame`, record by record.
    pub(super) fn choose(
        profile: &Profile,
        bottleneck: &BottleneckAnalysis,
        kinds: &[CauseKind],
        names: &ThreadNames,
        spin_ns: &BTreeMap<ThreadRef, u64>,
        options: &WhyOptions,
    ) -> Result<Selection, WhyError> {
        // Every thread of the program: those with times, and any the analysis names.
        let mut times: BTreeMap<ThreadRef, (u64, u64)> = profile
            .thread_times
            .iter()
            .map(|t| {
                (
                    ThreadRef {
                        pid: t.pid,
                        tid: t.tid,
                    },
                    (t.wall_ns, t.ns(TimeClass::OnCpu)),
                )
            })
            .collect();
        // Spinning for a lock is waiting, not work: out of the threads' time on a CPU.
        for (t, spun) in spin_ns {
            if let Some((_, cpu)) = times.get_mut(t) {
                *cpu = cpu.saturating_sub(*spun);
            }
        }
        for b in &bottleneck.blame {
            times.entry(b.thread).or_insert((0, 0));
        }
        let (chosen, how, working) = match &options.threads {
            Some(pattern) => {
                let matcher = ThreadPattern::parse(pattern)?;
                let chosen: BTreeSet<ThreadRef> = times
                    .keys()
                    .copied()
                    .filter(|&t| matcher.matches(t.tid, &names.name(t)))
                    .collect();
                if chosen.is_empty() {
                    let mut all: Vec<String> = times.keys().map(|&t| names.group(t)).collect();
                    all.sort();
                    all.dedup();
                    return Err(WhyError::NoThreads(pattern.clone(), all.join(", ")));
                }
                (chosen, "asked", None)
            }
            None => default_threads(bottleneck, kinds, &times, spin_ns, names),
        };
        let mut groups: BTreeMap<String, (usize, u64)> = BTreeMap::new();
        let mut left_out: BTreeMap<String, (usize, u64)> = BTreeMap::new();
        let (mut wall_ns, mut on_cpu_ns) = (0u64, 0u64);
        for (&t, &(wall, cpu)) in &times {
            let row = if chosen.contains(&t) {
                wall_ns += wall;
                on_cpu_ns += cpu;
                groups.entry(names.group(t)).or_default()
            } else {
                left_out.entry(names.group(t)).or_default()
            };
            row.0 += 1;
            row.1 += cpu;
        }
        Ok(Selection {
            threads: chosen,
            how,
            working,
            wall_ns,
            on_cpu_ns,
            groups: group_rows(groups),
            left_out: group_rows(left_out),
        })
    }
}

/// Rows of thread groups, the busiest on a CPU first.
fn group_rows(map: BTreeMap<String, (usize, u64)>) -> Vec<GroupRow> {
    let mut rows: Vec<GroupRow> = map
        .into_iter()
        .map(|(group, (threads, on_cpu_ns))| GroupRow {
            group,
            threads,
            on_cpu_ns,
        })
        .collect();
    rows.sort_by(|a, b| b.on_cpu_ns.cmp(&a.on_cpu_ns).then(a.group.cmp(&b.group)));
    rows
}

/// A thread waits on another when at least this share of its wall time ended in that thread's
/// wakeups (a join at the end of a run does not tie a thread to a group).
const LINK_SHARE: f64 = 0.01;

/// Threads that wait on each other (one's sleeps ended by the other's wakeups, [`LINK_SHARE`]),
/// whatever their own CPU time: idle consumers of a busy supplier belong with it.
fn thread_groups(
    bottleneck: &BottleneckAnalysis,
    times: &BTreeMap<ThreadRef, (u64, u64)>,
) -> Vec<Vec<ThreadRef>> {
    let threads: Vec<ThreadRef> = times.keys().copied().collect();
    let index: HashMap<ThreadRef, usize> =
        threads.iter().enumerate().map(|(i, &t)| (t, i)).collect();
    let mut waited: HashMap<(usize, usize), u64> = HashMap::new();
    for b in &bottleneck.blame {
        let (Some(&a), Some(&w)) = (index.get(&b.thread), b.waker.and_then(|w| index.get(&w)))
        else {
            continue;
        };
        *waited.entry((a, w)).or_default() += b.total_ns;
    }
    // Union-find over the threads.
    let mut parent: Vec<usize> = (0..threads.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for ((a, w), ns) in waited {
        let wall = times[&threads[a]].0;
        if wall > 0 && ns as f64 >= LINK_SHARE * wall as f64 {
            let (ra, rw) = (root(&mut parent, a), root(&mut parent, w));
            parent[ra] = rw;
        }
    }
    let mut groups: BTreeMap<usize, Vec<ThreadRef>> = BTreeMap::new();
    for (i, &t) in threads.iter().enumerate() {
        groups.entry(root(&mut parent, i)).or_default().push(t);
    }
    groups.into_values().collect()
}

/// The threads [`default_threads`] chose, how (`working`, `waiting`), and with `waiting` the
/// groups that did the work with the share of their time they waited.
type DefaultChoice = (
    BTreeSet<ThreadRef>,
    &'static str,
    Option<(Vec<String>, f64, f64)>,
);

/// The default selection: the question a user asks of a recording, which threads were held
/// back by waiting.
///
/// 1. **working**: the groups of threads that did the work ([`thread_groups`] whose threads
///    together ran at least [`WORKING_SHARE`] of the busiest group's CPU time), when they waited
///    at least [`WORKING_SHARE`] of their time on the program (not counting idle waits, nor
///    waits for CPUs that other processes or nobody held: those say the machine was loaded, so
///    that the answer does not change with the load of a shared machine): throughput is the
///    work they do, and a group that barely ran (a dozen background threads parked on their own
///    lock) holds none of it back, however long it waited;
/// 2. **waiting**: else the program held the working groups back by nothing, and the question
///    is where the program's threads waited: the groups whose waiting (measured so) is at least
///    [`WORKING_SHARE`] of the group that waited most (on the demo, the mutex and condvar waiters
///    with the main thread they waited on, rather than two threads that only computed); the
///    answer says how long the working groups waited for CPUs others held.
///
/// CPU time spinning for a lock ([`super::spin`]) is waiting, not work, in both.
fn default_threads(
    bottleneck: &BottleneckAnalysis,
    kinds: &[CauseKind],
    times: &BTreeMap<ThreadRef, (u64, u64)>,
    spin_ns: &BTreeMap<ThreadRef, u64>,
    names: &ThreadNames,
) -> DefaultChoice {
    let groups = thread_groups(bottleneck, times);
    let program: BTreeSet<u32> = times.keys().map(|t| t.pid).collect();
    // Waits on the program's threads, and waits for CPUs only other processes (or nobody:
    // wakeup latency) held, which say the machine was loaded, not what the program did.
    let mut waited: HashMap<ThreadRef, u64> = HashMap::new();
    let mut loaded: HashMap<ThreadRef, u64> = HashMap::new();
    for (b, &kind) in bottleneck.blame.iter().zip(kinds) {
        let outside_cpu = matches!(kind, CauseKind::CpuSaturation | CauseKind::WakeupLatency)
            && b.root.holder.is_none_or(|h| !program.contains(&h.pid));
        match kind {
            CauseKind::Idle => {}
            _ if outside_cpu => *loaded.entry(b.thread).or_default() += b.total_ns,
            _ => *waited.entry(b.thread).or_default() += b.total_ns,
        }
    }
    // Spinning for a lock another thread held is a wait on it.
    for (&t, &ns) in spin_ns {
        *waited.entry(t).or_default() += ns;
    }
    // (cpu, wall, waited, loaded) per group.
    let sums: Vec<(u64, u64, u64, u64)> = groups
        .iter()
        .map(|g| {
            g.iter().fold((0, 0, 0, 0), |(cpu, wall, w, l), t| {
                let (t_wall, t_cpu) = times[t];
                (
                    cpu + t_cpu,
                    wall + t_wall,
                    w + waited.get(t).copied().unwrap_or(0),
                    l + loaded.get(t).copied().unwrap_or(0),
                )
            })
        })
        .collect();
    let busiest = sums.iter().map(|s| s.0).max().unwrap_or(0);
    let floor = ((busiest as f64 * WORKING_SHARE) as u64).max(1);
    let working: Vec<usize> = (0..groups.len())
        .filter(|&i| busiest == 0 || sums[i].0 >= floor)
        .collect();
    let (working_wall, working_waited, working_loaded) =
        working.iter().fold((0u64, 0u64, 0u64), |(wall, w, l), &i| {
            (wall + sums[i].1, w + sums[i].2, l + sums[i].3)
        });
    let most_waited = sums.iter().map(|s| s.2).max().unwrap_or(0);
    let held_back = working_wall == 0
        || working_waited as f64 >= WORKING_SHARE * working_wall as f64
        || most_waited == 0;
    let collect = |chosen: &[usize]| -> BTreeSet<ThreadRef> {
        chosen
            .iter()
            .flat_map(|&i| groups[i].iter().copied())
            .collect()
    };
    if held_back {
        return (collect(&working), "working", None);
    }
    let waiting: Vec<usize> = (0..groups.len())
        .filter(|&i| sums[i].2 as f64 >= WORKING_SHARE * most_waited as f64)
        .collect();
    let mut working_names: Vec<String> = working
        .iter()
        .flat_map(|&i| groups[i].iter().map(|&t| names.group(t)))
        .collect();
    working_names.sort();
    working_names.dedup();
    let share = |ns: u64| ns as f64 / working_wall as f64;
    (
        collect(&waiting),
        "waiting",
        Some((working_names, share(working_waited), share(working_loaded))),
    )
}

/// `--threads`: comma-separated name globs or thread ids.
struct ThreadPattern {
    names: Vec<regex::Regex>,
    tids: Vec<u32>,
}

impl ThreadPattern {
    fn parse(pattern: &str) -> Result<ThreadPattern, WhyError> {
        let mut names = Vec::new();
        let mut tids = Vec::new();
        for part in pattern.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if let Ok(tid) = part.parse::<u32>() {
                tids.push(tid);
                continue;
            }
            let mut re = String::from("^");
            for c in part.chars() {
                match c {
                    '*' => re.push_str(".*"),
                    '?' => re.push('.'),
                    c => re.push_str(&regex::escape(&c.to_string())),
                }
            }
            re.push('$');
            names.push(
                regex::Regex::new(&re)
                    .map_err(|e| WhyError::BadPattern(pattern.to_owned(), e.to_string()))?,
            );
        }
        if names.is_empty() && tids.is_empty() {
            return Err(WhyError::BadPattern(
                pattern.to_owned(),
                "give thread names (globs with * and ?) or thread ids, comma-separated".into(),
            ));
        }
        Ok(ThreadPattern { names, tids })
    }

    fn matches(&self, tid: u32, name: &str) -> bool {
        self.tids.contains(&tid) || self.names.iter().any(|re| re.is_match(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--threads` takes name globs and thread ids, comma-separated; an empty one is refused.
    #[test]
    fn thread_patterns() {
        let p = ThreadPattern::parse("worker-*, 17 ,io?").expect("pattern");
        assert!(p.matches(1, "worker-12"));
        assert!(p.matches(17, "main"));
        assert!(p.matches(2, "io1"));
        assert!(!p.matches(2, "io12"));
        assert!(!p.matches(2, "aworker-1"));
        assert!(ThreadPattern::parse(" , ").is_err());
    }
}
