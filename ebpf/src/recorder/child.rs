//! A launched command ([`Target::Command`](lockscope_probes::Target::Command)): reaping it when it
//! exits, and terminating it when the recording ends before it does.

use lockscope_probes::host;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

/// How long a launched command gets to exit after SIGTERM before it is killed.
const TERMINATE_GRACE: Duration = Duration::from_secs(2);

/// A launched command.
#[derive(Debug)]
pub(super) struct Child {
    pub(super) pid: libc::pid_t,
    /// Its wait status, once reaped.
    pub(super) status: Option<ExitStatus>,
}

impl Child {
    /// Reaps the child if it exited; true when it has.
    pub(super) fn try_reap(&mut self) -> bool {
        if self.status.is_none() {
            let mut status = 0;
            // SAFETY: non-blocking wait for our own child; `status` is a valid out pointer.
            if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } == self.pid {
                self.status = Some(ExitStatus::from_raw(status));
            }
        }
        self.status.is_some()
    }

    /// Asks a still running child to terminate (SIGTERM, then SIGKILL after a grace period) and
    /// reaps it. Its pid is ours until reaped, so it cannot have been reused.
    pub(super) fn terminate(&mut self) {
        let ended = host::terminate(self.pid as u32, TERMINATE_GRACE, || self.try_reap());
        if ended == host::Ended::Killed {
            let mut status = 0;
            // SAFETY: blocking wait for our own child; `status` is a valid out pointer.
            while unsafe { libc::waitpid(self.pid, &mut status, 0) } < 0
                && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
            {}
            self.status = Some(ExitStatus::from_raw(status));
        }
    }
}
