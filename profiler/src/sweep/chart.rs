//! `lockscope chart`: the scaling chart of a sweep, as a self-contained SVG drawn by hand (or a PNG
//! rendered from it by resvg, [`scaling_png`]).
//!
//! Two panels share the x axis, one evenly spaced position per level (concurrency 1, 2, 5, 10,
//! ...), so a level's throughput sits right above where its threads' time went:
//!
//! - the top panel's left axis is throughput (the thick line; each point is labelled with its
//!   scaling against the first level, the seed's "Concurrency one=100%" column); its right axis
//!   is the average number of threads waiting, one thinner line per wait kind (the
//!   [`MAX_KINDS`] largest). A dashed vertical line marks the knee;
//! - the bottom panel stacks each level's thread time by class (on-CPU, run-queue, lock, condvar,
//!   futex, poll, I/O, sleep, other) as shares of thread time, 0 to 100%, labelled with the
//!   average number of threads alive. A level recorded without the `offcpu` probe has no
//!   breakdown, and its bar says so instead of drawing zeros.
//!
//! Wait time summed over threads is never drawn as a percentage of one clock (see
//! [`crate::render::units`]). The SVG uses only generic font families and no external resources, so it
//! renders the same in a browser, an HTML report (`lockscope html`) and a paper.

use super::{Sweep, SweepError, NO_BREAKDOWN};
use crate::render::svg::{xml_escape, CLASS_COLORS};
use crate::render::units::{format_fraction, format_threads};
use lockscope_probes::TimeClass;
use std::fmt::Write as _;

/// Wait kinds drawn, by their largest share across the levels.
pub const MAX_KINDS: usize = 4;

/// Chart size and margins, in SVG user units.
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 800.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 80.0;
/// Top and height of the throughput panel's plot area.
const TOP: f64 = 60.0;
const PLOT_H: f64 = 290.0;
/// Top and height of the thread-time panel's plot area.
const TIME_TOP: f64 = 480.0;
const TIME_H: f64 = 230.0;

/// Colors of the wait kinds' lines (colorblind-safe palette), and the throughput's.
const KIND_COLORS: [&str; MAX_KINDS] = ["#d55e00", "#009e73", "#cc79a7", "#e69f00"];
const THROUGHPUT_COLOR: &str = "#0072b2";

/// How to draw a chart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChartOptions {
    /// Title. Default: `None`, which uses "Throughput and waits vs concurrency" and the load.
    pub title: Option<String>,
}

/// A "nice" axis maximum and tick step for values up to `max` (1, 2 or 5 times a power of ten).
fn nice_axis(max: f64) -> (f64, f64) {
    if max <= 0.0 || !max.is_finite() {
        return (1.0, 0.2);
    }
    let raw = max / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude);
    ((max / step).ceil() * step, step)
}

