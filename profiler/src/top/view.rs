//! What `lockscope top` shows of a window, computed by the analysis every view shares: the
//! window's profile summarized as a sweep level is ([`crate::sweep::summarize_level`]: its top
//! sites and thread groups in threads waiting and shares of thread time, where the threads' time
//! went with the report's contention and idle, `report::Classified`), the trend of each site
//! over the window's intervals, and `lockscope why`'s first causes of the window
//! ([`crate::sweep::LevelWhy`]). Then the plain text block printed per interval when standard
//! output is not a terminal.

use lockscope::analysis::canonical::{canonical_site, thread_groups, SiteDepth};
use lockscope::render::frames::{cut_end, wrap};
use lockscope::render::sites::site_names;
use lockscope::render::units::{format_fraction, format_ns, share};
use lockscope::report::{waits_only, StackStyle};
use lockscope::sweep::{summarize_level, Breakdown, Share};
use lockscope_probes::{catalog, Profile, StackId, WaitKind};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// Width of the plain text (the house's 100 columns).
const TEXT_WIDTH: usize = 100;

/// What the rows are sorted by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// Wait time (threads waiting on average): the default.
    Time,
    /// Number of waits.
    Count,
    /// The change over the window: last interval less the first.
    Trend,
}

impl SortBy {
    /// The next order (the `s` key).
    pub fn next(self) -> SortBy {
        match self {
            SortBy::Time => SortBy::Count,
            SortBy::Count => SortBy::Trend,
            SortBy::Trend => SortBy::Time,
        }
    }

    /// Its name in the header.
    pub fn name(self) -> &'static str {
        match self {
            SortBy::Time => "time",
            SortBy::Count => "count",
            SortBy::Trend => "trend",
        }
    }
}

/// One row of the sites or threads table.
#[derive(Clone, Debug)]
pub struct Row {
    /// The site's readable name (telling frame first, no kind) or the thread group.
    pub name: String,
    /// The site's wait kind (`mutex`); empty for a thread group.
    pub kind: String,
    /// Waits in the window.
    pub count: u64,
    /// Threads waiting on average over the window.
    pub avg_threads: f64,
    /// Share of the threads' time (with the offcpu probe's per-thread times).
    pub share_of_thread_time: Option<f64>,
    /// Threads waiting on average in each interval of the window, oldest first.
    pub trend: Vec<f64>,
}

impl Row {
    /// The last interval's threads waiting less the first's.
    fn change(&self) -> f64 {
        match (self.trend.first(), self.trend.last()) {
            (Some(first), Some(last)) => last - first,
            _ => 0.0,
        }
    }
}

/// One part of the threads' time split.
#[derive(Clone, Debug)]
pub struct Part {
    /// `on CPU`, `run queue`, `contention`, `idle`, `other waits`.
    pub name: &'static str,
    /// Its share of the threads' time.
    pub share: f64,
    /// Threads in it on average.
    pub avg_threads: f64,
}

/// The wait time of every site and thread group in one interval (between two snapshots), kept
/// for the trend.
#[derive(Clone, Debug, Default)]
pub struct IntervalTotals {
    /// The interval's length.
    pub wall_ns: u64,
    /// Wait time per canonical site.
    pub sites: BTreeMap<String, u64>,
    /// Wait time per thread group.
    pub threads: BTreeMap<String, u64>,
}

/// The canonical site of each (user stack, kind), as [`canonical_sites`] names it
/// ([`canonical_site`] reads nothing else of a record), remembered from refresh to refresh (a
/// recording's stack ids stay the same): each interval's totals name a site once, not once per
/// record and second.
#[derive(Default)]
pub struct SiteNames {
    by_stack: HashMap<(Option<StackId>, WaitKind), String, ahash::RandomState>,
}

impl SiteNames {
    /// Wait time per canonical site of `profile`'s waits, as [`canonical_sites`] sums it.
    fn totals(&mut self, profile: &Profile) -> BTreeMap<String, u64> {
        let mut totals: BTreeMap<String, u64> = BTreeMap::new();
        for record in profile.counted_waits() {
            let site = self
                .by_stack
                .entry((record.user_stack, record.kind))
                .or_insert_with(|| canonical_site(profile, record, SiteDepth::Full).join(";"));
            match totals.get_mut(site.as_str()) {
                Some(ns) => *ns = ns.saturating_add(record.stats.total_ns),
                None => {
                    totals.insert(site.clone(), record.stats.total_ns);
                }
            }
        }
        totals
    }
}

