//! Thread benchmarks: context switch between 2 threads (over pipes, and by `sched_yield()` on one
//! CPU), thread create+join, a pthread mutex
//! handoff, and the thread-scaling tests (mutex contention, condvar work queue).

use super::pthread::{PthreadCondvar, PthreadMutex};
use super::{Fixture, RunError};
use std::collections::VecDeque;
use std::hint::black_box;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// CPU work that the optimizer cannot remove: `rounds` xorshift steps (a few ns each).
fn compute(seed: u64, rounds: u32) -> u64 {
    let mut x = seed | 1;
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    black_box(x)
}

/// A pipe: (read end, write end).
fn pipe() -> Result<(OwnedFd, OwnedFd), RunError> {
    let mut fds: [RawFd; 2] = [-1; 2];
    // SAFETY: `fds` has room for the two descriptors pipe() writes.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(RunError::last_os_error("pipe"));
    }
    // SAFETY: pipe() succeeded, so both fds are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Writes one byte to `output`, then reads one from `input`.
fn write_then_read(output: RawFd, input: RawFd, byte: u8) -> Result<u8, RunError> {
    let mut buffer = [byte];
    // SAFETY: open pipe fds and a 1-byte stack buffer.
    if unsafe { libc::write(output, buffer.as_ptr().cast(), 1) } != 1 {
        return Err(RunError::last_os_error("write to a pipe"));
    }
    // SAFETY: as above.
    if unsafe { libc::read(input, buffer.as_mut_ptr().cast(), 1) } != 1 {
        return Err(RunError::last_os_error("read from a pipe"));
    }
    Ok(buffer[0])
}

/// One hop between 2 threads that pass a byte back and forth over pipes (the thread version of
/// `ctx-2proc`).
pub(crate) fn context_switch(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    const QUIT: u8 = b'q';
    let (to_partner_read, to_partner_write) = pipe()?;
    let (from_partner_read, from_partner_write) = pipe()?;
    std::thread::scope(|scope| {
        let partner = std::thread::Builder::new()
            .spawn_scoped(scope, || -> Result<(), RunError> {
                let mut byte = [0u8; 1];
                loop {
                    // SAFETY: open pipe fds and a 1-byte stack buffer.
                    if unsafe {
                        libc::read(to_partner_read.as_raw_fd(), byte.as_mut_ptr().cast(), 1)
                    } != 1
                    {
                        return Err(RunError::last_os_error("read from a pipe"));
                    }
                    // SAFETY: as above.
                    if unsafe {
                        libc::write(from_partner_write.as_raw_fd(), byte.as_ptr().cast(), 1)
                    } != 1
                    {
                        return Err(RunError::last_os_error("write to a pipe"));
                    }
                    if byte[0] == QUIT {
                        return Ok(());
                    }
                }
            })
            .map_err(RunError::spawn)?;
        let (output, input) = (to_partner_write.as_raw_fd(), from_partner_read.as_raw_fd());
        // First lap outside the timing: the partner thread is surely running afterwards.
        let measured = write_then_read(output, input, b't').and_then(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                write_then_read(output, input, b't')?;
            }
            Ok(start.elapsed())
        });
        let stopped = write_then_read(output, input, QUIT);
        // If the quit byte did not get through, end of file still stops the partner.
        drop(to_partner_write);
        let joined = partner.join().map_err(|_| RunError::Panicked {
            thread: "the partner thread",
        })?;
        let elapsed = measured?;
        stopped?;
        joined?;
        Ok(elapsed / 2)
    })
}

/// Pins the calling thread to CPU `cpu`.
#[cfg(target_os = "linux")]
fn pin_to_cpu(cpu: usize) -> Result<(), RunError> {
    // SAFETY: an all-zero cpu_set_t is the empty set, a valid value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes inside `set`, and `cpu` is a CPU sched_getcpu() returned.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size given.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(RunError::last_os_error("sched_setaffinity"));
    }
    Ok(())
}

