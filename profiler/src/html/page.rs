//! The page's skeleton: its styles and its one script, and how a flamegraph's SVG is embedded
//! (a `data:` URL in an `<iframe>`, so its script and ids stay apart from the page's).

use crate::render::svg::{time_bars_svg, xml_escape, TimeBar};
use crate::render::units::format_threads;
use crate::sweep::Breakdown;
use lockscope_probes::TimeClass;
use std::fmt::Write as _;

pub(super) const STYLE: &str = r#"
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1240px; padding: 0 12px; color: #222; }
h1 { font-size: 24px; } h2 { font-size: 20px; border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 36px; }
h3 { font-size: 16px; margin-top: 20px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #f3f3f3; }
table.sortable th { cursor: pointer; }
table.sortable th[data-order="asc"]::after { content: " ▲"; }
table.sortable th[data-order="desc"]::after { content: " ▼"; }
td.histogram { padding: 2px 6px; }
svg.histogram { display: block; }
details.stack > summary { cursor: pointer; }
ol.frames { margin: 4px 0; padding-left: 22px; font-size: 12px; }
ol.frames li { margin: 1px 0; }
code { font-size: 12px; word-break: break-word; }
.finding { background: #eef6ff; border-left: 4px solid #0072b2; padding: 8px 12px; font-size: 15px; }
.warning { background: #fff4e5; border-left: 4px solid #d55e00; padding: 6px 12px; }
.note { background: #f5f5f5; border-left: 4px solid #999; padding: 6px 12px; font-size: 13px; }
iframe.flame { width: 100%; height: 520px; border: 1px solid #ddd; }
nav li { margin: 2px 0; }
.levels { margin: 8px 0; font-size: 14px; }
.levels a { margin-right: 10px; }
details.level { border: 1px solid #ddd; border-radius: 4px; margin: 10px 0; padding: 0 12px 8px; }
details.level > summary { cursor: pointer; font-weight: bold; padding: 8px 0; }
details.level h4 { font-size: 14px; margin: 14px 0 6px; }
.muted { color: #666; }
section.summary { background: #f7f9fb; border: 1px solid #d8e0e8; border-radius: 4px; padding: 4px 14px 10px; }
section.summary h2 { margin-top: 8px; }
table.summary-table { font-size: 14px; }
table.summary-table th { width: 150px; }
@media print {
  body { max-width: none; margin: 0; font-size: 11px; }
  nav, .levels { display: none; }
  h2, h3, h4 { break-after: avoid; }
  tr, svg, section.summary, .finding { break-inside: avoid; }
  iframe.flame { height: 420px; break-inside: avoid; }
  details.level { border: none; padding: 0; }
  a { color: inherit; text-decoration: none; }
  table.sortable th::after { content: none; }
}
"#;

/// The page's only script, and nothing needs it to be read: long tables sort on a click on a
/// header (numbers by their `data-v` value), and printing opens every folded section first.
pub(super) const SCRIPT: &str = r#"
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('thead th').forEach(function (th, col) {
    th.title = 'sort by this column';
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      var desc = th.getAttribute('data-order') !== 'desc';
      table.querySelectorAll('thead th').forEach(function (h) { h.removeAttribute('data-order'); });
      th.setAttribute('data-order', desc ? 'desc' : 'asc');
      var key = function (row) {
        var cell = row.cells[col];
        if (!cell) { return ''; }
        var v = cell.getAttribute('data-v');
        return v === null ? cell.textContent : parseFloat(v);
      };
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var order = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
        return desc ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
window.addEventListener('beforeprint', function () {
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
});
"#;

/// Standard base64 (RFC 4648, with padding), for `data:` URLs.
pub(super) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `height` attribute of an SVG's root element, in pixels.
pub(super) fn svg_height(svg: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(svg).ok()?;
    let root = &text[text.find("<svg")?..];
    let root = &root[..root.find('>')?];
    let start = root.find(" height=\"")? + " height=\"".len();
    let value = &root[start..];
    value[..value.find('"')?]
        .trim_end_matches("px")
        .parse::<f64>()
        .ok()
        .map(|h| h.ceil() as u32)
}

/// Embeds an SVG in an iframe as a `data:` URL, as tall as the SVG (at most 900 px).
pub(super) fn iframe_svg(out: &mut String, svg: &[u8], title: &str) {
    let height = svg_height(svg).map_or(520, |h| (h + 24).min(900));
    let _ = writeln!(
        out,
        r#"<iframe class="flame" style="height: {height}px" title="{}" src="data:image/svg+xml;base64,{}"></iframe>"#,
        xml_escape(title),
        base64(svg)
    );
}

pub(super) fn anchor(prefix: &str, i: usize) -> String {
    format!("{prefix}-{i}")
}

/// Where the threads' time went, one bar per `(label, breakdown)` stacked by class, each label
/// followed by its threads alive, under `caption`; empty without any breakdown.
pub(super) fn breakdown_bars<'a>(
    breakdowns: impl IntoIterator<Item = (String, &'a Breakdown)>,
    caption: &str,
) -> String {
    let bars: Vec<TimeBar> = breakdowns
        .into_iter()
        .map(|(label, b)| TimeBar {
            label: format!(
                "{label} ({} alive)",
                format_threads(b.avg_threads).trim_end_matches(" threads")
            ),
            time_ns: TimeClass::ALL
                .iter()
                .map(|&class| (class, b.class(class.name()).map_or(0, |c| c.total_ns)))
                .collect(),
            whole_ns: b.thread_ns,
        })
        .collect();
    if bars.is_empty() {
        return String::new();
    }
    format!(
        "<p class=\"muted\">{caption}</p>\n<div class=\"time-bars\">{}</div>\n",
        time_bars_svg(&bars)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// base64 matches RFC 4648's test vectors.
    #[test]
    fn base64_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected);
        }
    }
}
