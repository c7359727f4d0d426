//! End-to-end recordings of real servers under load: here MariaDB with sysbench and nginx with ab;
//! PostgreSQL with pgbench on one row in `postgres`; Apache httpd (mpm_event and mpm_prefork: a
//! server of many processes) with ab in `apache`, recorded by its process tree, its cgroup and the
//! whole machine, and swept. The servers are started and stopped by the scripts in
//! `profiler/workloads/` (which install their Debian packages when missing). They run as root with
//! BPF and skip loudly otherwise; each server is stopped by a drop guard, so a failing test leaves
//! nothing running.

use crate::common;

use common::*;
use lockscope_probes::{read_profile, write_profile, Profile, TimeClass, WaitKind};
use std::collections::BTreeSet;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod apache;
mod postgres;

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
