//! What each level of a sweep records with, without root: the sweep's probes and settings asked
//! for by every level's recording, bad settings refused before starting, `sweep.json` recording
//! them (and older files without them), levels that missed processes of their target warned of.

use super::*;

/// A recorder that records nothing: it keeps what each level asked for and writes an empty
/// profile where the level's profile goes.
#[derive(Default)]
struct FakeRecorder {
    asked: Vec<lockscope::sweep::LevelRecording>,
}

impl lockscope::sweep::LevelRecorder for FakeRecorder {
    fn start(
        &mut self,
        level: &lockscope::sweep::LevelRecording,
    ) -> Result<(), lockscope::sweep::RecordError> {
        let mut profile = lockscope_probes::Profile::default();
        profile.metadata.duration_ns = level.duration.as_nanos() as u64;
        lockscope_probes::write_profile(&profile, &level.output)?;
        self.asked.push(level.clone());
        Ok(())
    }

    fn finish(&mut self) -> Result<(), lockscope::sweep::RecordError> {
        Ok(())
    }
}

/// A sweep of levels 1 and 3, 10 ms each and no settling, whose load says `{c}00` requests/s at
/// once, into `output_dir`, recording with `probes`.
fn quick_options(output_dir: PathBuf, probes: &[&str]) -> lockscope::sweep::SweepOptions {
    let mut options = lockscope::sweep::SweepOptions::default();
    options.levels = vec![1, 3];
    options.load = "echo 'Requests/sec: {c}00'".to_string();
    options.throughput = lockscope::sweep::Throughput::Wrk;
    options.duration = std::time::Duration::from_millis(10);
    options.settle = std::time::Duration::ZERO;
    options.output_dir = output_dir;
    options.probes = probes.iter().map(|p| p.to_string()).collect();
    options
}

/// Runs the sweep `options` (of pid 4242) with a [`FakeRecorder`]; returns the sweep and what
/// each level's recording was asked for.
fn fake_sweep(
    options: &lockscope::sweep::SweepOptions,
) -> (Sweep, Vec<lockscope::sweep::LevelRecording>) {
    let mut recorder = FakeRecorder::default();
    let sweep = lockscope::sweep::run_sweep(
        options,
        lockscope::sweep::SweepTarget::pid(4242),
        None,
        &mut recorder,
        &mut |_| {},
    )
    .expect("sweep");
    (sweep, recorder.asked)
}

/// Every level's recording is asked for the sweep's probes; the library refuses an unknown
/// probe before it creates the sweep directory.
#[test]
fn every_level_records_the_sweep_probes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = quick_options(dir.path().join("sweep"), &["futex", "offcpu"]);
    let (sweep, asked) = fake_sweep(&options);
    assert_eq!(sweep.levels.len(), 2);
    let asked: Vec<(u32, Vec<String>)> = asked
        .iter()
        .map(|l| (l.concurrency, l.probes.clone()))
        .collect();
    assert_eq!(
        asked,
        [(1, options.probes.clone()), (3, options.probes.clone())]
    );

    options.probes = vec!["futex".to_string(), "nosuch".to_string()];
    options.output_dir = dir.path().join("refused");
    let err = lockscope::sweep::run_sweep(
        &options,
        lockscope::sweep::SweepTarget::pid(4242),
        None,
        &mut FakeRecorder::default(),
        &mut |_| {},
    )
    .expect_err("unknown probe");
    assert!(err.to_string().contains("unknown probe `nosuch`"), "{err}");
    assert!(!options.output_dir.exists());
}

/// The files left in `dir`: none when a sweep was refused before starting anything.
fn files_in(dir: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .expect("list the directory")
        .map(|e| e.expect("entry").file_name())
        .collect()
}

