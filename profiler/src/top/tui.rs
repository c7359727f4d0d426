//! The full-screen view of `lockscope top` (ratatui on crossterm): a header with the window and
//! the threads' time split, then one table, the wait sites, the thread groups or the causes
//! (`tab` switches), and a line of keys. It needs 80x24 and says so on a smaller terminal.

use super::view::{trend_text, SortBy, View};
use super::{reached, write_so_far, Asks, Live, TopOptions, Update};
use anyhow::{Context, Result};
use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use lockscope::render::units::format_fraction;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row as TableRow, Table, Wrap};
use ratatui::Frame;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

/// The smallest terminal the view fits.
const MIN_SIZE: (u16, u16) = (80, 24);

/// Which table is shown.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tab {
    Sites,
    Threads,
    Causes,
}

impl Tab {
    fn next(self) -> Tab {
        match self {
            Tab::Sites => Tab::Threads,
            Tab::Threads => Tab::Causes,
            Tab::Causes => Tab::Sites,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Tab::Sites => "wait sites",
            Tab::Threads => "threads",
            Tab::Causes => "causes",
        }
    }
}

/// What the screen shows between refreshes.
struct Screen {
    started: String,
    tab: Tab,
    sort: SortBy,
    paused: bool,
    view: Option<View>,
    /// The last thing said (a profile written, the target gone).
    message: String,
}

