//! Recording without root: an unprivileged user runs a copy of `lockscope` that has file
//! capabilities (`setcap cap_bpf,cap_perfmon=ep`, as a systemd unit or a DaemonSet grants
//! them), and records the demo's known answer. The tests start as root (to make the copy and
//! set its capabilities), then run it as `nobody`; they skip loudly elsewhere.

use crate::common;

use common::*;
use lockscope_probes::read_profile;
use std::ffi::CString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A user and group id by name (`None` when the user does not exist).
fn user_ids(name: &str) -> Option<(u32, u32)> {
    let name = CString::new(name).ok()?;
    // SAFETY: getpwnam takes a NUL-terminated name and returns a pointer into static storage
    // (or null), read at once; the tests run one at a time (--test-threads=1 in .ci/run).
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    // SAFETY: non-null, so it points to a valid passwd entry.
    (!entry.is_null()).then(|| unsafe { ((*entry).pw_uid, (*entry).pw_gid) })
}

/// Fails the test under LOCKSCOPE_REQUIRE_BPF (CI), else prints why it is skipped.
fn skip(test: &str, why: &str) {
    let message = format!("skipped: {test}: {why}");
    assert!(
        std::env::var_os("LOCKSCOPE_REQUIRE_BPF").is_none(),
        "{message} (LOCKSCOPE_REQUIRE_BPF is set)"
    );
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// A directory everyone can read, with copies of `lockscope` (given file capabilities) and of
/// the demo, and an output directory owned by the unprivileged user.
struct CapableCopy {
    dir: tempfile::TempDir,
    lockscope: PathBuf,
    demo: PathBuf,
    out: PathBuf,
    uid: u32,
    gid: u32,
}

impl CapableCopy {
    /// The copy for `user` with capabilities `caps` (`cap_bpf,cap_perfmon`); `None` (the skip
    /// printed, or a failure under CI) when this machine cannot have one.
    fn new(test: &str, user: &str, caps: &str) -> Option<CapableCopy> {
        if !bpf_available(test) {
            return None;
        }
        let Some((uid, gid)) = user_ids(user) else {
            skip(test, &format!("no user `{user}`"));
            return None;
        };
        // In /tmp, not the build tree: a fresh clone in a home directory is not readable by
        // another user.
        let dir = tempfile::Builder::new()
            .prefix("lockscope-privilege-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        // Copies: capabilities set on a hard link would land on the build's own binary.
        let lockscope = dir.path().join("lockscope");
        let demo = dir.path().join("lockscope-demo");
        std::fs::copy(env!("CARGO_BIN_EXE_lockscope"), &lockscope).expect("copy lockscope");
        std::fs::copy(demo_path(), &demo).expect("copy the demo");
        let setcap = Command::new("setcap")
            .arg(format!("{caps}=ep"))
            .arg(&lockscope)
            .output();
        match setcap {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                skip(
                    test,
                    &format!(
                        "setcap {caps}=ep failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ),
                );
                return None;
            }
            Err(e) => {
                skip(test, &format!("no setcap (libcap2-bin): {e}"));
                return None;
            }
        }
        let out = dir.path().join("out");
        std::fs::create_dir(&out).expect("mkdir out");
        std::os::unix::fs::chown(&out, Some(uid), Some(gid)).expect("chown out");
        Some(CapableCopy {
            dir,
            lockscope,
            demo,
            out,
            uid,
            gid,
        })
    }

    /// The copy, run as the unprivileged user (no supplementary groups) in the output
    /// directory, which is also its home (its unwind-table cache goes there).
    fn command(&self) -> Command {
        let mut command = Command::new(&self.lockscope);
        command
            .uid(self.uid)
            .gid(self.gid)
            .current_dir(&self.out)
            .env("HOME", &self.out)
            .env_remove("XDG_CACHE_HOME");
        command
    }

    /// The copy's file capabilities, as getcap(8) prints them.
    fn file_capabilities(&self) -> String {
        let out = Command::new("getcap")
            .arg(&self.lockscope)
            .output()
            .expect("getcap");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

/// Checks that `lsp` is the unprivileged user's, readable by it alone (0600, as perf writes
/// perf.data): a profile holds command lines, paths and addresses.
fn assert_private_to(lsp: &Path, uid: u32) {
    let meta = std::fs::metadata(lsp).expect("profile written");
    assert_eq!(meta.uid(), uid, "owner of {}", lsp.display());
    assert_eq!(meta.mode() & 0o777, 0o600, "mode of {}", lsp.display());
}

/// Checks the demo's known answer in `profile` against what its threads measured (in `log`):
/// the waits between the demo's own bounds, on the stacks the demo waits at.
fn assert_known_answer_by_own_clocks(profile: &lockscope_probes::Profile, log: &str) {
    assert_demo_known_answer(profile, "futex", log);
    assert_demo_stacks(profile, "futex");
}

/// As `nobody`, a copy of lockscope with only CAP_BPF and CAP_PERFMON records the demo it
/// launches: the known answer (4 mutex waits of 200 ms at `take_order_lock`, 2 condvar waits of
/// 300 ms at `wait_for_signal`) on complete stacks, into a profile only `nobody` can read.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn unprivileged_user_with_file_capabilities_records_the_demo() {
    let test = "unprivileged_user_with_file_capabilities_records_the_demo";
    let Some(copy) = CapableCopy::new(test, "nobody", "cap_bpf,cap_perfmon") else {
        return;
    };
    assert!(
        copy.file_capabilities().ends_with("cap_perfmon,cap_bpf=ep"),
        "{}",
        copy.file_capabilities()
    );
    let lsp = copy.out.join("demo.lsp");
    let out = copy
        .command()
        .arg("record")
        .arg("-o")
        .arg(&lsp)
        .arg("--")
        .arg(&copy.demo)
        .output()
        .expect("run the copy");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "record as nobody failed: {stderr}");
    assert!(!stderr.contains("libbpf:"), "libbpf noise: {stderr}");
    assert!(!stderr.contains("error"), "{stderr}");
    assert_private_to(&lsp, copy.uid);
    let profile = read_profile(&lsp).expect("read the profile");
    assert_known_answer_by_own_clocks(&profile, &String::from_utf8_lossy(&out.stdout));
    // The unwind tables went into the user's own cache, also private to it.
    let cache = copy.out.join(".cache/lockscope");
    let entries: Vec<_> = std::fs::read_dir(&cache)
        .expect("the user's cache")
        .flatten()
        .collect();
    assert!(
        !entries.is_empty(),
        "no cached table in {}",
        cache.display()
    );
    for entry in entries {
        assert_eq!(entry.metadata().expect("entry").uid(), copy.uid);
    }
    drop(copy.dir);
}

/// A demo started by another user (`daemon`), held until the recorder is attached.
struct OthersDemo {
    child: std::process::Child,
    stdout: BufReader<std::process::ChildStdout>,
}

impl OthersDemo {
    fn start(demo: &Path, uid: u32, gid: u32) -> OthersDemo {
        let mut child = Command::new(demo)
            .arg("--wait-for-stdin")
            .uid(uid)
            .gid(gid)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the demo as another user");
        let stdout = BufReader::new(child.stdout.take().expect("demo stdout"));
        OthersDemo { child, stdout }
    }

    /// Lets it run and waits for its summary (its waits are over); returns what it printed.
    fn run_workload(&mut self) -> String {
        let stdin = self.child.stdin.as_mut().expect("demo stdin");
        stdin.write_all(b"go\n").expect("release the demo");
        let mut log = String::new();
        while !log.contains("CPU time measured by the threads") {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).expect("demo output") == 0 {
                break;
            }
            log.push_str(&line);
        }
        assert!(log.contains("held the order lock"), "demo said: {log}");
        log
    }
}

impl Drop for OthersDemo {
    fn drop(&mut self) {
        // Closing its stdin lets it exit; it is ours to reap.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Recording a running process of another user needs CAP_SYS_PTRACE, and the copy without it
/// says so (naming the pid and its owner) before recording anything; with it, `nobody` records
/// that process's known answer on complete stacks.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn another_users_process_needs_and_gets_ptrace() {
    let test = "another_users_process_needs_and_gets_ptrace";
    let Some(copy) = CapableCopy::new(test, "nobody", "cap_bpf,cap_perfmon") else {
        return;
    };
    let Some((daemon_uid, daemon_gid)) = user_ids("daemon") else {
        skip(test, "no user `daemon`");
        return;
    };
    let mut demo = OthersDemo::start(&copy.demo, daemon_uid, daemon_gid);
    let pid = demo.child.id().to_string();
    let lsp = copy.out.join("attach.lsp");
    let refused = copy
        .command()
        .args(["record", "-d", "1", "-o"])
        .arg(&lsp)
        .args(["-p", &pid])
        .output()
        .expect("run the copy");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "missing capabilities CAP_SYS_PTRACE (pid {pid}: reading the files it maps, through \
             /proc/PID/root, of a process of another user, uid {daemon_uid}"
        )) && stderr.contains("`setcap cap_bpf,cap_perfmon,cap_sys_ptrace=ep "),
        "{stderr}"
    );
    assert!(!lsp.exists(), "nothing recorded");

    let out = Command::new("setcap")
        .arg("cap_bpf,cap_perfmon,cap_sys_ptrace=ep")
        .arg(&copy.lockscope)
        .output()
        .expect("setcap");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut recorder = copy
        .command()
        .args(["record", "-o"])
        .arg(&lsp)
        .args(["-p", &pid])
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the copy");
    let mut stderr = BufReader::new(recorder.stderr.take().expect("stderr"));
    wait_until_recording(&mut stderr);
    let log = demo.run_workload();
    // SAFETY: kill sends SIGINT to our own child, which is alive (not yet waited for).
    unsafe { libc::kill(recorder.id() as libc::pid_t, libc::SIGINT) };
    let status = recorder.wait().expect("wait for the recorder");
    let rest = rest_of(stderr);
    assert!(status.success(), "record -p as nobody failed: {rest}");
    assert_private_to(&lsp, copy.uid);
    let profile = read_profile(&lsp).expect("read the profile");
    assert_known_answer_by_own_clocks(&profile, &log);
    drop(demo);
}
