//! `lockscope html`: one self-contained HTML file for writeups, from runs (`.lsp` profiles) and
//! sweeps (`sweep.json` or its directory).
//!
//! Nothing is fetched from the network: styles are inline, the scaling chart is inline SVG
//! ([`crate::sweep::chart`]), and each flamegraph is inferno's interactive SVG (click to zoom, Ctrl-F
//! search) embedded as a `data:` URL in an `<iframe>`, so its script and element ids stay apart
//! from the page's and from the other flamegraphs'.
//!
//! The page is a document, readable without its one script (which only sorts long tables on a
//! click and opens folded sections before printing), with print styles, and has, in order:
//!
//! 0. a summary: for the first sweep, the target, kernel and machine, where throughput stops (the
//!    knee, with scaling against the first level), how the threads' time redistributes (the
//!    largest classes of thread time at the first level, the knee and the last), which sites grow
//!    across the knee (in average threads waiting), what `lockscope why` traces the working
//!    threads' waits back to at those levels (when recorded with `waitfor`), the finding and the
//!    losses; without a sweep, the first run's waits in threads waiting, where its threads' time
//!    went, its causes by `lockscope why` (with `waitfor`) and what grew in the second run;
//! 1. per sweep: the finding, the scaling chart (with where the threads' time went beneath), a
//!    table per level (throughput, scaling, threads alive, per wait kind the average threads
//!    waiting and the share of thread time, the top site, losses), the table of where the
//!    threads' time went ([`crate::sweep::Breakdown`]), **what changed across the knee** (the knee
//!    level against the last: wait kinds, the growing sites and the differential flamegraph,
//!    [`crate::diff`]), then every level: a selector and one collapsible `<details>` section per
//!    level, open by default, with the level's run (below);
//! 2. diffs: each run against the first one (before the runs: a diff page opens on it), as tables (wait time in average threads waiting
//!    and shares of thread time, the values of `lockscope diff --json`) and the differential flamegraph;
//! 3. per run (each profile given, and each level of each sweep): the metadata and environment
//!    fingerprint, the flamegraph of its waits (with the `cpu` probe, a CPU flamegraph too),
//!    `lockscope why`'s causes as tables (`why.rs`: the value `why` renders, default options; a
//!    line saying how to record them when the profile has no bottleneck analysis), and the report
//!    ([`crate::report`]'s value, whose counts and waits by role every part of the page reads,
//!    [`crate::report::Classified`]) as tables: records
//!    by kind, the top sites with their log2 histograms as small SVG bar charts and their stacks
//!    folded behind `<details>`, and each section the profile has (contention, where each thread
//!    group's time went as stacked bars and a table, off-CPU states, system calls, lifecycle,
//!    kernel locks). No `<pre>` text dump.
//!
//! Imported captures (`lockscope import`: sampled CPU time, events, samples) are labelled with
//! what they hold, never as waits.
//!
//! One file per part of the page: `page.rs` (styles, script, embedded flamegraphs),
//! `summary.rs` (0), `sweep.rs` (1), `diff.rs` (2 and the knee's comparison), `run.rs`, `why.rs`
//! and `report.rs` (3); the tables they draw are [`crate::render`]'s (`render/tables.rs`, shared with
//! the report's sections). The tables read the typed values
//! `lockscope report` and `lockscope diff` write as JSON ([`crate::report`]'s, [`crate::diff`]'s),
//! never the JSON back, so a renamed field fails to compile.
//!
//! Level sections start open: a flamegraph laid out while hidden would have no width to fit its
//! labels to until the reader opens it (inferno refits them on resize, but open is simplest).
//!
//! A part that cannot be drawn (a flamegraph without waits, a diff without a comparison) says why
//! in its place; the page itself fails only when a sweep's profile cannot be read
//! ([`HtmlError`]).

mod diff;
mod page;
mod report;
mod run;
mod summary;
mod sweep;
mod why;

use self::diff::{
    diff_section, diff_unit_header, page_diff, sides_time_bars, Comparison, SiteRows, RAW_NS,
};
use self::page::{anchor, SCRIPT, STYLE};
use self::run::{run_section, Run};
use self::summary::{
    growth_words, level_time_bars, losses_row, run_summary, summary_head, summary_section,
    sweep_summary, thread_group_bars,
};
use self::sweep::{knee_pair, level_anchor, levels_section, sweep_section, sweeps_compared};
use crate::analysis::measure::Measure;
use crate::render::svg::xml_escape;
use crate::sweep::Sweep;
use lockscope_probes::{error_chain, FormatError, Profile};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Why the page could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HtmlError {
    /// The profile of a sweep's level could not be read.
    #[error("failed to read profile `{}` of sweep `{}`", .path.display(), .sweep.display())]
    ReadProfile {
        /// The level's profile.
        path: PathBuf,
        /// The sweep file.
        sweep: PathBuf,
        /// Why.
        #[source]
        source: FormatError,
    },
}

