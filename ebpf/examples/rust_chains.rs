//! Lock workload with known call chains in Rust (std::sync::Mutex and Condvar, no frame
//! pointers: Rust's default on x86_64 Linux), for the unwinder tests (`tests/it/unwind/`):
//!
//! - `rs_worker → rs_outer → rs_inner_lock → Mutex::lock` (3 threads named `rs-mutex`),
//! - `rs_cv_worker → rs_cv_outer → rs_cv_wait_inner → Condvar::wait` (1 thread, `rs-cv`).
//!
//! It prints the address range of each lock, then with `--wait-for-stdin` waits for a line
//! before it starts, so a recorder can attach first. Optional argument: rounds (default 20).

use std::hint::black_box;
use std::io::{BufRead, Write};
use std::sync::{Condvar, Mutex};
use std::thread;
use std::time::Duration;

static MUTEX: Mutex<u64> = Mutex::new(0);
static CV_STATE: Mutex<bool> = Mutex::new(false);
static CV: Condvar = Condvar::new();
/// How long a mutex holder keeps the lock.
const HOLD: Duration = Duration::from_millis(2);

#[inline(never)]
fn rs_inner_lock() {
    let mut guard = MUTEX.lock().unwrap_or_else(|e| e.into_inner());
    *guard += 1;
    thread::sleep(HOLD);
    drop(guard);
    black_box(());
}

#[inline(never)]
fn rs_outer() {
    rs_inner_lock();
    black_box(());
}

#[inline(never)]
fn rs_worker(rounds: u32) {
    for _ in 0..rounds {
        rs_outer();
    }
    black_box(());
}

#[inline(never)]
fn rs_cv_wait_inner() {
    let mut ready = CV_STATE.lock().unwrap_or_else(|e| e.into_inner());
    while !*ready {
        ready = CV.wait(ready).unwrap_or_else(|e| e.into_inner());
    }
    *ready = false;
    drop(ready);
    black_box(());
}

#[inline(never)]
fn rs_cv_outer() {
    rs_cv_wait_inner();
    black_box(());
}

#[inline(never)]
fn rs_cv_worker(rounds: u32) {
    for _ in 0..rounds {
        rs_cv_outer();
    }
    black_box(());
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let wait_for_stdin = args.peek().is_some_and(|a| a == "--wait-for-stdin");
    if wait_for_stdin {
        args.next();
    }
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    println!(
        "locks mutex={:p}+{} cond={:p}+{}",
        &MUTEX,
        std::mem::size_of_val(&MUTEX),
        &CV,
        std::mem::size_of_val(&CV)
    );
    let _ = std::io::stdout().flush();
    if wait_for_stdin {
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).is_err() {
            return;
        }
    }
    let mut threads = Vec::new();
    for _ in 0..3 {
        threads.push(
            thread::Builder::new()
                .name("rs-mutex".into())
                .spawn(move || rs_worker(rounds))
                .expect("spawn"),
        );
    }
    threads.push(
        thread::Builder::new()
            .name("rs-cv".into())
            .spawn(move || rs_cv_worker(rounds))
            .expect("spawn"),
    );
    for _ in 0..rounds {
        thread::sleep(Duration::from_millis(3));
        *CV_STATE.lock().unwrap_or_else(|e| e.into_inner()) = true;
        CV.notify_one();
        while *CV_STATE.lock().unwrap_or_else(|e| e.into_inner()) {
            thread::sleep(Duration::from_micros(100));
        }
    }
    for t in threads {
        let _ = t.join();
    }
    println!("done {}", MUTEX.lock().map_or(0, |g| *g));
}
