//! The report sections after the top groups: views of every wait (the contention apart from the
//! idle waits, where each thread's wall time went) and one section per probe that has its own
//! (its descriptor's `section`: offcpu, syscall, lifecycle, klock, holds, cpu_saturation,
//! on_cpu...). Each file's overview says what its section shows. A section appears only when the
//! profile has its data, in text and in JSON (`sections` in `docs/REPORT-JSON.md`), and as tables
//! of `lockscope html` when it draws them, in its own file from its typed fields (with the table
//! helpers of `html/tables.rs`).
//!
//! A section is one file of this directory, and nothing else: `NAME.rs` defines a type that
//! implements [`Section`] (its [`Source`], which gives its key and its place; how it is built from
//! a profile, `None` without its data; its text; its tables of `lockscope html`, none by
//! default) and declares it as `SECTION`. The crate's `build.rs` finds the files and writes their
//! `mod` lines and the list of their `SECTION`s, included here; [`Sections`] holds the ones a
//! profile has, in order, and writes them as text, JSON (a map of key to section, serialized from
//! the typed values) and HTML. The order is derived, not listed: the views of every wait by their
//! `rank`, then the probes' sections, then the CPU's (time on a CPU or waiting for one, which the
//! report keeps out of its waits), these two in catalog order of the descriptor whose `section`
//! is the key. That key is the descriptor's field (`on_cpu` for the cpu probe, `cpu_saturation`
//! for preempt, `holds` for mutex-hold: the JSON's keys, kept as documented), never respelled;
//! a probe's section file is named after its probe (`cpu.rs`, `preempt.rs`, `mutex_hold.rs`),
//! the views of every wait after what they show. `cargo fmt` does not see modules
//! that only `build.rs` declares: format a section with `rustfmt --edition 2021 FILE` (`.ci/run`
//! checks them so). This file also holds what the sections share (the site rows, thread labels,
//! the wait plumbing skipped when naming a site).

use crate::render::frames::{self, StackStyle};
use crate::render::units::{format_ns, format_percent};
use lockscope_probes::bottleneck::WokenBy;
use lockscope_probes::catalog::{self, ProbeDescriptor};
use lockscope_probes::{
    wait_roles, Profile, RoleBasis, RoleOf, StackId, ThreadTime, TimeClass, WaitKind, WaitRecord,
    WaitRole, WaitStats,
};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt::Write as _;

// `mod NAME;` for every section file, and `FILES`, their `SECTION`s (`build.rs`).
include!(concat!(env!("OUT_DIR"), "/sections.rs"));

/// Rows per ranked table.
const TOP: usize = 10;

/// A section of the report, in its own file of this directory (see the overview).
trait Section: Serialize + Sized + 'static {
    /// What it shows: its key and its place among the sections.
    const SOURCE: Source;

    /// The section of `profile`; `None` when the profile has no data for it.
    fn build(profile: &Profile) -> Option<Self>;

    /// Appends it as text, its stacks (if it shows any) per `style`.
    fn write_text(&self, out: &mut String, style: StackStyle);

    /// Appends it as tables of `lockscope html`, with `<heading>` titles; by default nothing (a
    /// section of the text and the JSON only).
    fn write_html(&self, _out: &mut String, _heading: &str) {}
}

