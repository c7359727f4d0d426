//! The `offcpu` probe's section: off-CPU time by state and system call, and the heaviest
//! waker → sleeper pairs.

use super::*;
use crate::render::tables::{table, Cell, Column};

/// This file's section, for `build.rs`'s list.
pub(super) const SECTION: Entry = Entry::of::<OffCpu>();

#[derive(Serialize)]
pub(crate) struct OffCpu {
    /// Off-CPU time by state and system call (`sleeping in futex`, `preempted`, `run-queue`).
    pub(crate) by_operation: Vec<OperationRow>,
    /// Heaviest waker → sleeper pairs (by thread name).
    pub(crate) wakeups: Vec<WakeupRow>,
    /// Why there are no wakeups, when there are none (text report only).
    #[serde(skip)]
    pub(crate) no_wakeups: Option<&'static str>,
    /// True when some of its futex sleeps are the futex probe's waits, which count them (text
    /// report only).
    #[serde(skip)]
    pub(crate) futex_seen_twice: bool,
}

#[derive(Serialize)]
pub(crate) struct OperationRow {
    pub(crate) operation: String,
    pub(crate) count: u64,
    pub(crate) total_ns: u64,
    pub(crate) max_ns: u64,
}

#[derive(Serialize)]
pub(crate) struct WakeupRow {
    pub(crate) waker: String,
    pub(crate) sleeper: String,
    pub(crate) count: u64,
    pub(crate) total_ns: u64,
}

fn offcpu(profile: &Profile) -> Option<OffCpu> {
    let records: Vec<&WaitRecord> = profile
        .waits
        .iter()
        .filter(|w| w.is_from(&catalog::OFFCPU))
        .collect();
    if records.is_empty() && profile.wakeups.is_empty() {
        return None;
    }
    let mut ops: BTreeMap<&str, WaitStats> = BTreeMap::new();
    for w in &records {
        ops.entry(w.operation.as_str()).or_default().merge(&w.stats);
    }
    let mut by_operation: Vec<OperationRow> = ops
        .into_iter()
        .map(|(operation, s)| OperationRow {
            operation: operation.to_string(),
            count: s.count,
            total_ns: s.total_ns,
            max_ns: s.max_ns,
        })
        .collect();
    by_operation.sort_by_key(|r| Reverse(r.total_ns));
    by_operation.truncate(TOP);
    let mut pairs: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for w in &profile.wakeups {
        let waker = w.waker_name.clone();
        let entry = pairs
            .entry((waker, thread_label(profile, w.pid, w.tid)))
            .or_default();
        entry.0 += w.stats.count;
        entry.1 = entry.1.saturating_add(w.stats.total_ns);
    }
    let mut wakeups: Vec<WakeupRow> = pairs
        .into_iter()
        .map(|((waker, sleeper), (count, total_ns))| WakeupRow {
            waker,
            sleeper,
            count,
            total_ns,
        })
        .collect();
    wakeups.sort_by_key(|r| Reverse(r.total_ns));
    wakeups.truncate(TOP);
    let wakeup_probe = profile
        .metadata
        .probes
        .iter()
        .any(|p| p.probe == catalog::WAKEUP.name);
    let no_wakeups = if !wakeups.is_empty() {
        None
    } else if wakeup_probe {
        Some("none recorded (no sleep of at least --min-block ended)")
    } else if profile.metadata.backend == "ebpf" {
        Some("not recorded (the `wakeup` probe takes the wakers' stacks)")
    } else {
        Some("not recorded")
    };
    let twice = lockscope_probes::SeenTwice::of(profile);
    Some(OffCpu {
        by_operation,
        wakeups,
        no_wakeups,
        futex_seen_twice: records.iter().any(|w| twice.is_sleep(w)),
    })
}

impl Section for OffCpu {
    const SOURCE: Source = Source::Probe(&catalog::OFFCPU);

    fn build(profile: &Profile) -> Option<OffCpu> {
        offcpu(profile)
    }

    fn write_text(&self, out: &mut String, _style: StackStyle) {
        let _ = writeln!(out);
        let _ = writeln!(out, "Off-CPU time (offcpu), by state and system call");
        let _ = writeln!(
            out,
            "  {:<32}{:>8}{:>11}{:>11}",
            "state", "count", "total", "max"
        );
        for r in &self.by_operation {
            let _ = writeln!(
                out,
                "  {:<32}{:>8}{:>11}{:>11}",
                r.operation,
                r.count,
                format_ns(r.total_ns),
                format_ns(r.max_ns)
            );
        }
        if self.futex_seen_twice {
            let _ = writeln!(
                out,
                "  (its futex sleeps of the threads the futex probe traced are that probe's waits \
                 above,\n  counted there once)"
            );
        }
        if let Some(why) = self.no_wakeups {
            let _ = writeln!(out, "  who woke whom: {why}");
        } else {
            let _ = writeln!(out, "  who woke whom (sleep time ended by each waker):");
            for r in &self.wakeups {
                let _ = writeln!(
                    out,
                    "    {:<24} -> {:<24}{:>8}{:>11}",
                    r.waker,
                    r.sleeper,
                    r.count,
                    format_ns(r.total_ns)
                );
            }
        }
    }

    fn write_html(&self, out: &mut String, heading: &str) {
        let _ = writeln!(
            out,
            "<{heading}>Off-CPU time by state and system call</{heading}>"
        );
        let columns: [Column<'_, OperationRow>; 4] = [
            ("state", |o| Cell::Code(Some(&o.operation))),
            ("intervals", |o| Cell::Count(o.count)),
            ("total", |o| Cell::Ns(o.total_ns)),
            ("max", |o| Cell::Ns(o.max_ns)),
        ];
        table(out, "section-table", &columns, &self.by_operation);
        if !self.wakeups.is_empty() {
            let _ = writeln!(out, "<p>Heaviest wakers of sleeping threads:</p>");
            let columns: [Column<'_, WakeupRow>; 4] = [
                ("waker", |w| Cell::Text(Some(&w.waker))),
                ("sleeper", |w| Cell::Text(Some(&w.sleeper))),
                ("wakeups", |w| Cell::Count(w.count)),
                ("sleep ended", |w| Cell::Ns(w.total_ns)),
            ];
            table(out, "section-table", &columns, &self.wakeups);
        }
    }
}
