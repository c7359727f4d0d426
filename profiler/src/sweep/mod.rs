//! `lockscope sweep`: throughput and waits of a server across concurrency levels, and where it
//! stops scaling.
//!
//! For each level `c`, [`run_sweep`] has the caller start recording the server (a
//! [`LevelRecorder`]: the `lockscope` binary starts a recording session attached to the server and
//! returns once its probes are attached), starts the load command (`{c}` replaced by the level)
//! with `sh -c`, waits for the recording and the load to finish, and parses the load tool's
//! throughput from its output ([`Throughput`]: built-in parsers for sysbench, ab and wrk, or a regular expression). The result is a [`Sweep`], written
//! as `sweep.json` (schema in `docs/SWEEP.md`) beside one profile (`.lsp`, and `.pb.gz`: pprof
//! labelled with the level's concurrency) and one load output per level:
//! throughput per level, scaling against the first level (the seed's "Scaling (Concurrency
//! one=100%)" column), wait time per kind, thread group and canonical site ([`crate::analysis::canonical`]), where
//! the threads' time went ([`Breakdown`], from the `offcpu` probe), the knee ([`find_knee`]) and
//! one sentence for a writeup ([`finding`]).
//!
//! Wait time is given in units a reader can picture, never as a percentage of one clock: as
//! **average threads waiting** (wait time over wall time: 31.2 is 31.2 threads waiting all the
//! time) and, when the level has a breakdown, as a **share of thread time** (wait time over the sum
//! of the threads' wall times, 0 to 100%).

use crate::analysis::canonical::{canonical_sites, thread_groups};
use crate::analysis::fold::NO_USER_STACK;
use crate::render::units::{format_fraction, format_threads, share};
use anyhow::{bail, Context};
use lockscope_probes::{Profile, TimeClass, WaitStats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Version of the sweep file schema (`docs/SWEEP.md`); bumped on incompatible changes. Version 2
/// renamed `share_of_wall` to `avg_threads` (the same number, named for what it is) and added
/// shares of thread time and the per-level breakdown.
pub const SWEEP_VERSION: u32 = 2;

/// Oldest sweep file version [`read_sweep`] reads: version 1 files are upgraded as they are read
/// (no breakdown, no shares of thread time, the finding rewritten in today's units).
pub const OLDEST_SWEEP_VERSION: u32 = 1;

/// File name of the sweep file inside a sweep directory.
pub const SWEEP_FILE: &str = "sweep.json";

/// A level whose throughput gains less than this over the previous one has stopped rising.
pub const KNEE_MIN_GAIN: f64 = 0.05;

/// Wait sites and thread groups kept per level, largest first.
const TOP_PER_LEVEL: usize = 10;

/// How the throughput is read from the load tool's output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Throughput {
    /// Try sysbench, ab and wrk in turn (the default).
    #[default]
    Auto,
    /// sysbench: `transactions: N (X per sec.)`.
    Sysbench,
    /// ApacheBench: `Requests per second: X [#/sec] (mean)`.
    Ab,
    /// wrk: `Requests/sec: X`.
    Wrk,
    /// A regular expression whose first capture group is the throughput.
    Regex(String),
}

/// A throughput read from a load tool's output.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedThroughput {
    /// Operations per second.
    pub value: f64,
    /// What was counted (`transactions/s`, `requests/s`, `ops/s`).
    pub unit: String,
    /// The parser that found it (`sysbench`, `ab`, `wrk`, `regex`).
    pub parser: String,
}

fn number_after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let line = text.lines().find(|l| l.trim_start().starts_with(marker))?;
    let rest = &line[line.find(marker)? + marker.len()..];
    rest.split_whitespace().next()
}

fn parse_sysbench(text: &str) -> Option<ParsedThroughput> {
    // `    transactions:                        1439   (477.55 per sec.)`
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("transactions:"))?;
    let open = line.find('(')?;
    let value = line[open + 1..].split_whitespace().next()?.parse().ok()?;
    Some(ParsedThroughput {
        value,
        unit: "transactions/s".to_string(),
        parser: "sysbench".to_string(),
    })
}

fn parse_ab(text: &str) -> Option<ParsedThroughput> {
    let value = number_after(text, "Requests per second:")?.parse().ok()?;
    Some(ParsedThroughput {
        value,
        unit: "requests/s".to_string(),
        parser: "ab".to_string(),
    })
}

fn parse_wrk(text: &str) -> Option<ParsedThroughput> {
    let value = number_after(text, "Requests/sec:")?.parse().ok()?;
    Some(ParsedThroughput {
        value,
        unit: "requests/s".to_string(),
        parser: "wrk".to_string(),
    })
}

impl Throughput {
    /// Name on the command line and in the sweep file.
    pub fn name(&self) -> &str {
        match self {
            Throughput::Auto => "auto",
            Throughput::Sysbench => "sysbench",
            Throughput::Ab => "ab",
            Throughput::Wrk => "wrk",
            Throughput::Regex(_) => "regex",
        }
    }

