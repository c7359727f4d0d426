//! What a wait is, by who ended it (issue 23, item 5), on a program of known behaviour: a ring of
//! threads that hand a token to each other over eventfds (sleeping in `epoll_wait`) and pipes
//! (sleeping in `poll`), the way a database's lock manager sets the latch of the backend it
//! grants a lock to, beside a listener that waits for a client outside the program (this test,
//! writing to its stdin) and a ticker that waits for a timer. The ring's sleeps are waits on
//! each other, contention, however idle their system calls look; the listener and the ticker
//! are idle. Runs as root with BPF and skips loudly otherwise.

use crate::common;

use common::*;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Threads in the ring; the first half wait in `epoll_wait` on an eventfd, the others in `poll`
/// on a pipe.
const RING: usize = 4;
/// CPU time each ring thread spends holding the token before passing it on.
const HOLD: Duration = Duration::from_millis(2);
/// How long the ring runs.
const RUN: Duration = Duration::from_millis(1500);
/// How often the test (the client outside the program) writes to the listener.
const CLIENT_PERIOD: Duration = Duration::from_millis(30);
/// The ticker's `epoll_wait` timeout.
const TICK: Duration = Duration::from_millis(20);

/// The argv that re-runs this test binary as the helper program.
fn helper_argv() -> Vec<OsString> {
    common::self_run::argv("helper_latch_ring")
}

/// True when this process runs as the helper (started by [`helper_argv`]).
fn is_helper_run() -> bool {
    common::self_run::is_run_as("helper_latch_ring")
}

/// How a ring thread is woken: an eventfd it waits for in `epoll_wait`, or a pipe it `poll`s.
enum Latch {
    Event { fd: OwnedFd, epoll: OwnedFd },
    Pipe { read: OwnedFd, write: OwnedFd },
}

fn check(ret: libc::c_int, what: &str) -> libc::c_int {
    assert!(ret >= 0, "{what}: {}", std::io::Error::last_os_error());
    ret
}

impl Latch {
    fn new(eventfd: bool) -> Latch {
        // SAFETY: plain system calls on fds this function owns from here on.
        unsafe {
            if eventfd {
                let fd = OwnedFd::from_raw_fd(check(libc::eventfd(0, 0), "eventfd"));
                let epoll = OwnedFd::from_raw_fd(check(libc::epoll_create1(0), "epoll_create1"));
                let mut event = libc::epoll_event {
                    events: libc::EPOLLIN as u32,
                    u64: 0,
                };
                check(
                    libc::epoll_ctl(
                        epoll.as_raw_fd(),
                        libc::EPOLL_CTL_ADD,
                        fd.as_raw_fd(),
                        &mut event,
                    ),
                    "epoll_ctl",
                );
                Latch::Event { fd, epoll }
            } else {
                let mut fds = [0; 2];
                check(libc::pipe(fds.as_mut_ptr()), "pipe");
                Latch::Pipe {
                    read: OwnedFd::from_raw_fd(fds[0]),
                    write: OwnedFd::from_raw_fd(fds[1]),
                }
            }
        }
    }

    /// Sleeps until set, then resets it.
    fn wait(&self) {
        // SAFETY: system calls on the latch's own open fds, with buffers of the sizes given.
        unsafe {
            match self {
                Latch::Event { fd, epoll } => {
                    let mut event = libc::epoll_event { events: 0, u64: 0 };
                    while libc::epoll_wait(epoll.as_raw_fd(), &mut event, 1, -1) < 1 {}
                    let mut value = 0u64;
                    check(
                        libc::read(fd.as_raw_fd(), (&mut value as *mut u64).cast(), 8) as i32,
                        "read eventfd",
                    );
                }
                Latch::Pipe { read, .. } => {
                    let mut pfd = libc::pollfd {
                        fd: read.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    while libc::poll(&mut pfd, 1, -1) < 1 {}
                    let mut byte = 0u8;
                    check(
                        libc::read(read.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) as i32,
                        "read pipe",
                    );
                }
            }
        }
    }

    /// Sets it (from another thread).
    fn set(&self) {
        // SAFETY: a write of the given size from a local to the latch's own open fd.
        unsafe {
            match self {
                Latch::Event { fd, .. } => {
                    let one = 1u64;
                    check(
                        libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) as i32,
                        "write eventfd",
                    );
                }
                Latch::Pipe { write, .. } => {
                    check(
                        libc::write(write.as_raw_fd(), b"x".as_ptr().cast(), 1) as i32,
                        "write pipe",
                    );
                }
            }
        }
    }
}

