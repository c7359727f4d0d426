//! Re-running a test binary as one of its own tests, alone: how the tests that need another
//! process (a program to record, a process to attach to) start one with code of their own. The
//! program is an ignored test (`helper_...`, which `.ci/run` skips) that does its work only when
//! run this way. Used by the test binaries that do it (`ebpf/tests/it`, `profiler/tests/it`).
//!
//! A test's name to the harness is its module path in the binary and its own name
//! (`probes::offcpu::helper_sleeps`); callers give the own name, unique in the binary.

use std::ffi::OsString;
use std::process::Command;

/// argv that re-runs this test binary as its ignored test named `name` (its own name, without
/// the module path), alone, its output not captured.
pub fn argv(name: &str) -> Vec<OsString> {
    let exe = std::env::current_exe().expect("current_exe");
    vec![
        exe.into(),
        full_name(name).into(),
        "--exact".into(),
        "--ignored".into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ]
}

/// True when this process was started by [`argv`] to run test `name`.
pub fn is_run_as(name: &str) -> bool {
    let qualified = format!("::{name}");
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == name || a.ends_with(&qualified)) && args.iter().any(|a| a == "--exact")
}

/// The harness's name of this binary's test named `name`, its module path included: the one test
/// the binary lists under that name (the test fails unless there is exactly one).
pub fn full_name(name: &str) -> String {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(&exe)
        .args(["--list", "--format", "terse", name])
        .output()
        .expect("list the test binary's tests");
    assert!(out.status.success(), "{} --list: {out:?}", exe.display());
    let qualified = format!("::{name}");
    let found: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .filter(|test| *test == name || test.ends_with(&qualified))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "tests named {name} in {}: {found:?}",
        exe.display()
    );
    found.into_iter().next().unwrap_or_default()
}

/// Every `helper_...` test of this binary is found by its own name (no two modules have one of
/// the same name), and so is this test, under this module's path.
#[test]
fn helpers_are_found_by_their_own_names() {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(&exe)
        .args(["--list", "--format", "terse"])
        .output()
        .expect("list the test binary's tests");
    assert!(out.status.success(), "{} --list: {out:?}", exe.display());
    let listed = String::from_utf8_lossy(&out.stdout);
    for test in listed
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
    {
        let own = test.rsplit("::").next().unwrap_or(test);
        if own.starts_with("helper_") {
            assert_eq!(full_name(own), test);
        }
    }
    // module_path!() starts with the crate's name, which the harness leaves out.
    let module = module_path!().split_once("::").map_or("", |(_, path)| path);
    let own = "helpers_are_found_by_their_own_names";
    assert_eq!(full_name(own), format!("{module}::{own}"));
}
