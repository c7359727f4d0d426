//! Folded stacks in Brendan Gregg's format, the input of flamegraph tools.
//!
//! One line per distinct stack, root first, then a space and the weight:
//!
//! ```text
//! worker-1;clone3;start_thread;worker_main;take_order_lock;pthread_mutex_lock;__lll_lock_wait 401000000
//! ```
//!
//! - the first frame is the thread name (`comm`), so threads of the same name merge; a record
//!   with neither pid nor tid (an imported capture keyed by stack alone) has no thread frame;
//!   with [`FoldOptions::process`], a frame naming the process comes before it
//!   (`apache2-1234`: the process's name and pid, as `stackcollapse-perf.pl --pid` writes
//!   them), so the processes of a recording of many are told apart;
//! - then the user frames, outermost to leaf, with inlined functions expanded into frames of their
//!   own ([`Frame::names_outermost_first`]); a record without a user stack gets its kernel stack
//!   instead (unsuffixed: it stands alone), or one [`NO_USER_STACK`] frame when it has neither;
//! - with [`FoldOptions::kernel_stacks`], the kernel frames follow the user frames (the kernel
//!   runs on top of the system call), each suffixed with [`KERNEL_SUFFIX`] as FlameGraph does;
//! - the weight is the total wait time in nanoseconds, or the number of waits ([`Weight`]);
//! - `;` in a name becomes `:` and control characters (newlines, tabs) become spaces, so a name
//!   can neither split a frame nor a line;
//! - identical stacks are merged (weights added), lines are sorted, and zero weights are dropped;
//! - a recording that has both waits and the `cpu` probe's on-CPU samples folds its waits unless
//!   `--probe cpu` selects the samples ([`selected`]): CPU time is never added to wait time, and
//!   neither are system calls or lock holds ([`MixedMeasures`]);
//! - a futex sleep that both the futex and offcpu probes recorded folds once, as the futex
//!   probe's wait ([`SeenTwice`]), and a sleep under a kernel lock that both klock and offcpu
//!   recorded as the klock probe's, unless `--probe offcpu` asks for that probe's view alone;
//! - the wall-clock view ([`FoldOptions::wall`]) folds the `cpu` probe's samples and the `offcpu`
//!   probe's intervals together, in nanoseconds, each stack topped by a frame saying what the
//!   thread was doing: `[on-cpu]`, `[run-queue]`, `[preempted]`, or `[off-cpu: ...]` with the wait
//!   kind of a futex sleep (classified from its user stack) or the system call slept in.

use super::measure::Weight;
use lockscope_probes::catalog::{self, offcpu_operation};
use lockscope_probes::ProbeDescriptor;
use lockscope_probes::{Frame, MixedMeasures, Profile, SeenTwice, Stack, WaitKind, WaitRecord};
use std::collections::BTreeMap;

/// Frame standing for a user stack that was not captured.
pub const NO_USER_STACK: &str = "[no user stack]";

/// Suffix marking kernel frames (FlameGraph's `_[k]` annotation).
pub const KERNEL_SUFFIX: &str = "_[k]";

/// Root frame of a thread the profile has no name for.
pub const UNKNOWN_THREAD: &str = "[unknown thread]";

/// Prefix of the probe names of imported perf samples (`perf:cpu-clock`).
pub const PERF_PROBE_PREFIX: &str = "perf:";

/// Module given to the frames of imported perf samples that inferno's perf collapser counts as
/// kernel frames (the ones its `--kernel` option suffixes with [`KERNEL_SUFFIX`]).
pub const KERNEL_MODULE: &str = "[kernel]";

/// How to fold a profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FoldOptions {
    /// What the values measure. Default: [`Weight::Nanoseconds`].
    pub weight: Weight,
    /// Keep only the records of this probe (`futex`). Default: `None`, every probe.
    pub probe: Option<String>,
    /// Append kernel frames (suffixed `_[k]`) above the user frames. Default: `false`.
    pub kernel_stacks: bool,
    /// The wall-clock view: the `cpu` probe's on-CPU samples and the `offcpu` probe's off-CPU
    /// intervals of the same threads, weighted by time, each leaf marked with what the thread
    /// was doing ([`wall_state`]). Default: `false`.
    pub wall: bool,
    /// Begin each stack with its process (`NAME-PID`, [`process_frame`]), above the thread.
    /// Default: `false`.
    pub process: bool,
}

