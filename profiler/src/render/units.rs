//! Human-readable times and shares, one convention for every text output of lockscope.
//!
//! A duration is printed in the largest of `ns`, `µs`, `ms` and `s` in which it is at least 1, with
//! three significant digits, **truncated, never rounded up**: `134217728` ns prints as `134 ms`,
//! `1_073_741_824` ns as `1.07 s`, `1000` ns as `1.00 µs`, `999` ns as `999 ns`. Nanoseconds are
//! integers (no decimals); seconds stop growing units, so very long times print as `1099 s`.
//!
//! Time spent by many threads at once is never a percentage of one clock (`5032% of wall time`
//! pictures nothing): it is **average threads** ([`format_threads`]: time over wall time, `31.2
//! threads`) or a **share of thread time** ([`format_fraction`] of the threads' wall times summed,
//! 0 to 100%).
//!
//! Truncation matters for histogram labels: a bucket label is the bucket's lower bound, and a
//! truncated label never claims more than that bound (`536870912` ns is `536 ms`, not `537 ms`).

/// Units from the smallest to the largest, with their size in nanoseconds.
const UNITS: [(&str, u64); 4] = [
    ("ns", 1),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
];

/// Formats a duration in nanoseconds with the convention of this module (`134 ms`, `1.20 s`).
pub fn format_ns(ns: u64) -> String {
    let (unit, scale) = UNITS
        .iter()
        .rev()
        .find(|&&(_, scale)| ns >= scale)
        .copied()
        .unwrap_or(UNITS[0]);
    let whole = ns / scale;
    if scale == 1 || whole >= 100 {
        return format!("{whole} {unit}");
    }
    // u128: `ns * 100` overflows u64 for durations above ~5.8 years.
    let (decimals, scaled) = if whole >= 10 {
        (1, u128::from(ns) * 10 / u128::from(scale))
    } else {
        (2, u128::from(ns) * 100 / u128::from(scale))
    };
    let divisor = 10u128.pow(decimals);
    format!(
        "{}.{:0width$} {unit}",
        scaled / divisor,
        scaled % divisor,
        width = decimals as usize
    )
}

/// A normalized value (`lockscope diff`'s rates: per second of wall time or per operation) with
/// its unit: `827 ms/op`, `1.20 s/s`, `3400 samples/s`.
pub fn format_normalized(value: u64, unit: &str) -> String {
    match unit.strip_prefix("ns/") {
        Some(per) => format!("{}/{per}", format_ns(value)),
        None => format!("{value} {unit}"),
    }
}

/// Formats `part / whole` as a percentage with one decimal (`57.1%`); `0.0%` when `whole` is 0.
pub fn format_percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0.0%".to_string();
    }
    // Per-mille, rounded half up, computed in integers so the output never depends on float
    // formatting.
    let per_mille = (u128::from(part) * 1000 + u128::from(whole) / 2) / u128::from(whole);
    format!("{}.{}%", per_mille / 10, per_mille % 10)
}

/// Formats an average number of threads (time summed over threads, over wall time) with its
/// unit: three significant digits below 100 (`0.04 threads`, `3.65 threads`, `31.2 threads`),
/// whole numbers above (`250 threads`).
pub fn format_threads(avg: f64) -> String {
    let avg = if avg.is_finite() { avg.max(0.0) } else { 0.0 };
    if avg >= 99.95 {
        format!("{avg:.0} threads")
    } else if avg >= 9.995 {
        format!("{avg:.1} threads")
    } else {
        format!("{avg:.2} threads")
    }
}

/// Formats a fraction from 0 to 1 (a share of thread time) as a percentage with one decimal
/// (`0.4132` → `41.3%`).
pub fn format_fraction(fraction: f64) -> String {
    let fraction = if fraction.is_finite() { fraction } else { 0.0 };
    format!("{:.1}%", fraction * 100.0)
}