    /// Checks a regular expression: it must compile and have a capture group.
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Throughput::Regex(pattern) = self {
            let re = regex::Regex::new(pattern)
                .with_context(|| format!("invalid --throughput-regex `{pattern}`"))?;
            if re.captures_len() < 2 {
                bail!("--throughput-regex `{pattern}` has no capture group for the number");
            }
        }
        Ok(())
    }

    /// Reads the throughput from a load tool's output.
    pub fn parse(&self, output: &str) -> anyhow::Result<ParsedThroughput> {
        let found = match self {
            Throughput::Auto => parse_sysbench(output)
                .or_else(|| parse_ab(output))
                .or_else(|| parse_wrk(output)),
            Throughput::Sysbench => parse_sysbench(output),
            Throughput::Ab => parse_ab(output),
            Throughput::Wrk => parse_wrk(output),
            Throughput::Regex(pattern) => {
                let re = regex::Regex::new(pattern)
                    .with_context(|| format!("invalid --throughput-regex `{pattern}`"))?;
                let captured = re
                    .captures(output)
                    .and_then(|c| c.get(1))
                    .map(|m| m.as_str().to_string());
                match captured {
                    Some(text) => Some(ParsedThroughput {
                        value: text.trim().parse().with_context(|| {
                            format!("--throughput-regex captured `{text}`, which is not a number")
                        })?,
                        unit: "ops/s".to_string(),
                        parser: "regex".to_string(),
                    }),
                    None => None,
                }
            }
        };
        found.with_context(|| {
            format!(
                "no throughput found in the load output by the {} parser",
                self.name()
            )
        })
    }
}

/// Wait time of one kind, thread group or site at one level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// Kind (`mutex`), thread group (`worker-*`) or canonical site (`f;g;[kernel wait];[mutex]`).
    pub name: String,
    /// Number of waits.
    pub count: u64,
    /// Total wait time, nanoseconds.
    pub total_ns: u64,
    /// `total_ns` over the recording's wall time: how many threads waited on average (1.0 is one
    /// thread waiting all the time). Called `share_of_wall` in sweep files of version 1.
    #[serde(alias = "share_of_wall")]
    pub avg_threads: f64,
    /// `total_ns` over the level's thread time ([`Breakdown::thread_ns`]), 0 to 1; `None` when the
    /// level has no breakdown (recorded without the `offcpu` probe).
    #[serde(default)]
    pub share_of_thread_time: Option<f64>,
}

/// The time all threads together spent in one [`TimeClass`] at one level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassTime {
    /// The class (`on-cpu`, `run-queue`, `lock`, `condvar`, `futex`, `poll`, `io`, `sleep`,
    /// `other`).
    pub name: String,
    /// Time in the class summed over the threads, nanoseconds.
    pub total_ns: u64,
    /// `total_ns` over the recording's wall time: how many threads were in the class on average.
    pub avg_threads: f64,
    /// `total_ns` over the level's thread time, 0 to 1.
    pub share_of_thread_time: f64,
}

/// Where the threads' time went at one level: the per-thread wall-time breakdown of the `offcpu`
/// probe ([`lockscope_probes::ThreadTime`]), summed over the threads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Threads with a breakdown.
    pub threads: u64,
    /// Thread time: the threads' wall times (each the part of the recording it lived through)
    /// summed, nanoseconds.
    pub thread_ns: u64,
    /// `thread_ns` over the recording's wall time: how many threads lived on average.
    pub avg_threads: f64,
    /// Every class, in [`TimeClass::ALL`] order (zeros included: they were measured).
    pub classes: Vec<ClassTime>,
}

impl Breakdown {
    /// The breakdown of `profile`'s thread times, or `None` when it has none (no `offcpu` probe).
    pub fn of(profile: &Profile) -> Option<Breakdown> {
        if profile.thread_times.is_empty() {
            return None;
        }
        let wall_ns = profile.metadata.duration_ns;
        let thread_ns = profile
            .thread_times
            .iter()
            .fold(0u64, |a, t| a.saturating_add(t.wall_ns));
        let classes = TimeClass::ALL
            .iter()
            .map(|&class| {
                let total_ns = profile
                    .thread_times
                    .iter()
                    .fold(0u64, |a, t| a.saturating_add(t.ns(class)));
                ClassTime {
                    name: class.name().to_string(),
                    total_ns,
                    avg_threads: share(total_ns, wall_ns),
                    share_of_thread_time: share(total_ns, thread_ns),
                }
            })
            .collect();
        Some(Breakdown {
            threads: profile.thread_times.len() as u64,
            thread_ns,
            avg_threads: share(thread_ns, wall_ns),
            classes,
        })
    }

    /// The class named `name`.
    pub fn class(&self, name: &str) -> Option<&ClassTime> {
        self.classes.iter().find(|c| c.name == name)
    }
}

