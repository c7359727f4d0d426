//! A run's report ([`crate::report`]'s typed value, the one `lockscope report` writes) as
//! tables: records by kind, the top sites with their log2 histograms as small SVG bar charts and
//! their stacks folded behind `<details>`, and each section the profile has.

use super::tables::{named_few, num_cell, table, table_close, table_open, Cell, Column};
use super::HtmlOptions;
use crate::render::svg::{histogram_svg, time_bars_svg, xml_escape, Bucket, TimeBar};
use crate::render::units::format_fraction;
use crate::report::sections::{
    KlockRow, LifecycleRow, OperationRow, Sections, SiteRow, SyscallRow, TimeRow, WakeupRow,
};
use crate::report::{build_report, FrameRow, Group, GroupKey, KindRow, ReportOptions};
use lockscope_probes::waitfor::WokenBy;
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

/// What the contention tables' "ended by" column means.
const ENDED_BY_NOTE: &str = "Ended by: who ended the sleeps, as a share of the time whose waker \
    is known: program = another thread of the program (so a latch, a semaphore or epoll_wait \
    another thread ended is contention), outside = another process, interrupt = a timer, a \
    device or the network; holder = a lock's wait, ended by its release (who ended it not \
    recorded); parked = a thread parked most of its window at one site.";

/// A run's report as a document (the value `lockscope report` writes, so the page shows its
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
        section_tables(out, sections, heading);
    }
}