/// The root frame of process `pid` with [`FoldOptions::process`]: its name (`argv[0]`'s file name
/// from the process table, else its main thread's name) and pid, `apache2-1234`.
pub fn process_frame(profile: &Profile, pid: u32) -> String {
    let name = profile
        .processes
        .iter()
        .find(|p| p.pid == pid)
        .map(|p| p.display_name())
        .or_else(|| profile.thread_name(pid, pid).map(str::to_string))
        .unwrap_or_else(|| "[unknown process]".to_string());
    format!("{}-{pid}", sanitize_frame(&name))
}

/// The leaf frame of an on-CPU sample in the wall-clock view.
pub const WALL_ON_CPU: &str = "[on-cpu]";

/// What the thread of `record` was doing, as the wall-clock view's leaf frame: `[on-cpu]` for a
/// `cpu` sample; for an `offcpu` interval `[run-queue]`, `[preempted]`, or `[off-cpu: KIND]`
/// (a futex sleep, classified from its user stack) or `[off-cpu: sleeping in CALL]`.
pub fn wall_state(profile: &Profile, record: &WaitRecord) -> String {
    if record.kind == WaitKind::OnCpu {
        return WALL_ON_CPU.to_string();
    }
    match record.operation.as_str() {
        offcpu_operation::RUN_QUEUE => "[run-queue]".to_string(),
        offcpu_operation::PREEMPTED => "[preempted]".to_string(),
        operation => {
            let names: Vec<String> = profile
                .stack(record.user_stack)
                .map(|s| s.frames.iter().map(Frame::display_name).collect())
                .unwrap_or_default();
            match WaitKind::classify_user_wait(names.iter().map(String::as_str), WaitKind::OffCpu) {
                WaitKind::OffCpu => format!("[off-cpu: {operation}]"),
                kind => format!("[off-cpu: {kind}]"),
            }
        }
    }
}

/// Why a profile cannot be folded as asked ([`check_probe`], [`check_wall`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FoldError {
    /// The wall-clock view without both of its probes' records.
    #[error(
        "the wall-clock view needs the {cpu} and {offcpu} probes' records: record with \
         --probes {cpu},{offcpu}",
        cpu = catalog::CPU.name,
        offcpu = catalog::OFFCPU.name
    )]
    WallNeedsCpuAndOffcpu,
    /// `--probe wakeup`, whose records are the offcpu probe's.
    #[error(
        "the `{wakeup}` probe's records are the `{offcpu}` probe's: use --probe {offcpu} (its \
         wakeups come with it) or --wakeups",
        wakeup = catalog::WAKEUP.name,
        offcpu = catalog::OFFCPU.name
    )]
    WakeupIsOffcpu,
    /// A probe the profile neither asked for nor has records of.
    #[error(
        "probe `{probe}` is not in this profile ({})",
        if .known.is_empty() {
            "it has no probes".to_string()
        } else {
            format!("its probes: {}", .known.join(", "))
        }
    )]
    ProbeNotInProfile {
        /// The probe asked for.
        probe: String,
        /// The probes the profile knows, sorted.
        known: Vec<String>,
    },
}

/// Checks that `profile` has what the wall-clock view needs: both probes' records.
pub fn check_wall(profile: &Profile) -> Result<(), FoldError> {
    let has = |probe: &ProbeDescriptor| profile.waits.iter().any(|w| w.is_from(probe));
    if has(&catalog::CPU) && has(&catalog::OFFCPU) {
        Ok(())
    } else {
        Err(FoldError::WallNeedsCpuAndOffcpu)
    }
}

/// Makes a function name safe inside a folded line: `;` becomes `:`, control characters become
/// spaces, and an empty name becomes `[unnamed]`.
pub fn sanitize_frame(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    // A name of spaces only is kept (stackcollapse-perf names a frame perf printed without a
    // symbol ` `); an empty one, or one of control characters, would vanish.
    if name.is_empty() || (cleaned.trim().is_empty() && name.chars().any(char::is_control)) {
        "[unnamed]".to_string()
    } else {
        cleaned
    }
}

/// True when `record` passes the probe filter of `options`.
pub fn selects(options: &FoldOptions, record: &WaitRecord) -> bool {
    options.probe.as_deref().is_none_or(|p| p == record.probe)
}

/// The records of `profile` that `options` selects: those of its probe; with no probe named,
/// each sleep once (the offcpu probe's futex sleeps that the futex probe recorded too are the
/// futex probe's waits, its sleeps under kernel locks that klock recorded the klock probe's:
/// [`SeenTwice`]) and, in a profile that mixes measures, the one [`MixedMeasures`] shows.
pub fn selected<'a>(
    profile: &'a Profile,
    options: &'a FoldOptions,
) -> impl Iterator<Item = &'a WaitRecord> + 'a {
    let mixed = if options.probe.is_none() {
        MixedMeasures::of(profile)
    } else {
        MixedMeasures::default()
    };
    let twice = if options.probe.is_none() && !options.wall {
        SeenTwice::of(profile)
    } else {
        SeenTwice::default()
    };
    profile.waits.iter().filter(move |r| {
        if options.wall {
            return (r.is_from(&catalog::CPU) && r.kind == WaitKind::OnCpu)
                || r.is_from(&catalog::OFFCPU);
        }
        selects(options, r) && !mixed.leaves_out(r) && !twice.contains(r)
    })
}

