//! A run's report ([`crate::report`]'s typed value, the one `lockscope report` writes) as
//! tables: records by kind, the top sites with their log2 histograms as small SVG bar charts and
//! their stacks folded behind `<details>`, and each section the profile has, whose tables each
//! section draws in its own file (`report/sections/`, [`crate::report::sections::Sections`]).

use super::HtmlOptions;
use crate::render::frames::{self, StackStyle};
use crate::render::svg::{histogram_svg, xml_escape, Bucket};
use crate::render::tables::{named_few, table, table_close, table_open, Cell, Column};
use crate::report::{
    build_report, Classified, FrameRow, Group, GroupKey, KindRow, Report, ReportOptions,
};
use lockscope_probes::Profile;
use std::fmt::Write as _;

/// What a report's records measure (`report --json`'s `measure`), in the page's words.
#[derive(Clone, Copy)]
pub(super) struct Words {
    /// The count's noun, plural (`waits`, `samples`, `events`).
    pub(super) noun: &'static str,
    /// What the total is (`wait time`, `CPU time`), or `None` for bare counts.
    pub(super) time: Option<&'static str>,
    /// A site's name (`wait site`, `stack`).
    pub(super) site: &'static str,
}

impl Words {
    pub(super) fn of(measure: &str) -> Words {
        match measure {
            "on-cpu" => Words {
                noun: "samples",
                time: Some("CPU time"),
                site: "stack",
            },
            "events" => Words {
                noun: "events",
                time: None,
                site: "stack",
            },
            "samples" => Words {
                noun: "samples",
                time: None,
                site: "stack",
            },
            _ => Words {
                noun: "waits",
                time: Some("wait time"),
                site: "wait site",
            },
        }
    }

    /// What a share is of (`wait time`, `samples`).
    fn whole(self) -> &'static str {
        self.time.unwrap_or(self.noun)
    }
}

/// A report stack's functions as list items, leaf first: inlined functions (innermost first)
/// before the frame they were inlined into, each with where it is (module+offset, file:line).
/// Shown per `style` ([`frames`]): by default runtime frames folded into one marked item and
/// generic parameters elided; [`StackStyle::Full`]: every frame whole.
pub(super) fn frame_items(stack: &[FrameRow], style: StackStyle) -> String {
    // (function, where, its source file, inlined).
    let mut rows: Vec<(&str, String, Option<&str>, bool)> = Vec::new();
    for frame in stack {
        for inlined in frame.inlined.iter().rev() {
            let place = format!(
                "{}:{}",
                inlined.file.as_deref().unwrap_or(""),
                inlined.line.unwrap_or(0)
            );
            rows.push((&inlined.function, place, inlined.file.as_deref(), true));
        }
        let mut place = String::new();
        if let Some(module) = frame.module.as_deref().filter(|m| !m.is_empty()) {
            let offset = frame.module_offset.as_deref().unwrap_or("");
            let _ = write!(place, "{module}+{offset}");
        }
        if let Some(file) = frame.file.as_deref().filter(|f| !f.is_empty()) {
            let _ = write!(place, " {file}:{}", frame.line.unwrap_or(0));
        }
        rows.push((&frame.function, place, frame.file.as_deref(), false));
    }
    let refs: Vec<frames::FrameRef<'_>> = rows
        .iter()
        .map(|(name, _, file, _)| frames::FrameRef { name, file: *file })
        .collect();
    let mut items = String::new();
    for line in frames::lines(&refs, style) {
        match line {
            frames::Line::Frame(i) => {
                let (name, place, _, inlined) = &rows[i];
                let _ = write!(
                    items,
                    "<li><code>{}</code> <span class=\"muted\">{}{}</span></li>",
                    xml_escape(&frames::show_name(name, style, HTML_NAME_CHARS)),
                    if *inlined { "inlined, " } else { "" },
                    xml_escape(place.trim())
                );
            }
            folded => {
                let _ = write!(
                    items,
                    "<li class=\"muted\">{}</li>",
                    xml_escape(&folded.folded_text(usize::MAX).unwrap_or_default())
                );
            }
        }
    }
    items
}

/// Most characters of a function's name in a readable stack of the page.
const HTML_NAME_CHARS: usize = 120;

/// What the offcpu probe's stackless states mean, said once beneath a table that has them.
pub(super) const NO_STACK_NOTE: &str =
    "Off-CPU time with no user stack is threads preempted or waiting in \
     the run queue for a CPU: the offcpu probe takes no stack there (where a thread runs is a CPU \
     profile's business). It is queueing for a CPU, not waiting for a lock; \"where the time \
     went\" splits it.";

