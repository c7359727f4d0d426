//! How much of the threads' wall time a profile's probes saw, and what to record when they
//! missed most of it.
//!
//! With the `offcpu` probe every thread's wall time is accounted for (on a CPU, waiting for a
//! CPU, asleep by system call: `thread_times`), and, in profiles that have it, who ended its
//! sleeps. Without it, the probes see only what they hook: the futex probe a futex wait, the cpu
//! probe its samples. A process-per-connection server whose backends queue for a row lock in
//! `epoll_wait` spends 85% of its time there and the futex probe sees the 4.5% under its
//! semaphores: the report says so, and what to add, with the cost docs/BENCHMARKS.md measured.

use lockscope_probes::catalog;
use lockscope_probes::{Profile, TimeClass, WaitKind};
use serde::Serialize;

/// Below this share of the threads' wall time seen, the report says what to record instead.
pub(crate) const MOSTLY_MISSED: f64 = 0.5;

/// What the `offcpu` probe costs, as docs/BENCHMARKS.md measured it ("Every probe, before and
/// after": +0.9 µs a ctx-2thread hop, +1.8 µs a mutex hand-off; "Against the targets": MariaDB
/// under sysbench).
const OFFCPU_COST: &str = "about 1-2 µs per blocking context switch; MariaDB under sysbench kept \
                           0.99 of its throughput at 50 threads, 0.92 at 20";

/// What `bottleneck` adds to `offcpu`, as docs/BENCHMARKS.md measured it (`offcpu,wakeup` +1.88
/// µs a mutex hand-off against offcpu's +1.76; `preempt` +839 ns a switch on MariaDB; the
/// interval stream of the bottleneck analysis is not measured there yet).
const BOTTLENECK_COST: &str = "the wakers' stacks about 0.1 µs more per blocking switch, \
                               preemption stacks about 0.8 µs per switch on MariaDB";

/// The share of the threads' wall time the probes saw.
#[derive(Serialize)]
pub(crate) struct Coverage {
    /// `thread-times`: the `offcpu` probe's per-thread times (every thread's wall time, all of it
    /// seen); `recording`: no per-thread times, each thread seen waiting taken to live through
    /// the whole recording.
    pub(crate) basis: &'static str,
    /// Threads counted.
    pub(crate) threads: usize,
    /// Their wall time summed, nanoseconds.
    pub(crate) thread_ns: u64,
    /// The part the probes saw: all of it with per-thread times; else the waits (each sleep
    /// once) and the `cpu` probe's CPU time.
    pub(crate) seen_ns: u64,
    /// `seen_ns / thread_ns`, 0 to 1.
    pub(crate) share: f64,
    /// Without per-thread times: the `cpu` probe's CPU time among `seen_ns` (absent without
    /// its samples).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sampled_cpu_ns: Option<u64>,
    /// With per-thread times: their time asleep, and the part of it whose waker is known (the
    /// sleeps no wakeup was seen for, and every sleep in profiles recorded before lockscope kept
    /// who ended them, are not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) asleep_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) waker_known_ns: Option<u64>,
    /// With per-thread times: the part of `asleep_ns` in sleeps still going on when the
    /// recording ended (no wakeup to see: the time asleep less the `offcpu` probe's ended
    /// sleeps); the rest of the time whose waker is unknown ended with no wakeup seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) unended_ns: Option<u64>,
    /// What to record to see the rest, when the probes missed most of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) suggestion: Option<String>,
    /// The text report's sentence.
    pub(crate) text: String,
}

