//! The breakdown section: where each thread name's wall time went (on CPU, run queue, lock,
//! condvar, futex, poll, I/O, sleep, other: asleep classes by system call), with context
//! switches, and where the profile says, its time asleep by who ended the sleeps: another thread
//! of the program (waiting on it, whatever the call: a latch in `epoll_wait` is as much a wait
//! on another thread as a mutex) or something outside it (idle, or I/O). With the `cpu` probe, each
//! row's on-CPU share (the scheduler's own accounting, switch-in to switch-out) stands beside
//! the CPU time its samples give (`sampled`), so the two measures check each other and the On
//! CPU section says where that time went.

use super::*;
use crate::render::svg::{time_bars_svg, xml_escape, TimeBar};
use crate::render::tables::{num_cell, table_close, table_open, Cell};
use crate::render::units::format_fraction;

/// This file's section, for `build.rs`'s list.
pub(super) const SECTION: Entry = Entry::of::<Breakdown>();

#[derive(Serialize)]
pub(crate) struct Breakdown {
    /// Per thread name (threads of one name summed), heaviest wall time first.
    pub(crate) by_name: Vec<TimeRow>,
    /// Per thread, heaviest wall time first (at most the top rows).
    pub(crate) by_thread: Vec<TimeRow>,
    /// All threads.
    pub(crate) total: TimeRow,
}

#[derive(Serialize)]
pub(crate) struct TimeRow {
    pub(crate) name: String,
    pub(crate) threads: usize,
    pub(crate) wall_ns: u64,
    pub(crate) time_ns: BTreeMap<TimeClass, u64>,
    pub(crate) voluntary_switches: u64,
    pub(crate) involuntary_switches: u64,
    /// Context switches per second of wall time (summed over the row's threads).
    pub(crate) switches_per_s: f64,
    /// Involuntary share of the context switches.
    pub(crate) involuntary_share: f64,
    /// The `cpu` probe's CPU time of the row's threads (what its samples stand for); absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sampled_cpu_ns: Option<u64>,
    /// The row's time asleep by who ended the sleeps (`program`, `outside`, `interrupt`); the
    /// sleeps no wakeup was seen for are missing. Absent in profiles without it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) woken_ns: BTreeMap<WokenBy, u64>,
}

impl TimeRow {
    /// Asleep waiting on the program (sleeps another thread of the program ended) and for
    /// something outside it (another process, a timer, a device, the network).
    fn program_and_outside(&self) -> (u64, u64) {
        let of = |by| self.woken_ns.get(&by).copied().unwrap_or(0);
        (
            of(WokenBy::Program),
            of(WokenBy::Outside).saturating_add(of(WokenBy::Interrupt)),
        )
    }
}

/// The `cpu` probe's CPU time per thread, `None` when it recorded nothing.
type SampledCpu = Option<BTreeMap<(u32, u32), u64>>;

fn sampled_cpu(profile: &Profile) -> SampledCpu {
    let mut by_thread: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    for w in profile.waits.iter().filter(|w| w.kind == WaitKind::OnCpu) {
        let ns = by_thread.entry((w.pid, w.tid)).or_default();
        *ns = ns.saturating_add(w.stats.total_ns);
    }
    (!by_thread.is_empty()).then_some(by_thread)
}

/// [`time_row`] with the row's sampled CPU time when the `cpu` probe recorded.
fn sampled_row(name: String, times: &[&ThreadTime], sampled: &SampledCpu) -> TimeRow {
    let mut row = time_row(name, times);
    row.sampled_cpu_ns = sampled.as_ref().map(|by_thread| {
        times
            .iter()
            .filter_map(|t| by_thread.get(&(t.pid, t.tid)))
            .sum()
    });
    row
}

