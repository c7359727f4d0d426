//! Running a sweep ([`run_sweep`]): per level, the caller's recording ([`LevelRecorder`]), the
//! load command and its throughput, then `sweep.json`.

use super::{
    fill_scaling, find_knee, finding, level_warnings, summarize_level, Level, ParsedThroughput,
    Sweep, SweepError, Throughput, SWEEP_FILE, SWEEP_VERSION,
};
use crate::export::pprof::{write_pprof, PprofOptions};
use lockscope_probes::Profile;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How to run a sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepOptions {
    /// Concurrency levels, in the order to run them. Default: `[1, 2, 5, 10]`.
    pub levels: Vec<u32>,
    /// Load command, run with `sh -c`, `{c}` replaced by the level. Default: empty (required).
    pub load: String,
    /// Recording time per level. Default: 20 s.
    pub duration: Duration,
    /// How long to wait for the load to finish after the recording. Default: 60 s.
    pub load_grace: Duration,
    /// Pause between levels, so one level's stragglers do not count in the next. Default: 1 s.
    pub settle: Duration,
    /// Throughput parser. Default: [`Throughput::Auto`].
    pub throughput: Throughput,
    /// Directory for the sweep file, profiles and load outputs. Default: `sweep`.
    pub output_dir: PathBuf,
    /// Probes every level's recording attaches (catalog names, `lockscope probes`). Default:
    /// empty, the recording backend's default probes.
    pub probes: Vec<String>,
    /// Shortest off-CPU interval every level's `offcpu` probe records (`record --min-block`).
    /// Default: `None`, the recording's default (10 µs).
    pub min_block: Option<Duration>,
    /// System calls every level's `syscall` probe records (`record --syscalls`). Default: empty,
    /// all of them.
    pub syscalls: Vec<String>,
}

impl Default for SweepOptions {
    fn default() -> Self {
        SweepOptions {
            levels: vec![1, 2, 5, 10],
            load: String::new(),
            duration: Duration::from_secs(20),
            load_grace: Duration::from_secs(60),
            settle: Duration::from_secs(1),
            throughput: Throughput::Auto,
            output_dir: PathBuf::from("sweep"),
            probes: Vec::new(),
            min_block: None,
            syscalls: Vec::new(),
        }
    }
}

impl SweepOptions {
    /// Checks the options before anything runs.
    pub fn validate(&self) -> Result<(), SweepError> {
        if self.levels.is_empty() {
            return Err(SweepError::NoLevels);
        }
        if self.levels.contains(&0) {
            return Err(SweepError::ZeroLevel);
        }
        if !self.load.contains("{c}") {
            return Err(SweepError::NoLevelInLoad {
                load: self.load.clone(),
            });
        }
        for name in &self.probes {
            lockscope_probes::catalog::lookup(name)?;
        }
        if self.min_block == Some(Duration::ZERO) {
            return Err(SweepError::ZeroMinBlock);
        }
        Ok(self.throughput.validate()?)
    }
}

/// What every level of a sweep records: a [`lockscope_probes::Target`] without its `Command`
/// (a sweep starts its server at most once, before the first level, and every level records
/// running processes), kept as this narrower type so that a level cannot be asked to launch
/// anything; `sweep.json` holds it in words ([`SweepTarget::describe`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SweepTarget {
    /// Running processes; with `tree`, their descendants too (a server lockscope started is
    /// recorded with its whole tree).
    Pids {
        /// The processes, the server's first.
        pids: Vec<u32>,
        /// Their descendants too.
        tree: bool,
    },
    /// Every process of a cgroup (v2) and its descendant cgroups (a path as `record --cgroup`
    /// takes it).
    Cgroup(String),
    /// Every process.
    All,
}

impl SweepTarget {
    /// One process (without its descendants).
    pub fn pid(pid: u32) -> Self {
        SweepTarget::Pids {
            pids: vec![pid],
            tree: false,
        }
    }

    /// The first process given, 0 for a cgroup or all processes.
    pub fn first_pid(&self) -> u32 {
        match self {
            SweepTarget::Pids { pids, .. } => pids.first().copied().unwrap_or(0),
            SweepTarget::Cgroup(_) | SweepTarget::All => 0,
        }
    }

    /// In words: `pid 12`, `pids 12, 34 and their descendants`, `cgroup X`, `all processes`.
    pub fn describe(&self) -> String {
        match self {
            SweepTarget::Pids { pids, tree } => {
                let list: Vec<String> = pids.iter().map(u32::to_string).collect();
                format!(
                    "{} {}{}",
                    if pids.len() == 1 { "pid" } else { "pids" },
                    list.join(", "),
                    match (tree, pids.len() == 1) {
                        (false, _) => "",
                        (true, true) => " and its descendants",
                        (true, false) => " and their descendants",
                    }
                )
            }
            SweepTarget::Cgroup(path) => format!("cgroup {path}"),
            SweepTarget::All => "all processes".to_string(),
        }
    }
}

