//! The `klock` probe's section: kernel locks by type and address with their caller.

use super::*;
use crate::render::tables::{table, Cell, Column};
use lockscope_probes::kernel_frames::is_kernel_lock_internal;

/// This file's section, for `build.rs`'s list.
pub(super) const SECTION: Entry = Entry::of::<KernelLocks>();

/// The kernel locks, heaviest total first.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct KernelLocks(Vec<KlockRow>);

#[derive(Serialize)]
pub(crate) struct KlockRow {
    pub(crate) lock_type: String,
    pub(crate) address: String,
    pub(crate) count: u64,
    pub(crate) total_ns: u64,
    pub(crate) max_ns: u64,
    pub(crate) caller: String,
    pub(crate) threads: Vec<String>,
}

/// The first frame of a kernel-lock record's kernel stack outside the lock implementation.
pub(super) fn lock_caller(profile: &Profile, record: &WaitRecord) -> String {
    profile
        .stack(record.kernel_stack)
        .and_then(|stack| {
            stack
                .frames
                .iter()
                .map(|f| f.display_name())
                .find(|name| !is_kernel_lock_internal(name))
        })
        .unwrap_or_else(|| "[unknown]".to_string())
}

fn klock(profile: &Profile) -> Option<Vec<KlockRow>> {
    // Per (type, address): stats, time per caller, thread names.
    type LockAcc = (WaitStats, BTreeMap<String, u64>, Vec<String>);
    let mut locks: BTreeMap<(&str, u64), LockAcc> = BTreeMap::new();
    for w in profile.waits.iter().filter(|w| w.is_from(&catalog::KLOCK)) {
        let entry = locks.entry((w.operation.as_str(), w.object)).or_default();
        entry.0.merge(&w.stats);
        *entry.1.entry(lock_caller(profile, w)).or_insert(0) += w.stats.total_ns;
        let name = thread_label(profile, w.pid, w.tid);
        if !entry.2.contains(&name) {
            entry.2.push(name);
        }
    }
    if locks.is_empty() {
        return None;
    }
    let mut rows: Vec<KlockRow> = locks
        .into_iter()
        .map(|((kind, address), (stats, callers, threads))| KlockRow {
            lock_type: kind.to_string(),
            address: format!("{address:#x}"),
            count: stats.count,
            total_ns: stats.total_ns,
            max_ns: stats.max_ns,
            caller: callers
                .into_iter()
                .max_by_key(|(name, ns)| (*ns, Reverse(name.clone())))
                .map(|(name, _)| name)
                .unwrap_or_default(),
            threads,
        })
        .collect();
    rows.sort_by_key(|r| (Reverse(r.total_ns), Reverse(r.count)));
    rows.truncate(TOP);
    Some(rows)
}

impl Section for KernelLocks {
    const SOURCE: Source = Source::Probe(&catalog::KLOCK);

    fn build(profile: &Profile) -> Option<KernelLocks> {
        klock(profile).map(KernelLocks)
    }

    fn write_text(&self, out: &mut String, _style: StackStyle) {
        write_klock(&self.0, out);
    }

    fn write_html(&self, out: &mut String, heading: &str) {
        let _ = writeln!(out, "<{heading}>Kernel locks</{heading}>");
        let columns: [Column<'_, KlockRow>; 7] = [
            ("type", |k| Cell::Text(Some(&k.lock_type))),
            ("address", |k| Cell::Code(Some(&k.address))),
            ("waits", |k| Cell::Count(k.count)),
            ("total", |k| Cell::Ns(k.total_ns)),
            ("max", |k| Cell::Ns(k.max_ns)),
            ("caller", |k| Cell::Code(Some(&k.caller))),
            ("threads", |k| Cell::List(&k.threads)),
        ];
        table(out, "section-table", &columns, &self.0);
    }
}

fn write_klock(rows: &[KlockRow], out: &mut String) {
    let _ = writeln!(out);
    let _ = writeln!(out, "Kernel lock contention (klock)");
    let _ = writeln!(
        out,
        "  {:<20}{:>20}{:>8}{:>11}{:>11}  caller",
        "type", "lock", "waits", "total", "max"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<20}{:>20}{:>8}{:>11}{:>11}  {}",
            r.lock_type,
            r.address,
            r.count,
            format_ns(r.total_ns),
            format_ns(r.max_ns),
            crate::render::frames::shorten(&r.caller, 100 - 74)
        );
    }
}
