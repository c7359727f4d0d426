//! Small SVG pictures the HTML page embeds and the sweep chart shares its conventions with:
//! [`histogram_svg`] (a log2 histogram's bars) and [`time_bars_svg`] (where each thread group's
//! time went), drawn by hand with generic font families and no external resources, in the
//! [`CLASS_COLORS`] of the thread-time classes; and [`xml_escape`] for every SVG and HTML text.

use crate::render::units::{format_fraction, format_ns};
use lockscope_probes::TimeClass;
use std::fmt::Write as _;

/// Colors of the thread-time classes, in [`TimeClass::ALL`] order: running green, queueing for a
/// CPU orange, lock red, the other waits cooler, idleness grey.
pub const CLASS_COLORS: [&str; 9] = [
    "#009e73", "#e69f00", "#d55e00", "#cc79a7", "#f0e442", "#56b4e9", "#6a51a3", "#c8c8c8",
    "#7f7f7f",
];

/// Escapes text for XML content and attributes.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One bucket of a log2 histogram, as `report --json` writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Lower bound, nanoseconds (0 for the first bucket).
    pub lower_ns: u64,
    /// Number of values in the bucket.
    pub count: u64,
}

/// The log2 index of a bucket's lower bound (0 for 0 and 1, 1 for 2, 2 for 4, ...).
fn bucket_index(lower_ns: u64) -> u32 {
    lower_ns.checked_ilog2().unwrap_or(0)
}

/// A log2 histogram as a small inline SVG bar chart (the `report`'s ASCII distribution, drawn):
/// one bar per power of two from the smallest to the largest non-empty bucket (empty buckets
/// between them drawn as gaps), the bounds of the range beneath, each bar's range and count in
/// its tooltip. `noun` names what is counted (`waits`). Empty when there are no buckets.
pub fn histogram_svg(buckets: &[Bucket], noun: &str) -> String {
    let filled: Vec<&Bucket> = buckets.iter().filter(|b| b.count > 0).collect();
    let (Some(first), Some(last)) = (
        filled.iter().map(|b| bucket_index(b.lower_ns)).min(),
        filled.iter().map(|b| bucket_index(b.lower_ns)).max(),
    ) else {
        return String::new();
    };
    let max = filled.iter().map(|b| b.count).max().unwrap_or(1).max(1);
    let n = (last - first + 1) as f64;
    let (bar_area, plot_h) = (200.0, 34.0);
    let step = (bar_area / n).min(16.0);
    let width = step * n;
    let bound = |index: u32| if index == 0 { 0 } else { 1u64 << index };
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="histogram" width="{:.0}" height="{:.0}" viewBox="0 0 {:.0} {:.0}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="9" role="img"><title>{} by duration, log2 buckets from {} to {}</title>"#,
        width.max(90.0),
        plot_h + 12.0,
        width.max(90.0),
        plot_h + 12.0,
        xml_escape(noun),
        xml_escape(&format_ns(bound(first))),
        xml_escape(&format_ns(bound(last + 1)))
    );
    for bucket in &filled {
        let i = bucket_index(bucket.lower_ns) - first;
        // At least a pixel: a bucket of one wait among thousands still shows.
        let h = (plot_h * bucket.count as f64 / max as f64).max(1.0);
        let _ = write!(
            svg,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="#0072b2"><title>{} to {}: {} {}</title></rect>"##,
            f64::from(i) * step + 0.5,
            plot_h - h,
            (step - 1.0).max(1.0),
            xml_escape(&format_ns(bound(i + first))),
            xml_escape(&format_ns(bound(i + first + 1))),
            bucket.count,
            xml_escape(noun)
        );
    }
    let _ = write!(
        svg,
        r##"<line x1="0" y1="{plot_h}" x2="{width:.1}" y2="{plot_h}" stroke="#999"/><text x="0" y="{:.0}" fill="#555">{}</text><text x="{:.1}" y="{:.0}" text-anchor="end" fill="#555">{}</text></svg>"##,
        plot_h + 10.0,
        xml_escape(&format_ns(bound(first))),
        width.max(90.0),
        plot_h + 10.0,
        xml_escape(&format_ns(bound(last + 1)))
    );
    svg
}

/// One bar of [`time_bars_svg`]: a label and its time per class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeBar {
    /// What the bar is (a thread group: `mariadbd (59 threads)`).
    pub label: String,
    /// Time per class, nanoseconds.
    pub time_ns: Vec<(TimeClass, u64)>,
    /// The whole the shares are of (the threads' wall times summed), nanoseconds.
    pub whole_ns: u64,
}