/// Checks that the probe filter names a probe the profile knows (asked for at record time, or
/// present in the records), so that a typo gives an error instead of an empty output.
pub fn check_probe(profile: &Profile, options: &FoldOptions) -> Result<(), FoldError> {
    let Some(probe) = options.probe.as_deref() else {
        return Ok(());
    };
    // The `wakeup` probe is the offcpu object taking wakers' stacks: its records are offcpu's.
    if probe == catalog::WAKEUP.name {
        return Err(FoldError::WakeupIsOffcpu);
    }
    let mut known: Vec<&str> = profile
        .metadata
        .probes
        .iter()
        .map(|p| p.probe.as_str())
        .chain(profile.recorded_probes())
        .collect();
    known.sort_unstable();
    known.dedup();
    if known.contains(&probe) {
        Ok(())
    } else {
        Err(FoldError::ProbeNotInProfile {
            probe: probe.to_string(),
            known: known.into_iter().map(str::to_string).collect(),
        })
    }
}

/// Frame names of `stack`, outermost first, inlined functions expanded, sanitized.
pub fn names_root_first(stack: &Stack) -> impl Iterator<Item = String> + '_ {
    stack
        .frames
        .iter()
        .rev()
        .flat_map(Frame::names_outermost_first)
        .map(|name| sanitize_frame(&name))
}

/// True for a record of imported perf samples (`lockscope import perf-script`): its root frame
/// is its own command name (`operation`), and its stack is perf's whole call chain, kernel
/// frames included in place (`lockscope import`).
pub fn is_perf_sample(record: &WaitRecord) -> bool {
    record.kind.is_sampled() && record.probe.starts_with(PERF_PROBE_PREFIX)
}

/// The folded stack of an imported perf sample, as inferno's perf collapser folds it: the
/// command, then the call chain root first; with [`FoldOptions::kernel_stacks`] the kernel
/// frames are suffixed `_[k]` (the collapser's `--kernel`); a sample without frames is its
/// command alone (stackcollapse-perf.pl).
fn fold_perf_sample(profile: &Profile, record: &WaitRecord, options: &FoldOptions) -> String {
    let mut frames = vec![if record.operation.is_empty() {
        profile
            .thread_name(record.pid, record.tid)
            .map_or_else(|| UNKNOWN_THREAD.to_string(), sanitize_frame)
    } else {
        sanitize_frame(&record.operation)
    }];
    if let Some(stack) = profile.stack(record.user_stack) {
        frames.extend(stack.frames.iter().rev().map(|frame| {
            let name = sanitize_frame(&frame.display_name());
            let kernel = frame.module.as_deref() == Some(KERNEL_MODULE);
            if kernel && options.kernel_stacks {
                name + KERNEL_SUFFIX
            } else {
                name
            }
        }));
    }
    frames.join(";")
}

/// The folded stack of one record, root first, without its value.
fn fold_record(profile: &Profile, record: &WaitRecord, options: &FoldOptions) -> String {
    if is_perf_sample(record) {
        return fold_perf_sample(profile, record, options);
    }
    let mut frames = Vec::new();
    if options.process && record.pid != 0 {
        frames.push(process_frame(profile, record.pid));
    }
    // A record with no process or thread at all (an imported `@[ustack()] = count()` capture
    // keys by stack alone) folds to its frames only, exactly as stackcollapse.pl folds it.
    if record.pid != 0 || record.tid != 0 {
        frames.push(
            profile
                .thread_name(record.pid, record.tid)
                .map_or_else(|| UNKNOWN_THREAD.to_string(), sanitize_frame),
        );
    }
    let kernel = profile
        .stack(record.kernel_stack)
        .filter(|stack| !stack.frames.is_empty());
    match profile.stack(record.user_stack) {
        Some(stack) if !stack.frames.is_empty() => {
            frames.extend(names_root_first(stack));
            if let Some(kernel) = kernel.filter(|_| options.kernel_stacks) {
                frames.extend(names_root_first(kernel).map(|name| name + KERNEL_SUFFIX));
            }
        }
        // With no user stack, the kernel stack is all there is to show: it stands alone, so
        // its frames need no suffix (an imported kernel-only capture folds as stackcollapse.pl
        // folds it).
        _ => match kernel {
            Some(kernel) => frames.extend(names_root_first(kernel)),
            None => frames.push(NO_USER_STACK.to_string()),
        },
    }
    if options.wall {
        frames.push(wall_state(profile, record));
    }
    frames.join(";")
}