/// What a section shows, which gives its key (in `sections` of the JSON) and its place.
#[derive(Clone, Copy)]
enum Source {
    /// A view of every wait, whatever probe recorded it: first, by `rank`.
    Waits { key: &'static str, rank: u8 },
    /// A probe's own records: after the views, in catalog order of `probe`, the descriptor whose
    /// `section` is its key.
    Probe(&'static ProbeDescriptor),
    /// Time on a CPU or waiting for one, which the report keeps out of its waits: last, in
    /// catalog order of `probe`, the descriptor whose `section` is its key.
    Cpu(&'static ProbeDescriptor),
}

impl Source {
    /// The section's key; a probe's section without a `section` in its descriptor fails to
    /// compile (this runs in the `SECTION` constants).
    const fn key(self) -> &'static str {
        match self {
            Source::Waits { key, .. } => key,
            Source::Probe(probe) | Source::Cpu(probe) => match probe.section {
                Some(key) => key,
                None => panic!("a probe's section names a descriptor without a `section`"),
            },
        }
    }

    /// Where the section goes: the views by rank, the probes' then the CPU's in catalog order.
    fn place(self) -> (u8, usize) {
        let in_catalog = |probe: &ProbeDescriptor| {
            catalog::CATALOG
                .iter()
                .position(|p| p.name == probe.name)
                .unwrap_or(usize::MAX)
        };
        match self {
            Source::Waits { rank, .. } => (0, usize::from(rank)),
            Source::Probe(probe) => (1, in_catalog(probe)),
            Source::Cpu(probe) => (2, in_catalog(probe)),
        }
    }
}

/// A section file's declaration (its `SECTION`): its source, its key and how to build it.
struct Entry {
    source: Source,
    key: &'static str,
    build: fn(&Profile) -> Option<Box<dyn Built>>,
}

impl Entry {
    const fn of<S: Section>() -> Entry {
        Entry {
            source: S::SOURCE,
            key: S::SOURCE.key(),
            build: build_boxed::<S>,
        }
    }
}

fn build_boxed<S: Section>(profile: &Profile) -> Option<Box<dyn Built>> {
    S::build(profile).map(|section| Box::new(section) as Box<dyn Built>)
}

/// A built section of any type, so that one list holds them in order.
trait Built: erased_serde::Serialize {
    fn write_text(&self, out: &mut String, style: StackStyle);
    fn write_html(&self, out: &mut String, heading: &str);
}

impl<S: Section> Built for S {
    fn write_text(&self, out: &mut String, style: StackStyle) {
        Section::write_text(self, out, style);
    }

    fn write_html(&self, out: &mut String, heading: &str) {
        Section::write_html(self, out, heading);
    }
}

erased_serde::serialize_trait_object!(Built);

/// Every section, in the report's order.
fn registry() -> Vec<&'static Entry> {
    let mut entries: Vec<&'static Entry> = FILES.iter().collect();
    entries.sort_by_key(|entry| entry.source.place());
    entries
}

/// Every section the profile has data for, in order, each under its key.
pub(crate) struct Sections(Vec<(&'static str, Box<dyn Built>)>);

impl Serialize for Sections {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, section) in &self.0 {
            map.serialize_entry(key, section)?;
        }
        map.end()
    }
}

impl Sections {
    /// The sections of `profile`; `None` when it has none (no waits at all).
    pub(crate) fn build(profile: &Profile) -> Option<Sections> {
        let built: Vec<(&'static str, Box<dyn Built>)> = registry()
            .into_iter()
            .filter_map(|entry| Some((entry.key, (entry.build)(profile)?)))
            .collect();
        (!built.is_empty()).then_some(Sections(built))
    }

    /// Appends the sections as text, their stacks shown per `style`.
    pub(crate) fn write_text(&self, out: &mut String, style: StackStyle) {
        for (_, section) in &self.0 {
            section.write_text(out, style);
        }
    }

    /// Appends the sections as tables of `lockscope html`, with `<heading>` titles.
    pub(crate) fn write_html(&self, out: &mut String, heading: &str) {
        for (_, section) in &self.0 {
            section.write_html(out, heading);
        }
    }
}

#[derive(Serialize)]
pub(crate) struct SiteRow {
    pub(crate) kind: WaitKind,
    pub(crate) probe: String,
    pub(crate) operation: String,
    pub(crate) count: u64,
    pub(crate) total_ns: u64,
    pub(crate) max_ns: u64,
    pub(crate) threads: Vec<String>,
    /// The innermost named frame of the site.
    pub(crate) frame: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) user_stack: Option<StackId>,
    /// How its role (contention, idle) was told, by its heaviest records (contention and idle
    /// rows only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) basis: Option<RoleBasis>,
    /// Nanoseconds of its waits by who ended their sleeps, where known (contention and idle rows
    /// only).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) woken_ns: BTreeMap<WokenBy, u64>,
    /// Who ended its sleeps in words, as the text's column says it ([`SiteRow::ended_by`];
    /// contention and idle rows only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ended_by: Option<String>,
}

impl SiteRow {
    /// Who ended the site's sleeps, in words for a column: `program 98%` (the largest share of
    /// the time whose waker is known), else `holder` for a lock told by its kind; `parked` for a
    /// thread parked most of the recording there (one sleep, or no waker known).
    fn ended_by(&self) -> String {
        let known: u64 = self.woken_ns.values().sum();
        match self
            .woken_ns
            .iter()
            .max_by_key(|&(by, ns)| (*ns, Reverse(*by)))
        {
            _ if self.basis == Some(RoleBasis::Parked) => "parked".to_string(),
            Some((by, ns)) if known > 0 => {
                format!("{} {}", by.name(), format_percent(*ns, known))
            }
            _ => match self.basis {
                Some(RoleBasis::Lock) => "holder".to_string(),
                Some(RoleBasis::Window) => "parked".to_string(),
                _ => "-".to_string(),
            },
        }
    }
}

/// A stack's functions leaf first, inlined ones (innermost first) before the frame they were
/// inlined into, each with its source file: what [`frames`] reads.
pub(crate) fn named_frames(stack: &lockscope_probes::Stack) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for frame in &stack.frames {
        for inlined in frame.inlined.iter().rev() {
            out.push((inlined.function.clone(), inlined.file.clone()));
        }
        out.push((frame.display_name(), frame.file.clone()));
    }
    out
}