/// One concurrency level of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// The concurrency (`{c}` in the load command).
    pub concurrency: u32,
    /// Operations per second the load tool reported.
    pub throughput: f64,
    /// `throughput` over the first level's (1.0 = 100%).
    pub scaling: f64,
    /// The profile recorded at this level, relative to the sweep file.
    pub profile: String,
    /// The load command's standard output, relative to the sweep file.
    pub load_output: String,
    /// Wall time of the recording, nanoseconds.
    pub wall_ns: u64,
    /// Waits recorded.
    pub waits: u64,
    /// Total wait time recorded, nanoseconds.
    pub wait_ns: u64,
    /// Waits lost while recording (every share undercounts when non-zero).
    pub lost_events: u64,
    /// Wait time per kind, largest first.
    pub kinds: Vec<Share>,
    /// Wait time per thread group, largest first (at most 10).
    pub threads: Vec<Share>,
    /// Wait time per canonical site, largest first (at most 10).
    pub top_sites: Vec<Share>,
    /// Where the threads' time went; `None` when the level was recorded without the `offcpu`
    /// probe (and in sweep files of version 1).
    #[serde(default)]
    pub breakdown: Option<Breakdown>,
}

/// Where throughput stops rising.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// The first level that no later level beats by more than 5%: where throughput stops rising.
    pub concurrency: u32,
    /// Its throughput.
    pub throughput: f64,
    /// Its scaling against the first level.
    pub scaling: f64,
}

/// A whole sweep, as written to `sweep.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// Schema version ([`SWEEP_VERSION`]).
    pub sweep_version: u32,
    /// The load command, with `{c}` where the level goes.
    pub load: String,
    /// The server command lockscope started, if it started one.
    pub server: Option<String>,
    /// The recorded process.
    pub pid: u32,
    /// Recording time per level, nanoseconds.
    pub duration_ns: u64,
    /// Parser that read the throughput (`sysbench`, `ab`, `wrk`, `regex`).
    pub throughput_parser: String,
    /// Unit of the throughput (`transactions/s`).
    pub throughput_unit: String,
    /// The levels in the order run.
    pub levels: Vec<Level>,
    /// The knee, or `None` when throughput rose at every level.
    pub knee: Option<Knee>,
    /// One sentence for a writeup: the knee and the waits that grow across it.
    pub finding: String,
    /// What makes levels hard to compare (lost events, a level with no waits), one sentence
    /// each; empty when nothing is wrong.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The probes every level's recording was asked to attach (`--probes`); `None` when none
    /// were given (the backend's default probes), and in sweep files older than this field.
    #[serde(default)]
    pub probes: Option<Vec<String>>,
    /// The `--min-block` every level was recorded with, nanoseconds; `None` when none was given
    /// (the recording's default, 10 µs), and in sweep files older than this field.
    #[serde(default)]
    pub min_block_ns: Option<u64>,
    /// The `--syscalls` every level was recorded with; `None` when none were given (all system
    /// calls), and in sweep files older than this field.
    #[serde(default)]
    pub syscalls: Option<Vec<String>>,
}

/// Sentences about levels that make the sweep hard to trust: lost events, no waits at all.
pub fn level_warnings(levels: &[Level]) -> Vec<String> {
    let mut out = Vec::new();
    for level in levels {
        if level.lost_events > 0 {
            out.push(format!(
                "level {} lost {} waits while recording: its shares undercount",
                level.concurrency, level.lost_events
            ));
        }
        if level.waits == 0 {
            out.push(format!(
                "level {} recorded no waits while the load ran: the recording may have missed the server",
                level.concurrency
            ));
        }
    }
    out
}

/// `stats` as shares of `wall_ns` and of `thread_ns` (when there is a breakdown), largest first,
/// the first `keep` (all when 0).
fn shares(
    stats: BTreeMap<String, WaitStats>,
    wall_ns: u64,
    thread_ns: Option<u64>,
    keep: usize,
) -> Vec<Share> {
    let mut out: Vec<Share> = stats
        .into_iter()
        .map(|(name, s)| Share {
            name,
            count: s.count,
            total_ns: s.total_ns,
            avg_threads: share(s.total_ns, wall_ns),
            share_of_thread_time: thread_ns.map(|t| share(s.total_ns, t)),
        })
        .collect();
    out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    if keep > 0 {
        out.truncate(keep);
    }
    out
}

/// The level summary of one recorded profile (scaling is filled in later).
pub fn summarize_level(
    concurrency: u32,
    throughput: f64,
    profile: &Profile,
    files: (&str, &str),
) -> Level {
    let wall_ns = profile.metadata.duration_ns;
    let kinds = profile
        .totals_by_kind()
        .into_iter()
        .map(|(k, s)| (k.name().to_string(), s))
        .collect();
    let breakdown = Breakdown::of(profile);
    let thread_ns = breakdown.as_ref().map(|b| b.thread_ns);
    Level {
        concurrency,
        throughput,
        scaling: 1.0,
        profile: files.0.to_string(),
        load_output: files.1.to_string(),
        wall_ns,
        waits: profile.waits.iter().map(|w| w.stats.count).sum(),
        wait_ns: profile.waits.iter().map(|w| w.stats.total_ns).sum(),
        lost_events: profile.metadata.losses.lost_events(),
        kinds: shares(kinds, wall_ns, thread_ns, 0),
        threads: shares(thread_groups(profile), wall_ns, thread_ns, TOP_PER_LEVEL),
        top_sites: shares(canonical_sites(profile), wall_ns, thread_ns, TOP_PER_LEVEL),
        breakdown,
    }
}

/// Fills in each level's scaling against the first level.
pub fn fill_scaling(levels: &mut [Level]) {
    let base = levels.first().map_or(0.0, |l| l.throughput);
    for level in levels {
        level.scaling = if base > 0.0 {
            level.throughput / base
        } else {
            0.0
        };
    }
}

