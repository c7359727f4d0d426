//! Launching the target command only once the probes are attached, as `perf record` does.
//!
//! `std::process::Command::spawn` returns only after exec, too late to attach before the command
//! runs. So: fork; the child (async-signal-safe calls only) blocks on a "go" pipe; the parent
//! registers the child's pid with the probes, attaches them and writes "go"; the child execs, or
//! writes its errno into a close-on-exec error pipe and exits 127. End of file on the error pipe
//! therefore means the exec succeeded.

use crate::error::Error;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// Default search path when `PATH` is unset (as glibc's execvp uses).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// A forked child waiting for "go".
#[derive(Debug)]
pub struct PendingChild {
    pid: libc::pid_t,
    command: String,
    /// Write end of the go pipe; `None` once released.
    go: Option<OwnedFd>,
    /// Read end of the error pipe.
    errors: OwnedFd,
}

/// The candidates execvp would try for `program`, in order.
pub(crate) fn exec_candidates(program: &OsStr) -> Vec<Vec<u8>> {
    let program = program.as_bytes();
    if program.contains(&b'/') {
        return vec![program.to_vec()];
    }
    // PATH is read where it is used: it is this process's environment for the command it
    // launches (as execvp reads it), not configuration of the library.
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    path.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| {
            let dir = if dir.is_empty() { &b"."[..] } else { dir };
            let mut candidate = dir.to_vec();
            candidate.push(b'/');
            candidate.extend_from_slice(program);
            candidate
        })
        .collect()
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl PendingChild {
    /// Forks a child that will exec `argv` once [`PendingChild::release`] is called.
    pub fn fork(argv: &[OsString]) -> Result<Self, Error> {
        let program = argv.first().ok_or(Error::EmptyCommand)?;
        let command = program.to_string_lossy().into_owned();
        let launch_error = |source| Error::Launch {
            command: command.clone(),
            source,
        };
        let nul_error = |_| {
            launch_error(io::Error::new(
                io::ErrorKind::InvalidInput,
                "argument contains NUL",
            ))
        };

        // Everything the child needs is allocated before fork: it may not allocate.
        let args: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(nul_error)?;
        let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        arg_ptrs.push(std::ptr::null());
        let candidates: Vec<CString> = exec_candidates(program)
            .into_iter()
            .map(CString::new)
            .collect::<Result<_, _>>()
            .map_err(nul_error)?;

        let (go_read, go_write) = pipe().map_err(launch_error)?;
        let (errors_read, errors_write) = pipe().map_err(launch_error)?;

        // SAFETY: fork is safe to call; in the child we only make async-signal-safe calls
        // (sigprocmask, close, read, execv, write, _exit) on memory prepared above.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(launch_error(io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: we are the child of a fork; see child_after_fork.
            unsafe {
                child_after_fork(
                    go_read.as_raw_fd(),
                    [go_write.as_raw_fd(), errors_read.as_raw_fd()],
                    errors_write.as_raw_fd(),
                    &candidates,
                    &arg_ptrs,
                )
            }
        }
        drop(go_read);
        drop(errors_write);
        Ok(PendingChild {
            pid,
            command,
            go: Some(go_write),
            errors: errors_read,
        })
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Lets the child exec; returns once the exec succeeded, or reaps the child and reports why
    /// it failed.
    pub fn release(mut self) -> Result<(), Error> {
        let launch_error = |source| Error::Launch {
            command: self.command.clone(),
            source,
        };
        if let Some(go) = self.go.take() {
            // SAFETY: writes one byte from a valid buffer to an open descriptor.
            if unsafe { libc::write(go.as_raw_fd(), b"g".as_ptr().cast(), 1) } != 1 {
                return Err(launch_error(io::Error::last_os_error()));
            }
        }
        let mut errno = [0u8; 4];
        let mut filled = 0;
        while filled < errno.len() {
            // SAFETY: reads into the unfilled tail of `errno`, which is that long.
            let n = unsafe {
                libc::read(
                    self.errors.as_raw_fd(),
                    errno[filled..].as_mut_ptr().cast(),
                    errno.len() - filled,
                )
            };
            match n {
                0 => break,
                n if n > 0 => filled += n as usize,
                _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
                _ => return Err(launch_error(io::Error::last_os_error())),
            }
        }
        if filled == 0 {
            // End of file without an errno: the exec closed the pipe. The child is ours now.
            self.pid = 0;
            return Ok(());
        }
        Err(launch_error(io::Error::from_raw_os_error(
            i32::from_ne_bytes(errno),
        )))
    }
}

