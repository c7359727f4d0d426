//! The [`Report`] as text for people: the header, the records by kind, the top groups with their
//! stacks (leaf first) and histograms, then the sections. Times in the convention of
//! [`crate::render::units`]. One file per block: `text/header.rs` the header, `text/groups.rs`
//! the top groups; the sections write their own.

use super::model::{Report, Stats};
use super::ReportOptions;
use crate::render::units::{format_ns, format_percent};
use std::fmt::Write as _;

/// Appends one line; writing to a String cannot fail.
macro_rules! put {
    ($out:expr) => {{
        $out.push('\n');
    }};
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

mod groups;
mod header;

/// `1 wait`, `2 waits`.
pub(super) fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl Report {
    /// The whole report as text.
    pub(super) fn to_text(&self, options: &ReportOptions) -> String {
        let mut out = self.header_text();
        self.kinds_text(&mut out);
        self.groups_text(&mut out, options);
        if let Some(sections) = &self.sections {
            sections.write_text(&mut out, options.stack_style);
        }
        out
    }

    /// The records by kind: count, times and share of each kind and of all.
    fn kinds_text(&self, out: &mut String) {
        let m = self.measure_kind;
        put!(out);
        if !m.has_durations() {
            let noun = m.noun(2);
            put!(out, "{}{} by kind", noun[..1].to_uppercase(), &noun[1..]);
            put!(out, "  {:<13}{:>12}{:>8}", "kind", noun, "share");
            let time = |s: &Stats| {
                if m.is_timed() {
                    format!("  {} on CPU", format_ns(s.total_ns))
                } else {
                    String::new()
                }
            };
            for k in &self.by_kind {
                put!(
                    out,
                    "  {:<13}{:>12}{:>7.1}%{}",
                    k.kind.name(),
                    k.stats.count,
                    k.stats.share * 100.0,
                    time(&k.stats)
                );
            }
            let all = &self.totals;
            put!(
                out,
                "  {:<13}{:>12}{:>7.1}%{}",
                "all",
                all.count,
                all.share * 100.0,
                time(all)
            );
            return;
        }
        let noun = m.noun(2);
        put!(out, "{}{} by kind", noun[..1].to_uppercase(), &noun[1..]);
        if self.by_kind.is_empty() {
            put!(out, "  (no {noun} recorded)");
            return;
        }
        put!(
            out,
            "  {:<13}{:>8}{:>11}{:>11}{:>11}{:>8}",
            "kind",
            noun,
            "total",
            "mean",
            "max",
            "share"
        );
        let row = |out: &mut String, name: &str, s: &Stats, whole: u64| {
            put!(
                out,
                "  {name:<13}{:>8}{:>11}{:>11}{:>11}{:>8}",
                s.count,
                format_ns(s.total_ns),
                format_ns(s.mean_ns),
                format_ns(s.max_ns),
                format_percent(s.total_ns, whole)
            );
        };
        let whole = self.totals.total_ns;
        for k in &self.by_kind {
            row(out, k.kind.name(), &k.stats, whole);
        }
        row(out, "all", &self.totals, whole);
    }
}
