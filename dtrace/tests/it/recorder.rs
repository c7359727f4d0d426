#![allow(clippy::unwrap_used)]
//! The recorder against a fake dtrace (tests/fake-dtrace, selected with LOCKSCOPE_DTRACE) that
//! replays recorded output and stderr: normal output, drops, refusals and early exits.

use lockscope_dtrace::recorder::dtrace_binary;
use lockscope_dtrace::{Error, Launcher, RecordOptions, Recorder, ScriptOptions, TargetOs};
use lockscope_probes::{AttachStatus, Target, WaitKind};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// A scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "lockscope-dtrace-test-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

struct Fake {
    stdout: Option<PathBuf>,
    stderr: Option<String>,
    exit: i32,
    wait_for_sigint: bool,
}

fn options(name: &str, os: TargetOs, target: Target, fake: Fake) -> (RecordOptions, PathBuf) {
    let dir = scratch(name);
    let mut options = RecordOptions::new(ScriptOptions::new(os), target);
    options.dtrace = dtrace_binary(Some(tests_dir().join("fake-dtrace").into()));
    let log = dir.join("log");
    options
        .env
        .push(("FAKE_DTRACE_LOG".into(), log.clone().into()));
    if let Some(stdout) = fake.stdout {
        options
            .env
            .push(("FAKE_DTRACE_STDOUT".into(), stdout.into()));
    }
    if let Some(stderr) = fake.stderr {
        let path = dir.join("stderr");
        std::fs::write(&path, stderr).expect("write stderr");
        options.env.push(("FAKE_DTRACE_STDERR".into(), path.into()));
    }
    options
        .env
        .push(("FAKE_DTRACE_EXIT".into(), fake.exit.to_string().into()));
    if fake.wait_for_sigint {
        options.env.push(("FAKE_DTRACE_WAIT".into(), "1".into()));
    }
    (options, log)
}

fn recorded() -> Option<PathBuf> {
    Some(tests_dir().join("data/macos-record.out"))
}

/// Attached by pid, stopped by the stop flag: dtrace gets SIGINT, prints its aggregations, and
/// the profile carries the decoded records.
#[test]
fn stop_flag_interrupts_and_output_is_parsed() {
    let fake = Fake {
        stdout: recorded(),
        stderr: None,
        exit: 0,
        wait_for_sigint: true,
    };
    let (options, log) = options("stop", TargetOs::MacOs, Target::pid(4242), fake);
    let stop = options.stop.clone();
    let recorder = Recorder::new(options).expect("recorder");
    assert!(recorder.script().contains("pid == $target"));
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
    });
    let recording = recorder.run().expect("recording");
    let profile = &recording.profile;
    assert_eq!(profile.metadata.end_reason, "interrupted (stop requested)");
    assert_eq!(profile.metadata.backend, "dtrace");
    assert_eq!(profile.metadata.os, "macos");
    assert_eq!(profile.metadata.target.pid, 4242);
    assert!(!profile.metadata.target.launched);
    assert!(recording.warnings.is_empty(), "{:?}", recording.warnings);
    let kinds: Vec<(WaitKind, &str)> = profile
        .waits
        .iter()
        .map(|w| (w.kind, w.operation.as_str()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (WaitKind::Mutex, "psynch_mutexwait"),
            (WaitKind::Condvar, "psynch_cvwait"),
            (WaitKind::Mutex, "ulock_wait2 UL_UNFAIR_LOCK"),
            (WaitKind::Join, "ulock_wait UL_COMPARE_AND_WAIT"),
            (WaitKind::Lifecycle, "lwp-create"),
        ]
    );
    let mutex = &profile.waits[0];
    assert_eq!(
        (mutex.pid, mutex.tid, mutex.object),
        (4242, 77001, 0x6000_00c0_4010)
    );
    assert_eq!(
        (mutex.stats.count, mutex.stats.total_ns, mutex.stats.max_ns),
        (3, 3_400_000, 1_400_000)
    );
    assert_eq!(mutex.stats.histogram.total_count(), 3);
    assert_eq!(
        mutex.stats.histogram.count_in_slot(21),
        2,
        "1048576 is slot 21"
    );
    let stack = profile.stack(mutex.user_stack).expect("user stack");
    assert_eq!(
        stack.frames[0].function.as_deref(),
        Some("libsystem_kernel.dylib`__psynch_mutexwait")
    );
    assert_eq!(stack.frames[0].function_offset, Some(0xa));
    assert_eq!(
        stack.frames[3].function.as_deref(),
        Some("myserver`Cache::lookup")
    );
    assert_eq!(profile.thread_name(4242, 77001), Some("myserver"));
    assert_eq!(profile.threads.len(), 4);
    assert_eq!(
        profile
            .metadata
            .probes
            .iter()
            .map(|p| p.probe.as_str())
            .collect::<Vec<_>>(),
        ["psynch", "ulock"]
    );
    profile.validate().expect("consistent");

    let log = std::fs::read_to_string(log).expect("fake dtrace log");
    let args: Vec<&str> = log.lines().take_while(|l| *l != "--- script").collect();
    assert_eq!(args[0..2], ["-q", "-s"]);
    assert_eq!(args[3..], ["-p", "4242"]);
    assert!(
        log.contains("#pragma D option ustackframes=100"),
        "the script reached dtrace"
    );
    assert!(
        log.ends_with("DYLD_LIBRARY_PATH=\n"),
        "no introspection library when attaching"
    );
}