/// A site's stack cell: the first frame past the wait plumbing (else the leaf) with the frame
/// count, and every frame (user, then kernel) folded behind `<details>`. A site without a user
/// stack names its states (`preempted`, `run-queue`) instead.
pub(super) fn stack_cell(group: &Group, style: StackStyle) -> String {
    let stack = group.stacks.first();
    let user: &[FrameRow] = stack
        .and_then(|s| s.user.as_ref())
        .map_or(&[], |u| u.frames.as_slice());
    let kernel: &[FrameRow] = stack
        .and_then(|s| s.kernel.as_ref())
        .map_or(&[], |k| k.frames.as_slice());
    // The site's frame (frames::site_index), inlined functions counted.
    let names: Vec<(&str, Option<&str>)> = user
        .iter()
        .flat_map(|f| {
            f.inlined
                .iter()
                .rev()
                .map(|i| (i.function.as_str(), i.file.as_deref()))
                .chain([(f.function.as_str(), f.file.as_deref())])
        })
        .collect();
    let refs: Vec<frames::FrameRef<'_>> = names
        .iter()
        .map(|&(name, file)| frames::FrameRef { name, file })
        .collect();
    let headline = frames::site_index(&refs).map(|i| frames::show_name(refs[i].name, style, 60));
    let Some(headline) = headline else {
        let states: Vec<&str> = group
            .locks
            .iter()
            .map(|l| l.operation.as_str())
            .filter(|o| !o.is_empty())
            .collect();
        let mut cell = format!(
            "<td><code>{}</code>",
            xml_escape(crate::analysis::fold::NO_USER_STACK)
        );
        if !states.is_empty() {
            let _ = write!(
                cell,
                " <span class=\"muted\">({})</span>",
                xml_escape(&named_few(&states, 4))
            );
        }
        if !kernel.is_empty() {
            let _ = write!(
                cell,
                "<details class=\"stack\"><summary>kernel stack, {} frames</summary><ol class=\"frames\">",
                kernel.len()
            );
            cell.push_str(&frame_items(kernel, StackStyle::Full));
            cell.push_str("</ol></details>");
        }
        cell.push_str("</td>");
        return cell;
    };
    let truncated = stack
        .and_then(|s| s.user.as_ref())
        .is_some_and(|u| u.truncated);
    let mut cell = format!(
        "<td><details class=\"stack\"><summary><code>{}</code> <span class=\"muted\">{} frames{}</span></summary><ol class=\"frames\">",
        xml_escape(&headline),
        user.len() + kernel.len(),
        if truncated { ", cut short" } else { "" }
    );
    cell.push_str(&frame_items(user, style));
    if !kernel.is_empty() {
        cell.push_str("<li class=\"muted\">kernel:</li>");
        cell.push_str(&frame_items(kernel, StackStyle::Full));
    }
    cell.push_str("</ol></details></td>");
    cell
}

/// Thread names with how many threads have each (`mariadbd ×53, main`).
pub(super) fn threads_cell(group: &Group) -> String {
    let mut names: Vec<(&str, usize)> = Vec::new();
    for thread in &group.threads {
        let name = thread.name.as_str();
        match names.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 += 1,
            None => names.push((name, 1)),
        }
    }
    let items: Vec<String> = names
        .iter()
        .map(|&(name, n)| {
            if n > 1 {
                format!("{name} ×{n}")
            } else {
                name.to_string()
            }
        })
        .collect();
    let items: Vec<&str> = items.iter().map(String::as_str).collect();
    format!("<td>{}</td>", xml_escape(&named_few(&items, 3)))
}

/// A group's log2 histogram as an inline SVG bar chart cell.
pub(super) fn histogram_cell(group: &Group, noun: &str) -> String {
    let buckets: Vec<Bucket> = group
        .histogram
        .iter()
        .map(|b| Bucket {
            lower_ns: b.lower_ns,
            count: b.count,
        })
        .collect();
    format!(
        "<td class=\"histogram\">{}</td>",
        histogram_svg(&buckets, noun)
    )
}

/// A run's report as a document (the value `lockscope report` writes, so the page shows its
/// numbers): the records by kind, the top sites with their distributions as small SVG bar charts
/// and their stacks folded behind `<details>`, then every section the profile has data for
/// (contention, where each thread group's time went, off-CPU states, system calls, lifecycle,
/// kernel locks), each drawn as tables by the section itself. No text dump.
pub(super) fn report_tables(
    out: &mut String,
    profile: &Profile,
    options: &HtmlOptions,
    heading: &str,
) {
    let report_options = ReportOptions {
        top: options.top,
        ..ReportOptions::default()
    };
    let report = build_report(profile, &report_options);
    let words = Words::of(report.measure);
    kinds_table(out, &report, &words, heading);
    // The waits by role, the report's value (the same as `report --json`'s `classified`), its
    // numbers also as attributes for scripts and tests.
    if let Some(c) = &report.classified {
        classified_note(out, c);
    }
    // What the probes saw, and the sleeps two probes saw counted once.
    header_notes(out, &report);
    sites_table(out, &report, &words, options, heading);
    if let Some(sections) = &report.sections {
        sections.write_html(out, heading);
    }
}

