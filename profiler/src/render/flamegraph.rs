//! Flamegraphs of waits, drawn by inferno from the folded stacks of [`crate::analysis::fold`].
//!
//! Frame widths are wait time by default (the SVG's tooltips say `ns`) or number of waits
//! (`waits`). Colors are the blue "io" palette FlameGraph uses for off-CPU time, hashed from the
//! function name so that the same function has the same color in every graph and the output is
//! reproducible. With the `cpu` probe's samples (`--probe cpu`) widths are CPU time, in
//! FlameGraph's warm colors; the wall-clock view (`--wall`) draws on-CPU samples and off-CPU
//! intervals together, each leaf marked with what the thread was doing.

use crate::analysis::fold::{check_probe, check_wall, folded_lines, FoldError, FoldOptions};
use crate::analysis::measure::Measure;
use crate::render::units::format_ns;
use inferno::flamegraph::color::{BasicPalette, MultiPalette, Palette};
use lockscope_probes::{catalog, Profile};

/// Longest command line shown in a default title; longer ones are cut with `…`.
const MAX_TITLE_COMMAND_CHARS: usize = 60;

/// How to draw a flamegraph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlamegraphOptions {
    /// Which waits, weighted how, with or without kernel frames. Default: [`FoldOptions::default`]
    /// (every probe, weighted by wait time, user frames only).
    pub fold: FoldOptions,
    /// Title of the graph. Default: `None`, which uses [`default_title`]
    /// (``lockscope: futex waits of `demo` (pid 123), 1.20 s``).
    pub title: Option<String>,
    /// Draw the wakeup chains of the `offcpu` probe (waker stacks above sleeper stacks,
    /// [`crate::analysis::wakeup`]) instead of the waits. Default: `false`.
    pub wakeups: bool,
}

/// Why a flamegraph could not be drawn ([`write_flamegraph`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// The fold options do not fit the profile (a probe it does not have, the wall-clock view
    /// without its probes' records).
    #[error(transparent)]
    Fold(#[from] FoldError),
    /// The wakeup chains of a profile without wakeups.
    #[error(
        "no wakeups recorded in this profile (record with --probes {})",
        catalog::WAKEUP.name
    )]
    NoWakeups,
    /// No wait is left to draw.
    #[error(
        "no waits recorded {}: nothing to draw",
        match .probe {
            Some(probe) => format!("for probe `{probe}`"),
            None => "in this profile".to_string(),
        }
    )]
    NoWaits {
        /// The probe filter, when there is one.
        probe: Option<String>,
    },
    /// inferno could not write the SVG.
    #[error("failed to render the {graph}")]
    Inferno {
        /// The graph (`flamegraph`, `wakeup flamegraph`).
        graph: &'static str,
        /// The writer's error.
        #[source]
        source: std::io::Error,
    },
}

/// The title used when none is given: the probes, the target command, its pid and the duration.
pub fn default_title(profile: &Profile, fold: &FoldOptions) -> String {
    let probes = match &fold.probe {
        Some(probe) => probe.clone(),
        None => {
            let recorded = profile.recorded_probes();
            if recorded.is_empty() {
                "lock".to_string()
            } else {
                recorded.join("+")
            }
        }
    };
    let measure = Measure::of(profile, fold);
    let what = if fold.wall {
        "wall time"
    } else if measure == Measure::OnCpu {
        "CPU time"
    } else if measure == Measure::Holds {
        "lock holds"
    } else if measure == Measure::Calls {
        "system calls"
    } else {
        "waits"
    };
    if fold.wall {
        // Whatever the probes, the view is the cpu and offcpu probes'.
        let probes = format!("{}+{}", catalog::CPU.name, catalog::OFFCPU.name);
        return target_title(profile, &probes, what);
    }
    if !matches!(measure, Measure::Waits | Measure::Holds | Measure::Calls)
        && (measure != Measure::OnCpu || profile.metadata.target.command.is_empty())
    {
        // An imported capture: no target, no duration; say what was sampled, and from where.
        return format!(
            "lockscope: {probes} {}, {}",
            measure.noun(2),
            profile.metadata.end_reason
        );
    }
    target_title(profile, &probes, what)
}

