//! Starting the attempts of a recording: the command the recorder launches itself, and each run
//! of dtrace on the script with its output readers (run again without a probe whose description
//! matches nothing).

use super::diagnose::{diagnose, probe_of_message};
use super::output::{
    copy_target_output, read_stderr, read_stdout, OutputPipe, StdoutFlags, OUTPUT_EOF,
    OUTPUT_FD_PATH,
};
use super::process::{
    killed_by_signal, killed_status, restore_stop_signals, send_signal, wait_until_stopped,
    LaunchedTarget, Many, TargetWatch,
};
use super::Recorder;
use crate::bottleneck::BottleneckStream;
use crate::catalog::{DtraceProbe, MACOS_INTROSPECTION};
use crate::parse::Output;
use crate::script::generate_script;
use crate::script::ScriptTarget;
use crate::Error;
use lockscope_probes::catalog::{FUTEX, WAITFOR};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How many times dtrace runs again after it could not enable its probes, and the pause before
/// each run: a dtrace that is ending takes a few seconds to remove its uprobes.
const ENABLING_RETRIES: u32 = 2;
const ENABLING_RETRY_PAUSE: Duration = Duration::from_secs(2);

/// The run of dtrace that recorded, the probes it ran with, and the probes left out before it
/// (with dtrace's message).
pub(super) struct Outcome {
    pub(super) attempt: Attempt,
    pub(super) probes: Vec<&'static DtraceProbe>,
    pub(super) failed: Vec<(&'static DtraceProbe, String)>,
    /// Warnings from the attempts before (a probe that went on with less).
    pub(super) notes: Vec<String>,
}

/// How one run of dtrace ended.
pub(super) struct Attempt {
    pub(super) status: ExitStatus,
    pub(super) stopped_by: Option<&'static str>,
    pub(super) output: Output,
    /// The bottleneck stream, when the `waitfor` probe ran.
    pub(super) stream: Option<BottleneckStream>,
    pub(super) stderr: Vec<String>,
    pub(super) watch: TargetWatch,
}

impl Recorder {
    /// Starts the command, stopped. Its environment is lockscope's, plus `env`, plus the
    /// introspection libpthread when a plockstat probe is selected on macOS.
    pub(super) fn launch(&self, argv: &[String]) -> Result<LaunchedTarget, Error> {
        let probes = self.options.script.selected_probes()?;
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .envs(self.options.env.iter().cloned());
        if self.wants_introspection(&probes) {
            command.env("DYLD_LIBRARY_PATH", MACOS_INTROSPECTION);
        }
        let child = command.spawn().map_err(|source| Error::Launch {
            command: argv[0].clone(),
            source,
        })?;
        let mut target = LaunchedTarget {
            child,
            resumed: false,
            exited: false,
        };
        // As early as possible: every instruction it runs before this is not traced. Then wait
        // until it has stopped (or exited), so dtrace never finds it running.
        let stopped = send_signal(target.pid(), libc::SIGSTOP)
            .and_then(|()| wait_until_stopped(target.pid()));
        match stopped {
            Ok(true) => Ok(target),
            Ok(false) => {
                // It exited before stopping, and waitpid reaped it: dtrace -p will say so.
                target.exited = true;
                Ok(target)
            }
            Err(source) => {
                target.terminate();
                Err(Error::Signal {
                    action: "stop",
                    pid: target.pid(),
                    source,
                })
            }
        }
    }

