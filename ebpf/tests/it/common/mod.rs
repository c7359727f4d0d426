//! Helpers shared by the eBPF backend's integration tests: skipping loudly where BPF cannot load,
//! one recording at a time, re-running the test binary as one of its `helper_*` tests, and
//! waiting for a recorded target.
#![allow(dead_code)]

use lockscope_ebpf::{check_environment, Recorder};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Why this process cannot load lockscope's BPF programs (not root, or the kernel lacks what the
/// backend needs); `None` when it can.
pub fn bpf_skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    check_environment().err().map(|e| e.to_string())
}

/// True, after printing `skipped: <why>`, when `why` says the test cannot run; fails the test
/// instead when LOCKSCOPE_REQUIRE_BPF is set (CI sets it: there a skip would hide a broken suite).
pub fn skipped(why: Option<String>) -> bool {
    let Some(why) = why else {
        return false;
    };
    assert!(
        std::env::var_os("LOCKSCOPE_REQUIRE_BPF").is_none(),
        "cannot run: {why} (LOCKSCOPE_REQUIRE_BPF is set)"
    );
    eprintln!("skipped: {why}");
    true
}

/// Returns from the calling test when it cannot run here (see [`skipped`]): `require_bpf!()` for
/// a test that needs BPF ([`bpf_skip_reason`]), `require_bpf!(WHY)` with a reason of its own.
macro_rules! require_bpf {
    () => {
        require_bpf!(crate::common::bpf_skip_reason())
    };
    ($why:expr) => {
        if crate::common::skipped($why) {
            return;
        }
    };
}
pub(crate) use require_bpf;

/// One recording (or BPF load) at a time, whichever module's: several at once would see each
/// other's CPU use (they share the machine's CPUs and the BPF programs' timing), and the
/// recorder tests inspect this process's descriptors.
pub static SERIAL: Mutex<()> = Mutex::new(());

// Re-running this binary as one of its tests, found by its name under its module's path.
use lockscope_dev::self_run;

/// True when this process was started by [`helper_argv`] to run helper `name`. A helper run
/// any other way (`--include-ignored` without `--skip helper_`) returns at once: the helpers
/// wait on stdin, or exit the process.
pub fn is_helper_run(name: &str) -> bool {
    self_run::is_run_as(name)
}

/// argv that re-runs this test binary as the helper test `name` (its name without the module's
/// path, `helper_sleeps` for `probes::offcpu::helper_sleeps`).
pub fn helper_argv(name: &str) -> Vec<OsString> {
    self_run::argv(name)
}

/// The argument that tells a helper where to report the waits it measured itself: a test filter
/// that matches no test, so the harness of the helper's run ignores it.
const REPORT_DIR_ARG: &str = "lockscope-report-dir=";

/// [`helper_argv`] of a helper that reports each wait it measures into `dir` ([`measure_wait`]).
pub fn helper_argv_reporting(name: &str, dir: &Path) -> Vec<OsString> {
    let mut argv = helper_argv(name);
    let mut arg = OsString::from(REPORT_DIR_ARG);
    arg.push(dir);
    argv.push(arg);
    argv
}

/// Where this helper run reports its waits ([`helper_argv_reporting`]); `None` when its test
/// did not ask.
pub fn report_dir() -> Option<PathBuf> {
    std::env::args_os().find_map(|a| {
        a.to_str()
            .and_then(|a| a.strip_prefix(REPORT_DIR_ARG))
            .map(PathBuf::from)
    })
}

/// Runs `wait` and, when the test asked ([`report_dir`]), writes how long it took by the
/// monotonic clock (the clock the probes' timestamps use) as `<tid>.ns` there: the wait the
/// kernel saw lies inside, so a recorded wait can be checked against it however long the thread
/// waited for a CPU on a loaded machine.
pub fn measure_wait(wait: impl FnOnce()) {
    let started = Instant::now();
    wait();
    let took = started.elapsed();
    if let Some(dir) = report_dir() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        std::fs::write(dir.join(format!("{tid}.ns")), took.as_nanos().to_string())
            .expect("write the measured wait");
    }
}

/// The wait thread `tid` measured itself ([`measure_wait`]), from the report directory `dir`.
pub fn reported_wait(dir: &Path, tid: u32) -> Duration {
    let path = dir.join(format!("{tid}.ns"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no measure of thread {tid}'s wait at {path:?}: {e}"));
    Duration::from_nanos(text.trim().parse().expect("nanoseconds"))
}

/// Polls until the target exited (or a minute passed, failing the test), as the profiler would.
pub fn poll_until_exit(recorder: &mut Recorder) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if recorder.poll().expect("poll").target_exited {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("target did not exit within a minute");
}

/// futex(2) on `word`: `op` with `value`, `timeout` (relative or absolute, as `op` says) and
/// `val3` (FUTEX_WAIT_BITSET's mask); the raw return, -1 with errno set when it failed (a timed
/// wait that timed out: ETIMEDOUT).
pub fn futex(word: &AtomicU32, op: i32, value: u32, timeout: &libc::timespec, val3: i32) -> i64 {
    // SAFETY: `word` is a live, aligned u32 and `timeout` a live timespec; uaddr2 is unused.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            value,
            timeout as *const libc::timespec,
            std::ptr::null::<u32>(),
            val3,
        )
    }
}

/// `duration` as a timespec (a relative timeout).
pub fn timespec(duration: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: duration.as_secs() as libc::time_t,
        tv_nsec: duration.subsec_nanos() as libc::c_long,
    }
}

/// The time `after` from now by `clock`, as a timespec (an absolute timeout).
pub fn deadline(clock: libc::clockid_t, after: Duration) -> libc::timespec {
    let mut now = timespec(Duration::ZERO);
    // SAFETY: `now` is a valid out pointer.
    let status = unsafe { libc::clock_gettime(clock, &mut now) };
    assert_eq!(status, 0, "clock_gettime");
    let at = Duration::new(now.tv_sec as u64, now.tv_nsec as u32) + after;
    timespec(at)
}