/// The knee: the first level that no later level beats by more than [`KNEE_MIN_GAIN`], i.e.
/// where throughput stops rising for good (a dip that later recovers is not a knee). `None` when
/// throughput still rises at the last level (or there is only one level).
pub fn find_knee(levels: &[Level]) -> Option<Knee> {
    levels
        .iter()
        .enumerate()
        .take(levels.len().saturating_sub(1))
        .find(|(i, here)| {
            levels[i + 1..]
                .iter()
                .all(|later| later.throughput < here.throughput * (1.0 + KNEE_MIN_GAIN))
        })
        .map(|(_, here)| Knee {
            concurrency: here.concurrency,
            throughput: here.throughput,
            scaling: here.scaling,
        })
}

/// A canonical site cut to its last four frames (`…;f;g;[kernel wait];[mutex]`) for a sentence.
pub fn short_site(site: &str) -> String {
    let frames: Vec<&str> = site.split(';').collect();
    if frames.len() <= 4 {
        site.to_string()
    } else {
        format!("…;{}", frames[frames.len() - 4..].join(";"))
    }
}

fn percent(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// The average threads waiting of the share named `name` in `shares`, 0 when absent.
fn avg_threads_of(shares: &[Share], name: &str) -> f64 {
    shares
        .iter()
        .find(|s| s.name == name)
        .map_or(0.0, |s| s.avg_threads)
}

/// The share of `level`'s thread time of the entry named `name` in `shares` (0 when absent), or
/// `None` when the level has no breakdown.
fn thread_share_of(level: &Level, shares: &[Share], name: &str) -> Option<f64> {
    level.breakdown.as_ref()?;
    Some(
        shares
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.share_of_thread_time)
            .unwrap_or(0.0),
    )
}

/// The entry whose average threads waiting grows most from `from` to `to`, with both values.
fn grows_most<'a>(from: &[Share], to: &'a [Share]) -> Option<(&'a str, f64, f64)> {
    to.iter()
        .map(|s| {
            (
                s.name.as_str(),
                avg_threads_of(from, &s.name),
                s.avg_threads,
            )
        })
        .filter(|(_, a, b)| b > a)
        .max_by(|x, y| (x.2 - x.1).total_cmp(&(y.2 - y.1)))
}

/// How a wait kind grew from `from` to `to`, in words: `20.4 → 50.3 threads waiting on average`,
/// with `, 41.3% → 63.0% of thread time` when both levels have a breakdown.
fn growth(from: &Level, to: &Level, kind: &str, a: f64, b: f64) -> String {
    let mut text = format!(
        "{} → {} waiting on average",
        format_threads(a).trim_end_matches(" threads"),
        format_threads(b)
    );
    if let (Some(x), Some(y)) = (
        thread_share_of(from, &from.kinds, kind),
        thread_share_of(to, &to.kinds, kind),
    ) {
        let _ = write!(
            text,
            ", {} → {} of thread time",
            format_fraction(x),
            format_fraction(y)
        );
    }
    text
}

/// One sentence for a writeup: how throughput scales, the knee, and the wait kind and site whose
/// average threads waiting grows most across it (from the knee to the last level; from the first
/// to the last when there is no knee), with its share of thread time when both levels have a
/// breakdown, and then the class of thread time whose share grows most.
pub fn finding(levels: &[Level], knee: Option<&Knee>) -> String {
    let (Some(first), Some(last)) = (levels.first(), levels.last()) else {
        return "No levels were run.".to_string();
    };
    if levels.len() == 1 {
        return format!(
            "Only concurrency {} was run: no scaling to compare.",
            first.concurrency
        );
    }
    let (from, head) = match knee {
        Some(knee) => {
            let from = levels
                .iter()
                .find(|l| l.concurrency == knee.concurrency)
                .unwrap_or(first);
            let falls = last.scaling < knee.scaling * (1.0 - KNEE_MIN_GAIN);
            let head = match (knee.concurrency == first.concurrency, falls) {
                (true, true) => format!(
                    "Throughput peaks at concurrency {} and falls to {} of it at {}",
                    knee.concurrency,
                    percent(last.scaling),
                    last.concurrency
                ),
                (true, false) => format!(
                    "Throughput stays flat from concurrency {} ({} of it at {})",
                    knee.concurrency,
                    percent(last.scaling),
                    last.concurrency
                ),
                (false, falls) => format!(
                    "Throughput rises to {} of concurrency {} at {}, then {} ({} at {})",
                    percent(knee.scaling),
                    first.concurrency,
                    knee.concurrency,
                    if falls { "falls" } else { "stays flat" },
                    percent(last.scaling),
                    last.concurrency
                ),
            };
            (from, head)
        }
        None => (
            first,
            format!(
                "Throughput is highest at the last level, concurrency {} ({} of concurrency {}), so there is no knee",
                last.concurrency,
                percent(last.scaling),
                first.concurrency
            ),
        ),
    };
    if std::ptr::eq(from, last) {
        return format!("{head}.");
    }
    let kind = grows_most(&from.kinds, &last.kinds);
    let site = grows_most(&from.top_sites, &last.top_sites);
    let waits = match (kind, site) {
        (Some((kind, a, b)), Some((site, _, _))) => format!(
            "{head}; from {} to {}, `{kind}` wait grows most ({}), led by {}",
            from.concurrency,
            last.concurrency,
            growth(from, last, kind, a, b),
            site_words(site)
        ),
        (Some((kind, a, b)), None) => format!(
            "{head}; from {} to {}, `{kind}` wait grows most ({})",
            from.concurrency,
            last.concurrency,
            growth(from, last, kind, a, b)
        ),
        _ => format!(
            "{head}; no wait kind grows from {} to {}",
            from.concurrency, last.concurrency
        ),
    };
    match class_grows_most(from, last) {
        Some((class, a, b)) => format!(
            "{waits}; of the threads' time, {class} grows most ({} → {}).",
            format_fraction(a),
            format_fraction(b)
        ),
        None => format!("{waits}."),
    }
}

