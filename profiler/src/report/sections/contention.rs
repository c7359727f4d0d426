//! The contention section: the waits on other threads of the program ranked on their own, the
//! idle waits (waiting for something outside the program: a client, a timer) listed apart, as
//! [`wait_roles`] tells them: by who ended each sleep where the profile says, else by the rule
//! of thumb (locks are contention, a thread parked most of the recording at one site that may be
//! idle is idle).

use super::*;
use crate::render::svg::xml_escape;
use crate::render::tables::{table, Cell, Column};

/// This file's section, for `build.rs`'s list.
pub(super) const SECTION: Entry = Entry::of::<Contention>();

#[derive(Serialize)]
pub(crate) struct Contention {
    /// Waits on other threads of the program: sites by kind, operation and user stack,
    /// heaviest first.
    pub(crate) sites: Vec<SiteRow>,
    /// Idle sites: sleeps something outside the program ended, or (without who ended them) a
    /// thread parked most of the recording there.
    pub(crate) idle: Vec<SiteRow>,
    /// True when the profile says who ended some of its sleeps (the `offcpu` probe's wakeups);
    /// false when every role comes from the rule of thumb.
    pub(crate) wakers_known: bool,
    /// Why it does not, when it does not (text only).
    #[serde(skip)]
    pub(crate) no_wakers: String,
    /// The waits told neither contention nor idle (text only: the JSON's `classified` has it).
    #[serde(skip)]
    pub(crate) neither_ns: u64,
}

/// What the contention tables' "ended by" column means.
const ENDED_BY_NOTE: &str = "Ended by: who ended the sleeps, as a share of the time whose waker \
    is known: program = another thread of the program (so a latch, a semaphore or epoll_wait \
    another thread ended is contention), outside = another process, interrupt = a timer, a \
    device or the network; holder = a lock's wait, ended by its release (who ended it not \
    recorded); parked = a thread parked most of the recording at one site.";

fn contention(profile: &Profile) -> Option<Contention> {
    let roles = wait_roles(profile);
    let with = |wanted: WaitRole| {
        profile
            .waits
            .iter()
            .zip(&roles)
            .filter_map(move |(w, r)| match r {
                Some(r) if r.role == wanted => Some((w, Some(r))),
                _ => None,
            })
    };
    let sites = site_rows(profile, with(WaitRole::Contention), TOP);
    let mut idle = site_rows(profile, with(WaitRole::Idle), TOP);
    // Ended by the program, but idle down the chain: say so rather than `program 100%`.
    for row in idle
        .iter_mut()
        .filter(|r| r.basis == Some(RoleBasis::Chain))
        .filter(|r| {
            r.ended_by
                .as_deref()
                .is_none_or(|by| by.starts_with("program"))
        })
    {
        row.ended_by = Some("chain: outside".to_string());
    }
    let wakers_known = roles
        .iter()
        .flatten()
        .any(|r| r.basis == RoleBasis::Waker || !r.woken_ns.is_empty());
    // Present whenever the profile has waits to tell apart, so that it says why none is.
    let any = profile
        .waits
        .iter()
        .any(lockscope_probes::is_role_candidate);
    any.then_some(Contention {
        sites,
        idle,
        wakers_known,
        no_wakers: no_wakers_reason(profile),
        neither_ns: crate::report::Classified::of(profile).neither_ns,
    })
}

/// The contention table's columns before the threads: kind, waits, total, max, ended by, site.
const ROW_PREFIX: usize = 2 + 13 + 7 + 9 + 9 + 2 + 17 + SITE_WIDTH + 1;
/// The site column's width: the telling frame, cut to fit.
const SITE_WIDTH: usize = 22;

/// A site row of the contention section: kind, count, total, max, who ended it, site (its telling
/// frame), threads (and, for an idle site, the operation), within [`frames::TEXT_WIDTH`] columns
/// unless `style` shows stacks whole.
fn write_row(out: &mut String, r: &SiteRow, operation: bool, style: StackStyle) {
    let room = frames::TEXT_WIDTH.saturating_sub(ROW_PREFIX);
    let site = match style {
        StackStyle::Readable => frames::shorten(&r.frame, SITE_WIDTH - 1),
        StackStyle::Full => r.frame.clone(),
    };
    let mut operation = if operation {
        format!(" ({})", r.operation)
    } else {
        String::new()
    };
    let threads = match style {
        StackStyle::Readable => frames::thread_list(&r.threads, room),
        StackStyle::Full => r.threads.join(", "),
    };
    // An operation that does not fit beside the threads goes under the site.
    let mut under = String::new();
    if style == StackStyle::Readable && threads.chars().count() + operation.chars().count() > room {
        let column = ROW_PREFIX - SITE_WIDTH - 1;
        under = format!(
            "{:column$}{}\n",
            "",
            frames::cut_end(operation.trim_start(), frames::TEXT_WIDTH - column)
        );
        operation.clear();
    }
    let _ = writeln!(
        out,
        "  {:<13}{:>7}{:>9}{:>9}  {:<16} {:<SITE_WIDTH$} {threads}{operation}",
        r.kind.name(),
        r.count,
        format_ns(r.total_ns),
        format_ns(r.max_ns),
        r.ended_by.as_deref().unwrap_or("-"),
        site,
    );
    out.push_str(&under);
}

