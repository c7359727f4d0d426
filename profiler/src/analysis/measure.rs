//! What a folded value measures: its [`Weight`] (time or count) and the [`Measure`] of the
//! records folded (waits, or time in calls, holds, CPU time, events, samples), which labels
//! every output (the report, flamegraphs, exports, diffs).

use super::fold::{selected, FoldOptions};
use lockscope_probes::{Profile, Quantity, WaitKind, WaitRecord, WaitStats};
use std::fmt;
use std::str::FromStr;

/// What a folded line's value measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Weight {
    /// Total wait time in nanoseconds (the default): wide frames are where time went.
    #[default]
    Nanoseconds,
    /// Number of waits: wide frames are where threads blocked most often.
    Count,
}

impl Weight {
    /// Name on the command line (`ns`, `count`).
    pub fn name(self) -> &'static str {
        match self {
            Weight::Nanoseconds => "ns",
            Weight::Count => "count",
        }
    }

    /// The unit of the weight, as a flamegraph labels it (`ns`, `waits`).
    pub fn unit(self) -> &'static str {
        match self {
            Weight::Nanoseconds => "ns",
            Weight::Count => "waits",
        }
    }

    /// The weight of one record.
    pub fn of(self, record: &WaitRecord) -> u64 {
        self.of_stats(&record.stats)
    }

    /// The weight of `stats` (a record's, a wakeup's).
    pub fn of_stats(self, stats: &WaitStats) -> u64 {
        match self {
            Weight::Nanoseconds => stats.total_ns,
            Weight::Count => stats.count,
        }
    }
}

impl fmt::Display for Weight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Weight {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ns" => Ok(Weight::Nanoseconds),
            "count" => Ok(Weight::Count),
            other => Err(format!(
                "unknown weight `{other}` (expected `ns` or `count`)"
            )),
        }
    }
}

/// What the records of a profile measure: waits (lockscope's recordings), or what an imported
/// capture sampled ([`WaitKind::is_sampled`]). Labels (report, flamegraph, exports) say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Waits: counts of waits and their durations.
    Waits,
    /// Sampled CPU time: samples and the CPU time they stand for (perf `cpu-clock`).
    OnCpu,
    /// Counted events (perf `cycles`, page faults, `sched:sched_switch` with their periods).
    Events,
    /// Samples without a period (folded stacks, DTrace `count()`, perf without periods).
    Samples,
    /// Lock hold times (the `mutex-hold` probe): counts of holds and how long each lasted.
    Holds,
    /// Time in system calls (the `syscall` and `lifecycle` probes): counts of calls and how long
    /// each lasted.
    Calls,
}