/// `part / whole` as a fraction rounded to four decimals, for JSON (`0.5714`); 0 when `whole` is 0.
pub fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    let per_10k = (u128::from(part) * 10_000 + u128::from(whole) / 2) / u128::from(whole);
    per_10k as f64 / 10_000.0
}

/// Formats nanoseconds since the Unix epoch as an ISO 8601 UTC time to the second
/// (`2024-05-01T12:00:00Z`).
pub fn format_unix_ns(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`, restricted
/// to dates after the epoch, which is all a recording can have).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each unit starts exactly at its threshold, and values just below stay in the smaller unit.
    #[test]
    fn unit_edges() {
        assert_eq!(format_ns(0), "0 ns");
        assert_eq!(format_ns(1), "1 ns");
        assert_eq!(format_ns(999), "999 ns");
        assert_eq!(format_ns(1_000), "1.00 µs");
        assert_eq!(format_ns(1_024), "1.02 µs");
        assert_eq!(format_ns(9_999), "9.99 µs");
        assert_eq!(format_ns(10_000), "10.0 µs");
        assert_eq!(format_ns(99_999), "99.9 µs");
        assert_eq!(format_ns(100_000), "100 µs");
        assert_eq!(format_ns(999_999), "999 µs");
        assert_eq!(format_ns(1_000_000), "1.00 ms");
        assert_eq!(format_ns(999_999_999), "999 ms");
        assert_eq!(format_ns(1_000_000_000), "1.00 s");
        assert_eq!(format_ns(1_200_000_000), "1.20 s");
        assert_eq!(format_ns(999_999_999_999), "999 s");
        assert_eq!(format_ns(1_099_511_627_776), "1099 s");
        assert_eq!(format_ns(u64::MAX), "18446744073 s");
    }

    /// Powers of two, the histogram bucket bounds, truncate rather than round.
    #[test]
    fn powers_of_two_truncate() {
        assert_eq!(format_ns(1 << 27), "134 ms");
        assert_eq!(format_ns(1 << 28), "268 ms");
        assert_eq!(format_ns(1 << 29), "536 ms");
        assert_eq!(format_ns(1 << 30), "1.07 s");
        assert_eq!(format_ns(1 << 12), "4.09 µs");
    }

    /// Percentages round half up to one decimal and survive a zero denominator.
    #[test]
    fn percentages() {
        assert_eq!(format_percent(0, 0), "0.0%");
        assert_eq!(format_percent(4, 7), "57.1%");
        assert_eq!(format_percent(1, 2000), "0.1%");
        assert_eq!(format_percent(1, 2001), "0.0%");
        assert_eq!(format_percent(7, 7), "100.0%");
        assert_eq!(share(4, 7), 0.5714);
        assert_eq!(share(1, 0), 0.0);
    }

    /// Average threads keep three significant digits and their unit; fractions print as
    /// percentages with one decimal.
    #[test]
    fn threads_and_fractions() {
        assert_eq!(format_threads(0.0), "0.00 threads");
        assert_eq!(format_threads(0.0412), "0.04 threads");
        assert_eq!(format_threads(3.648), "3.65 threads");
        assert_eq!(format_threads(9.999), "10.0 threads");
        assert_eq!(format_threads(31.24), "31.2 threads");
        assert_eq!(format_threads(99.96), "100 threads");
        assert_eq!(format_threads(250.4), "250 threads");
        assert_eq!(format_threads(f64::NAN), "0.00 threads");
        assert_eq!(format_fraction(0.4132), "41.3%");
        assert_eq!(format_fraction(1.0), "100.0%");
        assert_eq!(format_fraction(0.0), "0.0%");
    }

    /// Epoch nanoseconds print as the UTC calendar date, across a leap day.
    #[test]
    fn unix_times() {
        assert_eq!(format_unix_ns(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_unix_ns(1_700_000_000_000_000_000),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(
            format_unix_ns(951_782_400 * 1_000_000_000),
            "2000-02-29T00:00:00Z"
        );
    }
}