/// Spins on the CPU for `d` of this thread's CPU time.
fn spin(d: Duration) {
    let start = cpu_time();
    while cpu_time() - start < d {
        std::hint::spin_loop();
    }
}

fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The program: the ring, the listener on stdin, the ticker. Prints `ring done` at the end.
#[test]
#[ignore = "helper program of waits_are_told_by_who_ended_them"]
fn helper_latch_ring() {
    if !is_helper_run() {
        return;
    }
    let latches: Arc<Vec<Latch>> = Arc::new((0..RING).map(|i| Latch::new(i < RING / 2)).collect());
    let done = Arc::new(AtomicBool::new(false));
    // The ring threads meet this thread at a barrier (a futex wait for all but the last), so that
    // the futex probe alone sees them too. It reckons its share of the wall time over the threads
    // it saw: without them, over the harness's main thread (in join the whole run) and this one,
    // which made about 50%, on the edge of the report's "most of it unseen".
    let start = Arc::new(Barrier::new(RING + 1));
    let ring: Vec<_> = (0..RING)
        .map(|i| {
            let latches = Arc::clone(&latches);
            let done = Arc::clone(&done);
            let start = Arc::clone(&start);
            std::thread::Builder::new()
                .name(format!("ring-{i}"))
                .spawn(move || {
                    start.wait();
                    loop {
                        latches[i].wait();
                        let stop = done.load(Ordering::Relaxed);
                        if !stop {
                            spin(HOLD);
                        }
                        latches[(i + 1) % RING].set();
                        if stop {
                            return;
                        }
                    }
                })
                .expect("spawn a ring thread")
        })
        .collect();
    let listener = std::thread::Builder::new()
        .name("listener".into())
        .spawn(|| {
            let mut stdin = std::io::stdin().lock();
            let mut byte = [0u8; 1];
            while matches!(stdin.read(&mut byte), Ok(1)) {}
        })
        .expect("spawn the listener");
    let ticker_done = Arc::clone(&done);
    let ticker = std::thread::Builder::new()
        .name("ticker".into())
        .spawn(move || {
            // SAFETY: an epoll fd of its own, never given an fd: every wait times out.
            let epoll = unsafe { OwnedFd::from_raw_fd(check(libc::epoll_create1(0), "epoll")) };
            let mut event = libc::epoll_event { events: 0, u64: 0 };
            while !ticker_done.load(Ordering::Relaxed) {
                // SAFETY: one event of room for an epoll fd this thread owns.
                unsafe {
                    libc::epoll_wait(epoll.as_raw_fd(), &mut event, 1, TICK.as_millis() as i32)
                };
            }
        })
        .expect("spawn the ticker");
    start.wait();
    latches[0].set();
    std::thread::sleep(RUN);
    done.store(true, Ordering::Relaxed);
    for thread in ring {
        thread.join().expect("a ring thread");
    }
    ticker.join().expect("the ticker");
    println!("ring done");
    listener.join().expect("the listener");
}