/// One switch between 2 runnable threads on one CPU that take turns with `sched_yield()`: the
/// switch a preemption makes (the thread leaves the CPU still runnable), without an interrupt
/// or a wakeup. On a CPU-bound server most switches are of this kind. Linux only: it needs both
/// threads on one CPU.
#[cfg(target_os = "linux")]
pub(crate) fn yield_switch(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    // SAFETY: sched_getcpu() has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    let cpu = usize::try_from(cpu).map_err(|_| RunError::last_os_error("sched_getcpu"))?;
    let started = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let partner = std::thread::Builder::new()
            .name("bench-yield".into())
            .spawn_scoped(scope, || -> Result<u64, RunError> {
                pin_to_cpu(cpu)?;
                started.store(true, Ordering::Release);
                let mut yields = 0u64;
                while !stop.load(Ordering::Acquire) {
                    // SAFETY: sched_yield() has no preconditions.
                    unsafe { libc::sched_yield() };
                    yields += 1;
                }
                Ok(yields)
            })
            .map_err(RunError::spawn)?;
        // The timed side runs in a thread of its own too, so the caller's affinity is untouched.
        let timed = std::thread::Builder::new()
            .name("bench-yield".into())
            .spawn_scoped(scope, || -> Result<Duration, RunError> {
                let pinned = pin_to_cpu(cpu);
                while pinned.is_ok() && !started.load(Ordering::Acquire) {
                    // SAFETY: sched_yield() has no preconditions.
                    unsafe { libc::sched_yield() };
                }
                let measured = pinned.map(|()| {
                    let start = Instant::now();
                    for _ in 0..iterations {
                        // SAFETY: sched_yield() has no preconditions.
                        unsafe { libc::sched_yield() };
                    }
                    start.elapsed()
                });
                stop.store(true, Ordering::Release);
                measured
            })
            .map_err(RunError::spawn);
        if timed.is_err() {
            stop.store(true, Ordering::Release);
        }
        let partner_yields = partner.join().map_err(|_| RunError::Panicked {
            thread: "the partner thread",
        })??;
        let elapsed = timed?.join().map_err(|_| RunError::Panicked {
            thread: "the timed thread",
        })??;
        // Each yield that found the other thread runnable switched to it; when the partner
        // yielded far less, the yields did not switch (another scheduler policy) and the time
        // is not a switch's.
        if partner_yields < iterations / 2 {
            return Err(RunError::YieldDidNotSwitch {
                partner_yields,
                iterations,
            });
        }
        Ok(elapsed / 2)
    })
}

/// The thread body of `thread-create`: returns at once.
extern "C" fn return_at_once(argument: *mut libc::c_void) -> *mut libc::c_void {
    argument
}

/// `pthread_create()` + `pthread_join()` of a thread that returns at once.
pub(crate) fn create_join(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let start = Instant::now();
    for _ in 0..iterations {
        // SAFETY: pthread_t is an integer or a pointer; pthread_create overwrites it.
        let mut thread: libc::pthread_t = unsafe { std::mem::zeroed() };
        // SAFETY: default attributes (null), a body that touches nothing, a null argument.
        let rc = unsafe {
            libc::pthread_create(
                &mut thread,
                std::ptr::null(),
                return_at_once,
                std::ptr::null_mut(),
            )
        };
        if rc != 0 {
            return Err(RunError::Call {
                call: "pthread_create",
                source: std::io::Error::from_raw_os_error(rc),
            });
        }
        // SAFETY: `thread` was created above, joinable, and is joined exactly once.
        let rc = unsafe { libc::pthread_join(thread, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(RunError::Call {
                call: "pthread_join",
                source: std::io::Error::from_raw_os_error(rc),
            });
        }
    }
    Ok(start.elapsed())
}

/// Whose turn it is in the handoff.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// The partner thread has not started yet.
    Starting,
    Main,
    Partner,
}

/// One handoff: a thread waits for its turn on a pthread mutex+condvar, then gives the turn to
/// the other thread (which sleeps in `pthread_cond_wait` until then). The lock ping-pong a
/// commenter on the seed article asked for.
pub(crate) fn mutex_handoff(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let turn = Box::new(PthreadMutex::new(Turn::Starting));
    let changed = Box::new(PthreadCondvar::new());
    // Each iteration is a round of two handoffs, one each way.
    let rounds = iterations;
    let take_turns = |me: Turn, other: Turn| {
        for _ in 0..rounds {
            let mut guard = turn.lock();
            while *guard != me {
                guard = changed.wait(guard);
            }
            *guard = other;
            changed.signal();
        }
    };
    std::thread::scope(|scope| {
        let partner = std::thread::Builder::new()
            .name("bench-handoff".into())
            .spawn_scoped(scope, || {
                {
                    let mut guard = turn.lock();
                    *guard = Turn::Main;
                    changed.signal();
                }
                take_turns(Turn::Partner, Turn::Main);
            })
            .map_err(RunError::spawn)?;
        {
            let mut guard = turn.lock();
            while *guard == Turn::Starting {
                guard = changed.wait(guard);
            }
        }
        let start = Instant::now();
        take_turns(Turn::Main, Turn::Partner);
        let elapsed = start.elapsed();
        partner.join().map_err(|_| RunError::Panicked {
            thread: "the partner thread",
        })?;
        Ok(elapsed / 2)
    })
}

/// State of the start gate of the scaling workers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GateState {
    Closed,
    Open,
    /// Spawning failed: workers return without working.
    Aborted,
}

