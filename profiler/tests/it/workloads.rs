//! End-to-end recordings of real servers under load: MariaDB with sysbench, nginx with ab, and
//! Apache httpd (mpm_event and mpm_prefork: a server of many processes) with ab, recorded by its
//! process tree, its cgroup and the whole machine, and swept; started and stopped by the scripts
//! in `profiler/workloads/` (which install their Debian packages when missing). They run as root with BPF and skip loudly otherwise; each server is
//! stopped by a drop guard, so a failing test leaves nothing running.

use crate::common;

use common::*;
use lockscope_probes::{read_profile, write_profile, Profile, TimeClass, WaitKind};
use std::collections::BTreeSet;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The workload scripts.
const WORKLOADS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads");

/// sysbench threads: more than the 2 CPUs of a small CI machine, so connection threads contend.
const SYSBENCH_THREADS: usize = 16;
/// How long the load runs, and how long lockscope records (it starts first and ends last).
const LOAD_SECONDS: u64 = 5;
const RECORD_SECONDS: u64 = LOAD_SECONDS + 2;
/// ab's concurrency against nginx.
const AB_CONCURRENCY: usize = 50;

/// A server started by one of the workload scripts, with its own state directory and port;
/// stopped when dropped, also when the test panics.
struct Server {
    script: PathBuf,
    port_variable: &'static str,
    port: u16,
    /// More environment of every script run.
    env: Vec<(&'static str, String)>,
    // Dropped after `drop` has stopped the server: the server's files go last.
    state: tempfile::TempDir,
}

impl Server {
    /// Runs `<script> start` (install if needed, start, prepare); the guard exists before the
    /// start, so a start that fails half-way is stopped too.
    fn start(script: &str, port_variable: &'static str, port: u16) -> Server {
        Server::start_with(script, &["start"], port_variable, port, &[])
    }

