//! `lockscope sweep` end to end against real servers on loopback: nginx under ab (attached with
//! -p, and started by lockscope with --server) and MariaDB under sysbench oltp_read_only, both
//! from profiler/workloads/. Needs root and BPF (skips loudly otherwise), and the workload
//! scripts' packages (they install them; a failed start skips loudly). The `--probes`,
//! `--min-block` and `--syscalls` tests need neither: they check the validation, what each
//! level's recording gets and what `sweep.json` says of it; nor do the tests of the units of the
//! table, the finding and `sweep.json`, built from synthetic profiles.

use crate::common;
use crate::common::fixtures;

use common::*;
use lockscope::sweep::{fill_scaling, find_knee, finding, summarize_level, Sweep, SWEEP_VERSION};
use lockscope_probes::{ThreadTime, TimeClass};
use std::path::{Path, PathBuf};
use std::process::Command;

fn workload(script: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads")
        .join(script)
}

/// A workload script run with its own port and state directory; stopped when dropped.
struct Workload {
    script: PathBuf,
    /// The script's settings: the test's own and LOCKSCOPE_WORKLOAD_DIR, the state directory.
    env: Vec<(String, String)>,
    /// The server's state (data, prefix, pid file), removed once the server is stopped.
    state: tempfile::TempDir,
}

