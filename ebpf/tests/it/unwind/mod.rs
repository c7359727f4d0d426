//! User stacks through code built without frame pointers (issue "complete user stacks"): real
//! programs with known call chains (`tests/data/chains.c`, compiled here with
//! `cc -O2 -fomit-frame-pointer -pthread`, and the `rust_chains` example) are recorded by pid, and
//! each chain's wait time must be on complete stacks that name, in order, the thread entry, the
//! chain's functions, the pthread (or std) function and the libc wait frame. Here the chains and
//! the kinds of program they run in; `perf` compares the functions on the stacks with perf's DWARF
//! unwinding, and `tables` checks the unwinder's tables: built in the background, cached, pending,
//! and freed when an exec or an exit leaves no process mapping them.
//!
//! These tests need root and a BPF-capable kernel, and a C compiler; elsewhere they print
//! "skipped: <why>" and return. A chain's waits are told apart by futex word (the programs print
//! the address range of each lock), not by stack, so a wrong stack cannot hide a wait.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{require_bpf, SERIAL};
use lockscope_ebpf::{RecordOptions, Recorder, UnwindOptions, UnwindStats};
use lockscope_probes::{Profile, Target};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

mod perf;
mod tables;

const CHAINS_C: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/chains.c");
const SIGNAL_C: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/signal.c");
const PLUGIN_C: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/plugin.c");
/// Share of each chain's wait time that must be on its complete, ordered stack.
const REQUIRED_SHARE: f64 = 0.99;

/// Why these tests cannot run here: no BPF (see [`common::bpf_skip_reason`]) or no C compiler.
fn skip_reason() -> Option<String> {
    common::bpf_skip_reason().or_else(|| {
        Command::new("cc")
            .arg("--version")
            .output()
            .is_err()
            .then(|| "no C compiler (`cc`)".to_string())
    })
}

/// Compiles `source` with the flags of a distribution build without frame pointers.
fn compile(source: &str, output: &Path, extra: &[&str]) {
    let status = Command::new("cc")
        .args(["-O2", "-g", "-fomit-frame-pointer", "-pthread", "-o"])
        .arg(output)
        .arg(source)
        .args(extra)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc {source} failed");
}

/// A started workload, held before its threads start.
struct Workload {
    child: Child,
    /// The workload's pid (it may run under a wrapper, like `perf record`).
    pid: u32,
    stdout: BufReader<ChildStdout>,
    /// Lock name → futex word range.
    locks: Vec<(String, u64, u64)>,
}

impl Workload {
    fn start(command: &mut Command) -> Workload {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start workload");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).expect("locks line");
        let fields = line
            .trim()
            .strip_prefix("locks ")
            .unwrap_or_else(|| panic!("workload said: {line}"));
        let pid = fields
            .split(' ')
            .find_map(|f| f.strip_prefix("pid="))
            .map_or(child.id(), |p| p.parse().unwrap());
        let locks = fields
            .split(' ')
            .filter(|f| f.contains('+'))
            .map(|lock| {
                let (name, range) = lock.split_once('=').unwrap();
                let (address, size) = range.split_once('+').unwrap();
                let start = u64::from_str_radix(address.trim_start_matches("0x"), 16).unwrap();
                (name.to_owned(), start, start + size.parse::<u64>().unwrap())
            })
            .collect();
        Workload {
            child,
            pid,
            stdout,
            locks,
        }
    }

    fn pid(&self) -> u32 {
        self.pid
    }

    fn lock(&self, name: &str) -> (u64, u64) {
        let (_, start, end) = self.locks.iter().find(|(n, _, _)| n == name).unwrap();
        (*start, *end)
    }

    /// Attaches a recorder, lets the workload run to its end, then records a little longer (so
    /// the stacks are symbolized after the process exited) and returns the profile.
    fn record(self) -> (Profile, Workload, UnwindStats) {
        self.record_with(UnwindOptions::default())
    }