fn format_tick(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if value >= 1e3 && (value / 1e3).fract().abs() < 1e-9 {
        format!("{:.0}k", value / 1e3)
    } else if value >= 1e4 {
        format!("{:.1}k", value / 1e3)
    } else if value.fract().abs() < 1e-9 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// The wait kinds to draw: the largest shares first.
fn kinds_to_draw(sweep: &Sweep) -> Vec<String> {
    let mut best: Vec<(String, f64)> = Vec::new();
    for level in &sweep.levels {
        for share in &level.kinds {
            match best.iter_mut().find(|(name, _)| *name == share.name) {
                Some(entry) => entry.1 = entry.1.max(share.avg_threads),
                None => best.push((share.name.clone(), share.avg_threads)),
            }
        }
    }
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    best.into_iter()
        .take(MAX_KINDS)
        .map(|(name, _)| name)
        .collect()
}

/// The scaling chart's plot: where a level and a value go.
struct ScalingPlot {
    /// The levels drawn.
    levels: usize,
    /// The plot's width and height, between the margins.
    width: f64,
    height: f64,
    /// The throughput axis' top and tick step.
    throughput_max: f64,
    throughput_step: f64,
    /// The threads-waiting axis' top and tick step.
    waiting_max: f64,
    waiting_step: f64,
}

impl ScalingPlot {
    /// The plot of `sweep`, its axes fitted to its throughput and to the `kinds` drawn.
    fn of(sweep: &Sweep, kinds: &[String]) -> ScalingPlot {
        let max_tp = sweep
            .levels
            .iter()
            .map(|l| l.throughput)
            .fold(0.0, f64::max);
        let (throughput_max, throughput_step) = nice_axis(max_tp * 1.05);
        let max_waiting = sweep
            .levels
            .iter()
            .flat_map(|l| l.kinds.iter())
            .filter(|s| kinds.contains(&s.name))
            .map(|s| s.avg_threads)
            .fold(0.0, f64::max);
        let (waiting_max, waiting_step) = nice_axis(max_waiting * 1.05);
        ScalingPlot {
            levels: sweep.levels.len().max(1),
            width: WIDTH - LEFT - RIGHT,
            height: PLOT_H,
            throughput_max,
            throughput_step,
            waiting_max,
            waiting_step,
        }
    }

    /// The x of level `i`. Points stay clear of the axes so their labels do not cover the
    /// tick labels.
    fn x(&self, i: usize) -> f64 {
        let inset = 30.0;
        if self.levels == 1 {
            LEFT + self.width / 2.0
        } else {
            LEFT + inset + (self.width - 2.0 * inset) * i as f64 / (self.levels - 1) as f64
        }
    }

    /// The y of a throughput.
    fn y_throughput(&self, v: f64) -> f64 {
        TOP + self.height - self.height * v / self.throughput_max
    }

    /// The y of a number of threads waiting.
    fn y_waiting(&self, v: f64) -> f64 {
        TOP + self.height - self.height * v / self.waiting_max
    }
}

/// The scaling chart of `sweep` as an SVG document: throughput and the waits of the main
/// kinds against concurrency, the knee, then where the threads' time went at each level.
pub fn scaling_svg(sweep: &Sweep, options: &ChartOptions) -> String {
    let mut svg = String::new();
    let kinds = kinds_to_draw(sweep);
    let plot = ScalingPlot::of(sweep, &kinds);
    let x_of = |i: usize| plot.x(i);
    scaling_title(&mut svg, sweep, options);
    scaling_axes(&mut svg, sweep, &plot);
    x_axis(&mut svg, sweep, &x_of, TOP + plot.height, "concurrency");
    scaling_knee(&mut svg, sweep, &plot);
    scaling_lines(&mut svg, sweep, &plot, &kinds);
    scaling_legend(&mut svg, &plot, &kinds);
    time_panel(&mut svg, sweep, &x_of);
    svg.push_str("</svg>\n");
    svg
}

/// The document's start, its title and the load under it.
fn scaling_title(svg: &mut String, sweep: &Sweep, options: &ChartOptions) {
    let title = options
        .title
        .clone()
        .unwrap_or_else(|| "Throughput and waits vs concurrency".to_string());
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="16" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        xml_escape(&title)
    );
    let mut load = sweep.load.clone();
    if load.chars().count() > 90 {
        load = load.chars().take(89).collect::<String>() + "…";
    }
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="42" text-anchor="middle" fill="#555">load: {}</text>"##,
        WIDTH / 2.0,
        xml_escape(&load)
    );
}

/// The grid, both axes' ticks, the plot's frame and the axes' titles.
fn scaling_axes(svg: &mut String, sweep: &Sweep, plot: &ScalingPlot) {
    // Grid and left axis (throughput).
    let mut v = 0.0;
    while v <= plot.throughput_max + plot.throughput_step / 2.0 {
        let y = plot.y_throughput(v);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="{THROUGHPUT_COLOR}">{}</text>"##,
            LEFT + plot.width,
            LEFT - 6.0,
            y + 4.0,
            format_tick(v)
        );
        v += plot.throughput_step;
    }
    // Right axis (average threads waiting).
    let mut v = 0.0;
    while v <= plot.waiting_max + plot.waiting_step / 2.0 {
        let y = plot.y_waiting(v);
        let _ = writeln!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" fill="#444">{}</text>"##,
            LEFT + plot.width + 6.0,
            y + 4.0,
            format_tick(v)
        );
        v += plot.waiting_step;
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#999"/>"##,
        plot.width, plot.height
    );
    let _ = writeln!(
        svg,
        r#"<text transform="translate(20 {:.1}) rotate(-90)" text-anchor="middle" fill="{THROUGHPUT_COLOR}">throughput ({})</text>"#,
        TOP + plot.height / 2.0,
        xml_escape(&sweep.throughput_unit)
    );
    let _ = writeln!(
        svg,
        r##"<text transform="translate({:.1} {:.1}) rotate(90)" text-anchor="middle" fill="#444">threads waiting (average)</text>"##,
        WIDTH - 14.0,
        TOP + plot.height / 2.0
    );
}

