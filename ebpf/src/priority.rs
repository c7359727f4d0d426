//! Thread priorities (nice values) for the recorder's own threads: unwind-table builders run a
//! few steps below the traced process, and the recorder's thread runs well above it while it loads
//! and attaches the BPF programs. Linux keeps a nice value per thread: `setpriority` with
//! `PRIO_PROCESS` and a thread id changes only that thread.

/// Highest (least favoured) nice value.
pub(crate) const MAX_NICE: i32 = 19;
/// Lowest (most favoured) nice value.
pub(crate) const MIN_NICE: i32 = -20;

/// Sets the calling thread's nice value; a failure (no CAP_SYS_NICE to go lower) leaves it as
/// it was, which still works, only slower.
pub(crate) fn set_thread_nice(nice: i32) -> bool {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: plain integers, no memory effects.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) == 0 }
}

/// The calling thread's nice value.
pub(crate) fn thread_nice() -> i32 {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    process_nice(tid as u32).unwrap_or(0)
}

/// The nice value of process (or thread) `pid`, `None` when it cannot be read.
pub(crate) fn process_nice(pid: u32) -> Option<i32> {
    // getpriority returns -1 both as a value and as an error: errno tells them apart.
    // SAFETY: __errno_location returns this thread's errno; writing it is how one clears it.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: getpriority takes plain integers and has no memory effects.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, pid) };
    // SAFETY: as above.
    let failed = nice == -1 && unsafe { *libc::__errno_location() } != 0;
    (!failed).then_some(nice)
}

/// The calling thread at the highest priority until dropped, then back at its own.
///
/// Loading the probes is a few hundred milliseconds of CPU, most of it the kernel verifying the
/// unwinder's programs on this thread. On a server whose busy threads keep every CPU's run queue
/// long (50 sysbench connections on 2 CPUs), that work at the default priority took 1-3 s of wall
/// time before recording could start; at the highest it takes the CPU time it needs, once.
pub(crate) struct RaisedPriority {
    restore: Option<i32>,
}

impl RaisedPriority {
    /// Raises the calling thread (only if allowed: root, or CAP_SYS_NICE).
    pub(crate) fn raise() -> Self {
        let own = thread_nice();
        let restore = (own > MIN_NICE && set_thread_nice(MIN_NICE)).then_some(own);
        RaisedPriority { restore }
    }
}

impl Drop for RaisedPriority {
    fn drop(&mut self) {
        if let Some(nice) = self.restore {
            set_thread_nice(nice);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Raising works as root and is undone on drop; without privileges nothing changes.
    #[test]
    fn raised_then_restored() {
        // A thread of its own: the test harness's thread keeps its priority.
        std::thread::spawn(|| {
            let own = thread_nice();
            {
                let raised = RaisedPriority::raise();
                if raised.restore.is_some() {
                    assert_eq!(thread_nice(), MIN_NICE);
                } else {
                    assert_eq!(thread_nice(), own);
                }
            }
            assert_eq!(thread_nice(), own);
        })
        .join()
        .expect("the test thread panicked");
    }
}