impl IntervalTotals {
    /// The totals of `interval`, the profile of one interval, its sites named with `names`.
    pub fn of(interval: &Profile, names: &mut SiteNames) -> IntervalTotals {
        let totals = |by: BTreeMap<String, lockscope_probes::WaitStats>| {
            by.into_iter().map(|(k, s)| (k, s.total_ns)).collect()
        };
        // The thread groups read no stack but those of the `klock` probe's threads (the sleeps
        // under kernel locks it holds): without them, they are counted on a copy without the
        // recording's stacks, which `waits_only` would copy every second.
        let threads = if interval.waits.iter().any(|w| w.is_from(&catalog::KLOCK)) {
            thread_groups(&waits_only(interval))
        } else {
            let bare = Profile {
                metadata: interval.metadata.clone(),
                threads: interval.threads.clone(),
                waits: interval.waits.clone(),
                ..Profile::default()
            };
            thread_groups(&waits_only(&bare))
        };
        IntervalTotals {
            wall_ns: interval.metadata.duration_ns,
            sites: names.totals(interval),
            threads: totals(threads),
        }
    }
}

/// What one refresh shows.
#[derive(Clone, Debug, Default)]
pub struct View {
    /// The window's length, and the recording's so far.
    pub window_ns: u64,
    /// Time since the attach.
    pub elapsed_ns: u64,
    /// Waits in the window (as the report counts them) and their time.
    pub waits: u64,
    /// Their time.
    pub wait_ns: u64,
    /// Events lost so far (every number undercounts when non-zero).
    pub lost: u64,
    /// Top wait sites, sorted.
    pub sites: Vec<Row>,
    /// Thread groups, sorted.
    pub threads: Vec<Row>,
    /// Where the threads' time went (the offcpu probe; empty without it).
    pub split: Vec<Part>,
    /// The threads' time, summed, and threads living on average.
    pub thread_avg: f64,
    /// `lockscope why`'s first causes of the window, in words (with the bottleneck probes, and
    /// when asked for: see `with_causes`).
    pub causes: Option<Vec<String>>,
    /// The window had its bottleneck analysis: `causes` says what it has.
    pub with_causes: bool,
    /// The analysed thread groups of the causes.
    pub cause_groups: Vec<String>,
}

/// Splits a site's readable name into its frames and its kind (the last word).
fn name_and_kind(name: &str) -> (String, String) {
    match name.rsplit_once(' ') {
        Some((frames, kind)) if kind.starts_with('[') && kind.ends_with(']') => (
            frames.to_string(),
            kind.trim_matches(['[', ']']).to_string(),
        ),
        _ => (name.to_string(), String::new()),
    }
}

/// The rows of `shares` with their trend over `intervals` (per interval: `by_interval` gives
/// each row's wait time in it), sorted by `sort`.
fn rows(
    shares: &[Share],
    names: Vec<String>,
    intervals: &[(u64, &BTreeMap<String, u64>)],
    sort: SortBy,
) -> Vec<Row> {
    let mut rows: Vec<Row> = shares
        .iter()
        .zip(names)
        .map(|(s, name)| {
            let (name, kind) = name_and_kind(&name);
            Row {
                name,
                kind,
                count: s.count,
                avg_threads: s.avg_threads,
                share_of_thread_time: s.share_of_thread_time,
                trend: intervals
                    .iter()
                    .map(|(wall, by)| share(by.get(&s.name).copied().unwrap_or(0), *wall))
                    .collect(),
            }
        })
        .collect();
    match sort {
        SortBy::Time => {}
        SortBy::Count => rows.sort_by_key(|r| std::cmp::Reverse(r.count)),
        SortBy::Trend => rows.sort_by(|a, b| b.change().total_cmp(&a.change())),
    }
    rows
}