pub(super) fn time_row(name: String, times: &[&ThreadTime]) -> TimeRow {
    let mut row = TimeRow {
        name,
        threads: times.len(),
        wall_ns: 0,
        time_ns: BTreeMap::new(),
        voluntary_switches: 0,
        involuntary_switches: 0,
        switches_per_s: 0.0,
        involuntary_share: 0.0,
        sampled_cpu_ns: None,
        woken_ns: BTreeMap::new(),
    };
    for t in times {
        row.wall_ns = row.wall_ns.saturating_add(t.wall_ns);
        for (&class, &ns) in &t.time_ns {
            *row.time_ns.entry(class).or_insert(0) += ns;
        }
        for (&by, &ns) in &t.woken_ns {
            *row.woken_ns.entry(by).or_insert(0) += ns;
        }
        row.voluntary_switches += t.voluntary_switches;
        row.involuntary_switches += t.involuntary_switches;
    }
    let switches = row.voluntary_switches + row.involuntary_switches;
    if row.wall_ns > 0 {
        // Per second of one thread's wall time, averaged over the row's threads.
        let seconds = row.wall_ns as f64 / 1e9 / times.len().max(1) as f64;
        row.switches_per_s = (switches as f64 / seconds * 10.0).round() / 10.0;
    }
    if switches > 0 {
        row.involuntary_share =
            (row.involuntary_switches as f64 / switches as f64 * 1e4).round() / 1e4;
    }
    row
}

fn breakdown(profile: &Profile) -> Option<Breakdown> {
    if profile.thread_times.is_empty() {
        return None;
    }
    let sampled = sampled_cpu(profile);
    let mut by_name: BTreeMap<String, Vec<&ThreadTime>> = BTreeMap::new();
    for t in &profile.thread_times {
        by_name
            .entry(thread_label(profile, t.pid, t.tid))
            .or_default()
            .push(t);
    }
    let mut names: Vec<TimeRow> = by_name
        .into_iter()
        .map(|(name, times)| sampled_row(name, &times, &sampled))
        .collect();
    names.sort_by_key(|r| Reverse(r.wall_ns));
    let mut threads: Vec<TimeRow> = profile
        .thread_times
        .iter()
        .map(|t| {
            sampled_row(
                format!("{} ({})", thread_label(profile, t.pid, t.tid), t.tid),
                &[t],
                &sampled,
            )
        })
        .collect();
    threads.sort_by_key(|r| Reverse(r.wall_ns));
    threads.truncate(TOP);
    let all: Vec<&ThreadTime> = profile.thread_times.iter().collect();
    Some(Breakdown {
        by_name: names,
        by_thread: threads,
        total: sampled_row("all threads".to_string(), &all, &sampled),
    })
}

/// Width of a text table's row lead: two spaces, the name, the thread count, the wall time.
const LEAD_WIDTH: usize = 2 + 24 + 3 + 9;

/// A column of the breakdown's text table: its header, one cell per row, and its width (one
/// space before the widest).
struct Column {
    header: String,
    cells: Vec<String>,
    width: usize,
}

/// The columns' widths together.
fn width_of(columns: &[Column]) -> usize {
    columns.iter().map(|c| c.width).sum()
}

/// Percent of `wall` without its `%` sign (the table's header says it).
fn percent(ns: u64, wall: u64) -> String {
    format_percent(ns, wall).trim_end_matches('%').to_string()
}

/// A note under the tables, wrapped within [`frames::TEXT_WIDTH`] columns.
fn note(out: &mut String, text: &str) {
    let _ = writeln!(
        out,
        "{}",
        frames::wrap(text, "  ", "   ", frames::TEXT_WIDTH)
    );
}

/// What the breakdown's text shows beside the classes, not in their 100%.
#[derive(Clone, Copy)]
struct Beside {
    /// The `cpu` probe's CPU time.
    sampled: bool,
    /// The time asleep by who ended the sleeps, when the profile says.
    woken: bool,
}

