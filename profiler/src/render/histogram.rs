//! Text rendering of [`Log2Histogram`]s in the layout of DTrace's `quantize()`.
//!
//! ```text
//!            value  ------------- Distribution ------------- count
//!          67.1 ms |                                         0
//!           134 ms |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@ 4
//!           268 ms |                                         0
//! ```
//!
//! Each row is labelled with its bucket's lower bound ([`Log2Histogram::slot_lower_bound`]) in the
//! units of [`crate::render::units`]. As in DTrace, one empty bucket is shown before and after the
//! non-empty range, empty buckets inside the range are shown too, and a bar is the bucket's share
//! of all observations times 40 `@`, rounded to the nearest `@`.

use crate::render::units::format_ns;
use lockscope_probes::hist::SLOTS;
use lockscope_probes::Log2Histogram;
use std::fmt::Write as _;

/// Width of the bar column, as in DTrace.
pub const BAR_WIDTH: usize = 40;

/// Width of the value column, as in DTrace.
const VALUE_WIDTH: usize = 16;

/// Slots to print: the non-empty range widened by one empty bucket on each side. `None` when the
/// histogram is empty.
pub fn displayed_slots(histogram: &Log2Histogram) -> Option<std::ops::RangeInclusive<usize>> {
    let first = histogram.buckets().next()?.0;
    let last = histogram.buckets().last()?.0;
    Some(first.saturating_sub(1)..=(last + 1).min(SLOTS - 1))
}

/// Number of `@` for a bucket holding `count` of `total` observations.
pub fn bar_width(count: u64, total: u64) -> usize {
    if total == 0 {
        return 0;
    }
    let width = (u128::from(count) * BAR_WIDTH as u128 + u128::from(total) / 2) / u128::from(total);
    width.min(BAR_WIDTH as u128) as usize
}

/// Renders `histogram`, every line prefixed with `indent` and ended by a newline. An empty
/// histogram renders as one `(no waits)` line.
pub fn render(histogram: &Log2Histogram, indent: &str) -> String {
    let mut out = String::new();
    let Some(slots) = displayed_slots(histogram) else {
        let _ = writeln!(out, "{indent}(no waits)");
        return out;
    };
    let total = histogram.total_count();
    let _ = writeln!(
        out,
        "{indent}{:>VALUE_WIDTH$}  ------------- Distribution ------------- count",
        "value"
    );
    for slot in slots {
        let count = histogram.count_in_slot(slot);
        let label = format_ns(Log2Histogram::slot_lower_bound(slot));
        let bar = "@".repeat(bar_width(count, total));
        let _ = writeln!(
            out,
            "{indent}{label:>VALUE_WIDTH$} |{bar:<BAR_WIDTH$} {count}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[u64]) -> Log2Histogram {
        let mut h = Log2Histogram::new();
        for &v in values {
            h.record(v);
        }
        h
    }

    /// One full bucket renders with an empty bucket on each side and a 40-wide bar.
    #[test]
    fn single_bucket_with_empty_neighbours() {
        let text = render(&histogram(&[200_000_000; 4]), "");
        let expected = "           value  ------------- Distribution ------------- count\n\
                        \x20        67.1 ms |                                         0\n\
                        \x20         134 ms |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@ 4\n\
                        \x20         268 ms |                                         0\n";
        assert_eq!(text, expected);
    }

    /// Empty buckets inside the range are printed, and bars split in proportion to the counts.
    #[test]
    fn gaps_and_proportional_bars() {
        let text = render(&histogram(&[1_000, 1_000, 1_000, 9_000]), "  ");
        let lines: Vec<&str> = text.lines().collect();
        // 1000 ns is slot 10 (512..1023 starts at 512), 9000 ns slot 14 (8192..).
        assert_eq!(lines.len(), 1 + 7, "{text}");
        assert!(lines[1].starts_with("            256 ns |"), "{text}");
        assert!(lines[2].ends_with(&format!("|{:<40} 3", "@".repeat(30))));
        assert!(lines[3].ends_with(" 0") && lines[4].ends_with(" 0") && lines[5].ends_with(" 0"));
        assert!(lines[6].contains(&format!("|{:<40} 1", "@".repeat(10))));
        assert!(lines[7].starts_with("           16.3 µs |"), "{text}");
        assert!(lines.iter().all(|l| l.starts_with("  ")));
    }

    /// The zero bucket has no bucket before it, and the last slot none after it.
    #[test]
    fn range_edges() {
        assert_eq!(displayed_slots(&histogram(&[0])), Some(0..=1));
        assert_eq!(displayed_slots(&histogram(&[u64::MAX])), Some(63..=64));
        assert_eq!(displayed_slots(&Log2Histogram::new()), None);
        assert_eq!(render(&Log2Histogram::new(), "> "), "> (no waits)\n");
    }

    /// Bars round to the nearest `@` and never exceed the column.
    #[test]
    fn bar_rounding() {
        assert_eq!(bar_width(1, 80), 1); // 0.5 rounds up
        assert_eq!(bar_width(1, 81), 0);
        assert_eq!(bar_width(5, 5), 40);
        assert_eq!(bar_width(1, 3), 13);
        assert_eq!(bar_width(0, 0), 0);
        assert_eq!(bar_width(u64::MAX, u64::MAX), 40);
    }
}