impl Coverage {
    /// The coverage of `profile`, whose waits (each sleep once, imported samples and CPU waits
    /// apart) total `wait_ns` over `threads_seen` threads; `None` for an imported capture or a
    /// profile with no threads.
    pub(crate) fn of(profile: &Profile, wait_ns: u64, threads_seen: usize) -> Option<Coverage> {
        if !profile.thread_times.is_empty() {
            let times = &profile.thread_times;
            let thread_ns = times.iter().fold(0u64, |a, t| a.saturating_add(t.wall_ns));
            let asleep_ns = times.iter().fold(0u64, |a, t| {
                let awake = t.ns(TimeClass::OnCpu) + t.ns(TimeClass::RunQueue);
                a.saturating_add(t.accounted_ns().saturating_sub(awake))
            });
            let waker_known_ns = times.iter().fold(0u64, |a, t| {
                a.saturating_add(t.woken_ns.values().fold(0u64, |x, &y| x.saturating_add(y)))
            });
            // The sleeps that ended while recorded are the offcpu probe's records (whatever
            // kind their stacks gave them), apart from the intervals of waiting for a CPU.
            let ended_ns = profile
                .waits
                .iter()
                .filter(|w| w.is_from(&catalog::OFFCPU) && !w.is_cpu_wait())
                .fold(0u64, |a, w| a.saturating_add(w.stats.total_ns));
            return Some(
                Coverage {
                    basis: "thread-times",
                    threads: times.len(),
                    thread_ns,
                    seen_ns: thread_ns,
                    share: if thread_ns == 0 { 0.0 } else { 1.0 },
                    sampled_cpu_ns: None,
                    asleep_ns: Some(asleep_ns),
                    waker_known_ns: Some(waker_known_ns),
                    unended_ns: Some(asleep_ns.saturating_sub(ended_ns)),
                    suggestion: None,
                    text: String::new(),
                }
                .with_text(),
            );
        }
        let duration = profile.metadata.duration_ns;
        if threads_seen == 0 || duration == 0 || profile.metadata.target.command.is_empty() {
            return None;
        }
        let cpu_ns: u64 = profile
            .waits
            .iter()
            .filter(|w| w.is_from(&catalog::CPU) && w.kind == WaitKind::OnCpu)
            .map(|w| w.stats.total_ns)
            .sum();
        let thread_ns = duration.saturating_mul(threads_seen as u64);
        let seen_ns = wait_ns.saturating_add(cpu_ns).min(thread_ns);
        let share = seen_ns as f64 / thread_ns as f64;
        Some(
            Coverage {
                basis: "recording",
                threads: threads_seen,
                thread_ns,
                seen_ns,
                share: (share * 1e4).round() / 1e4,
                sampled_cpu_ns: (cpu_ns > 0).then_some(cpu_ns),
                asleep_ns: None,
                waker_known_ns: None,
                unended_ns: None,
                suggestion: (share < MOSTLY_MISSED).then(|| suggestion(profile)),
                text: String::new(),
            }
            .with_text(),
        )
    }

    /// The header's `seen` line (and the suggestion under it), after `label`.
    pub(crate) fn write_text(&self, out: &mut String, label: &dyn Fn(&str) -> String) {
        use std::fmt::Write as _;
        let _ = writeln!(out, "{}{}", label("seen"), self.text);
        if let Some(suggestion) = &self.suggestion {
            let _ = writeln!(out, "{}{suggestion}", label(""));
        }
    }

    /// `self` with its sentence.
    fn with_text(mut self) -> Coverage {
        use crate::render::units::{format_ns, format_percent};
        self.text =
            match (self.asleep_ns, self.waker_known_ns) {
                (Some(asleep), Some(known)) => format!(
                "all of the threads' wall time ({} of {} threads, offcpu: on a CPU, waiting for \
                 one, asleep); who ended their sleeps: {}",
                format_ns(self.thread_ns),
                self.threads,
                if known == 0 && asleep > 0 {
                    "not in this profile (recorded before lockscope kept it)".to_string()
                } else {
                    // The rest: sleeps nothing ended while recorded, and sleeps that ended
                    // unseen (a wakeup the stream lost or saw out of order).
                    let unended = self.unended_ns.unwrap_or(0).min(asleep.saturating_sub(known));
                    let unseen = asleep.saturating_sub(known).saturating_sub(unended);
                    let mut text =
                        format!("known for {} of the time asleep", format_percent(known, asleep));
                    if asleep > known {
                        text.push_str(&format!(
                            "; the rest is sleeps still going on when the recording ended ({}: \
                             no wakeup to see) and {} ended with no wakeup seen",
                            format_percent(unended, asleep),
                            format_percent(unseen, asleep),
                        ));
                    }
                    text
                }
            ),
                _ => format!(
                "{} of the threads' wall time ({} of waits{}; {} threads x the {} recording, at \
                 most their wall time); the rest is on a CPU or asleep where these probes do not \
                 look",
                format_percent(self.seen_ns, self.thread_ns),
                format_ns(self.seen_ns),
                if self.sampled_cpu_ns.is_some_and(|ns| ns > 0) {
                    " and sampled CPU time"
                } else {
                    ""
                },
                self.threads,
                format_ns(self.thread_ns / self.threads.max(1) as u64)
            ),
            };
        self
    }
}