/// Holds the workers until all are spawned, so spawning is not timed.
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            state: Mutex::new(GateState::Closed),
            changed: Condvar::new(),
        }
    }

    /// Blocks until the gate opens (true) or is aborted (false).
    fn pass(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while *state == GateState::Closed {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *state == GateState::Open
    }

    fn set(&self, new: GateState) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = new;
        self.changed.notify_all();
    }
}

/// Runs `count` threads of `worker(index)` for `duration` after all are spawned; `stop` tells
/// them to return. Returns the sum of the operations they report and the time from the start
/// signal to the stop signal.
fn run_workers(
    count: usize,
    duration: Duration,
    worker: &(dyn Fn(usize) -> u64 + Sync),
    stop: &dyn Fn(),
) -> Result<(u64, Duration), RunError> {
    let gate = Gate::new();
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(count);
        for index in 0..count {
            let gate = &gate;
            let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
                if gate.pass() {
                    worker(index)
                } else {
                    0
                }
            });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(error) => {
                    gate.set(GateState::Aborted);
                    return Err(RunError::Spawn {
                        thread: format!("worker thread {}", index + 1),
                        source: error,
                    });
                }
            }
        }
        let start = Instant::now();
        gate.set(GateState::Open);
        std::thread::sleep(duration);
        stop();
        let elapsed = start.elapsed();
        let mut operations: u64 = 0;
        for handle in handles {
            operations += handle.join().map_err(|_| RunError::Panicked {
                thread: "a worker thread",
            })?;
        }
        Ok((operations, elapsed))
    })
}

/// xorshift rounds inside the critical section of `mutex-contention` (tens of ns).
const ROUNDS_LOCKED: u32 = 25;
/// xorshift rounds outside it (hundreds of ns): most of the time is spent unlocked.
const ROUNDS_UNLOCKED: u32 = 250;

/// `threads` threads repeatedly lock one shared pthread mutex, update shared state, unlock and
/// compute privately; one operation is one such cycle.
pub(crate) fn mutex_contention(
    threads: u32,
    duration: Duration,
) -> Result<(u64, Duration), RunError> {
    let shared = Box::new(PthreadMutex::new(0u64));
    let stop = AtomicBool::new(false);
    let worker = |index: usize| {
        let mut private = index as u64;
        let mut operations = 0;
        while !stop.load(Ordering::Relaxed) {
            {
                let mut state = shared.lock();
                *state = compute(*state, ROUNDS_LOCKED);
            }
            private = compute(private, ROUNDS_UNLOCKED);
            operations += 1;
        }
        operations
    };
    run_workers(threads as usize, duration, &worker, &|| {
        stop.store(true, Ordering::Relaxed)
    })
}

/// Most items waiting in the work queue before the producer blocks.
const QUEUE_CAPACITY: usize = 64;
/// xorshift rounds of work per item, done by a consumer without the lock.
const ROUNDS_PER_ITEM: u32 = 500;

/// The work queue of `condvar-queue`.
struct Queue {
    items: VecDeque<u64>,
    stopping: bool,
}

/// One producer thread feeds a bounded queue (pthread mutex, "not empty" and "not full"
/// condvars) that `threads` consumer threads drain, each doing some work per item outside the
/// lock: MySQL's one-listener, many-connection-threads pattern. One operation is one item
/// consumed.
pub(crate) fn condvar_queue(threads: u32, duration: Duration) -> Result<(u64, Duration), RunError> {
    let queue = Box::new(PthreadMutex::new(Queue {
        items: VecDeque::with_capacity(QUEUE_CAPACITY),
        stopping: false,
    }));
    let not_empty = Box::new(PthreadCondvar::new());
    let not_full = Box::new(PthreadCondvar::new());
    let produce = || {
        let mut next = 0u64;
        loop {
            let mut guard = queue.lock();
            while guard.items.len() >= QUEUE_CAPACITY && !guard.stopping {
                guard = not_full.wait(guard);
            }
            if guard.stopping {
                return;
            }
            guard.items.push_back(next);
            next += 1;
            not_empty.signal();
        }
    };
    let consume = || {
        let mut operations = 0;
        loop {
            let item = {
                let mut guard = queue.lock();
                while guard.items.is_empty() && !guard.stopping {
                    guard = not_empty.wait(guard);
                }
                if guard.stopping {
                    break;
                }
                let item = guard.items.pop_front();
                not_full.signal();
                item
            };
            if let Some(item) = item {
                compute(item, ROUNDS_PER_ITEM);
                operations += 1;
            }
        }
        operations
    };
    // Worker 0 is the producer; it reports no operations.
    let worker = |index: usize| {
        if index == 0 {
            produce();
            0
        } else {
            consume()
        }
    };
    let stop = || {
        let mut guard = queue.lock();
        guard.stopping = true;
        not_empty.broadcast();
        not_full.broadcast();
    };
    run_workers(threads as usize + 1, duration, &worker, &stop)
}
