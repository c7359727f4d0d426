//! Latency benchmarks of processes: pipe round trips and context switches between processes,
//! fork+exit, fork+exec and fork+sh.
//!
//! After `fork()` the child runs only async-signal-safe calls (`read`, `write`, `execve`,
//! `_exit`) on values prepared before the fork: the parent may have other threads (the test
//! harness, the scaling tests' leftovers), whose locks the child must never touch.

use super::{Fixture, RunError};
use std::ffi::{CStr, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

/// The byte passed around the ring.
const TOKEN: u8 = b't';
/// The byte that tells ring members to pass it on and exit.
const QUIT: u8 = b'q';

/// Children forked by a benchmark; killed and reaped on drop unless already reaped, so an
/// error never leaves processes behind.
struct Children {
    pids: Vec<libc::pid_t>,
}

impl Children {
    /// Waits for every child and checks each exited with status 0.
    fn reap(mut self) -> Result<(), RunError> {
        let pids = std::mem::take(&mut self.pids);
        for pid in pids {
            let status = wait_for(pid)?;
            check_exit(status, "ring member")?;
        }
        Ok(())
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // SAFETY: `pid` is our own child, not yet reaped, so the id is not reused.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = wait_for(pid);
        }
    }
}

/// `waitpid()` for one child, retrying on EINTR; returns the wait status.
fn wait_for(pid: libc::pid_t) -> Result<libc::c_int, RunError> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid int to write; `pid` is our child.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return Ok(status);
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Err(RunError::last_os_error("waitpid"));
        }
    }
}

/// Fails unless `status` says the child exited normally with status 0.
fn check_exit(status: libc::c_int, what: &str) -> Result<(), RunError> {
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        return Ok(());
    }
    let child = what.to_string();
    Err(if libc::WIFEXITED(status) {
        RunError::ChildExited {
            child,
            status: libc::WEXITSTATUS(status),
        }
    } else if libc::WIFSIGNALED(status) {
        RunError::ChildKilled {
            child,
            signal: libc::WTERMSIG(status),
        }
    } else {
        RunError::ChildEnded { child, status }
    })
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

/// A ring member's life after fork: read a byte, pass it on; on [`QUIT`] (or any error) exit.
/// Only async-signal-safe calls, no allocation, no panic.
fn ring_member(input: RawFd, output: RawFd) -> ! {
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: plain read/write/_exit on fds inherited from the parent and a stack buffer,
        // all async-signal-safe.
        unsafe {
            if libc::read(input, byte.as_mut_ptr().cast(), 1) != 1 {
                libc::_exit(1);
            }
            if libc::write(output, byte.as_ptr().cast(), 1) != 1 {
                libc::_exit(1);
            }
            if byte[0] == QUIT {
                libc::_exit(0);
            }
        }
    }
}

/// Passes a byte around a ring of `members` processes (this one and `members - 1` children,
/// linked by pipes) `laps` times; returns the time of the laps (forking excluded).
fn ring(members: usize, laps: u64) -> Result<Duration, RunError> {
    let pipes = (0..members)
        .map(|_| pipe())
        .collect::<Result<Vec<_>, _>>()?;
    // Member i reads pipe i and writes pipe i+1 (the last writes pipe 0, read by this process).
    let links: Vec<(RawFd, RawFd)> = (0..members)
        .map(|i| {
            (
                pipes[i].0.as_raw_fd(),
                pipes[(i + 1) % members].1.as_raw_fd(),
            )
        })
        .collect();
    let mut children = Children {
        pids: Vec::with_capacity(members),
    };
    for &(input, output) in links.iter().skip(1) {
        // SAFETY: the child only runs ring_member (async-signal-safe calls on prepared fds).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(RunError::last_os_error("fork"));
        }
        if pid == 0 {
            ring_member(input, output);
        }
        children.pids.push(pid);
    }
    let (input, output) = links[0];
    let pass = |byte: u8| -> Result<u8, RunError> {
        let mut buffer = [byte];
        // SAFETY: open fds of our pipes and a 1-byte stack buffer.
        if unsafe { libc::write(output, buffer.as_ptr().cast(), 1) } != 1 {
            return Err(RunError::last_os_error("write to the ring"));
        }
        // SAFETY: as above.
        if unsafe { libc::read(input, buffer.as_mut_ptr().cast(), 1) } != 1 {
            return Err(RunError::last_os_error("read from the ring"));
        }
        Ok(buffer[0])
    };
    let start = Instant::now();
    for _ in 0..laps {
        pass(TOKEN)?;
    }
    let elapsed = start.elapsed();
    if pass(QUIT)? != QUIT {
        return Err(RunError::RingByte);
    }
    children.reap()?;
    drop(pipes);
    Ok(elapsed)
}