/// The knee, a dashed line at its level.
fn scaling_knee(svg: &mut String, sweep: &Sweep, plot: &ScalingPlot) {
    if let Some(knee) = &sweep.knee {
        if let Some(i) = sweep
            .levels
            .iter()
            .position(|l| l.concurrency == knee.concurrency)
        {
            let x = plot.x(i);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#333" stroke-dasharray="5 4"/><text x="{:.1}" y="{:.1}" fill="#333">knee</text>"##,
                TOP + plot.height,
                x + 4.0,
                TOP + plot.height - 6.0
            );
        }
    }
}

/// The waits of each kind drawn (dashed), then the throughput on top with its scaling labels.
fn scaling_lines(svg: &mut String, sweep: &Sweep, plot: &ScalingPlot, kinds: &[String]) {
    for (k, kind) in kinds.iter().enumerate() {
        let color = KIND_COLORS[k % KIND_COLORS.len()];
        let points: Vec<String> = sweep
            .levels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let waiting = l
                    .kinds
                    .iter()
                    .find(|s| &s.name == kind)
                    .map_or(0.0, |s| s.avg_threads);
                format!("{:.1},{:.1}", plot.x(i), plot.y_waiting(waiting))
            })
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="1.5" stroke-dasharray="6 3"/>"#,
            points.join(" ")
        );
    }
    // Throughput, on top.
    let points: Vec<String> = sweep
        .levels
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{:.1},{:.1}", plot.x(i), plot.y_throughput(l.throughput)))
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline points="{}" fill="none" stroke="{THROUGHPUT_COLOR}" stroke-width="3"/>"#,
        points.join(" ")
    );
    for (i, level) in sweep.levels.iter().enumerate() {
        let (x, y) = (plot.x(i), plot.y_throughput(level.throughput));
        let _ = writeln!(
            svg,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{THROUGHPUT_COLOR}"><title>concurrency {}: {:.1} {} ({:.0}% of the first level)</title></circle><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="{THROUGHPUT_COLOR}" font-weight="bold">{:.0}%</text>"#,
            level.concurrency,
            level.throughput,
            xml_escape(&sweep.throughput_unit),
            level.scaling * 100.0,
            y - 9.0,
            level.scaling * 100.0
        );
    }
}

/// The legend under the plot.
fn scaling_legend(svg: &mut String, plot: &ScalingPlot, kinds: &[String]) {
    let legend_y = TOP + plot.height + 62.0;
    let mut x = LEFT;
    let _ = writeln!(
        svg,
        r#"<line x1="{x}" y1="{legend_y}" x2="{}" y2="{legend_y}" stroke="{THROUGHPUT_COLOR}" stroke-width="3"/><text x="{}" y="{}">throughput (label: scaling vs first level)</text>"#,
        x + 24.0,
        x + 30.0,
        legend_y + 4.0
    );
    x += 290.0;
    for (k, kind) in kinds.iter().enumerate() {
        let color = KIND_COLORS[k % KIND_COLORS.len()];
        let _ = writeln!(
            svg,
            r#"<line x1="{x}" y1="{legend_y}" x2="{}" y2="{legend_y}" stroke="{color}" stroke-width="1.5" stroke-dasharray="6 3"/><text x="{}" y="{}">{} wait</text>"#,
            x + 24.0,
            x + 30.0,
            legend_y + 4.0,
            xml_escape(kind)
        );
        x += 40.0 + 8.0 * (kind.len() as f64 + 5.0);
    }
}

/// The concurrency levels of two sweeps, in order, each once.
pub fn shared_axis(a: &Sweep, b: &Sweep) -> Vec<u32> {
    let mut levels: Vec<u32> = a
        .levels
        .iter()
        .chain(&b.levels)
        .map(|l| l.concurrency)
        .collect();
    levels.sort_unstable();
    levels.dedup();
    levels
}