impl Beside {
    /// What the columns beside the classes are, in words (`after |: ` when in one table).
    fn words(self, together: bool) -> String {
        let mut words = Vec::new();
        if self.sampled {
            words.push(
                "sampled: the cpu probe's CPU time beside the scheduler's on-cpu, not in the 100",
            );
        }
        if self.woken {
            words.push(
                "program, outside: the time asleep by who ended the sleeps, whatever they slept \
                 in: program = another thread of the program (waiting on it), outside = another \
                 process, a timer, a device or the network (idle, or I/O)",
            );
        }
        words.push("csw/s: context switches per second; invol: the involuntary share");
        format!(
            "({}{})",
            if together { "after |: " } else { "" },
            words.join("; ")
        )
    }
}

/// The rows of the breakdown's text tables: the thread names', all threads', then (when more
/// than one) the threads' after their heading.
struct TextTable<'a> {
    rows: Vec<&'a TimeRow>,
    /// Each row's name, cut to its column.
    names: Vec<String>,
    /// The first by-thread row, when they are shown.
    by_thread_from: Option<usize>,
}

impl<'a> TextTable<'a> {
    /// The rows of `breakdown`.
    fn of(breakdown: &'a Breakdown) -> TextTable<'a> {
        let mut rows: Vec<&TimeRow> = breakdown.by_name.iter().collect();
        rows.push(&breakdown.total);
        let by_thread_from = (breakdown.by_thread.len() > 1).then_some(rows.len());
        if by_thread_from.is_some() {
            rows.extend(&breakdown.by_thread);
        }
        let names = rows.iter().map(|r| truncate(&r.name, 23)).collect();
        TextTable {
            rows,
            names,
            by_thread_from,
        }
    }

    /// The column headed `header`, one `cell` per row.
    fn column(&self, header: &str, cell: &dyn Fn(&TimeRow) -> String) -> Column {
        let cells: Vec<String> = self.rows.iter().map(|r| cell(r)).collect();
        let width = cells
            .iter()
            .map(|c| c.chars().count())
            .chain([header.chars().count()])
            .max()
            .unwrap_or(0);
        Column {
            header: header.to_string(),
            cells,
            width: width + 1,
        }
    }

    /// A column per class: percent of each row's wall time.
    fn class_columns(&self, classes: &[TimeClass]) -> Vec<Column> {
        classes
            .iter()
            .map(|&class| {
                self.column(class.name(), &|r: &TimeRow| {
                    percent(r.time_ns.get(&class).copied().unwrap_or(0), r.wall_ns)
                })
            })
            .collect()
    }

    /// The columns beside the classes: sampled CPU and who ended the sleeps (as `beside`
    /// says), the context switches.
    fn beside_columns(&self, beside: Beside) -> Vec<Column> {
        let mut columns = Vec::new();
        if beside.sampled {
            columns.push(self.column("sampled", &|r: &TimeRow| {
                percent(r.sampled_cpu_ns.unwrap_or(0), r.wall_ns)
            }));
        }
        if beside.woken {
            columns.push(self.column("program", &|r: &TimeRow| {
                percent(r.program_and_outside().0, r.wall_ns)
            }));
            columns.push(self.column("outside", &|r: &TimeRow| {
                percent(r.program_and_outside().1, r.wall_ns)
            }));
        }
        columns.push(self.column("csw/s", &|r: &TimeRow| format!("{:.1}", r.switches_per_s)));
        columns.push(self.column("invol", &|r: &TimeRow| {
            format!("{:.0}%", r.involuntary_share * 100.0)
        }));
        columns
    }

    /// Row `i`'s lead (name, threads, wall time), or the header's with `None`.
    fn lead(&self, out: &mut String, i: Option<usize>) {
        let _ = match i {
            Some(i) => write!(
                out,
                "  {:<24}{:>3}{:>9}",
                self.names[i],
                self.rows[i].threads,
                format_ns(self.rows[i].wall_ns)
            ),
            None => write!(out, "  {:<24}{:>3}{:>9}", "threads", "n", "wall"),
        };
    }

    /// One table of `parts` (separated by ` |`): its header, then its rows, the by-thread rows
    /// after their heading.
    fn write(&self, out: &mut String, parts: &[&[Column]]) {
        let mut header = String::new();
        self.lead(&mut header, None);
        for (p, part) in parts.iter().enumerate() {
            if p > 0 {
                header.push_str(" |");
            }
            for Column {
                header: name,
                width: w,
                ..
            } in part.iter()
            {
                let _ = write!(header, "{name:>w$}");
            }
        }
        let _ = writeln!(out, "{header}");
        for i in 0..self.rows.len() {
            if self.by_thread_from == Some(i) {
                let _ = writeln!(out, "  by thread (heaviest wall time first):");
            }
            let mut line = String::new();
            self.lead(&mut line, Some(i));
            for (p, part) in parts.iter().enumerate() {
                if p > 0 {
                    line.push_str(" |");
                }
                for Column {
                    cells, width: w, ..
                } in part.iter()
                {
                    let _ = write!(line, "{:>w$}", cells[i]);
                }
            }
            let _ = writeln!(out, "{line}");
        }
    }
}

impl Breakdown {
    /// What its text shows beside the classes.
    fn beside(&self) -> Beside {
        Beside {
            sampled: self.total.sampled_cpu_ns.is_some(),
            woken: !self.total.woken_ns.is_empty(),
        }
    }