/// The name of `record`'s site: its user stack's telling frame ([`frames::site_index`]: the
/// program's first frame past the wait plumbing, the runtime and the generic wait wrappers; else
/// its outermost frame that is not the runtime's), else its innermost kernel frame.
fn site_frame(profile: &Profile, record: &WaitRecord) -> String {
    let user = profile.stack(record.user_stack).and_then(|s| {
        let named = named_frames(s);
        let refs: Vec<frames::FrameRef<'_>> = named
            .iter()
            .map(|(name, file)| frames::FrameRef {
                name,
                file: file.as_deref(),
            })
            .collect();
        let at = frames::site_index(&refs)?;
        named.get(at).map(|(name, _)| name.clone())
    });
    let kernel = || {
        profile
            .stack(record.kernel_stack)
            .and_then(|s| s.frames.first())
            .map(|f| format!("{}_[k]", f.display_name()))
    };
    user.or_else(kernel)
        .unwrap_or_else(|| "[no stack]".to_string())
}

/// Why a profile does not say who ended its sleeps, and what would.
pub(crate) fn no_wakers_reason(profile: &Profile) -> String {
    let offcpu = profile.waits.iter().any(|w| w.is_from(&catalog::OFFCPU))
        || profile
            .metadata
            .probes
            .iter()
            .any(|p| p.probe == catalog::OFFCPU.name);
    let offcpu_name = catalog::OFFCPU.name;
    match (profile.metadata.backend.as_str(), offcpu) {
        ("dtrace", _) => "the DTrace backend does not record who ended a sleep".to_string(),
        (_, true) => {
            format!("not in this profile: its {offcpu_name} records predate who ended each sleep")
        }
        _ => format!(
            "not recorded: record with --probes {},{offcpu_name}",
            catalog::FUTEX.name
        ),
    }
}

fn thread_label(profile: &Profile, pid: u32, tid: u32) -> String {
    profile
        .thread_name(pid, tid)
        .map_or_else(|| format!("[{tid}]"), str::to_string)
}

/// Sites keyed by (probe, kind, operation, user stack).
type SiteKey = (String, WaitKind, String, Option<StackId>);

/// What [`site_rows`] gathers per site.
#[derive(Default)]
struct SiteAcc {
    stats: WaitStats,
    threads: Vec<String>,
    frame: String,
    basis_ns: BTreeMap<RoleBasis, u64>,
    woken_ns: BTreeMap<WokenBy, u64>,
}