/// A site for a sentence: its last four frames in backquotes; off-CPU time without a user stack
/// said for what it is (the offcpu probe takes no stack for a preempted or runnable thread).
fn site_words(site: &str) -> String {
    if site.ends_with(&format!("{NO_USER_STACK};[off-cpu]")) {
        "off-CPU time without a user stack (threads preempted or in the run queue)".to_string()
    } else {
        format!("`{}`", short_site(site))
    }
}

/// The class of thread time whose share grows most from `from` to `to`, with both shares; `None`
/// unless both levels have a breakdown and some class grows.
fn class_grows_most(from: &Level, to: &Level) -> Option<(String, f64, f64)> {
    let (a, b) = (from.breakdown.as_ref()?, to.breakdown.as_ref()?);
    b.classes
        .iter()
        .map(|c| {
            let before = a.class(&c.name).map_or(0.0, |x| x.share_of_thread_time);
            (c.name.clone(), before, c.share_of_thread_time)
        })
        .filter(|(_, x, y)| y > x)
        .max_by(|x, y| (x.2 - x.1).total_cmp(&(y.2 - y.1)))
}

/// What a level without a breakdown says in its place, instead of zeros.
pub const NO_BREAKDOWN: &str = "no breakdown: recorded without the offcpu probe";

/// The table `lockscope sweep` prints: per level the throughput, scaling, average threads alive,
/// the largest wait kind (average threads waiting, share of thread time) and the top wait site;
/// then where the threads' time went (share of thread time per class); then the finding and the
/// warnings.
pub fn sweep_table(sweep: &Sweep) -> String {
    let mut out = String::new();
    let unit = if sweep.throughput_unit.is_empty() {
        "throughput"
    } else {
        sweep.throughput_unit.as_str()
    };
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>8} {:>20}  {:<13} {:>21} {:>20}  top wait site",
        "concurrency",
        unit,
        "scaling",
        "threads alive (avg)",
        "top wait kind",
        "threads waiting (avg)",
        "share of thread time"
    );
    for level in &sweep.levels {
        let knee = sweep
            .knee
            .as_ref()
            .is_some_and(|k| k.concurrency == level.concurrency);
        let alive = level
            .breakdown
            .as_ref()
            .map_or_else(|| "-".to_string(), |b| format!("{:.2}", b.avg_threads));
        let (kind, waiting, of_thread_time) = match level.kinds.first() {
            Some(top) => (
                top.name.as_str(),
                format!("{:.2}", top.avg_threads),
                top.share_of_thread_time
                    .map_or_else(|| "-".to_string(), format_fraction),
            ),
            None => ("-", "-".to_string(), "-".to_string()),
        };
        let _ = writeln!(
            out,
            "{:>12} {:>14.1} {:>7.0}% {:>20}  {:<13} {:>21} {:>20}  {}{}",
            level.concurrency,
            level.throughput,
            level.scaling * 100.0,
            alive,
            kind,
            waiting,
            of_thread_time,
            level
                .top_sites
                .first()
                .map_or_else(|| "-".to_string(), |s| short_site(&s.name)),
            if knee { "  <- knee" } else { "" }
        );
    }
    if sweep.levels.iter().any(|l| l.breakdown.is_some()) {
        let _ = writeln!(
            out,
            "Where the threads' time went (share of thread time; threads: average threads alive)"
        );
        let _ = write!(out, "{:>12} {:>8}", "concurrency", "threads");
        for class in TimeClass::ALL {
            let _ = write!(out, " {:>9}", class.name());
        }
        out.push('\n');
        for level in &sweep.levels {
            let _ = write!(out, "{:>12}", level.concurrency);
            match &level.breakdown {
                Some(b) => {
                    let _ = write!(out, " {:>8.2}", b.avg_threads);
                    for class in TimeClass::ALL {
                        let fraction = b
                            .class(class.name())
                            .map_or(0.0, |c| c.share_of_thread_time);
                        let _ = write!(out, " {:>9}", format_fraction(fraction));
                    }
                    out.push('\n');
                }
                None => {
                    let _ = writeln!(out, " {:>8}  {NO_BREAKDOWN}", "-");
                }
            }
        }
    } else {
        let _ = writeln!(
            out,
            "No level has a breakdown of the threads' time (on CPU, run queue, lock, ...): sweep with `--probes` including offcpu to see where it went."
        );
    }
    let _ = writeln!(out, "{}", sweep.finding);
    for warning in &sweep.warnings {
        let _ = writeln!(out, "WARNING: {warning}");
    }
    out
}