/// The records by kind.
fn kinds_table(out: &mut String, report: &Report, words: &Words, heading: &str) {
    let capitalized = |s: &str| {
        let mut c = s.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    };
    let _ = writeln!(
        out,
        "<{heading}>{} by kind</{heading}>",
        capitalized(words.noun)
    );
    let share = format!("share of {}", words.whole());
    let mut columns: Vec<Column<'_, KindRow>> = vec![
        ("kind", |k| Cell::Text(Some(k.kind.name()))),
        (words.noun, |k| Cell::Count(k.stats.count)),
    ];
    if words.time.is_some() {
        columns.extend::<[Column<'_, KindRow>; 3]>([
            ("total", |k| Cell::Ns(k.stats.total_ns)),
            ("mean", |k| Cell::Ns(k.stats.mean_ns)),
            ("max", |k| Cell::Ns(k.stats.max_ns)),
        ]);
    }
    columns.push((&share, |k| Cell::Fraction(k.stats.share)));
    table(out, "report-table", &columns, &report.by_kind);
}

/// The waits by role, as a line with its numbers as attributes.
fn classified_note(out: &mut String, c: &Classified) {
    let _ = writeln!(
            out,
            "<p class=\"note classified\" data-waits=\"{}\" data-wait-ns=\"{}\" data-contention-waits=\"{}\" data-contention-ns=\"{}\" data-idle-waits=\"{}\" data-idle-ns=\"{}\" data-neither-waits=\"{}\" data-neither-ns=\"{}\" data-cpu-saturation-intervals=\"{}\" data-cpu-saturation-ns=\"{}\"><b>By role</b> (as the contention section tells them; waits for a CPU apart): {}</p>",
            c.waits,
            c.wait_ns,
            c.contention_waits,
            c.contention_ns,
            c.idle_waits,
            c.idle_ns,
            c.neither_waits,
            c.neither_ns,
            c.cpu_saturation_intervals,
            c.cpu_saturation_ns,
            xml_escape(&c.words(true))
        );
}

/// What the probes saw, and the sleeps two probes saw counted once, as notes.
fn header_notes(out: &mut String, report: &Report) {
    let header = &report.header;
    let notes = [
        (
            "Seen",
            header
                .coverage
                .as_ref()
                .map(|c| (c.text.as_str(), c.suggestion.as_deref())),
        ),
        (
            "Merged",
            header
                .merged_sleeps
                .as_ref()
                .map(|m| (m.text.as_str(), None)),
        ),
        (
            "Merged",
            header
                .merged_lock_sleeps
                .as_ref()
                .map(|m| (m.text.as_str(), None)),
        ),
    ];
    for (label, note) in notes {
        let Some((text, suggestion)) = note else {
            continue;
        };
        let text = match suggestion {
            Some(suggestion) => format!("{text}; {suggestion}"),
            None => text.to_string(),
        };
        let _ = writeln!(
            out,
            "<p class=\"note\"><b>{label}:</b> {}</p>",
            xml_escape(&text)
        );
    }
}

/// The top sites: their numbers, distributions, threads and stacks.
fn sites_table(
    out: &mut String,
    report: &Report,
    words: &Words,
    options: &HtmlOptions,
    heading: &str,
) {
    let share = format!("share of {}", words.whole());
    let groups = &report.groups;
    let _ = writeln!(
        out,
        "<{heading}>Top {} of {} {}s</{heading}>",
        groups.len(),
        report.groups_total,
        words.site
    );
    let mut headers = vec!["#", "kind", words.noun];
    if words.time.is_some() {
        headers.extend(["total", &share, "mean", "max", "distribution (log2)"]);
    } else {
        headers.push(&share);
    }
    headers.extend(["threads", "stack (leaf first; open for every frame)"]);
    table_open(out, "report-table sites", &headers, groups.len());
    let mut stackless_offcpu = false;
    for group in groups {
        let kind = match &group.key {
            GroupKey::Stack { kind, .. } => kind.name(),
            _ => "-",
        };
        if group.stacks.first().is_none_or(|s| s.user.is_none()) && kind == "off-cpu" {
            stackless_offcpu = true;
        }
        let stats = &group.stats;
        let _ = write!(
            out,
            "<tr>{}<td>{}</td>{}",
            Cell::Count(group.rank as u64).html(),
            xml_escape(kind),
            Cell::Count(stats.count).html()
        );
        if words.time.is_some() {
            let _ = write!(
                out,
                "{}{}{}{}{}",
                Cell::Ns(stats.total_ns).html(),
                Cell::Fraction(stats.share).html(),
                Cell::Ns(stats.mean_ns).html(),
                Cell::Ns(stats.max_ns).html(),
                histogram_cell(group, words.noun)
            );
        } else {
            out.push_str(&Cell::Fraction(stats.share).html());
        }
        let _ = writeln!(
            out,
            "{}{}</tr>",
            threads_cell(group),
            stack_cell(group, options.stack_style)
        );
    }
    table_close(out);
    if stackless_offcpu {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", xml_escape(NO_STACK_NOTE));
    }
}