/// A command launched by `dtrace -c` with a duration: SIGINT when it elapses; plockstat is
/// selected and the introspection libpthread is put on dtrace's DYLD_LIBRARY_PATH (all that
/// `dtrace -c` allows; SIP strips it on a real Mac, hence the recorder's own launcher).
#[test]
fn duration_ends_a_launched_command() {
    let fake = Fake {
        stdout: recorded(),
        stderr: None,
        exit: 0,
        wait_for_sigint: true,
    };
    let target = Target::Command(vec!["./myserver".into(), "--threads=4".into()]);
    let (mut options, log) = options("duration", TargetOs::MacOs, target, fake);
    options.script.duration = Some(Duration::from_millis(400));
    options.launcher = Launcher::Dtrace;
    let started = Instant::now();
    let recording = Recorder::new(options)
        .expect("recorder")
        .run()
        .expect("recording");
    assert!(started.elapsed() >= Duration::from_millis(400));
    let m = &recording.profile.metadata;
    assert_eq!(m.end_reason, "duration elapsed");
    assert!(m.target.launched);
    assert_eq!(m.target.command, ["./myserver", "--threads=4"]);
    assert!(m.probes.iter().any(|p| p.probe == "plockstat"));
    let log = std::fs::read_to_string(log).expect("log");
    assert!(log.starts_with("-q\n-s\n"));
    assert!(
        log.contains("\n-c\n./myserver --threads=4\n--- script\n"),
        "{log}"
    );
    assert!(log.contains("plockstat$target:::mutex-block"));
    assert!(log.contains("profile:::tick-400ms"));
    assert!(log.ends_with("DYLD_LIBRARY_PATH=/usr/lib/system/introspection\n"));
}

/// Drop reports become Losses and a warning; the target exiting ends the recording.
#[test]
fn drops_become_losses() {
    let stderr = "dtrace: pid 4242 has exited\n\
                  dtrace: 7 dynamic variable drops\n\
                  dtrace: 2 aggregation drops on CPU 1\n\
                  dtrace: 5 drops on CPU 0\n";
    let fake = Fake {
        stdout: recorded(),
        stderr: Some(stderr.into()),
        exit: 0,
        wait_for_sigint: false,
    };
    let (options, _) = options("drops", TargetOs::MacOs, Target::pid(4242), fake);
    let recording = Recorder::new(options)
        .expect("recorder")
        .run()
        .expect("recording");
    let m = &recording.profile.metadata;
    assert_eq!(m.end_reason, "target exited");
    assert_eq!(m.losses.map_full, 9);
    assert_eq!(m.losses.dropped, 5);
    assert_eq!(m.events, 3 + 1 + 2 + 1 + 4 + 14);
    assert!(
        recording
            .warnings
            .iter()
            .any(|w| w.contains("dynamic variable drops")),
        "{:?}",
        recording.warnings
    );
}