/// Runs the full-screen view until `q`, Ctrl-C or the duration; the terminal is restored
/// whatever happens.
pub(super) fn run(
    options: &TopOptions,
    started: &str,
    updates: &mpsc::Receiver<Update>,
    asks: &Asks,
) -> Result<()> {
    let mut terminal = ratatui::try_init().context("failed to set up the terminal")?;
    let result = event_loop(&mut terminal, options, started, updates, asks);
    ratatui::restore();
    result
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    options: &TopOptions,
    started: &str,
    updates: &mpsc::Receiver<Update>,
    asks: &Asks,
) -> Result<()> {
    let mut live = Live::new(options);
    let mut screen = Screen {
        started: started.to_string(),
        tab: Tab::Sites,
        sort: SortBy::Time,
        paused: false,
        view: None,
        message: String::new(),
    };
    let mut dirty = true;
    // The whole profile, once the target is gone and the recorder with it.
    let mut ended: Option<Box<lockscope_probes::Profile>> = None;
    let scribbled = matches!(options.session.target, lockscope_probes::Target::Command(_));
    loop {
        if asks.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        loop {
            match updates.try_recv() {
                Ok(Update::Snapshot(snapshot)) => {
                    live.push(*snapshot);
                    if !screen.paused {
                        dirty = true;
                    }
                    if reached(options, &live) {
                        return Ok(());
                    }
                }
                Ok(Update::TargetGone(reason, whole)) => {
                    screen.message = format!("{reason}: probes detached; q quits");
                    ended = whole;
                    dirty = true;
                }
                Ok(Update::Whole(profile)) => {
                    screen.message = match write_so_far(&profile, &options.output) {
                        Ok(said) => said,
                        Err(e) => format!("{e:#}"),
                    };
                    dirty = true;
                }
                Ok(Update::Failed(e)) => return Err(e),
                Ok(Update::Started(_)) => {}
                Err(_) => break,
            }
        }
        if dirty {
            let size = terminal
                .size()
                .context("failed to read the terminal's size")?;
            // The name column is what the others leave; the kind, cut off the name, has its own.
            let width = usize::from(size.width).saturating_sub(35).max(20);
            let causes = screen.tab == Tab::Causes;
            // Paused, the causes are still computed once when their table is first shown.
            let stale = causes && screen.view.as_ref().is_some_and(|v| !v.with_causes);
            if !screen.paused || stale {
                screen.view = live.view(screen.sort, width, causes);
            }
            if scribbled {
                // A launched command writes to this terminal too: redraw it whole.
                terminal.clear().context("failed to clear the terminal")?;
            }
            terminal
                .draw(|frame| draw(frame, &screen))
                .context("failed to draw")?;
            dirty = false;
        }
        if event::poll(Duration::from_millis(100)).context("failed to read the keyboard")? {
            match event::read().context("failed to read the keyboard")? {
                Event::Key(key) if key.kind == KeyEventKind::Press => {
                    let ctrl_c = key.modifiers.contains(KeyModifiers::CONTROL)
                        && key.code == KeyCode::Char('c');
                    match key.code {
                        KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                        _ if ctrl_c => return Ok(()),
                        KeyCode::Tab | KeyCode::Char('t') => screen.tab = screen.tab.next(),
                        KeyCode::Char('s') => screen.sort = screen.sort.next(),
                        KeyCode::Char('p') | KeyCode::Char(' ') => {
                            screen.paused = !screen.paused;
                        }
                        KeyCode::Char('w') => match &ended {
                            // The recording ended: its whole profile came with the news.
                            Some(profile) => {
                                screen.message = match write_so_far(profile, &options.output) {
                                    Ok(said) => said,
                                    Err(e) => format!("{e:#}"),
                                };
                            }
                            // The recorder's thread sends the whole profile so far to write.
                            None => {
                                asks.whole.store(true, Ordering::Release);
                                screen.message = format!("writing {}...", options.output.display());
                            }
                        },
                        _ => continue,
                    }
                    if matches!(key.code, KeyCode::Char('s')) && !screen.paused {
                        screen.view = None;
                    }
                    dirty = true;
                }
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
    }
}

/// Draws the screen.
fn draw(frame: &mut Frame<'_>, screen: &Screen) {
    let area = frame.area();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let text = format!(
            "lockscope top needs {}x{}; this terminal is {}x{}. q quits.",
            MIN_SIZE.0, MIN_SIZE.1, area.width, area.height
        );
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
        return;
    }
    let [head, body, keys] = Layout::vertical([
        Constraint::Length(5),
        Constraint::Min(5),
        Constraint::Length(1),
    ])
    .areas(area);
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut lines = vec![Line::styled(
        format!(
            "lockscope top: {}{}",
            screen.started,
            if screen.paused { "  [paused]" } else { "" }
        ),
        bold,
    )];
    match &screen.view {
        Some(view) => {
            lines.push(Line::raw(view.header()));
            lines.push(Line::raw(view.split_line()));
        }
        None => lines.push(Line::raw("waiting for the first interval...")),
    }
    lines.push(Line::raw(screen.message.clone()));
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), head);
    let title = format!(" {} (sorted by {}) ", screen.tab.name(), screen.sort.name());
    let block = Block::default().borders(Borders::TOP).title(title);
    match (&screen.view, screen.tab) {
        (None, _) => frame.render_widget(block, body),
        (Some(view), Tab::Causes) => {
            let lines: Vec<Line> = match &view.causes {
                Some(causes) if !causes.is_empty() => {
                    let mut lines = vec![Line::raw(format!(
                        "in the window, of {}:",
                        view.cause_groups.join(", ")
                    ))];
                    lines.extend(causes.iter().map(|c| Line::raw(c.clone())));
                    lines
                }
                Some(_) => vec![Line::raw("no cause in the program in the window")],
                None => vec![Line::raw(
                    "no causes: run top with --probes bottleneck (what `lockscope why` reads)",
                )],
            };
            frame.render_widget(
                Paragraph::new(lines)
                    .block(block)
                    .wrap(Wrap { trim: false }),
                body,
            );
        }
        (Some(view), tab) => {
            let rows = if tab == Tab::Sites {
                &view.sites
            } else {
                &view.threads
            };
            let header =
                TableRow::new(["site", "kind", "waits", "threads", "share", "trend"]).style(bold);
            let header = if tab == Tab::Threads {
                TableRow::new(["threads", "", "waits", "waiting", "share", "trend"]).style(bold)
            } else {
                header
            };
            let table_rows = rows.iter().map(|r| {
                TableRow::new([
                    r.name.clone(),
                    r.kind.clone(),
                    r.count.to_string(),
                    format!("{:.2}", r.avg_threads),
                    r.share_of_thread_time
                        .map_or_else(|| "-".to_string(), format_fraction),
                    trend_text(&r.trend),
                ])
            });
            let table = Table::new(
                table_rows,
                [
                    Constraint::Min(20),
                    Constraint::Length(8),
                    Constraint::Length(7),
                    Constraint::Length(7),
                    Constraint::Length(6),
                    Constraint::Length(10),
                ],
            )
            .header(header)
            .block(block);
            frame.render_widget(table, body);
        }
    }
    frame.render_widget(
        Paragraph::new("q quit  tab sites/threads/causes  s sort  p pause  w write profile")
            .style(Style::default().add_modifier(Modifier::REVERSED)),
        keys,
    );
}
