//! Runs dtrace(1) as a child process on a generated script and turns what it prints into a
//! [`Recording`].
//!
//! `dtrace -q -s SCRIPT -p PID` (or `-c CMD`) runs until the target exits, the script's tick
//! clause calls `exit(0)`, or the driver interrupts it with SIGINT (duration elapsed or the stop
//! flag set): in every case dtrace runs the `END` clause, which prints the aggregations. Its
//! stdout is streamed into [`Parser`]; its stderr is read for errors (made into clear
//! [`Error`]s) and drop reports (counted into [`Losses`]).
//!
//! `LOCKSCOPE_DTRACE=/path/to/dtrace` overrides the binary (the tests run a fake one).

use crate::catalog::{TargetOs, MACOS_INTROSPECTION};
use crate::parse::{Output, Parser};
use crate::script::{generate_script, ScriptOptions, ScriptTarget};
use crate::{profile, Error};
use lockscope_probes::{AttachStatus, Losses, ProbeAttachment, Profile, Target};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Environment variable naming the dtrace binary to run instead of `dtrace` from `PATH`.
pub const DTRACE_ENV: &str = "LOCKSCOPE_DTRACE";

/// What dtrace traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverTarget {
    /// Attach to a running process (`-p PID`).
    Pid(u32),
    /// Launch a command (`-c CMD`), argv[0] first. dtrace splits its `-c` string on white
    /// space, so no argument may contain any.
    Command(Vec<String>),
}

/// Options of a [`Driver`]. Build with [`DriverOptions::new`] and set fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DriverOptions {
    /// The script to generate; its `target` is set from [`DriverOptions::target`] and its
    /// `duration` is also enforced by the driver (SIGINT when it elapses).
    pub script: ScriptOptions,
    /// What to trace.
    pub target: DriverTarget,
    /// The dtrace binary. Default: `$LOCKSCOPE_DTRACE`, else `dtrace` (looked up in `PATH`).
    pub dtrace: PathBuf,
    /// Set to true to end the recording (dtrace gets SIGINT and prints its aggregations).
    /// Default: a flag nobody sets.
    pub stop: Arc<AtomicBool>,
    /// Extra environment variables for dtrace (and, through `-c`, the target). Default: empty;
    /// on macOS, when launching a command with a plockstat probe selected, the driver adds
    /// `DYLD_LIBRARY_PATH=/usr/lib/system/introspection`.
    pub env: Vec<(OsString, OsString)>,
    /// How long dtrace may take to print its aggregations after SIGINT before it is killed
    /// (and the recording lost). Default: 30 s.
    pub grace: Duration,
}

impl DriverOptions {
    /// Default options for tracing `target` with `script`.
    pub fn new(script: ScriptOptions, target: DriverTarget) -> Self {
        DriverOptions {
            script,
            target,
            dtrace: dtrace_binary(std::env::var_os(DTRACE_ENV)),
            stop: Arc::new(AtomicBool::new(false)),
            env: Vec::new(),
            grace: Duration::from_secs(30),
        }
    }
}

/// The dtrace binary to run given the value of `LOCKSCOPE_DTRACE`.
pub fn dtrace_binary(env_value: Option<OsString>) -> PathBuf {
    env_value
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("dtrace"), PathBuf::from)
}

/// What a recording produced.
#[derive(Clone, Debug)]
pub struct Recording {
    /// The profile (metadata, threads, stacks, waits, losses).
    pub profile: Profile,
    /// The parsed output, for callers who want lockscope's raw records.
    pub output: Output,
    /// Things the user should know that did not stop the recording (SIP on, output cut short).
    pub warnings: Vec<String>,
}

/// Runs one recording. See the [module documentation](self).
#[derive(Debug)]
pub struct Driver {
    options: DriverOptions,
    script: String,
}

impl Driver {
    /// Validates the options and generates the script.
    pub fn new(mut options: DriverOptions) -> Result<Driver, Error> {
        options.script.target = match &options.target {
            DriverTarget::Pid(pid) => ScriptTarget::Pid(*pid),
            DriverTarget::Command(argv) => {
                if argv.is_empty()
                    || argv
                        .iter()
                        .any(|a| a.is_empty() || a.contains(char::is_whitespace))
                {
                    return Err(Error::InvalidOption {
                        option: "command",
                        reason: "dtrace -c splits its command on white space: the command must \
                                 be non-empty and no argument may be empty or contain spaces"
                            .into(),
                    });
                }
                ScriptTarget::Command
            }
        };
        let script = generate_script(&options.script)?;
        Ok(Driver { options, script })
    }