/// One input of the report.
#[derive(Clone, Debug)]
pub enum Input {
    /// A recorded profile, with the path it was read from.
    Run {
        /// Where it was read from (shown as its name).
        path: PathBuf,
        /// The profile.
        profile: Box<Profile>,
    },
    /// A sweep, with the directory its files are relative to.
    Sweep {
        /// The sweep file.
        path: PathBuf,
        /// Directory of the sweep's profiles and load outputs.
        dir: PathBuf,
        /// The sweep.
        sweep: Box<Sweep>,
    },
}

/// How to write the HTML report.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HtmlOptions {
    /// Page title. Default: `lockscope report`.
    pub title: String,
    /// Top wait sites per run, with histograms. Default: `5`.
    pub top: usize,
    /// How the tables show stacks: the program's frames with the runtime's folded and generics
    /// elided, or every frame whole ([`StackStyle::Full`]). Default: [`StackStyle::Readable`].
    pub stack_style: crate::render::frames::StackStyle,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions {
            title: "lockscope report".to_string(),
            top: 5,
            stack_style: crate::render::frames::StackStyle::Readable,
        }
    }
}

/// Renders the report page: the summary, the contents, two sweeps side by side, each sweep
/// with what changed across its knee and its levels, the diffs of the runs, then the runs.
pub fn render_html(inputs: &[Input], options: &HtmlOptions) -> Result<String, HtmlError> {
    // Profiles of every sweep level, loaded once, in each sweep's order: (input index, runs).
    let sweep_profiles = load_sweep_profiles(inputs)?;
    let level_runs: Vec<(usize, Vec<Run<'_>>)> = sweep_profiles
        .iter()
        .map(|(i, profiles)| {
            let runs = profiles
                .iter()
                .map(|(label, profile)| Run {
                    label: label.clone(),
                    profile,
                })
                .collect();
            (*i, runs)
        })
        .collect();
    let runs: Vec<Run<'_>> = inputs
        .iter()
        .filter_map(|input| match input {
            Input::Run { path, profile } => Some(Run {
                label: path.display().to_string(),
                profile,
            }),
            Input::Sweep { .. } => None,
        })
        .collect();

    let mut out = String::new();
    write_head(&mut out, options, &runs, &level_runs);
    // The summary first: the first sweep's (with what grew across its knee), else the first
    // run's (with what grew in the second run, when there is one).
    write_summary(&mut out, inputs, &runs, &level_runs);
    write_contents(&mut out, inputs, &runs);
    write_sweeps(&mut out, inputs, &level_runs, options);
    // The comparisons before the runs they compare: what a reader of a diff looks for first.
    write_diffs(&mut out, &runs);
    for (i, run) in runs.iter().enumerate() {
        run_section(&mut out, &anchor("run", i), run, options);
    }
    let _ = writeln!(out, "<script>{SCRIPT}</script>\n</body>\n</html>");
    Ok(out)
}

/// The profiles of the sweeps' levels: (input index, each level's label and profile).
type SweepProfiles = Vec<(usize, Vec<(String, Profile)>)>;

/// The profiles of every sweep's levels, by input index, each labelled with its concurrency.
fn load_sweep_profiles(inputs: &[Input]) -> Result<SweepProfiles, HtmlError> {
    let mut sweep_profiles: Vec<(usize, Vec<(String, Profile)>)> = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        if let Input::Sweep { path, dir, sweep } = input {
            let mut profiles = Vec::new();
            for level in &sweep.levels {
                let file = dir.join(&level.profile);
                let profile = lockscope_probes::read_profile(&file).map_err(|source| {
                    HtmlError::ReadProfile {
                        path: file.clone(),
                        sweep: path.clone(),
                        source,
                    }
                })?;
                profiles.push((format!("concurrency {}", level.concurrency), profile));
            }
            sweep_profiles.push((i, profiles));
        }
    }
    Ok(sweep_profiles)
}