/// How to run a sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepOptions {
    /// Concurrency levels, in the order to run them. Default: `[1, 2, 5, 10]`.
    pub levels: Vec<u32>,
    /// Load command, run with `sh -c`, `{c}` replaced by the level. Default: empty (required).
    pub load: String,
    /// Recording time per level. Default: 20 s.
    pub duration: Duration,
    /// How long to wait for the load to finish after the recording. Default: 60 s.
    pub load_grace: Duration,
    /// Pause between levels, so one level's stragglers do not count in the next. Default: 1 s.
    pub settle: Duration,
    /// Throughput parser. Default: [`Throughput::Auto`].
    pub throughput: Throughput,
    /// Directory for the sweep file, profiles and load outputs. Default: `sweep`.
    pub output_dir: PathBuf,
    /// Probes every level's recording attaches (catalog names, `lockscope probes`). Default:
    /// empty, the recording backend's default probes.
    pub probes: Vec<String>,
    /// Shortest off-CPU interval every level's `offcpu` probe records (`record --min-block`).
    /// Default: `None`, the recording's default (10 µs).
    pub min_block: Option<Duration>,
    /// System calls every level's `syscall` probe records (`record --syscalls`). Default: empty,
    /// all of them.
    pub syscalls: Vec<String>,
}

impl Default for SweepOptions {
    fn default() -> Self {
        SweepOptions {
            levels: vec![1, 2, 5, 10],
            load: String::new(),
            duration: Duration::from_secs(20),
            load_grace: Duration::from_secs(60),
            settle: Duration::from_secs(1),
            throughput: Throughput::Auto,
            output_dir: PathBuf::from("sweep"),
            probes: Vec::new(),
            min_block: None,
            syscalls: Vec::new(),
        }
    }
}

impl SweepOptions {
    /// Checks the options before anything runs.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.levels.is_empty() {
            bail!("no concurrency levels given");
        }
        if self.levels.contains(&0) {
            bail!("concurrency levels must be at least 1");
        }
        if !self.load.contains("{c}") {
            bail!(
                "the load command `{}` has no `{{c}}` for the concurrency level",
                self.load
            );
        }
        if let Some(name) = self
            .probes
            .iter()
            .find(|name| lockscope_probes::catalog::find(name).is_none())
        {
            bail!("unknown probe `{name}` (`lockscope probes` lists them)");
        }
        if self.min_block == Some(Duration::ZERO) {
            bail!("--min-block must be greater than zero");
        }
        self.throughput.validate()
    }
}

/// What the caller's recorder is asked to do for one level.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LevelRecording {
    /// The concurrency level.
    pub concurrency: u32,
    /// Process to record.
    pub pid: u32,
    /// How long to record.
    pub duration: Duration,
    /// Profile to write.
    pub output: PathBuf,
    /// Probes to attach ([`SweepOptions::probes`]); empty means the backend's defaults. Default:
    /// empty.
    pub probes: Vec<String>,
    /// Shortest off-CPU interval the `offcpu` probe records ([`SweepOptions::min_block`]);
    /// `None` means the recording's default. Default: `None`.
    pub min_block: Option<Duration>,
    /// System calls the `syscall` probe records ([`SweepOptions::syscalls`]); empty means all.
    /// Default: empty.
    pub syscalls: Vec<String>,
}

impl LevelRecording {
    /// Recording `pid` at level `concurrency` for `duration` into `output`, with the backend's
    /// default probes and settings.
    pub fn new(concurrency: u32, pid: u32, duration: Duration, output: PathBuf) -> Self {
        LevelRecording {
            concurrency,
            pid,
            duration,
            output,
            probes: Vec::new(),
            min_block: None,
            syscalls: Vec::new(),
        }
    }
}

/// Records the server for a sweep, one level at a time.
pub trait LevelRecorder {
    /// Starts recording `level`; returns once the probes are attached, so the load that starts
    /// next is recorded from its first request.
    fn start(&mut self, level: &LevelRecording) -> anyhow::Result<()>;
    /// Waits for the recording started last to end (after its duration) and its profile to be
    /// written.
    fn finish(&mut self) -> anyhow::Result<()>;
}

