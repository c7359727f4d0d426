//! `lockscope sweep` end to end against real servers on loopback: nginx under ab (attached with
//! -p, and started by lockscope with --server) and MariaDB under sysbench oltp_read_only, both
//! from profiler/workloads/. Needs root and BPF (skips loudly otherwise), and the workload
//! scripts' packages (they install them; a failed start skips loudly). Tests that need neither:
//! the `--probes`, `--min-block` and `--syscalls` validation, what each level's recording gets and
//! what `sweep.json` says of it, in `settings`; the units of the table, the finding and
//! `sweep.json`, built from synthetic profiles, in `units`.

use crate::common;
use crate::common::fixtures;

use common::*;
use lockscope::sweep::{fill_scaling, find_knee, finding, summarize_level, Sweep, SWEEP_VERSION};
use lockscope_probes::{ThreadTime, TimeClass};
use std::path::{Path, PathBuf};
use std::process::Command;

mod settings;
mod units;

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
    // The table wraps the finding at 100 columns: its words, whatever line they are on.
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words(table).contains(&words(&sweep.finding)), "{table}");
    // A row per level (its scaling), a row per level with a breakdown (its shares of thread
    // time), and the finding: no other line has a percentage, and none is one of one clock.
    let with_breakdown = sweep
        .levels
        .iter()
        .filter(|l| l.breakdown.is_some())
        .count();
    // The header and its legend name the `% of time` column; the finding is wrapped over lines.
    let finding = words(&sweep.finding);
    assert_eq!(
        table
            .lines()
            .filter(|l| l.contains('%') && !l.contains("% of time"))
            .filter(|l| !finding.contains(&words(l)))
            .count(),
        levels.len() + with_breakdown,
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
