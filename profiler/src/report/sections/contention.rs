//! The contention section: mutex, rwlock and kernel-lock waits ranked on their own, the idle
//! waits (a pool parked waiting for work) listed apart.

use super::*;

#[derive(Serialize)]
pub(super) struct Contention {
    /// Contended sites: kind, operation and user stack, heaviest first.
    sites: Vec<SiteRow>,
    /// Idle sites: a thread parked most of its window there.
    idle: Vec<SiteRow>,
}

pub(super) fn contention(profile: &Profile) -> Option<Contention> {
    let idle = idle_waits(profile);
    // `mutex-hold` records are hold times, not waits.
    let contended = profile.waits.iter().enumerate().filter(|(i, w)| {
        !idle.contains(i)
            && w.probe != "mutex-hold"
            && matches!(
                w.kind,
                WaitKind::Mutex
                    | WaitKind::RwlockRead
                    | WaitKind::RwlockWrite
                    | WaitKind::KernelLock
            )
    });
    let sites = site_rows(profile, contended.map(|(_, w)| w), TOP);
    let idle_rows = site_rows(
        profile,
        idle.iter().filter_map(|&i| profile.waits.get(i)),
        TOP,
    );
    (!sites.is_empty() || !idle_rows.is_empty()).then_some(Contention {
        sites,
        idle: idle_rows,
    })
}

impl Contention {
    pub(super) fn write_text(&self, out: &mut String) {
        let _ = writeln!(out);
        let _ = writeln!(out, "Lock contention (idle waits excluded)");
        if self.sites.is_empty() {
            let _ = writeln!(out, "  (no mutex, rwlock or kernel-lock waits)");
        } else {
            let _ = writeln!(
                out,
                "  {:<13}{:>8}{:>11}{:>11}  {:<28} threads",
                "kind", "waits", "total", "max", "site"
            );
            for r in &self.sites {
                let _ = writeln!(
                    out,
                    "  {:<13}{:>8}{:>11}{:>11}  {:<28} {}",
                    r.kind.name(),
                    r.count,
                    format_ns(r.total_ns),
                    format_ns(r.max_ns),
                    r.frame,
                    r.threads.join(", ")
                );
            }
        }
        if !self.idle.is_empty() {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "Idle waits (a thread parked most of its window in one site: waiting for work)"
            );
            for r in &self.idle {
                let _ = writeln!(
                    out,
                    "  {:<13}{:>8}{:>11}  {:<28} {} ({})",
                    r.kind.name(),
                    r.count,
                    format_ns(r.total_ns),
                    r.frame,
                    r.threads.join(", "),
                    r.operation
                );
            }
        }
    }
}
