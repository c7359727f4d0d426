//! The `mutex-hold` probe's section: how long each mutex was held, per lock and acquisition site,
//! and how its acquisitions went (`free`: at once, `spun`: the lock call took longer than the
//! uprobes' own time without blocking, `blocked`: the thread slept in it). Hold time is not wait
//! time: the report keeps it out of its waits ([`lockscope_probes::MixedMeasures`]), so beside
//! waits this is where holds are.

use super::*;
use crate::render::tables::{table, Cell, Column};

/// This file's section, for `build.rs`'s list.
pub(super) const SECTION: Entry = Entry::of::<Holds>();

/// The holds per lock and site, longest total first.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct Holds(Vec<HoldRow>);

#[derive(Serialize)]
pub(crate) struct HoldRow {
    /// The mutex's address (hex string) and its process.
    pub(crate) lock: String,
    pub(crate) pid: u32,
    /// Where it was acquired: the first frame of the acquisition's user stack past the lock call.
    pub(crate) site: String,
    pub(crate) holds: u64,
    pub(crate) total_ns: u64,
    pub(crate) max_ns: u64,
    /// Holds by how the acquisition went (`free`, `spun`, `blocked`); empty when the backend
    /// does not say (DTrace's `plockstat`).
    pub(crate) acquired: BTreeMap<String, u64>,
    pub(crate) threads: Vec<String>,
}

/// How an acquisition went, from a hold's operation: `hold (spun)` is `spun`.
fn how(operation: &str) -> Option<&str> {
    operation.strip_prefix("hold (")?.strip_suffix(')')
}

fn holds(profile: &Profile) -> Option<Vec<HoldRow>> {
    type Acc = (WaitStats, BTreeMap<String, u64>, Vec<String>);
    let mut sites: BTreeMap<(u32, u64, String), Acc> = BTreeMap::new();
    for w in profile.waits.iter().filter(|w| w.kind == WaitKind::Hold) {
        let entry = sites
            .entry((w.pid, w.object, site_frame(profile, w)))
            .or_default();
        entry.0.merge(&w.stats);
        if let Some(how) = how(&w.operation) {
            *entry.1.entry(how.to_string()).or_default() += w.stats.count;
        }
        let name = thread_label(profile, w.pid, w.tid);
        if !entry.2.contains(&name) {
            entry.2.push(name);
        }
    }
    if sites.is_empty() {
        return None;
    }
    let mut rows: Vec<HoldRow> = sites
        .into_iter()
        .map(
            |((pid, object, site), (stats, acquired, threads))| HoldRow {
                lock: format!("{object:#x}"),
                pid,
                site,
                holds: stats.count,
                total_ns: stats.total_ns,
                max_ns: stats.max_ns,
                acquired,
                threads,
            },
        )
        .collect();
    rows.sort_by_key(|r| (Reverse(r.total_ns), Reverse(r.holds)));
    rows.truncate(TOP);
    Some(rows)
}

impl Section for Holds {
    const SOURCE: Source = Source::Probe(&catalog::MUTEX_HOLD);

    fn build(profile: &Profile) -> Option<Holds> {
        holds(profile).map(Holds)
    }

    fn write_text(&self, out: &mut String, _style: StackStyle) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Mutex holds ({}: time held, not waits)",
            catalog::MUTEX_HOLD.name
        );
        let _ = writeln!(
            out,
            "  {:<18}{:>8}{:>11}{:>11}{:>11}  {:<26}site",
            "lock", "holds", "total", "mean", "max", "acquired"
        );
        for r in &self.0 {
            let acquired: Vec<String> = r
                .acquired
                .iter()
                .map(|(how, n)| format!("{how} {n}"))
                .collect();
            let _ = writeln!(
                out,
                "  {:<18}{:>8}{:>11}{:>11}{:>11}  {:<26}{}",
                r.lock,
                r.holds,
                format_ns(r.total_ns),
                format_ns(r.total_ns / r.holds.max(1)),
                format_ns(r.max_ns),
                if acquired.is_empty() {
                    "-".to_string()
                } else {
                    acquired.join(", ")
                },
                r.site
            );
        }
    }

    fn write_html(&self, out: &mut String, heading: &str) {
        let _ = writeln!(out, "<{heading}>Mutex holds</{heading}>");
        let columns: [Column<'_, HoldRow>; 7] = [
            ("lock", |h| Cell::Code(Some(&h.lock))),
            ("holds", |h| Cell::Count(h.holds)),
            ("total held", |h| Cell::Ns(h.total_ns)),
            ("max", |h| Cell::Ns(h.max_ns)),
            ("acquired", |h| Cell::Counts(&h.acquired)),
            ("site", |h| Cell::Code(Some(&h.site))),
            ("threads", |h| Cell::List(&h.threads)),
        ];
        table(out, "section-table", &columns, &self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(probe: &str, kind: WaitKind, operation: &str, object: u64, ns: u64) -> WaitRecord {
        WaitRecord {
            probe: probe.into(),
            kind,
            pid: 1,
            tid: 2,
            object,
            operation: operation.into(),
            user_stack: None,
            kernel_stack: None,
            woken_by: None,
            stats: WaitStats {
                count: 1,
                total_ns: ns,
                max_ns: ns,
                ..WaitStats::default()
            },
        }
    }

    /// Holds of one lock at one site are one row, longest total first, with how each
    /// acquisition went; waits are not holds, and a profile without holds has no section.
    #[test]
    fn holds_per_lock_and_site() {
        let hold = |operation, object, ns| {
            record(
                catalog::MUTEX_HOLD.name,
                WaitKind::Hold,
                operation,
                object,
                ns,
            )
        };
        let mut profile = Profile {
            waits: vec![
                record(
                    catalog::FUTEX.name,
                    WaitKind::Mutex,
                    "FUTEX_WAIT_PRIVATE",
                    0x10,
                    900,
                ),
                hold("hold (free)", 0x10, 100),
                hold("hold (blocked)", 0x10, 300),
                hold("hold (spun)", 0x20, 50),
            ],
            ..Profile::default()
        };
        let Holds(rows) = Holds::build(&profile).expect("holds");
        type Row<'a> = (&'a str, u64, u64, Vec<(&'a str, u64)>);
        let got: Vec<Row<'_>> = rows
            .iter()
            .map(|r| {
                let acquired = r.acquired.iter().map(|(h, n)| (h.as_str(), *n)).collect();
                (r.lock.as_str(), r.holds, r.total_ns, acquired)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("0x10", 2, 400, vec![("blocked", 1), ("free", 1)]),
                ("0x20", 1, 50, vec![("spun", 1)]),
            ]
        );
        profile.waits.truncate(1);
        assert!(Holds::build(&profile).is_none());
    }
}