    /// The D script that [`Driver::run`] will run.
    pub fn script(&self) -> &str {
        &self.script
    }

    /// The dtrace arguments after the binary, with the script at `script_path`.
    pub fn arguments(&self, script_path: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["-q".into(), "-s".into(), script_path.into()];
        match &self.options.target {
            DriverTarget::Pid(pid) => {
                args.push("-p".into());
                args.push(pid.to_string().into());
            }
            DriverTarget::Command(argv) => {
                args.push("-c".into());
                args.push(argv.join(" ").into());
            }
        }
        args
    }

    fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.options.env.clone();
        let wants_plockstat = self
            .options
            .script
            .selected_probes()
            .map(|probes| probes.iter().any(|p| p.macos_needs_launch))
            .unwrap_or(false);
        let launching = matches!(self.options.target, DriverTarget::Command(_));
        if self.options.script.os == TargetOs::MacOs && launching && wants_plockstat {
            env.push(("DYLD_LIBRARY_PATH".into(), MACOS_INTROSPECTION.into()));
        }
        env
    }

    /// Runs dtrace to the end and returns the recording.
    pub fn run(self) -> Result<Recording, Error> {
        let script_file = ScriptFile::write(&self.script)?;
        let start = SystemTime::now();
        let started = Instant::now();
        let mut command = Command::new(&self.options.dtrace);
        command
            .args(self.arguments(&script_file.path))
            .envs(self.environment())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|source| Error::Spawn {
            program: self.options.dtrace.clone(),
            source,
        })?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let out_thread = std::thread::spawn(move || read_stdout(stdout));
        let err_thread = std::thread::spawn(move || read_stderr(stderr));

        let (status, stopped_by) = self.supervise(&mut child, started)?;
        let output = out_thread.join().unwrap_or_default();
        let stderr_lines = err_thread.join().unwrap_or_default();
        let elapsed = started.elapsed();

        let diagnosis = diagnose(&stderr_lines);
        let mut warnings = Vec::new();
        if !status.success() && !output.done {
            return Err(self.failure(&status, &stderr_lines, &diagnosis));
        }
        if diagnosis.sip {
            warnings.push(
                "system integrity protection is on: dtrace traced what it could (syscall, proc \
                 and sched probes of processes that are not restricted); Apple-signed or \
                 restricted targets and the pid/fbt providers are unavailable"
                    .to_string(),
            );
        }
        if !output.done {
            warnings.push(
                "dtrace(1) ended before printing all its aggregations: the profile is empty or \
                 partial"
                    .to_string(),
            );
        }
        if !diagnosis.losses.is_zero() {
            warnings.push(format!(
                "dtrace reported drops: {} (raise aggsize/dynvarsize/bufsize)",
                diagnosis.drop_lines.join("; ")
            ));
        }

        let end_reason = match stopped_by {
            Some(reason) => reason.to_string(),
            None if diagnosis.target_exited || output.done => "target exited".to_string(),
            None => format!("dtrace exited ({status})"),
        };
        let mut profile = profile::to_profile(
            &output,
            Some(self.options.script.os),
            Some(self.options.script.ustack_frames),
        );
        let m = &mut profile.metadata;
        m.end_reason = end_reason;
        m.losses = diagnosis.losses;
        m.events = m.events.saturating_add(diagnosis.losses.lost_events());
        m.start_unix_ns = start
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        m.duration_ns = elapsed.as_nanos() as u64;
        m.cpu_count = std::thread::available_parallelism().map_or(0, |n| n.get() as u32);
        m.target = match &self.options.target {
            DriverTarget::Pid(pid) => Target {
                pid: *pid,
                command: Vec::new(),
                launched: false,
            },
            DriverTarget::Command(argv) => Target {
                pid: profile.threads.first().map_or(0, |t| t.pid),
                command: argv.clone(),
                launched: true,
            },
        };
        m.probes = self
            .options
            .script
            .selected_probes()
            .unwrap_or_default()
            .iter()
            .map(|p| ProbeAttachment {
                probe: p.name.to_string(),
                hook: p.hooks_on(self.options.script.os).join(", "),
                status: AttachStatus::Attached,
            })
            .collect();
        Ok(Recording {
            profile,
            output,
            warnings,
        })
    }

    /// Waits for dtrace, interrupting it when the duration elapses or the stop flag is set,
    /// and killing it when it does not finish within the grace period after that.
    fn supervise(
        &self,
        child: &mut Child,
        started: Instant,
    ) -> Result<(ExitStatus, Option<&'static str>), Error> {
        let deadline = self.options.script.duration.map(|d| started + d);
        let mut interrupted: Option<(Instant, &'static str)> = None;
        loop {
            if let Some(status) = child.try_wait().map_err(|source| Error::Process {
                action: "wait for",
                source,
            })? {
                return Ok((status, interrupted.map(|(_, why)| why)));
            }
            let now = Instant::now();
            match interrupted {
                None => {
                    let why = if self.options.stop.load(Ordering::Relaxed) {
                        Some("interrupted (stop requested)")
                    } else if deadline.is_some_and(|d| now >= d) {
                        Some("duration elapsed")
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        interrupt(child.id())?;
                        interrupted = Some((now, why));
                    }
                }
                Some((at, _)) if now.duration_since(at) > self.options.grace => {
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

    fn failure(&self, status: &ExitStatus, stderr: &[String], d: &Diagnosis) -> Error {
        let errors = if d.errors.is_empty() {
            stderr.join("\n")
        } else {
            d.errors.join("\n")
        };
        if let Some(message) = &d.restricted {
            return Error::RestrictedEntitlements {
                message: message.clone(),
            };
        }
        if let Some(message) = &d.no_probe {
            return Error::ProbeNotFound {
                message: message.clone(),
                hint: self.probe_hint(message),
            };
        }
        // "requires additional privileges" is macOS's not-root message; other permission
        // refusals with SIP on are SIP's.
        let not_root = d
            .privileges
            .as_ref()
            .filter(|m| !d.sip || m.contains("additional privileges"));
        if let Some(message) = not_root {
            return Error::NotPrivileged {
                message: message.clone(),
            };
        }
        if d.sip {
            return Error::SipRestricted { message: errors };
        }
        Error::DtraceFailed {
            status: status.to_string(),
            stderr: errors,
        }
    }

    fn probe_hint(&self, message: &str) -> String {
        let os = self.options.script.os;
        if message.contains("plockstat") && os == TargetOs::MacOs {
            return match self.options.target {
                DriverTarget::Pid(pid) => format!(
                    ": macOS has plockstat probes only in the introspection libpthread, and \
                     process {pid} was not started with it; restart it with \
                     DYLD_LIBRARY_PATH={MACOS_INTROSPECTION}, let lockscope launch it, or leave \
                     out the plockstat and mutex-hold probes (psynch and ulock see the same waits \
                     from the kernel side)"
                ),
                DriverTarget::Command(_) => format!(
                    ": the command did not load the introspection libpthread although lockscope \
                     set DYLD_LIBRARY_PATH={MACOS_INTROSPECTION}; macOS drops DYLD_* variables \
                     for protected (SIP) binaries, so leave out the plockstat and mutex-hold \
                     probes for this one"
                ),
            };
        }
        if message.contains("plockstat") {
            return ": the target does not use libc's plockstat-instrumented locks (static or \
                    non-libc binary?); leave out the plockstat probes"
                .to_string();
        }
        if message.contains("lockstat") {
            return ": the lockstat provider is not loaded (FreeBSD: `kldload dtraceall`)"
                .to_string();
        }
        if message.contains("syscall::") {
            return format!(
                ": this kernel lacks a system call the {os} script expects; leave out the probe \
                 that uses it"
            );
        }
        String::new()
    }
}

/// Sends SIGINT, as `kill -INT` does (std has no signal API, and this keeps the crate free of
/// `unsafe`).
fn interrupt(pid: u32) -> Result<(), Error> {
    let status = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|source| Error::Process {
            action: "interrupt",
            source,
        })?;
    // A failed kill means dtrace already exited; try_wait sees that next.
    let _ = status;
    Ok(())
}

fn read_stdout(stdout: Option<impl Read>) -> Output {
    let mut parser = Parser::new();
    if let Some(stdout) = stdout {
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let content = line.strip_suffix(b"\n").unwrap_or(&line);
                    parser.feed_bytes(content);
                }
            }
        }
    }
    parser.finish()
}

