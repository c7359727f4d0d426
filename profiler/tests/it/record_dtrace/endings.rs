//! The ways a recording by a real dtrace ends: SIGINT to a background job, a killed dtrace, a
//! Ctrl-C at the terminal.

use super::*;

/// A recording from a background job (SIGINT ignored, as a non-interactive shell starts one)
/// still ends on SIGINT with a complete profile: dtrace gets its SIGINT back.
#[test]
fn live_sigint_from_a_background_job() {
    let Some(live) = Live::start("live_sigint_from_a_background_job") else {
        return;
    };
    let lsp = live.profile("bg.lsp");
    let (mut recorder, _rest) = live.record_sleep(&lsp, |cmd| {
        use std::os::unix::process::CommandExt;
        // SAFETY: signal is async-signal-safe; it only changes this child's disposition.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
    });
    let interrupted = Instant::now();
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe { libc::kill(recorder.0.id() as libc::pid_t, libc::SIGINT) };
    let status = recorder.0.wait().expect("wait for lockscope");
    assert!(status.success());
    assert!(
        interrupted.elapsed() < Duration::from_secs(10),
        "{:?}",
        interrupted.elapsed()
    );
    assert_interrupted(&read(&lsp));
}

/// A dtrace killed while recording leaves a profile that says it is partial.
#[test]
fn live_killed_dtrace_leaves_a_partial_profile() {
    let Some(live) = Live::start("live_killed_dtrace_leaves_a_partial_profile") else {
        return;
    };
    let lsp = live.profile("killed.lsp");
    let (mut recorder, rest) = live.record_sleep(&lsp, |_| {});
    let lockscope_pid = recorder.0.id();
    let dtrace_pid = std::fs::read_dir(format!("/proc/{lockscope_pid}/task"))
        .expect("lockscope's tasks")
        .flatten()
        .find_map(|t| {
            let children = std::fs::read_to_string(t.path().join("children")).ok()?;
            children.split_whitespace().next()?.parse::<i32>().ok()
        })
        .expect("dtrace is lockscope's child");
    // SAFETY: kill has no memory preconditions; the pid is dtrace, lockscope's child.
    unsafe { libc::kill(dtrace_pid, libc::SIGKILL) };
    let stderr = wait_success(&mut recorder, rest);
    assert!(
        stderr.iter().any(|l| l.contains("profile is partial")),
        "{stderr:?}"
    );
    let profile = read(&lsp);
    end_target(profile.metadata.target.pid);
    assert!(
        profile.metadata.end_reason.starts_with("dtrace killed"),
        "{}",
        profile.metadata.end_reason
    );
}

/// A Ctrl-C at the terminal (SIGINT to lockscope's whole process group) ends the recording with
/// dtrace's END output: dtrace, in its own process group, gets one SIGINT (two would make it
/// exit without printing).
#[test]
fn live_ctrl_c_at_the_terminal() {
    let Some(live) = Live::start("live_ctrl_c_at_the_terminal") else {
        return;
    };
    let lsp = live.profile("ctrl-c.lsp");
    let (mut recorder, rest) = live.record_sleep(&lsp, |cmd| {
        use std::os::unix::process::CommandExt;
        // Its own process group, standing in for the terminal's foreground group.
        cmd.process_group(0);
    });
    // SAFETY: kill has no memory preconditions; the group is the one lockscope leads.
    unsafe { libc::kill(-(recorder.0.id() as libc::pid_t), libc::SIGINT) };
    let stderr = wait_success(&mut recorder, rest);
    assert!(
        !stderr.iter().any(|l| l.contains("before printing")),
        "dtrace did not print its aggregations: {stderr:?}"
    );
    assert_interrupted(&read(&lsp));
}
