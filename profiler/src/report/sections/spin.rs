//! The spin section: the `cpu` probe's samples of threads spinning in a recognised spin primitive
//! (`pthread_spin_lock`: [`spin_samples`] tells them, for every view) while another thread
//! holds the lock. Their CPU time is contention on a CPU:
//! a wait on the lock's holder, not work; it stays CPU time in the On CPU section and in no
//! count of waits (a sample is no wait), and is summed beside the waits' roles
//! ([`crate::report::Classified`]'s `spin_ns`).

use super::*;
use crate::render::tables::{table, Cell, Column};
use lockscope_probes::sched::{spin_samples, SpinPrimitive};

/// This file's section, for `build.rs`'s list.
pub(super) const SECTION: Entry = Entry::of::<Spin>();

#[derive(Serialize)]
pub(super) struct Spin {
    /// Samples spinning, all sites.
    samples: u64,
    /// Their CPU time, nanoseconds.
    cpu_ns: u64,
    /// Sites by primitive and site frame, most CPU time first.
    sites: Vec<SpinSite>,
}

#[derive(Serialize)]
pub(super) struct SpinSite {
    primitive: SpinPrimitive,
    samples: u64,
    cpu_ns: u64,
    /// The program's first frame above the lock's library (as the contention rows name sites).
    frame: String,
    threads: Vec<String>,
}

/// What the section says of each primitive's holder: what the recording can tell of it.
fn holder_note(primitive: SpinPrimitive) -> &'static str {
    match primitive {
        SpinPrimitive::SpinLock => {
            "spin-lock: pthread_spin_lock never enters the kernel, so no probe records who holds \
             the lock; `lockscope why` counts the time as a wait on its holder (a `spin` cause)"
        }
    }
}

/// The site column's width: the telling frame, cut to fit.
const SITE_WIDTH: usize = 30;

impl Section for Spin {
    const SOURCE: Source = Source::Waits {
        key: "spin",
        rank: 1,
    };

    fn build(profile: &Profile) -> Option<Spin> {
        let mut sites: BTreeMap<(SpinPrimitive, String), SpinSite> = BTreeMap::new();
        for (w, primitive) in profile.waits.iter().zip(spin_samples(profile)) {
            let Some(primitive) = primitive else {
                continue;
            };
            let frame = site_frame(profile, w);
            let site = sites
                .entry((primitive, frame.clone()))
                .or_insert_with(|| SpinSite {
                    primitive,
                    samples: 0,
                    cpu_ns: 0,
                    frame,
                    threads: Vec::new(),
                });
            site.samples += w.stats.count;
            site.cpu_ns = site.cpu_ns.saturating_add(w.stats.total_ns);
            let name = thread_label(profile, w.pid, w.tid);
            if !site.threads.contains(&name) {
                site.threads.push(name);
            }
        }
        let mut sites: Vec<SpinSite> = sites.into_values().collect();
        if sites.is_empty() {
            return None;
        }
        sites.sort_by_key(|s| (Reverse(s.cpu_ns), Reverse(s.samples)));
        Some(Spin {
            samples: sites.iter().map(|s| s.samples).sum(),
            cpu_ns: sites.iter().map(|s| s.cpu_ns).sum(),
            sites: sites.into_iter().take(TOP).collect(),
        })
    }

    fn write_text(&self, out: &mut String, style: StackStyle) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Spinning on locks (cpu probe): {} of CPU time in {} samples on a CPU waiting for a",
            format_ns(self.cpu_ns),
            self.samples
        );
        let _ = writeln!(
            out,
            "  lock another thread held: contention, not work (CPU time, in no count of waits)"
        );
        let _ = writeln!(
            out,
            "  {:<12}{:>8}{:>9}  {:<SITE_WIDTH$} threads",
            "primitive", "samples", "CPU", "site"
        );
        let room = frames::TEXT_WIDTH.saturating_sub(2 + 12 + 8 + 9 + 2 + SITE_WIDTH + 1);
        for s in &self.sites {
            let (site, threads) = match style {
                StackStyle::Readable => (
                    frames::shorten(&s.frame, SITE_WIDTH - 1),
                    frames::thread_list(&s.threads, room),
                ),
                StackStyle::Full => (s.frame.clone(), s.threads.join(", ")),
            };
            let _ = writeln!(
                out,
                "  {:<12}{:>8}{:>9}  {:<SITE_WIDTH$} {threads}",
                s.primitive.name(),
                s.samples,
                format_ns(s.cpu_ns),
                site
            );
        }
        let mut primitives: Vec<SpinPrimitive> = self.sites.iter().map(|s| s.primitive).collect();
        primitives.sort();
        primitives.dedup();
        for p in primitives {
            let _ = writeln!(
                out,
                "{}",
                frames::wrap(holder_note(p), "  ", "    ", frames::TEXT_WIDTH)
            );
        }
    }

    fn write_html(&self, out: &mut String, heading: &str) {
        let columns: [Column<'_, SpinSite>; 5] = [
            ("primitive", |s| Cell::Text(Some(s.primitive.name()))),
            (
                "site (the program's first frame past the lock's library)",
                |s| Cell::Code(Some(&s.frame)),
            ),
            ("samples", |s| Cell::Count(s.samples)),
            ("CPU time", |s| Cell::Ns(s.cpu_ns)),
            ("threads", |s| Cell::List(&s.threads)),
        ];
        let _ = writeln!(
            out,
            "<{heading}>Spinning on locks: on a CPU waiting for a lock another thread held</{heading}>"
        );
        let _ = writeln!(
            out,
            "<p class=\"muted\">{} of CPU time in {} samples of the cpu probe: contention, not work (CPU time, in no count of waits).</p>",
            format_ns(self.cpu_ns),
            self.samples
        );
        table(out, "section-table", &columns, &self.sites);
        let mut primitives: Vec<SpinPrimitive> = self.sites.iter().map(|s| s.primitive).collect();
        primitives.sort();
        primitives.dedup();
        for p in primitives {
            let _ = writeln!(
                out,
                "<p class=\"note\">{}</p>",
                crate::render::svg::xml_escape(holder_note(p))
            );
        }
    }
}
