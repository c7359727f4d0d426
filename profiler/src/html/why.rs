//! A run's `lockscope why` as tables: the value `why` renders as text ([`crate::why::Why`],
//! built with its default options), so the page and the text give the same causes and numbers:
//! which threads were analysed and which were left out, where their time went, the causes best
//! first (rank, kind, share, where, the waits each explains and one chain that leads there),
//! idle, and the analysis' coverage. A profile without the bottleneck analysis says so in one line
//! with the flag that records it.

use crate::render::svg::xml_escape;
use crate::render::tables::{table_close, table_open, Cell};
use crate::render::units::{format_fraction, format_ns};
use crate::why::{Cause, Why, WhyOptions};
use lockscope_probes::bottleneck::WaitPart;
use lockscope_probes::catalog;
use lockscope_probes::Profile;
use std::fmt::Write as _;

/// Frames of a root's stack shown before the rest is folded.
const SHOWN_FRAMES: usize = 4;
/// Sites listed per cause.
const SHOWN_SITES: usize = 4;

/// Appends the `why` section of `profile` under `heading`.
pub(super) fn why_section(out: &mut String, profile: &Profile, heading: &str) {
    let _ = writeln!(
        out,
        "<{heading}>Why: what the waits come down to (lockscope why)</{heading}>"
    );
    if profile.bottleneck.is_none() {
        let _ = writeln!(
            out,
            "<p class=\"muted\">No bottleneck analysis in this profile: record it with <code>--probes {}</code> for <code>lockscope why</code>'s causes here.</p>",
            catalog::BOTTLENECK.name
        );
        return;
    }
    let why = match Why::build(profile, &WhyOptions::default()) {
        Ok(why) => why,
        Err(e) => {
            let _ = writeln!(
                out,
                "<p class=\"muted\">No causes: {}</p>",
                xml_escape(&e.to_string())
            );
            return;
        }
    };
    analysed(out, &why);
    if why.causes.is_empty() {
        out.push_str(
            "<p class=\"muted\">No cause: the analysed threads waited for nothing in the program.</p>\n",
        );
    } else {
        let _ = writeln!(
            out,
            "<p>Causes of their waiting, best first ({} of {}):</p>",
            why.causes.len(),
            why.causes_total
        );
        causes_table(out, &why.causes, "why-causes");
    }
    if !why.idle.is_empty() {
        out.push_str(
            "<p>Idle: waiting for work from outside the program (not a bottleneck):</p>\n",
        );
        causes_table(out, &why.idle, "why-idle");
    }
    let c = &why.coverage;
    let wall = why.analysed.wall_ns;
    let share = |ns: u64| {
        if wall == 0 {
            "-".to_string()
        } else {
            format_fraction(ns as f64 / wall as f64)
        }
    };
    let _ = writeln!(
        out,
        "<p class=\"note\"><b>Coverage:</b> {} intervals analysed, {} lost, {} spurious wakeups; not followed {}; chains followed {} threads deep over {} of history.</p>",
        c.intervals,
        c.lost_intervals,
        c.spurious_wakeups,
        share(c.unexplained_ns),
        c.max_depth,
        format_ns(c.history_ns)
    );
}