/// The report's sections as tables, and where each thread group's time went as stacked bars.
pub(super) fn section_tables(out: &mut String, sections: &Sections, heading: &str) {
    if let Some(contention) = &sections.contention {
        let columns: [Column<'_, SiteRow>; 8] = [
            ("kind", |s| Cell::Text(Some(s.kind.name()))),
            ("site (first frame past the lock plumbing)", |s| {
                Cell::Code(Some(&s.frame))
            }),
            ("operation", |s| Cell::Code(Some(&s.operation))),
            ("waits", |s| Cell::Count(s.count)),
            ("total", |s| Cell::Ns(s.total_ns)),
            ("max", |s| Cell::Ns(s.max_ns)),
            ("ended by", |s| Cell::Text(s.ended_by.as_deref())),
            ("threads", |s| Cell::List(&s.threads)),
        ];
        let _ = writeln!(
            out,
            "<{heading}>Contention: waits on other threads of the program</{heading}>"
        );
        if contention.sites.is_empty() {
            let _ = writeln!(
                out,
                "<p class=\"muted\">No waits on other threads of the program{}.</p>",
                if contention.wakers_known {
                    ""
                } else {
                    " told: no mutex, rwlock or kernel-lock waits, and who ended the other sleeps was not recorded"
                }
            );
        } else {
            table(out, "section-table", &columns, &contention.sites);
        }
        if !contention.idle.is_empty() {
            let _ = writeln!(
                out,
                "<p class=\"muted\">Idle waits, apart: waiting for something outside the program (a client, a timer), or a thread parked most of its window at one site.</p>"
            );
            table(out, "section-table", &columns, &contention.idle);
        }
        let _ = writeln!(out, "<p class=\"note\">{}</p>", xml_escape(ENDED_BY_NOTE));
    }
    if let Some(breakdown) = &sections.breakdown {
        let _ = writeln!(
            out,
            "<{heading}>Where the time went, per thread group (share of thread time)</{heading}>"
        );
        let mut rows: Vec<&TimeRow> = breakdown.by_name.iter().take(12).collect();
        rows.push(&breakdown.total);
        let bars: Vec<TimeBar> = rows
            .iter()
            .map(|row| TimeBar {
                label: match row.threads {
                    1 => format!("{} (1 thread)", row.name),
                    n => format!("{} ({n} threads)", row.name),
                },
                time_ns: TimeClass::ALL
                    .iter()
                    .map(|&class| (class, row.time_ns.get(&class).copied().unwrap_or(0)))
                    .collect(),
                whole_ns: row.wall_ns,
            })
            .collect();
        let _ = writeln!(
            out,
            "<div class=\"time-bars\">{}</div>",
            time_bars_svg(&bars)
        );
        let woken = rows.iter().any(|r| !r.woken_ns.is_empty());
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
                xml_escape(&row.name),
                Cell::Count(row.threads as u64).html(),
                Cell::Ns(row.wall_ns).html()
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
                let by = |by: WokenBy| row.woken_ns.get(&by).copied().unwrap_or(0);
                for ns in [
                    by(WokenBy::Program),
                    by(WokenBy::Outside) + by(WokenBy::Interrupt),
                ] {
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
                Cell::Rate(row.switches_per_s).html(),
                Cell::Fraction(row.involuntary_share).html()
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
    if let Some(offcpu) = &sections.offcpu {
        let _ = writeln!(
            out,
            "<{heading}>Off-CPU time by state and system call</{heading}>"
        );
        let columns: [Column<'_, OperationRow>; 4] = [
            ("state", |o| Cell::Code(Some(&o.operation))),
            ("intervals", |o| Cell::Count(o.count)),
            ("total", |o| Cell::Ns(o.total_ns)),
            ("max", |o| Cell::Ns(o.max_ns)),
        ];
        table(out, "section-table", &columns, &offcpu.by_operation);
        if !offcpu.wakeups.is_empty() {
            let _ = writeln!(out, "<p>Heaviest wakers of sleeping threads:</p>");
            let columns: [Column<'_, WakeupRow>; 4] = [
                ("waker", |w| Cell::Text(Some(&w.waker))),
                ("sleeper", |w| Cell::Text(Some(&w.sleeper))),
                ("wakeups", |w| Cell::Count(w.count)),
                ("sleep ended", |w| Cell::Ns(w.total_ns)),
            ];
            table(out, "section-table", &columns, &offcpu.wakeups);
        }
    }
    if let Some(rows) = &sections.syscall {
        let _ = writeln!(out, "<{heading}>System calls</{heading}>");
        let columns: [Column<'_, SyscallRow>; 8] = [
            ("system call", |s| Cell::Code(Some(&s.syscall))),
            ("calls", |s| Cell::Count(s.calls)),
            ("errors", |s| Cell::Counts(&s.errors)),
            ("total", |s| Cell::Ns(s.total_ns)),
            ("mean", |s| Cell::Ns(s.mean_ns)),
            ("max", |s| Cell::Ns(s.max_ns)),
            ("p99≤", |s| Cell::Ns(s.p99_upper_ns)),
            ("slowest call's site", |s| {
                Cell::Code(s.slowest_site.as_deref())
            }),
        ];
        table(out, "section-table", &columns, rows);
    }
    if let Some(rows) = &sections.lifecycle {
        let _ = writeln!(out, "<{heading}>Processes and threads</{heading}>");
        let columns: [Column<'_, LifecycleRow>; 8] = [
            ("operation", |l| Cell::Code(Some(&l.operation))),
            ("count", |l| Cell::Count(l.count)),
            ("per second", |l| Cell::Rate(l.per_second)),
            ("failed", |l| Cell::Count(l.failed)),
            ("total", |l| Cell::Ns(l.total_ns)),
            ("mean", |l| Cell::Ns(l.mean_ns)),
            ("max", |l| Cell::Ns(l.max_ns)),
            ("heaviest caller", |l| Cell::Code(l.top_site.as_deref())),
        ];
        table(out, "section-table", &columns, rows);
    }
    if let Some(rows) = &sections.klock {
        let _ = writeln!(out, "<{heading}>Kernel locks</{heading}>");
        let columns: [Column<'_, KlockRow>; 7] = [
            ("type", |k| Cell::Text(Some(&k.lock_type))),
            ("address", |k| Cell::Code(Some(&k.address))),
            ("waits", |k| Cell::Count(k.count)),
            ("total", |k| Cell::Ns(k.total_ns)),
            ("max", |k| Cell::Ns(k.max_ns)),
            ("caller", |k| Cell::Code(Some(&k.caller))),
            ("threads", |k| Cell::List(&k.threads)),
        ];
        table(out, "section-table", &columns, rows);
    }
}