/// ``lockscope: PROBES WHAT of `CMD` (pid N), DURATION``.
fn target_title(profile: &Profile, probes: &str, what: &str) -> String {
    let target = &profile.metadata.target;
    let mut command = target.command.join(" ");
    if command.chars().count() > MAX_TITLE_COMMAND_CHARS {
        command = command.chars().take(MAX_TITLE_COMMAND_CHARS - 1).collect();
        command.push('…');
    }
    format!(
        "lockscope: {probes} {what} of `{command}` (pid {}), {}",
        target.pid,
        format_ns(profile.metadata.duration_ns)
    )
}

/// The line under the title: what widths mean, and a warning when the profile lost waits.
fn subtitle(profile: &Profile, fold: &FoldOptions) -> String {
    let mut text = if fold.wall {
        "width: wall time of the threads (on-CPU samples and off-CPU intervals); the top frame \
         says on-cpu, run-queue, preempted or off-cpu with why"
            .to_string()
    } else {
        format!("width: {}", Measure::of(profile, fold).width(fold.weight))
    };
    let losses = &profile.metadata.losses;
    if losses.lost_events() > 0 {
        text.push_str(&format!(
            " (WARNING: {} waits lost while recording)",
            losses.lost_events()
        ));
    }
    text
}

/// Writes an SVG flamegraph of the waits of `profile` to `out`.
///
/// Fails when the probe filter names a probe the profile does not have, or when no wait is left
/// to draw (``no waits recorded for probe `futex` ``).
pub fn write_flamegraph(
    profile: &Profile,
    options: &FlamegraphOptions,
    out: &mut dyn std::io::Write,
) -> Result<(), RenderError> {
    check_probe(profile, &options.fold)?;
    if options.fold.wall {
        check_wall(profile)?;
    }
    if options.wakeups {
        let lines = crate::analysis::wakeup::wakeup_lines(profile, &options.fold);
        if lines.is_empty() {
            return Err(RenderError::NoWakeups);
        }
        let mut inferno_options = inferno::flamegraph::Options::default();
        inferno_options.title = options.title.clone().unwrap_or_else(|| {
            default_title(profile, &options.fold).replacen(" waits of ", " wakeups of ", 1)
        });
        inferno_options.subtitle = Some(
            "sleeper stacks below `--`, the stacks of the threads that woke them above (upside down)"
                .to_string(),
        );
        inferno_options.count_name = options.fold.weight.unit().to_string();
        inferno_options.colors = Palette::Multi(MultiPalette::Wakeup);
        inferno_options.hash = true;
        return inferno::flamegraph::from_lines(
            &mut inferno_options,
            lines.iter().map(String::as_str),
            out,
        )
        .map_err(|source| RenderError::Inferno {
            graph: "wakeup flamegraph",
            source,
        });
    }
    let lines = folded_lines(profile, &options.fold);
    if lines.is_empty() {
        return Err(RenderError::NoWaits {
            probe: options.fold.probe.clone(),
        });
    }
    let mut inferno_options = inferno::flamegraph::Options::default();
    inferno_options.title = options
        .title
        .clone()
        .unwrap_or_else(|| default_title(profile, &options.fold));
    inferno_options.subtitle = Some(subtitle(profile, &options.fold));
    inferno_options.count_name = Measure::of(profile, &options.fold)
        .unit(options.fold.weight)
        .to_string();
    // Blue for waits (FlameGraph's off-CPU colors), FlameGraph's warm default for samples.
    inferno_options.colors =
        if Measure::of(profile, &options.fold) == Measure::Waits && !options.fold.wall {
            Palette::Basic(BasicPalette::Io)
        } else {
            Palette::Basic(BasicPalette::Hot)
        };
    inferno_options.hash = true;
    // `folded_lines` returns sorted lines, which is what `from_lines` requires.
    inferno::flamegraph::from_lines(&mut inferno_options, lines.iter().map(String::as_str), out)
        .map_err(|source| RenderError::Inferno {
            graph: "flamegraph",
            source,
        })
}
