//! The `lifecycle` probe's section: forks, vforks, threads, execs and exits with rates and call
//! times.

use super::*;
use crate::render::tables::{table, Cell, Column};

/// This file's section, for `build.rs`'s list.
pub(super) const SECTION: Entry = Entry::of::<Lifecycle>();

/// The lifecycle operations, most frequent first.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct Lifecycle(Vec<LifecycleRow>);

#[derive(Serialize)]
pub(crate) struct LifecycleRow {
    pub(crate) operation: String,
    pub(crate) count: u64,
    pub(crate) per_second: f64,
    pub(crate) failed: u64,
    pub(crate) total_ns: u64,
    pub(crate) mean_ns: u64,
    pub(crate) max_ns: u64,
    /// The innermost named user frame of the heaviest caller site.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_site: Option<String>,
}

fn lifecycle(profile: &Profile) -> Option<Vec<LifecycleRow>> {
    let mut ops: BTreeMap<&str, (WaitStats, u64, u64, Option<String>)> = BTreeMap::new();
    for w in profile
        .waits
        .iter()
        .filter(|w| w.is_from(&catalog::LIFECYCLE))
    {
        let (op, errno) = call_and_errno(&w.operation);
        let entry = ops.entry(op).or_default();
        if errno.is_some() {
            entry.1 += w.stats.count;
            continue;
        }
        entry.0.merge(&w.stats);
        if w.stats.total_ns >= entry.2 {
            entry.2 = w.stats.total_ns;
            entry.3 = Some(site_frame(profile, w));
        }
    }
    if ops.is_empty() {
        return None;
    }
    let seconds = profile.metadata.duration_ns as f64 / 1e9;
    let mut rows: Vec<LifecycleRow> = ops
        .into_iter()
        .map(|(op, (stats, failed, _, site))| LifecycleRow {
            operation: op.to_string(),
            count: stats.count,
            per_second: if seconds > 0.0 {
                (stats.count as f64 / seconds * 10.0).round() / 10.0
            } else {
                0.0
            },
            failed,
            total_ns: stats.total_ns,
            mean_ns: stats.mean_ns(),
            max_ns: stats.max_ns,
            top_site: site,
        })
        .collect();
    rows.sort_by_key(|r| Reverse(r.count));
    Some(rows)
}

impl Section for Lifecycle {
    const SOURCE: Source = Source::Probe(&catalog::LIFECYCLE);

    fn build(profile: &Profile) -> Option<Lifecycle> {
        lifecycle(profile).map(Lifecycle)
    }

    fn write_text(&self, out: &mut String, _style: StackStyle) {
        write_lifecycle(&self.0, out);
    }

    fn write_html(&self, out: &mut String, heading: &str) {
        let _ = writeln!(out, "<{heading}>Processes and threads</{heading}>");
        let columns: [Column<'_, LifecycleRow>; 8] = [
            ("operation", |l| Cell::Code(Some(&l.operation))),
            ("count", |l| Cell::Count(l.count)),
            ("per second", |l| Cell::Rate(l.per_second)),
            ("failed", |l| Cell::Count(l.failed)),
            ("total", |l| Cell::Ns(l.total_ns)),
            ("mean", |l| Cell::Ns(l.mean_ns)),
            ("max", |l| Cell::Ns(l.max_ns)),
            ("heaviest caller", |l| Cell::Code(l.top_site.as_deref())),
        ];
        table(out, "section-table", &columns, &self.0);
    }
}

fn write_lifecycle(rows: &[LifecycleRow], out: &mut String) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Process and thread lifecycle (lifecycle); time is the caller's time in the call"
    );
    let _ = writeln!(
        out,
        "  {:<14}{:>8}{:>9}{:>8}{:>11}{:>11}  heaviest site",
        "event", "count", "per s", "failed", "mean", "max"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<14}{:>8}{:>9.1}{:>8}{:>11}{:>11}  {}",
            r.operation,
            r.count,
            r.per_second,
            r.failed,
            format_ns(r.mean_ns),
            format_ns(r.max_ns),
            r.top_site.as_deref().unwrap_or("")
        );
    }
}