/// A dtrace that lingers after printing everything (DTrace for Linux takes seconds to exit
/// after END) is not waited for: the recording returns about a second after the done line,
/// with every record.
#[test]
fn lingering_dtrace_is_not_waited_for() {
    let fake = Fake {
        stdout: recorded(),
        stderr: None,
        exit: 0,
        wait_for_sigint: false,
    };
    let (mut options, _) = options("linger", TargetOs::MacOs, Target::pid(4242), fake);
    options.env.push(("FAKE_DTRACE_LINGER".into(), "20".into()));
    let started = std::time::Instant::now();
    let recording = Recorder::new(options)
        .expect("recorder")
        .run()
        .expect("recording");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "waited {:?}",
        started.elapsed()
    );
    assert!(recording.output.done);
    assert_eq!(recording.profile.metadata.end_reason, "target exited");
    assert!(!recording.profile.waits.is_empty());
}

/// On Linux the recorder never launches the command itself (SIGSTOP, then `dtrace -p`, crashed
/// DTrace for Linux): `dtrace -c` does, and asking for the recorder's launcher is refused.
#[test]
fn linux_launches_through_dtrace_c() {
    let fake = Fake {
        stdout: None,
        stderr: None,
        exit: 0,
        wait_for_sigint: false,
    };
    let target = Target::Command(vec!["true".into()]);
    let (options, _) = options("linux-launch", TargetOs::Linux, target, fake);
    let recorder = Recorder::new(options.clone()).expect("recorder");
    assert!(!recorder.launches_target());
    let args = recorder.arguments(std::path::Path::new("x.d"));
    assert!(args.iter().any(|a| a == "-c"), "{args:?}");
    let mut forced = options;
    forced.launcher = lockscope_dtrace::Launcher::Recorder;
    let err = Recorder::new(forced).expect_err("refused");
    assert!(err.to_string().contains("dtrace -c"), "{err}");
}