/// `sweep` refuses an unknown `--probes` name, a bad `--min-block` and an unknown `--syscalls`
/// name with the same one-line error as `record`, before anything starts: no server, no load,
/// no sweep directory.
#[test]
fn sweep_refuses_bad_probe_settings_before_starting() {
    let unknown = lockscope_probes::catalog::UnknownProbe {
        name: "nosuch".into(),
    }
    .to_string();
    let cases: [(&[&str], &str); 4] = [
        (&["--probes", "futex,nosuch"], &unknown),
        (&["--min-block", "0s"], "must be greater than zero"),
        (&["--min-block", "10 parsecs"], "unit `parsecs`"),
        (
            &["--probes", "futex,syscall", "--syscalls", "read,reed"],
            "unknown system call `reed`",
        ),
    ];
    for (settings, reason) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = lockscope()
            .current_dir(dir.path())
            .args([
                "sweep",
                "--levels",
                "1,2",
                "--load",
                "touch load-ran-{c}",
                "--server",
                "touch server-ran; sleep 5",
                "--server-startup",
                "100ms",
                "-o",
                "out",
            ])
            .args(settings)
            .output()
            .expect("run lockscope sweep");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{settings:?} must fail: {stderr}");
        let error = stderr
            .lines()
            .find(|l| l.contains("error:"))
            .unwrap_or_default();
        assert!(error.contains(reason), "{settings:?}: {stderr}");
        let record = lockscope()
            .current_dir(dir.path())
            .args(["record", "-p", "1", "-o", "record.lsp"])
            .args(settings)
            .output()
            .expect("run lockscope record");
        let record_stderr = String::from_utf8_lossy(&record.stderr);
        assert!(!record.status.success(), "{settings:?}: {record_stderr}");
        // A usage error ends naming its own command's help: the rest is the same.
        let without_help = |line: &str| line.split(" (see 'lockscope ").next().map(str::to_owned);
        assert_eq!(
            without_help(error),
            record_stderr
                .lines()
                .find(|l| l.contains("error:"))
                .and_then(without_help),
            "sweep and record refuse {settings:?} alike"
        );
        let left = files_in(dir.path());
        assert!(
            left.is_empty(),
            "{settings:?}: nothing ran and nothing was written: {left:?}"
        );
    }
}

/// Every level's recording is asked for the sweep's `--min-block` and `--syscalls`, and
/// `sweep.json` says which probes and settings the levels were recorded with (`null` for those
/// left to the recording's defaults).
#[test]
fn sweep_json_records_the_probes_and_settings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = quick_options(dir.path().join("given"), &["offcpu", "syscall"]);
    options.min_block = Some(std::time::Duration::from_micros(250));
    options.syscalls = vec!["read".to_string(), "write".to_string()];
    let (_, asked) = fake_sweep(&options);
    let asked: Vec<_> = asked
        .iter()
        .map(|l| (l.concurrency, l.min_block, l.syscalls.clone()))
        .collect();
    assert_eq!(
        asked,
        [
            (1, options.min_block, options.syscalls.clone()),
            (3, options.min_block, options.syscalls.clone())
        ]
    );
    let (read, _) = lockscope::sweep::read_sweep(&options.output_dir).expect("read sweep.json");
    assert_eq!(read.probes.as_deref(), Some(&options.probes[..]));
    assert_eq!(read.min_block_ns, Some(250_000));
    assert_eq!(read.syscalls.as_deref(), Some(&options.syscalls[..]));
    let text = std::fs::read_to_string(options.output_dir.join("sweep.json")).expect("read");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(json["min_block_ns"], 250_000);
    assert_eq!(json["syscalls"], serde_json::json!(["read", "write"]));

    // Nothing given: every level gets the recording's defaults, and the file says so with nulls.
    let mut options = options.clone();
    options.output_dir = dir.path().join("defaults");
    options.probes.clear();
    options.min_block = None;
    options.syscalls.clear();
    let (_, asked) = fake_sweep(&options);
    assert!(asked
        .iter()
        .all(|l| l.probes.is_empty() && l.min_block.is_none() && l.syscalls.is_empty()));
    let text = std::fs::read_to_string(options.output_dir.join("sweep.json")).expect("read");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    for field in ["probes", "min_block_ns", "syscalls"] {
        assert_eq!(json.get(field), Some(&serde_json::Value::Null), "{field}");
    }
}

