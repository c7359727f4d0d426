//! Apache httpd with mpm_event and mpm_prefork under ab, recorded by its process tree, its cgroup
//! and the whole machine, and swept with every worker recorded.

use super::*;

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
