//! PostgreSQL (a process per connection, launched by lockscope) under pgbench on one hot row.

use super::*;

/// A private PostgreSQL cluster (`workloads/postgres.sh`), its state in a directory of its own;
/// its server is stopped when dropped, also when the test panics.
struct Postgres {
    script: PathBuf,
    port: u16,
    state: tempfile::TempDir,
}

impl Postgres {
    /// `postgres.sh init` in a new state directory.
    fn init(port: u16) -> Postgres {
        let cluster = Postgres {
            script: Path::new(WORKLOADS).join("postgres.sh"),
            port,
            state: tempfile::tempdir().expect("state directory"),
        };
        cluster.output(&["init"]);
        cluster
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg(&self.script)
            .args(args)
            .env("LOCKSCOPE_WORKLOAD_DIR", self.state.path())
            .env("POSTGRES_PORT", self.port.to_string());
        cmd
    }

    fn output(&self, args: &[&str]) -> String {
        let out = self.command(args).output().expect("run postgres.sh");
        assert!(
            out.status.success(),
            "postgres.sh {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    /// Launches the server under `lockscope record --probes PROBES -o LSP`, runs `CLIENTS`
    /// pgbench clients updating one row for `SECS` while sampling the backends' wait events,
    /// stops the server (which ends the recording) and returns the profile, pgbench's output
    /// and the samples (`COUNT EVENT` lines).
    fn record(
        &self,
        probes: &str,
        lsp: &Path,
        clients: usize,
        seconds: u64,
    ) -> (Profile, String, String) {
        let server = self.output(&["command"]);
        let mut recorder = KillOnDrop(
            lockscope()
                .args(["record", "--probes", probes, "-o"])
                .arg(lsp)
                .arg("--")
                .args(server.split_whitespace())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start lockscope record"),
        );
        self.output(&["ready"]);
        let sampler = self
            .command(&["sample", &seconds.saturating_sub(1).to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the sampler");
        let pgbench = self.output(&["run", &clients.to_string(), &seconds.to_string()]);
        let samples = sampler.wait_with_output().expect("the sampler");
        self.output(&["stop"]);
        let status = recorder.0.wait().expect("wait for lockscope");
        let mut stderr = String::new();
        if let Some(mut e) = recorder.0.stderr.take() {
            let _ = e.read_to_string(&mut stderr);
        }
        assert!(status.success(), "lockscope record failed: {stderr}");
        let profile = read_profile(lsp).expect("read the recorded profile");
        (
            profile,
            pgbench,
            String::from_utf8_lossy(&samples.stdout).into_owned(),
        )
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.command(&["stop"]).status();
    }
}

/// PostgreSQL (process per connection, launched by lockscope so that every backend it forks is
/// recorded) with 16 pgbench clients updating one row: the backends queue for its lock in
/// `epoll_wait` (WaitLatch under ProcSleep) until the holder sets their latch. With
/// `futex,offcpu` the report calls that what it is: contention, sleeps other backends ended, at
/// least half as much of the backends' time as the server's own wait-event sampling puts in
/// `Lock` waits, and almost none of it idle;
/// their waits for the clients (pgbench, outside the program) are idle; the breakdown has the
/// backends asleep mostly on each other. With the futex probe alone, the report says how little
/// of their time it saw and what to record.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn postgres_one_row_under_pgbench() {
    if !bpf_available("postgres_one_row_under_pgbench") {
        return;
    }
    let cluster = Postgres::init(5436);
    let dir = tempfile::tempdir().expect("tempdir");
    let lsp = dir.path().join("postgres.lsp");
    let (profile, pgbench, samples) = cluster.record("futex,offcpu", &lsp, 16, 6);
    assert!(pgbench.contains("tps = "), "pgbench: {pgbench}");
    assert_eq!(
        profile.metadata.losses.lost_events(),
        0,
        "{:?}",
        profile.metadata.losses
    );
    // The server's own view: the share of the backends' samples in a heavyweight lock wait.
    let (mut lock, mut all) = (0u64, 0u64);
    for line in samples.lines() {
        let Some((count, event)) = line.split_once(' ') else {
            continue;
        };
        let count: u64 = count.parse().unwrap_or(0);
        all += count;
        if event.starts_with("Lock:") {
            lock += count;
        }
    }
    assert!(all > 0, "no wait-event samples: {samples}");
    let lock_share = lock as f64 / all as f64;
    assert!(
        lock_share > 0.3,
        "the server saw {lock_share:.2} of its time in Lock waits: {samples}"
    );

    // The backends: processes that ran PostgresMain for a pgbench client.
    let backends: BTreeSet<u32> = profile
        .waits
        .iter()
        .filter(|w| {
            profile.stack(w.user_stack).is_some_and(|s| {
                s.frames
                    .iter()
                    .any(|f| f.function.as_deref() == Some("ProcSleep"))
            })
        })
        .map(|w| w.pid)
        .collect();
    assert!(
        backends.len() >= 8,
        "backends queueing in ProcSleep: {backends:?}"
    );
    let backend_wall: u64 = profile
        .thread_times
        .iter()
        .filter(|t| backends.contains(&t.pid))
        .map(|t| t.wall_ns)
        .sum();

    let json: serde_json::Value = serde_json::from_str(&lockscope_ok(&[
        "report".as_ref(),
        lsp.as_os_str(),
        "--json".as_ref(),
    ]))
    .expect("report JSON");
    let contention = &json["sections"]["contention"];
    let under = |list: &str, function: &str| -> u64 {
        contention[list]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|row| {
                row["user_stack"]
                    .as_u64()
                    .and_then(|id| profile.stacks.get(id as usize))
                    .is_some_and(|s| {
                        s.frames
                            .iter()
                            .any(|f| f.function.as_deref() == Some(function))
                    })
            })
            .map(|row| row["total_ns"].as_u64().unwrap_or(0))
            .sum()
    };
    let queued = under("sites", "ProcSleep") as f64 / backend_wall as f64;
    assert!(
        queued >= 0.5 * lock_share,
        "contention under ProcSleep is {queued:.2} of the backends' time, the server's sampling \
         says {lock_share:.2}: {contention:#}"
    );
    // A few lock waits may read as idle: a backend whose few sleeps there the deadlock timer
    // ended, or one that slept there through most of its short life. Not the bulk of them.
    let idle_locks = under("idle", "ProcSleep") as f64 / backend_wall as f64;
    assert!(
        idle_locks <= 0.05 * queued,
        "lock waits read as idle: {idle_locks:.3} of the backends' time against {queued:.3} as \
         contention: {contention:#}"
    );
    let rows = |list: &str| contention[list].as_array().cloned().unwrap_or_default();
    assert!(
        rows("idle")
            .iter()
            .any(|r| r["operation"] == "sleeping in epoll_wait"
                && r["woken_ns"]["outside"].as_u64().unwrap_or(0) > 0),
        "the backends' waits for pgbench are not idle: {contention:#}"
    );
    let program: u64 = profile
        .thread_times
        .iter()
        .filter(|t| backends.contains(&t.pid))
        .map(|t| {
            t.woken_ns
                .get(&lockscope_probes::bottleneck::WokenBy::Program)
                .copied()
                .unwrap_or(0)
        })
        .sum();
    assert!(
        program as f64 >= 0.5 * lock_share * backend_wall as f64,
        "the backends asleep on each other: {program} ns of {backend_wall}"
    );
    let text = lockscope_ok(&["report".as_ref(), lsp.as_os_str()]);
    assert!(
        !text.contains("(no mutex, rwlock or kernel-lock waits)"),
        "the report still misses the lock waits:\n{text}"
    );

    // The futex probe alone: the semaphores under the lock manager, a small share, and a hint.
    let futex_lsp = dir.path().join("postgres-futex.lsp");
    let (futex_profile, _, _) = cluster.record("futex", &futex_lsp, 16, 4);
    assert!(futex_profile.thread_times.is_empty());
    let json: serde_json::Value = serde_json::from_str(&lockscope_ok(&[
        "report".as_ref(),
        futex_lsp.as_os_str(),
        "--json".as_ref(),
    ]))
    .expect("report JSON");
    let coverage = &json["header"]["coverage"];
    assert!(
        coverage["share"].as_f64().unwrap_or(1.0) < 0.5,
        "futex alone saw most of the time? {coverage:#}"
    );
    assert!(
        coverage["suggestion"]
            .as_str()
            .is_some_and(|s| s.contains("--probes futex,offcpu")),
        "{coverage:#}"
    );
}
