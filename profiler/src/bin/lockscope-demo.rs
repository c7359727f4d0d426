//! `lockscope-demo`: a workload with a known answer, for the README and the tests.
//!
//! It blocks threads on pthread primitives through a small named call chain, built like most
//! distribution software (without frame pointers: Rust's default on x86_64 Linux):
//!
//! 1. the main thread holds `ORDER_LOCK` for [`MUTEX_HOLD`] (200 ms; `--hold-ms N` changes it),
//!    asleep in `hold_order_lock`, while 4 threads named `mutex-waiter-N` block on it in
//!    `place_order` → `take_order_lock` → `pthread_mutex_lock`;
//! 2. then 2 threads named `cond-waiter-N` wait [`CONDVAR_WAIT`] (300 ms) on a condition
//!    variable each, in `await_shipment` → `wait_for_signal` → `pthread_cond_wait`, until the
//!    main thread, asleep in `prepare_shipment` meanwhile, signals them;
//! 3. then on CPU, never entering the kernel: a thread named `spinner` spins on a user-space
//!    spinlock in `acquire_spin_lock` → `spin_until_free` (→ `pthread_spin_lock` on Linux, a
//!    spin primitive lockscope recognises; an atomic loop elsewhere) while `lock-holder` holds
//!    it (asleep) until the spinner has used [`SPIN_HOLD`] (300 ms) of CPU, and a thread named
//!    `cruncher`
//!    computes in `crunch_numbers` → `checksum_round` until it has used [`CRUNCH_TIME`] (300 ms)
//!    of CPU. Both are CPU time, not wall time, so a stalled or starved process (a tracer that
//!    stops it, an emulated or loaded machine) still spins and computes that long.
//!
//! So a recording must show 4 mutex waits of about 200 ms (800 ms in all) and 2 condvar waits of
//! about 300 ms (600 ms in all). Where the machine's speed shifts the waits (an emulated kernel),
//! the demo prints two bounds of each wait that no probe may cross: the wait each thread measured
//! itself (from just before it asked for the lock to just after it got it: the kernel's wait lies
//! inside), and on Linux how long the main thread knew it was asleep in the kernel before the
//! release (from when `/proc` showed it switched out in `futex` to just before the unlock or the
//! signal: the kernel's wait covers that), with how long of that the main thread itself was
//! awake (on a CPU or waiting for one: its CPU clock and its schedstat's run delay). It also prints the CPU time the
//! spinner and the cruncher used by their own thread CPU clocks (a line of its own, after the
//! waits'). Each condvar waiter
//! has its own mutex, so no waiter contends for a mutex after its wake-up and the counts are
//! exact. The main thread's own waits (joining the threads) come on top, under its own name.
//!
//! With `--wait-for-stdin` it reads one line from standard input before it starts, so a test can
//! attach to its pid before any of its threads exist, and once it has printed its summary it waits
//! for the end of standard input before it exits, so a test can stop a recording while it lives.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicUsize, Ordering};
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
/// The CPU time `spinner` spins on the spinlock `lock-holder` holds.
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

/// What a waiter tells the main thread before it blocks: its thread id and how many times it had
/// blocked so far, so the main thread can see when it has gone to sleep in the kernel.
struct Announcement {
    tid: AtomicI32,
    voluntary_switches: AtomicI64,
}

impl Announcement {
    const fn new() -> Self {
        Announcement {
            tid: AtomicI32::new(0),
            voluntary_switches: AtomicI64::new(0),
        }
    }

    /// Records the calling thread, then counts it ready.
    fn announce(&self) {
        let (tid, switches) = own_thread_and_switches();
        self.tid.store(tid, Ordering::SeqCst);
        self.voluntary_switches.store(switches, Ordering::SeqCst);
        READY.fetch_add(1, Ordering::SeqCst);
    }
}

/// One announcement per waiter: the mutex waiters', then the condvar waiters'.
static ANNOUNCEMENTS: [Announcement; MUTEX_WAITERS + CONDVAR_WAITERS] =
    [const { Announcement::new() }; MUTEX_WAITERS + CONDVAR_WAITERS];

/// The calling thread's id and the times it has blocked so far (its voluntary context switches),
/// -1 when unknown.
#[cfg(target_os = "linux")]
fn own_thread_and_switches() -> (i32, i64) {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: an all-zero rusage is a valid value, and getrusage only writes to it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid out pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return (tid, -1);
    }
    (tid, usage.ru_nvcsw)
}

