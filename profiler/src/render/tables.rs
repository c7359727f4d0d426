//! HTML tables of the report's and the diff's values: cells by kind ([`Cell`]), sortable long
//! tables. The report's sections draw their tables with these in their own files
//! (`report/sections/`), and the HTML page its other tables (`html/`).

use crate::render::svg::xml_escape;
use crate::render::units::{format_fraction, format_ns};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A table cell: its value, and how it is shown.
#[derive(Clone, Copy)]
pub(crate) enum Cell<'a> {
    /// Text; `-` when absent.
    Text(Option<&'a str>),
    /// Code (a function, a lock address); `-` when absent.
    Code(Option<&'a str>),
    /// An integer.
    Count(u64),
    /// Nanoseconds (`134 ms`).
    Ns(u64),
    /// A fraction 0 to 1 as a percentage.
    Fraction(f64),
    /// A rate with one decimal.
    Rate(f64),
    /// Strings, the first few named.
    List(&'a [String]),
    /// Counts by name (`ENOENT 3, EAGAIN 1`), in name order.
    Counts(&'a BTreeMap<String, u64>),
}

impl Cell<'_> {
    /// The `<td>` of the cell.
    pub(crate) fn html(self) -> String {
        // A share of nothing (NaN) shows as 0, as the page always drew it (JSON has no NaN).
        let finite = |f: f64| if f.is_finite() { f } else { 0.0 };
        match self {
            Cell::Text(text) => format!("<td>{}</td>", xml_escape(text.unwrap_or("-"))),
            Cell::Code(code) => {
                format!("<td><code>{}</code></td>", xml_escape(code.unwrap_or("-")))
            }
            Cell::Count(n) => num_cell(n as f64, &n.to_string()),
            Cell::Ns(ns) => num_cell(ns as f64, &format_ns(ns)),
            Cell::Fraction(f) => {
                let f = finite(f);
                num_cell(f, &format_fraction(f))
            }
            Cell::Rate(r) => {
                let r = finite(r);
                num_cell(r, &format!("{r:.1}"))
            }
            Cell::List(items) => {
                let items: Vec<&str> = items.iter().map(String::as_str).collect();
                format!("<td>{}</td>", xml_escape(&named_few(&items, 4)))
            }
            Cell::Counts(counts) => {
                let items: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
                format!(
                    "<td>{}</td>",
                    if items.is_empty() {
                        "-".to_string()
                    } else {
                        xml_escape(&items.join(", "))
                    }
                )
            }
        }
    }
}

/// A table column: its header, and its cell of a row.
pub(crate) type Column<'h, T> = (&'h str, fn(&T) -> Cell<'_>);

/// Tables with more rows than this get clickable (sortable) headers.
pub(crate) const SORTABLE_ROWS: usize = 8;

/// Opens a table with `headers`; sortable (click a header; readable without the script) when it
/// will hold more than [`SORTABLE_ROWS`] rows.
pub(crate) fn table_open(out: &mut String, class: &str, headers: &[&str], rows: usize) {
    let sortable = if rows > SORTABLE_ROWS {
        " sortable"
    } else {
        ""
    };
    let _ = write!(out, "<table class=\"{class}{sortable}\">\n<thead><tr>");
    for header in headers {
        let _ = write!(out, "<th>{}</th>", xml_escape(header));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
}

pub(crate) fn table_close(out: &mut String) {
    out.push_str("</tbody></table>\n");
}

/// A number cell: `shown`, sorted by `value`.
pub(crate) fn num_cell(value: f64, shown: &str) -> String {
    format!(
        "<td class=\"num\" data-v=\"{value}\">{}</td>",
        xml_escape(shown)
    )
}

/// `a, b, c and 4 more`.
pub(crate) fn named_few(items: &[&str], few: usize) -> String {
    if items.is_empty() {
        return "-".to_string();
    }
    let mut text = items
        .iter()
        .take(few)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > few {
        let _ = write!(text, " and {} more", items.len() - few);
    }
    text
}

/// A table of `rows`, one cell per column; a line saying so when there are none.
pub(crate) fn table<T>(out: &mut String, class: &str, columns: &[Column<'_, T>], rows: &[T]) {
    if rows.is_empty() {
        out.push_str("<p class=\"muted\">None.</p>\n");
        return;
    }
    let headers: Vec<&str> = columns.iter().map(|c| c.0).collect();
    table_open(out, class, &headers, rows.len());
    for row in rows {
        out.push_str("<tr>");
        for (_, cell) in columns {
            out.push_str(&cell(row).html());
        }
        out.push_str("</tr>\n");
    }
    table_close(out);
}
