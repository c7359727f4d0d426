//! Recordings by a real dtrace of several processes: a pid set (`-p A,B`), a tree (`--tree`) and
//! every process (`-a`), each with every demo's known answer; `--cgroup` refused.

use super::*;

/// The waits of process `pid` of `profile` alone (its threads too).
fn of_process(profile: &Profile, pid: u32) -> Profile {
    Profile {
        waits: profile
            .waits
            .iter()
            .filter(|w| w.pid == pid)
            .cloned()
            .collect(),
        threads: profile
            .threads
            .iter()
            .filter(|t| t.pid == pid)
            .cloned()
            .collect(),
        ..profile.clone()
    }
}

/// A demo waiting for its go line (its summary on stdout, discarded).
fn waiting_demo() -> KillOnDrop {
    KillOnDrop(
        Command::new(demo_path())
            .arg("--wait-for-stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the demo"),
    )
}

/// `record --backend dtrace` of several processes (`-p A,B`: a pid set that proc:::create
/// extends), of a tree (`-p SHELL --tree`: progenyof) and of every process (`-a`: no pid
/// predicate), each with the known answer of every demo in it; `--cgroup` is refused with its
/// reason.
#[test]
fn live_record_pids_tree_and_all() {
    let Some(live) = Live::start("live_record_pids_tree_and_all") else {
        return;
    };
    // Every demo stays alive until the recording ends: DTrace for Linux names frames when END
    // prints, through the live process (the recorder reads one target's mappings only).
    let record = |lsp: &Path, args: &[String], demos: &mut [&mut Child]| {
        let mut recorder = KillOnDrop(
            live.record(lsp)
                .args(args)
                .args(["-d", "8s"])
                .stderr(Stdio::piped())
                .spawn()
                .expect("run lockscope"),
        );
        let rest = wait_for_probes(&mut recorder.0);
        let stdins: Vec<_> = demos
            .iter_mut()
            .map(|demo| {
                let mut stdin = demo.stdin.take().expect("demo stdin");
                writeln!(stdin).expect("start the demo");
                stdin
            })
            .collect();
        wait_success(&mut recorder, rest);
        drop(stdins);
        // Each demo prints its bounds before it waits for its standard input to close.
        let logs: Vec<String> = demos
            .iter_mut()
            .map(|demo| {
                let mut log = String::new();
                demo.stdout
                    .take()
                    .expect("demo stdout")
                    .read_to_string(&mut log)
                    .expect("read the demo's output");
                log
            })
            .collect();
        (read(lsp), logs)
    };

    let mut a = waiting_demo();
    let mut b = waiting_demo();
    let (pid_a, pid_b) = (a.0.id(), b.0.id());
    let lsp = live.profile("pids.lsp");
    let (profile, logs) = record(
        &lsp,
        &["-p".into(), format!("{pid_a},{pid_b}")],
        &mut [&mut a.0, &mut b.0],
    );
    assert_eq!(profile.metadata.target.pids, [pid_a, pid_b]);
    check_known_answer(&of_process(&profile, pid_a), "dtrace -p A,B (A)", &logs[0]);
    check_known_answer(&of_process(&profile, pid_b), "dtrace -p A,B (B)", &logs[1]);

    let mut shell = KillOnDrop(
        Command::new("sh")
            .args(["-c", &format!("{} --wait-for-stdin; true", demo_path())])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the shell"),
    );
    let shell_pid = shell.0.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    let child = loop {
        let out = Command::new("pgrep")
            .args(["-P", &shell_pid.to_string()])
            .output()
            .expect("pgrep");
        if let Some(pid) = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.trim().parse::<u32>().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the shell's demo did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let lsp = live.profile("tree.lsp");
    let (profile, logs) = record(
        &lsp,
        &["-p".into(), shell_pid.to_string(), "--tree".into()],
        &mut [&mut shell.0],
    );
    assert!(profile.metadata.target.tree);
    check_known_answer(
        &of_process(&profile, child),
        "dtrace -p SHELL --tree",
        &logs[0],
    );

    // Every futex wait of the machine goes through dtrace; the demo's bounds hold whatever
    // that load does to its timing.
    let mut demo = waiting_demo();
    let pid = demo.0.id();
    let lsp = live.profile("all.lsp");
    let (profile, logs) = record(&lsp, &["-a".into()], &mut [&mut demo.0]);
    assert!(profile.metadata.target.all);
    check_known_answer(&of_process(&profile, pid), "dtrace -a", &logs[0]);

    let out = live
        .record(&live.profile("cgroup.lsp"))
        .args(["--cgroup", "/", "-d", "1s"])
        .output()
        .expect("run lockscope");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("--cgroup needs the ebpf backend: D has no variable"),
        "{stderr}"
    );
}
