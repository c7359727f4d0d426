//! [`Why::build`]: the analysed threads' wait-for records grouped into causes (by kind, root
//! stack, call and sleeping kernel lock), ranked by their time, with idle apart and the
//! analysis' coverage.

use super::cause::{cause, record_lock, Sampled};
use super::classify::{classify, waited_on_sleeps};
use super::model::{
    Analysed, Cause, CauseKey, CauseKind, Coverage, Header, Unexplained, Why, WorkingWaited,
};
use super::select::{Selection, ThreadNames};
use super::spin::{spin_causes, spin_ns_by_thread};
use super::stacks::{place_names, stack_names};
use super::{WhyError, WhyOptions, WHY_JSON_VERSION};
use crate::render::frames;
use lockscope_probes::bottleneck::{Blame, RootKind};
use lockscope_probes::{sleep_site_roles, Profile};
use std::collections::BTreeMap;

impl Why {
    /// Explains `profile` as `options` ask.
    pub fn build(profile: &Profile, options: &WhyOptions) -> Result<Why, WhyError> {
        let bottleneck = profile.bottleneck.as_ref().ok_or_else(|| {
            if profile.metadata.backend == "dtrace" {
                WhyError::NoBottleneckDtrace(profile.metadata.os.clone())
            } else {
                WhyError::NoBottleneck
            }
        })?;
        let names = ThreadNames::of(profile, bottleneck);
        let waited_on = waited_on_sleeps(bottleneck);
        let roles = sleep_site_roles(profile);
        let kinds: Vec<CauseKind> = bottleneck
            .blame
            .iter()
            .map(|b| classify(profile, b, &waited_on, &roles))
            .collect();
        let spin_ns = spin_ns_by_thread(profile);
        let selection = Selection::choose(profile, bottleneck, &kinds, &names, &spin_ns, options)?;
        let sampled = Sampled::of(profile, bottleneck);
        let mut causes: BTreeMap<CauseKey, Vec<&Blame>> = BTreeMap::new();
        let mut unexplained = Unexplained::default();
        for (b, &kind) in bottleneck.blame.iter().zip(&kinds) {
            if !selection.threads.contains(&b.thread) {
                continue;
            }
            if let Some(site) = &options.site {
                if !stack_names(profile, b.user_stack)
                    .iter()
                    .any(|f| f.contains(site.as_str()))
                {
                    continue;
                }
            }
            if matches!(kind, CauseKind::Unknown | CauseKind::DepthLimit) {
                unexplained.add(b, kind);
            }
            let key = cause_key(profile, &sampled, b, kind);
            causes.entry(key).or_default().push(b);
        }
        let wall_ns = selection.wall_ns;
        let mut all: Vec<Cause> = causes
            .into_iter()
            .map(|(key, records)| cause(profile, &names, &sampled, key, &records, wall_ns))
            .collect();
        // Spinning for a lock is waiting on its holder, on a CPU: the selection counted it out
        // of their time on a CPU.
        all.extend(
            spin_causes(profile, &names, &selection.threads, wall_ns)
                .into_iter()
                .filter(|c| {
                    options
                        .site
                        .as_ref()
                        .is_none_or(|site| c.stack.iter().any(|f| f.contains(site.as_str())))
                }),
        );
        all.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.key.cmp(&b.key)));
        let waits_ns: u64 = all.iter().map(|c| c.total_ns).sum();
        let unexplained_ns = all
            .iter()
            .filter(|c| matches!(c.kind, CauseKind::Unknown | CauseKind::DepthLimit))
            .map(|c| c.total_ns)
            .sum();
        let (causes, causes_total, idle) = ranked(all, options.top);
        let md = &profile.metadata;
        Ok(Why {
            schema: "lockscope-why",
            version: WHY_JSON_VERSION,
            header: Header {
                command: md.target.command.clone(),
                pid: md.target.pid,
                duration_ns: md.duration_ns,
                cpu_count: md.cpu_count,
                kernel_release: md.kernel_release.clone(),
                threads_recorded: profile.thread_times.len(),
            },
            coverage: Coverage {
                intervals: bottleneck.intervals,
                lost_intervals: bottleneck.lost_intervals,
                spurious_wakeups: bottleneck.spurious_wakeups,
                stackless_ns: bottleneck.stackless_ns,
                unexplained_ns,
                unexplained,
                unfinished_ns: wall_ns
                    .saturating_sub(selection.on_cpu_ns)
                    .saturating_sub(waits_ns),
                max_depth: bottleneck.max_depth,
                history_ns: bottleneck.history_ns,
            },
            analysed: Analysed {
                selection: selection.how,
                working: selection
                    .working
                    .map(|(groups, share, cpu_share)| WorkingWaited {
                        groups,
                        waited_share: share,
                        cpu_waited_share: cpu_share,
                    }),
                pattern: options.threads.clone(),
                site: options.site.clone(),
                groups: selection.groups,
                threads: selection.threads.len(),
                wall_ns,
                on_cpu_ns: selection.on_cpu_ns,
                waits_ns,
                left_out: selection.left_out,
            },
            causes,
            causes_total,
            idle,
        })
    }
}