/// What the caller's recorder is asked to do for one level.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LevelRecording {
    /// The concurrency level.
    pub concurrency: u32,
    /// What to record.
    pub target: SweepTarget,
    /// How long to record.
    pub duration: Duration,
    /// Profile to write.
    pub output: PathBuf,
    /// Probes to attach ([`SweepOptions::probes`]); empty means the backend's defaults. Default:
    /// empty.
    pub probes: Vec<String>,
    /// Shortest off-CPU interval the `offcpu` probe records ([`SweepOptions::min_block`]);
    /// `None` means the recording's default. Default: `None`.
    pub min_block: Option<Duration>,
    /// System calls the `syscall` probe records ([`SweepOptions::syscalls`]); empty means all.
    /// Default: empty.
    pub syscalls: Vec<String>,
}

impl LevelRecording {
    /// Recording `target` at level `concurrency` for `duration` into `output`, with the
    /// backend's default probes and settings.
    pub fn new(concurrency: u32, target: SweepTarget, duration: Duration, output: PathBuf) -> Self {
        LevelRecording {
            concurrency,
            target,
            duration,
            output,
            probes: Vec::new(),
            min_block: None,
            syscalls: Vec::new(),
        }
    }
}

/// Why a [`LevelRecorder`] could not record a level: any error, since recording is the caller's
/// (the `lockscope` binary's sessions fail with the backends' errors and its own); [`run_sweep`]
/// names the level it was recording ([`SweepError::StartRecording`], [`SweepError::Record`]).
pub type RecordError = Box<dyn std::error::Error + Send + Sync>;

/// Records the server for a sweep, one level at a time.
pub trait LevelRecorder {
    /// Starts recording `level`; returns once the probes are attached, so the load that starts
    /// next is recorded from its first request.
    fn start(&mut self, level: &LevelRecording) -> Result<(), RecordError>;
    /// Waits for the recording started last to end (after its duration) and its profile to be
    /// written.
    fn finish(&mut self) -> Result<(), RecordError>;

    /// The processes the target has now (the processes given and their descendants, a
    /// cgroup's processes, every process), asked once a level's recording runs, to find those
    /// the level did not record; `None` when the recorder cannot tell. Default: `None`.
    fn target_processes(&mut self, _target: &SweepTarget) -> Option<BTreeSet<u32>> {
        None
    }
}

/// Runs a sweep against `target`: per level, starts the recording (returning once attached),
/// starts the load, waits for the recording's end and the load's, and parses the throughput.
/// Writes `sweep.json` into the output directory and returns the sweep. `progress` gets one line
/// per step.
pub fn run_sweep(
    options: &SweepOptions,
    target: SweepTarget,
    server: Option<String>,
    recorder: &mut dyn LevelRecorder,
    progress: &mut dyn FnMut(&str),
) -> Result<Sweep, SweepError> {
    options.validate()?;
    let dir = &options.output_dir;
    std::fs::create_dir_all(dir).map_err(|source| SweepError::CreateDir {
        path: dir.clone(),
        source,
    })?;
    let mut levels = Vec::new();
    let mut unit = String::new();
    let mut parser = options.throughput.name().to_string();
    for (i, &c) in options.levels.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(options.settle);
        }
        let (level, throughput) = run_level(options, &target, c, recorder, progress)?;
        unit = throughput.unit;
        parser = throughput.parser;
        levels.push(level);
    }
    fill_scaling(&mut levels);
    let knee = find_knee(&levels);
    let finding = finding(&levels, knee.as_ref());
    let warnings = level_warnings(&levels);
    for warning in &warnings {
        progress(&format!("WARNING: {warning}"));
    }
    let sweep = Sweep {
        sweep_version: SWEEP_VERSION,
        load: options.load.clone(),
        server,
        pid: target.first_pid(),
        target: Some(target.describe()),
        duration_ns: options.duration.as_nanos() as u64,
        throughput_parser: parser,
        throughput_unit: unit,
        levels,
        knee,
        finding,
        warnings,
        probes: non_empty(&options.probes),
        min_block_ns: options.min_block.map(|d| d.as_nanos() as u64),
        syscalls: non_empty(&options.syscalls),
    };
    let path = dir.join(SWEEP_FILE);
    let json = serde_json::to_string_pretty(&sweep).map_err(SweepError::Encode)?;
    if let Err(source) = std::fs::write(&path, json + "\n") {
        return Err(SweepError::WriteSweep { path, source });
    }
    Ok(sweep)
}