    /// [`Server::start`] with the start script's arguments `start` and environment `env`.
    fn start_with(
        script: &str,
        start: &[&str],
        port_variable: &'static str,
        port: u16,
        env: &[(&'static str, String)],
    ) -> Server {
        let server = Server {
            script: Path::new(WORKLOADS).join(script),
            port_variable,
            port,
            env: env.to_vec(),
            state: tempfile::tempdir().expect("state directory"),
        };
        let out = server
            .command(start)
            .output()
            .expect("run the start script");
        assert!(
            out.status.success(),
            "{script} start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        server
    }

    /// `bash <script> args...` with this server's state directory and port.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg(&self.script)
            .args(args)
            .env("LOCKSCOPE_WORKLOAD_DIR", self.state.path())
            .env(self.port_variable, self.port.to_string())
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// Standard output of `<script> args...`, which must succeed.
    fn output(&self, args: &[&str]) -> String {
        let out = self.command(args).output().expect("run the script");
        assert!(
            out.status.success(),
            "{} {args:?} failed: {}",
            self.script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    fn pid(&self) -> u32 {
        self.output(&["pid"]).trim().parse().expect("a pid")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        match self.command(&["stop"]).status() {
            Ok(status) if status.success() => {}
            other => eprintln!("{} stop: {other:?}", self.script.display()),
        }
    }
}

/// Runs `lockscope` with these arguments; it must succeed. Returns its standard output.
fn lockscope_ok(args: &[&std::ffi::OsStr]) -> String {
    let out = lockscope().args(args).output().expect("run lockscope");
    assert!(
        out.status.success(),
        "lockscope {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Probes of every recording: futex waits, and off-CPU time for the per-thread breakdown.
const PROBES: &str = "futex,offcpu";

/// Records `pid` with [`PROBES`] for [`RECORD_SECONDS`] into `lsp` while `load` runs (started
/// once lockscope says it is recording); `during` runs while the load does. Returns the profile
/// and the load's output.
fn record_under_load(
    pid: u32,
    lsp: &Path,
    load: Command,
    during: impl FnOnce(),
) -> (Profile, String) {
    let (profile, load, _) =
        record_target_under_load(&["-p".into(), pid.to_string()], lsp, load, during);
    (profile, load)
}

/// [`record_under_load`] of what `target` names (`-p PID --tree`, `--cgroup PATH`, `-a`); also
/// returns what lockscope printed on stderr.
fn record_target_under_load(
    target: &[String],
    lsp: &Path,
    mut load: Command,
    during: impl FnOnce(),
) -> (Profile, String, String) {
    let mut recorder = lockscope()
        .arg("record")
        .args(target)
        .arg("-d")
        .arg(format!("{RECORD_SECONDS}s"))
        .args(["--probes", PROBES])
        .arg("-o")
        .arg(lsp)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockscope record");
    let mut stderr = BufReader::new(recorder.stderr.take().expect("recorder stderr"));
    let mut recorder = KillOnDrop(recorder);
    let started = {
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let n = std::io::BufRead::read_line(&mut stderr, &mut line).expect("stderr");
            assert!(n > 0, "lockscope exited before recording: {lines:?}");
            let recording = line.starts_with("lockscope: recording ");
            lines.push(line);
            if recording {
                break lines.concat();
            }
        }
    };

    let mut load = KillOnDrop(
        load.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the load"),
    );
    during();
    // The load's stderr is a few lines at most, so reading stdout first cannot block it.
    let mut load_stdout = String::new();
    let mut load_stderr = String::new();
    load.0
        .stdout
        .take()
        .expect("load stdout")
        .read_to_string(&mut load_stdout)
        .expect("read the load's output");
    load.0
        .stderr
        .take()
        .expect("load stderr")
        .read_to_string(&mut load_stderr)
        .expect("read the load's errors");
    let load_status = load.0.wait().expect("wait for the load");
    assert!(
        load_status.success(),
        "the load failed: {load_stdout}{load_stderr}"
    );

    let status = recorder.0.wait().expect("wait for lockscope");
    let rest = rest_of(stderr);
    assert!(status.success(), "lockscope record failed: {rest}");
    let profile = read_profile(lsp).expect("read the recorded profile");
    (profile, load_stdout, started + &rest)
}

/// Checks what every recording of a server must hold: attached to that pid, ended by the
/// duration, nothing lost, both probes attached.
fn assert_complete_attach(profile: &Profile, pid: u32) {
    let meta = &profile.metadata;
    assert_eq!(meta.target.pid, pid);
    assert!(!meta.target.launched);
    assert_eq!(meta.end_reason, "duration elapsed");
    assert_eq!(
        meta.losses.lost_events(),
        0,
        "lost events: {:?}",
        meta.losses
    );
    assert!(meta.events > 0, "no waits recorded");
    assert!(profile.waits.iter().all(|w| w.pid == pid));
    for probe in ["futex", "offcpu"] {
        assert!(
            profile.waits.iter().any(|w| w.probe == probe),
            "no {probe} record"
        );
    }
}

/// Checks that the per-thread breakdown (off-CPU probe) covers each of `tids` with a consistent
/// wall-time split: the classes add up to the thread's wall time, some of it on the CPU.
fn assert_breakdown_covers(profile: &Profile, tids: &BTreeSet<u32>) {
    for tid in tids {
        let time = profile
            .thread_times
            .iter()
            .find(|t| t.tid == *tid)
            .unwrap_or_else(|| panic!("no time breakdown for thread {tid}"));
        assert!(time.wall_ns > 0, "thread {tid}: {time:?}");
        assert_eq!(time.accounted_ns(), time.wall_ns, "thread {tid}: {time:?}");
        assert!(time.ns(TimeClass::OnCpu) > 0, "thread {tid}: {time:?}");
    }
}

/// The profile survives `export --format json` and a rewrite to `.lsp` unchanged.
fn assert_round_trips(profile: &Profile, lsp: &Path) {
    let json = lockscope_ok(&[
        "export".as_ref(),
        lsp.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let exported: Profile = serde_json::from_str(&json).expect("exported JSON is a profile");
    assert!(
        exported == *profile,
        "export --format json changed the profile"
    );
    let again = lsp.with_extension("again.lsp");
    write_profile(&exported, &again).expect("write the exported profile");
    assert!(
        read_profile(&again).expect("read it back") == *profile,
        "rewriting the profile changed it"
    );
}

/// The total time of the `list` rows (`sites`: contention, `idle`) of the report's contention
/// section (`report --json` of `lsp`) whose operation is `operation` and whose user stack has a
/// frame named `function` (prefix).
fn contention_ns(
    profile: &Profile,
    lsp: &Path,
    list: &str,
    operation: &str,
    function: &str,
) -> u64 {
    let json: serde_json::Value = serde_json::from_str(&lockscope_ok(&[
        "report".as_ref(),
        lsp.as_os_str(),
        "--json".as_ref(),
    ]))
    .expect("report JSON");
    json["sections"]["contention"][list]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|row| row["operation"] == operation)
        .filter(|row| {
            row["user_stack"]
                .as_u64()
                .and_then(|id| profile.stacks.get(id as usize))
                .is_some_and(|s| {
                    s.frames.iter().any(|f| {
                        f.function
                            .as_deref()
                            .is_some_and(|n| n.starts_with(function))
                    })
                })
        })
        .map(|row| row["total_ns"].as_u64().unwrap_or(0))
        .sum()
}

/// Thread ids of the futex wait records whose user stack has a frame named `function` (prefix).
fn tids_with_frame(profile: &Profile, function: &str) -> BTreeSet<u32> {
    profile
        .waits
        .iter()
        .filter(|w| w.probe == "futex")
        .filter(|w| {
            profile.stack(w.user_stack).is_some_and(|s| {
                s.frames.iter().any(|f| {
                    f.function
                        .as_deref()
                        .is_some_and(|n| n.starts_with(function))
                })
            })
        })
        .map(|w| w.tid)
        .collect()
}

/// MariaDB under sysbench oltp_read_only: futex waits under mariadbd's own functions (named from
/// its dynamic symbols: the binary is stripped) appear in the profile and the report, they come
/// from the threads the server says serve the connections, the per-thread breakdown covers every
/// connection thread, no event is lost, and the profile round-trips through JSON.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn mariadb_under_sysbench() {
    if !bpf_available("mariadb_under_sysbench") {
        return;
    }
    let server = Server::start("mariadb.sh", "MARIADB_PORT", 3308);
    let pid = server.pid();
    let dir = tempfile::tempdir().expect("tempdir");
    let lsp = dir.path().join("mariadb.lsp");

    let mut connection_tids = BTreeSet::new();
    let threads = SYSBENCH_THREADS.to_string();
    let seconds = LOAD_SECONDS.to_string();
    let (profile, sysbench) = record_under_load(
        pid,
        &lsp,
        server.command(&["run", &threads, &seconds]),
        || {
            // Asked mid-run, when every sysbench connection is open.
            std::thread::sleep(Duration::from_secs(LOAD_SECONDS / 2));
            connection_tids = server
                .output(&["connection-tids"])
                .lines()
                .map(|l| l.trim().parse::<u32>().expect("a tid"))
                .collect();
        },
    );
    assert!(
        sysbench.contains("transactions:"),
        "sysbench output: {sysbench}"
    );
    assert_complete_attach(&profile, pid);
    // The query above is one connection too; sysbench's are the rest.
    assert!(
        connection_tids.len() > SYSBENCH_THREADS,
        "connection threads: {connection_tids:?}"
    );

    // Waits of connection threads, named through mariadbd's .dynsym: every thread waiting under
    // the connection handler serves a connection.
    let handler_tids = tids_with_frame(&profile, "handle_one_connection");
    assert!(
        !handler_tids.is_empty(),
        "no wait under handle_one_connection"
    );
    assert!(
        handler_tids.is_subset(&connection_tids),
        "waits under handle_one_connection in threads {handler_tids:?}, not all connection threads {connection_tids:?}"
    );
    let mariadbd_frames = profile
        .stacks
        .iter()
        .flat_map(|s| &s.frames)
        .filter(|f| f.module.as_deref() == Some("mariadbd") && f.function.is_some())
        .count();
    assert!(mariadbd_frames > 0, "no named mariadbd frame");
    assert!(
        profile.waits.iter().any(|w| w.kind == WaitKind::Mutex),
        "no mutex wait"
    );

    assert_breakdown_covers(&profile, &connection_tids);

    let report = lockscope_ok(&[
        "report".as_ref(),
        lsp.as_os_str(),
        "--top".as_ref(),
        "0".as_ref(),
    ]);
    assert!(
        report.contains("handle_one_connection") && report.contains("mariadbd+0x"),
        "report lacks mariadbd's frames:\n{report}"
    );
    let by_thread = lockscope_ok(&[
        "report".as_ref(),
        lsp.as_os_str(),
        "--by".as_ref(),
        "thread".as_ref(),
        "--top".as_ref(),
        "0".as_ref(),
    ]);
    // Every connection thread that waited has its row: sysbench's all do (under this load each
    // meets a contended lock); the query's own connection may have had nothing to wait for.
    // A thread that only waited for a CPU (offcpu's `run-queue` and `preempted` intervals) has
    // no row: the report ranks those as CPU saturation, not as waits.
    let waiting: BTreeSet<u32> = profile
        .waits
        .iter()
        .filter(|w| {
            !(w.probe == "offcpu" && matches!(w.operation.as_str(), "run-queue" | "preempted"))
        })
        .map(|w| w.tid)
        .filter(|tid| connection_tids.contains(tid))
        .collect();
    assert!(
        waiting.len() >= SYSBENCH_THREADS,
        "connection threads with waits: {waiting:?} of {connection_tids:?}"
    );
    for tid in &waiting {
        assert!(
            by_thread.contains(&format!("tid {tid})")),
            "report --by thread lacks connection thread {tid}:\n{by_thread}"
        );
    }
    // The connection threads' waits for sysbench's next query (the network, or the client
    // process, ended them) read as idle, never as contention.
    let client = "sleeping in poll";
    assert!(
        contention_ns(&profile, &lsp, "idle", client, "vio_io_wait") > 0,
        "the connection threads' client waits are not idle"
    );
    assert_eq!(
        contention_ns(&profile, &lsp, "sites", client, "vio_io_wait"),
        0,
        "a client wait read as contention"
    );
    assert_round_trips(&profile, &lsp);
}

/// nginx (one process with a thread pool for file reads) under ab: every thread-pool thread waits
/// for tasks under nginx's own `ngx_thread_cond_wait` (named from its dynamic symbols; nginx has
/// no frame pointers, so this needs the CFI unwinder), lock waits go through glibc's lock slow
/// path, the per-thread breakdown covers the process's threads, no event is lost, and the
/// profile round-trips through JSON.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn nginx_under_ab() {
    if !bpf_available("nginx_under_ab") {
        return;
    }
    let server = Server::start("nginx.sh", "NGINX_PORT", 8082);
    let pid = server.pid();
    let dir = tempfile::tempdir().expect("tempdir");
    let lsp = dir.path().join("nginx.lsp");

    let concurrency = AB_CONCURRENCY.to_string();
    let seconds = LOAD_SECONDS.to_string();
    let (profile, ab) = record_under_load(
        pid,
        &lsp,
        server.command(&["run", &concurrency, &seconds]),
        || {},
    );
    assert!(ab.contains("Failed requests:        0"), "ab output: {ab}");
    assert_complete_attach(&profile, pid);

    let pool_tids: BTreeSet<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("list nginx's threads")
        .map(|e| {
            e.expect("task entry")
                .file_name()
                .to_string_lossy()
                .parse::<u32>()
                .expect("a tid")
        })
        .filter(|&tid| tid != pid)
        .collect();
    assert_eq!(pool_tids.len(), 4, "nginx.sh configures 4 pool threads");
    let seen: BTreeSet<u32> = profile.threads.iter().map(|t| t.tid).collect();
    assert!(
        pool_tids.is_subset(&seen),
        "pool threads {pool_tids:?}, seen {seen:?}"
    );
    let pool_waiters = tids_with_frame(&profile, "ngx_thread_cond_wait");
    assert!(
        pool_tids.is_subset(&pool_waiters),
        "pool threads {pool_tids:?}, waiting under ngx_thread_cond_wait: {pool_waiters:?}"
    );
    assert!(
        profile
            .stacks
            .iter()
            .flat_map(|s| &s.frames)
            .any(|f| f.module.as_deref() == Some("nginx")),
        "no frame in nginx"
    );
    let mut all_threads = pool_tids.clone();
    all_threads.insert(pid);
    assert_breakdown_covers(&profile, &all_threads);
    let lock_waiters = tids_with_frame(&profile, "__GI___lll_lock_wait");
    assert!(
        !lock_waiters.is_empty() && lock_waiters.is_subset(&seen),
        "lock waits in {lock_waiters:?}"
    );
    assert!(
        profile
            .waits
            .iter()
            .any(|w| w.kind == WaitKind::Mutex && pool_tids.contains(&w.tid)),
        "no mutex wait in the pool threads"
    );

    let report = lockscope_ok(&[
        "report".as_ref(),
        lsp.as_os_str(),
        "--by".as_ref(),
        "thread".as_ref(),
        "--top".as_ref(),
        "0".as_ref(),
    ]);
    for tid in &pool_tids {
        assert!(
            report.contains(&format!("tid {tid})")),
            "report --by thread lacks pool thread {tid}:\n{report}"
        );
    }
    // The worker's waits for ab's requests in epoll_wait read as idle; the few its thread pool
    // ends (a task done, through an eventfd) are waits on the pool.
    let client = "sleeping in epoll_wait";
    let idle = contention_ns(&profile, &lsp, "idle", client, "epoll_wait");
    let contended = contention_ns(&profile, &lsp, "sites", client, "epoll_wait");
    assert!(
        idle > contended,
        "nginx's waits for its clients: {idle} ns idle, {contended} ns contention"
    );
    assert_round_trips(&profile, &lsp);
}

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
                .get(&lockscope_probes::waitfor::WokenBy::Program)
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

/// Removes a cgroup directory (empty by then) when dropped: declared before the server that
/// runs in it, it goes after the server has stopped.
struct CgroupDir(Option<PathBuf>);

impl Drop for CgroupDir {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir(&dir);
            if let Some(parent) = dir.parent() {
                let _ = std::fs::remove_dir(parent);
            }
        }
    }
}

/// The v2 hierarchy's mount point, from mountinfo.
fn cgroup2_root() -> Option<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .ok()?
        .lines()
        .find(|l| {
            l.split(" - ")
                .nth(1)
                .is_some_and(|t| t.starts_with("cgroup2 "))
        })
        .and_then(|l| l.split_whitespace().nth(4).map(PathBuf::from))
}

/// Apache httpd with `mpm` (`event` or `prefork`) under ab: a parent and its worker processes.
/// `-p PARENT` alone says that the children are not recorded; `-p PARENT --tree`, `--cgroup`
/// (the cgroup apache.sh starts it in, as systemd does a service) and `-a` each record every
/// worker process with the parent as its parent in the process table, the workers' waits under
/// httpd's own functions (`check`), and `report --by process` has a row per worker that waited.
fn apache_under_ab(mpm: &str, port: u16, check: impl Fn(&Profile, &BTreeSet<u32>)) {
    let test = format!("apache_{mpm}_under_ab");
    if !bpf_available(&test) {
        return;
    }
    let cgroup = format!(
        "lockscope-test-{}/apache2-{mpm}.service",
        std::process::id()
    );
    let _cgroup_dir = CgroupDir(cgroup2_root().map(|root| root.join(&cgroup)));
    let server = Server::start_with(
        "apache.sh",
        &["start", mpm],
        "APACHE_PORT",
        port,
        &[("APACHE_CGROUP", cgroup)],
    );
    let parent = server.pid();
    let cgroup_path = server.output(&["cgroup"]).trim().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let concurrency = AB_CONCURRENCY.to_string();
    let seconds = LOAD_SECONDS.to_string();

    let existing: BTreeSet<u32> = server
        .output(&["processes"])
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .filter(|&pid| pid != parent)
        .collect();
    let alone = dir.path().join("alone.lsp");
    let (profile, _, stderr) = record_target_under_load(
        &["-p".into(), parent.to_string()],
        &alone,
        server.command(&["run", "5", "1"]),
        || {},
    );
    assert!(
        stderr.contains(&format!("lockscope: warning: pid {parent} (apache2) has "))
            && stderr.contains("not recorded"),
        "{stderr}"
    );
    // The workers it had are not recorded (those it forks while recorded are).
    assert!(
        !profile.processes.iter().any(|p| existing.contains(&p.pid)),
        "{:?} of {existing:?}",
        profile.processes
    );
    assert!(!profile.metadata.warnings.is_empty());

    for (name, target) in [
        (
            "tree",
            vec!["-p".to_string(), parent.to_string(), "--tree".to_string()],
        ),
        ("cgroup", vec!["--cgroup".to_string(), cgroup_path.clone()]),
        ("all", vec!["-a".to_string()]),
    ] {
        let lsp = dir.path().join(format!("{name}.lsp"));
        let (profile, ab, _) = record_target_under_load(
            &target,
            &lsp,
            server.command(&["run", &concurrency, &seconds]),
            || {},
        );
        assert!(
            ab.contains("Failed requests:        0"),
            "{name}: ab output: {ab}"
        );
        // The whole machine's waits may overflow a map on a busy machine: then they are
        // counted (and the report says so); a server's own never do.
        if name != "all" {
            assert_eq!(
                profile.metadata.losses.lost_events(),
                0,
                "{name}: {:?}",
                profile.metadata.losses
            );
        }
        // The children as they are at the end; each was recorded, with its parent.
        let children: BTreeSet<u32> = server
            .output(&["processes"])
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .filter(|&pid| pid != parent)
            .collect();
        assert!(!children.is_empty(), "{name}: no worker process");
        for child in &children {
            let info = profile
                .processes
                .iter()
                .find(|p| p.pid == *child)
                .unwrap_or_else(|| panic!("{name}: worker {child} not in the process table"));
            assert_eq!(info.parent, Some(parent), "{name}: {info:?}");
            assert!(
                info.command.first().is_some_and(|c| c.ends_with("apache2")),
                "{name}: {info:?}"
            );
            if name == "cgroup" {
                assert_eq!(info.cgroup.as_deref(), Some(cgroup_path.as_str()));
            }
        }
        // Waits proper: a worker forked near the end may have only intervals of waiting for a
        // CPU, which the report counts as CPU saturation, not as a process's waits.
        let waited: BTreeSet<u32> = profile
            .waits
            .iter()
            .filter(|w| !w.is_cpu_wait())
            .map(|w| w.pid)
            .filter(|pid| children.contains(pid))
            .collect();
        assert!(
            !waited.is_empty(),
            "{name}: no worker process has waits ({children:?})"
        );
        check(&profile, &children);
        let report = lockscope_ok(&[
            "report".as_ref(),
            lsp.as_os_str(),
            "--by".as_ref(),
            "process".as_ref(),
            "--top".as_ref(),
            "0".as_ref(),
        ]);
        for pid in &waited {
            assert!(
                report.contains(&format!("process apache2 (pid {pid}, parent {parent})")),
                "{name}: report --by process lacks worker {pid}:\n{report}"
            );
        }
    }
}

/// Apache httpd with mpm_event (2 children of 25 worker threads at the start) under ab: see
/// [`apache_under_ab`]; the workers wait for connections in httpd's `ap_queue_pop_something`.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn apache_event_under_ab() {
    apache_under_ab("event", 8091, |profile, children| {
        let workers: BTreeSet<u32> = profile
            .waits
            .iter()
            .filter(|w| children.contains(&w.pid))
            .filter(|w| {
                profile.stack(w.user_stack).is_some_and(|s| {
                    s.frames
                        .iter()
                        .any(|f| f.function.as_deref() == Some("ap_queue_pop_something"))
                })
            })
            .map(|w| w.tid)
            .collect();
        assert!(
            workers.len() >= 25,
            "worker threads waiting in ap_queue_pop_something: {workers:?}"
        );
    });
}

/// Apache httpd with mpm_prefork (single-threaded worker processes, 5 at the start) under ab: see
/// [`apache_under_ab`]; several worker processes are off CPU under httpd's
/// `ap_process_connection` or `ap_run_mpm`, on stacks complete to `main`.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn apache_prefork_under_ab() {
    apache_under_ab("prefork", 8092, |profile, children| {
        let serving: BTreeSet<u32> = profile
            .waits
            .iter()
            .filter(|w| w.probe == "offcpu" && children.contains(&w.pid))
            .filter(|w| {
                profile.stack(w.user_stack).is_some_and(|s| {
                    s.frames
                        .iter()
                        .any(|f| f.function.as_deref() == Some("main"))
                        && s.frames.iter().any(|f| {
                            f.function
                                .as_deref()
                                .is_some_and(|n| n == "ap_run_mpm" || n == "ap_process_connection")
                        })
                })
            })
            .map(|w| w.pid)
            .collect();
        assert!(
            serving.len() >= 3,
            "worker processes off CPU under ap_run_mpm: {serving:?} of {children:?}"
        );
    });
}

/// A sweep of an Apache httpd lockscope starts (`--server`, with mpm_event and mpm_prefork)
/// records its whole process tree at every level: each level's profile has every worker the
/// server had, and the sweep has no warning of processes missing; a sweep of the same server by `-p PARENT` alone warns, at
/// every level, that it recorded fewer processes than the server has.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn apache_sweep_records_every_worker() {
    if !bpf_available("apache_sweep_records_every_worker") {
        return;
    }
    let port = 8093;
    let dir = tempfile::tempdir().expect("tempdir");
    // mpm_prefork's parent ends its children with a SIGTERM to its process group: the sweep
    // starts the server in a group of its own, or it would end with them.
    for mpm in ["event", "prefork"] {
        let state = tempfile::tempdir().expect("state directory");
        let script = Path::new(WORKLOADS).join("apache.sh");
        let command = {
            let out = Command::new("bash")
                .arg(&script)
                .args(["command", mpm])
                .env("LOCKSCOPE_WORKLOAD_DIR", state.path())
                .env("APACHE_PORT", port.to_string())
                .output()
                .expect("apache.sh command");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout)
                .expect("utf-8")
                .trim()
                .to_string()
        };
        let load = format!("ab -q -c {{c}} -t 3 -n 100000000 http://127.0.0.1:{port}/index.html");
        let sweep_dir = dir.path().join(format!("sweep-{mpm}"));
        let table = lockscope_ok(&[
            "sweep".as_ref(),
            "--server".as_ref(),
            command.as_ref(),
            "--levels".as_ref(),
            "5,50".as_ref(),
            "-d".as_ref(),
            "2s".as_ref(),
            "--settle".as_ref(),
            "500ms".as_ref(),
            "--throughput".as_ref(),
            "ab".as_ref(),
            // prefork's single-threaded workers make no futex wait: they sleep in the kernel.
            "--probes".as_ref(),
            "futex,offcpu".as_ref(),
            "--load".as_ref(),
            load.as_ref(),
            "-o".as_ref(),
            sweep_dir.as_os_str(),
        ]);
        assert!(table.contains("requests/s"), "{mpm}: {table}");
        let sweep: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(sweep_dir.join("sweep.json")).expect("sweep.json"),
        )
        .expect("json");
        let warnings = sweep["warnings"].as_array().expect("warnings");
        assert!(
            !warnings
                .iter()
                .any(|w| w.as_str().is_some_and(|w| w.contains("the target has"))),
            "{mpm}: {warnings:?}"
        );
        assert!(
            sweep["target"]
                .as_str()
                .is_some_and(|t| t.ends_with("and its descendants")),
            "{mpm}: {}",
            sweep["target"]
        );
        for level in sweep["levels"].as_array().expect("levels") {
            let recorded = level["processes"].as_u64().expect("processes");
            let has = level["target_processes"]
                .as_u64()
                .expect("target_processes");
            let missed = level["missed_processes"]
                .as_u64()
                .expect("missed_processes");
            assert!(
                recorded >= has && has >= 3 && missed == 0,
                "{mpm}: level {level}"
            );
            let profile =
                read_profile(&sweep_dir.join(level["profile"].as_str().expect("profile")))
                    .expect("level profile");
            let with_waits: BTreeSet<u32> = profile.waits.iter().map(|w| w.pid).collect();
            assert!(
                with_waits.len() >= 2,
                "{mpm}: level {}: {with_waits:?}",
                level["concurrency"]
            );
        }
    }

    // The same server by its parent's pid alone: every level warns.
    let server = Server::start_with(
        "apache.sh",
        &["start", "event"],
        "APACHE_PORT",
        port + 1,
        &[("APACHE_CGROUP", String::new())],
    );
    let parent = server.pid().to_string();
    let alone_dir = dir.path().join("alone");
    let load = format!(
        "ab -q -c {{c}} -t 2 -n 100000000 http://127.0.0.1:{}/index.html",
        port + 1
    );
    lockscope_ok(&[
        "sweep".as_ref(),
        "-p".as_ref(),
        parent.as_ref(),
        "--levels".as_ref(),
        "5,50".as_ref(),
        "-d".as_ref(),
        "1s".as_ref(),
        "--settle".as_ref(),
        "200ms".as_ref(),
        "--throughput".as_ref(),
        "ab".as_ref(),
        "--load".as_ref(),
        load.as_ref(),
        "-o".as_ref(),
        alone_dir.as_os_str(),
    ]);
    let sweep: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(alone_dir.join("sweep.json")).expect("sweep.json"),
    )
    .expect("json");
    // Each level missed processes of the server: it recorded the parent, and perhaps children
    // httpd forked under that level's load (`-p` follows the children forked after the attach),
    // never the children that existed before it. CI once saw level 50 record as many processes
    // as the server had at its start (two children forked under the load): counts alone would
    // not have warned.
    let warnings: Vec<&str> = sweep["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.contains(" the target has: its waits are not the whole server's"))
        .collect();
    for level in ["level 5 missed ", "level 50 missed "] {
        assert_eq!(
            warnings.iter().filter(|w| w.starts_with(level)).count(),
            1,
            "{level}: {}",
            sweep["warnings"]
        );
    }
}