/// The cause a record of `kind` belongs to.
fn cause_key(profile: &Profile, sampled: &Sampled, b: &Blame, kind: CauseKind) -> CauseKey {
    // Where a thread ran, slept or did I/O is the cause; waiting for a CPU, in a cycle
    // or where the analysis stopped is one cause each, wherever the threads were.
    let by_stack = matches!(
        kind,
        CauseKind::Cpu | CauseKind::Sleep | CauseKind::Io | CauseKind::Idle
    );
    // Running is known by what it ran where the cpu probe sampled it, else by where it
    // ended (where the root woke the next thread of the chain, or blocked).
    let stack = match kind {
        // One place, one cause: samples that end in different leaves under the same
        // caller (`clock_gettime <- compute` and `compute`) are the caller's work, from
        // its telling frame up (docs/FRAMES.md).
        CauseKind::Cpu => {
            let stack = sampled
                .dominant(b.root.thread, b.root.user_stack)
                .unwrap_or_else(|| place_names(profile, b.root.user_stack));
            let from = frames::site_name_index(&stack).unwrap_or(0);
            stack[from..].to_vec()
        }
        _ if by_stack => place_names(profile, b.root.user_stack),
        _ => Vec::new(),
    };
    CauseKey {
        kind: Some(kind),
        stack,
        call: b.root.call.clone().filter(|_| by_stack),
        kernel_lock: record_lock(profile, b),
    }
}

/// The causes and idle apart, each ranked from 1 and cut to `top` (0: all), and how many causes
/// there were before the cut.
fn ranked(all: Vec<Cause>, top: usize) -> (Vec<Cause>, usize, Vec<Cause>) {
    let (mut idle, mut causes): (Vec<Cause>, Vec<Cause>) =
        all.into_iter().partition(|c| c.kind == CauseKind::Idle);
    let causes_total = causes.len();
    if top > 0 {
        causes.truncate(top);
    }
    for (i, c) in causes.iter_mut().enumerate() {
        c.rank = i + 1;
    }
    for (i, c) in idle.iter_mut().enumerate() {
        c.rank = i + 1;
    }
    if top > 0 {
        idle.truncate(top);
    }
    (causes, causes_total, idle)
}