    /// [`Workload::record`] with these unwinding options.
    fn record_with(mut self, unwind: UnwindOptions) -> (Profile, Workload, UnwindStats) {
        let mut options = RecordOptions::new(Target::pid(self.pid()));
        options.unwind = unwind;
        let mut recorder = Recorder::start(options).expect("start recorder");
        self.child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(b"go\n")
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let status = recorder.poll().expect("poll");
            if status.target_exited || Instant::now() > deadline {
                break;
            }
        }
        let exit = self.child.wait().expect("wait workload");
        assert!(exit.success(), "workload failed: {exit}");
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut self.stdout, &mut rest);
        assert!(rest.contains("done"), "workload said: {rest}");
        // The process is gone (reaped) before the recording ends: names must still resolve.
        std::thread::sleep(Duration::from_millis(100));
        let stats = recorder
            .unwind_stats()
            .expect("unwind stats")
            .expect("futex probe unwinds");
        eprintln!("{stats:?}");
        assert!(stats.complete > 0, "{stats:?}");
        assert!(stats.table_failures.is_empty(), "{stats:?}");
        let profile = recorder.finish("test").expect("finish");
        (profile, self, stats)
    }
}

/// glibc's aliases (`__GI___lll_lock_wait`, `___pthread_mutex_lock`) reduced to the public name.
fn normalize(name: &str) -> &str {
    let name = name.trim_start_matches('_');
    name.strip_prefix("GI_")
        .map_or(name, |n| n.trim_start_matches('_'))
}

/// True when `name` is `pattern`: equal (after normalizing), a path ending in it
/// (`rust_chains::rs_outer`), or, for a pattern with a path, containing it.
fn matches(name: &str, pattern: &str) -> bool {
    normalize(name) == pattern
        || name.ends_with(&format!("::{pattern}"))
        || (pattern.contains("::") && name.contains(pattern))
}

/// Wait time on `lock`'s futex words: (on complete stacks that contain `chain` in order, all).
fn chain_share(profile: &Profile, lock: (u64, u64), chain: &[&[&str]]) -> (u64, u64) {
    let mut matched = 0;
    let mut total = 0;
    for wait in &profile.waits {
        if !(lock.0..lock.1).contains(&wait.object) {
            continue;
        }
        total += wait.stats.total_ns;
        let Some(stack) = profile.stack(wait.user_stack) else {
            continue;
        };
        if stack.truncated {
            continue;
        }
        let names: Vec<String> = stack
            .frames
            .iter()
            .rev()
            .flat_map(|f| f.names_outermost_first())
            .collect();
        let mut next = 0;
        for name in &names {
            if next < chain.len() && chain[next].iter().any(|p| matches(name, p)) {
                next += 1;
            }
        }
        if next == chain.len() {
            matched += wait.stats.total_ns;
        }
    }
    (matched, total)
}

/// Every user stack of the profile, outermost first, for failure messages.
fn dump_stacks(profile: &Profile) -> String {
    let mut out = String::new();
    for wait in &profile.waits {
        let stack = profile.stack(wait.user_stack);
        out += &format!(
            "object {:#x} {} ns truncated={:?}:\n",
            wait.object,
            wait.stats.total_ns,
            stack.map(|s| s.truncated)
        );
        for frame in stack.map(|s| s.frames.as_slice()).unwrap_or_default() {
            out += &format!("    {:?}\n", frame.names_outermost_first());
        }
    }
    out
}

fn assert_chain(profile: &Profile, what: &str, lock: (u64, u64), chain: &[&[&str]]) {
    let (matched, total) = chain_share(profile, lock, chain);
    assert!(
        total > 0,
        "{what}: no waits recorded\n{}",
        dump_stacks(profile)
    );
    let share = matched as f64 / total as f64;
    eprintln!("{what}: {:.2}% of {total} ns on the chain", share * 100.0);
    assert!(
        share >= REQUIRED_SHARE,
        "{what}: only {:.2}% of {total} ns on {chain:?}\n{}",
        share * 100.0,
        dump_stacks(profile)
    );
}

const THREAD_ENTRY: &[&str] = &["start_thread", "clone3"];

/// The chains program's condvar chain, root first.
const CONDVAR_CHAIN: &[&[&str]] = &[
    THREAD_ENTRY,
    &["cv_worker"],
    &["cv_outer"],
    &["cv_wait_inner"],
    &["pthread_cond_wait"],
    &["futex_abstimed_wait_common", "futex_wait"],
];

fn assert_c_chains(profile: &Profile, workload: &Workload) {
    assert_chain(
        profile,
        "mutex chain",
        workload.lock("mutex"),
        &[
            THREAD_ENTRY,
            &["worker"],
            &["outer"],
            &["inner_lock"],
            &["pthread_mutex_lock"],
            &["lll_lock_wait"],
        ],
    );
    assert_chain(
        profile,
        "condvar chain",
        workload.lock("cond"),
        CONDVAR_CHAIN,
    );
    assert_chain(
        profile,
        "rwlock chain",
        workload.lock("rwlock"),
        &[
            THREAD_ENTRY,
            &["rw_worker"],
            &["rw_inner"],
            &["pthread_rwlock_wrlock"],
            &["futex_abstimed_wait_common", "futex_wait"],
        ],
    );
}