/// The report of the ring recorded with `--probes futex,offcpu` (the client writing to the
/// listener every 30 ms meanwhile): every ring thread's `epoll_wait` and `poll` site is
/// contention, ended by the program; the listener's read and the ticker's `epoll_wait` are idle,
/// ended from outside; the time breakdown has the ring threads asleep mostly waiting on the
/// program and the listener waiting for something outside it; futex alone says how little it
/// saw and what to add.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn waits_are_told_by_who_ended_them() {
    let Some(dir) = bpf_scratch("waits_are_told_by_who_ended_them") else {
        return;
    };
    let lsp = dir.path().join("ring.lsp");
    let mut recorder = lockscope()
        .args(["record", "--probes", "futex,offcpu", "-o"])
        .arg(&lsp)
        .arg("--")
        .args(helper_argv())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockscope record");
    let mut stdin = recorder.stdin.take().expect("stdin");
    let stdout = BufReader::new(recorder.stdout.take().expect("stdout"));
    let (lines, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    // The client: a byte every 30 ms until the ring is done, then end of file.
    let deadline = Instant::now() + RUN + Duration::from_secs(30);
    loop {
        if rx.try_iter().any(|l| l.contains("ring done")) {
            break;
        }
        assert!(Instant::now() < deadline, "the ring never finished");
        let _ = stdin.write_all(b"r");
        std::thread::sleep(CLIENT_PERIOD);
    }
    drop(stdin);
    let out = recorder.wait_with_output().expect("wait for lockscope");
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let json: serde_json::Value =
        serde_json::from_str(&run_ok(lockscope().arg("report").arg(&lsp).arg("--json")))
            .expect("report JSON");
    let contention = &json["sections"]["contention"];
    let rows = |list: &str| -> Vec<serde_json::Value> {
        contention[list].as_array().cloned().unwrap_or_default()
    };
    let threads_of = |row: &serde_json::Value| -> Vec<String> {
        row["threads"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let at = |list: &str, thread: &str, call: &str| -> u64 {
        rows(list)
            .iter()
            .filter(|r| {
                r["operation"] == format!("sleeping in {call}").as_str()
                    && threads_of(r).iter().any(|t| t == thread)
            })
            .map(|r| r["total_ns"].as_u64().unwrap_or(0))
            .sum()
    };
    // Each ring thread sleeps while the three others hold the token: about 3/4 of the run.
    let expected = RUN.as_nanos() as f64 * 0.5;
    for i in 0..RING {
        let (thread, call) = (
            format!("ring-{i}"),
            if i < RING / 2 { "epoll_wait" } else { "poll" },
        );
        let contended = at("sites", &thread, call);
        assert!(
            contended as f64 >= expected,
            "{thread}'s {call} is not contention ({contended} ns): {contention:#}"
        );
        assert_eq!(
            at("idle", &thread, call),
            0,
            "{thread}'s {call} read as idle: {contention:#}"
        );
    }
    assert!(
        at("idle", "listener", "read") as f64 >= expected,
        "the listener's wait for its client is not idle: {contention:#}"
    );
    assert!(
        at("idle", "ticker", "epoll_wait") as f64 >= expected,
        "the ticker's timer wait is not idle: {contention:#}"
    );
    for row in rows("sites") {
        let program = row["woken_ns"]["program"].as_u64().unwrap_or(0);
        if row["probe"] == "offcpu" {
            assert!(
                program as f64 >= 0.5 * row["total_ns"].as_u64().unwrap_or(0) as f64,
                "a contention site mostly ended from outside: {row:#}"
            );
        }
    }

    // Where the time went: the ring asleep on the program, the listener on its client.
    let by_name = json["sections"]["breakdown"]["by_name"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let share = |name: &str, by: &str| -> f64 {
        let row = by_name
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no breakdown row {name}: {by_name:#?}"));
        let wall = row["wall_ns"].as_u64().unwrap_or(0) as f64;
        row["woken_ns"][by].as_u64().unwrap_or(0) as f64 / wall
    };
    for i in 0..RING {
        let program = share(&format!("ring-{i}"), "program");
        assert!(
            program >= 0.5,
            "ring-{i} waiting on the program {program:.2}"
        );
    }
    let outside = share("listener", "outside") + share("listener", "interrupt");
    assert!(outside >= 0.5, "listener waiting outside {outside:.2}");
    assert_eq!(
        json["header"]["coverage"]["basis"], "thread-times",
        "{:#}",
        json["header"]
    );

    // The text says it in words.
    let text = run_ok(lockscope().arg("report").arg(&lsp));
    assert!(
        text.contains("Contention: waits on other threads of the program"),
        "{text}"
    );
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("in sleeps another thread of the program ended"),
        "{text}"
    );

    // The futex probe alone sees none of it, and says what would.
    let futex_lsp = dir.path().join("ring-futex.lsp");
    let mut futex_only = lockscope()
        .args(["record", "--probes", "futex", "-o"])
        .arg(&futex_lsp)
        .arg("--")
        .args(helper_argv())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockscope record");
    let status = futex_only.wait().expect("wait for lockscope");
    assert!(status.success(), "futex-only record failed");
    let text = run_ok(lockscope().arg("report").arg(&futex_lsp));
    let seen = text
        .lines()
        .find(|l| l.starts_with("  seen "))
        .unwrap_or_else(|| panic!("no `seen` line:\n{text}"));
    // The header's lines are wrapped at 100 columns: the words, whatever line they are on.
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("--probes futex,offcpu sees every sleep"),
        "no suggestion under {seen}:\n{text}"
    );
}