/// What to record to see every thread's time, with what it costs.
fn suggestion(profile: &Profile) -> String {
    if profile.metadata.backend == "ebpf" {
        format!(
            "most of it unseen: --probes {futex},{offcpu} sees every sleep, whatever the call, who \
             ended it, and the time on a CPU ({OFFCPU_COST}; docs/BENCHMARKS.md); --probes \
             {bottleneck} adds what `lockscope why` needs ({BOTTLENECK_COST})",
            futex = catalog::FUTEX.name,
            offcpu = catalog::OFFCPU.name,
            bottleneck = catalog::BOTTLENECK.name
        )
    } else {
        format!(
            "most of it unseen: the {offcpu} probe sees every sleep (--probes with {offcpu} added)",
            offcpu = catalog::OFFCPU.name
        )
    }
}

/// Below this share of one CPU over the recording, a target's threads are said to have done
/// (almost) nothing while recorded: idle, or all blocked.
const IDLE_CPU_SHARE: f64 = 0.01;

/// Above this share of one CPU during the attach, a target idle while recorded is said to have
/// had its load end before the probes were attached.
const BUSY_ATTACH_SHARE: f64 = 0.02;

/// Every warning sentence of [`Activity::warning`] begins so: the report tells them from the
/// profile's other warnings, and does not say the same from the threads' times again.
pub const ACTIVITY_WARNING: &str = "while recorded, the target used ";

/// What the target's processes did on a CPU around a recording, from their own clocks
/// (`/proc/PID/stat`: every thread's user and system time, the exited ones' included): measured
/// by `record`, which stores [`Activity::warning`] in the profile when there is something to say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    /// The attach: from the start of `record` to the probes attached, nanoseconds.
    pub attach_ns: u64,
    /// The CPU time the processes given by pid used during it (0 for a launched command).
    pub attach_cpu_ns: u64,
    /// The recording's length, nanoseconds.
    pub recording_ns: u64,
    /// The CPU time the processes recorded from the start used while recorded.
    pub recording_cpu_ns: u64,
}

impl Activity {
    /// The warning a recording of a target that did (almost) nothing gets, with what to do: its
    /// load over before the attach finished (busy during the attach), or idle (or all blocked)
    /// throughout. `None` for a target that worked.
    pub fn warning(&self) -> Option<String> {
        use crate::render::units::format_ns;
        let share = |cpu: u64, wall: u64| cpu as f64 / wall.max(1) as f64;
        if self.recording_ns == 0
            || share(self.recording_cpu_ns, self.recording_ns) >= IDLE_CPU_SHARE
        {
            return None;
        }
        let used = format!(
            "{ACTIVITY_WARNING}{} of CPU ({:.1}% of one CPU over {})",
            format_ns(self.recording_cpu_ns),
            100.0 * share(self.recording_cpu_ns, self.recording_ns),
            format_ns(self.recording_ns)
        );
        Some(
            if self.attach_ns > 0 && share(self.attach_cpu_ns, self.attach_ns) >= BUSY_ATTACH_SHARE
            {
                format!(
                    "{used}, after {} ({:.1}% of one CPU) during the {} attach: its load ended \
                     before the probes were attached; start the load once `lockscope: recording` \
                     is printed, or record it with `-- CMD`",
                    format_ns(self.attach_cpu_ns),
                    100.0 * share(self.attach_cpu_ns, self.attach_ns),
                    format_ns(self.attach_ns)
                )
            } else {
                format!(
                    "{used}: it was idle, or all its threads were blocked; put it under load \
                     while recording"
                )
            },
        )
    }
}

/// What a recording that saw (almost) nothing says of why, and what to do: nothing recorded at
/// all, the threads idle while recorded (from the `offcpu` probe's times or the `cpu` probe's
/// samples, unless `record` measured the target's CPU time itself: [`Activity`]), and each probe
/// that attached but recorded nothing.
#[derive(Debug, Serialize)]
pub(crate) struct Quiet {
    /// The sentences, each with what to do.
    pub(crate) warnings: Vec<String>,
    /// The attached probes that recorded nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) silent_probes: Vec<String>,
}

