//! The table `lockscope sweep` prints ([`sweep_table`]).

use super::{short_site, Sweep, NO_BREAKDOWN};
use crate::render::units::format_fraction;
use lockscope_probes::TimeClass;
use std::fmt::Write as _;

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
            "No level has a breakdown of the threads' time (on CPU, run queue, lock, ...): sweep with `--probes` including {} to see where it went.",
            lockscope_probes::catalog::OFFCPU.name
        );
    }
    let _ = writeln!(out, "{}", sweep.finding);
    for warning in &sweep.warnings {
        let _ = writeln!(out, "WARNING: {warning}");
    }
    out
}
