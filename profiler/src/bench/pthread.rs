//! Thin wrappers over the C library's `pthread_mutex_t` and `pthread_cond_t`.
//!
//! The thread benchmarks measure the platform's pthread primitives, the ones C servers (MySQL)
//! use, not Rust's `std::sync` (which on Linux is its own futex code and would hide libc).
//! Each keeps its pthread object in a box of its own, so it never moves once a thread used it
//! (POSIX leaves a moved mutex or condition variable undefined; macOS's do break), even when the
//! wrapper moves.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

/// A `pthread_mutex_t` (default attributes) protecting a `T`.
pub(crate) struct PthreadMutex<T> {
    raw: Box<UnsafeCell<libc::pthread_mutex_t>>,
    data: UnsafeCell<T>,
}

// SAFETY: the data is only reached through a guard, which exists only while the pthread mutex is
// held, so at most one thread accesses it at a time; pthread mutexes may be used from any thread.
unsafe impl<T: Send> Sync for PthreadMutex<T> {}
// SAFETY: as above; moving the whole mutex to another thread is fine while nobody holds it.
unsafe impl<T: Send> Send for PthreadMutex<T> {}

impl<T> PthreadMutex<T> {
    /// A new, unlocked mutex holding `data`.
    pub(crate) fn new(data: T) -> Self {
        PthreadMutex {
            raw: Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER)),
            data: UnsafeCell::new(data),
        }
    }

    /// Locks the mutex, blocking until it is free.
    pub(crate) fn lock(&self) -> PthreadGuard<'_, T> {
        // SAFETY: `raw` was initialized with PTHREAD_MUTEX_INITIALIZER and never moves (boxed);
        // a default mutex locked by a thread that does not hold it cannot fail.
        let rc = unsafe { libc::pthread_mutex_lock(self.raw.get()) };
        debug_assert_eq!(rc, 0, "pthread_mutex_lock");
        PthreadGuard { mutex: self }
    }
}

impl<T> Drop for PthreadMutex<T> {
    fn drop(&mut self) {
        // SAFETY: we own the mutex (`&mut self`), so no guard exists and no thread waits on it.
        unsafe { libc::pthread_mutex_destroy(self.raw.get()) };
    }
}

/// Proof that the calling thread holds a [`PthreadMutex`]; unlocks it when dropped.
pub(crate) struct PthreadGuard<'a, T> {
    mutex: &'a PthreadMutex<T>,
}

impl<T> Deref for PthreadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the mutex.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T> DerefMut for PthreadGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this thread holds the mutex, and `&mut self`
        // makes this the only reference handed out by it.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T> Drop for PthreadGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this thread locked the mutex when it made the guard and still holds it.
        let rc = unsafe { libc::pthread_mutex_unlock(self.mutex.raw.get()) };
        debug_assert_eq!(rc, 0, "pthread_mutex_unlock");
    }
}

/// A `pthread_cond_t` (default attributes).
pub(crate) struct PthreadCondvar {
    raw: Box<UnsafeCell<libc::pthread_cond_t>>,
}

// SAFETY: pthread condition variables are made to be shared between threads.
unsafe impl Sync for PthreadCondvar {}
// SAFETY: as above; moving it while no thread waits on it is fine.
unsafe impl Send for PthreadCondvar {}

impl PthreadCondvar {
    /// A new condition variable.
    pub(crate) fn new() -> Self {
        PthreadCondvar {
            raw: Box::new(UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER)),
        }
    }

    /// Atomically unlocks the guard's mutex and sleeps until signalled (or a spurious wake-up),
    /// then locks it again. Callers re-check their condition in a loop.
    pub(crate) fn wait<'a, T>(&self, guard: PthreadGuard<'a, T>) -> PthreadGuard<'a, T> {
        // SAFETY: both objects are initialized and never move (boxed); the guard proves this
        // thread holds the mutex, as pthread_cond_wait requires.
        let rc = unsafe { libc::pthread_cond_wait(self.raw.get(), guard.mutex.raw.get()) };
        debug_assert_eq!(rc, 0, "pthread_cond_wait");
        guard
    }

    /// Wakes one waiter, if any.
    pub(crate) fn signal(&self) {
        // SAFETY: `raw` is initialized and never moves (boxed).
        unsafe { libc::pthread_cond_signal(self.raw.get()) };
    }

    /// Wakes every waiter.
    pub(crate) fn broadcast(&self) {
        // SAFETY: `raw` is initialized and never moves (boxed).
        unsafe { libc::pthread_cond_broadcast(self.raw.get()) };
    }
}

impl Drop for PthreadCondvar {
    fn drop(&mut self) {
        // SAFETY: we own the condition variable, so no thread waits on it.
        unsafe { libc::pthread_cond_destroy(self.raw.get()) };
    }
}
