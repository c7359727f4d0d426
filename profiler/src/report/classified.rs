//! The waits of a profile as the one classification tells them, summed: the totals every view
//! prints (the report's `classified` in its JSON, the HTML page's summary, each side of a diff,
//! a sweep level's breakdown, `why --json`), so that no view counts or classifies on its own.
//!
//! The waits are the report's: every record of the shown measure ([`MixedMeasures`]), each
//! sleep that two probes saw once ([`SeenTwice`]: the futex or klock probe's record counts), and
//! never the intervals of threads waiting for a CPU, which are CPU saturation, summed apart.
//! Each wait is contention, idle or neither as [`wait_roles`] tells it (its rules are in
//! `probes/src/sched.rs`; this only adds them up). Beside them, the CPU time of threads spinning
//! for a lock another thread held (`spin_samples`, the same rules' file): contention on a CPU.

use crate::render::units::{format_fraction, format_ns};
use lockscope_probes::sched::spin_samples;
use lockscope_probes::{
    wait_roles, MixedMeasures, Profile, RoleBasis, SeenTwice, WaitRecord, WaitRole,
};
use serde::Serialize;
use std::borrow::Cow;

/// A profile's waits by role, and its CPU saturation, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Classified {
    /// Waits counted (the report's `totals.count`).
    pub waits: u64,
    /// Their time, nanoseconds (the report's `totals.total_ns`).
    pub wait_ns: u64,
    /// Waits on other threads of the program (the contention section's rows, before the top cut).
    pub contention_waits: u64,
    /// Their time.
    pub contention_ns: u64,
    /// Waits for something outside the program (the idle rows, before the top cut).
    pub idle_waits: u64,
    /// Their time.
    pub idle_ns: u64,
    /// Waits the classification calls neither (disk I/O, a sleep it cannot tell).
    pub neither_waits: u64,
    /// Their time.
    pub neither_ns: u64,
    /// Intervals of threads waiting for a CPU (run queue after a wakeup, preempted): CPU
    /// saturation, not waits (the report's `header.cpu_wait_intervals`).
    pub cpu_saturation_intervals: u64,
    /// Their time (the report's CPU saturation section).
    pub cpu_saturation_ns: u64,
    /// Samples of the `cpu` probe of threads spinning in a recognised spin primitive while
    /// another thread held the lock ([`spin_samples`]): contention on a CPU, in no count of
    /// waits (a sample is no wait).
    pub spin_samples: u64,
    /// Their CPU time, nanoseconds (the report's spin section).
    pub spin_ns: u64,
    /// True when some role was told by who ended the sleeps or by the bottleneck analysis, not
    /// only by a lock's kind or the rule of thumb.
    pub wakers_known: bool,
    /// The threads' wall times summed (the offcpu probe's per-thread times), the whole that the
    /// shares of thread time are of; absent without them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_ns: Option<u64>,
}

impl Classified {
    /// The totals of `profile`.
    pub fn of(profile: &Profile) -> Classified {
        let mut out = Classified::default();
        let roles = wait_roles(profile);
        let counted = counted_filter(profile);
        for (w, spin) in profile.waits.iter().zip(spin_samples(profile)) {
            if spin.is_some() {
                out.spin_samples += w.stats.count;
                out.spin_ns = out.spin_ns.saturating_add(w.stats.total_ns);
            }
        }
        for (w, role) in profile.waits.iter().zip(&roles) {
            let (count, ns) = (w.stats.count, w.stats.total_ns);
            if w.is_cpu_wait() {
                out.cpu_saturation_intervals += count;
                out.cpu_saturation_ns = out.cpu_saturation_ns.saturating_add(ns);
                continue;
            }
            if !counted(w) {
                continue;
            }
            out.waits += count;
            out.wait_ns = out.wait_ns.saturating_add(ns);
            let (waits, total) = match role.as_ref().map(|r| r.role) {
                Some(WaitRole::Contention) => (&mut out.contention_waits, &mut out.contention_ns),
                Some(WaitRole::Idle) => (&mut out.idle_waits, &mut out.idle_ns),
                None => (&mut out.neither_waits, &mut out.neither_ns),
            };
            *waits += count;
            *total = total.saturating_add(ns);
        }
        out.wakers_known = roles
            .iter()
            .flatten()
            .any(|r| !matches!(r.basis, RoleBasis::Lock | RoleBasis::Window));
        let thread_ns = profile
            .thread_times
            .iter()
            .fold(0u64, |sum, t| sum.saturating_add(t.wall_ns));
        out.thread_ns = (thread_ns > 0).then_some(thread_ns);
        out
    }

    /// The totals in words, for text and the page: `contention 805 ms in 4 waits, idle 1.30 s
    /// in 580, neither 0 ns in 0; waiting for a CPU 2.22 s in 899 intervals (CPU saturation,
    /// not waits)`, with each time's share of thread time when the profile has it and
    /// `shares` asks for them.
    pub fn words(&self, shares: bool) -> String {
        let part = |ns: u64| match self.of_thread_time(ns).filter(|_| shares) {
            Some(share) => format!(
                "{} ({} of thread time)",
                format_ns(ns),
                format_fraction(share)
            ),
            None => format_ns(ns),
        };
        let mut text = format!(
            "contention {} in {} waits, idle {} in {}, neither {} in {}",
            part(self.contention_ns),
            self.contention_waits,
            part(self.idle_ns),
            self.idle_waits,
            part(self.neither_ns),
            self.neither_waits
        );
        if self.spin_samples > 0 {
            text.push_str(&format!(
                "; spinning on a lock another thread held {} in {} samples (contention on a CPU)",
                part(self.spin_ns),
                self.spin_samples
            ));
        }
        if self.cpu_saturation_intervals > 0 {
            text.push_str(&format!(
                "; waiting for a CPU {} in {} intervals (CPU saturation, not waits)",
                part(self.cpu_saturation_ns),
                self.cpu_saturation_intervals
            ));
        }
        text
    }

    /// `ns` as a share of thread time (0 to 1), `None` without per-thread times.
    pub fn of_thread_time(&self, ns: u64) -> Option<f64> {
        self.thread_ns
            .filter(|&whole| whole > 0)
            .map(|whole| ns as f64 / whole as f64)
    }
}

/// True for the records the waits are (see the overview): neither left out by the shown measure,
/// nor another probe's sleep counted once, nor a thread waiting for a CPU.
fn counted_filter(profile: &Profile) -> impl Fn(&WaitRecord) -> bool {
    let twice = SeenTwice::of(profile);
    let mixed = MixedMeasures::of(profile);
    move |w| !mixed.leaves_out(w) && !twice.contains(w) && !w.is_cpu_wait()
}

/// `profile` with only its waits as [`Classified`] counts them (borrowed when that is all of
/// them), for views that fold or group records themselves (the page's top sites, the diff).
/// A copy has no bottleneck analysis: no view of the waits alone reads it, and it is the
/// largest part of a profile (`lockscope top` asks for its window's every second).
pub fn waits_only(profile: &Profile) -> Cow<'_, Profile> {
    let counted = counted_filter(profile);
    if profile.waits.iter().all(&counted) {
        Cow::Borrowed(profile)
    } else {
        Cow::Owned(Profile {
            metadata: profile.metadata.clone(),
            threads: profile.threads.clone(),
            stacks: profile.stacks.clone(),
            waits: profile
                .waits
                .iter()
                .filter(|w| counted(w))
                .cloned()
                .collect(),
            thread_times: profile.thread_times.clone(),
            wakeups: profile.wakeups.clone(),
            bottleneck: None,
            processes: profile.processes.clone(),
        })
    }
}