impl Workload {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg(&self.script).args(args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Starts the server of `script` with the settings `env` (its port among them) and a state
    /// directory of its own; `None` (after printing why) when it cannot start here.
    fn start(script: &str, env: &[(&str, &str)], test: &str) -> Option<Workload> {
        let state = tempfile::tempdir().expect("tempdir");
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.push((
            "LOCKSCOPE_WORKLOAD_DIR".to_string(),
            state.path().display().to_string(),
        ));
        let workload = Workload {
            script: workload(script),
            env,
            state,
        };
        let out = workload
            .command(&["start"])
            .output()
            .expect("run workload script");
        if !out.status.success() {
            eprintln!(
                "skipped: {test}: `{script} start` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        Some(workload)
    }

    fn pid(&self) -> String {
        let out = self.command(&["pid"]).output().expect("pid");
        assert!(out.status.success(), "server not running");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The sweep's `--load`: the script's load at `{c}` connections for 2 s.
    fn load(&self) -> String {
        format!("bash {} run {{c}} 2", self.script.display())
    }

    /// Stops the server (its state directory stays until the workload is dropped).
    fn stop(&self) {
        let _ = self.command(&["stop"]).output();
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `lockscope sweep` with `args`; returns the sweep and the printed table.
fn sweep(dir: &Path, env: &[(String, String)], args: &[&str]) -> (Sweep, String) {
    let out = lockscope()
        .arg("sweep")
        .args(args)
        .arg("-o")
        .arg(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run lockscope sweep");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "sweep failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (sweep, _) = lockscope::sweep::read_sweep(dir).expect("read sweep.json");
    (sweep, stdout)
}

/// Checks what every sweep must hold: the levels in order, positive throughput, scaling against
/// the first level, a profile with waits per level, and a finding that agrees with the knee.
fn check_sweep(dir: &Path, sweep: &Sweep, table: &str, levels: &[u32]) {
    let run: Vec<u32> = sweep.levels.iter().map(|l| l.concurrency).collect();
    assert_eq!(run, levels);
    let base = sweep.levels[0].throughput;
    assert!(base > 0.0, "{sweep:#?}");
    for level in &sweep.levels {
        assert!(level.throughput > 0.0, "level {}", level.concurrency);
        assert!((level.scaling - level.throughput / base).abs() < 1e-9);
        let profile =
            lockscope_probes::read_profile(&dir.join(&level.profile)).expect("level profile");
        assert!(profile.metadata.target.pid == sweep.pid);
        // A level whose recording saw nothing is the recorder's miss, but never a silent one.
        if level.waits == 0 {
            let flagged = format!("level {} recorded no waits", level.concurrency);
            assert!(
                sweep.warnings.iter().any(|w| w.starts_with(&flagged)),
                "{:?}",
                sweep.warnings
            );
            eprintln!("warning: {flagged} (flagged in the sweep)");
        } else {
            assert!(!level.kinds.is_empty() && !level.top_sites.is_empty());
        }
        assert!(dir.join(&level.load_output).exists());
        let pprof = dir.join(format!("level-{}.pb.gz", level.concurrency));
        assert!(pprof.exists(), "{} missing", pprof.display());
    }
    assert!(
        sweep.levels.iter().any(|l| l.waits > 0),
        "no level recorded any wait"
    );
    assert_eq!(sweep.knee.is_none(), sweep.finding.contains("no knee"));
    assert!(
        sweep.finding.starts_with("Throughput "),
        "{}",
        sweep.finding
    );
    assert!(table.contains(&sweep.finding), "{table}");
    // A row per level (its scaling), a row per level with a breakdown (its shares of thread
    // time), and the finding: no other line has a percentage, and none is one of one clock.
    let with_breakdown = sweep
        .levels
        .iter()
        .filter(|l| l.breakdown.is_some())
        .count();
    assert_eq!(
        table.lines().filter(|l| l.contains('%')).count(),
        levels.len() + with_breakdown + usize::from(sweep.finding.contains('%')),
        "{table}"
    );
    assert!(!table.contains("of wall time"), "{table}");
    eprintln!("finding: {}", sweep.finding);
}

/// nginx under ab at 1, 2, 5, 10 connections, attached with -p; then a second sweep where
/// lockscope starts the same nginx itself (--server) and stops it afterwards.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn nginx_under_ab() {
    if !bpf_available("nginx_under_ab") {
        return;
    }
    let Some(nginx) = Workload::start("nginx.sh", &[("NGINX_PORT", "8397")], "nginx_under_ab")
    else {
        return;
    };
    let pid = nginx.pid();
    let load = nginx.load();
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("nginx");
    let (result, table) = sweep(
        &dir,
        &nginx.env,
        &[
            "--levels", "1,2,5,10", "--load", &load, "-p", &pid, "-d", "2s", "--settle", "300ms",
        ],
    );
    assert_eq!(result.throughput_parser, "ab");
    assert_eq!(result.throughput_unit, "requests/s");
    check_sweep(&dir, &result, &table, &[1, 2, 5, 10]);
    nginx.stop();

    // The same nginx, started by lockscope (it runs in the foreground: daemon off).
    let prefix = nginx.state.path().join("nginx");
    let server = format!(
        "nginx -p {} -c {}/nginx.conf",
        prefix.display(),
        prefix.display()
    );
    let load = "ab -q -k -c {c} -t 2 -n 100000000 http://127.0.0.1:8397/".to_string();
    let dir = out.path().join("nginx-server");
    let (result, table) = sweep(
        &dir,
        &nginx.env,
        &[
            "--levels",
            "1,4",
            "--load",
            &load,
            "--server",
            &server,
            "-d",
            "2s",
            "--throughput",
            "ab",
        ],
    );
    check_sweep(&dir, &result, &table, &[1, 4]);
    assert_eq!(result.server.as_deref(), Some(server.as_str()));
    // The server lockscope started is gone.
    let alive = Path::new(&format!("/proc/{}", result.pid)).exists();
    assert!(
        !alive,
        "lockscope left its server (pid {}) running",
        result.pid
    );
}

/// MariaDB under sysbench oltp_read_only at 1, 2, 5, 10 threads (short levels), attached with -p.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn mariadb_under_sysbench() {
    if !bpf_available("mariadb_under_sysbench") {
        return;
    }
    let env = [("MARIADB_PORT", "3397"), ("MARIADB_TABLE_SIZE", "2000")];
    let Some(mariadb) = Workload::start("mariadb.sh", &env, "mariadb_under_sysbench") else {
        return;
    };
    let pid = mariadb.pid();
    let load = mariadb.load();
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("mariadb");
    let (result, table) = sweep(
        &dir,
        &mariadb.env,
        &[
            "--levels",
            "1,2,5,10",
            "--load",
            &load,
            "-p",
            &pid,
            "-d",
            "2s",
            "--throughput",
            "sysbench",
        ],
    );
    assert_eq!(result.throughput_unit, "transactions/s");
    check_sweep(&dir, &result, &table, &[1, 2, 5, 10]);
    // The report of the sweep renders (the chart and the page are built from it).
    let page = out.path().join("report.html");
    let status = lockscope()
        .arg("html")
        .arg(&dir)
        .arg("-o")
        .arg(&page)
        .status()
        .expect("html");
    assert!(status.success());
    assert!(std::fs::read_to_string(&page)
        .expect("page")
        .contains("transactions/s"));
}

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
        assert_eq!(
            Some(error),
            record_stderr.lines().find(|l| l.contains("error:")),
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

/// Where the time of `threads` threads went, every thread alike over the whole recording: the
/// per-mille of its wall time per class (they add up to 1000).
fn thread_times(
    profile: &lockscope_probes::Profile,
    threads: u32,
    per_mille: &[(TimeClass, u64)],
) -> Vec<ThreadTime> {
    assert_eq!(per_mille.iter().map(|(_, p)| p).sum::<u64>(), 1000);
    let wall_ns = profile.metadata.duration_ns;
    (0..threads)
        .map(|i| ThreadTime {
            pid: profile.metadata.target.pid,
            tid: 5000 + i,
            wall_ns,
            time_ns: per_mille
                .iter()
                .map(|&(class, p)| (class, wall_ns / 1000 * p))
                .collect(),
            voluntary_switches: 100,
            involuntary_switches: 10,
            woken_ns: Default::default(),
        })
        .collect()
}

/// A sweep at 1, 2, 5 and 10 connections of the demo profile, its mutex waits growing with the
/// level: throughput peaks at 5 (the knee) and falls at 10 while the threads' time moves from
/// on-CPU to run-queue and lock; level 2 was recorded without the `offcpu` probe (no breakdown).
fn synthetic_sweep() -> Sweep {
    use TimeClass::*;
    // (concurrency, throughput, per-mille of thread time per class: none without offcpu)
    type Shape = (u32, f64, &'static [(TimeClass, u64)]);
    let shapes: [Shape; 4] = [
        (
            1,
            1000.0,
            &[
                (OnCpu, 600),
                (RunQueue, 20),
                (Lock, 30),
                (Condvar, 250),
                (Poll, 80),
                (Io, 20),
            ],
        ),
        (2, 1800.0, &[]),
        (
            5,
            1900.0,
            &[
                (OnCpu, 400),
                (RunQueue, 150),
                (Lock, 250),
                (Condvar, 100),
                (Futex, 10),
                (Poll, 40),
                (Io, 30),
                (Sleep, 10),
                (Other, 10),
            ],
        ),
        (
            10,
            1200.0,
            &[
                (OnCpu, 250),
                (RunQueue, 250),
                (Lock, 380),
                (Condvar, 50),
                (Futex, 10),
                (Poll, 20),
                (Io, 20),
                (Sleep, 10),
                (Other, 10),
            ],
        ),
    ];
    let mut levels = Vec::new();
    for (c, throughput, classes) in shapes {
        let mut profile = fixtures::demo_profile();
        for w in &mut profile.waits {
            if w.kind == lockscope_probes::WaitKind::Mutex {
                w.stats.total_ns *= u64::from(c);
                w.stats.count *= u64::from(c);
            }
        }
        if !classes.is_empty() {
            // c connection threads and one listener.
            profile.thread_times = thread_times(&profile, c + 1, classes);
        }
        let profile_name = format!("level-{c}.lsp");
        let load_name = format!("level-{c}.load.txt");
        levels.push(summarize_level(
            c,
            throughput,
            &profile,
            (&profile_name, &load_name),
        ));
    }
    fill_scaling(&mut levels);
    let knee = find_knee(&levels);
    let sentence = finding(&levels, knee.as_ref());
    Sweep {
        sweep_version: SWEEP_VERSION,
        load: "sysbench oltp_read_only --threads={c} run".to_string(),
        server: None,
        pid: 4242,
        target: None,
        duration_ns: 1_204_000_000,
        throughput_parser: "sysbench".to_string(),
        throughput_unit: "transactions/s".to_string(),
        levels,
        knee,
        finding: sentence,
        warnings: Vec::new(),
        probes: None,
        min_block_ns: None,
        syscalls: None,
    }
}

/// The table `sweep` prints gives wait time as average threads waiting and as a share of thread
/// time (never a percentage of one clock), shows where the threads' time went per level, and
/// says a level recorded without `offcpu` has no breakdown; the finding names both units and
/// the class of thread time that grows most across the knee (the fixture's lock, 250 → 380 per
/// mille, ahead of the run queue's 150 → 250).
#[test]
fn sweep_table_in_threads_and_thread_time() {
    let sweep = synthetic_sweep();
    assert_eq!(sweep.knee.as_ref().map(|k| k.concurrency), Some(5));
    assert_eq!(
        sweep.finding,
        "Throughput rises to 190% of concurrency 1 at 5, then falls (120% at 10); from 5 to 10, \
         `mutex` wait grows most (3.33 → 6.66 threads waiting on average, 55.5% → 60.5% of \
         thread time), led by `…;take_order_lock;pthread_mutex_lock;[kernel wait];[mutex]`; of \
         the threads' time, lock grows most (25.0% → 38.0%)."
    );
    let table = lockscope::sweep::sweep_table(&sweep);
    assert!(!table.contains("of wall time"), "{table}");
    assert!(
        table.contains("no breakdown: recorded without the offcpu probe"),
        "{table}"
    );
    check_golden("sweep_table.txt", &table);
}

/// Without any breakdown, the table says how to get one instead of printing zeros.
#[test]
fn sweep_table_without_any_breakdown() {
    let mut sweep = synthetic_sweep();
    for level in &mut sweep.levels {
        level.breakdown = None;
    }
    let table = lockscope::sweep::sweep_table(&sweep);
    assert!(
        table.contains("No level has a breakdown of the threads' time"),
        "{table}"
    );
    assert!(!table.contains("Where the threads' time went"), "{table}");
}

/// `sweep.json` version 2: wait time as `avg_threads` and `share_of_thread_time` (0 to 1, `null`
/// without a breakdown), and per level the `breakdown` of thread time over every class (`null`
/// for the level recorded without `offcpu`); it reads back unchanged.
#[test]
fn sweep_json_version_2_units() {
    let sweep = synthetic_sweep();
    let text = serde_json::to_string_pretty(&sweep).expect("encode");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(json["sweep_version"], 2);
    assert!(!text.contains("share_of_wall"), "renamed in version 2");
    let levels = json["levels"].as_array().expect("levels");
    assert_eq!(levels[1]["breakdown"], serde_json::Value::Null);
    assert_eq!(
        levels[1]["kinds"][0]["share_of_thread_time"],
        serde_json::Value::Null
    );
    for level in [&levels[0], &levels[2], &levels[3]] {
        let breakdown = &level["breakdown"];
        let names: Vec<&str> = breakdown["classes"]
            .as_array()
            .expect("classes")
            .iter()
            .map(|c| c["name"].as_str().expect("name"))
            .collect();
        assert_eq!(
            names,
            TimeClass::ALL.map(TimeClass::name),
            "every class, in report order"
        );
        let total: f64 = breakdown["classes"]
            .as_array()
            .expect("classes")
            .iter()
            .map(|c| c["share_of_thread_time"].as_f64().expect("share"))
            .sum();
        assert!((total - 1.0).abs() < 1e-3, "shares add up to 1: {total}");
        for kind in level["kinds"].as_array().expect("kinds") {
            let share = kind["share_of_thread_time"].as_f64().expect("a share");
            assert!((0.0..=1.0).contains(&share), "{kind}");
        }
    }
    // Level 10: 11 threads lived through the whole recording, 38% of their time on a lock.
    assert_eq!(levels[3]["breakdown"]["threads"], 11);
    assert_eq!(levels[3]["breakdown"]["avg_threads"], 11.0);
    assert_eq!(levels[3]["breakdown"]["classes"][2]["name"], "lock");
    assert_eq!(
        levels[3]["breakdown"]["classes"][2]["share_of_thread_time"],
        0.38
    );
    assert_eq!(levels[3]["breakdown"]["classes"][2]["avg_threads"], 4.18);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("sweep.json"), &text).expect("write");
    let (read, _) = lockscope::sweep::read_sweep(dir.path()).expect("read");
    assert_eq!(read, sweep);
}

/// A version 1 sweep with several levels reads as version 2 with its finding rewritten in
/// today's units (its `2039% of wall time` becomes average threads waiting).
#[test]
fn old_sweep_finding_is_rewritten() {
    // As version 1 wrote it: no breakdown, so no share of thread time either.
    let mut sweep = synthetic_sweep();
    for level in &mut sweep.levels {
        level.breakdown = None;
        for share in level
            .kinds
            .iter_mut()
            .chain(&mut level.threads)
            .chain(&mut level.top_sites)
        {
            share.share_of_thread_time = None;
        }
    }
    let mut json: serde_json::Value = serde_json::to_value(&sweep).expect("encode");
    json["sweep_version"] = 1.into();
    json["finding"] = "… `mutex` wait grows most (333% → 666% of wall time) …".into();
    for level in json["levels"].as_array_mut().expect("levels") {
        level.as_object_mut().expect("level").remove("breakdown");
        for list in ["kinds", "threads", "top_sites"] {
            for share in level[list].as_array_mut().expect("shares") {
                let share = share.as_object_mut().expect("share");
                let value = share.remove("avg_threads").expect("avg_threads");
                share.remove("share_of_thread_time");
                share.insert("share_of_wall".to_string(), value);
            }
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("sweep.json"), json.to_string()).expect("write");
    let (read, _) = lockscope::sweep::read_sweep(dir.path()).expect("a version 1 file reads");
    assert_eq!(read.sweep_version, SWEEP_VERSION);
    assert_eq!(
        read.finding,
        "Throughput rises to 190% of concurrency 1 at 5, then falls (120% at 10); from 5 to 10, \
         `mutex` wait grows most (3.33 → 6.66 threads waiting on average), led by \
         `…;take_order_lock;pthread_mutex_lock;[kernel wait];[mutex]`."
    );
    assert_eq!(read.levels, sweep.levels);

    json["sweep_version"] = 3.into();
    std::fs::write(dir.path().join("sweep.json"), json.to_string()).expect("write");
    let err = lockscope::sweep::read_sweep(dir.path()).expect_err("a newer file");
    assert!(err.to_string().contains("reads 1 to 2"), "{err}");
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
