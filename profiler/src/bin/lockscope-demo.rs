//! `lockscope-demo`: a workload with a known answer, for the README and the tests.
//!
//! It blocks threads on pthread primitives through a small named call chain, built like most
//! distribution software (without frame pointers: Rust's default on x86_64 Linux):
//!
//! 1. the main thread holds `ORDER_LOCK` for [`MUTEX_HOLD`] (200 ms; `--hold-ms N` changes it) while 4 threads named
//!    `mutex-waiter-N` block on it in `place_order` → `take_order_lock` → `pthread_mutex_lock`;
//! 2. then 2 threads named `cond-waiter-N` wait [`CONDVAR_WAIT`] (300 ms) on a condition
//!    variable each, in `await_shipment` → `wait_for_signal` → `pthread_cond_wait`, until the
//!    main thread signals them;
//! 3. then on CPU, never entering the kernel: a thread named `spinner` spins for
//!    [`SPIN_HOLD`] (300 ms) on a user-space spinlock in `acquire_spin_lock` → `spin_until_free`
//!    while `lock-holder` holds it (asleep), and a thread named `cruncher` computes in
//!    `crunch_numbers` → `checksum_round` until it has used [`CRUNCH_TIME`] (300 ms) of CPU.
//!
//! So a recording must show 4 mutex waits of about 200 ms (800 ms in all) and 2 condvar waits of
//! about 300 ms (600 ms in all); each thread also prints the wait it measured itself, which a
//! recording must match where the machine's speed shifts the waits (an emulated kernel), and
//! the CPU time the spinner and the cruncher used by their own thread CPU clocks (a line of its
//! own, after the waits'). Each condvar waiter has its own mutex, so no waiter contends for a
//! mutex after its wake-up and the counts are exact. The main thread's own waits (joining the
//! threads) come on top, under its own name.
//!
//! With `--wait-for-stdin` it reads one line from standard input before it starts, so a test can
//! attach to its pid before any of its threads exist, and once it has printed its summary it waits
//! for the end of standard input before it exits, so a test can stop a recording while it lives.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long the main thread holds the order lock once all mutex waiters are ready.
const MUTEX_HOLD: Duration = Duration::from_millis(200);
/// How long the condvar waiters wait before the main thread signals them.
const CONDVAR_WAIT: Duration = Duration::from_millis(300);
/// Threads blocking on the order lock.
const MUTEX_WAITERS: usize = 4;
/// Threads waiting on a condition variable.
const CONDVAR_WAITERS: usize = 2;
/// How long `lock-holder` holds the spinlock `spinner` spins on.
const SPIN_HOLD: Duration = Duration::from_millis(300);
/// The CPU time `cruncher` computes for.
const CRUNCH_TIME: Duration = Duration::from_millis(300);

/// A pthread mutex that can live in a `static` and be shared between threads.
struct PthreadMutex(UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: a pthread mutex is made to be shared between threads; all access goes through the
// pthread functions, which synchronize internally.
unsafe impl Sync for PthreadMutex {}

impl PthreadMutex {
    const fn new() -> Self {
        PthreadMutex(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER))
    }

    fn lock(&self) {
        // SAFETY: the mutex is statically initialized and never moved (it lives in a static or a
        // leaked box); a default mutex locked by this thread is unlocked by the same thread.
        let rc = unsafe { libc::pthread_mutex_lock(self.0.get()) };
        assert_eq!(rc, 0, "pthread_mutex_lock failed");
    }

    fn unlock(&self) {
        // SAFETY: called only by the thread that locked it (see `lock`).
        let rc = unsafe { libc::pthread_mutex_unlock(self.0.get()) };
        assert_eq!(rc, 0, "pthread_mutex_unlock failed");
    }
}

/// A condition variable with its own mutex and predicate.
struct Shipment {
    mutex: PthreadMutex,
    cond: UnsafeCell<libc::pthread_cond_t>,
    /// The predicate, guarded by `mutex`.
    arrived: UnsafeCell<bool>,
}

// SAFETY: `cond` is only used through pthread functions with `mutex` held, and `arrived` is only
// read or written with `mutex` held.
unsafe impl Sync for Shipment {}

impl Shipment {
    const fn new() -> Self {
        Shipment {
            mutex: PthreadMutex::new(),
            cond: UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER),
            arrived: UnsafeCell::new(false),
        }
    }
}

static ORDER_LOCK: PthreadMutex = PthreadMutex::new();
static SHIPMENTS: [Shipment; CONDVAR_WAITERS] = [Shipment::new(), Shipment::new()];
static READY: AtomicUsize = AtomicUsize::new(0);
/// A user-space spinlock: true while held. Taking it never enters the kernel.
static SPIN_LOCK: AtomicBool = AtomicBool::new(false);