/// Where each thread group's time went, as horizontal bars stacked by class (shares of the
/// group's thread time, 0 to 100%), in the colors of the sweep chart's bottom panel, with a
/// legend: a single recording's counterpart of that panel.
pub fn time_bars_svg(bars: &[TimeBar]) -> String {
    const LABEL_W: f64 = 220.0;
    const BAR_W: f64 = 480.0;
    const ROW_H: f64 = 22.0;
    let height = 20.0 + ROW_H * bars.len() as f64 + 44.0;
    let width = LABEL_W + BAR_W + 20.0;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="time-bars" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11" role="img"><title>Where each thread group's time went (share of thread time)</title>"#
    );
    for tick in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let x = LABEL_W + BAR_W * tick;
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="14" x2="{x:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{x:.1}" y="11" text-anchor="middle" fill="#555">{:.0}%</text>"##,
            20.0 + ROW_H * bars.len() as f64,
            tick * 100.0
        );
    }
    for (row, bar) in bars.iter().enumerate() {
        let y = 20.0 + ROW_H * row as f64;
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABEL_W - 8.0,
            y + 14.0,
            xml_escape(&bar.label)
        );
        let mut left = 0.0;
        for (class, color) in TimeClass::ALL.iter().zip(CLASS_COLORS) {
            let ns = bar
                .time_ns
                .iter()
                .find(|(c, _)| c == class)
                .map_or(0, |&(_, ns)| ns);
            if ns == 0 || bar.whole_ns == 0 {
                continue;
            }
            let fraction = (ns as f64 / bar.whole_ns as f64).min(1.0 - left).max(0.0);
            let _ = write!(
                svg,
                r#"<rect class="class-{}" x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {} {} of thread time ({})</title></rect>"#,
                class.name(),
                LABEL_W + BAR_W * left,
                BAR_W * fraction,
                ROW_H - 6.0,
                xml_escape(&bar.label),
                class.name(),
                format_fraction(fraction),
                format_ns(ns)
            );
            left += fraction;
        }
    }
    let legend_y = 20.0 + ROW_H * bars.len() as f64 + 20.0;
    for (k, (class, color)) in TimeClass::ALL.iter().zip(CLASS_COLORS).enumerate() {
        let x = 10.0 + 78.0 * k as f64;
        let _ = write!(
            svg,
            r##"<rect x="{x:.1}" y="{:.1}" width="11" height="11" fill="{color}" stroke="#999" stroke-width="0.5"/><text x="{:.1}" y="{:.1}">{}</text>"##,
            legend_y - 9.0,
            x + 15.0,
            legend_y,
            class.name()
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    /// XML text and attributes escape their five special characters.
    #[test]
    fn xml_escapes() {
        assert_eq!(xml_escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }

    /// A histogram spans its smallest to its largest non-empty bucket: one bar per non-empty
    /// bucket, the empty ones between as gaps, the range's bounds beneath and each bar's range and
    /// count in its tooltip, the fullest bar full height; no buckets draw nothing.
    #[test]
    fn histogram_bars() {
        let svg = histogram_svg(
            &[
                Bucket {
                    lower_ns: 8192,
                    count: 10,
                },
                Bucket {
                    lower_ns: 32768,
                    count: 0,
                },
                Bucket {
                    lower_ns: 65536,
                    count: 5,
                },
            ],
            "waits",
        );
        assert_eq!(svg.matches("<rect").count(), 2, "{svg}");
        assert!(
            svg.contains("<title>8.19 µs to 16.3 µs: 10 waits</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>65.5 µs to 131 µs: 5 waits</title>"),
            "{svg}"
        );
        // Four slots (8, 16, 32, 64 µs) of 16 units; the fullest bar is the plot's 34 units.
        assert!(
            svg.contains(r#"<rect x="0.5" y="0.0" width="15.0" height="34.0""#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"<rect x="48.5" y="17.0" width="15.0" height="17.0""#),
            "{svg}"
        );
        assert!(svg.contains(">8.19 µs</text>") && svg.contains(">131 µs</text>"));
        assert_eq!(histogram_svg(&[], "waits"), "");
    }

    /// A thread group's bar is stacked by class in shares of its thread time, in class order.
    #[test]
    fn time_bars() {
        let svg = time_bars_svg(&[TimeBar {
            label: "worker-* (4 threads)".to_string(),
            time_ns: vec![(TimeClass::OnCpu, 250), (TimeClass::RunQueue, 750)],
            whole_ns: 1000,
        }]);
        assert!(svg.contains(
            r#"<rect class="class-on-cpu" x="220.0" y="20.0" width="120.0" height="16.0""#
        ));
        assert!(svg.contains(
            r#"<rect class="class-run-queue" x="340.0" y="20.0" width="360.0" height="16.0""#
        ));
        assert!(svg.contains("worker-* (4 threads): run-queue 75.0% of thread time"));
    }
}