/// Two sweeps' throughput on one chart (`lockscope html SWEEP_A SWEEP_B`): one line per sweep,
/// named by its label, over the concurrency levels of both (evenly spaced, as in
/// [`scaling_svg`]), each point labelled with its scaling against the sweep's first level.
pub fn compare_svg(a: (&str, &Sweep), b: (&str, &Sweep)) -> String {
    const H: f64 = 460.0;
    const PLOT: f64 = 300.0;
    let axis = shared_axis(a.1, b.1);
    let n = axis.len().max(1);
    let plot_w = WIDTH - LEFT - RIGHT;
    let inset = 30.0;
    let x_of = |concurrency: u32| {
        let i = axis.iter().position(|&c| c == concurrency).unwrap_or(0);
        if n == 1 {
            LEFT + plot_w / 2.0
        } else {
            LEFT + inset + (plot_w - 2.0 * inset) * i as f64 / (n - 1) as f64
        }
    };
    let max_tp =
        a.1.levels
            .iter()
            .chain(&b.1.levels)
            .map(|l| l.throughput)
            .fold(0.0, f64::max);
    let (tp_max, tp_step) = nice_axis(max_tp * 1.05);
    let y_of = |v: f64| TOP + PLOT - PLOT * v / tp_max;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{H}" viewBox="0 0 {WIDTH} {H}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">Throughput by concurrency ({})</text>"#,
        WIDTH / 2.0,
        xml_escape(&a.1.throughput_unit)
    );
    let mut tick = 0.0;
    while tick <= tp_max + 1e-9 {
        let y = y_of(tick);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            format_tick(tick)
        );
        tick += tp_step;
    }
    for &c in &axis {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{c}</text>"#,
            x_of(c),
            TOP + PLOT + 18.0
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">concurrency</text>"#,
        LEFT + plot_w / 2.0,
        TOP + PLOT + 40.0
    );
    for (k, ((label, sweep), color)) in [a, b].into_iter().zip(["#1f5fa8", "#c2410c"]).enumerate() {
        let points: Vec<String> = sweep
            .levels
            .iter()
            .map(|l| format!("{:.1},{:.1}", x_of(l.concurrency), y_of(l.throughput)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="3"/>"#,
            points.join(" ")
        );
        for l in &sweep.levels {
            let (x, y) = (x_of(l.concurrency), y_of(l.throughput));
            // A's labels above its points, B's below, so that close curves stay readable.
            let dy = if k == 0 { -10.0 } else { 18.0 };
            let _ = writeln!(
                svg,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{color}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="{color}">{}</text>"#,
                y + dy,
                format_fraction(l.scaling)
            );
        }
        let ly = H - 40.0 + 18.0 * k as f64;
        let _ = writeln!(
            svg,
            r#"<line x1="{LEFT}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            LEFT + 30.0,
            LEFT + 38.0,
            ly + 4.0,
            xml_escape(label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// A panel's x axis below `bottom`: each level's concurrency under its position, then `title`.
fn x_axis(svg: &mut String, sweep: &Sweep, x_of: &dyn Fn(usize) -> f64, bottom: f64, title: &str) {
    for (i, level) in sweep.levels.iter().enumerate() {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x_of(i),
            bottom + 18.0,
            level.concurrency
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{title}</text>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        bottom + 36.0
    );
}

/// The bottom panel: each level's thread time stacked by class, as shares of thread time, under
/// the level's point of the throughput panel; a level without a breakdown says so.
fn time_panel(svg: &mut String, sweep: &Sweep, x_of: &dyn Fn(usize) -> f64) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let n = sweep.levels.len().max(1);
    let spacing = if n == 1 {
        plot_w
    } else {
        (plot_w - 60.0) / (n - 1) as f64
    };
    // The end bars stay inside the plot area: their centres are 30 units in from its edges.
    let bar_w = (spacing * 0.6).min(52.0);
    let y_of = |fraction: f64| TIME_TOP + TIME_H - TIME_H * fraction.clamp(0.0, 1.0);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle" font-size="14" font-weight="bold">Where the threads' time went</text>"#,
        WIDTH / 2.0,
        TIME_TOP - 22.0
    );
    for tick in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let y = y_of(tick);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444">{:.0}%</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            tick * 100.0
        );
    }
    let _ = writeln!(
        svg,
        r##"<text transform="translate(20 {:.1}) rotate(-90)" text-anchor="middle" fill="#444">share of thread time</text>"##,
        TIME_TOP + TIME_H / 2.0
    );
    for (i, level) in sweep.levels.iter().enumerate() {
        let x = x_of(i) - bar_w / 2.0;
        let Some(breakdown) = &level.breakdown else {
            // No zeros: an outlined bar that says why it is empty.
            let _ = writeln!(
                svg,
                r##"<rect class="no-breakdown" x="{x:.1}" y="{TIME_TOP}" width="{bar_w:.1}" height="{TIME_H}" fill="#fafafa" stroke="#bbb" stroke-dasharray="4 3"><title>concurrency {}: {NO_BREAKDOWN}</title></rect><text transform="translate({:.1} {:.1}) rotate(-90)" text-anchor="middle" fill="#888" font-size="11">no breakdown (no offcpu probe)</text>"##,
                level.concurrency,
                x_of(i) + 4.0,
                TIME_TOP + TIME_H / 2.0
            );
            continue;
        };
        let mut below = 0.0;
        for (class, color) in TimeClass::ALL.iter().zip(CLASS_COLORS) {
            let Some(time) = breakdown.class(class.name()) else {
                continue;
            };
            if time.total_ns == 0 {
                continue;
            }
            let (top, bottom) = (y_of(below + time.share_of_thread_time), y_of(below));
            below += time.share_of_thread_time;
            let _ = writeln!(
                svg,
                r#"<rect class="class-{}" x="{x:.1}" y="{top:.1}" width="{bar_w:.1}" height="{:.1}" fill="{color}"><title>concurrency {}: {} {} of thread time ({} on average)</title></rect>"#,
                class.name(),
                (bottom - top).max(0.0),
                level.concurrency,
                class.name(),
                format_fraction(time.share_of_thread_time),
                format_threads(time.avg_threads)
            );
            if bottom - top >= 14.0 {
                let _ = writeln!(
                    svg,
                    r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="{}">{:.0}%</text>"##,
                    x_of(i),
                    (top + bottom) / 2.0 + 3.5,
                    if matches!(class, TimeClass::Futex | TimeClass::Sleep) {
                        "#222"
                    } else {
                        "#fff"
                    },
                    time.share_of_thread_time * 100.0
                );
            }
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"#,
            x_of(i),
            TIME_TOP - 5.0,
            xml_escape(&format_threads(breakdown.avg_threads))
        );
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TIME_TOP}" width="{plot_w}" height="{TIME_H}" fill="none" stroke="#999"/>"##
    );
    x_axis(
        svg,
        sweep,
        x_of,
        TIME_TOP + TIME_H,
        "concurrency (label above a bar: threads alive on average)",
    );
    // Legend: the classes in stacking order, on two rows.
    for (k, (class, color)) in TimeClass::ALL.iter().zip(CLASS_COLORS).enumerate() {
        let (row, col) = (k / 5, k % 5);
        let x = LEFT + 120.0 * col as f64;
        let y = TIME_TOP + TIME_H + 56.0 + 18.0 * row as f64;
        let _ = writeln!(
            svg,
            r##"<rect x="{x}" y="{:.1}" width="12" height="12" fill="{color}" stroke="#999" stroke-width="0.5"/><text x="{}" y="{:.1}">{}</text>"##,
            y - 10.0,
            x + 17.0,
            y,
            class.name()
        );
    }
}

