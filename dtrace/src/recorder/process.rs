//! Process control: the command the recorder launched, the traced process watched while dtrace
//! runs (`/proc` on Linux), signals, and dtrace's signal dispositions.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How long a launched command gets to exit after SIGTERM, when the recording ends before it
/// does, before it is killed.
const TERMINATE_GRACE: Duration = Duration::from_secs(2);

/// A command the recorder started and stopped, until dtrace has attached.
pub(super) struct LaunchedTarget {
    pub(super) child: Child,
    /// Resumed with SIGCONT after dtrace's BEGIN clause printed.
    pub(super) resumed: bool,
    /// Reaped (its exit status collected).
    pub(super) exited: bool,
}

impl LaunchedTarget {
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Collects its exit status if it has exited, so it leaves no zombie behind (dtrace -p
    /// waits for the process to go away).
    pub(super) fn reap(&mut self) {
        if !self.exited && matches!(self.child.try_wait(), Ok(Some(_))) {
            self.exited = true;
        }
    }

    /// Ends a command that is still running when the recording is over, as the eBPF backend
    /// does: SIGTERM, SIGCONT (it may be stopped; the SIGTERM is then handled before anything
    /// else), then SIGKILL after [`TERMINATE_GRACE`]. A command never resumed (dtrace never
    /// attached) has not reached `main`: it is killed outright.
    pub(super) fn terminate(&mut self) {
        self.reap();
        if self.exited {
            return;
        }
        if !self.resumed {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.exited = true;
            return;
        }
        let pid = self.pid();
        let ended = lockscope_probes::host::terminate(pid, TERMINATE_GRACE, || {
            self.reap();
            self.exited
        });
        if ended == lockscope_probes::host::Ended::Killed {
            let _ = self.child.wait();
            self.exited = true;
        }
    }
}

/// The traced process, watched while dtrace runs: on Linux its mappings are snapshotted so
/// that its frames can be symbolized after it exited, and its exit ends the recording.
#[derive(Default)]
pub(super) struct TargetWatch {
    /// Its pid: the `-p` pid, or found as dtrace's child with `-c` (0 until found).
    pub(super) pid: u32,
    /// Found as dtrace's child (`-c`), not given.
    pub(super) child_of_dtrace: bool,
    /// Its start time (`/proc/PID/stat` field 22), to know it is still the same process.
    start_time: Option<u64>,
    /// When it was first seen gone.
    pub(super) gone_since: Option<Instant>,
    /// Since when every one of its threads has been in a tracing stop of dtrace's, if they are.
    held_since: Option<Instant>,
    /// When dtrace's BEGIN line was seen: the recording starts when the probes are enabled,
    /// not when dtrace starts (it takes a second or more to compile and load them).
    pub(super) began_at: Option<Instant>,
    /// When the recording ended: the target gone, dtrace interrupted, or END printed.
    pub(super) ended_at: Option<Instant>,
    /// Every executable mapping seen while it lived.
    #[cfg(target_os = "linux")]
    pub(super) maps: crate::symbolize::MapsSnapshot,
    /// Without one target (several processes, every process): which processes to watch.
    pub(super) many: Option<Many>,
    /// ... and each one's mappings seen while it lived, by pid (Linux).
    #[cfg(target_os = "linux")]
    pub(super) processes: std::collections::BTreeMap<u32, crate::symbolize::MapsSnapshot>,
    /// When they were last scanned.
    last_scan: Option<Instant>,
}

/// The processes a recording without one target watches (on Linux, for their mappings).
#[derive(Clone, Debug)]
pub(super) enum Many {
    /// These and their descendants (the script follows the children they fork).
    Pids(std::collections::BTreeSet<u32>),
    /// Every process.
    All,
}

/// How often the processes of a recording without one target are scanned for their mappings.
const SCAN_INTERVAL: Duration = Duration::from_millis(250);

impl TargetWatch {
    /// Refreshes what is known about the target; `dtrace_pid` finds a `-c` child.
    pub(super) fn poll(&mut self, dtrace_pid: u32) {
        if let Some(many) = &self.many {
            #[cfg(target_os = "linux")]
            if self
                .last_scan
                .is_none_or(|at| at.elapsed() >= SCAN_INTERVAL)
            {
                let pids: Vec<u32> = match many {
                    Many::Pids(given) => given
                        .iter()
                        .copied()
                        .chain(lockscope_probes::procfs::descendants(given))
                        .collect(),
                    Many::All => lockscope_probes::procfs::all_processes(),
                };
                let own = std::process::id();
                for pid in pids.into_iter().filter(|&p| p != own && p != dtrace_pid) {
                    self.processes.entry(pid).or_default().refresh(pid);
                }
                self.last_scan = Some(Instant::now());
            }
            #[cfg(not(target_os = "linux"))]
            let _ = many;
            return;
        }
        if self.child_of_dtrace && self.pid == 0 {
            self.pid = first_child(dtrace_pid).unwrap_or(0);
            self.start_time = start_time(self.pid);
        }
        if self.pid == 0 || self.gone_since.is_some() {
            return;
        }
        #[cfg(target_os = "linux")]
        let alive = self.maps.refresh(self.pid) && !is_gone(self.pid);
        #[cfg(not(target_os = "linux"))]
        let alive = send_signal(self.pid, 0).is_ok();
        if !alive {
            self.gone_since = Some(Instant::now());
            return;
        }
        #[cfg(target_os = "linux")]
        if held_stopped(self.pid, dtrace_pid) {
            self.held_since.get_or_insert_with(Instant::now);
        } else {
            self.held_since = None;
        }
    }