/// The analysed threads, those left out, and where their time went.
fn analysed(out: &mut String, why: &Why) {
    let a = &why.analysed;
    let names = |rows: &[crate::why::GroupRow]| {
        rows.iter()
            .map(|g| format!("{} ({})", g.group, g.threads))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let chosen = match a.selection {
        "asked" => format!(
            "{} threads matching `{}`",
            a.threads,
            a.pattern.as_deref().unwrap_or("")
        ),
        _ => format!(
            "{} threads of the groups that did the work (threads that wait on each other, with \
             at least a tenth of the busiest group's CPU time)",
            a.threads
        ),
    };
    let share = |ns: u64| {
        if a.wall_ns == 0 {
            "-".to_string()
        } else {
            format_fraction(ns as f64 / a.wall_ns as f64)
        }
    };
    let idle_ns: u64 = why.idle.iter().map(|c| c.total_ns).sum();
    let mut rows = vec![
        ("analysed", format!("{chosen}: {}", names(&a.groups))),
        (
            "their time",
            format!(
                "{}: on a CPU {}, waiting {} (for the causes below {}, idle {}), not analysed {}",
                format_ns(a.wall_ns),
                share(a.on_cpu_ns),
                share(a.waits_ns),
                share(a.waits_ns.saturating_sub(idle_ns)),
                share(idle_ns),
                share(why.coverage.unfinished_ns)
            ),
        ),
    ];
    if let Some(first) = a.left_out.first() {
        rows.insert(
            1,
            (
                "left out",
                format!(
                    "{} threads: {} (lockscope why --threads '{}' to ask about them)",
                    a.left_out.iter().map(|g| g.threads).sum::<usize>(),
                    names(&a.left_out),
                    first.group
                ),
            ),
        );
    }
    if let Some(site) = &a.site {
        rows.push(("site", format!("only waits at frames containing `{site}`")));
    }
    super::run::key_value_table(out, Some("why-analysed"), &rows);
}

/// A list of function names, leaf first, the first few shown and the rest folded.
fn stack_list(stack: &[String]) -> String {
    if stack.is_empty() {
        return "<span class=\"muted\">[no stack]</span>".to_string();
    }
    let item = |name: &String| format!("<li><code>{}</code></li>", xml_escape(name));
    let mut cell = String::from("<ol class=\"frames\">");
    for name in stack.iter().take(SHOWN_FRAMES) {
        cell.push_str(&item(name));
    }
    cell.push_str("</ol>");
    if stack.len() > SHOWN_FRAMES {
        let _ = write!(
            cell,
            "<details class=\"stack\"><summary>{} more frames</summary><ol class=\"frames\">",
            stack.len() - SHOWN_FRAMES
        );
        for name in &stack[SHOWN_FRAMES..] {
            cell.push_str(&item(name));
        }
        cell.push_str("</ol></details>");
    }
    cell
}

/// A table of causes: rank, kind, share, time, where, the waits each explains, its chain.
fn causes_table(out: &mut String, causes: &[Cause], class: &str) {
    table_open(
        out,
        &format!("section-table {class}"),
        &[
            "#",
            "kind",
            "share of their time",
            "time",
            "intervals (the analysed threads' off-CPU intervals it explains part of)",
            "where (root's stack, leaf first)",
            "the waits it explains",
            "chain (waiting thread → root)",
        ],
        causes.len(),
    );
    for cause in causes {
        let mut place = stack_list(&cause.stack);
        if let Some(call) = &cause.call {
            let _ = write!(place, "<p class=\"muted\">in {}</p>", xml_escape(call));
        }
        // As the text says it: two causes of one kind are told apart by their kernel lock.
        if let Some(lock) = &cause.kernel_lock {
            let path: Vec<&str> = lock
                .stack
                .first()
                .into_iter()
                .chain(lock.callers().iter().take(2))
                .map(String::as_str)
                .collect();
            let _ = write!(
                place,
                "<p class=\"muted\">under kernel lock {} ({})</p>",
                lock.lock,
                xml_escape(&path.join(" <- "))
            );
        }
        let roots: Vec<String> = cause
            .threads
            .iter()
            .map(|t| format!("{} ({})", t.name, format_ns(t.total_ns)))
            .collect();
        if !roots.is_empty() {
            let _ = write!(
                place,
                "<p class=\"muted\">{}: {}</p>",
                if cause.kind == crate::why::CauseKind::CpuSaturation {
                    "waiting for a CPU"
                } else {
                    "threads"
                },
                xml_escape(&roots.join(", "))
            );
        }
        let mut sites = String::from("<ul class=\"why-sites\">");
        for site in cause.sites.iter().take(SHOWN_SITES) {
            let leaf: Vec<&str> = site.stack.iter().take(3).map(String::as_str).collect();
            let _ = write!(
                sites,
                "<li>{} {} at <code>{}</code>{}: {} ({})</li>",
                match site.part {
                    WaitPart::Runnable => "runnable",
                    _ => "asleep",
                },
                xml_escape(site.kind.name()),
                xml_escape(&if leaf.is_empty() {
                    "[no stack]".to_string()
                } else {
                    leaf.join(" <- ")
                }),
                site.object
                    .as_deref()
                    .map(|o| format!(" (lock {})", xml_escape(o)))
                    .unwrap_or_default(),
                xml_escape(&site.threads.join(", ")),
                format_ns(site.total_ns)
            );
        }
        if cause.sites.len() > SHOWN_SITES {
            let _ = write!(
                sites,
                "<li class=\"muted\">and {} more sites</li>",
                cause.sites.len() - SHOWN_SITES
            );
        }
        sites.push_str("</ul>");
        let chain: Vec<String> = cause
            .chain
            .iter()
            .map(|hop| {
                let at = hop.stack.first().map_or(String::new(), |f| {
                    format!(
                        " <span class=\"muted\">at</span> <code>{}</code>",
                        xml_escape(f)
                    )
                });
                format!("{}{at}", xml_escape(&hop.thread))
            })
            .collect();
        let _ = writeln!(
            out,
            "<tr>{}<td>{}</td>{}{}{}<td>{place}</td><td>{sites}</td><td>{}</td></tr>",
            Cell::Count(cause.rank as u64).html(),
            xml_escape(cause.kind.name()),
            Cell::Fraction(cause.share).html(),
            Cell::Ns(cause.total_ns).html(),
            Cell::Count(cause.waits).html(),
            chain.join(" → ")
        );
    }
    table_close(out);
}
