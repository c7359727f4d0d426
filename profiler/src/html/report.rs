//! A run's report ([`crate::report`]'s JSON) as tables: records by kind, the top sites with
//! their log2 histograms as small SVG bar charts and their stacks folded behind `<details>`,
//! and each section the profile has.

use super::tables::{
    json_cell, json_list, json_str, json_table, json_u64, named_few, num_cell, table_close,
    table_open, Cell,
};
use super::HtmlOptions;
use crate::render::svg::{histogram_svg, time_bars_svg, xml_escape, Bucket, TimeBar};
use crate::render::units::format_fraction;
use crate::report::{write_report, ReportOptions};
use anyhow::Context;
use lockscope_probes::{Profile, TimeClass};
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

/// One frame of `report --json` as a list item: the function (or address), then where.
pub(super) fn frame_item(frame: &serde_json::Value) -> String {
    let function = frame
        .get("function")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_else(|| json_str(frame, "address"));
    let mut place = String::new();
    let (module, offset) = (json_str(frame, "module"), json_str(frame, "module_offset"));
    if !module.is_empty() {
        let _ = write!(place, "{module}+{offset}");
    }
    let file = json_str(frame, "file");
    if !file.is_empty() {
        let _ = write!(place, " {file}:{}", json_u64(frame, "line"));
    }
    let mut item = String::new();
    for inlined in json_list(frame, "inlined").iter().rev() {
        let _ = write!(
            item,
            "<li><code>{}</code> <span class=\"muted\">inlined, {}:{}</span></li>",
            xml_escape(json_str(inlined, "function")),
            xml_escape(json_str(inlined, "file")),
            json_u64(inlined, "line")
        );
    }
    let _ = write!(
        item,
        "<li><code>{}</code> <span class=\"muted\">{}</span></li>",
        xml_escape(function),
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
pub(super) fn stack_cell(group: &serde_json::Value) -> String {
    let stack = group
        .pointer("/stacks/0")
        .unwrap_or(&serde_json::Value::Null);
    let user = stack
        .pointer("/user/frames")
        .and_then(serde_json::Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let kernel = stack
        .pointer("/kernel/frames")
        .and_then(serde_json::Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let name = |f: &serde_json::Value| {
        f.get("function")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_else(|| json_str(f, "address"))
            .to_string()
    };
    let headline = user
        .iter()
        .map(name)
        .find(|n| !crate::report::sections::is_wait_plumbing(n))
        .or_else(|| user.first().map(name));
    let Some(headline) = headline else {
        let states: Vec<&str> = json_list(group, "locks")
            .iter()
            .map(|l| json_str(l, "operation"))
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
    let mut cell = format!(
        "<td><details class=\"stack\"><summary><code>{}</code> <span class=\"muted\">{} frames{}</span></summary><ol class=\"frames\">",
        xml_escape(&headline),
        user.len() + kernel.len(),
        if stack.pointer("/user/truncated") == Some(&serde_json::Value::Bool(true)) {
            ", cut short"
        } else {
            ""
        }
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
pub(super) fn threads_cell(group: &serde_json::Value) -> String {
    let mut names: Vec<(&str, usize)> = Vec::new();
    for thread in json_list(group, "threads") {
        let name = json_str(thread, "name");
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
pub(super) fn histogram_cell(group: &serde_json::Value, noun: &str) -> String {
    let buckets: Vec<Bucket> = json_list(group, "histogram")
        .iter()
        .map(|b| Bucket {
            lower_ns: json_u64(b, "lower_ns"),
            count: json_u64(b, "count"),
        })
        .collect();
    format!(
        "<td class=\"histogram\">{}</td>",
        histogram_svg(&buckets, noun)
    )
}

/// What the contention tables' "ended by" column means.
const ENDED_BY_NOTE: &str = "Ended by: who ended the sleeps, as a share of the time whose waker \
    is known: program = another thread of the program (so a latch, a semaphore or epoll_wait \
    another thread ended is contention), outside = another process, interrupt = a timer, a \
    device or the network; holder = a lock's wait, ended by its release (who ended it not \
    recorded); parked = a thread parked most of its window at one site.";

/// A run's report as a document (from `report --json`, so the page shows `lockscope report`'s
/// numbers): the records by kind, the top sites with their distributions as small SVG bar charts
/// and their stacks folded behind `<details>`, then every section the profile has data for
/// (contention, where each thread group's time went, off-CPU states, system calls, lifecycle,
/// kernel locks) as tables. No text dump.
pub(super) fn report_tables(
    out: &mut String,
    profile: &Profile,
    options: &HtmlOptions,
    heading: &str,
) {
    let mut report_options = ReportOptions {
        top: options.top,
        ..ReportOptions::default()
    };
    report_options.json = true;
    let mut json = Vec::new();
    let report: serde_json::Value = match write_report(profile, &report_options, &mut json)
        .map_err(anyhow::Error::from)
        .and_then(|()| serde_json::from_slice(&json).context("the JSON report does not parse"))
    {
        Ok(report) => report,
        Err(e) => {
            let _ = writeln!(
                out,
                r#"<p class="warning">No report: {}</p>"#,
                xml_escape(&format!("{e:#}"))
            );
            return;
        }
    };
    let words = Words::of(json_str(&report, "measure"));
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
    let mut columns: Vec<(&str, &str, Cell)> = vec![
        ("kind", "kind", Cell::Text),
        ("count", words.noun, Cell::Count),
    ];
    if words.time.is_some() {
        columns.extend([
            ("total_ns", "total", Cell::Ns),
            ("mean_ns", "mean", Cell::Ns),
            ("max_ns", "max", Cell::Ns),
        ]);
    }
    columns.push(("share", &share, Cell::Fraction));
    json_table(out, "report-table", &columns, json_list(&report, "by_kind"));
    // What the probes saw, and the sleeps two probes saw counted once.
    for (key, label) in [("coverage", "Seen"), ("merged_sleeps", "Merged")] {
        let Some(part) = report.pointer(&format!("/header/{key}")) else {
            continue;
        };
        let mut text = json_str(part, "text").to_string();
        if let Some(suggestion) = part.get("suggestion").and_then(serde_json::Value::as_str) {
            text = format!("{text}; {suggestion}");
        }
        let _ = writeln!(
            out,
            "<p class=\"note\"><b>{label}:</b> {}</p>",
            xml_escape(&text)
        );
    }

    let groups = json_list(&report, "groups");
    let _ = writeln!(
        out,
        "<{heading}>Top {} of {} {}s</{heading}>",
        groups.len(),
        json_u64(&report, "groups_total"),
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
        let kind = group
            .pointer("/key/kind")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("-");
        if group
            .pointer("/stacks/0/user")
            .is_none_or(serde_json::Value::is_null)
            && kind == "off-cpu"
        {
            stackless_offcpu = true;
        }
        let _ = write!(
            out,
            "<tr>{}<td>{}</td>{}",
            json_cell(group, "rank", Cell::Count),
            xml_escape(kind),
            json_cell(group, "count", Cell::Count)
        );
        if words.time.is_some() {
            let _ = write!(
                out,
                "{}{}{}{}{}",
                json_cell(group, "total_ns", Cell::Ns),
                json_cell(group, "share", Cell::Fraction),
                json_cell(group, "mean_ns", Cell::Ns),
                json_cell(group, "max_ns", Cell::Ns),
                histogram_cell(group, words.noun)
            );
        } else {
            out.push_str(&json_cell(group, "share", Cell::Fraction));
        }
        let _ = writeln!(out, "{}{}</tr>", threads_cell(group), stack_cell(group));
    }
    table_close(out);
    if stackless_offcpu {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", xml_escape(NO_STACK_NOTE));
    }
    if let Some(sections) = report.get("sections") {
        section_tables(out, sections, heading);
    }
}

/// The report's sections (`report --json`'s `sections`) as tables, and where each thread
/// group's time went as stacked bars.
pub(super) fn section_tables(out: &mut String, sections: &serde_json::Value, heading: &str) {
    if let Some(contention) = sections.get("contention") {
        let columns = [
            ("kind", "kind", Cell::Text),
            (
                "frame",
                "site (first frame past the lock plumbing)",
                Cell::Code,
            ),
            ("operation", "operation", Cell::Code),
            ("count", "waits", Cell::Count),
            ("total_ns", "total", Cell::Ns),
            ("max_ns", "max", Cell::Ns),
            ("ended_by", "ended by", Cell::Text),
            ("threads", "threads", Cell::List),
        ];
        let _ = writeln!(
            out,
            "<{heading}>Contention: waits on other threads of the program</{heading}>"
        );
        let sites = json_list(contention, "sites");
        if sites.is_empty() {
            let _ = writeln!(
                out,
                "<p class=\"muted\">No waits on other threads of the program{}.</p>",
                if contention.get("wakers_known") == Some(&serde_json::Value::Bool(true)) {
                    ""
                } else {
                    " told: no mutex, rwlock or kernel-lock waits, and who ended the other sleeps was not recorded"
                }
            );
        } else {
            json_table(out, "section-table", &columns, sites);
        }
        let idle = json_list(contention, "idle");
        if !idle.is_empty() {
            let _ = writeln!(
                out,
                "<p class=\"muted\">Idle waits, apart: waiting for something outside the program (a client, a timer), or a thread parked most of its window at one site.</p>"
            );
            json_table(out, "section-table", &columns, idle);
        }
        let _ = writeln!(out, "<p class=\"note\">{}</p>", xml_escape(ENDED_BY_NOTE));
    }
    if let Some(breakdown) = sections.get("breakdown") {
        let _ = writeln!(
            out,
            "<{heading}>Where the time went, per thread group (share of thread time)</{heading}>"
        );
        let mut rows: Vec<&serde_json::Value> =
            json_list(breakdown, "by_name").iter().take(12).collect();
        if let Some(total) = breakdown.get("total") {
            rows.push(total);
        }
        let bars: Vec<TimeBar> = rows
            .iter()
            .map(|row| TimeBar {
                label: match json_u64(row, "threads") {
                    1 => format!("{} (1 thread)", json_str(row, "name")),
                    n => format!("{} ({n} threads)", json_str(row, "name")),
                },
                time_ns: TimeClass::ALL
                    .iter()
                    .map(|&class| {
                        (
                            class,
                            row.pointer(&format!("/time_ns/{}", class.name()))
                                .and_then(serde_json::Value::as_u64)
                                .unwrap_or(0),
                        )
                    })
                    .collect(),
                whole_ns: json_u64(row, "wall_ns"),
            })
            .collect();
        let _ = writeln!(
            out,
            "<div class=\"time-bars\">{}</div>",
            time_bars_svg(&bars)
        );
        let woken = rows.iter().any(|r| r.get("woken_ns").is_some());
        let mut headers = vec!["thread group", "threads", "thread time"];
        headers.extend(TimeClass::ALL.iter().map(|c| c.name()));
        if woken {
            headers.extend(["asleep on the program", "asleep for outside"]);
        }
        headers.extend(["switches/s", "involuntary"]);
        table_open(out, "section-table breakdown-table", &headers, rows.len());
        for (row, bar) in rows.iter().zip(&bars) {
            let _ = write!(
                out,
                "<tr><td>{}</td>{}{}",
                xml_escape(json_str(row, "name")),
                json_cell(row, "threads", Cell::Count),
                json_cell(row, "wall_ns", Cell::Ns)
            );
            for (_, ns) in &bar.time_ns {
                let fraction = if bar.whole_ns == 0 {
                    0.0
                } else {
                    *ns as f64 / bar.whole_ns as f64
                };
                out.push_str(&num_cell(fraction, &format_fraction(fraction)));
            }
            if woken {
                let by = |name: &str| {
                    row.pointer(&format!("/woken_ns/{name}"))
                        .and_then(serde_json::Value::as_u64)
                        .unwrap_or(0)
                };
                for ns in [by("program"), by("outside") + by("interrupt")] {
                    let fraction = if bar.whole_ns == 0 {
                        0.0
                    } else {
                        ns as f64 / bar.whole_ns as f64
                    };
                    out.push_str(&num_cell(fraction, &format_fraction(fraction)));
                }
            }
            let _ = writeln!(
                out,
                "{}{}</tr>",
                json_cell(row, "switches_per_s", Cell::Rate),
                json_cell(row, "involuntary_share", Cell::Fraction)
            );
        }
        table_close(out);
        if woken {
            let _ = writeln!(
                out,
                "<p class=\"note\">The classes add up to the thread time, sleeps by system call; the two columns after them split the time asleep by who ended the sleeps, whatever they slept in: another thread of the program (waiting on it: a latch in <code>epoll_wait</code> is as much a wait on another thread as a mutex), or something outside it (another process, a timer, a device, the network: idle, or I/O).</p>"
            );
        }
    }
    if let Some(offcpu) = sections.get("offcpu") {
        let _ = writeln!(
            out,
            "<{heading}>Off-CPU time by state and system call</{heading}>"
        );
        json_table(
            out,
            "section-table",
            &[
                ("operation", "state", Cell::Code),
                ("count", "intervals", Cell::Count),
                ("total_ns", "total", Cell::Ns),
                ("max_ns", "max", Cell::Ns),
            ],
            json_list(offcpu, "by_operation"),
        );
        let wakeups = json_list(offcpu, "wakeups");
        if !wakeups.is_empty() {
            let _ = writeln!(out, "<p>Heaviest wakers of sleeping threads:</p>");
            json_table(
                out,
                "section-table",
                &[
                    ("waker", "waker", Cell::Text),
                    ("sleeper", "sleeper", Cell::Text),
                    ("count", "wakeups", Cell::Count),
                    ("total_ns", "sleep ended", Cell::Ns),
                ],
                wakeups,
            );
        }
    }
    let simple = [
        (
            "syscall",
            "System calls",
            &[
                ("syscall", "system call", Cell::Code),
                ("calls", "calls", Cell::Count),
                ("errors", "errors", Cell::Counts),
                ("total_ns", "total", Cell::Ns),
                ("mean_ns", "mean", Cell::Ns),
                ("max_ns", "max", Cell::Ns),
                ("p99_upper_ns", "p99≤", Cell::Ns),
                ("slowest_site", "slowest call's site", Cell::Code),
            ][..],
        ),
        (
            "lifecycle",
            "Processes and threads",
            &[
                ("operation", "operation", Cell::Code),
                ("count", "count", Cell::Count),
                ("per_second", "per second", Cell::Rate),
                ("failed", "failed", Cell::Count),
                ("total_ns", "total", Cell::Ns),
                ("mean_ns", "mean", Cell::Ns),
                ("max_ns", "max", Cell::Ns),
                ("top_site", "heaviest caller", Cell::Code),
            ][..],
        ),
        (
            "klock",
            "Kernel locks",
            &[
                ("lock_type", "type", Cell::Text),
                ("address", "address", Cell::Code),
                ("count", "waits", Cell::Count),
                ("total_ns", "total", Cell::Ns),
                ("max_ns", "max", Cell::Ns),
                ("caller", "caller", Cell::Code),
                ("threads", "threads", Cell::List),
            ][..],
        ),
    ];
    for (key, title, columns) in simple {
        if let Some(rows) = sections.get(key).and_then(serde_json::Value::as_array) {
            let _ = writeln!(out, "<{heading}>{title}</{heading}>");
            json_table(out, "section-table", columns, rows);
        }
    }
}