#[inline(never)]
fn take_order_lock() {
    ORDER_LOCK.lock();
}

/// Returns how long this thread waited for the lock, as it measured it.
#[inline(never)]
fn place_order() -> Duration {
    READY.fetch_add(1, Ordering::SeqCst);
    let start = Instant::now();
    take_order_lock();
    let waited = start.elapsed();
    ORDER_LOCK.unlock();
    waited
}

#[inline(never)]
fn wait_for_signal(shipment: &Shipment) {
    // SAFETY: `arrived` and `cond` are used with `shipment.mutex` held (see `Shipment`).
    unsafe {
        while !*shipment.arrived.get() {
            let rc = libc::pthread_cond_wait(shipment.cond.get(), shipment.mutex.0.get());
            assert_eq!(rc, 0, "pthread_cond_wait failed");
        }
    }
}

/// Returns how long this thread waited for the signal, as it measured it.
#[inline(never)]
fn await_shipment(shipment: &Shipment) -> Duration {
    shipment.mutex.lock();
    READY.fetch_add(1, Ordering::SeqCst);
    let start = Instant::now();
    wait_for_signal(shipment);
    let waited = start.elapsed();
    shipment.mutex.unlock();
    waited
}

fn deliver(shipment: &Shipment) {
    shipment.mutex.lock();
    // SAFETY: `arrived` is written with `shipment.mutex` held, and the condvar is signalled after
    // the unlock so the woken waiter finds the mutex free.
    unsafe { *shipment.arrived.get() = true };
    shipment.mutex.unlock();
    // SAFETY: the condvar is initialized and lives in a static.
    let rc = unsafe { libc::pthread_cond_signal(shipment.cond.get()) };
    assert_eq!(rc, 0, "pthread_cond_signal failed");
}

/// The CPU time this thread has used (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer; the clock exists on every Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Takes the spinlock (held by `lock-holder` when called), spinning until it is free.
#[inline(never)]
fn spin_until_free() {
    while SPIN_LOCK
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        while SPIN_LOCK.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    }
}

/// Returns the CPU time this thread spun for the spinlock, as it measured it.
#[inline(never)]
fn acquire_spin_lock() -> Duration {
    let start = thread_cpu_time();
    spin_until_free();
    let spun = thread_cpu_time() - start;
    SPIN_LOCK.store(false, Ordering::Release);
    spun
}

/// Holds the spinlock for `hold` (asleep: the spinner's time is all its own).
fn hold_spin_lock(hold: Duration) {
    thread::sleep(hold);
    SPIN_LOCK.store(false, Ordering::Release);
}

/// One round of arithmetic that the optimizer cannot remove.
#[inline(never)]
fn checksum_round(seed: u64) -> u64 {
    let mut h = std::hint::black_box(seed);
    for i in 0..4096u64 {
        h = (h ^ i).wrapping_mul(0x100_0000_01b3).rotate_left(5);
    }
    std::hint::black_box(h)
}

/// Computes until this thread has used `cpu` of CPU time; returns the CPU time it measured.
#[inline(never)]
fn crunch_numbers(cpu: Duration) -> Duration {
    let start = thread_cpu_time();
    let mut h = 0u64;
    loop {
        // Many rounds per clock read: the clock is a system call, the time must be the rounds'.
        for _ in 0..256 {
            h = checksum_round(h);
        }
        let used = thread_cpu_time() - start;
        if used >= cpu {
            std::hint::black_box(h);
            return used;
        }
    }
}

/// Spins (yielding) until `count` threads have announced themselves: sleeping here would add
/// the sleep's granularity to the waiters' measured waits.
fn wait_until_ready(count: usize) {
    while READY.load(Ordering::SeqCst) < count {
        thread::yield_now();
    }
}

