//! The DTrace backend's test helpers, for its own tests and the profiler's `record --backend
//! dtrace` tests alike: its golden scripts, the real-output fixtures, a reference
//! `stackcollapse.pl`, profiles folded as the profiler folds them, and the real dtrace to run.

use crate::workspace_root;
use lockscope_probes::Profile;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The golden D scripts (`dtrace/tests/golden`).
pub fn golden_dir() -> PathBuf {
    workspace_root().join("dtrace/tests/golden")
}

/// Compares `actual` with the golden file `NAME` of [`golden_dir`], or rewrites the file when
/// `LOCKSCOPE_BLESS=1` (then review the diff).
pub fn check_golden(name: &str, actual: &str) {
    crate::golden::check(&golden_dir().join(name), actual);
}

/// The shared real-output fixtures (`shared/fixtures/dtrace` beside the repository), or `None`
/// after printing why the caller skips.
pub fn fixtures_dir() -> Option<PathBuf> {
    let dir = workspace_root().join("../shared/fixtures/dtrace");
    if dir.join("SOURCES.md").is_file() {
        Some(dir)
    } else {
        println!("skipped: DTrace fixtures not found at {}", dir.display());
        eprintln!("skipped: DTrace fixtures not found at {}", dir.display());
        None
    }
}

/// Every fixture file (not SOURCES.md), sorted.
pub fn fixture_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for sub in std::fs::read_dir(dir).expect("fixtures dir") {
        let sub = sub.expect("entry").path();
        if sub.is_dir() {
            for f in std::fs::read_dir(&sub).expect("subdir") {
                files.push(f.expect("entry").path());
            }
        }
    }
    files.sort();
    files
}

/// An independent implementation of Brendan Gregg's stackcollapse.pl, from its documented
/// rules: skip the first 3 lines; a line of only digits ends a stack with that count; blank
/// lines are skipped; a frame line loses its leading white space, then everything from its last
/// `+` on, then C++ arguments (from the last `(` or `<` after the first `::`); an empty frame
/// is `-`; frames are prepended (root first); stacks are joined with `;`, counts summed, lines
/// sorted bytewise as `stack count`.
pub fn stackcollapse(input: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(input);
    let mut collapsed: BTreeMap<String, u64> = BTreeMap::new();
    let mut stack: Vec<String> = Vec::new();
    for (nr, line) in text.split_inclusive('\n').enumerate() {
        if nr < 3 {
            continue;
        }
        let line = line.strip_suffix('\n').unwrap_or(line);
        let trimmed = line.trim_start();
        if !trimmed.is_empty() && trimmed.chars().all(|c| c.is_ascii_digit()) {
            let count: u64 = trimmed.parse().expect("count");
            *collapsed.entry(stack.join(";")).or_default() += count;
            stack.clear();
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let mut frame = trimmed.to_string();
        if let Some(plus) = frame.rfind('+') {
            frame.truncate(plus);
        }
        if let Some(first) = frame.find("::") {
            if let Some(cut) = frame[first + 2..].rfind(['(', '<']) {
                frame.truncate(first + 2 + cut);
            }
        }
        if frame.is_empty() {
            frame = "-".to_string();
        }
        stack.insert(0, frame);
    }
    collapsed
        .into_iter()
        .map(|(stack, count)| format!("{stack} {count}"))
        .collect()
}

/// Folds a profile the way the profiler's folded writer does: per record, the user stack root
/// first, then the kernel stack root first, each frame as `Frame::names_outermost_first`;
/// joined with `;`, counts summed, sorted.
pub fn fold_profile(profile: &Profile) -> Vec<String> {
    let mut collapsed: BTreeMap<String, u64> = BTreeMap::new();
    for wait in &profile.waits {
        let mut names = Vec::new();
        for id in [wait.user_stack, wait.kernel_stack] {
            if let Some(stack) = profile.stack(id) {
                for frame in stack.frames.iter().rev() {
                    names.extend(frame.names_outermost_first());
                }
            }
        }
        *collapsed.entry(names.join(";")).or_default() += wait.stats.count;
    }
    collapsed
        .into_iter()
        .map(|(stack, count)| format!("{stack} {count}"))
        .collect()
}

/// The real dtrace named by LOCKSCOPE_DTRACE (Oracle's DTrace for Linux, built by `.ci/dtrace`),
/// when this test can run it as root. Otherwise prints `skipped: <test>: <why>` and returns
/// `None`, or fails when CI=true or LOCKSCOPE_REQUIRE_BPF is set (there a skip would hide a
/// broken suite).
pub fn real_dtrace(test: &str) -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let dtrace = std::env::var_os("LOCKSCOPE_DTRACE").map(PathBuf::from);
    let why = match &dtrace {
        None => Some("LOCKSCOPE_DTRACE is not set (build one with .ci/dtrace)".to_string()),
        Some(path) if !path.is_file() => {
            Some(format!("LOCKSCOPE_DTRACE={}: no such file", path.display()))
        }
        Some(path) if path.ends_with("fake-dtrace") => {
            Some("LOCKSCOPE_DTRACE is the fake dtrace".to_string())
        }
        Some(_) if euid != 0 => Some(format!("needs root, running as uid {euid}")),
        Some(_) => None,
    };
    match why {
        None => dtrace,
        Some(why) => {
            let required = std::env::var("CI").is_ok_and(|v| v == "true")
                || std::env::var_os("LOCKSCOPE_REQUIRE_BPF").is_some();
            assert!(
                !required,
                "{test} cannot run: {why} (CI=true or LOCKSCOPE_REQUIRE_BPF is set)"
            );
            eprintln!("skipped: {test}: {why}");
            None
        }
    }
}