/// One level at concurrency `c`: recorded while its load runs, its throughput parsed from the
/// load's output, its profile summarized and also written as pprof.
fn run_level(
    options: &SweepOptions,
    target: &SweepTarget,
    c: u32,
    recorder: &mut dyn LevelRecorder,
    progress: &mut dyn FnMut(&str),
) -> Result<(Level, ParsedThroughput), SweepError> {
    let dir = &options.output_dir;
    let command = options.load.replace("{c}", &c.to_string());
    let profile_name = format!("level-{c}.lsp");
    let output_name = format!("level-{c}.load.txt");
    let output_path = dir.join(&output_name);
    let mut recording =
        LevelRecording::new(c, target.clone(), options.duration, dir.join(&profile_name));
    recording.probes = options.probes.clone();
    recording.min_block = options.min_block;
    recording.syscalls = options.syscalls.clone();
    recorder
        .start(&recording)
        .map_err(|source| SweepError::StartRecording { level: c, source })?;
    // Counted once the recording runs: every process the target has then must be recorded
    // (those it forks later are followed; those forked once the recording ended are not
    // the level's).
    let target_processes = recorder.target_processes(target);
    progress(&format!("level {c}: running `{command}`"));
    let text = run_load(options, c, &command, recorder, &output_path)?;
    let parsed = options
        .throughput
        .parse(&text)
        .map_err(|source| SweepError::LevelThroughput {
            level: c,
            path: output_path.clone(),
            source,
        })?;
    let profile = lockscope_probes::read_profile(&recording.output).map_err(|source| {
        SweepError::ReadProfile {
            path: recording.output.clone(),
            source,
        }
    })?;
    write_level_pprof(dir, c, &profile)?;
    progress(&format!(
        "level {c}: {:.1} {}, {} waits recorded",
        parsed.value,
        parsed.unit,
        profile.waits.iter().map(|w| w.stats.count).sum::<u64>()
    ));
    let mut level = summarize_level(c, parsed.value, &profile, (&profile_name, &output_name));
    if let Some(pids) = target_processes {
        let recorded: BTreeSet<u32> = profile.processes.iter().map(|p| p.pid).collect();
        level.target_processes = Some(pids.len() as u64);
        level.missed_processes = Some(pids.difference(&recorded).count() as u64);
    }
    Ok((level, parsed))
}

/// Runs level `c`'s load `command` while the recording started runs, waits for the
/// recording's end and the load's, and returns what the load printed (an error if it failed).
fn run_load(
    options: &SweepOptions,
    c: u32,
    command: &str,
    recorder: &mut dyn LevelRecorder,
    output_path: &Path,
) -> Result<String, SweepError> {
    let stdout = create(output_path)?;
    let stderr_path = options.output_dir.join(format!("level-{c}.load.err"));
    let stderr = create(&stderr_path)?;
    let load = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|source| SweepError::StartLoad {
            command: command.to_string(),
            source,
        });
    let mut load = match load {
        Ok(load) => load,
        Err(e) => {
            let _ = recorder.finish();
            return Err(e);
        }
    };
    let recorded = recorder.finish();
    let status = wait_with_deadline(&mut load, command, options.load_grace)?;
    recorded.map_err(|source| SweepError::Record { level: c, source })?;
    let text = std::fs::read_to_string(output_path).map_err(|source| SweepError::Read {
        path: output_path.to_path_buf(),
        source,
    })?;
    if !status.success() {
        let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(SweepError::LoadFailed {
            command: command.to_string(),
            status,
            stderr: tail.into_iter().rev().collect::<Vec<_>>().join(" / "),
        });
    }
    Ok(text)
}

/// The level in pprof too, labelled with its concurrency, so that all levels load together
/// into pprof-reading tools and can be told apart there.
fn write_level_pprof(dir: &Path, c: u32, profile: &Profile) -> Result<(), SweepError> {
    let pprof_path = dir.join(format!("level-{c}.pb.gz"));
    let pprof_options = PprofOptions {
        concurrency: Some(u64::from(c)),
        ..PprofOptions::default()
    };
    let mut pprof = Vec::new();
    write_pprof(profile, &pprof_options, &mut pprof)
        .map_err(|source| SweepError::Pprof { level: c, source })?;
    std::fs::write(&pprof_path, &pprof).map_err(|source| SweepError::WritePprof {
        level: c,
        path: pprof_path,
        source,
    })
}

/// Creates (or truncates) `path` for a load command's output.
fn create(path: &std::path::Path) -> Result<std::fs::File, SweepError> {
    std::fs::File::create(path).map_err(|source| SweepError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// `names`, or `None` when there are none (a setting left to the recording's default).
fn non_empty(names: &[String]) -> Option<Vec<String>> {
    (!names.is_empty()).then(|| names.to_vec())
}

/// Waits for `child`, the load `command`, up to `grace`; kills it past that.
fn wait_with_deadline(
    child: &mut std::process::Child,
    command: &str,
    grace: Duration,
) -> Result<std::process::ExitStatus, SweepError> {
    let deadline = Instant::now() + grace;
    loop {
        let exited = child.try_wait().map_err(|source| SweepError::WaitLoad {
            command: command.to_string(),
            source,
        })?;
        if let Some(status) = exited {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SweepError::LoadKilled {
                command: command.to_string(),
                grace,
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