/// Parses `[--wait-for-stdin] [--hold-ms N]`: whether to wait for standard input, and how long
/// the main thread holds the order lock (default [`MUTEX_HOLD`]).
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<(bool, Duration), String> {
    let mut wait_for_stdin = false;
    let mut mutex_hold = MUTEX_HOLD;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--wait-for-stdin" => wait_for_stdin = true,
            "--hold-ms" => {
                let value = args
                    .next()
                    .ok_or("--hold-ms needs a number of milliseconds")?;
                let ms: u64 = value
                    .parse()
                    .map_err(|_| format!("invalid --hold-ms `{value}`: expected milliseconds"))?;
                // The hold includes a 5 ms settling sleep (see below), so it cannot be shorter.
                if ms < 10 {
                    return Err(format!("--hold-ms {ms} is too short: at least 10"));
                }
                mutex_hold = Duration::from_millis(ms);
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}` (known: --wait-for-stdin, --hold-ms N)"
                ))
            }
        }
    }
    Ok((wait_for_stdin, mutex_hold))
}

fn main() {
    let (wait_for_stdin, mutex_hold) = match parse_args(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("lockscope-demo: {message}");
            std::process::exit(2);
        }
    };
    if wait_for_stdin {
        let mut line = String::new();
        if let Err(e) = std::io::stdin().read_line(&mut line) {
            eprintln!("lockscope-demo: failed to read standard input: {e}");
            std::process::exit(1);
        }
    }
    let started = Instant::now();

    // Part 1: a convoy on one mutex.
    ORDER_LOCK.lock();
    let mutex_waiters: Vec<_> = (1..=MUTEX_WAITERS)
        .map(|i| {
            thread::Builder::new()
                .name(format!("mutex-waiter-{i}"))
                .spawn(place_order)
                .expect("spawn mutex waiter")
        })
        .collect();
    wait_until_ready(MUTEX_WAITERS);
    // The waiters announced themselves just before blocking; give them a moment to reach the
    // kernel so that the hold below is all wait time for them.
    thread::sleep(Duration::from_millis(5));
    let hold_start = Instant::now();
    thread::sleep(mutex_hold.saturating_sub(Duration::from_millis(5)));
    ORDER_LOCK.unlock();
    let held = hold_start.elapsed() + Duration::from_millis(5);
    // Each thread's own measure of its wait: the answer a recording must match where the
    // machine's speed shifts the waits away from the nominal ones (an emulated kernel).
    let mut measured = Vec::new();
    for (i, t) in mutex_waiters.into_iter().enumerate() {
        let waited = t.join().expect("mutex waiter panicked");
        measured.push(format!(
            "mutex-waiter-{} {:.1} ms",
            i + 1,
            waited.as_secs_f64() * 1e3
        ));
    }

    // Part 2: condvar waits, one condvar (and mutex) per waiter.
    READY.store(0, Ordering::SeqCst);
    let cond_waiters: Vec<_> = SHIPMENTS
        .iter()
        .enumerate()
        .map(|(i, shipment)| {
            thread::Builder::new()
                .name(format!("cond-waiter-{}", i + 1))
                .spawn(move || await_shipment(shipment))
                .expect("spawn condvar waiter")
        })
        .collect();
    wait_until_ready(CONDVAR_WAITERS);
    // Each waiter announced itself with its mutex held; taking the mutex proves it is inside
    // pthread_cond_wait (which releases the mutex only once the waiter is registered).
    for shipment in &SHIPMENTS {
        shipment.mutex.lock();
        shipment.mutex.unlock();
    }
    thread::sleep(CONDVAR_WAIT);
    for shipment in &SHIPMENTS {
        deliver(shipment);
    }
    for (i, t) in cond_waiters.into_iter().enumerate() {
        let waited = t.join().expect("condvar waiter panicked");
        measured.push(format!(
            "cond-waiter-{} {:.1} ms",
            i + 1,
            waited.as_secs_f64() * 1e3
        ));
    }

    // Part 3: on CPU. The holder takes the spinlock before the spinner starts, so the spinner's
    // CPU time is all spent spinning while the holder sleeps.
    SPIN_LOCK.store(true, Ordering::Release);
    let holder = thread::Builder::new()
        .name("lock-holder".to_owned())
        .spawn(|| hold_spin_lock(SPIN_HOLD))
        .expect("spawn lock holder");
    let spinner = thread::Builder::new()
        .name("spinner".to_owned())
        .spawn(acquire_spin_lock)
        .expect("spawn spinner");
    let cruncher = thread::Builder::new()
        .name("cruncher".to_owned())
        .spawn(|| crunch_numbers(CRUNCH_TIME))
        .expect("spawn cruncher");
    holder.join().expect("lock holder panicked");
    let spun = spinner.join().expect("spinner panicked");
    let crunched = cruncher.join().expect("cruncher panicked");

    println!(
        "lockscope-demo: held the order lock {:.1} ms against {MUTEX_WAITERS} waiters; \
         signalled {CONDVAR_WAITERS} condvar waiters after {} ms; {:.1} ms in all",
        held.as_secs_f64() * 1e3,
        CONDVAR_WAIT.as_millis(),
        started.elapsed().as_secs_f64() * 1e3
    );
    println!(
        "lockscope-demo: waits measured by the threads: {}",
        measured.join(", ")
    );
    println!(
        "lockscope-demo: CPU time measured by the threads: spinner {:.1} ms, cruncher {:.1} ms",
        spun.as_secs_f64() * 1e3,
        crunched.as_secs_f64() * 1e3
    );
    if wait_for_stdin {
        // Flush so a test reading our stdout sees the summary while we wait.
        let _ = std::io::Write::flush(&mut std::io::stdout());
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    }
}
