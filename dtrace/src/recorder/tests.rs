//! Unit tests of the recorder: stderr classification, probes named by dtrace's messages,
//! verifier rejections, tracing stops, the C library and the dtrace binary.

use super::diagnose::verifier_error;
#[cfg(target_os = "linux")]
use super::process::held_stopped;
use super::*;

/// A process whose every thread sits in a tracing stop of this process's is held stopped by
/// it, by no other process, and a running one is not.
#[cfg(target_os = "linux")]
#[test]
fn a_target_in_a_tracing_stop_is_held() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    let pid = child.id();
    let own = std::process::id();
    assert!(!held_stopped(pid, own), "running");
    // SAFETY: ptrace and waitpid on our own child, with no pointers passed.
    let attached = unsafe {
        libc::ptrace(libc::PTRACE_ATTACH, pid as libc::pid_t, 0, 0) == 0
            && libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) == pid as i32
    };
    if !attached {
        let _ = child.kill();
        let _ = child.wait();
        eprintln!("skipped: a_target_in_a_tracing_stop_is_held: ptrace is not permitted");
        return;
    }
    let held = held_stopped(pid, own);
    let held_by_init = held_stopped(pid, 1);
    let _ = child.kill();
    let _ = child.wait();
    assert!(held, "in a tracing stop of ours");
    assert!(!held_by_init, "not init's tracing stop");
}

/// Drop reports and known refusals are classified; other lines stay errors.
#[test]
fn stderr_is_classified() {
    let lines: Vec<String> = [
        "dtrace: 12 dynamic variable drops with non-empty dirty list",
        "dtrace: 5 aggregation drops on CPU 0",
        "dtrace: 3 drops on CPU 1",
        "dtrace: error on enabled probe ID 4 (ID 881: syscall::ulock_wait:return): \
         invalid address (0x0) in action #3",
        "dtrace: system integrity protection is on, some features will not be available",
        "dtrace: pid 4242 has exited",
        "dtrace: something else",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let d = diagnose(&lines);
    assert_eq!(d.losses.map_full, 17);
    assert_eq!(d.losses.dropped, 4);
    assert!(d.sip);
    assert!(d.target_exited);
    assert_eq!(d.errors, vec!["something else".to_string()]);
}

/// "does not match any probes" messages name the catalog probe whose hook they quote.
#[test]
fn unmatched_descriptions_name_their_probe() {
    let find = |name: &str| crate::catalog::find(name).expect("catalog probe");
    let mac = [find("psynch"), find("plockstat"), find("mutex-hold")];
    let probe = |os, probes: &[&'static DtraceProbe], message: &str| {
        probe_of_message(os, probes, message).map(|p| p.name)
    };
    let message = |description: &str| {
        format!(
            "failed to compile script /tmp/x.d: line 40: probe description {description} \
             does not match any probes"
        )
    };
    let os = TargetOs::MacOs;
    assert_eq!(
        probe(os, &mac, &message("plockstat4242:::mutex-block")),
        Some("plockstat")
    );
    assert_eq!(
        probe(os, &mac, &message("plockstat4242:::mutex-acquire")),
        Some("mutex-hold")
    );
    assert_eq!(
        probe(os, &mac, &message("syscall::psynch_cvwait:entry")),
        Some("psynch")
    );
    assert_eq!(probe(os, &mac, &message("syscall::read:entry")), None);
    assert_eq!(probe(os, &mac, "something else"), None);
    let bsd = [find("umtx"), find("klock")];
    assert_eq!(
        probe(TargetOs::FreeBsd, &bsd, &message("lockstat:::sx-block")),
        Some("klock")
    );
}

/// A verifier rejection (thousands of `BPF:` lines ending in the reason) is one error that
/// quotes the reason and points to the saved log, not a privileges complaint.
#[test]
fn verifier_rejection_is_one_error() {
    let mut lines = vec!["dtrace: could not enable tracing: BPF program load for \
         'syscall:vmlinux:futex:return' failed: Permission denied"
        .to_string()];
    lines.extend((0..3000).map(|i| format!("BPF: {i}: (85) call bpf_map_lookup_elem#1")));
    lines.push("BPF: R1 type=scalar expected=map_ptr".to_string());
    lines.push("BPF: processed 3001 insns (limit 1000000)".to_string());
    let d = diagnose(&lines);
    assert_eq!(d.privileges, None);
    assert_eq!(d.verifier_log.len(), 3002);
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let message = d.bpf_load_failed.clone().expect("load failure seen");
    let error = verifier_error(&message, &lines, &d);
    let text = error.to_string();
    assert!(text.contains("R1 type=scalar expected=map_ptr"), "{text}");
    assert!(text.contains("'syscall:vmlinux:futex:return'"), "{text}");
    assert!(text.contains("(3002 lines)"), "{text}");
    assert!(!text.contains('\n'), "{text}");
    let Error::VerifierRejected { log: Some(log), .. } = error else {
        panic!("not a saved verifier rejection: {text}");
    };
    let saved = std::fs::read_to_string(&log).expect("log saved");
    assert_eq!(saved.lines().count(), lines.len());
    let _ = std::fs::remove_file(log);
}

/// The C library is named only on the OS it belongs to.
#[test]
fn libc_is_named_on_its_own_os() {
    assert_eq!(
        libc_description(TargetOs::FreeBsd, Some(TargetOs::FreeBsd), "14.1-RELEASE"),
        Some("FreeBSD libc 14.1-RELEASE".to_string())
    );
    assert_eq!(
        libc_description(TargetOs::MacOs, Some(TargetOs::MacOs), "24.1.0"),
        Some("libSystem (Darwin 24.1.0)".to_string())
    );
    assert_eq!(libc_description(TargetOs::MacOs, None, "6.18.0"), None);
    assert_eq!(
        libc_description(TargetOs::Illumos, Some(TargetOs::MacOs), "24.1.0"),
        None
    );
}

/// LOCKSCOPE_DTRACE overrides the binary; unset or empty means `dtrace` from PATH.
#[test]
fn binary_override() {
    assert_eq!(dtrace_binary(None), PathBuf::from("dtrace"));
    assert_eq!(dtrace_binary(Some("".into())), PathBuf::from("dtrace"));
    assert_eq!(
        dtrace_binary(Some("/opt/dtrace".into())),
        PathBuf::from("/opt/dtrace")
    );
}