/// The time split of a breakdown: on a CPU, the run queue, and the waits as the report tells
/// them (contention, idle, the rest) where who ended the sleeps is known, else asleep.
fn split(breakdown: &Breakdown) -> Vec<Part> {
    let class = |name: &str| breakdown.class(name);
    let part = |name: &'static str, c: Option<(f64, f64)>| {
        c.map(|(share, avg_threads)| Part {
            name,
            share,
            avg_threads,
        })
    };
    let mut parts = Vec::new();
    parts.extend(part(
        "on CPU",
        class("on-cpu").map(|c| (c.share_of_thread_time, c.avg_threads)),
    ));
    parts.extend(part(
        "run queue",
        class("run-queue").map(|c| (c.share_of_thread_time, c.avg_threads)),
    ));
    if breakdown.roles.is_empty() {
        let asleep: f64 = breakdown
            .classes
            .iter()
            .filter(|c| c.name != "on-cpu" && c.name != "run-queue")
            .map(|c| c.share_of_thread_time)
            .sum();
        parts.push(Part {
            name: "asleep",
            share: asleep,
            avg_threads: asleep * breakdown.avg_threads,
        });
    } else {
        for role in &breakdown.roles {
            let name = match role.name.as_str() {
                "contention" => "contention",
                "idle" => "idle",
                _ => continue,
            };
            parts.push(Part {
                name,
                share: role.share_of_thread_time,
                avg_threads: role.avg_threads,
            });
        }
        let used: f64 = parts.iter().map(|p| p.share).sum();
        let rest = (1.0 - used).max(0.0);
        parts.push(Part {
            name: "other",
            share: rest,
            avg_threads: rest * breakdown.avg_threads,
        });
    }
    parts
}

impl View {
    /// The view of `window` (what the last window recorded, its causes too), `intervals` (the
    /// window's intervals, oldest first, for the trend) and `so_far` (the whole recording's
    /// metadata: its length, its losses), its rows sorted by `sort`, site names fitting
    /// `name_width` columns.
    pub fn build(
        window: &Profile,
        intervals: &[IntervalTotals],
        so_far: &lockscope_probes::Metadata,
        sort: SortBy,
        name_width: usize,
    ) -> View {
        let level = summarize_level(0, 0.0, window, ("", ""));
        let site_intervals: Vec<_> = intervals.iter().map(|i| (i.wall_ns, &i.sites)).collect();
        let thread_intervals: Vec<_> = intervals.iter().map(|i| (i.wall_ns, &i.threads)).collect();
        let site_keys: Vec<&str> = level.top_sites.iter().map(|s| s.name.as_str()).collect();
        let names = site_names(&site_keys, StackStyle::Readable, name_width);
        let sites = rows(&level.top_sites, names, &site_intervals, sort);
        let group_names = level.threads.iter().map(|s| s.name.clone()).collect();
        let threads = rows(&level.threads, group_names, &thread_intervals, sort);
        // `why` over the window, as the level has it (run once: it is most of a refresh).
        let why = level.why;
        View {
            window_ns: window.metadata.duration_ns,
            elapsed_ns: so_far.duration_ns,
            waits: level.waits,
            wait_ns: level.wait_ns,
            lost: so_far.losses.lost_events(),
            sites,
            threads,
            split: level.breakdown.as_ref().map(split).unwrap_or_default(),
            thread_avg: level.breakdown.as_ref().map_or(0.0, |b| b.avg_threads),
            causes: why.as_ref().map(|w| {
                w.causes
                    .iter()
                    .map(|c| format!("{} {}", format_fraction(c.share), c.words()))
                    .collect()
            }),
            cause_groups: why.map(|w| w.groups).unwrap_or_default(),
            with_causes: window.bottleneck.is_some(),
        }
    }

    /// The header line: the window, the waits, the losses.
    pub fn header(&self) -> String {
        let mut line = format!(
            "window {} of {}: {} waits, {}",
            format_ns(self.window_ns),
            format_ns(self.elapsed_ns),
            self.waits,
            format_ns(self.wait_ns)
        );
        if self.lost > 0 {
            let _ = write!(line, "; {} events lost (numbers undercount)", self.lost);
        }
        line
    }

    /// The time split in one line (`on CPU 12.0% (1.2 thr), ...`), or why there is none.
    pub fn split_line(&self) -> String {
        if self.split.is_empty() {
            return "no time split: record with --probes futex,offcpu (or bottleneck)".into();
        }
        let parts: Vec<String> = self
            .split
            .iter()
            .map(|p| {
                format!(
                    "{} {} ({:.1})",
                    p.name,
                    format_fraction(p.share),
                    p.avg_threads
                )
            })
            .collect();
        format!(
            "threads' time ({:.1} threads): {}",
            self.thread_avg,
            parts.join(", ")
        )
    }

