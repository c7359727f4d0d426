//! One sentence for a writeup ([`finding`]): how throughput scales, the knee, what grows
//! across it, and what `lockscope why` traces the working threads' waits back to there.

use super::{knee_level, Knee, Level, LevelWhy, Share, KNEE_MIN_GAIN};
use crate::analysis::fold::NO_USER_STACK;
use crate::render::frames;
use crate::render::sites::site_label;
use crate::render::units::{format_fraction, format_threads};
use lockscope_probes::WaitRole;
use std::fmt::Write as _;

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
/// breakdown, and then the part of thread time whose share grows most (`time_grows_most`:
/// by who ended the sleeps where both levels say, else by class), and for levels recorded with
/// the `waitfor` probe, what `lockscope why` traces the working threads' time back to at both
/// (`why_words`).
pub fn finding(levels: &[Level], knee: Option<&Knee>) -> String {
    let text = waits_finding(levels, knee);
    let (Some(first), Some(last)) = (levels.first(), levels.last()) else {
        return text;
    };
    let from = knee_level(levels, knee).unwrap_or(first);
    match why_words(from, last, knee.is_some()) {
        Some(why) => format!("{text} {why}"),
        None => text,
    }
}

/// What `lockscope why` said of the levels `from` (the knee when `at_knee`) and `to`, in one
/// sentence: `` At the knee (concurrency 5), `lockscope why` traces 48% of the working threads'
/// time (one_connection*) to `cpu-saturation` at `...`; at 50, 71% to `...`. ``; `None` when
/// neither has a bottleneck analysis.
fn why_words(from: &Level, to: &Level, at_knee: bool) -> Option<String> {
    // "48% ... to `cpu` at `f <- g`", with the threads' words in between.
    let cause = |why: &LevelWhy, between: &str| match why.causes.first() {
        Some(cause) => format!("{}{between} to {}", percent(cause.share), cause.words()),
        None => format!("none{between} to a cause in the program"),
    };
    let groups = |why: &LevelWhy| {
        let mut names: Vec<&str> = why.groups.iter().take(3).map(String::as_str).collect();
        if why.groups.len() > 3 {
            names.push("...");
        }
        names.join(", ")
    };
    let lead = |level: &Level, why: &LevelWhy| {
        let label = if at_knee && !std::ptr::eq(level, to) {
            format!("At the knee (concurrency {})", level.concurrency)
        } else {
            format!("At concurrency {}", level.concurrency)
        };
        let between = format!(" of the working threads' time ({})", groups(why));
        format!("{label}, `lockscope why` traces {}", cause(why, &between))
    };
    let text = match (&from.why, &to.why) {
        (Some(a), Some(b)) if !std::ptr::eq(from, to) => {
            format!(
                "{}; at {}, {}.",
                lead(from, a),
                to.concurrency,
                cause(b, "")
            )
        }
        (Some(a), _) => format!("{}.", lead(from, a)),
        (None, Some(b)) => format!("{}.", lead(to, b)),
        (None, None) => return None,
    };
    Some(text)
}

/// The finding's first part: the scaling, the knee and the waits that grow across it.
fn waits_finding(levels: &[Level], knee: Option<&Knee>) -> String {
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
            let from = knee_level(levels, Some(knee)).unwrap_or(first);
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
    match time_grows_most(from, last) {
        Some((part, a, b)) => {
            let mut text = format!(
                "{waits}; of the threads' time, {} grows most ({} → {}",
                part.words(),
                format_fraction(a),
                format_fraction(b)
            );
            if let Part::OnProgram = part {
                let call = last
                    .breakdown
                    .as_ref()
                    .and_then(|b| b.program_calls.first());
                if let Some(call) = call {
                    let _ = write!(text, ", mostly in `{}`", call.name);
                }
                text.push_str("): the threads wait on each other.");
            } else {
                text.push_str(").");
            }
            text
        }
        None => format!("{waits}."),
    }
}

/// A part of the threads' time the finding names.
enum Part {
    /// A class of the breakdown (`on-cpu`, `run-queue`, or for levels that do not say who ended
    /// their sleeps, a class of sleeps by system call: `poll`, `lock`...).
    Class(String),
    /// Asleep until another thread of the program ended the sleep, whatever the call.
    OnProgram,
    /// Asleep until something outside the program ended it (another process, a timer, a device,
    /// the network).
    Outside,
}

impl Part {
    fn words(&self) -> String {
        match self {
            Part::Class(name) => name.clone(),
            Part::OnProgram => "waiting on other threads of the program".to_string(),
            Part::Outside => "waiting for something outside the program".to_string(),
        }
    }
}

/// The part of the threads' time whose share grows most from `from` to `to`, with both shares;
/// `None` unless both levels have a breakdown and some part grows. When both levels say who
/// ended their sleeps, the parts are on a CPU, waiting for one, and the report's contention
/// (waiting on other threads of the program) and idle waits (waiting for something outside it):
/// a latch in `epoll_wait` set by the lock's holder is contention, not `poll`. Otherwise (older profiles and sweep files) they are the
/// classes of the breakdown, sleeps by system call.
fn time_grows_most(from: &Level, to: &Level) -> Option<(Part, f64, f64)> {
    let (a, b) = (from.breakdown.as_ref()?, to.breakdown.as_ref()?);
    if a.roles.is_empty() || b.roles.is_empty() {
        return class_grows_most(from, to).map(|(class, x, y)| (Part::Class(class), x, y));
    }
    let class =
        |bd: &super::Breakdown, name: &str| bd.class(name).map_or(0.0, |c| c.share_of_thread_time);
    let role = |bd: &super::Breakdown, role: WaitRole| bd.role_share(role).unwrap_or(0.0);
    let parts = [
        (
            Part::Class("on-cpu".to_string()),
            class(a, "on-cpu"),
            class(b, "on-cpu"),
        ),
        (
            Part::Class("run-queue".to_string()),
            class(a, "run-queue"),
            class(b, "run-queue"),
        ),
        (
            Part::OnProgram,
            role(a, WaitRole::Contention),
            role(b, WaitRole::Contention),
        ),
        (
            Part::Outside,
            role(a, WaitRole::Idle),
            role(b, WaitRole::Idle),
        ),
    ];
    parts
        .into_iter()
        .filter(|(_, x, y)| y > x)
        .max_by(|x, y| (x.2 - x.1).total_cmp(&(y.2 - y.1)))
}

/// A site for a sentence: its name leaf first from its telling frame in backquotes; off-CPU time without a user stack
/// said for what it is (the offcpu probe takes no stack for a preempted or runnable thread).
fn site_words(site: &str) -> String {
    if site.ends_with(&format!("{NO_USER_STACK};[off-cpu]")) {
        "off-CPU time without a user stack (threads preempted or in the run queue)".to_string()
    } else {
        format!("`{}`", site_label(site, frames::TEXT_WIDTH - 2))
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