/// A 1-byte round trip between 2 processes over a pair of pipes (lmbench's `lat_pipe`).
pub(crate) fn pipe_round_trip(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    ring(2, iterations)
}

/// One hop in a ring of 2 processes (each hop is a wake-up of the other process).
pub(crate) fn context_switch_2(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    Ok(ring(2, iterations)? / 2)
}

/// One hop in a ring of 8 processes.
pub(crate) fn context_switch_8(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    Ok(ring(8, iterations)? / 8)
}

/// `fork()`; the child `_exit(0)`s; the parent reaps it.
pub(crate) fn fork_exit(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let start = Instant::now();
    for _ in 0..iterations {
        // SAFETY: the child only calls _exit, which is async-signal-safe.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(RunError::last_os_error("fork"));
        }
        if pid == 0 {
            // SAFETY: _exit is async-signal-safe and skips the parent's atexit handlers.
            unsafe { libc::_exit(0) };
        }
        check_exit(wait_for(pid)?, "forked child")?;
    }
    Ok(start.elapsed())
}

/// The first of `candidates` that exists (`true` is /bin/true on Linux and FreeBSD,
/// /usr/bin/true on macOS).
fn find_program(candidates: &[&'static CStr]) -> Result<&'static CStr, RunError> {
    candidates
        .iter()
        .copied()
        .find(|path| std::path::Path::new(OsStr::from_bytes(path.to_bytes())).exists())
        .ok_or_else(|| RunError::NoProgram {
            candidates: candidates
                .iter()
                .map(|path| path.to_string_lossy().into_owned())
                .collect(),
        })
}

/// `fork()`; the child `execve()`s `program` with `arguments` (`argv[0]` is the program path);
/// the parent reaps it.
fn fork_exec(program: &CStr, arguments: &[&CStr], iterations: u64) -> Result<Duration, RunError> {
    let what = program.to_string_lossy().into_owned();
    // Prepared before the fork: the child must not allocate.
    let mut argv_pointers: Vec<*const libc::c_char> = std::iter::once(program)
        .chain(arguments.iter().copied())
        .map(CStr::as_ptr)
        .collect();
    argv_pointers.push(std::ptr::null());
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let start = Instant::now();
    for _ in 0..iterations {
        // SAFETY: the child only calls execve and _exit, both async-signal-safe, on data
        // prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(RunError::last_os_error("fork"));
        }
        if pid == 0 {
            // SAFETY: NUL-terminated path, null-terminated argv and envp arrays that outlive
            // the call; on failure the child exits with 127 like a shell would.
            unsafe {
                libc::execve(program.as_ptr(), argv_pointers.as_ptr(), envp.as_ptr());
                libc::_exit(127);
            }
        }
        check_exit(wait_for(pid)?, &format!("`{what}`"))?;
    }
    Ok(start.elapsed())
}

/// `fork()` + `execve("/bin/true")` + `waitpid()` (lmbench's "exec proc").
pub(crate) fn fork_exec_true(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let program = find_program(&[c"/bin/true", c"/usr/bin/true"])?;
    fork_exec(program, &[], iterations)
}

/// `fork()` + `execve("/bin/sh", "-c", "/bin/true")` + `waitpid()` (lmbench's "sh proc").
pub(crate) fn fork_sh(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let shell = find_program(&[c"/bin/sh"])?;
    let program = find_program(&[c"/bin/true", c"/usr/bin/true"])?;
    fork_exec(shell, &[c"-c", program], iterations)
}
