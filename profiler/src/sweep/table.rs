//! The table `lockscope sweep` prints ([`sweep_table`]).

use super::{Sweep, NO_BREAKDOWN};
use crate::render::frames::{self, StackStyle};
use crate::render::sites;
use crate::render::units::format_fraction;
use lockscope_probes::TimeClass;
use std::fmt::Write as _;

/// The table `lockscope sweep` prints: per level the throughput, scaling, average threads alive,
/// the largest wait kind (average threads waiting, share of thread time); then each level's top
/// wait site, named leaf first from its telling frame ([`sites::site_names`]); then where the
/// threads' time went (share of thread time per class); then the finding and the warnings,
/// wrapped to [`frames::TEXT_WIDTH`].
pub fn sweep_table(sweep: &Sweep) -> String {
    let mut out = String::new();
    let unit = if sweep.throughput_unit.is_empty() {
        "throughput"
    } else {
        sweep.throughput_unit.as_str()
    };
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>8} {:>7}  {:<13} {:>8} {:>9}",
        "concurrency", unit, "scaling", "alive", "top wait kind", "waiting", "% of time"
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
            "{:>12} {:>14.1} {:>7.0}% {:>7}  {:<13} {:>8} {:>9}{}",
            level.concurrency,
            level.throughput,
            level.scaling * 100.0,
            alive,
            kind,
            waiting,
            of_thread_time,
            if knee { "  <- knee" } else { "" }
        );
    }
    let _ = writeln!(
        out,
        "{:>12}  alive: average threads alive; waiting: average threads waiting in the top wait \
         kind;\n{:>12}  % of time: its share of thread time",
        "", ""
    );
    let tops: Vec<&str> = sweep
        .levels
        .iter()
        .filter_map(|l| l.top_sites.first().map(|s| s.name.as_str()))
        .collect();
    let indent = 12 + 2;
    let mut names =
        sites::site_names(&tops, StackStyle::Readable, frames::TEXT_WIDTH - indent).into_iter();
    let _ = writeln!(out, "Top wait site per level (leaf first)");
    for level in &sweep.levels {
        let name = match level.top_sites.first() {
            Some(_) => names.next().unwrap_or_default(),
            None => "-".to_string(),
        };
        let _ = writeln!(out, "{:>12}  {name}", level.concurrency);
    }
    if sweep.levels.iter().any(|l| l.breakdown.is_some()) {
        let _ = writeln!(
            out,
            "Where the threads' time went (share of thread time; threads: average threads alive)"
        );
        let _ = write!(out, "{:>12} {:>8}", "concurrency", "threads");
        for class in TimeClass::ALL {
            // As wide as its name or `100.0%`, so that the table fits 100 columns.
            let w = class.name().len().max(6);
            let _ = write!(out, " {:>w$}", class.name());
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
                        let w = class.name().len().max(6);
                        let _ = write!(out, " {:>w$}", format_fraction(fraction));
                    }
                    out.push('\n');
                }
                None => {
                    let _ = writeln!(out, " {:>8}  {NO_BREAKDOWN}", "-");
                }
            }
        }
    } else {
        let text = format!(
            "No level has a breakdown of the threads' time (on CPU, run queue, lock, ...): sweep \
             with `--probes` including {} to see where it went.",
            lockscope_probes::catalog::OFFCPU.name
        );
        let _ = writeln!(out, "{}", frames::wrap(&text, "", "  ", frames::TEXT_WIDTH));
    }
    let _ = writeln!(
        out,
        "{}",
        frames::wrap(&sweep.finding, "", "  ", frames::TEXT_WIDTH)
    );
    for warning in &sweep.warnings {
        let _ = writeln!(
            out,
            "{}",
            frames::wrap(warning, "WARNING: ", "  ", frames::TEXT_WIDTH)
        );
    }
    out
}