    /// True when dtrace has held every thread of the target stopped for longer than `grace`.
    pub(super) fn held_for(&self, grace: Duration) -> bool {
        self.held_since.is_some_and(|at| at.elapsed() > grace)
    }

    /// True when the target has been gone for longer than `grace`.
    pub(super) fn gone_for(&self, grace: Duration) -> bool {
        self.gone_since.is_some_and(|at| at.elapsed() > grace)
    }
}

/// Ends a command `dtrace -c` launched that outlives the recording (dtrace does not end it when
/// interrupted), as the eBPF backend ends its launched command: SIGTERM, then SIGKILL after
/// [`TERMINATE_GRACE`]. Only while it is the same process (same start time): once dtrace is
/// gone it is no child of anyone lockscope knows, and its pid could be reused.
pub(super) fn end_launched_command(watch: &TargetWatch) {
    let Some(started) = watch.start_time else {
        return;
    };
    let same = || watch.pid != 0 && start_time(watch.pid) == Some(started) && !is_gone(watch.pid);
    // `gone` checks it is still the same process before every signal.
    lockscope_probes::host::terminate(watch.pid, TERMINATE_GRACE, || !same());
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks since boot.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces and parentheses), from field 3 on.
    stat.rsplit_once(") ")?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// True when every thread of `pid` is in a tracing stop (state `t`) of a thread of
/// `dtrace_pid`'s. The main thread is read first: a running target costs one read.
#[cfg(target_os = "linux")]
pub(super) fn held_stopped(pid: u32, dtrace_pid: u32) -> bool {
    let state = |path: std::path::PathBuf| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|stat| stat.rsplit_once(") ")?.1.chars().next())
    };
    let tgid_of = |tid: &str| {
        let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))?
            .trim()
            .parse::<u32>()
            .ok()
    };
    if state(format!("/proc/{pid}/stat").into()) != Some('t') {
        return false;
    }
    let traced_by_dtrace = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let tracer = status.lines().find_map(|l| l.strip_prefix("TracerPid:"))?;
            tgid_of(tracer.trim())
        })
        .is_some_and(|tgid| tgid == dtrace_pid);
    traced_by_dtrace
        && std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| {
            tasks
                .flatten()
                .all(|task| state(task.path().join("stat")) == Some('t'))
        })
}

/// True when `pid` no longer runs (gone, or a zombie).
fn is_gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state == 'Z' || state == 'X')
        })
        .unwrap_or(true)
}

/// The first child process of `pid` (Linux: `/proc/PID/task/*/children`).
fn first_child(pid: u32) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    tasks.flatten().find_map(|task| {
        std::fs::read_to_string(task.path().join("children"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

/// The status of a dtrace the recorder killed with SIGKILL and did not wait for.
pub(super) fn killed_status() -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    ExitStatus::from_raw(libc::SIGKILL)
}

/// True when dtrace was ended by a signal (SIGKILL from the OOM killer or a user).
pub(super) fn killed_by_signal(status: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal().is_some()
}

/// dtrace must stop on SIGINT and SIGTERM, which is how the recorder ends a recording: a process
/// started in the background by a non-interactive shell inherits SIGINT as ignored (and
/// lockscope's own handlers are reset at exec, but an ignored disposition is not), so the
/// child gets the default dispositions and an empty signal mask back before it runs dtrace.
///
/// And it must get exactly one SIGINT: a second one makes dtrace "impatient", and it exits
/// without running END or printing its aggregations (the recording is lost). A Ctrl-C at the
/// terminal signals the whole foreground process group, so dtrace gets its own process group:
/// the terminal's SIGINT reaches lockscope only, which passes one on.
pub(super) fn restore_stop_signals(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    // SAFETY: between fork and exec only async-signal-safe calls are made (signal,
    // sigemptyset, sigprocmask), on memory owned by this closure's stack.
    unsafe {
        command.pre_exec(|| {
            for signal in [libc::SIGINT, libc::SIGTERM] {
                if libc::signal(signal, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Sends `signal` to `pid`.
pub(super) fn send_signal(pid: u32, signal: libc::c_int) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill has no memory-safety preconditions; pid is a child we started (dtrace or the
    // launched command), which we have not reaped yet, so the pid is not reused.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Waits until the child `pid` has stopped (true) or ended (false; it is then reaped, so
/// `Child::try_wait` must not be asked again).
pub(super) fn wait_until_stopped(pid: u32) -> std::io::Result<bool> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "pid out of range"))?;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid, writable int; pid is our unreaped child.
        let waited = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        if waited == pid {
            return Ok(libc::WIFSTOPPED(status));
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}
