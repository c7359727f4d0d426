//! HTML tables of `report --json` and `diff --json` values: cells by kind ([`Cell`]), sortable
//! long tables.

use crate::render::svg::xml_escape;
use crate::render::units::{format_fraction, format_ns};
use std::fmt::Write as _;

/// A JSON number as `u64`, 0 when absent (the report always writes the fields read here).
pub(super) fn json_u64(value: &serde_json::Value, key: &str) -> u64 {
    value
        .get(key)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0)
}

/// A JSON number as `f64`, 0 when absent.
pub(super) fn json_f64(value: &serde_json::Value, key: &str) -> f64 {
    value
        .get(key)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0)
}

/// A JSON string, `""` when absent.
pub(super) fn json_str<'a>(value: &'a serde_json::Value, key: &str) -> &'a str {
    value
        .get(key)
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
}

/// A JSON array's elements, none when absent.
pub(super) fn json_list<'a>(value: &'a serde_json::Value, key: &str) -> &'a [serde_json::Value] {
    value
        .get(key)
        .and_then(serde_json::Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// How a table cell shows a JSON value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Cell {
    /// A string as text.
    Text,
    /// A string as code (a function, a lock address).
    Code,
    /// An integer.
    Count,
    /// Nanoseconds (`134 ms`).
    Ns,
    /// A fraction 0 to 1 as a percentage.
    Fraction,
    /// A rate with one decimal.
    Rate,
    /// A list of strings, the first few named.
    List,
    /// An object of counts (`ENOENT 3, EAGAIN 1`).
    Counts,
}

/// Tables with more rows than this get clickable (sortable) headers.
pub(super) const SORTABLE_ROWS: usize = 8;

/// Opens a table with `headers`; sortable (click a header; readable without the script) when it
/// will hold more than [`SORTABLE_ROWS`] rows.
pub(super) fn table_open(out: &mut String, class: &str, headers: &[&str], rows: usize) {
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

pub(super) fn table_close(out: &mut String) {
    out.push_str("</tbody></table>\n");
}

/// A number cell: `shown`, sorted by `value`.
pub(super) fn num_cell(value: f64, shown: &str) -> String {
    format!(
        "<td class=\"num\" data-v=\"{value}\">{}</td>",
        xml_escape(shown)
    )
}

/// The cell of `row[key]` shown as `cell`.
pub(super) fn json_cell(row: &serde_json::Value, key: &str, cell: Cell) -> String {
    let value = row.get(key).unwrap_or(&serde_json::Value::Null);
    match cell {
        Cell::Text => format!("<td>{}</td>", xml_escape(value.as_str().unwrap_or("-"))),
        Cell::Code => format!(
            "<td><code>{}</code></td>",
            xml_escape(value.as_str().unwrap_or("-"))
        ),
        Cell::Count => {
            let n = value.as_u64().unwrap_or(0);
            num_cell(n as f64, &n.to_string())
        }
        Cell::Ns => {
            let ns = value.as_u64().unwrap_or(0);
            num_cell(ns as f64, &format_ns(ns))
        }
        Cell::Fraction => {
            let f = value.as_f64().unwrap_or(0.0);
            num_cell(f, &format_fraction(f))
        }
        Cell::Rate => {
            let r = value.as_f64().unwrap_or(0.0);
            num_cell(r, &format!("{r:.1}"))
        }
        Cell::List => {
            let items: Vec<&str> = value
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
                .unwrap_or_default();
            format!("<td>{}</td>", xml_escape(&named_few(&items, 4)))
        }
        Cell::Counts => {
            let items: Vec<String> = value
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| format!("{k} {}", v.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default();
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

/// `a, b, c and 4 more`.
pub(super) fn named_few(items: &[&str], few: usize) -> String {
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

/// A table of JSON `rows`, one column per `(key, header, cell)`; a line saying so when there are
/// none.
pub(super) fn json_table(
    out: &mut String,
    class: &str,
    columns: &[(&str, &str, Cell)],
    rows: &[serde_json::Value],
) {
    if rows.is_empty() {
        out.push_str("<p class=\"muted\">None.</p>\n");
        return;
    }
    let headers: Vec<&str> = columns.iter().map(|c| c.1).collect();
    table_open(out, class, &headers, rows.len());
    for row in rows {
        out.push_str("<tr>");
        for (key, _, cell) in columns {
            out.push_str(&json_cell(row, key, *cell));
        }
        out.push_str("</tr>\n");
    }
    table_close(out);
}