/// Folds the waits of `profile` into sorted, merged folded-stack lines (no trailing newline).
pub fn folded_lines(profile: &Profile, options: &FoldOptions) -> Vec<String> {
    merged_lines(selected(profile, options).filter_map(|record| {
        let value = options.weight.of(record);
        (value > 0).then(|| (fold_record(profile, record, options), value))
    }))
}

/// Folded lines (`stack value`) of `stacks`: identical stacks merged (values added), sorted.
pub fn merged_lines(stacks: impl IntoIterator<Item = (String, u64)>) -> Vec<String> {
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for (stack, value) in stacks {
        let entry = merged.entry(stack).or_default();
        *entry = entry.saturating_add(value);
    }
    merged
        .into_iter()
        .map(|(stack, value)| format!("{stack} {value}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockscope_probes::{AddressSpace, Log2Histogram, ThreadInfo, WaitStats};

    fn named(function: &str) -> Frame {
        Frame {
            function: Some(function.to_string()),
            ..Frame::unsymbolized(0x1000)
        }
    }

    fn record(tid: u32, user_stack: Option<u32>, total_ns: u64, count: u64) -> WaitRecord {
        WaitRecord {
            probe: "futex".to_string(),
            kind: WaitKind::Mutex,
            pid: 1,
            tid,
            object: 0x10,
            operation: "FUTEX_WAIT_PRIVATE".to_string(),
            user_stack,
            kernel_stack: None,
            woken_by: None,
            stats: WaitStats {
                count,
                total_ns,
                max_ns: total_ns,
                histogram: Log2Histogram::new(),
            },
        }
    }

    /// Two threads with one name and one stack, seen through two objects, merge into one line;
    /// lines come out sorted and zero weights are dropped.
    #[test]
    fn identical_stacks_merge_and_sort() {
        let profile = Profile {
            threads: vec![
                ThreadInfo {
                    pid: 1,
                    tid: 2,
                    name: "worker".to_string(),
                },
                ThreadInfo {
                    pid: 1,
                    tid: 3,
                    name: "worker".to_string(),
                },
                ThreadInfo {
                    pid: 1,
                    tid: 4,
                    name: "idle".to_string(),
                },
            ],
            stacks: vec![Stack {
                space: AddressSpace::User,
                frames: vec![named("lock"), named("main")],
                truncated: false,
            }],
            waits: vec![
                record(2, Some(0), 100, 1),
                record(3, Some(0), 50, 2),
                record(3, None, 7, 1),
                record(4, Some(0), 0, 1),
                record(9, None, 5, 1),
            ],
            ..Profile::default()
        };
        let by_time = folded_lines(&profile, &FoldOptions::default());
        assert_eq!(
            by_time,
            [
                "[unknown thread];[no user stack] 5",
                "worker;[no user stack] 7",
                "worker;main;lock 150",
            ]
        );
        // With the process first: named from the process table, else by its main thread.
        let mut with_table = profile.clone();
        with_table.processes = vec![lockscope_probes::ProcessInfo {
            pid: 1,
            name: "srv".to_string(),
            command: vec!["/usr/sbin/server".to_string(), "-x".to_string()],
            ..lockscope_probes::ProcessInfo::default()
        }];
        let options = FoldOptions {
            process: true,
            ..FoldOptions::default()
        };
        assert_eq!(
            folded_lines(&with_table, &options),
            [
                "server-1;[unknown thread];[no user stack] 5",
                "server-1;worker;[no user stack] 7",
                "server-1;worker;main;lock 150",
            ]
        );
        assert_eq!(process_frame(&profile, 1), "[unknown process]-1");
        let by_count = FoldOptions {
            weight: Weight::Count,
            ..FoldOptions::default()
        };
        let lines = folded_lines(&profile, &by_count);
        assert!(
            lines.contains(&"worker;main;lock 3".to_string()),
            "{lines:?}"
        );
        assert!(lines.contains(&"idle;main;lock 1".to_string()), "{lines:?}");
    }

    /// Separators and control characters inside names cannot split frames or lines.
    #[test]
    fn names_are_sanitized() {
        assert_eq!(sanitize_frame("a;b"), "a:b");
        assert_eq!(sanitize_frame("line\nbreak\r\tx"), "line break  x");
        assert_eq!(sanitize_frame(""), "[unnamed]");
        assert_eq!(sanitize_frame("\n"), "[unnamed]");
        assert_eq!(
            sanitize_frame("std::vec::Vec<T>::push"),
            "std::vec::Vec<T>::push"
        );

        let profile = Profile {
            threads: vec![ThreadInfo {
                pid: 1,
                tid: 2,
                name: "evil;name\n".to_string(),
            }],
            stacks: vec![Stack {
                space: AddressSpace::User,
                frames: vec![named("f;g\nh")],
                truncated: false,
            }],
            waits: vec![record(2, Some(0), 10, 1)],
            ..Profile::default()
        };
        let lines = folded_lines(&profile, &FoldOptions::default());
        assert_eq!(lines, ["evil:name ;f:g h 10"]);
    }

    /// The probe filter keeps only that probe's records.
    #[test]
    fn probe_filter() {
        let mut other = record(2, None, 10, 1);
        other.probe = "sched".to_string();
        let profile = Profile {
            waits: vec![record(2, None, 5, 1), other],
            ..Profile::default()
        };
        let options = FoldOptions {
            probe: Some("sched".to_string()),
            ..FoldOptions::default()
        };
        assert_eq!(
            folded_lines(&profile, &options),
            ["[unknown thread];[no user stack] 10"]
        );
        assert!(check_probe(&profile, &options).is_ok());
        let unknown = FoldOptions {
            probe: Some("nope".to_string()),
            ..FoldOptions::default()
        };
        assert_eq!(
            check_probe(&profile, &unknown)
                .expect_err("not in the profile")
                .to_string(),
            "probe `nope` is not in this profile (its probes: futex, sched)"
        );
    }

    /// The wall-clock view folds the cpu probe's samples and the offcpu probe's intervals (and
    /// nothing else) with a leaf saying what the thread did; a futex sleep is named by its kind.
    #[test]
    fn wall_view_marks_each_leaf() {
        let with = |probe: &str, kind: WaitKind, operation: &str, stack: Option<u32>, ns: u64| {
            let mut r = record(2, stack, ns, 1);
            r.probe = probe.to_string();
            r.kind = kind;
            r.operation = operation.to_string();
            r
        };
        let profile = Profile {
            threads: vec![ThreadInfo {
                pid: 1,
                tid: 2,
                name: "worker".to_string(),
            }],
            stacks: vec![
                Stack {
                    space: AddressSpace::User,
                    frames: vec![
                        named("__lll_lock_wait"),
                        named("pthread_mutex_lock"),
                        named("main"),
                    ],
                    truncated: false,
                },
                Stack {
                    space: AddressSpace::User,
                    frames: vec![named("spin"), named("main")],
                    truncated: false,
                },
            ],
            waits: vec![
                with("cpu", WaitKind::OnCpu, "cpu-clock", Some(1), 30),
                with(
                    "offcpu",
                    WaitKind::OffCpu,
                    "sleeping in futex",
                    Some(0),
                    200,
                ),
                with("offcpu", WaitKind::OffCpu, "run-queue", Some(1), 7),
                with("offcpu", WaitKind::OffCpu, "sleeping in nanosleep", None, 5),
                with("futex", WaitKind::Mutex, "FUTEX_WAIT_PRIVATE", Some(0), 199),
            ],
            ..Profile::default()
        };
        assert!(check_wall(&profile).is_ok());
        let options = FoldOptions {
            wall: true,
            ..FoldOptions::default()
        };
        assert_eq!(
            folded_lines(&profile, &options),
            [
                "worker;[no user stack];[off-cpu: sleeping in nanosleep] 5",
                "worker;main;pthread_mutex_lock;__lll_lock_wait;[off-cpu: mutex] 200",
                "worker;main;spin;[on-cpu] 30",
                "worker;main;spin;[run-queue] 7",
            ]
        );
        let no_cpu = Profile {
            waits: profile.waits[1..].to_vec(),
            ..profile.clone()
        };
        assert!(check_wall(&no_cpu)
            .expect_err("no cpu records")
            .to_string()
            .contains("--probes cpu,offcpu"));
    }

    /// `--probe wakeup` is refused with the name its records carry (`offcpu`).
    #[test]
    fn wakeup_probe_filter_points_to_offcpu() {
        let options = FoldOptions {
            probe: Some("wakeup".to_string()),
            ..FoldOptions::default()
        };
        let err = check_probe(&Profile::default(), &options).expect_err("refused");
        assert!(err.to_string().contains("--probe offcpu"), "{err}");
    }
}