impl Measure {
    /// What `records` measure: waits when one is a wait, else calls, else holds, else what the
    /// samples are (samples when their kinds are mixed).
    pub fn of_records<'a>(records: impl IntoIterator<Item = &'a WaitRecord>) -> Measure {
        let mut measure: Option<(Quantity, Measure)> = None;
        for record in records {
            let quantity = record.kind.quantity();
            let this = match (quantity, record.kind) {
                (Quantity::Waits, _) => return Measure::Waits,
                (Quantity::Calls, _) => Measure::Calls,
                (Quantity::Holds, _) => Measure::Holds,
                (Quantity::Samples, WaitKind::OnCpu) => Measure::OnCpu,
                (Quantity::Samples, WaitKind::Event) => Measure::Events,
                (Quantity::Samples, _) => Measure::Samples,
            };
            measure = Some(match measure {
                None => (quantity, this),
                Some((q, m)) if q < quantity || m == this => (q, m),
                Some((q, _)) if q == quantity => (q, Measure::Samples),
                Some(_) => (quantity, this),
            });
        }
        measure.map_or(Measure::Waits, |(_, m)| m)
    }

    /// What the records `options` selects in `profile` measure.
    pub fn of(profile: &Profile, options: &FoldOptions) -> Measure {
        Measure::of_records(selected(profile, options))
    }

    /// Its name in JSON (`waits`, `on-cpu`, `events`, `samples`, `holds`, `calls`).
    pub fn name(self) -> &'static str {
        match self {
            Measure::Waits => "waits",
            Measure::OnCpu => "on-cpu",
            Measure::Events => "events",
            Measure::Samples => "samples",
            Measure::Holds => "holds",
            Measure::Calls => "calls",
        }
    }

    /// True when each record is a count of events with their durations (waits, holds), whose
    /// mean, maximum and distribution mean something; false for samples and counts.
    pub fn has_durations(self) -> bool {
        matches!(self, Measure::Waits | Measure::Holds | Measure::Calls)
    }

    /// What the records' time is, in words (`wait time`, `CPU time`, `time held`).
    pub fn time_name(self) -> &'static str {
        match self {
            Measure::Waits => "wait time",
            Measure::OnCpu => "CPU time",
            Measure::Holds => "time held",
            Measure::Calls => "time in calls",
            Measure::Events | Measure::Samples => "time",
        }
    }

    /// True when the records carry times (waits, CPU time, hold times, call times), false for
    /// bare counts.
    pub fn is_timed(self) -> bool {
        matches!(
            self,
            Measure::Waits | Measure::OnCpu | Measure::Holds | Measure::Calls
        )
    }

    /// The unit of a folded value weighted by `weight` (`ns`, `waits`, `ns on CPU`, `ns held`,
    /// `ns in calls`, `samples`, `events`, `holds`, `calls`), as flamegraphs label it.
    pub fn unit(self, weight: Weight) -> &'static str {
        match (self, weight) {
            (Measure::Waits, Weight::Count) => "waits",
            (Measure::Holds, Weight::Nanoseconds) => "ns held",
            (Measure::Holds, Weight::Count) => "holds",
            (Measure::Calls, Weight::Nanoseconds) => "ns in calls",
            (Measure::Calls, Weight::Count) => "calls",
            (Measure::OnCpu, Weight::Nanoseconds) => "ns on CPU",
            (Measure::OnCpu | Measure::Samples, Weight::Count) => "samples",
            (Measure::Events, Weight::Count) => "events",
            (_, Weight::Nanoseconds) => "ns",
        }
    }

    /// The noun of a count of `n` (`wait`/`waits`, `sample`/`samples`, `event`/`events`,
    /// `hold`/`holds`, `call`/`calls`).
    pub fn noun(self, n: u64) -> &'static str {
        match (self, n == 1) {
            (Measure::Waits, true) => "wait",
            (Measure::Waits, false) => "waits",
            (Measure::Holds, true) => "hold",
            (Measure::Holds, false) => "holds",
            (Measure::Calls, true) => "call",
            (Measure::Calls, false) => "calls",
            (Measure::Events, true) => "event",
            (Measure::Events, false) => "events",
            (_, true) => "sample",
            (_, false) => "samples",
        }
    }

    /// What a flamegraph's widths are (`total wait time`, `number of samples`...).
    pub fn width(self, weight: Weight) -> &'static str {
        match (self, weight) {
            (Measure::Waits, Weight::Nanoseconds) => "total wait time",
            (Measure::OnCpu, Weight::Nanoseconds) => "CPU time (what the samples stand for)",
            (Measure::Holds, Weight::Nanoseconds) => "total time held",
            (Measure::Calls, Weight::Nanoseconds) => "total time in calls",
            (_, Weight::Nanoseconds) => "total time",
            (Measure::Waits, Weight::Count) => "number of waits",
            (Measure::Holds, Weight::Count) => "number of holds",
            (Measure::Calls, Weight::Count) => "number of calls",
            (Measure::Events, Weight::Count) => "number of events (sum of the sample periods)",
            (_, Weight::Count) => "number of samples",
        }
    }
}
