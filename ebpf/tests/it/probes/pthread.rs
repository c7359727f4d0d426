//! The futex and mutex-hold probes on pthread primitives: each primitive's waits in their
//! category, an idle pool thread, how long a mutex was held.

use super::*;

/// Waits of each pthread primitive land in their category (from the futex op and the user
/// frames), and a pool thread parked on a condvar for the whole run is labelled idle while the
/// mutex waits are not.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn futex_waits_are_classified() {
    require_bpf!();
    // With offcpu, each thread's own lifetime is its window (not the whole recording, whose
    // start-up a loaded machine can stretch).
    let profile = record("helper_sync_primitives", &["futex", "offcpu"]);
    let at_least = |kind: WaitKind, ns: u64| {
        let total: u64 = profile
            .waits
            .iter()
            .filter(|w| w.probe == "futex" && w.kind == kind)
            .map(|w| w.stats.total_ns)
            .sum();
        assert!(
            total >= ns,
            "{kind}: {total} ns < {ns} ns\n{:#?}",
            profile.waits
        );
    };
    // Each wait starts 50 ms into the hold (later if the holder starts late): about 150 ms.
    let held = HOLD.as_nanos() as u64 / 2;
    at_least(WaitKind::Mutex, held);
    at_least(WaitKind::RwlockRead, held);
    at_least(WaitKind::RwlockWrite, held);
    at_least(WaitKind::Condvar, held);
    at_least(WaitKind::Join, held);
    let idle = lockscope_probes::idle_waits(&profile);
    let idle_kinds: Vec<WaitKind> = idle.iter().map(|&i| profile.waits[i].kind).collect();
    assert!(
        idle_kinds.contains(&WaitKind::Condvar),
        "{idle_kinds:?}\n{:#?}\n{:#?}",
        profile.waits,
        profile.thread_times
    );
    for &i in &idle {
        assert_ne!(
            profile.waits[i].kind,
            WaitKind::Mutex,
            "{:?}",
            profile.waits[i]
        );
    }
}

/// How long each primitive is held while another thread waits for it.
const HOLD: Duration = Duration::from_millis(200);

/// A pthread object shared between threads (pthread types are plain memory with their own
/// synchronization).
struct Shared<T>(std::cell::UnsafeCell<T>);
// SAFETY: only ever used through the pthread functions, which synchronize.
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    fn ptr(&self) -> *mut T {
        self.0.get()
    }
}

static MUTEX: Shared<libc::pthread_mutex_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
static RWLOCK: Shared<libc::pthread_rwlock_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_RWLOCK_INITIALIZER));
static POOL_MUTEX: Shared<libc::pthread_mutex_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
static POOL_COND: Shared<libc::pthread_cond_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER));
static CV_MUTEX: Shared<libc::pthread_mutex_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
static CV: Shared<libc::pthread_cond_t> =
    Shared(std::cell::UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER));
static CV_READY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static POOL_STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs `hold` in a thread that holds a primitive for HOLD while this thread, 50 ms in, runs
/// `wait` (which blocks on it).
fn contend(hold: impl FnOnce() + Send + 'static, wait: impl FnOnce()) {
    let holder = std::thread::spawn(hold);
    std::thread::sleep(Duration::from_millis(50));
    wait();
    holder.join().expect("join holder");
}