impl Section for Contention {
    const SOURCE: Source = Source::Waits {
        key: "contention",
        rank: 0,
    };

    fn build(profile: &Profile) -> Option<Contention> {
        contention(profile)
    }

    fn write_text(&self, out: &mut String, style: StackStyle) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Contention: waits on other threads of the program (idle waits apart)"
        );
        let header = format!(
            "  {:<13}{:>7}{:>9}{:>9}  {:<16} {:<SITE_WIDTH$} threads",
            "kind", "waits", "total", "max", "ended by", "site"
        );
        if self.sites.is_empty() && self.wakers_known {
            let _ = writeln!(out, "  (no waits on other threads of the program)");
        } else if self.sites.is_empty() {
            let _ = writeln!(
                out,
                "  (no mutex, rwlock or kernel-lock waits; the other waits cannot be told apart \
                 here, see below)"
            );
        } else {
            let _ = writeln!(out, "{header}");
            for r in &self.sites {
                write_row(out, r, false, style);
            }
        }
        if !self.idle.is_empty() {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "Idle waits (waiting for something outside the program: a client, a timer)"
            );
            let _ = writeln!(out, "{header}");
            for r in &self.idle {
                write_row(out, r, true, style);
            }
        }
        if self.wakers_known {
            let _ = writeln!(
                out,
                "{}",
                frames::wrap(
                    "ended by: who ended the sleeps (share of the time whose waker is known): \
                     program = another thread of the program, outside = another process, \
                     interrupt = a timer, a device or the network",
                    "  ",
                    "    ",
                    frames::TEXT_WIDTH
                )
            );
            // The other words of the column, where some row uses them.
            let used = |word: &str| {
                self.sites
                    .iter()
                    .chain(&self.idle)
                    .any(|r| r.ended_by.as_deref() == Some(word))
            };
            let words: Vec<&str> = [
                ("holder", "holder = a lock's wait, ended by its release"),
                (
                    "parked",
                    "parked = a thread parked most of the recording there (in one sleep, or with \
                     who ended it not recorded)",
                ),
                (
                    "chain: outside",
                    "chain: outside = ended by the program, but the bottleneck analysis followed \
                     it to threads waiting for something outside",
                ),
            ]
            .into_iter()
            .filter(|(word, _)| used(word))
            .map(|(_, meaning)| meaning)
            .collect();
            if !words.is_empty() {
                let _ = writeln!(
                    out,
                    "{}",
                    frames::wrap(&words.join("; "), "  ", "    ", frames::TEXT_WIDTH)
                );
            }
        } else {
            let text = format!(
                "who ended the sleeps: {}; so contention is told by the kind (holder: a mutex, \
                 rwlock or kernel lock), idle by a thread parked most of the recording at one site \
                 (parked), and the rest is neither: {} of waits here (a condvar, a semaphore, a \
                 join, a latch or epoll_wait, which another thread may have ended)",
                self.no_wakers,
                format_ns(self.neither_ns)
            );
            let _ = writeln!(
                out,
                "{}",
                frames::wrap(&text, "  ", "    ", frames::TEXT_WIDTH)
            );
        }
    }

    fn write_html(&self, out: &mut String, heading: &str) {
        let columns: [Column<'_, SiteRow>; 8] = [
            ("kind", |s| Cell::Text(Some(s.kind.name()))),
            (
                "site (the program's first frame past the wait's plumbing)",
                |s| Cell::Code(Some(&s.frame)),
            ),
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
        if self.sites.is_empty() {
            let _ = writeln!(
                out,
                "<p class=\"muted\">No waits on other threads of the program{}.</p>",
                if self.wakers_known {
                    ""
                } else {
                    " told: no mutex, rwlock or kernel-lock waits, and who ended the other sleeps was not recorded"
                }
            );
        } else {
            table(out, "section-table", &columns, &self.sites);
        }
        if !self.idle.is_empty() {
            let _ = writeln!(
                out,
                "<p class=\"muted\">Idle waits, apart: waiting for something outside the program (a client, a timer), or a thread parked most of the recording at one site.</p>"
            );
            table(out, "section-table", &columns, &self.idle);
        }
        let _ = writeln!(out, "<p class=\"note\">{}</p>", xml_escape(ENDED_BY_NOTE));
    }
}