/// `records` (each with its role, when it has one) merged per site, heaviest first, the first
/// `limit`.
fn site_rows<'a>(
    profile: &Profile,
    records: impl Iterator<Item = (&'a WaitRecord, Option<&'a RoleOf>)>,
    limit: usize,
) -> Vec<SiteRow> {
    let mut sites: BTreeMap<SiteKey, SiteAcc> = BTreeMap::new();
    for (w, role) in records {
        let key = (w.probe.clone(), w.kind, w.operation.clone(), w.user_stack);
        let entry = sites.entry(key).or_insert_with(|| SiteAcc {
            frame: site_frame(profile, w),
            ..SiteAcc::default()
        });
        entry.stats.merge(&w.stats);
        let name = thread_label(profile, w.pid, w.tid);
        if !entry.threads.contains(&name) {
            entry.threads.push(name);
        }
        if let Some(role) = role {
            *entry.basis_ns.entry(role.basis).or_default() += w.stats.total_ns;
            for (&by, &ns) in &role.woken_ns {
                *entry.woken_ns.entry(by).or_default() += ns;
            }
        }
    }
    let mut rows: Vec<SiteRow> = sites
        .into_iter()
        .map(|((probe, kind, operation, user_stack), acc)| SiteRow {
            kind,
            probe,
            operation,
            count: acc.stats.count,
            total_ns: acc.stats.total_ns,
            max_ns: acc.stats.max_ns,
            threads: acc.threads,
            frame: acc.frame,
            user_stack,
            basis: acc
                .basis_ns
                .iter()
                .max_by_key(|&(basis, ns)| (*ns, Reverse(*basis)))
                .map(|(basis, _)| *basis),
            woken_ns: acc.woken_ns,
            ended_by: None,
        })
        .map(|mut row| {
            if row.basis.is_some() {
                row.ended_by = Some(row.ended_by());
            }
            row
        })
        .collect();
    rows.sort_by_key(|r| (Reverse(r.total_ns), Reverse(r.count)));
    rows.truncate(limit);
    rows
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(max - 1).collect();
        cut.push('…');
        cut
    }
}

/// Splits `openat ENOENT` into the call and the errno.
fn call_and_errno(operation: &str) -> (&str, Option<&str>) {
    match operation.split_once(' ') {
        Some((call, errno)) => (call, Some(errno)),
        None => (operation, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every probe section's key is the `section` of its descriptor in the catalog, every
    /// `section` a descriptor names has its file here, a view's key is no probe's, and no two
    /// sections share a key.
    #[test]
    fn keys_are_the_catalogs_sections_and_unique() {
        let mut keys = BTreeSet::new();
        for entry in registry() {
            assert!(
                keys.insert(entry.key),
                "two sections have the key `{}`",
                entry.key
            );
            match entry.source {
                Source::Probe(probe) | Source::Cpu(probe) => assert!(
                    catalog::CATALOG
                        .iter()
                        .any(|p| p.name == probe.name && p.section == Some(entry.key)),
                    "section `{}` is not the `section` of catalog probe `{}`",
                    entry.key,
                    probe.name
                ),
                Source::Waits { .. } => assert!(
                    catalog::CATALOG
                        .iter()
                        .all(|p| p.section != Some(entry.key)),
                    "view `{}` is a probe's section: give it that probe's source",
                    entry.key
                ),
            }
        }
        for probe in catalog::CATALOG {
            if let Some(section) = probe.section {
                assert!(
                    keys.contains(section),
                    "probe `{}` names section `{section}`, which no file of report/sections/ has",
                    probe.name
                );
            }
        }
    }

    /// No two sections share a place, so that their order never falls back to their files'
    /// names, and it is the order of `sections` in docs/REPORT-JSON.md (the JSON's keys).
    #[test]
    fn order_is_the_documented_one() {
        let places: BTreeSet<(u8, usize)> = registry().iter().map(|e| e.source.place()).collect();
        assert_eq!(places.len(), FILES.len(), "two sections share a place");
        let doc = include_str!("../../../../docs/REPORT-JSON.md");
        let documented: Vec<&str> = doc
            .split("\n## Sections\n")
            .nth(1)
            .expect("docs/REPORT-JSON.md has a Sections heading")
            .lines()
            .skip_while(|line| !line.starts_with("| `"))
            .take_while(|line| line.starts_with("| `"))
            .filter_map(|line| line.split('`').nth(1))
            .collect();
        let keys: Vec<&str> = registry().iter().map(|e| e.key).collect();
        assert_eq!(keys, documented);
    }
}