/// SIP refusing the attach is explained, with what still works.
#[test]
fn sip_refusal_is_explained() {
    let stderr = "dtrace: system integrity protection is on, some features will not be available\n\
                  dtrace: failed to grab pid 4242: Permission denied\n";
    let fake = Fake {
        stdout: None,
        stderr: Some(stderr.into()),
        exit: 1,
        wait_for_sigint: false,
    };
    let (options, _) = options("sip", TargetOs::MacOs, Target::pid(4242), fake);
    let err = Recorder::new(options)
        .expect("recorder")
        .run()
        .expect_err("refused");
    assert!(matches!(err, Error::SipRestricted { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("system integrity protection is on"),
        "{message}"
    );
    assert!(message.contains("still work"), "{message}");
    assert!(message.contains("failed to grab pid 4242"), "{message}");
}

/// dtrace failing early (no such process) reports its own message and exit status.
#[test]
fn early_exit_is_reported() {
    let stderr = "dtrace: failed to grab pid 4242: No such process\n";
    let fake = Fake {
        stdout: None,
        stderr: Some(stderr.into()),
        exit: 1,
        wait_for_sigint: false,
    };
    let (options, _) = options("early", TargetOs::FreeBsd, Target::pid(4242), fake);
    let err = Recorder::new(options)
        .expect("recorder")
        .run()
        .expect_err("failed");
    let Error::DtraceFailed { status, stderr } = &err else {
        panic!("{err:?}")
    };
    assert!(status.contains('1'), "{status}");
    assert_eq!(stderr, "failed to grab pid 4242: No such process");
}

/// Output that stops before lockscope's END clause completes is kept, with a warning.
#[test]
fn cut_output_warns() {
    let dir = scratch("cut");
    let full = std::fs::read_to_string(tests_dir().join("data/macos-record.out")).expect("read");
    let cut = &full[..full
        .find("=== lockscope record probe=ulock")
        .expect("ulock record")];
    let path = dir.join("cut.out");
    std::fs::write(&path, cut).expect("write");
    let fake = Fake {
        stdout: Some(path),
        stderr: None,
        exit: 0,
        wait_for_sigint: false,
    };
    let (options, _) = options("cut-run", TargetOs::MacOs, Target::pid(4242), fake);
    let recording = Recorder::new(options)
        .expect("recorder")
        .run()
        .expect("recording");
    assert_eq!(recording.profile.waits.len(), 2);
    assert!(
        recording.warnings.iter().any(|w| w.contains("partial")),
        "{:?}",
        recording.warnings
    );
}

/// Known refusals: plockstat without the introspection library, not root, restricted
/// entitlements.
#[test]
fn refusals_are_classified() {
    type IsExpected = fn(&Error) -> bool;
    let cases: [(&str, IsExpected, &str); 3] = [
        (
            "dtrace: failed to compile script /tmp/x.d: line 40: probe description plockstat4242:::mutex-block does not match any probes\n",
            |e| matches!(e, Error::ProbeNotFound { .. }),
            "DYLD_LIBRARY_PATH=/usr/lib/system/introspection",
        ),
        (
            "dtrace: failed to initialize dtrace: DTrace requires additional privileges\n",
            |e| matches!(e, Error::NotPrivileged { .. }),
            "root",
        ),
        (
            "dtrace: failed to grab pid 4242: cannot control executables signed with restricted entitlements\n",
            |e| matches!(e, Error::RestrictedEntitlements { .. }),
            "restricted entitlements",
        ),
    ];
    for (i, (stderr, is_expected, mentions)) in cases.into_iter().enumerate() {
        let fake = Fake {
            stdout: None,
            stderr: Some(stderr.into()),
            exit: 1,
            wait_for_sigint: false,
        };
        let (mut options, _) = options(
            &format!("refusal-{i}"),
            TargetOs::MacOs,
            Target::pid(4242),
            fake,
        );
        options.script.probes = vec!["psynch".into(), "plockstat".into()];
        let err = Recorder::new(options)
            .expect("recorder")
            .run()
            .expect_err("refused");
        assert!(is_expected(&err), "{err:?}");
        assert!(err.to_string().contains(mentions), "{err}");
    }
}

/// A command argument with a space cannot pass through `dtrace -c`: refused up front.
#[test]
fn command_with_spaces_is_refused() {
    let options = RecordOptions::new(
        ScriptOptions::new(TargetOs::Illumos),
        Target::Command(vec!["sh".into(), "-c".into(), "sleep 1".into()]),
    );
    assert!(matches!(
        Recorder::new(options),
        Err(Error::InvalidOption {
            option: "command",
            ..
        })
    ));
}

/// The pid after `-p` in the fake's log.
fn traced_pid(log: &str) -> u32 {
    let args: Vec<&str> = log.lines().take_while(|l| *l != "--- script").collect();
    let at = args
        .iter()
        .position(|a| *a == "-p")
        .expect("-p in the arguments");
    args[at + 1].parse().expect("pid")
}

/// True while `pid` exists (zombies included).
fn process_exists(pid: u32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run kill")
        .success()
}

/// On macOS with plockstat, the recorder launches the command itself: the command gets
/// DYLD_LIBRARY_PATH (dtrace does not: SIP would strip it), is stopped when dtrace starts
/// (`dtrace -Z -p PID`), runs once the BEGIN line is out, and its exit ends the recording.
#[test]
fn recorder_launches_the_command_stopped_with_the_introspection_library() {
    let dir = scratch("self-launch");
    let seen = dir.join("seen-by-command");
    let fake = Fake {
        stdout: recorded(),
        stderr: None,
        exit: 0,
        wait_for_sigint: false,
    };
    let target = Target::Command(vec![
        "sh".into(),
        "-c".into(),
        // The sleep outlasts the moment between its start and the recorder's SIGSTOP.
        format!(
            "sleep 0.2; echo \"$DYLD_LIBRARY_PATH\" > {}",
            seen.display()
        )
        .into(),
    ]);
    let (mut options, log) = options("self-launch-run", TargetOs::MacOs, target, fake);
    options.env.push(("FAKE_DTRACE_BEGIN".into(), "1".into()));
    options.env.push(("FAKE_DTRACE_FOLLOW".into(), "1".into()));
    let recorder = Recorder::new(options).expect("an argument with spaces is fine here");
    assert!(
        recorder.launches_target(),
        "plockstat on macOS: the recorder launches"
    );
    let recording = recorder.run().expect("recording");

    let log = std::fs::read_to_string(log).expect("log");
    let args: Vec<&str> = log.lines().take_while(|l| *l != "--- script").collect();
    assert_eq!(args[..2], ["-q", "-Z"], "{log}");
    let pid = traced_pid(&log);
    assert!(
        log.contains("\nTARGET_STATE=T\n"),
        "the command is stopped while dtrace attaches: {log}"
    );
    assert!(log.ends_with("DYLD_LIBRARY_PATH=\n"), "not given to dtrace");
    let seen = std::fs::read_to_string(&seen).expect("the command ran after the BEGIN line");
    assert_eq!(seen.trim(), "/usr/lib/system/introspection");
    assert!(!process_exists(pid), "the command was reaped");

    let m = &recording.profile.metadata;
    assert_eq!(m.end_reason, "target exited");
    assert!(m.target.launched);
    assert_eq!(m.target.command[0], "sh");
    assert_eq!(m.target.pid, pid, "the pid the recorder launched");
    assert!(m
        .probes
        .iter()
        .all(|p| matches!(p.status, AttachStatus::Attached)));
    assert_eq!(recording.profile.waits.len(), 5, "the output was parsed");
}

/// When dtrace refuses before attaching, the stopped command is killed and reaped, never left
/// behind.
#[test]
fn refused_dtrace_leaves_no_stopped_command() {
    let fake = Fake {
        stdout: None,
        stderr: Some(
            "dtrace: failed to initialize dtrace: DTrace requires additional privileges\n".into(),
        ),
        exit: 1,
        wait_for_sigint: false,
    };
    let target = Target::Command(vec!["sleep".into(), "30".into()]);
    let (mut options, log) = options("self-launch-refused", TargetOs::FreeBsd, target, fake);
    options.launcher = Launcher::Recorder;
    let started = Instant::now();
    let err = Recorder::new(options)
        .expect("recorder")
        .run()
        .expect_err("refused");
    assert!(matches!(err, Error::NotPrivileged { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "sleep 30 was not waited for"
    );
    let pid = traced_pid(&std::fs::read_to_string(log).expect("log"));
    assert!(!process_exists(pid), "command {pid} is gone");
}

/// A command the recorder cannot start is reported by name.
#[test]
fn missing_command_is_reported() {
    let mut options = RecordOptions::new(
        ScriptOptions::new(TargetOs::Illumos),
        Target::Command(vec!["/nonexistent/lockscope-test-command".into()]),
    );
    options.launcher = Launcher::Recorder;
    let err = Recorder::new(options)
        .expect("recorder")
        .run()
        .expect_err("no such command");
    assert!(matches!(err, Error::Launch { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "failed to launch `/nonexistent/lockscope-test-command`"
    );
}

/// A probe whose description matches nothing is left out: dtrace runs again without it, the
/// profile records it as failed with dtrace's message and the hint, and a warning says so.
#[test]
fn unmatched_probe_is_recorded_as_failed() {
    let fake = Fake {
        stdout: recorded(),
        stderr: None,
        exit: 0,
        wait_for_sigint: false,
    };
    let (mut options, log) = options("unmatched", TargetOs::MacOs, Target::pid(4242), fake);
    options.script.probes = vec!["psynch".into(), "plockstat".into()];
    options
        .env
        .push(("FAKE_DTRACE_REFUSE_IF".into(), "plockstat$target".into()));
    options.env.push((
        "FAKE_DTRACE_REFUSE_STDERR".into(),
        "dtrace: failed to compile script /tmp/x.d: line 40: probe description \
         plockstat4242:::mutex-block does not match any probes"
            .into(),
    ));
    let recording = Recorder::new(options)
        .expect("recorder")
        .run()
        .expect("recorded without plockstat");
    let probes = &recording.profile.metadata.probes;
    assert_eq!(probes.len(), 2);
    assert_eq!(probes[0].probe, "psynch");
    assert_eq!(probes[0].status, AttachStatus::Attached);
    assert_eq!(probes[1].probe, "plockstat");
    let AttachStatus::Failed { reason } = &probes[1].status else {
        panic!("{:?}", probes[1])
    };
    assert!(reason.contains("does not match any probes"), "{reason}");
    assert!(reason.contains("DYLD_LIBRARY_PATH"), "{reason}");
    assert!(
        recording
            .warnings
            .iter()
            .any(|w| w.starts_with("probe `plockstat` left out")),
        "{:?}",
        recording.warnings
    );
    let log = std::fs::read_to_string(log).expect("log");
    assert!(
        !log.contains("plockstat$target"),
        "the last run is without it"
    );
}

/// DTrace for Linux's "Failed to enable probe" before BEGIN (another dtrace removing the uprobes
/// they share as it ends) runs the same script again: the recording succeeds with a warning;
/// when the failure lasts, the error is dtrace's, after the retries.
#[test]
fn probes_that_fail_to_enable_are_enabled_again() {
    const REFUSAL: &str = "dtrace: could not enable tracing: Failed to enable probe";
    let fake = || Fake {
        stdout: recorded(),
        stderr: None,
        exit: 0,
        wait_for_sigint: false,
    };
    let (mut opts, _) = options("enable-once", TargetOs::MacOs, Target::pid(4242), fake());
    let marker = scratch("enable-once").join("refused");
    let _ = std::fs::remove_file(&marker);
    opts.env
        .push(("FAKE_DTRACE_REFUSE_ONCE".into(), marker.into()));
    opts.env
        .push(("FAKE_DTRACE_REFUSE_STDERR".into(), REFUSAL.into()));
    let recording = Recorder::new(opts)
        .expect("recorder")
        .run()
        .expect("recorded on the second run");
    assert!(!recording.profile.waits.is_empty());
    assert!(
        recording
            .warnings
            .iter()
            .any(|w| w.contains("could not enable its probes") && w.contains("ran it again")),
        "{:?}",
        recording.warnings
    );

    let (mut opts, _) = options("enable-never", TargetOs::MacOs, Target::pid(4242), fake());
    opts.env
        .push(("FAKE_DTRACE_REFUSE_IF".into(), "BEGIN".into()));
    opts.env
        .push(("FAKE_DTRACE_REFUSE_STDERR".into(), REFUSAL.into()));
    let err = Recorder::new(opts)
        .expect("recorder")
        .run()
        .expect_err("the failure lasts");
    assert!(err.to_string().contains("Failed to enable probe"), "{err}");
}

/// Metadata names the host that ran dtrace, as uname does.
#[test]
fn metadata_names_the_host() {
    let fake = Fake {
        stdout: recorded(),
        stderr: None,
        exit: 0,
        wait_for_sigint: false,
    };
    let (options, _) = options("host", TargetOs::MacOs, Target::pid(4242), fake);
    let recording = Recorder::new(options)
        .expect("recorder")
        .run()
        .expect("recording");
    let uname = |flag: &str| {
        let out = Command::new("uname").arg(flag).output().expect("uname");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_string()
    };
    let m = &recording.profile.metadata;
    assert_eq!(m.hostname, uname("-n"));
    assert_eq!(m.kernel_release, uname("-r"));
    assert!(m.cpu_count > 0);
    // This host is not macOS, so the target's libc is not known here.
    assert_eq!(m.libc, None);
}

/// A command that exits at once (maybe before the recorder's SIGSTOP lands) ends the recording
/// cleanly: it is never signalled after it was reaped.
#[test]
fn command_exiting_at_once_ends_the_recording() {
    for i in 0..3 {
        let fake = Fake {
            stdout: recorded(),
            stderr: None,
            exit: 0,
            wait_for_sigint: false,
        };
        let target = Target::Command(vec!["true".into()]);
        let (mut options, _) = options(&format!("at-once-{i}"), TargetOs::Illumos, target, fake);
        options.launcher = Launcher::Recorder;
        options.env.push(("FAKE_DTRACE_BEGIN".into(), "1".into()));
        options.env.push(("FAKE_DTRACE_FOLLOW".into(), "1".into()));
        let recording = Recorder::new(options)
            .expect("recorder")
            .run()
            .expect("recording");
        assert_eq!(recording.profile.metadata.end_reason, "target exited");
    }
}

/// A launched command still running when the duration elapses is terminated and reaped.
#[test]
fn duration_terminates_a_command_the_recorder_launched() {
    let fake = Fake {
        stdout: recorded(),
        stderr: None,
        exit: 0,
        wait_for_sigint: true,
    };
    let target = Target::Command(vec!["sleep".into(), "30".into()]);
    let (mut options, log) = options("self-launch-duration", TargetOs::FreeBsd, target, fake);
    options.launcher = Launcher::Recorder;
    options.script.duration = Some(Duration::from_millis(300));
    options.env.push(("FAKE_DTRACE_BEGIN".into(), "1".into()));
    let started = Instant::now();
    let recording = Recorder::new(options)
        .expect("recorder")
        .run()
        .expect("recording");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "sleep 30 was ended"
    );
    assert_eq!(recording.profile.metadata.end_reason, "duration elapsed");
    let pid = traced_pid(&std::fs::read_to_string(log).expect("log"));
    assert!(!process_exists(pid), "command {pid} is gone");
}