impl Unexplained {
    /// Adds `b`'s time, an `unknown` or `depth-limit` record's, under its reason.
    fn add(&mut self, b: &Blame, kind: CauseKind) {
        let root = &b.root;
        let part = if kind == CauseKind::DepthLimit {
            &mut self.depth_limit_ns
        } else if root.kind == RootKind::Unknown {
            &mut self.no_timeline_ns
        } else if root.call.is_none() && root.user_stack.is_none() && root.kernel_stack.is_none() {
            // The engine keeps only a root's kind and thread past its limit of records.
            &mut self.past_record_limit_ns
        } else {
            &mut self.no_wakeup_seen_ns
        };
        *part = part.saturating_add(b.total_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockscope_probes::{AddressSpace, Frame, Stack};

    /// A thread that lived 1 µs, as `thread_times` has it.
    fn lived(thread: lockscope_probes::bottleneck::ThreadRef) -> lockscope_probes::ThreadTime {
        lockscope_probes::ThreadTime {
            pid: thread.pid,
            tid: thread.tid,
            wall_ns: 1_000,
            ..lockscope_probes::ThreadTime::default()
        }
    }

    /// A user stack of `functions`, leaf first, each a named frame.
    fn named_stack(functions: &[&str]) -> Stack {
        Stack {
            space: AddressSpace::User,
            frames: functions
                .iter()
                .map(|f| Frame {
                    function: Some((*f).into()),
                    ..Frame::unsymbolized(0x1000)
                })
                .collect(),
            truncated: false,
        }
    }

    /// Time on a CPU that ended in different leaves under one caller (`clock_gettime <-
    /// compute_ns` and `compute_ns`) is one cause, at the caller, shown with its heaviest leaf.
    #[test]
    fn one_place_one_cause() {
        use lockscope_probes::bottleneck::{
            BottleneckAnalysis, Root, RootKind, ThreadRef, WaitPart, WokenBy,
        };
        let (consumer, supplier) = (ThreadRef { pid: 1, tid: 2 }, ThreadRef { pid: 1, tid: 3 });
        let blame = |root_stack: u32, total_ns: u64| Blame {
            thread: consumer,
            part: WaitPart::Asleep,
            call: Some("futex".into()),
            object: 0,
            user_stack: Some(2),
            kernel_stack: None,
            woken_by: Some(WokenBy::Program),
            waker: Some(supplier),
            root: Root {
                kind: RootKind::Cpu,
                thread: supplier,
                call: None,
                user_stack: Some(root_stack),
                kernel_stack: None,
                woken_by: None,
                waker_name: None,
                holder: None,
                holder_name: None,
            },
            depth: 1,
            chain: Vec::new(),
            waits: 1,
            total_ns,
        };
        let profile = Profile {
            stacks: vec![
                named_stack(&["compute_ns", "supply", "start_thread"]),
                named_stack(&["clock_gettime", "compute_ns", "supply", "start_thread"]),
                named_stack(&["___pthread_cond_wait", "consume", "start_thread"]),
            ],
            thread_times: vec![lived(consumer), lived(supplier)],
            bottleneck: Some(BottleneckAnalysis {
                blame: vec![blame(0, 300), blame(1, 500)],
                ..BottleneckAnalysis::default()
            }),
            ..Profile::default()
        };
        let why = Why::build(&profile, &WhyOptions::default()).expect("why");
        assert_eq!(why.causes.len(), 1, "{:#?}", why.causes);
        assert_eq!(why.causes[0].total_ns, 800);
        assert_eq!(why.causes[0].stack[..2], ["clock_gettime", "compute_ns"]);
    }

    /// A thread's wait for a CPU right after it slept on a kernel lock (the runnable part, with
    /// the sleep's kernel stack) is a cause apart from its other waits for a CPU, named by the
    /// lock the waits slept on, as its sleep's own time is.
    #[test]
    fn waiting_for_a_cpu_after_a_kernel_lock_is_the_locks() {
        use lockscope_probes::bottleneck::{BottleneckAnalysis, Root, ThreadRef, WaitPart};
        let (faulter, mapper) = (ThreadRef { pid: 1, tid: 2 }, ThreadRef { pid: 1, tid: 3 });
        let mut fault = named_stack(&[
            "__schedule",
            "schedule",
            "rwsem_down_read_slowpath",
            "down_read_killable",
            "lock_mm_and_find_vma",
            "do_user_addr_fault",
            "exc_page_fault",
        ]);
        fault.space = AddressSpace::Kernel;
        let record = |part: WaitPart, kernel_stack: Option<u32>, root: Root, total_ns: u64| Blame {
            thread: faulter,
            part,
            call: None,
            object: 0,
            user_stack: Some(0),
            kernel_stack,
            woken_by: None,
            waker: None,
            root,
            depth: 0,
            chain: Vec::new(),
            waits: 1,
            total_ns,
        };
        let root = |kind: RootKind, thread: ThreadRef, holder: Option<ThreadRef>| Root {
            kind,
            thread,
            call: None,
            user_stack: Some(if kind == RootKind::Cpu { 1 } else { 0 }),
            kernel_stack: None,
            woken_by: None,
            waker_name: None,
            holder,
            holder_name: None,
        };
        let idle = Some(ThreadRef { pid: 0, tid: 0 });
        let latency = root(RootKind::CpuSaturation, faulter, idle);
        let profile = Profile {
            stacks: vec![
                named_stack(&["fault_pages", "faulter", "start_thread"]),
                named_stack(&["__GI_mprotect", "mapper", "start_thread"]),
                fault,
            ],
            thread_times: vec![lived(faulter), lived(mapper)],
            bottleneck: Some(BottleneckAnalysis {
                blame: vec![
                    record(
                        WaitPart::Asleep,
                        Some(2),
                        root(RootKind::Cpu, mapper, None),
                        300,
                    ),
                    record(WaitPart::Runnable, Some(2), latency.clone(), 100),
                    record(WaitPart::Runnable, None, latency, 50),
                ],
                ..BottleneckAnalysis::default()
            }),
            ..Profile::default()
        };
        let options = WhyOptions {
            threads: Some("2".into()),
            top: 0,
            ..WhyOptions::default()
        };
        let why = Why::build(&profile, &options).expect("why");
        let latency: Vec<(u64, Option<&str>, Option<&str>)> = why
            .causes
            .iter()
            .filter(|c| c.kind == CauseKind::WakeupLatency)
            .map(|c| {
                let lock = c.kernel_lock.as_ref();
                (
                    c.total_ns,
                    lock.map(|l| l.lock),
                    lock.and_then(|l| l.callers().first().map(String::as_str)),
                )
            })
            .collect();
        assert_eq!(
            latency,
            vec![
                (100, Some("rwsem"), Some("lock_mm_and_find_vma")),
                (50, None, None)
            ],
            "{:#?}",
            why.causes
        );
        let held = &why.causes[0];
        assert_eq!(
            (
                held.kind,
                held.total_ns,
                held.kernel_lock.as_ref().map(|l| l.slept)
            ),
            (CauseKind::Cpu, 300, Some("waits"))
        );
    }

    /// A thread's `cpu` samples in `pthread_spin_lock` are a `spin` cause (a wait, out of its
    /// time on a CPU), with the holder said to be unrecorded; a chain ending in a sleep kept
    /// without call, stacks or waker is unknown past the record limit, one with its call but no
    /// wakeup seen unknown for that reason, and a device wait without a wakeup seen is `io`.
    #[test]
    fn spin_and_unknown_by_reason() {
        use lockscope_probes::bottleneck::{BottleneckAnalysis, Root, ThreadRef, WaitPart};
        use lockscope_probes::{ThreadTime, WaitKind, WaitRecord};
        let (spinner, waiter, sleeper) = (
            ThreadRef { pid: 1, tid: 2 },
            ThreadRef { pid: 1, tid: 3 },
            ThreadRef { pid: 1, tid: 4 },
        );
        let blame = |call: Option<&str>, kernel_stack: Option<u32>, total_ns: u64| Blame {
            thread: waiter,
            part: WaitPart::Asleep,
            call: Some("futex".into()),
            object: 0,
            user_stack: None,
            kernel_stack: None,
            woken_by: None,
            waker: Some(sleeper),
            root: Root {
                kind: RootKind::Blocked,
                thread: sleeper,
                call: call.map(str::to_owned),
                user_stack: None,
                kernel_stack,
                woken_by: None,
                waker_name: None,
                holder: None,
                holder_name: None,
            },
            depth: 1,
            chain: Vec::new(),
            waits: 1,
            total_ns,
        };
        let lived = |thread: ThreadRef, on_cpu: u64| {
            let mut time = ThreadTime {
                pid: thread.pid,
                tid: thread.tid,
                wall_ns: 1_000,
                ..ThreadTime::default()
            };
            time.time_ns
                .insert(lockscope_probes::TimeClass::OnCpu, on_cpu);
            time
        };
        let mut stacks = vec![named_stack(&["__pthread_spin_lock", "take_spin", "run"])];
        let mut io = named_stack(&["io_schedule"]);
        io.space = AddressSpace::Kernel;
        stacks.push(io);
        let profile = Profile {
            stacks,
            thread_times: vec![lived(spinner, 600), lived(waiter, 0), lived(sleeper, 0)],
            waits: vec![WaitRecord {
                probe: "cpu".into(),
                kind: WaitKind::OnCpu,
                pid: 1,
                tid: 2,
                object: 0,
                operation: "sample".into(),
                user_stack: Some(0),
                kernel_stack: None,
                woken_by: None,
                stats: lockscope_probes::WaitStats {
                    count: 5,
                    total_ns: 500,
                    max_ns: 100,
                    ..Default::default()
                },
            }],
            bottleneck: Some(BottleneckAnalysis {
                blame: vec![
                    blame(None, None, 300),
                    blame(Some("nanosleep"), None, 100),
                    blame(Some("fdatasync"), Some(1), 50),
                ],
                ..BottleneckAnalysis::default()
            }),
            ..Profile::default()
        };
        let options = WhyOptions {
            threads: Some("2,3".into()),
            ..WhyOptions::default()
        };
        let why = Why::build(&profile, &options).expect("why");
        let spin = why
            .causes
            .iter()
            .find(|c| c.kind == CauseKind::Spin)
            .unwrap_or_else(|| panic!("no spin cause: {:#?}", why.causes));
        assert_eq!((spin.total_ns, spin.waits), (500, 5));
        assert_eq!(spin.call.as_deref(), Some("pthread_spin_lock"));
        assert_eq!(why.analysed.on_cpu_ns, 100, "the spin is still on a CPU");
        assert!(why.to_text().contains("the lock's holder: not recorded"));
        let u = &why.coverage.unexplained;
        assert_eq!((u.past_record_limit_ns, u.no_wakeup_seen_ns), (300, 100));
        assert_eq!(why.coverage.unexplained_ns, 400);
        assert!(why
            .causes
            .iter()
            .any(|c| c.kind == CauseKind::Io && c.total_ns == 50));
    }

    /// A profile without the bottleneck analysis says which probes to record.
    #[test]
    fn no_bottleneck() {
        let err = Why::build(&Profile::default(), &WhyOptions::default()).expect_err("no data");
        assert!(err.to_string().contains("--probes bottleneck"), "{err}");
    }

    /// A DTrace profile without it says what to record, and on macOS what the OS lacks.
    #[test]
    fn no_bottleneck_from_dtrace() {
        let mut profile = Profile::default();
        profile.metadata.backend = "dtrace".into();
        profile.metadata.os = "linux".into();
        let err = Why::build(&profile, &WhyOptions::default()).expect_err("no data");
        let text = err.to_string();
        assert!(
            text.contains("record it with `--probes bottleneck`"),
            "{text}"
        );
        profile.metadata.os = "macos".into();
        let text = Why::build(&profile, &WhyOptions::default())
            .expect_err("no data")
            .to_string();
        assert!(
            text.contains("does not record one on macOS")
                && text.contains("sched:::wakeup passes the waker's process"),
            "{text}"
        );
    }
}