/// Runs a sweep against `pid`: per level, starts the recording (returning once attached), starts
/// the load, waits for the recording's end and the load's, and parses the throughput. Writes
/// `sweep.json` into the output directory and returns the sweep. `progress` gets one line per
/// step.
pub fn run_sweep(
    options: &SweepOptions,
    pid: u32,
    server: Option<String>,
    recorder: &mut dyn LevelRecorder,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<Sweep> {
    options.validate()?;
    let dir = &options.output_dir;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create sweep directory `{}`", dir.display()))?;
    let mut levels = Vec::new();
    let mut unit = String::new();
    let mut parser = options.throughput.name().to_string();
    for (i, &c) in options.levels.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(options.settle);
        }
        let command = options.load.replace("{c}", &c.to_string());
        let profile_name = format!("level-{c}.lsp");
        let output_name = format!("level-{c}.load.txt");
        let output_path = dir.join(&output_name);
        let mut recording = LevelRecording::new(c, pid, options.duration, dir.join(&profile_name));
        recording.probes = options.probes.clone();
        recording.min_block = options.min_block;
        recording.syscalls = options.syscalls.clone();
        recorder
            .start(&recording)
            .with_context(|| format!("failed to start recording level {c}"))?;
        progress(&format!("level {c}: running `{command}`"));
        let stdout = std::fs::File::create(&output_path)
            .with_context(|| format!("cannot write `{}`", output_path.display()))?;
        let stderr_path = dir.join(format!("level-{c}.load.err"));
        let stderr = std::fs::File::create(&stderr_path)
            .with_context(|| format!("cannot write `{}`", stderr_path.display()))?;
        let load = Command::new("sh")
            .arg("-c")
            .arg(&command)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("failed to start load command `{command}`"));
        let mut load = match load {
            Ok(load) => load,
            Err(e) => {
                let _ = recorder.finish();
                return Err(e);
            }
        };
        let recorded = recorder.finish();
        let status = wait_with_deadline(&mut load, options.load_grace)
            .with_context(|| format!("load command `{command}`"))?;
        recorded.with_context(|| format!("failed to record level {c}"))?;
        let text = std::fs::read_to_string(&output_path)
            .with_context(|| format!("cannot read `{}`", output_path.display()))?;
        if !status.success() {
            let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            let tail: Vec<&str> = err.lines().rev().take(5).collect();
            bail!(
                "load command `{command}` failed ({status}): {}",
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            );
        }
        let parsed = options
            .throughput
            .parse(&text)
            .with_context(|| format!("level {c}: `{}`", output_path.display()))?;
        unit = parsed.unit.clone();
        parser = parsed.parser.clone();
        let profile = lockscope_probes::read_profile(&recording.output)
            .with_context(|| format!("failed to read profile `{}`", recording.output.display()))?;
        // The level in pprof too, labelled with its concurrency, so that all levels load
        // together into pprof-reading tools and can be told apart there.
        let pprof_path = dir.join(format!("level-{c}.pb.gz"));
        let pprof_options = crate::export::pprof::PprofOptions {
            concurrency: Some(u64::from(c)),
            ..crate::export::pprof::PprofOptions::default()
        };
        let mut pprof = Vec::new();
        crate::export::pprof::write_pprof(&profile, &pprof_options, &mut pprof)
            .and_then(|()| {
                std::fs::write(&pprof_path, &pprof)
                    .with_context(|| format!("cannot write `{}`", pprof_path.display()))
            })
            .with_context(|| format!("level {c}: failed to export pprof"))?;
        progress(&format!(
            "level {c}: {:.1} {}, {} waits recorded",
            parsed.value,
            parsed.unit,
            profile.waits.iter().map(|w| w.stats.count).sum::<u64>()
        ));
        levels.push(summarize_level(
            c,
            parsed.value,
            &profile,
            (&profile_name, &output_name),
        ));
    }
    fill_scaling(&mut levels);
    let knee = find_knee(&levels);
    let finding = finding(&levels, knee.as_ref());
    let warnings = level_warnings(&levels);
    for warning in &warnings {
        progress(&format!("WARNING: {warning}"));
    }
    let sweep = Sweep {
        sweep_version: SWEEP_VERSION,
        load: options.load.clone(),
        server,
        pid,
        duration_ns: options.duration.as_nanos() as u64,
        throughput_parser: parser,
        throughput_unit: unit,
        levels,
        knee,
        finding,
        warnings,
        probes: non_empty(&options.probes),
        min_block_ns: options.min_block.map(|d| d.as_nanos() as u64),
        syscalls: non_empty(&options.syscalls),
    };
    let path = dir.join(SWEEP_FILE);
    let json = serde_json::to_string_pretty(&sweep).context("failed to encode the sweep")?;
    std::fs::write(&path, json + "\n")
        .with_context(|| format!("cannot write sweep file `{}`", path.display()))?;
    Ok(sweep)
}

/// `names`, or `None` when there are none (a setting left to the recording's default).
fn non_empty(names: &[String]) -> Option<Vec<String>> {
    (!names.is_empty()).then(|| names.to_vec())
}

