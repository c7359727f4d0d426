//! What `lockscope record` is pointed at: several pids, a process tree, a cgroup and the whole
//! machine, each recorded with the known answer of every process in it (the demo's waits,
//! checked against what each demo's threads measured themselves); a forked child that exits
//! within milliseconds keeps its symbols; a process in a private mount namespace is symbolized
//! from its own files; bad targets are refused naming them. Root with BPF; skips loudly
//! otherwise.

use crate::common;

use common::*;
use lockscope_probes::{read_profile, Profile, WaitRecord};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// The demo's summary line of the waits its threads measured.
const MEASURED: &str = "lockscope-demo: waits measured by the threads: ";
/// How long a demo may take to print its summary.
const DEMO_TIMEOUT: Duration = Duration::from_secs(60);

/// A demo waiting for its go line, its output captured.
struct Demo {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: std::process::ChildStdout,
}

impl Demo {
    /// Starts the demo holding its order lock `hold_ms`.
    fn start(hold_ms: u32) -> Demo {
        let mut child = Command::new(demo_path())
            .args(["--wait-for-stdin", "--hold-ms", &hold_ms.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the demo");
        Demo {
            stdin: child.stdin.take(),
            stdout: child.stdout.take().expect("demo stdout"),
            child,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn go(&mut self) {
        let stdin = self.stdin.as_mut().expect("demo stdin");
        stdin.write_all(b"go\n").expect("start the demo");
        stdin.flush().expect("flush");
    }

    /// Waits for its summary, lets it exit, and returns what it printed.
    fn finish(mut self) -> String {
        let mut out = String::new();
        let mut reader = BufReader::new(&mut self.stdout);
        let deadline = Instant::now() + DEMO_TIMEOUT;
        while !out.contains("CPU time measured") {
            assert!(Instant::now() < deadline, "no demo summary: {out}");
            let mut line = String::new();
            if reader.read_line(&mut line).expect("demo output") == 0 {
                break;
            }
            out.push_str(&line);
        }
        drop(self.stdin.take());
        let _ = self.child.wait();
        out
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `lockscope record ARGS -o LSP`, running, its stderr read up to its "recording" line.
struct Recording {
    child: Child,
    stderr: BufReader<ChildStderr>,
    lines: Vec<String>,
}

impl Recording {
    fn start(lsp: &Path, args: &[&str]) -> Recording {
        let mut child = lockscope()
            .arg("record")
            .args(args)
            .arg("-o")
            .arg(lsp)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start lockscope record");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let n = stderr.read_line(&mut line).expect("read lockscope stderr");
            assert!(n > 0, "lockscope exited before recording: {lines:?}");
            let started = line.starts_with("lockscope: recording ");
            lines.push(line);
            if started {
                break;
            }
        }
        Recording {
            child,
            stderr,
            lines,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Asks it to stop (SIGINT), as Ctrl-C does.
    fn interrupt(&self) {
        // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
    }

    /// Waits for it to end; everything it printed on stderr.
    fn finish(mut self) -> String {
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).expect("stderr");
        let status = self.child.wait().expect("wait for lockscope");
        let all = self.lines.concat() + &rest;
        assert!(status.success(), "lockscope record failed: {all}");
        all
    }
}

/// The waits of process `pid` alone.
fn of_process(profile: &Profile, pid: u32) -> Vec<&WaitRecord> {
    profile.waits.iter().filter(|w| w.pid == pid).collect()
}

/// Checks that the futex probe saw what each thread of the demo `pid` measured of its long
/// waits (its `MEASURED` line in `log`): each thread's recorded time within 5% of its own.
fn assert_demo_answer(profile: &Profile, pid: u32, log: &str) {
    if let Some(mismatch) = demo_answer_mismatch(profile, pid, log) {
        panic!("{mismatch}");
    }
}

/// What differs between the demo `pid`'s recorded waits and its threads' own measures (see
/// [`assert_demo_answer`]); `None` when nothing does.
fn demo_answer_mismatch(profile: &Profile, pid: u32, log: &str) -> Option<String> {
    let measured = demo_thread_measures(log, MEASURED);
    if measured.len() != 6 {
        return Some(format!("the demo's measures: {log}"));
    }
    for (thread, ms) in measured {
        let recorded_ns: u64 = of_process(profile, pid)
            .into_iter()
            .filter(|w| w.probe == "futex" && w.stats.max_ns >= BLOCKED.as_nanos() as u64)
            .filter(|w| profile.thread_name(w.pid, w.tid) == Some(thread.as_str()))
            .map(|w| w.stats.total_ns)
            .sum();
        let recorded_ms = recorded_ns as f64 / 1e6;
        if (recorded_ms - ms).abs() > ms * 0.05 {
            return Some(format!(
                "pid {pid} {thread}: recorded {recorded_ms:.1} ms, measured {ms:.1} ms"
            ));
        }
    }
    None
}

fn read(lsp: &Path) -> Profile {
    read_profile(lsp).expect("read the recorded profile")
}

/// Builds `profiler/tests/data/targets.c` (and its library, as `lib` names it) into `dir`.
fn build_targets(dir: &Path) -> PathBuf {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    for copy in ["host_copy", "namespace_copy"] {
        let status = Command::new("cc")
            .args(["-O2", "-pthread", "-shared", "-fPIC"])
            .arg(format!("-DCOPY={copy}"))
            .arg("-o")
            .arg(dir.join(format!("lib{copy}.so")))
            .arg(data.join("targetlib.c"))
            .status()
            .expect("run cc");
        assert!(status.success(), "cc targetlib.c ({copy})");
    }
    // The program links against libtargetlib.so, the host copy.
    std::fs::copy(dir.join("libhost_copy.so"), dir.join("libtargetlib.so")).expect("copy");
    let binary = dir.join("targets");
    let status = Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&binary)
        .arg(data.join("targets.c"))
        .arg(format!("-L{}", dir.display()))
        .arg("-ltargetlib")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .status()
        .expect("run cc");
    assert!(status.success(), "cc targets.c");
    binary
}

/// Two demos recorded with one `-p A,B`, each with its own known answer (one holds its lock
/// 200 ms, the other 400 ms); the header counts both processes and the process table names
/// them.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn several_pids_each_with_its_known_answer() {
    let Some(dir) = bpf_scratch("several_pids_each_with_its_known_answer") else {
        return;
    };
    let lsp = dir.path().join("pids.lsp");
    let mut a = Demo::start(200);
    let mut b = Demo::start(400);
    let pids = format!("{},{}", a.pid(), b.pid());
    let recording = Recording::start(&lsp, &["-p", &pids]);
    assert!(
        recording
            .lines
            .last()
            .is_some_and(|l| l.starts_with(&format!(
                "lockscope: recording pids {}, {} (2 processes)",
                a.pid(),
                b.pid()
            ))),
        "{:?}",
        recording.lines
    );
    a.go();
    b.go();
    let (pid_a, pid_b) = (a.pid(), b.pid());
    let (log_a, log_b) = (a.finish(), b.finish());
    let stderr = recording.finish();
    assert!(stderr.contains("(target exited)"), "{stderr}");
    let profile = read(&lsp);
    assert!(
        profile.metadata.losses.is_zero(),
        "{:?}",
        profile.metadata.losses
    );
    assert_demo_answer(&profile, pid_a, &log_a);
    assert_demo_answer(&profile, pid_b, &log_b);
    assert_eq!(profile.metadata.target.pids, [pid_a, pid_b]);
    let table: Vec<u32> = profile.processes.iter().map(|p| p.pid).collect();
    assert_eq!(table, [pid_a, pid_b]);
    assert!(profile.processes.iter().all(|p| p
        .command
        .first()
        .is_some_and(|c| c.ends_with("lockscope-demo"))
        && p.exit_unix_ns.is_some()));
}

/// A shell with two demo children: `-p SHELL` alone records the shell and says, on stderr and
/// in the profile, that its two children are not recorded; `-p SHELL --tree` records the
/// children with their known answers and their parent in the process table.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn tree_records_the_existing_descendants() {
    let Some(dir) = bpf_scratch("tree_records_the_existing_descendants") else {
        return;
    };
    let path = |name: &str| dir.path().join(name);
    for fifo in ["go-1", "go-2"] {
        let status = Command::new("mkfifo")
            .arg(path(fifo))
            .status()
            .expect("mkfifo");
        assert!(status.success());
    }
    let script = format!(
        "{demo} --wait-for-stdin --hold-ms 200 <{g1} >{o1} & \
         {demo} --wait-for-stdin --hold-ms 300 <{g2} >{o2} & wait",
        demo = demo_path(),
        g1 = path("go-1").display(),
        g2 = path("go-2").display(),
        o1 = path("out-1").display(),
        o2 = path("out-2").display(),
    );
    let shell = KillOnDrop(
        Command::new("sh")
            .args(["-c", &script])
            .spawn()
            .expect("start the shell"),
    );
    let shell_pid = shell.0.id();
    // Each child opens its fifo before it runs the demo: opening the writing ends waits for that.
    let mut go: Vec<std::fs::File> = ["go-1", "go-2"]
        .iter()
        .map(|f| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(path(f))
                .expect("fifo")
        })
        .collect();
    let demo_pids = || -> Vec<u32> {
        let out = Command::new("pgrep")
            .args(["-P", &shell_pid.to_string()])
            .output()
            .expect("pgrep");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while demo_pids().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the shell's children did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Without --tree: the shell alone, and a warning naming its children.
    let alone = path("alone.lsp");
    let pid = shell_pid.to_string();
    let recording = Recording::start(&alone, &["-p", &pid, "-d", "500ms"]);
    let stderr = recording.finish();
    let warning = format!("pid {shell_pid} (sh) has 2 descendant processes that are not recorded");
    assert!(
        stderr.contains(&format!("lockscope: warning: {warning}")),
        "{stderr}"
    );
    let profile = read(&alone);
    assert_eq!(profile.processes.len(), 1, "{:?}", profile.processes);
    assert!(
        profile
            .metadata
            .warnings
            .iter()
            .any(|w| w.starts_with(&warning)),
        "{:?}",
        profile.metadata.warnings
    );

    let lsp = path("tree.lsp");
    let recording = Recording::start(&lsp, &["-p", &pid, "--tree"]);
    assert!(
        recording
            .lines
            .last()
            .is_some_and(|l| l.starts_with(&format!(
                "lockscope: recording pid {shell_pid} and its descendants (3 processes)"
            ))),
        "{:?}",
        recording.lines
    );
    let children = demo_pids();
    let fifo_readers: std::collections::BTreeMap<String, u32> = children
        .iter()
        .filter_map(|&c| {
            let link = std::fs::read_link(format!("/proc/{c}/fd/0")).ok()?;
            Some((link.file_name()?.to_string_lossy().into_owned(), c))
        })
        .collect();
    assert_eq!(fifo_readers.len(), 2, "{fifo_readers:?}");
    for fifo in &mut go {
        fifo.write_all(b"go\n").expect("go");
    }
    let mut logs = Vec::new();
    for out in ["out-1", "out-2"] {
        let deadline = Instant::now() + DEMO_TIMEOUT;
        loop {
            let text = std::fs::read_to_string(path(out)).unwrap_or_default();
            if text.contains("CPU time measured") {
                logs.push(text);
                break;
            }
            assert!(Instant::now() < deadline, "no summary in {out}: {text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    drop(go);
    let stderr = recording.finish();
    assert!(stderr.contains("(target exited)"), "{stderr}");
    let profile = read(&lsp);
    assert!(
        profile.metadata.losses.is_zero(),
        "{:?}",
        profile.metadata.losses
    );
    assert!(
        profile.metadata.warnings.is_empty(),
        "{:?}",
        profile.metadata.warnings
    );
    // Which child ran which demo: the fifo its standard input is.
    for (fifo, log) in ["go-1", "go-2"].iter().zip(&logs) {
        let child = children
            .iter()
            .copied()
            .find(|c| fifo_readers.get(*fifo) == Some(c))
            .expect("the child reading the fifo");
        assert_demo_answer(&profile, child, log);
    }
    for child in &children {
        let info = profile
            .processes
            .iter()
            .find(|p| p.pid == *child)
            .expect("child in the process table");
        assert_eq!(info.parent, Some(shell_pid));
        assert!(info
            .command
            .first()
            .is_some_and(|c| c.ends_with("lockscope-demo")));
    }
    drop(shell);
}

/// The v2 hierarchy's mount point (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid
/// host), from mountinfo.
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

/// Removes a test cgroup tree when dropped (its processes gone by then).
struct TestCgroup(PathBuf);

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(self.0.join("sub"));
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A cgroup named by its path from the hierarchy's root is recorded with the processes of its
/// descendant cgroups, and a process moved into it after the start is found and recorded with
/// its known answer too; the recording runs until interrupted.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn cgroup_records_its_processes_now_and_later() {
    let Some(dir) = bpf_scratch("cgroup_records_its_processes_now_and_later") else {
        return;
    };
    let Some(root) = cgroup2_root() else {
        let message = "skipped: cgroup_records_its_processes_now_and_later: no cgroup v2 hierarchy";
        assert!(
            std::env::var_os("LOCKSCOPE_REQUIRE_BPF").is_none(),
            "{message}"
        );
        eprintln!("{message}");
        return;
    };
    let name = format!("lockscope-test-{}", std::process::id());
    let cgroup = TestCgroup(root.join(&name));
    std::fs::create_dir_all(cgroup.0.join("sub")).expect("create the test cgroup");
    let join = |dir: &Path, pid: u32| {
        std::fs::write(dir.join("cgroup.procs"), pid.to_string()).expect("move into the cgroup");
    };
    let mut first = Demo::start(200);
    join(&cgroup.0.join("sub"), first.pid());

    let lsp = dir.path().join("cgroup.lsp");
    let given = format!("/{name}");
    let recording = Recording::start(&lsp, &["--cgroup", &given]);
    assert!(
        recording.lines.last().is_some_and(
            |l| l.starts_with(&format!("lockscope: recording cgroup /{name} (1 process)"))
        ),
        "{:?}",
        recording.lines
    );
    let mut later = Demo::start(300);
    join(&cgroup.0, later.pid());
    // The rescan (every 250 ms) finds it before it starts.
    std::thread::sleep(Duration::from_millis(600));
    first.go();
    later.go();
    let (first_pid, later_pid) = (first.pid(), later.pid());
    let (first_log, later_log) = (first.finish(), later.finish());
    let lockscope_pid = recording.pid();
    recording.interrupt();
    let stderr = recording.finish();
    assert!(stderr.contains("(interrupted (SIGINT))"), "{stderr}");
    let profile = read(&lsp);
    assert!(
        profile.metadata.losses.is_zero(),
        "{:?}",
        profile.metadata.losses
    );
    assert_eq!(
        profile.metadata.target.cgroup.as_deref(),
        Some(given.as_str())
    );
    assert_demo_answer(&profile, first_pid, &first_log);
    assert_demo_answer(&profile, later_pid, &later_log);
    let cgroups: Vec<(u32, Option<String>)> = profile
        .processes
        .iter()
        .map(|p| (p.pid, p.cgroup.clone()))
        .collect();
    assert!(
        cgroups.contains(&(first_pid, Some(format!("/{name}/sub"))))
            && cgroups.contains(&(later_pid, Some(format!("/{name}")))),
        "{cgroups:?}"
    );
    assert!(!profile.processes.iter().any(|p| p.pid == lockscope_pid));
}

/// Every process: a demo started after the attach has its known answer, kernel threads are in
/// the process table with records of their own (the offcpu probe sees them sleep), and
/// lockscope's own process is left out.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn all_processes_with_kernel_threads_without_lockscope() {
    let Some(dir) = bpf_scratch("all_processes_with_kernel_threads_without_lockscope") else {
        return;
    };
    let lsp = dir.path().join("all.lsp");
    let mut demo = Demo::start(200);
    let recording = Recording::start(&lsp, &["-a", "--probes", "futex,offcpu", "-d", "6s"]);
    assert!(
        recording
            .lines
            .last()
            .is_some_and(|l| l.starts_with("lockscope: recording all processes (")),
        "{:?}",
        recording.lines
    );
    let lockscope_pid = recording.pid();
    demo.go();
    let demo_pid = demo.pid();
    let log = demo.finish();
    let stderr = recording.finish();
    assert!(stderr.contains("(duration elapsed)"), "{stderr}");
    let profile = read(&lsp);
    assert!(profile.metadata.target.all);
    assert_demo_answer(&profile, demo_pid, &log);
    assert!(!profile.processes.iter().any(|p| p.pid == lockscope_pid));
    assert!(!profile.waits.iter().any(|w| w.pid == lockscope_pid));
    let kernel_threads: Vec<u32> = profile
        .processes
        .iter()
        .filter(|p| p.kernel_thread)
        .map(|p| p.pid)
        .collect();
    assert!(!kernel_threads.is_empty(), "no kernel thread in the table");
    assert!(
        profile
            .waits
            .iter()
            .any(|w| w.probe == "offcpu" && kernel_threads.contains(&w.pid)),
        "no offcpu record of a kernel thread"
    );
    // A kernel thread has no user stack to miss: none of its records counts as a failure.
    assert!(
        profile.metadata.losses.user_stack_failures
            < profile
                .waits
                .iter()
                .filter(|w| kernel_threads.contains(&w.pid))
                .map(|w| w.stats.count)
                .sum::<u64>(),
        "kernel threads' records counted as user stack failures: {:?}",
        profile.metadata.losses
    );
}

/// Children forked by a recorded process that each wait 5 ms and exit (living less than one of
/// the recorder's polls) keep their symbols: every child's wait is on a complete stack through
/// short_lived_child and wait_briefly, from the mappings it inherited from its parent.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn children_that_exit_at_once_keep_their_symbols() {
    let Some(dir) = bpf_scratch("children_that_exit_at_once_keep_their_symbols") else {
        return;
    };
    let binary = build_targets(dir.path());
    let mut forker = Command::new(&binary)
        .args(["forker", "20"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the forker");
    let mut pid_line = String::new();
    BufReader::new(forker.stdout.as_mut().expect("stdout"))
        .read_line(&mut pid_line)
        .expect("the forker's pid");
    let lsp = dir.path().join("forker.lsp");
    let pid = forker.id().to_string();
    let recording = Recording::start(&lsp, &["-p", &pid]);
    forker
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    assert!(forker.wait().expect("forker").success());
    recording.finish();
    let mut printed = String::new();
    forker
        .stdout
        .as_mut()
        .expect("stdout")
        .read_to_string(&mut printed)
        .expect("the children's lines");
    // Each child's time awake around its wait (see targets.c), by pid.
    let awake: std::collections::BTreeMap<u32, u64> = printed
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("child ")?.strip_suffix(" ns")?;
            let (pid, ns) = rest.split_once(" awake ")?;
            Some((pid.parse().ok()?, ns.parse().ok()?))
        })
        .collect();
    let profile = read(&lsp);
    assert!(
        profile.metadata.losses.is_zero(),
        "{:?}",
        profile.metadata.losses
    );
    let children: Vec<u32> = profile
        .processes
        .iter()
        .filter(|p| p.parent == Some(forker.id()))
        .map(|p| p.pid)
        .collect();
    assert_eq!(children.len(), 20, "{:?}", profile.processes);
    for child in children {
        let info = profile
            .processes
            .iter()
            .find(|p| p.pid == child)
            .expect("child");
        let lived = info.exit_unix_ns.expect("exit") - info.start_unix_ns.expect("start");
        assert!(lived < 1_000_000_000, "child {child} lived {lived} ns");
        let waits = of_process(&profile, child);
        assert_eq!(waits.len(), 1, "child {child}: {waits:#?}");
        let stack = profile.stack(waits[0].user_stack).expect("user stack");
        let names: Vec<String> = stack.frames.iter().map(|f| f.display_name()).collect();
        assert!(!stack.truncated, "child {child}: cut short: {names:?}");
        assert_in_order(
            &names,
            &[
                "main",
                "short_lived_child",
                "wait_briefly",
                "pthread_cond_timedwait",
            ],
        );
        // The wait ends at the 5 ms deadline or later, and begins after the deadline was taken:
        // at least 5 ms less what the child did in between, on a CPU or waiting for one.
        let awake_ns = *awake
            .get(&child)
            .unwrap_or_else(|| panic!("child {child} printed no awake time: {printed}"));
        assert!(
            waits[0].stats.total_ns + awake_ns >= 5_000_000,
            "child {child}, awake {awake_ns} ns: {:?}",
            waits[0].stats
        );
    }
}

/// A process in a private mount namespace, whose library path has another copy of the library
/// bind-mounted over it, is symbolized from the copy it mapped (its function is
/// namespace_copy_wait), not from the file at that path outside (host_copy_wait).
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn private_mount_namespace_symbolizes_its_own_library() {
    let Some(dir) = bpf_scratch("private_mount_namespace_symbolizes_its_own_library") else {
        return;
    };
    let binary = build_targets(dir.path());
    let library = dir.path().join("libtargetlib.so");
    let copy = dir.path().join("libnamespace_copy.so");
    let script = format!(
        "mount --bind {copy} {library} && exec {binary} libwait 5",
        copy = copy.display(),
        library = library.display(),
        binary = binary.display()
    );
    let lsp = dir.path().join("ns.lsp");
    let out = lockscope()
        .arg("record")
        .arg("-o")
        .arg(&lsp)
        .args([
            "--",
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().expect("stdin").write_all(b"go\n")?;
            child.wait_with_output()
        })
        .expect("run lockscope record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let profile = read(&lsp);
    let names: Vec<Vec<String>> = profile
        .waits
        .iter()
        .filter_map(|w| profile.stack(w.user_stack))
        .map(|s| s.frames.iter().map(|f| f.display_name()).collect())
        .collect();
    let waits: u64 = profile
        .waits
        .iter()
        .filter(|w| {
            profile.stack(w.user_stack).is_some_and(|s| {
                s.frames
                    .iter()
                    .any(|f| f.function.as_deref() == Some("namespace_copy_wait"))
            })
        })
        .map(|w| w.stats.count)
        .sum();
    assert_eq!(waits, 5, "{names:#?}");
    assert!(
        !names.iter().flatten().any(|n| n == "host_copy_wait"),
        "symbolized from the file outside the namespace: {names:#?}"
    );
}

/// Targets that do not exist, or that lockscope cannot record, are refused naming them.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn bad_targets_are_refused_naming_them() {
    if !bpf_available("bad_targets_are_refused_naming_them") {
        return;
    }
    let error = |args: &[&str]| -> String {
        let out = lockscope()
            .arg("record")
            .args(args)
            .args(["-o", "/tmp/lockscope-never-written.lsp"])
            .output()
            .expect("run lockscope");
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).trim().to_string()
    };
    assert_eq!(
        error(&["-p", "4000000"]),
        "lockscope: error: no process with pid 4000000"
    );
    let missing = error(&["--cgroup", "/lockscope-no-such-cgroup"]);
    assert!(
        missing.starts_with(
            "lockscope: error: cannot record cgroup `/lockscope-no-such-cgroup`: no such cgroup \
             in the v2 hierarchy mounted at "
        ),
        "{missing}"
    );
    // On a hybrid host the v1 controllers are beside the v2 hierarchy: said as such.
    let v1 = Path::new("/sys/fs/cgroup/cpu");
    if cgroup2_root().is_some_and(|root| root != Path::new("/sys/fs/cgroup")) && v1.is_dir() {
        let msg = error(&["--cgroup", "/sys/fs/cgroup/cpu"]);
        assert!(
            msg.contains("`/sys/fs/cgroup/cpu`: a cgroup v1 hierarchy: give a cgroup of the v2"),
            "{msg}"
        );
    }
}