    /// The plain text block of one interval (standard output not a terminal).
    pub fn text_block(&self, at: &str, top: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{}",
            wrap(
                &format!("lockscope top {at}: {}", self.header()),
                "",
                "  ",
                TEXT_WIDTH
            )
        );
        let _ = writeln!(
            out,
            "{}",
            wrap(&self.split_line(), "  ", "    ", TEXT_WIDTH)
        );
        let _ = writeln!(
            out,
            "  {:<54}  {:<12} {:>7} {:>7} {:>6}  trend",
            "site", "kind", "waits", "threads", "share"
        );
        for row in self.sites.iter().take(top) {
            let _ = writeln!(
                out,
                "  {:<54}  {:<12} {:>7} {:>7.2} {:>6}  {}",
                cut_end(&row.name, 54),
                row.kind,
                row.count,
                row.avg_threads,
                row.share_of_thread_time
                    .map_or_else(|| "-".to_string(), format_fraction),
                trend_text(&row.trend)
            );
        }
        if self.sites.is_empty() {
            let _ = writeln!(out, "  no waits in the window");
        }
        if let Some(causes) = &self.causes {
            let of = format!(
                "causes in the window (lockscope why, of {}):",
                self.cause_groups.join(", ")
            );
            let _ = writeln!(out, "{}", wrap(&of, "  ", "    ", TEXT_WIDTH));
            for cause in causes.iter().take(3) {
                let _ = writeln!(out, "    {}", cut_end(cause, TEXT_WIDTH - 4));
            }
        }
        out
    }
}

/// A trend as a sparkline of eighths (`▁▂▃▅▇`), scaled to its largest value.
pub fn trend_text(trend: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = trend.iter().copied().fold(0.0f64, f64::max);
    trend
        .iter()
        .map(|&v| {
            if max <= 0.0 {
                BARS[0]
            } else {
                let i = ((v / max) * 7.0).round() as usize;
                BARS[i.min(7)]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A site's readable name gives its frames and its bracketed kind apart.
    #[test]
    fn names_and_kinds() {
        assert_eq!(
            name_and_kind("take_order_lock <- place_order [mutex]"),
            ("take_order_lock <- place_order".into(), "mutex".into())
        );
        assert_eq!(
            name_and_kind("worker-*"),
            ("worker-*".into(), String::new())
        );
    }

    /// An interval's thread groups, counted on a copy without the recording's stacks, are those
    /// of its waits as the report counts them.
    #[test]
    fn interval_thread_groups_are_the_report_s() {
        let profile = crate::top::demo_profile();
        assert!(!profile.waits.iter().any(|w| w.is_from(&catalog::KLOCK)));
        let expected: BTreeMap<String, u64> = thread_groups(&waits_only(&profile))
            .into_iter()
            .map(|(group, stats)| (group, stats.total_ns))
            .collect();
        assert!(expected.len() > 1, "{expected:?}");
        assert_eq!(
            IntervalTotals::of(&profile, &mut SiteNames::default()).threads,
            expected
        );
    }

    /// An interval's sites, named from memory on a later refresh too, are `canonical_sites`'
    /// with their wait time.
    #[test]
    fn interval_sites_are_the_canonical_sites() {
        let profile = crate::top::demo_profile();
        let expected: BTreeMap<String, u64> =
            lockscope::analysis::canonical::canonical_sites(&profile)
                .into_iter()
                .map(|(site, stats)| (site, stats.total_ns))
                .collect();
        assert!(expected.len() > 1, "{expected:?}");
        let mut names = SiteNames::default();
        for _ in 0..2 {
            assert_eq!(IntervalTotals::of(&profile, &mut names).sites, expected);
        }
    }

    /// The sparkline scales to its largest value and shows nothing as the lowest bar.
    #[test]
    fn trends() {
        assert_eq!(trend_text(&[0.0, 1.0, 2.0]), "▁▅█");
        assert_eq!(trend_text(&[0.0, 0.0]), "▁▁");
    }
}