    /// All threads' time asleep by who ended the sleeps, under the tables.
    fn woken_note(&self, out: &mut String) {
        let (program, outside) = self.total.program_and_outside();
        note(
            out,
            &format!(
                "all threads: {} of their time in sleeps another thread of the program ended, \
                 {} in sleeps something outside it ended (who ended them, not the contention \
                 above)",
                format_percent(program, self.total.wall_ns),
                format_percent(outside, self.total.wall_ns)
            ),
        );
    }
}

impl Section for Breakdown {
    const SOURCE: Source = Source::Waits {
        key: "breakdown",
        rank: 2,
    };

    fn build(profile: &Profile) -> Option<Breakdown> {
        breakdown(profile)
    }

    /// The classes' table (percent of each row's wall time, the classes no row has left out
    /// and named under it), then, beside it or as a second table when the two would not fit
    /// [`frames::TEXT_WIDTH`] together, what is not in the 100%: sampled CPU, who ended the
    /// sleeps, the context switches.
    fn write_text(&self, out: &mut String, _style: StackStyle) {
        // A class no row has time in: the total row sums them all.
        let (classes, absent): (Vec<TimeClass>, Vec<TimeClass>) = TimeClass::ALL
            .into_iter()
            .partition(|class| self.total.time_ns.get(class).is_some_and(|&ns| ns > 0));
        let table = TextTable::of(self);
        let class_columns = table.class_columns(&classes);
        let beside = table.beside_columns(self.beside());
        let together =
            LEAD_WIDTH + width_of(&class_columns) + 2 + width_of(&beside) <= frames::TEXT_WIDTH;
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Where the time went (% of each row's wall time; a thread's classes add up to 100)"
        );
        let beside_words = self.beside().words(together);
        if together {
            note(out, &beside_words);
            table.write(out, &[&class_columns, &beside]);
        } else {
            table.write(out, &[&class_columns]);
        }
        if !absent.is_empty() {
            let names: Vec<&str> = absent.iter().map(|c| c.name()).collect();
            note(out, &format!("(no row has time in {})", names.join(", ")));
        }
        if !together {
            let _ = writeln!(out, "  and beside them, not in the 100:");
            note(out, &beside_words);
            table.write(out, &[&beside]);
        }
        if self.beside().woken {
            self.woken_note(out);
        }
    }

    /// Where each thread group's time went as stacked bars, then as a table.
    fn write_html(&self, out: &mut String, heading: &str) {
        let _ = writeln!(
            out,
            "<{heading}>Where the time went, per thread group (share of thread time)</{heading}>"
        );
        let mut rows: Vec<&TimeRow> = self.by_name.iter().take(12).collect();
        rows.push(&self.total);
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
            headers.extend(["asleep, ended by the program", "asleep, ended from outside"]);
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
}