/// A `sweep.json` written before the probes and settings were recorded (no `probes`,
/// `min_block_ns`, `syscalls`, nor `warnings`) still loads, with those unknown.
#[test]
fn old_sweep_json_without_the_settings_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = r#"{
  "sweep_version": 1,
  "load": "ab -c {c} -t 3 http://127.0.0.1:8080/",
  "server": null,
  "pid": 19293,
  "duration_ns": 3000000000,
  "throughput_parser": "ab",
  "throughput_unit": "requests/s",
  "levels": [
    {
      "concurrency": 1,
      "throughput": 15716.54,
      "scaling": 1.0,
      "profile": "level-1.lsp",
      "load_output": "level-1.load.txt",
      "wall_ns": 3015026505,
      "waits": 69109,
      "wait_ns": 10997276556,
      "lost_events": 0,
      "kinds": [{"name": "condvar", "count": 47292, "total_ns": 10878509264, "share_of_wall": 3.608}],
      "threads": [{"name": "nginx", "count": 69109, "total_ns": 10997276556, "share_of_wall": 3.647}],
      "top_sites": []
    }
  ],
  "knee": null,
  "finding": "Only concurrency 1 was run: no scaling to compare."
}
"#;
    std::fs::write(dir.path().join("sweep.json"), old).expect("write");
    let (sweep, _) = lockscope::sweep::read_sweep(dir.path()).expect("an old sweep.json loads");
    assert_eq!(sweep.levels.len(), 1);
    assert_eq!(sweep.levels[0].throughput, 15716.54);
    // Version 1's `share_of_wall` is today's `avg_threads`; it had no thread time to share.
    assert_eq!(sweep.sweep_version, SWEEP_VERSION);
    assert_eq!(sweep.levels[0].kinds[0].avg_threads, 3.608);
    assert_eq!(sweep.levels[0].kinds[0].share_of_thread_time, None);
    assert_eq!(sweep.levels[0].breakdown, None);
    assert_eq!(
        (sweep.probes, sweep.min_block_ns, sweep.syscalls),
        (None, None, None)
    );
    assert!(sweep.warnings.is_empty());
}

/// A recorder whose levels record one process of a target that has three.
struct PartialRecorder;

impl lockscope::sweep::LevelRecorder for PartialRecorder {
    fn start(
        &mut self,
        level: &lockscope::sweep::LevelRecording,
    ) -> Result<(), lockscope::sweep::RecordError> {
        let mut profile = fixtures::demo_profile();
        profile.metadata.duration_ns = level.duration.as_nanos() as u64;
        profile.processes = vec![lockscope_probes::ProcessInfo {
            pid: 4242,
            name: "demo".to_string(),
            ..lockscope_probes::ProcessInfo::default()
        }];
        lockscope_probes::write_profile(&profile, &level.output)?;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), lockscope::sweep::RecordError> {
        Ok(())
    }

    fn target_processes(
        &mut self,
        target: &lockscope::sweep::SweepTarget,
    ) -> Option<std::collections::BTreeSet<u32>> {
        assert_eq!(target, &lockscope::sweep::SweepTarget::pid(4242));
        Some([4242, 4243, 4244].into())
    }
}

/// Every level that missed processes of its target is a warning of the sweep, with the counts
/// in the level's entry of sweep.json.
#[test]
fn levels_missing_processes_warn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = quick_options(dir.path().join("sweep"), &[]);
    let sweep = lockscope::sweep::run_sweep(
        &options,
        lockscope::sweep::SweepTarget::pid(4242),
        None,
        &mut PartialRecorder,
        &mut |_| {},
    )
    .expect("sweep");
    assert_eq!(sweep.target.as_deref(), Some("pid 4242"));
    for level in &sweep.levels {
        assert_eq!(
            (
                level.processes,
                level.target_processes,
                level.missed_processes
            ),
            (Some(1), Some(3), Some(2))
        );
    }
    let missing: Vec<&String> = sweep
        .warnings
        .iter()
        .filter(|w| w.contains("missed 2 of the 3 processes the target has"))
        .collect();
    assert_eq!(missing.len(), 2, "{:?}", sweep.warnings);
    let written = std::fs::read_to_string(options.output_dir.join("sweep.json")).expect("file");
    assert!(written.contains("\"target_processes\": 3"), "{written}");
    assert!(written.contains("\"missed_processes\": 2"), "{written}");
}
