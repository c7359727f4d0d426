//! What keeps a sweep from running, its file from being read or its chart from being drawn.

use super::{RecordError, ThroughputError, OLDEST_SWEEP_VERSION, SWEEP_VERSION};
use lockscope_probes::catalog;
use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;

/// Why a sweep could not run, be read, or have its chart drawn as PNG.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SweepError {
    /// No concurrency levels.
    #[error("no concurrency levels given")]
    NoLevels,
    /// A concurrency level of 0.
    #[error("concurrency levels must be at least 1")]
    ZeroLevel,
    /// A load command that does not say where the level goes.
    #[error("the load command `{load}` has no `{{c}}` for the concurrency level")]
    NoLevelInLoad {
        /// The load command.
        load: String,
    },
    /// A probe the catalog does not know.
    #[error(transparent)]
    UnknownProbe(#[from] catalog::UnknownProbe),
    /// `--min-block 0`.
    #[error("--min-block must be greater than zero")]
    ZeroMinBlock,
    /// A throughput parser that cannot read a throughput.
    #[error(transparent)]
    Throughput(#[from] ThroughputError),
    /// The output directory could not be created.
    #[error("failed to create sweep directory `{}`", .path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A level's recording did not start.
    #[error("failed to start recording level {level}")]
    StartRecording {
        /// The level's concurrency.
        level: u32,
        /// The recorder's error.
        #[source]
        source: RecordError,
    },
    /// A level's recording failed.
    #[error("failed to record level {level}")]
    Record {
        /// The level's concurrency.
        level: u32,
        /// The recorder's error.
        #[source]
        source: RecordError,
    },
    /// The load command could not be started.
    #[error("failed to start load command `{command}`")]
    StartLoad {
        /// The command, its level filled in.
        command: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The load command could not be waited for.
    #[error("load command `{command}`: failed to wait")]
    WaitLoad {
        /// The command, its level filled in.
        command: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The load command outlasted the recording by more than its grace time.
    #[error(
        "load command `{command}`: still running {:.0} s after the recording ended: killed",
        .grace.as_secs_f64()
    )]
    LoadKilled {
        /// The command, its level filled in.
        command: String,
        /// How long it was waited for.
        grace: std::time::Duration,
    },
    /// The load command failed.
    #[error("load command `{command}` failed ({status}): {stderr}")]
    LoadFailed {
        /// The command, its level filled in.
        command: String,
        /// How it ended.
        status: ExitStatus,
        /// The last lines of its standard error, ` / `-separated.
        stderr: String,
    },
    /// No throughput in a level's load output.
    #[error("level {level}: `{}`", .path.display())]
    LevelThroughput {
        /// The level's concurrency.
        level: u32,
        /// The load output.
        path: PathBuf,
        /// Why.
        #[source]
        source: ThroughputError,
    },
    /// A file of the sweep could not be read.
    #[error("failed to read `{}`", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A file of the sweep could not be written.
    #[error("failed to write `{}`", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A level's profile could not be read.
    #[error("failed to read profile `{}`", .path.display())]
    ReadProfile {
        /// The profile.
        path: PathBuf,
        /// Why.
        #[source]
        source: lockscope_probes::FormatError,
    },
    /// A level's profile could not be exported as pprof.
    #[error("level {level}: failed to export pprof")]
    Pprof {
        /// The level's concurrency.
        level: u32,
        /// Why.
        #[source]
        source: crate::export::ExportError,
    },
    /// A level's pprof file could not be written.
    #[error("level {level}: failed to write pprof `{}`", .path.display())]
    WritePprof {
        /// The level's concurrency.
        level: u32,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The sweep could not be encoded as JSON.
    #[error("failed to encode the sweep")]
    Encode(#[source] serde_json::Error),
    /// The sweep file could not be written.
    #[error("failed to write sweep file `{}`", .path.display())]
    WriteSweep {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The sweep file could not be read.
    #[error("failed to read sweep file `{}`", .path.display())]
    ReadSweep {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The file is not a sweep file.
    #[error("`{}` is not a sweep file", .path.display())]
    NotASweep {
        /// The file.
        path: PathBuf,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },
    /// A sweep file of a version this lockscope does not read.
    #[error(
        "sweep file `{}` has version {version}, this lockscope reads {OLDEST_SWEEP_VERSION} to \
         {SWEEP_VERSION}",
        .path.display()
    )]
    UnknownVersion {
        /// The file.
        path: PathBuf,
        /// Its version.
        version: u32,
    },
    /// No fonts for the PNG chart's text.
    #[error("no system fonts to draw the chart's text with (install fonts-dejavu-core)")]
    NoFonts,
    /// resvg could not read the chart's SVG.
    #[error("failed to parse the chart's SVG")]
    ChartSvg(#[source] resvg::usvg::Error),
    /// The PNG chart's image could not be allocated.
    #[error("failed to allocate a {width} × {height} image")]
    ChartImage {
        /// Width, pixels.
        width: u32,
        /// Height, pixels.
        height: u32,
    },
    /// The chart could not be encoded as PNG.
    #[error("failed to encode the chart as PNG")]
    ChartPng(#[source] Box<dyn std::error::Error + Send + Sync>),
}