impl Drop for PendingChild {
    /// A child never released (attach failed) or whose exec failed: close "go" so it exits, and
    /// reap it.
    fn drop(&mut self) {
        if self.pid <= 0 {
            return;
        }
        self.go = None;
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out pointer.
        while unsafe { libc::waitpid(self.pid, &mut status, 0) } < 0
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
    }
}

/// The child's side of the fork: wait for "go", then exec like execvp does.
///
/// # Safety
/// Call only in the child right after fork, with open descriptors and NUL-terminated strings;
/// `args` must end with a null pointer. Only async-signal-safe functions are called here.
unsafe fn child_after_fork(
    go: libc::c_int,
    parent_ends: [libc::c_int; 2],
    errors: libc::c_int,
    candidates: &[CString],
    args: &[*const libc::c_char],
) -> ! {
    // SAFETY: (the whole body) plain system calls on descriptors and buffers valid in this
    // process; no allocation, no locks.
    unsafe {
        // The launcher may block signals (e.g. a signal-handling thread); the command must not
        // inherit that.
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        for fd in parent_ends {
            libc::close(fd);
        }
        let mut byte = 0u8;
        loop {
            match libc::read(go, (&mut byte as *mut u8).cast(), 1) {
                1 => break,
                n if n < 0 && *libc::__errno_location() == libc::EINTR => {}
                // End of file: the parent gave up (attach failed) or died.
                _ => libc::_exit(127),
            }
        }
        let mut error = libc::ENOENT;
        let mut denied = false;
        for candidate in candidates {
            libc::execv(candidate.as_ptr(), args.as_ptr());
            match *libc::__errno_location() {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR => {}
                other => {
                    error = other;
                    break;
                }
            }
        }
        if denied && error == libc::ENOENT {
            error = libc::EACCES;
        }
        let bytes = error.to_ne_bytes();
        libc::write(errors, bytes.as_ptr().cast(), bytes.len());
        libc::_exit(127)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names with a slash are used as given; bare names are searched on PATH.
    #[test]
    fn candidates_follow_execvp() {
        assert_eq!(exec_candidates(OsStr::new("./a")), vec![b"./a".to_vec()]);
        let found = exec_candidates(OsStr::new("sh"));
        assert!(found.iter().all(|c| c.ends_with(b"/sh")));
        assert!(!found.is_empty());
    }

    /// A missing command is reported with the OS error, and the child is reaped.
    #[test]
    fn missing_command_reported() {
        let child = PendingChild::fork(&["lockscope-no-such-command".into()]).expect("fork");
        let err = child.release().expect_err("exec succeeded");
        assert_eq!(
            err.to_string(),
            "failed to start `lockscope-no-such-command`"
        );
        let source = std::error::Error::source(&err).expect("the OS error is the source");
        assert_eq!(source.to_string(), "No such file or directory (os error 2)");
    }

    /// A released child runs the command; an unreleased one exits without running it.
    #[test]
    fn release_runs_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        let marker = dir.path().join("ran");
        let script = format!("touch {}", marker.display());
        let argv: Vec<OsString> = vec!["sh".into(), "-c".into(), script.into()];
        let child = PendingChild::fork(&argv).expect("fork");
        let pid = child.pid() as libc::pid_t;
        child.release().expect("exec");
        let mut status = 0;
        // SAFETY: waits for our own child with a valid out pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(marker.exists());

        let never = dir.path().join("never");
        let argv: Vec<OsString> = vec![
            "sh".into(),
            "-c".into(),
            format!("touch {}", never.display()).into(),
        ];
        drop(PendingChild::fork(&argv).expect("fork"));
        assert!(!never.exists());
    }
}