/// Workload: a mutex, a read lock, a write lock, a condvar and a join, each waited for about
/// HOLD, while a pool thread stays parked on a condvar the whole time.
#[test]
#[ignore = "helper process of futex_waits_are_classified"]
fn helper_sync_primitives() {
    if !is_helper_run("helper_sync_primitives") {
        return;
    }
    use std::sync::atomic::Ordering;
    // SAFETY: (the whole closure) the pthread objects are statically initialized and live forever;
    // every lock is unlocked by the thread that took it.
    let pool = std::thread::spawn(|| unsafe {
        libc::pthread_mutex_lock(POOL_MUTEX.ptr());
        while !POOL_STOP.load(Ordering::SeqCst) {
            libc::pthread_cond_wait(POOL_COND.ptr(), POOL_MUTEX.ptr());
        }
        libc::pthread_mutex_unlock(POOL_MUTEX.ptr());
    });
    let hold_then = |lock: fn(), unlock: fn()| {
        move || {
            lock();
            std::thread::sleep(HOLD);
            unlock();
        }
    };
    // Mutex.
    contend(
        hold_then(
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_mutex_lock(MUTEX.ptr());
            },
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_mutex_unlock(MUTEX.ptr());
            },
        ),
        // SAFETY: pthread calls on statically initialized objects that live forever.
        || unsafe {
            libc::pthread_mutex_lock(MUTEX.ptr());
            libc::pthread_mutex_unlock(MUTEX.ptr());
        },
    );
    // Write lock waits for a reader.
    contend(
        hold_then(
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_rwlock_rdlock(RWLOCK.ptr());
            },
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_rwlock_unlock(RWLOCK.ptr());
            },
        ),
        // SAFETY: pthread calls on statically initialized objects that live forever.
        || unsafe {
            libc::pthread_rwlock_wrlock(RWLOCK.ptr());
            libc::pthread_rwlock_unlock(RWLOCK.ptr());
        },
    );
    // Read lock waits for a writer.
    contend(
        hold_then(
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_rwlock_wrlock(RWLOCK.ptr());
            },
            // SAFETY: pthread calls on statically initialized objects that live forever.
            || unsafe {
                libc::pthread_rwlock_unlock(RWLOCK.ptr());
            },
        ),
        // SAFETY: pthread calls on statically initialized objects that live forever.
        || unsafe {
            libc::pthread_rwlock_rdlock(RWLOCK.ptr());
            libc::pthread_rwlock_unlock(RWLOCK.ptr());
        },
    );
    // Condvar: this thread waits until the other signals, HOLD later.
    // SAFETY: pthread calls on statically initialized objects that live forever.
    let signaller = std::thread::spawn(|| unsafe {
        std::thread::sleep(HOLD);
        libc::pthread_mutex_lock(CV_MUTEX.ptr());
        CV_READY.store(true, Ordering::SeqCst);
        libc::pthread_cond_signal(CV.ptr());
        libc::pthread_mutex_unlock(CV_MUTEX.ptr());
    });
    // SAFETY: pthread calls on statically initialized objects that live forever.
    unsafe {
        libc::pthread_mutex_lock(CV_MUTEX.ptr());
        while !CV_READY.load(Ordering::SeqCst) {
            libc::pthread_cond_wait(CV.ptr(), CV_MUTEX.ptr());
        }
        libc::pthread_mutex_unlock(CV_MUTEX.ptr());
    }
    signaller.join().expect("join signaller");
    // Join: a thread that sleeps HOLD.
    std::thread::spawn(|| std::thread::sleep(HOLD))
        .join()
        .expect("join sleeper");
    // Release the pool.
    // SAFETY: pthread calls on statically initialized objects that live forever.
    unsafe {
        libc::pthread_mutex_lock(POOL_MUTEX.ptr());
        POOL_STOP.store(true, Ordering::SeqCst);
        libc::pthread_cond_broadcast(POOL_COND.ptr());
        libc::pthread_mutex_unlock(POOL_MUTEX.ptr());
    }
    pool.join().expect("join pool");
}

/// The opt-in mutex-hold probe measures its own cost when it attaches, and records how long a
/// pthread mutex was held, apart from how it was acquired, as holds (not waits).
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn mutex_hold_times() {
    require_bpf!();
    let profile = record("helper_holds_a_mutex", &["mutex-hold"]);
    let probe = &profile.metadata.probes[0];
    assert!(probe.hook.contains("measured"), "{probe:?}");
    let holds: Vec<_> = profile
        .waits
        .iter()
        .filter(|w| w.probe == "mutex-hold" && w.stats.max_ns >= HOLD.as_nanos() as u64)
        .collect();
    let count: u64 = holds.iter().map(|w| w.stats.count).sum();
    assert_eq!(count, 3, "{:#?}", profile.waits);
    assert!(holds.iter().all(|w| w.operation.starts_with("hold (")));
    // Hold time is not wait time: its own kind, which every total keeps apart from waits.
    assert!(
        profile
            .waits
            .iter()
            .all(|w| w.probe != "mutex-hold" || w.kind == WaitKind::Hold),
        "{:#?}",
        profile.waits
    );
    assert!(holds
        .iter()
        .all(|w| w.stats.max_ns < 2 * HOLD.as_nanos() as u64));
}

/// Workload: holds a pthread mutex three times for HOLD.
#[test]
#[ignore = "helper process of mutex_hold_times"]
fn helper_holds_a_mutex() {
    if !is_helper_run("helper_holds_a_mutex") {
        return;
    }
    for _ in 0..3 {
        // SAFETY: pthread calls on statically initialized objects that live forever.
        unsafe { libc::pthread_mutex_lock(MUTEX.ptr()) };
        std::thread::sleep(HOLD);
        // SAFETY: as above; this thread holds the mutex.
        unsafe { libc::pthread_mutex_unlock(MUTEX.ptr()) };
    }
}