fn read_stderr(stderr: Option<impl Read>) -> Vec<String> {
    let mut bytes = Vec::new();
    if let Some(mut stderr) = stderr {
        let _ = stderr.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// What dtrace's stderr says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diagnosis {
    /// Drops and errors, counted.
    pub losses: Losses,
    /// The drop and error lines counted in `losses`.
    pub drop_lines: Vec<String>,
    /// SIP warning seen.
    pub sip: bool,
    /// A "probe description ... does not match any probes" line.
    pub no_probe: Option<String>,
    /// A privileges complaint.
    pub privileges: Option<String>,
    /// A "restricted entitlements" refusal.
    pub restricted: Option<String>,
    /// "pid N has exited".
    pub target_exited: bool,
    /// Other lines (dtrace's errors), without the `dtrace: ` prefix.
    pub errors: Vec<String>,
}

/// Classifies dtrace's stderr lines.
pub fn diagnose(lines: &[String]) -> Diagnosis {
    let mut d = Diagnosis::default();
    for line in lines {
        let message = line.strip_prefix("dtrace: ").unwrap_or(line).trim();
        let lower = message.to_ascii_lowercase();
        if lower.contains("system integrity protection is on") {
            d.sip = true;
        } else if lower.contains("does not match any probes") {
            d.no_probe.get_or_insert_with(|| message.to_string());
        } else if lower.contains("restricted entitlements") {
            d.restricted.get_or_insert_with(|| message.to_string());
        } else if lower.contains("requires additional privileges")
            || lower.contains("permission denied")
            || lower.contains("insufficient privilege")
            || lower.contains("must be root")
        {
            d.privileges.get_or_insert_with(|| message.to_string());
        } else if lower.starts_with("pid ") && lower.ends_with("has exited") {
            d.target_exited = true;
        } else if let Some((count, what)) = drop_report(&lower) {
            if what.starts_with("aggregation drop") || what.starts_with("dynamic variable drop") {
                d.losses.map_full = d.losses.map_full.saturating_add(count);
            } else {
                d.losses.dropped = d.losses.dropped.saturating_add(count);
            }
            d.drop_lines.push(message.to_string());
        } else if lower.starts_with("error on enabled probe") {
            d.losses.dropped = d.losses.dropped.saturating_add(1);
            d.drop_lines.push(message.to_string());
        } else {
            d.errors.push(message.to_string());
        }
    }
    d
}

/// `12 dynamic variable drops`, `5 aggregation drops on CPU 0`, `3 drops on CPU 1`.
fn drop_report(message: &str) -> Option<(u64, &str)> {
    let (count, rest) = message.split_once(' ')?;
    let count = count.parse().ok()?;
    rest.contains("drops").then_some((count, rest))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Drop reports and known refusals are classified; other lines stay errors.
    #[test]
    fn stderr_is_classified() {
        let lines: Vec<String> = [
            "dtrace: 12 dynamic variable drops with non-empty dirty list",
            "dtrace: 5 aggregation drops on CPU 0",
            "dtrace: 3 drops on CPU 1",
            "dtrace: error on enabled probe ID 4 (ID 881: syscall::ulock_wait:return): \
             invalid address (0x0) in action #3",
            "dtrace: system integrity protection is on, some features will not be available",
            "dtrace: pid 4242 has exited",
            "dtrace: something else",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let d = diagnose(&lines);
        assert_eq!(d.losses.map_full, 17);
        assert_eq!(d.losses.dropped, 4);
        assert!(d.sip);
        assert!(d.target_exited);
        assert_eq!(d.errors, vec!["something else".to_string()]);
    }

    /// LOCKSCOPE_DTRACE overrides the binary; unset or empty means `dtrace` from PATH.
    #[test]
    fn binary_override() {
        assert_eq!(dtrace_binary(None), PathBuf::from("dtrace"));
        assert_eq!(dtrace_binary(Some("".into())), PathBuf::from("dtrace"));
        assert_eq!(
            dtrace_binary(Some("/opt/dtrace".into())),
            PathBuf::from("/opt/dtrace")
        );
    }
}
