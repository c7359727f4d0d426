//! Every golden D script compiles under a real D compiler: `dtrace -e -Z -s SCRIPT -p PID` with
//! Oracle's DTrace for Linux (LOCKSCOPE_DTRACE, as root). `-e` compiles and exits without
//! enabling anything; `-Z` accepts descriptions that match no probe here (macOS's psynch
//! syscalls, illumos' lockstat), so what is checked is the D: syntax, the built-in variables
//! and functions, the types of `args[]` and `curthread`, the aggregations and `printa` formats.
//! `-p` names a live process (a `sleep` the test starts) because the scripts use `$target`.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Scripts that cannot compile on Linux, with what the compiler says and why.
const CANNOT_COMPILE_HERE: &[(&str, &str, &str)] = &[
    (
        "freebsd-all-command.d",
        "td_wmesg is not a member of struct task_struct",
        "FreeBSD's offcpu probe reads curthread->td_wmesg, a member of FreeBSD's struct thread; \
         on Linux curthread is a task_struct (the D is otherwise the same as \
         freebsd-defaults-pid.d, which compiles)",
    ),
    (
        "freebsd-defaults-pids.d",
        "translator does not define conversion for member: p_pid",
        "FreeBSD's proc:::create passes the child as its `struct proc` (whose pid is p_pid); \
         Linux's passes a psinfo_t (pr_pid), as linux-defaults-pids.d uses",
    ),
];

/// Each golden script (macOS, FreeBSD, illumos, Linux; defaults by pid and by a pid set, every
/// probe for a command) compiles with a real dtrace, except those listed with their reason,
/// which fail exactly as listed; the Linux ones also without `-Z` (every description matches a
/// probe).
#[test]
fn golden_scripts_compile_under_a_real_dtrace() {
    let Some(dtrace) = common::real_dtrace("golden_scripts_compile_under_a_real_dtrace") else {
        return;
    };
    let golden = common::golden_dir();
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(&golden)
        .expect("tests/golden")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "d"))
        .collect();
    scripts.sort();
    assert_eq!(scripts.len(), 12, "4 OSes × 3 scripts: {scripts:?}");
    let mut target = Command::new("sleep")
        .arg("60")
        .stdout(Stdio::null())
        .spawn()
        .expect("start sleep");
    let mut failures = Vec::new();
    for script in &scripts {
        let name = script
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let out = Command::new(&dtrace)
            .args(["-e", "-Z", "-s"])
            .arg(script)
            .args(["-p", &target.id().to_string()])
            .output()
            .expect("run dtrace");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        match CANNOT_COMPILE_HERE.iter().find(|(n, _, _)| *n == name) {
            Some((_, expected, why)) if out.status.success() || !stderr.contains(expected) => {
                failures.push(format!(
                    "{name} was listed as failing with `{expected}` ({why}), but: {} {stderr}",
                    out.status
                ));
            }
            Some(_) => {}
            None if !out.status.success() => {
                failures.push(format!("{name}: {} {stderr}", out.status));
            }
            None => {}
        }
        // The Linux scripts are for this dtrace: every description must match a probe here.
        if name.starts_with("linux-") {
            let out = Command::new(&dtrace)
                .args(["-e", "-s"])
                .arg(script)
                .args(["-p", &target.id().to_string()])
                .output()
                .expect("run dtrace");
            if !out.status.success() {
                failures.push(format!(
                    "{name} without -Z: {} {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    let _ = target.kill();
    let _ = target.wait();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