/// The C chains, built without frame pointers, unwind completely through libc; the program exits
/// before the recording ends and still gets its names.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn c_chains_unwind_without_frame_pointers() {
    require_bpf!(skip_reason());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("chains");
    compile(CHAINS_C, &binary, &[]);
    let workload = Workload::start(Command::new(&binary).args(["--wait-for-stdin", "20"]));
    let (profile, workload, _) = workload.record();
    assert_c_chains(&profile, &workload);
}

/// The Rust chains (std's futex-based Mutex and Condvar) unwind completely.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn rust_chains_unwind_without_frame_pointers() {
    require_bpf!(skip_reason());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let example = example_path("rust_chains");
    if !example.exists() {
        eprintln!("skipped: {} not built", example.display());
        return;
    }
    let workload = Workload::start(Command::new(&example).args(["--wait-for-stdin", "20"]));
    let (profile, workload, _) = workload.record();
    assert_chain(
        &profile,
        "rust mutex chain",
        workload.lock("mutex"),
        &[
            THREAD_ENTRY,
            &["rs_worker"],
            &["rs_outer"],
            &["rs_inner_lock"],
            &["Mutex<T>::lock", "mutex::Mutex::lock"],
            &["lock_contended"],
            &["futex_wait"],
            &["syscall"],
        ],
    );
    assert_chain(
        &profile,
        "rust condvar chain",
        workload.lock("cond"),
        &[
            THREAD_ENTRY,
            &["rs_cv_worker"],
            &["rs_cv_outer"],
            &["rs_cv_wait_inner"],
            &["Condvar::wait"],
            &["futex_wait"],
            &["syscall"],
        ],
    );
}

/// A program started in its own mount namespace, from a binary that exists only there (a private
/// tmpfs), unwinds and gets its names (through /proc/PID/map_files).
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn chains_in_a_private_mount_namespace() {
    require_bpf!(skip_reason());
    if Command::new("unshare").arg("--version").output().is_err() {
        eprintln!("skipped: no unshare(1)");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("chains");
    compile(CHAINS_C, &binary, &[]);
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    let script = format!(
        "mount -t tmpfs lockscope-test {p} && cp {b} {p}/chains-private && rm {b} && \
         exec {p}/chains-private --wait-for-stdin 20",
        p = private.display(),
        b = binary.display()
    );
    let workload = Workload::start(Command::new("unshare").args([
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
    ]));
    assert!(
        !binary.exists(),
        "the binary must exist only in the namespace"
    );
    assert!(
        !private.join("chains-private").exists(),
        "the private mount must be invisible here"
    );
    let (profile, workload, _) = workload.record();
    assert_c_chains(&profile, &workload);
    let module_seen = profile
        .stacks
        .iter()
        .flat_map(|s| &s.frames)
        .any(|f| f.module.as_deref() == Some("chains-private") && f.function.is_some());
    assert!(
        module_seen,
        "no named frame of chains-private\n{}",
        dump_stacks(&profile)
    );
}

/// Builds the chains program and its plugin library in `dir`, and starts it (waiting for stdin)
/// to dlopen the plugin after the recorder attached, running its chains for `ms` milliseconds.
fn start_chains_with_plugin(dir: &Path, ms: &str) -> Workload {
    let binary = dir.join("chains");
    compile(CHAINS_C, &binary, &["-ldl"]);
    let plugin = dir.join("libplugin.so");
    compile(PLUGIN_C, &plugin, &["-shared", "-fPIC"]);
    Workload::start(
        Command::new(&binary)
            .args(["--wait-for-stdin", ms])
            .env("LKS_DLOPEN", &plugin),
    )
}

/// A library dlopen'ed after the recorder attached unwinds and symbolizes: its frame sits between
/// inner_lock and pthread_mutex_lock on complete stacks.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn library_dlopened_after_attach_unwinds() {
    require_bpf!(skip_reason());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let workload = start_chains_with_plugin(dir.path(), "100");
    let (profile, workload, _) = workload.record();
    let (matched, total) = chain_share(
        &profile,
        workload.lock("mutex"),
        &[
            THREAD_ENTRY,
            &["worker"],
            &["outer"],
            &["inner_lock"],
            &["plugin_lock"],
            &["pthread_mutex_lock"],
            &["lll_lock_wait"],
        ],
    );
    eprintln!(
        "dlopen chain: {:.2}% of {total} ns",
        matched as f64 * 100.0 / total.max(1) as f64
    );
    // Waits in the moments between the dlopen and the next table refresh may be truncated
    // (counted); most of the run must unwind through the library.
    assert!(
        matched as f64 >= 0.5 * total as f64,
        "{matched} of {total} ns through plugin_lock\n{}",
        dump_stacks(&profile)
    );
    let module_seen = profile.stacks.iter().flat_map(|s| &s.frames).any(|f| {
        f.module.as_deref() == Some("libplugin.so") && f.function.as_deref() == Some("plugin_lock")
    });
    assert!(module_seen, "plugin_lock not named in libplugin.so");
}