impl Quiet {
    /// What `profile` saw too little of; `None` when it has nothing to say, or for an imported
    /// capture (no probes of its own).
    pub(crate) fn of(profile: &Profile) -> Option<Quiet> {
        use crate::render::units::format_ns;
        let meta = &profile.metadata;
        let attached: Vec<&str> = meta
            .probes
            .iter()
            .filter(|p| !matches!(p.status, lockscope_probes::AttachStatus::Failed { .. }))
            .map(|p| p.probe.as_str())
            .collect();
        if attached.is_empty() {
            return None;
        }
        let mut warnings = Vec::new();
        let nothing = meta.events == 0 && profile.waits.is_empty();
        let measured = meta
            .warnings
            .iter()
            .any(|w| w.starts_with(ACTIVITY_WARNING));
        if nothing && measured {
            warnings.push(format!(
                "nothing was recorded: no probe saw an event in the {} recording (the warning on the \
                 target's CPU time says why)",
                format_ns(meta.duration_ns)
            ));
        } else if nothing {
            warnings.push(format!(
                "nothing was recorded: no probe saw an event in the {} recording; the target was \
                 idle, or its load ran before or after it (start the load once `lockscope: \
                 recording` is printed), or its threads waited where these probes do not look \
                 (--probes {},{} sees every sleep)",
                format_ns(meta.duration_ns),
                catalog::FUTEX.name,
                catalog::OFFCPU.name
            ));
        }
        if !measured && !nothing && meta.duration_ns > 0 {
            if let Some(cpu_ns) = threads_cpu_ns(profile) {
                if (cpu_ns as f64) < IDLE_CPU_SHARE * meta.duration_ns as f64 {
                    warnings.push(format!(
                        "the target's threads were on a CPU for {} in all ({:.1}% of one CPU) \
                         while recorded: it was idle, or all its threads were blocked; put it \
                         under load while recording",
                        format_ns(cpu_ns),
                        100.0 * cpu_ns as f64 / meta.duration_ns as f64
                    ));
                }
            }
        }
        // The wakeup, preempt and waitfor probes are settings of the offcpu probe's object: its
        // records are theirs.
        let own_records = |name: &str| {
            ![
                catalog::WAKEUP.name,
                catalog::PREEMPT.name,
                catalog::WAITFOR.name,
            ]
            .contains(&name)
        };
        let silent_probes: Vec<String> = if nothing {
            Vec::new()
        } else {
            attached
                .iter()
                .filter(|name| own_records(name))
                .filter(|name| {
                    // The offcpu probe's per-thread times are records too.
                    let times = **name == catalog::OFFCPU.name && !profile.thread_times.is_empty();
                    !times && !profile.waits.iter().any(|w| w.probe == **name)
                })
                .map(|name| name.to_string())
                .collect()
        };
        for probe in &silent_probes {
            warnings.push(format!(
                "the {probe} probe attached but recorded nothing: what it hooks did not happen \
                 in the target while recorded"
            ));
        }
        (!warnings.is_empty()).then_some(Quiet {
            warnings,
            silent_probes,
        })
    }
}

/// The warnings of a recording that saw (almost) nothing (as the report header gives them), for
/// `record` to say when it ends.
pub fn quiet_warnings(profile: &Profile) -> Vec<String> {
    Quiet::of(profile).map_or_else(Vec::new, |q| q.warnings)
}