    /// Runs dtrace until it records, leaving out each probe whose description matches nothing.
    pub(super) fn run_attempts(
        &self,
        started: Instant,
        mut launched: Option<&mut LaunchedTarget>,
    ) -> Result<Outcome, Error> {
        let mut probes = self.options.script.selected_probes()?;
        let mut failed: Vec<(&'static DtraceProbe, String)> = Vec::new();
        let mut script = self.script.clone();
        let mut entry_points = self.options.script.libc_entry_points;
        let mut notes = Vec::new();
        let mut enabling_retries = 0;
        loop {
            let attempt = self.run_dtrace(&script, &probes, started, launched.as_deref_mut())?;
            // A dtrace killed by someone else after its probes were enabled leaves a partial
            // recording (what it printed, often nothing), kept and marked as such.
            let killed = !attempt.output.begin.is_empty() && killed_by_signal(&attempt.status);
            if attempt.status.success() || attempt.output.done || killed {
                return Ok(Outcome {
                    attempt,
                    probes,
                    failed,
                    notes,
                });
            }
            let diagnosis = diagnose(&attempt.stderr);
            // A probe's event could not be opened as tracing started, nothing was recorded:
            // when another dtrace was ending meanwhile (see `Diagnosis::enabling_failed`), the
            // same script enables once it is gone.
            if let Some(message) = &diagnosis.enabling_failed {
                if attempt.output.begin.is_empty()
                    && attempt.stopped_by.is_none()
                    && enabling_retries < ENABLING_RETRIES
                {
                    enabling_retries += 1;
                    notes.push(format!(
                        "dtrace(1) could not enable its probes ({message}); ran it again"
                    ));
                    std::thread::sleep(ENABLING_RETRY_PAUSE);
                    continue;
                }
            }
            // A static binary has no libc to put pid$target probes in: DTrace for Linux
            // refuses the script with "process N is not a dynamically-linked executable".
            let not_dynamic = diagnosis
                .errors
                .iter()
                .find(|e| e.contains("not a dynamically-linked executable"))
                .and_then(|e| Some((crate::catalog::find(FUTEX.name)?, e.clone())));
            let unmatched = diagnosis
                .no_probe
                .as_ref()
                .and_then(|message| {
                    let probe = probe_of_message(self.options.script.os, &probes, message)?;
                    Some((probe, message.clone()))
                })
                .or(not_dynamic);
            match unmatched {
                // A libc entry point the target lacks (a static or non-glibc binary): the futex
                // probe goes on without them, classifying by stack only.
                Some((probe, message))
                    if probe.name == FUTEX.name
                        && entry_points
                        && attempt.stopped_by.is_none()
                        && (message.contains(":pthread_")
                            || message.contains(":sem_")
                            || message.contains("not a dynamically-linked executable")) =>
                {
                    entry_points = false;
                    notes.push(format!(
                        "probe `futex`: the target has no glibc entry points to tell condvar, \
                         join, rwlock and semaphore waits apart ({message}): they are told by \
                         their user stacks only"
                    ));
                    script = self.regenerate(&probes, entry_points)?;
                }
                Some((probe, message)) if probes.len() > 1 && attempt.stopped_by.is_none() => {
                    probes.retain(|p| p.name != probe.name);
                    failed.push((probe, message));
                    script = self.regenerate(&probes, entry_points)?;
                }
                _ => return Err(self.failure(&attempt.status, &attempt.stderr, &diagnosis)),
            }
        }
    }

    /// The script for `probes`, with or without the futex probe's libc entry points.
    fn regenerate(
        &self,
        probes: &[&'static DtraceProbe],
        entry_points: bool,
    ) -> Result<String, Error> {
        let mut options = self.options.script.clone();
        options.probes = probes.iter().map(|p| p.name.to_string()).collect();
        options.libc_entry_points = entry_points;
        generate_script(&options)
    }

    /// One run of dtrace on `script`.
    fn run_dtrace(
        &self,
        script: &str,
        probes: &[&'static DtraceProbe],
        started: Instant,
        launched: Option<&mut LaunchedTarget>,
    ) -> Result<Attempt, Error> {
        let script_file = ScriptFile::write(script)?;
        let launched_pid = launched.as_ref().map(|t| t.pid());
        let stream = probes
            .iter()
            .any(|p| p.name == WAITFOR.name)
            .then(|| BottleneckStream::new(self.options.script.os));
        // The bottleneck stream prints all along, through dtrace's stdio buffer, which it flushes
        // at any byte: on the stdout it shares with a `-c` command, the command's lines would
        // land inside dtrace's. So dtrace's output goes to a pipe of its own (`-o /dev/fd/3`),
        // and its stdout carries the command's output alone.
        let output_pipe = match &stream {
            Some(_) => Some(OutputPipe::new()?),
            None => None,
        };
        let mut command = Command::new(&self.options.dtrace);
        if output_pipe.is_some() {
            command.args(["-o", OUTPUT_FD_PATH]);
        }
        command
            .args(self.arguments_for(&script_file.path, launched_pid))
            .envs(self.dtrace_environment(probes))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        restore_stop_signals(&mut command);
        if let Some(pipe) = &output_pipe {
            pipe.give_to(&mut command);
        }
        let mut child = command.spawn().map_err(|source| Error::Spawn {
            program: self.options.dtrace.clone(),
            source,
        })?;
        let flags = Arc::new(StdoutFlags::default());
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let echo = self.options.echo_target_output;
        let (out_thread, output_pipe) = match output_pipe {
            Some(pipe) => {
                let (reader, writer) = pipe.split();
                // Only the command's output is on stdout: passed on whole, or drained. Not
                // joined: a command that outlives dtrace keeps it open.
                if let Some(stdout) = stdout {
                    std::thread::spawn(move || copy_target_output(stdout, echo));
                }
                let flags = Arc::clone(&flags);
                let thread =
                    std::thread::spawn(move || read_stdout(Some(reader), &flags, false, stream));
                (thread, Some(writer))
            }
            None => {
                let flags = Arc::clone(&flags);
                let thread = std::thread::spawn(move || read_stdout(stdout, &flags, echo, stream));
                (thread, None)
            }
        };
        let stderr_lines = Arc::new(Mutex::new(Vec::new()));
        let err_thread = {
            let lines = Arc::clone(&stderr_lines);
            std::thread::spawn(move || read_stderr(stderr, &lines))
        };

        let mut watch = TargetWatch::default();
        match (&self.options.script.target, launched_pid) {
            (_, Some(pid)) => watch.pid = pid,
            (ScriptTarget::Pid(pid), None) => watch.pid = *pid,
            (ScriptTarget::Command, None) => watch.child_of_dtrace = true,
            (ScriptTarget::Pids { pids, .. }, None) => {
                watch.many = Some(Many::Pids(pids.iter().copied().collect()));
            }
            (ScriptTarget::All, None) => watch.many = Some(Many::All),
        }
        let supervised = self.supervise(&mut child, started, &flags, launched, &mut watch);
        if supervised.is_err() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(mut writer) = output_pipe {
            // dtrace is gone: its output is all in the pipe, but a `-c` command holds the pipe
            // too (it inherited fd 3), so the reader will see no end of it: tell it.
            let _ = std::io::Write::write_all(&mut writer, OUTPUT_EOF);
        }
        let read = out_thread.join();
        let (status, stopped_by) = match supervised? {
            (Some(status), stopped_by) => {
                let _ = err_thread.join();
                (status, stopped_by)
            }
            (None, stopped_by) => {
                // Killed after it printed everything: the kernel takes seconds to tear its
                // probes down, and nothing it says then matters. Reap it in the background.
                std::thread::spawn(move || {
                    let _ = child.wait();
                    let _ = err_thread.join();
                });
                (killed_status(), stopped_by)
            }
        };
        // A panic there is a bug of ours, never "no records": say so.
        let (output, stream) = read.map_err(|_| Error::OutputReaderPanicked)?;
        let stderr = stderr_lines.lock().map(|l| l.clone()).unwrap_or_default();
        Ok(Attempt {
            status,
            stopped_by,
            output,
            stream,
            stderr,
            watch,
        })
    }
}

/// The script, in a file dtrace can read, removed when dropped.
struct ScriptFile {
    path: PathBuf,
}

impl ScriptFile {
    fn write(script: &str) -> Result<ScriptFile, Error> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!("lockscope-{}-{nanos}.d", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, script.as_bytes()));
        match written {
            Ok(()) => Ok(ScriptFile { path }),
            Err(source) => Err(Error::WriteScript { path, source }),
        }
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