/// Pixels per SVG unit in PNG output: 2 gives a 1520 × 880 image, sharp enough for a paper.
pub const PNG_SCALE: f32 = 2.0;

/// The scaling chart of `sweep` as a PNG image, rendered from [`scaling_svg`] by resvg with the
/// system's fonts (DejaVu Sans on Debian: `fonts-dejavu-core`).
pub fn scaling_png(sweep: &Sweep, options: &ChartOptions) -> Result<Vec<u8>, SweepError> {
    use resvg::{tiny_skia, usvg};
    let svg = scaling_svg(sweep, options);
    let mut opt = usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    if opt.fontdb.is_empty() {
        return Err(SweepError::NoFonts);
    }
    let tree = usvg::Tree::from_str(&svg, &opt).map_err(SweepError::ChartSvg)?;
    let size = tree.size().to_int_size();
    let (width, height) = (
        (size.width() as f32 * PNG_SCALE).ceil() as u32,
        (size.height() as f32 * PNG_SCALE).ceil() as u32,
    );
    let mut pixmap =
        tiny_skia::Pixmap::new(width, height).ok_or(SweepError::ChartImage { width, height })?;
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(PNG_SCALE, PNG_SCALE),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| SweepError::ChartPng(e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Axis maxima round up to 1, 2 or 5 times a power of ten.
    #[test]
    fn nice_axes() {
        assert_eq!(nice_axis(9.3), (10.0, 2.0));
        assert_eq!(nice_axis(4928.0), (5000.0, 1000.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(format_tick(5000.0), "5k");
        assert_eq!(format_tick(12500.0), "12.5k");
        assert_eq!(format_tick(0.5), "0.5");
    }
}