/// Waits for `child` up to `grace`; kills it past that.
fn wait_with_deadline(
    child: &mut std::process::Child,
    grace: Duration,
) -> anyhow::Result<std::process::ExitStatus> {
    let deadline = Instant::now() + grace;
    loop {
        if let Some(status) = child.try_wait().context("failed to wait")? {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "still running {:.0} s after the recording ended: killed",
                grace.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads a sweep file, or `sweep.json` inside a sweep directory.
pub fn read_sweep(path: &Path) -> anyhow::Result<(Sweep, PathBuf)> {
    let file = if path.is_dir() {
        path.join(SWEEP_FILE)
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read sweep file `{}`", file.display()))?;
    let mut sweep: Sweep = serde_json::from_str(&text)
        .with_context(|| format!("`{}` is not a sweep file", file.display()))?;
    if !(OLDEST_SWEEP_VERSION..=SWEEP_VERSION).contains(&sweep.sweep_version) {
        bail!(
            "sweep file `{}` has version {}, this lockscope reads {OLDEST_SWEEP_VERSION} to {SWEEP_VERSION}",
            file.display(),
            sweep.sweep_version
        );
    }
    if sweep.sweep_version < SWEEP_VERSION {
        // Its numbers read as today's (`share_of_wall` is `avg_threads`); only its sentence was
        // written in the old units (`2039% of wall time`), so it is written again.
        sweep.finding = finding(&sweep.levels, sweep.knee.as_ref());
        sweep.sweep_version = SWEEP_VERSION;
    }
    let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    Ok((sweep, dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(c: u32, throughput: f64, mutex_share: f64) -> Level {
        let share = |name: &str, s: f64| Share {
            name: name.to_string(),
            count: 1,
            total_ns: (s * 1e9) as u64,
            avg_threads: s,
            share_of_thread_time: None,
        };
        Level {
            concurrency: c,
            throughput,
            scaling: 1.0,
            profile: String::new(),
            load_output: String::new(),
            wall_ns: 1_000_000_000,
            waits: 1,
            wait_ns: 0,
            lost_events: 0,
            kinds: vec![share("mutex", mutex_share), share("condvar", 0.5)],
            threads: vec![],
            top_sites: vec![share("row_lock;[kernel wait];[mutex]", mutex_share)],
            breakdown: None,
        }
    }

    /// The seed's MySQL on Mac OS X: 5 connections fell to 25% of one; the knee is level 1.
    #[test]
    fn collapse_from_the_first_level() {
        let mut levels = vec![level(1, 1000.0, 0.1), level(5, 250.0, 3.0)];
        fill_scaling(&mut levels);
        assert_eq!(levels[1].scaling, 0.25);
        let knee = find_knee(&levels).expect("a knee");
        assert_eq!(knee.concurrency, 1);
        let sentence = finding(&levels, Some(&knee));
        assert_eq!(
            sentence,
            "Throughput peaks at concurrency 1 and falls to 25% of it at 5; from 1 to 5, \
             `mutex` wait grows most (0.10 → 3.00 threads waiting on average), led by \
             `row_lock;[kernel wait];[mutex]`."
        );
    }

    /// Linux on the same machine rose to 180% at 5 and stayed there: the knee is 5.
    #[test]
    fn rise_then_flat() {
        let mut levels = vec![
            level(1, 100.0, 0.1),
            level(2, 150.0, 0.2),
            level(5, 180.0, 0.3),
            level(10, 182.0, 0.9),
        ];
        fill_scaling(&mut levels);
        let knee = find_knee(&levels).expect("a knee");
        assert_eq!(knee.concurrency, 5);
        let sentence = finding(&levels, Some(&knee));
        assert!(
            sentence.starts_with(
                "Throughput rises to 180% of concurrency 1 at 5, then stays flat (182% at 10); from 5 to 10, `mutex` wait grows most (0.30 → 0.90 threads waiting on average)"
            ),
            "{sentence}"
        );
    }

    /// A dip that recovers is not a knee (MariaDB on 2 CPUs: 578, 545, 1157, 1130 tps).
    #[test]
    fn dip_then_recovery() {
        let mut levels = vec![
            level(1, 578.0, 0.1),
            level(2, 545.0, 0.1),
            level(5, 1157.0, 0.1),
            level(10, 1130.0, 0.1),
        ];
        fill_scaling(&mut levels);
        assert_eq!(find_knee(&levels).map(|k| k.concurrency), Some(5));
    }

    /// Throughput that rises at every level has no knee.
    #[test]
    fn no_knee() {
        let mut levels = vec![level(1, 100.0, 0.1), level(2, 190.0, 0.1)];
        fill_scaling(&mut levels);
        assert_eq!(find_knee(&levels), None);
        assert!(finding(&levels, None).contains("so there is no knee"));
    }

    /// The built-in parsers read the captured outputs of the real tools; a regex reads anything.
    #[test]
    fn throughput_parsers() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        let read = |name: &str| std::fs::read_to_string(data.join(name)).expect("fixture");
        let ab = Throughput::Auto
            .parse(&read("throughput-ab.txt"))
            .expect("ab");
        assert_eq!((ab.value, ab.parser.as_str()), (4928.16, "ab"));
        let wrk = Throughput::Wrk
            .parse(&read("throughput-wrk.txt"))
            .expect("wrk");
        assert_eq!(wrk.value, 11606.55);
        let sb = Throughput::Auto
            .parse(&read("throughput-sysbench.txt"))
            .expect("sysbench");
        assert_eq!((sb.value, sb.unit.as_str()), (477.55, "transactions/s"));
        let re = Throughput::Regex(r"queries:\s+\d+\s+\(([\d.]+) per sec".to_string());
        assert_eq!(
            re.parse(&read("throughput-sysbench.txt"))
                .expect("regex")
                .value,
            7640.82
        );
        assert!(Throughput::Ab.parse(&read("throughput-wrk.txt")).is_err());
        assert!(Throughput::Regex("no group".into()).validate().is_err());
    }
}
