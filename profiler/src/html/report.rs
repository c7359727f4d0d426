//! A run's report ([`crate::report`]'s typed value, the one `lockscope report` writes) as
//! tables: records by kind, the top sites with their log2 histograms as small SVG bar charts and
//! their stacks folded behind `<details>`, and each section the profile has, whose tables each
//! section draws in its own file (`report/sections/`, [`crate::report::sections::Sections`]).

use super::HtmlOptions;
use crate::render::svg::{histogram_svg, xml_escape, Bucket};
use crate::render::tables::{named_few, table, table_close, table_open, Cell, Column};
use crate::report::{build_report, FrameRow, Group, GroupKey, KindRow, ReportOptions};
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

/// One frame of a report's stack as a list item: the function (or address), then where.
pub(super) fn frame_item(frame: &FrameRow) -> String {
    let mut place = String::new();
    if let Some(module) = frame.module.as_deref().filter(|m| !m.is_empty()) {
        let offset = frame.module_offset.as_deref().unwrap_or("");
        let _ = write!(place, "{module}+{offset}");
    }
    if let Some(file) = frame.file.as_deref().filter(|f| !f.is_empty()) {
        let _ = write!(place, " {file}:{}", frame.line.unwrap_or(0));
    }
    let mut item = String::new();
    for inlined in frame.inlined.iter().rev() {
        let _ = write!(
            item,
            "<li><code>{}</code> <span class=\"muted\">inlined, {}:{}</span></li>",
            xml_escape(&inlined.function),
            xml_escape(inlined.file.as_deref().unwrap_or("")),
            inlined.line.unwrap_or(0)
        );
    }
    let _ = write!(
        item,
        "<li><code>{}</code> <span class=\"muted\">{}</span></li>",
        xml_escape(&frame.function),
        xml_escape(place.trim())
    );
    item
}

/// What the offcpu probe's stackless states mean, said once beneath a table that has them.
pub(super) const NO_STACK_NOTE: &str =
    "Off-CPU time with no user stack is threads preempted or waiting in \
     the run queue for a CPU: the offcpu probe takes no stack there (where a thread runs is a CPU \
     profile's business). It is queueing for a CPU, not waiting for a lock; \"where the time \
     went\" splits it.";

/// A site's stack cell: the first frame past the wait plumbing (else the leaf) with the frame
/// count, and every frame (user, then kernel) folded behind `<details>`. A site without a user
/// stack names its states (`preempted`, `run-queue`) instead.
pub(super) fn stack_cell(group: &Group) -> String {
    let stack = group.stacks.first();
    let user: &[FrameRow] = stack
        .and_then(|s| s.user.as_ref())
        .map_or(&[], |u| u.frames.as_slice());
    let kernel: &[FrameRow] = stack
        .and_then(|s| s.kernel.as_ref())
        .map_or(&[], |k| k.frames.as_slice());
    let headline = user
        .iter()
        .map(|f| f.function.as_str())
        .find(|n| !crate::report::sections::is_wait_plumbing(n))
        .or_else(|| user.first().map(|f| f.function.as_str()));
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
            for frame in kernel {
                cell.push_str(&frame_item(frame));
            }
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
        xml_escape(headline),
        user.len() + kernel.len(),
        if truncated { ", cut short" } else { "" }
    );
    for frame in user {
        cell.push_str(&frame_item(frame));
    }
    if !kernel.is_empty() {
        cell.push_str("<li class=\"muted\">kernel:</li>");
        for frame in kernel {
            cell.push_str(&frame_item(frame));
        }
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
    // The waits by role, the report's value (the same as `report --json`'s `classified`), its
    // numbers also as attributes for scripts and tests.
    if let Some(c) = &report.classified {
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
    // What the probes saw, and the sleeps two probes saw counted once.
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
        let _ = writeln!(out, "{}{}</tr>", threads_cell(group), stack_cell(group));
    }
    table_close(out);
    if stackless_offcpu {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", xml_escape(NO_STACK_NOTE));
    }
    if let Some(sections) = &report.sections {
        sections.write_html(out, heading);
    }
}