/// Elsewhere nothing tells when a thread is asleep: unknown.
#[cfg(not(target_os = "linux"))]
fn own_thread_and_switches() -> (i32, i64) {
    (0, -1)
}
/// A user-space spinlock: taking it never enters the kernel. On Linux glibc's
/// `pthread_spin_lock`, whose frame tells a profiler the thread spins for a lock (its CPU time is
/// a wait on the holder); elsewhere (macOS has no pthread spinlock) an atomic flag.
struct SpinLock {
    #[cfg(target_os = "linux")]
    lock: UnsafeCell<libc::pthread_spinlock_t>,
    #[cfg(not(target_os = "linux"))]
    held: AtomicBool,
}

// SAFETY: the pthread spinlock is made to be shared between threads and is only used through
// the pthread functions, which synchronize internally (the atomic flag is Sync by itself).
unsafe impl Sync for SpinLock {}

#[cfg(target_os = "linux")]
impl SpinLock {
    /// A spinlock to [`SpinLock::init`] before use (its unlocked value is the C library's:
    /// glibc's x86_64 spinlock is unlocked at 1).
    const fn new() -> Self {
        SpinLock {
            lock: UnsafeCell::new(0),
        }
    }

    /// Makes it an unlocked spinlock, private to this process; called once, before any thread
    /// takes it.
    fn init(&self) {
        // SAFETY: the lock lives in a static and no thread uses it yet.
        let rc = unsafe { libc::pthread_spin_init(self.lock.get(), libc::PTHREAD_PROCESS_PRIVATE) };
        assert_eq!(rc, 0, "pthread_spin_init failed");
    }

    fn lock(&self) {
        // SAFETY: the lock lives in a static, is initialized (unlocked) and never moved.
        let rc = unsafe { libc::pthread_spin_lock(self.lock.get()) };
        assert_eq!(rc, 0, "pthread_spin_lock failed");
    }

    fn unlock(&self) {
        // SAFETY: called only by the thread that locked it (see `lock`).
        let rc = unsafe { libc::pthread_spin_unlock(self.lock.get()) };
        assert_eq!(rc, 0, "pthread_spin_unlock failed");
    }
}

#[cfg(not(target_os = "linux"))]
impl SpinLock {
    const fn new() -> Self {
        SpinLock {
            held: AtomicBool::new(false),
        }
    }

    fn init(&self) {}

    fn lock(&self) {
        while self
            .held
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while self.held.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        }
    }

    fn unlock(&self) {
        self.held.store(false, Ordering::Release);
    }
}

static SPIN_LOCK: SpinLock = SpinLock::new();
/// Set by `lock-holder` once it holds [`SPIN_LOCK`], so the spinner starts only then.
static SPIN_HELD: AtomicBool = AtomicBool::new(false);
/// The spinner's CPU clock for `lock-holder` ([`SPINNER_CLOCK_UNSET`] until main has it,
/// [`SPINNER_CLOCK_NONE`] where the OS has none; Linux's thread CPU clocks are negative).
static SPINNER_CLOCK: AtomicI64 = AtomicI64::new(SPINNER_CLOCK_UNSET);
const SPINNER_CLOCK_UNSET: i64 = i64::MIN;
const SPINNER_CLOCK_NONE: i64 = i64::MIN + 1;

#[inline(never)]
fn take_order_lock() {
    ORDER_LOCK.lock();
}