/// A program whose own CFI is only in .debug_frame (`-fno-asynchronous-unwind-tables -g`: no
/// .eh_frame entries for its functions) unwinds from .debug_frame.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn chains_with_cfi_only_in_debug_frame() {
    require_bpf!(skip_reason());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("chains-debug-frame");
    compile(
        CHAINS_C,
        &binary,
        &["-fno-asynchronous-unwind-tables", "-fno-unwind-tables"],
    );
    let workload = Workload::start(Command::new(&binary).args(["--wait-for-stdin", "10"]));
    let (profile, workload, _) = workload.record();
    assert_c_chains(&profile, &workload);
}

/// A futex wait in a signal handler unwinds through the signal frame (glibc's `__restore_rt`,
/// the registers saved in the `ucontext`) into the interrupted code and on to the thread entry.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn waits_in_signal_handlers_unwind_through_the_signal_frame() {
    require_bpf!(skip_reason());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("signal");
    compile(SIGNAL_C, &binary, &[]);
    let workload = Workload::start(Command::new(&binary).args(["--wait-for-stdin", "5"]));
    let (profile, workload, _) = workload.record();
    assert_chain(
        &profile,
        "signal handler wait",
        workload.lock("word"),
        &[
            THREAD_ENTRY,
            &["victim_outer"],
            &["victim_loop"],
            &["restore_rt"],
            &["on_signal"],
            &["syscall"],
        ],
    );
}

/// A stripped program (no .symtab, no debug info) still unwinds completely from its .eh_frame;
/// its functions are named from .dynsym when exported (-rdynamic), else `module+0xoffset`.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn stripped_binaries_unwind_and_fall_back_to_dynsym_then_offsets() {
    require_bpf!(skip_reason());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let exported = dir.path().join("chains-dynsym");
    compile(CHAINS_C, &exported, &["-s", "-rdynamic"]);
    let workload = Workload::start(Command::new(&exported).args(["--wait-for-stdin", "10"]));
    let (profile, workload, _) = workload.record();
    assert_c_chains(&profile, &workload);

    let bare = dir.path().join("chains-bare");
    compile(CHAINS_C, &bare, &["-s"]);
    let workload = Workload::start(Command::new(&bare).args(["--wait-for-stdin", "10"]));
    let (profile, workload, _) = workload.record();
    let (start, end) = workload.lock("mutex");
    let mut checked = 0;
    for wait in profile
        .waits
        .iter()
        .filter(|w| (start..end).contains(&w.object))
    {
        let stack = profile.stack(wait.user_stack).expect("user stack");
        assert!(!stack.truncated, "{}", dump_stacks(&profile));
        let own: Vec<_> = stack
            .frames
            .iter()
            .filter(|f| f.module.as_deref() == Some("chains-bare"))
            .collect();
        // worker, outer, inner_lock: three frames of the program, without names but placed.
        assert!(own.len() >= 3, "{}", dump_stacks(&profile));
        for frame in own {
            assert!(frame.module_offset.is_some(), "{frame:?}");
            let name = frame.display_name();
            assert!(name.starts_with("chains-bare+0x"), "{name}");
        }
        checked += 1;
    }
    assert!(checked > 0, "no mutex waits\n{}", dump_stacks(&profile));
}

/// Path of an example of this package, built by `cargo test` next to the test binaries.
fn example_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test> -> target/<profile>/examples/<name>
    exe.parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join(name)
}
