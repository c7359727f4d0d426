//! Supervising a run of dtrace: waiting for it, resuming a launched command once the probes
//! are enabled, interrupting dtrace when the recording is over and killing it when it lingers.

use super::output::StdoutFlags;
use super::process::{send_signal, LaunchedTarget, TargetWatch};
use super::Recorder;
use crate::Error;
use std::process::{Child, ExitStatus};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long dtrace may take to exit once it has printed `=== lockscope done` (everything
/// lockscope needs) before it is killed: DTrace for Linux lingers 3-7 s after `END` at the
/// default switch rate, and a recording should not.
const DONE_GRACE: Duration = Duration::from_secs(1);

/// How long a traced process may have been gone before dtrace is interrupted, if it has not
/// noticed by itself (DTrace for Linux with `-p` kept running after its target exited).
const GONE_GRACE: Duration = Duration::from_millis(200);

/// How long dtrace may keep every thread of its target in a tracing stop once the probes are
/// enabled before the recording ends: DTrace for Linux's process control once deadlocked with a
/// `-c` target stopped (its main thread waiting on a futex, its control thread in `wait4`), and
/// the recording waited for the target's exit for 26 minutes. Its own stops last milliseconds.
pub(super) const HELD_STOPPED_GRACE: Duration = Duration::from_secs(10);

/// How long a dtrace that held its target stopped has to exit after SIGINT before it is killed
/// (a deadlocked dtrace never does; killing it detaches and resumes the target).
const HELD_STOPPED_KILL: Duration = Duration::from_secs(2);

/// Why a recording ended when dtrace held its target stopped (see [`HELD_STOPPED_GRACE`]).
pub(super) const HELD_STOPPED: &str = "dtrace held the target stopped";

impl Recorder {
    /// Waits for dtrace, interrupting it when the duration elapses, the stop flag is set or
    /// the target has gone, and killing it when it does not finish within the grace period
    /// after that, or [`DONE_GRACE`] after it printed everything. A command the recorder
    /// launched is resumed once dtrace's BEGIN clause has printed.
    pub(super) fn supervise(
        &self,
        child: &mut Child,
        started: Instant,
        flags: &StdoutFlags,
        mut launched: Option<&mut LaunchedTarget>,
        watch: &mut TargetWatch,
    ) -> Result<(Option<ExitStatus>, Option<&'static str>), Error> {
        let mut interrupted: Option<(Instant, &'static str)> = None;
        let mut done_at: Option<Instant> = None;
        loop {
            if let Some(target) = launched.as_deref_mut() {
                target.reap();
                if !target.resumed && flags.began.load(Ordering::Acquire) {
                    // Never once reaped: its pid may belong to another process by then.
                    if !target.exited {
                        send_signal(target.pid(), libc::SIGCONT).map_err(|source| {
                            Error::Signal {
                                action: "resume",
                                pid: target.pid(),
                                source,
                            }
                        })?;
                    }
                    target.resumed = true;
                }
            }
            // Only once the probes are enabled: before, a -c target does not exist yet.
            if flags.began.load(Ordering::Acquire) && interrupted.is_none() {
                watch.began_at.get_or_insert_with(Instant::now);
                self.options.began.store(true, Ordering::Release);
                watch.poll(child.id());
                if let Some(gone) = watch.gone_since {
                    watch.ended_at.get_or_insert(gone);
                }
            }
            if let Some(status) = child.try_wait().map_err(|source| Error::Process {
                action: "wait for",
                source,
            })? {
                watch.ended_at.get_or_insert_with(Instant::now);
                return Ok((Some(status), interrupted.map(|(_, why)| why)));
            }
            let now = Instant::now();
            // The duration counts from BEGIN, when the probes are enabled (as the script's own
            // tick clause does), not from dtrace's start; a dtrace that never begins is still
            // stopped a duration after its start.
            let deadline = self
                .options
                .script
                .duration
                .map(|d| watch.began_at.unwrap_or(started) + d);
            if flags.done.load(Ordering::Acquire) {
                // Everything is printed: what dtrace does now is not worth waiting for.
                let at = *done_at.get_or_insert(now);
                watch.ended_at.get_or_insert(now);
                if now.duration_since(at) > DONE_GRACE {
                    let _ = child.kill();
                    return Ok((None, interrupted.map(|(_, why)| why)));
                }
            }
            match interrupted {
                None => {
                    let why = if self.options.stop.load(Ordering::Relaxed) {
                        Some("interrupted (stop requested)")
                    } else if deadline.is_some_and(|d| now >= d) {
                        Some("duration elapsed")
                    } else if watch.gone_for(GONE_GRACE) {
                        Some("target exited")
                    } else if watch.held_for(HELD_STOPPED_GRACE) {
                        Some(HELD_STOPPED)
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        watch.ended_at.get_or_insert(now);
                        // A failed signal means dtrace already exited; try_wait sees that next.
                        let _ = send_signal(child.id(), libc::SIGINT);
                        interrupted = Some((now, why));
                    }
                }
                Some((at, why))
                    if now.duration_since(at) > self.options.grace
                        || (why == HELD_STOPPED && now.duration_since(at) > HELD_STOPPED_KILL) =>
                {
                    child.kill().map_err(|source| Error::Process {
                        action: "kill",
                        source,
                    })?;
                }
                Some(_) => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