/// The target's threads' CPU time while recorded, where the profile holds it: the `offcpu`
/// probe's per-thread times on a CPU, else the `cpu` probe's samples; `None` without either.
fn threads_cpu_ns(profile: &Profile) -> Option<u64> {
    if !profile.thread_times.is_empty() {
        return Some(
            profile
                .thread_times
                .iter()
                .fold(0u64, |a, t| a.saturating_add(t.ns(TimeClass::OnCpu))),
        );
    }
    let samples = profile.metadata.probes.iter().any(|p| {
        p.probe == catalog::CPU.name
            && !matches!(p.status, lockscope_probes::AttachStatus::Failed { .. })
    });
    samples.then(|| {
        profile
            .waits
            .iter()
            .filter(|w| w.is_from(&catalog::CPU) && w.kind == WaitKind::OnCpu)
            .fold(0u64, |a, w| a.saturating_add(w.stats.total_ns))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockscope_probes::{AttachStatus, ProbeAttachment, WaitRecord, WaitStats};

    /// A profile of `duration_ns` with `probes` attached and one futex wait per entry of
    /// `futex_waits`.
    fn recording(probes: &[&str], futex_waits: usize, duration_ns: u64) -> Profile {
        let mut profile = Profile::default();
        profile.metadata.duration_ns = duration_ns;
        profile.metadata.probes = probes
            .iter()
            .map(|p| ProbeAttachment {
                probe: p.to_string(),
                hook: "hook".into(),
                status: AttachStatus::Attached,
            })
            .collect();
        profile.waits = (0..futex_waits)
            .map(|i| WaitRecord {
                probe: catalog::FUTEX.name.into(),
                kind: WaitKind::Mutex,
                pid: 1,
                tid: 2,
                object: i as u64,
                operation: "FUTEX_WAIT_PRIVATE".into(),
                user_stack: None,
                kernel_stack: None,
                woken_by: None,
                stats: WaitStats {
                    count: 1,
                    total_ns: 1_000,
                    max_ns: 1_000,
                    ..WaitStats::default()
                },
            })
            .collect();
        profile.metadata.events = futex_waits as u64;
        profile
    }

    /// A target busy while recorded gets no warning; one idle throughout is idle; one busy only
    /// during the attach had its load end before it.
    #[test]
    fn activity_warnings() {
        let second = 1_000_000_000;
        let busy = Activity {
            attach_ns: second / 2,
            attach_cpu_ns: second / 2,
            recording_ns: second,
            recording_cpu_ns: second / 50,
        };
        assert_eq!(busy.warning(), None);
        let idle = Activity {
            attach_cpu_ns: 0,
            recording_cpu_ns: second / 1000,
            ..busy
        };
        let said = idle.warning().expect("idle");
        assert!(said.starts_with(ACTIVITY_WARNING), "{said}");
        assert!(
            said.contains("(0.1% of one CPU over 1.00 s): it was idle"),
            "{said}"
        );
        let late = Activity {
            attach_cpu_ns: second / 2,
            ..idle
        };
        let said = late.warning().expect("late");
        assert!(
            said.contains("(100.0% of one CPU) during the 500 ms attach: its load ended before"),
            "{said}"
        );
    }

    /// Nothing recorded is said (briefly when `record` measured why), a probe that recorded
    /// nothing beside one that did is named, and a recording that saw enough says nothing.
    #[test]
    fn quiet_recordings() {
        let second = 1_000_000_000;
        let futex_cpu = [catalog::FUTEX.name, catalog::CPU.name];
        let empty = recording(&futex_cpu, 0, second);
        let quiet = Quiet::of(&empty).expect("nothing recorded");
        assert_eq!(quiet.warnings.len(), 1, "{quiet:?}");
        assert!(quiet.warnings[0].starts_with(
            "nothing was recorded: no probe saw an event in \
                                               the 1.00 s recording; the target was idle"
        ));
        assert!(quiet.silent_probes.is_empty());
        let mut measured = empty.clone();
        measured
            .metadata
            .warnings
            .push(format!("{ACTIVITY_WARNING}0 ns of CPU"));
        let quiet = Quiet::of(&measured).expect("nothing recorded");
        assert!(quiet.warnings[0].ends_with("(the warning on the target's CPU time says why)"));

        // The futex probe saw waits, the cpu probe nothing: its silence, and the threads off
        // CPU by its samples.
        let waits = recording(&futex_cpu, 3, second);
        let quiet = Quiet::of(&waits).expect("a silent probe");
        assert_eq!(quiet.silent_probes, [catalog::CPU.name]);
        assert_eq!(quiet.warnings.len(), 2, "{quiet:?}");
        assert!(
            quiet.warnings[0].contains("were on a CPU for 0 ns in all"),
            "{quiet:?}"
        );
        assert!(quiet.warnings[1].starts_with("the cpu probe attached but recorded nothing"));

        let futex_only = recording(&[catalog::FUTEX.name], 3, second);
        assert!(Quiet::of(&futex_only).is_none());
        // An imported capture has no probes of its own: nothing to say.
        assert!(Quiet::of(&recording(&[], 0, second)).is_none());
    }
}