/// Returns how long this thread waited for the lock, as it measured it.
#[inline(never)]
fn place_order(announcement: &Announcement) -> Duration {
    announcement.announce();
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
fn await_shipment(shipment: &Shipment, announcement: &Announcement) -> Duration {
    shipment.mutex.lock();
    announcement.announce();
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
    clock_time(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The time of `clock`.
fn clock_time(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer; the clock is this thread's CPU clock or another live
    // thread's (see `cpu_clock_of`).
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({clock}) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The main thread's slow step with the order lock held: it sleeps, so the waiters' time is
/// all this sleep's (the cause `lockscope why` names for the mutex waits). Not inlined, so
/// that its stack tells it from the other sleep.
#[inline(never)]
fn hold_order_lock(hold: Duration) {
    thread::sleep(hold);
    // After the sleep: not a tail call, whose frame an optimized build would leave out.
    std::hint::black_box(hold);
}

/// The main thread's slow step before it signals the shipments: the condvar waiters' time is
/// all this sleep's. Its body differs from [`hold_order_lock`]'s, so that an optimized build
/// does not merge the two into one function (one symbol for both sleeps).
#[inline(never)]
fn prepare_shipment(time: Duration, shipments: &[Shipment]) {
    thread::sleep(time);
    std::hint::black_box(shipments.len());
}

/// Takes the spinlock (held by `lock-holder` when called), spinning until it is free.
#[inline(never)]
fn spin_until_free() {
    SPIN_LOCK.lock();
    // After the lock: not a tail call, whose frame an optimized build would leave out.
    std::hint::black_box(&SPIN_LOCK);
}

/// Returns the CPU time this thread spun for the spinlock, as it measured it.
#[inline(never)]
fn acquire_spin_lock() -> Duration {
    let start = thread_cpu_time();
    spin_until_free();
    let spun = thread_cpu_time() - start;
    SPIN_LOCK.unlock();
    spun
}

/// Takes the spinlock, says so, and holds it (asleep: the spinner's time is all its own) until
/// the spinner has used `hold` of CPU by its CPU clock (which main passes in [`SPINNER_CLOCK`]
/// once the spinner runs; where the OS has none, for `hold`).
fn hold_spin_lock(hold: Duration) {
    SPIN_LOCK.lock();
    SPIN_HELD.store(true, Ordering::SeqCst);
    // Yielding, not sleeping: the spinner's start must not wait on this thread's timer.
    let clock = loop {
        match SPINNER_CLOCK.load(Ordering::SeqCst) {
            SPINNER_CLOCK_UNSET => thread::yield_now(),
            SPINNER_CLOCK_NONE => break None,
            clock => break libc::clockid_t::try_from(clock).ok(),
        }
    };
    match clock {
        Some(clock) => {
            let start = clock_time(clock);
            while clock_time(clock).saturating_sub(start) < hold {
                thread::sleep(Duration::from_millis(2));
            }
        }
        None => thread::sleep(hold),
    }
    SPIN_LOCK.unlock();
}

/// The CPU clock of `thread`, where the OS has one (Linux; macOS has none).
#[cfg(target_os = "linux")]
fn cpu_clock_of<T>(thread: &thread::JoinHandle<T>) -> Option<libc::clockid_t> {
    use std::os::unix::thread::JoinHandleExt;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the thread is alive until joined (we hold its handle); `clock` is a valid out
    // pointer.
    let rc = unsafe { libc::pthread_getcpuclockid(thread.as_pthread_t(), &mut clock) };
    (rc == 0).then_some(clock)
}

#[cfg(not(target_os = "linux"))]
fn cpu_clock_of<T>(_thread: &thread::JoinHandle<T>) -> Option<libc::clockid_t> {
    None
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

/// Waits until every thread of `announcements` is asleep in the kernel in `futex` (switched out
/// since it announced itself, as `/proc` shows); `false` when `/proc` cannot tell (then the
/// caller only knows the threads are about to block).
fn wait_until_asleep(announcements: &[Announcement]) -> bool {
    for announcement in announcements {
        let tid = announcement.tid.load(Ordering::SeqCst);
        let before = announcement.voluntary_switches.load(Ordering::SeqCst);
        loop {
            match asleep_in_futex(tid, before) {
                Some(true) => break,
                Some(false) => thread::sleep(Duration::from_micros(200)),
                None => return false,
            }
        }
    }
    true
}

/// Whether thread `tid` of this process sleeps in `futex` after blocking at least once since it
/// had blocked `before` times (so it is switched out, not about to be); `None` when `/proc` cannot
/// tell.
fn asleep_in_futex(tid: i32, before: i64) -> Option<bool> {
    if before < 0 {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let sleeping = field("State:")?.starts_with('S');
    let switches: i64 = field("voluntary_ctxt_switches:")?.parse().ok()?;
    // The system call it is in: its number first, `running` while it runs.
    let syscall = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    // x86_64's and aarch64's numbers of futex, the only system calls these threads sleep in.
    let futex = if cfg!(target_arch = "aarch64") {
        "98"
    } else {
        "202"
    };
    let in_futex = syscall.split(' ').next() == Some(futex);
    Some(sleeping && switches > before && in_futex)
}

/// How long this thread has been awake: on a CPU (its CPU clock, which counts the slice it runs
/// now; schedstat's first field is brought up to date only at ticks and switches, so it misses
/// the stretch from the last switch-in to the read) plus runnable, waiting for one (schedstat's
/// run delay, added at each switch-in); `None` where the kernel does not say.
fn awake_ns() -> Option<u64> {
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let run_delay: u64 = schedstat.split_whitespace().nth(1)?.parse().ok()?;
    let on_cpu = u64::try_from(thread_cpu_time().as_nanos()).ok()?;
    Some(on_cpu + run_delay)
}

/// How long before `release` each thread was known asleep, floored to the 0.1 ms the demo prints
/// (a lower bound of its wait in the kernel).
fn asleep_for(asleep_at: Instant, release: Instant) -> String {
    let ms = release.saturating_duration_since(asleep_at).as_secs_f64() * 1e3;
    format!("{:.1} ms", (ms * 10.0).floor() / 10.0)
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
                // The waiters must be seen asleep within the hold (a few ms; see below).
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

/// Says `message` and exits with `code`: the demo has nothing to clean up.
fn fail(message: &str, code: i32) -> ! {
    eprintln!("lockscope-demo: {message}");
    std::process::exit(code);
}

/// Starts a thread named `name` (what the recording shows), or says why it could not.
fn spawn<T: Send + 'static>(
    name: String,
    run: impl FnOnce() -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    thread::Builder::new()
        .name(name.clone())
        .spawn(run)
        .unwrap_or_else(|e| fail(&format!("failed to spawn `{name}`: {e}"), 1))
}

/// Waits for `thread` and returns what it measured; a panic in it ends the demo with its name.
fn join<T>(thread: thread::JoinHandle<T>) -> T {
    let name = thread.thread().name().unwrap_or("a thread").to_owned();
    thread
        .join()
        .unwrap_or_else(|_| fail(&format!("`{name}` panicked"), 1))
}

/// What the threads measured of their waits, for the summary.
struct Measured {
    /// Each waiter's own measure of its wait: `mutex-waiter-1 200.3 ms`.
    waits: Vec<String>,
    /// Each waiter's time known asleep before its release, where /proc told it.
    asleep: Vec<String>,
    /// Whether /proc told when every waiter was asleep (Linux).
    asleep_known: bool,
}

fn main() {
    let (wait_for_stdin, mutex_hold) =
        parse_args(std::env::args().skip(1)).unwrap_or_else(|message| fail(&message, 2));
    if wait_for_stdin {
        let mut line = String::new();
        if let Err(e) = std::io::stdin().read_line(&mut line) {
            fail(&format!("failed to read standard input: {e}"), 1);
        }
    }
    let started = Instant::now();
    let (mut measured, held, awake_during_hold) = mutex_convoy(mutex_hold);
    condvar_waits(&mut measured);
    let (spun, crunched) = on_cpu();

    println!(
        "lockscope-demo: held the order lock {:.1} ms against {MUTEX_WAITERS} waiters; \
         signalled {CONDVAR_WAITERS} condvar waiters after {} ms; {:.1} ms in all",
        held.as_secs_f64() * 1e3,
        CONDVAR_WAIT.as_millis(),
        started.elapsed().as_secs_f64() * 1e3
    );
    println!(
        "lockscope-demo: waits measured by the threads: {}",
        measured.waits.join(", ")
    );
    // Only where /proc told when the waiters were asleep (Linux).
    if measured.asleep_known {
        println!(
            "lockscope-demo: waits known asleep before the release: {}",
            measured.asleep.join(", ")
        );
        // The part of that time the main thread, the holder, was not asleep itself (on a CPU,
        // or waiting for one after its sleep ended), rounded up: what a bottleneck analysis
        // charges to its CPU or to the CPUs' saturation, not to its sleep under the lock.
        if let Some(awake) = awake_during_hold {
            println!(
                "lockscope-demo: the main thread awake while the mutex waiters slept: {:.1} ms",
                (awake as f64 / 1e5).ceil() / 10.0
            );
        }
    }
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

/// Part 1: a convoy on one mutex, held `mutex_hold` by the main thread. Returns the waits, how
/// long the lock was held, and the main thread's time awake while the waiters slept.
fn mutex_convoy(mutex_hold: Duration) -> (Measured, Duration, Option<u64>) {
    ORDER_LOCK.lock();
    let mutex_announcements = &ANNOUNCEMENTS[..MUTEX_WAITERS];
    let mutex_waiters: Vec<_> = mutex_announcements
        .iter()
        .enumerate()
        .map(|(i, announcement)| {
            spawn(format!("mutex-waiter-{}", i + 1), move || {
                place_order(announcement)
            })
        })
        .collect();
    wait_until_ready(MUTEX_WAITERS);
    let hold_start = Instant::now();
    // The waiters announced themselves just before blocking: the hold is all wait time for them
    // once they are asleep (or, where /proc cannot tell, after a moment to reach the kernel).
    // The holder's time awake is read before the instant the waiters' known sleep starts from
    // and after the one it ends at, so it covers all of it.
    let asleep_known = wait_until_asleep(mutex_announcements);
    let awake_before = awake_ns();
    if !asleep_known {
        thread::sleep(Duration::from_millis(5));
    }
    let asleep_at = Instant::now();
    hold_order_lock(mutex_hold.saturating_sub(hold_start.elapsed()));
    let release = Instant::now();
    let awake_after = awake_ns();
    ORDER_LOCK.unlock();
    let awake_during_hold = awake_before
        .zip(awake_after)
        .map(|(before, after)| after.saturating_sub(before));
    let held = release - hold_start;
    let asleep: Vec<String> = (1..=MUTEX_WAITERS)
        .map(|i| format!("mutex-waiter-{i} {}", asleep_for(asleep_at, release)))
        .collect();
    // Each thread's own measure of its wait: the answer a recording must match where the
    // machine's speed shifts the waits away from the nominal ones (an emulated kernel).
    let mut measured = Vec::new();
    for (i, t) in mutex_waiters.into_iter().enumerate() {
        let waited = join(t);
        measured.push(format!(
            "mutex-waiter-{} {:.1} ms",
            i + 1,
            waited.as_secs_f64() * 1e3
        ));
    }
    let measured = Measured {
        waits: measured,
        asleep,
        asleep_known,
    };
    (measured, held, awake_during_hold)
}

/// Part 2: condvar waits, one condvar (and mutex) per waiter, signalled after [`CONDVAR_WAIT`].
fn condvar_waits(measured: &mut Measured) {
    READY.store(0, Ordering::SeqCst);
    let cond_announcements = &ANNOUNCEMENTS[MUTEX_WAITERS..];

    let cond_waiters: Vec<_> = SHIPMENTS
        .iter()
        .zip(cond_announcements)
        .enumerate()
        .map(|(i, (shipment, announcement))| {
            spawn(format!("cond-waiter-{}", i + 1), move || {
                await_shipment(shipment, announcement)
            })
        })
        .collect();
    wait_until_ready(CONDVAR_WAITERS);
    // Each waiter announced itself with its mutex held; taking the mutex proves it is inside
    // pthread_cond_wait (which releases the mutex only once the waiter is registered).
    for shipment in &SHIPMENTS {
        shipment.mutex.lock();
        shipment.mutex.unlock();
    }
    measured.asleep_known &= wait_until_asleep(cond_announcements);
    let asleep_at = Instant::now();
    prepare_shipment(CONDVAR_WAIT, &SHIPMENTS);
    let release = Instant::now();
    for shipment in &SHIPMENTS {
        deliver(shipment);
    }
    measured.asleep.extend(
        (1..=CONDVAR_WAITERS)
            .map(|i| format!("cond-waiter-{i} {}", asleep_for(asleep_at, release))),
    );
    for (i, t) in cond_waiters.into_iter().enumerate() {
        let waited = join(t);
        measured.waits.push(format!(
            "cond-waiter-{} {:.1} ms",
            i + 1,
            waited.as_secs_f64() * 1e3
        ));
    }
}

/// Part 3: on CPU. Returns the spinner's and the cruncher's CPU time.
fn on_cpu() -> (Duration, Duration) {
    // The holder takes the spinlock before the spinner starts, and releases
    // it once the spinner has spun SPIN_HOLD of CPU, so its CPU time is all spent spinning.
    SPIN_LOCK.init();
    let holder = spawn("lock-holder".to_owned(), || hold_spin_lock(SPIN_HOLD));
    while !SPIN_HELD.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    let spinner = spawn("spinner".to_owned(), acquire_spin_lock);
    let spinner_cpu = cpu_clock_of(&spinner).map_or(SPINNER_CLOCK_NONE, i64::from);
    SPINNER_CLOCK.store(spinner_cpu, Ordering::SeqCst);
    let cruncher = spawn("cruncher".to_owned(), || crunch_numbers(CRUNCH_TIME));
    join(holder);
    let spun = join(spinner);
    let crunched = join(cruncher);
    (spun, crunched)
}