/// The page's head, title and the line on how to read it.
fn write_head(
    out: &mut String,
    options: &HtmlOptions,
    runs: &[Run<'_>],
    level_runs: &[(usize, Vec<Run<'_>>)],
) {
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>",
        xml_escape(&options.title)
    );
    let _ = writeln!(out, "<h1>{}</h1>", xml_escape(&options.title));
    let recorded_waits = runs
        .iter()
        .chain(level_runs.iter().flat_map(|(_, runs)| runs))
        .any(|r| Measure::of_records(&r.profile.waits) == Measure::Waits);
    let _ = writeln!(
        out,
        "<p class=\"muted\">Written by lockscope {}. {}Flamegraphs: click a frame to zoom, Ctrl-F to search. Long tables sort by a click on their headers.</p>",
        env!("CARGO_PKG_VERSION"),
        if recorded_waits {
            "Wait time is in average threads waiting (wait time over wall time) and shares of thread time (0 to 100%); scaling is throughput against the first level (100% = one). "
        } else {
            "Imported captures: their records are samples of CPU time, counted events or bare samples. "
        }
    );
}

/// The summary: of the first sweep, with what grew across its knee, else of the first run,
/// with what grew in the second when there is one.
fn write_summary(
    out: &mut String,
    inputs: &[Input],
    runs: &[Run<'_>],
    level_runs: &[(usize, Vec<Run<'_>>)],
) {
    let first_sweep = inputs
        .iter()
        .enumerate()
        .find_map(|(i, input)| match input {
            Input::Sweep { path, sweep, .. } => Some((i, path, sweep)),
            Input::Run { .. } => None,
        });
    match first_sweep {
        Some((i, path, sweep)) => {
            let level_runs: &[Run<'_>] = level_runs
                .iter()
                .find(|(index, _)| *index == i)
                .map_or(&[], |(_, runs)| runs.as_slice());
            let profiles: Vec<&Profile> = level_runs.iter().map(|r| r.profile).collect();
            let knee_diff = knee_pair(sweep).and_then(|(from, to)| {
                let labels = (
                    format!("at {}", sweep.levels[from].concurrency),
                    format!("at {}", sweep.levels[to].concurrency),
                );
                page_diff(&level_runs[from], &level_runs[to], (&labels.0, &labels.1)).ok()
            });
            let mut rows = profiles
                .first()
                .map(|p| summary_head(&format!("sweep {}", path.display()), p))
                .unwrap_or_default();
            rows.extend(sweep_summary(sweep, knee_diff.as_ref()));
            rows.push(losses_row(&profiles, &sweep.warnings));
            summary_section(out, &rows, &level_time_bars(sweep));
        }
        None => {
            if let Some(run) = runs.first() {
                let input = match runs.get(1) {
                    Some(second) => format!("A: run {}; B: run {}", run.label, second.label),
                    None => format!("run {}", run.label),
                };
                let mut rows = summary_head(&input, run.profile);
                let after = match runs.get(1) {
                    None => {
                        rows.extend(run_summary(run.profile));
                        thread_group_bars(run.profile)
                    }
                    Some(second) => {
                        // Both sides' waits and time, then what grew: the top sites are the
                        // comparison's.
                        for (label, side) in [("A", run), ("B", second)] {
                            rows.extend(
                                run_summary(side.profile)
                                    .into_iter()
                                    .filter(|(key, _)| !key.starts_with("top "))
                                    .map(|(key, value)| (format!("{key} in {label}"), value)),
                            );
                        }
                        if let Ok(diff) = page_diff(run, second, ("A", "B")) {
                            let (unit, header) = diff_unit_header(&diff);
                            let unit = if unit == "ns/s" || unit == RAW_NS {
                                header.replace(" (average)", "")
                            } else {
                                unit
                            };
                            rows.push((
                                format!("grows from A to B ({unit})"),
                                growth_words(&diff, 3),
                            ));
                        }
                        sides_time_bars(&Comparison {
                            a: run,
                            b: second,
                            labels: ("A", "B"),
                            name_sides: true,
                        })
                    }
                };
                let profiles: Vec<&Profile> = runs.iter().map(|r| r.profile).collect();
                rows.push(losses_row(&profiles, &[]));
                summary_section(out, &rows, &after);
            }
        }
    }
}

/// The contents: the sweeps compared, each sweep and its levels, the diffs, the runs.
fn write_contents(out: &mut String, inputs: &[Input], runs: &[Run<'_>]) {
    out.push_str("<nav><ul>\n");
    if inputs
        .iter()
        .filter(|i| matches!(i, Input::Sweep { .. }))
        .count()
        >= 2
    {
        out.push_str("<li><a href=\"#sweeps\">Two sweeps compared</a></li>\n");
    }
    for (i, input) in inputs.iter().enumerate() {
        if let Input::Sweep { path, sweep, .. } = input {
            let _ = write!(
                out,
                r##"<li><a href="#{}">Sweep: {}</a>; <a href="#{}-knee">across the knee</a>; levels:"##,
                anchor("sweep", i),
                xml_escape(&path.display().to_string()),
                anchor("sweep", i)
            );
            for (k, level) in sweep.levels.iter().enumerate() {
                let _ = write!(
                    out,
                    r##" <a href="#{}">{}</a>"##,
                    level_anchor(i, k),
                    level.concurrency
                );
            }
            out.push_str("</li>\n");
        }
    }
    for (i, run) in runs.iter().enumerate().skip(1) {
        let _ = writeln!(
            out,
            r##"<li><a href="#{}">Diff: {} → {}</a></li>"##,
            anchor("diff", i - 1),
            xml_escape(&runs[0].label),
            xml_escape(&run.label)
        );
    }
    for (i, run) in runs.iter().enumerate() {
        let _ = writeln!(
            out,
            r##"<li><a href="#{}">Run: {}</a></li>"##,
            anchor("run", i),
            xml_escape(&run.label)
        );
    }
    out.push_str("</ul></nav>\n");
}

/// Two sweeps side by side (two kernels, two builds), then each sweep on its own: its curve,
/// what changed across its knee and its levels.
fn write_sweeps(
    out: &mut String,
    inputs: &[Input],
    level_runs: &[(usize, Vec<Run<'_>>)],
    options: &HtmlOptions,
) {
    let sweeps: Vec<(usize, &PathBuf, &Sweep)> = inputs
        .iter()
        .enumerate()
        .filter_map(|(i, input)| match input {
            Input::Sweep { path, sweep, .. } => Some((i, path, sweep.as_ref())),
            Input::Run { .. } => None,
        })
        .collect();
    if let [(ia, path_a, a), (ib, path_b, b), ..] = sweeps[..] {
        let runs_of = |i: usize| {
            level_runs
                .iter()
                .find(|(index, _)| *index == i)
                .map_or(&[][..], |(_, runs)| runs.as_slice())
        };
        sweeps_compared(
            out,
            "sweeps",
            (&path_a.display().to_string(), a, runs_of(ia)),
            (&path_b.display().to_string(), b, runs_of(ib)),
        );
    }
    for (i, input) in inputs.iter().enumerate() {
        if let Input::Sweep { path, sweep, .. } = input {
            let id = anchor("sweep", i);
            sweep_section(out, &id, &path.display().to_string(), sweep);
            let Some((_, runs)) = level_runs.iter().find(|(index, _)| *index == i) else {
                continue;
            };
            if let Some((from, to)) = knee_pair(sweep) {
                let title = format!(
                    "What changed across the knee: concurrency {} → {}",
                    sweep.levels[from].concurrency, sweep.levels[to].concurrency
                );
                let title = if sweep.knee.is_some() {
                    title
                } else {
                    title.replace(
                        "across the knee",
                        "from the first level to the last (no knee)",
                    )
                };
                let labels = (
                    format!("at {}", sweep.levels[from].concurrency),
                    format!("at {}", sweep.levels[to].concurrency),
                );
                let comparison = Comparison {
                    a: &runs[from],
                    b: &runs[to],
                    labels: (&labels.0, &labels.1),
                    name_sides: false,
                };
                diff_section(
                    out,
                    (&format!("{id}-knee"), &title, "h3"),
                    &comparison,
                    SiteRows::Growing,
                );
            }
            levels_section(out, i, sweep, runs, options);
        }
    }
}

/// Each run after the first against the first.
fn write_diffs(out: &mut String, runs: &[Run<'_>]) {
    if let Some((first, rest)) = runs.split_first() {
        for (i, run) in rest.iter().enumerate() {
            let comparison = Comparison {
                a: first,
                b: run,
                labels: ("A", "B"),
                name_sides: true,
            };
            diff_section(
                out,
                (
                    &anchor("diff", i),
                    &format!("Diff: {} → {}", first.label, run.label),
                    "h2",
                ),
                &comparison,
                SiteRows::LargestChange,
            );
        }
    }
}
