//! Finishing a recording: the profile, its metadata and the warnings, from the run of dtrace
//! that recorded.

use super::diagnose::{diagnose, silent_plockstat, Diagnosis};
use super::launch::{Attempt, Outcome};
use super::process::{killed_by_signal, TargetWatch};
use super::supervise::{HELD_STOPPED, HELD_STOPPED_GRACE};
use super::{Recorder, Recording};
use crate::bottleneck::{BottleneckStream, StreamResult};
use crate::catalog::{DtraceProbe, TargetOs};
use crate::parse::Output;
use crate::script::ScriptTarget;
use crate::{profile, Error};
use lockscope_probes::{AttachStatus, ProbeAttachment, Profile, RecordedTarget};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

impl Recorder {
    /// The recording from the attempt that ran: its warnings, the profile with stacks
    /// symbolized, and the profile's metadata.
    pub(super) fn finish(
        &self,
        outcome: Outcome,
        start: SystemTime,
        started: Instant,
        launched_pid: Option<u32>,
    ) -> Result<Recording, Error> {
        let Outcome {
            attempt:
                Attempt {
                    status,
                    stopped_by,
                    mut output,
                    stream,
                    stderr,
                    watch,
                },
            probes,
            failed,
            notes,
        } = outcome;
        // The window in which the probes were enabled, when dtrace said so; else all of it.
        let (start, elapsed) = match (watch.began_at, watch.ended_at) {
            (Some(began), Some(ended)) => (
                start + began.duration_since(started),
                ended.saturating_duration_since(began),
            ),
            _ => (start, started.elapsed()),
        };
        let diagnosis = diagnose(&stderr);
        let os = self.options.script.os;
        let killed = (!output.done && killed_by_signal(&status)).then(|| status.to_string());
        let mut warnings = self.run_warnings(notes, &failed, &diagnosis, stopped_by);
        warnings.extend(incomplete_output_warning(killed.as_deref(), output.done));
        if !diagnosis.losses.is_zero() {
            warnings.push(format!(
                "dtrace reported drops: {} (raise aggsize/dynvarsize/bufsize)",
                diagnosis.drop_lines.join("; ")
            ));
        }
        let end_reason = match (stopped_by, &killed) {
            (_, Some(how)) => format!("dtrace killed ({how}): partial"),
            (Some(reason), None) => reason.to_string(),
            (None, None) if diagnosis.target_exited || output.done => "target exited".to_string(),
            (None, None) => format!("dtrace exited ({status})"),
        };
        let mut stream = stream.and_then(BottleneckStream::finish);
        warnings.extend(stream.as_ref().and_then(stream_losses_warning));
        let user_stacks = stream.iter_mut().flat_map(|s| {
            s.stacks
                .iter_mut()
                .filter(|(space, _)| *space == lockscope_probes::AddressSpace::User)
                .map(|(_, frames)| frames)
        });
        let resolved = resolve_user_frames(os, &watch, &mut output, user_stacks);
        let mut profile = profile::to_profile_streamed(
            &output,
            Some(os),
            Some(self.options.script.ustack_frames),
            &|frame| resolved.get(&frame.text).cloned(),
            stream,
        );
        warnings.extend(silent_plockstat(&profile, &probes, os));
        let target = self.recorded_target(launched_pid, &watch, &profile);
        let host = lockscope_probes::host::Uname::current();
        let m = &mut profile.metadata;
        m.end_reason = end_reason;
        m.losses = diagnosis.losses;
        m.events = m.events.saturating_add(diagnosis.losses.lost_events());
        m.start_unix_ns = start
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        m.duration_ns = elapsed.as_nanos() as u64;
        m.cpu_count = lockscope_probes::host::online_cpus();
        m.hostname = host.nodename;
        m.kernel_release = host.release.clone();
        m.libc = libc_description(os, TargetOs::host(), &host.release);
        m.target = target;
        m.probes = self.probe_attachments(&failed);
        Ok(Recording {
            profile,
            output,
            warnings,
        })
    }

    /// What the run says of itself: the notes of the launch, the probes absent on the OS or
    /// left out, SIP, and a target dtrace held stopped.
    fn run_warnings(
        &self,
        notes: Vec<String>,
        failed: &[(&'static DtraceProbe, String)],
        diagnosis: &Diagnosis,
        stopped_by: Option<&'static str>,
    ) -> Vec<String> {
        let os = self.options.script.os;
        let mut warnings = notes;
        for (probe, reason) in self.options.script.absent_probes() {
            warnings.push(format!(
                "probe `{}` is absent on {os}: {reason}",
                probe.name
            ));
        }
        for (probe, message) in failed {
            warnings.push(format!(
                "probe `{}` left out: {message}{}",
                probe.name,
                self.probe_hint(message)
            ));
        }
        if diagnosis.sip {
            warnings.push(
                "system integrity protection is on: dtrace traced what it could (syscall, proc \
                 and sched probes of processes that are not restricted); Apple-signed or \
                 restricted targets and the pid/fbt providers are unavailable"
                    .to_string(),
            );
        }
        if stopped_by == Some(HELD_STOPPED) {
            warnings.push(format!(
                "dtrace(1) held every thread of the target in a tracing stop for more than {} s \
                 (its process control deadlocked): the recording ended there, and dtrace was \
                 killed if it did not exit, which resumes the target",
                HELD_STOPPED_GRACE.as_secs()
            ));
        }
        warnings
    }

    /// The recorded target as the profile's metadata keeps it.
    fn recorded_target(
        &self,
        launched_pid: Option<u32>,
        watch: &TargetWatch,
        profile: &Profile,
    ) -> RecordedTarget {
        match &self.options.script.target {
            ScriptTarget::Pid(pid) => RecordedTarget {
                pid: *pid,
                command: Vec::new(),
                launched: false,
                ..RecordedTarget::default()
            },
            ScriptTarget::Command => RecordedTarget {
                // dtrace -c does not say the pid: dtrace's child, else the records do.
                pid: launched_pid
                    .or((watch.pid != 0).then_some(watch.pid))
                    .unwrap_or_else(|| profile.threads.first().map_or(0, |t| t.pid)),
                command: self.command.clone(),
                launched: true,
                ..RecordedTarget::default()
            },
            ScriptTarget::Pids { pids, tree } => RecordedTarget {
                pid: pids.first().copied().unwrap_or(0),
                pids: if pids.len() > 1 {
                    pids.clone()
                } else {
                    Vec::new()
                },
                tree: *tree,
                ..RecordedTarget::default()
            },
            ScriptTarget::All => RecordedTarget {
                all: true,
                ..RecordedTarget::default()
            },
        }
    }

    /// Each selected probe as attached or failed, then the probes absent on the OS.
    fn probe_attachments(&self, failed: &[(&'static DtraceProbe, String)]) -> Vec<ProbeAttachment> {
        let os = self.options.script.os;
        let selected = self.options.script.selected_probes().unwrap_or_default();
        let absent = self.options.script.absent_probes();
        selected
            .iter()
            .map(|p| {
                let status = match failed.iter().find(|(f, _)| f.name == p.name) {
                    Some((_, message)) => AttachStatus::Failed {
                        reason: format!("{message}{}", self.probe_hint(message)),
                    },
                    None => AttachStatus::Attached,
                };
                ProbeAttachment {
                    probe: p.name.to_string(),
                    hook: p.hooks_on(os).join(", "),
                    status,
                }
            })
            .chain(absent.iter().map(|(p, reason)| ProbeAttachment {
                probe: p.name.to_string(),
                hook: String::new(),
                status: AttachStatus::Failed {
                    reason: format!("absent on {os}: {reason}"),
                },
            }))
            .collect()
    }
}

/// The warning of a dtrace that ended before printing all its aggregations: killed (`killed`
/// says how) or exited early.
fn incomplete_output_warning(killed: Option<&str>, done: bool) -> Option<String> {
    match killed {
        Some(how) => Some(format!(
            "dtrace(1) was killed ({how}) before it printed its aggregations: the profile \
             is partial (empty: DTrace keeps everything in the kernel until END)"
        )),
        None if !done => Some(
            "dtrace(1) ended before printing all its aggregations: the profile is empty or \
             partial"
                .to_string(),
        ),
        None => None,
    }
}

/// The warning of a bottleneck stream that lost events, if it did.
fn stream_losses_warning(stream: &StreamResult) -> Option<String> {
    (stream.inconsistent > 0 || stream.late > 0).then(|| {
        format!(
            "the bottleneck stream lost events: {} switches contradicted their thread's \
             state (counted as lost intervals, or cut where they overlapped the \
             thread's last one; that time is `unknown` to `lockscope why`), {} came more \
             than {} ms after later ones of another CPU",
            stream.inconsistent,
            stream.late,
            crate::bottleneck::REORDER_NS / 1_000_000
        )
    })
}

/// On Linux, every user frame read back from the target's mappings (see [`crate::symbolize`]),
/// by frame text, after cutting the frames where the frame-pointer walk went astray; elsewhere
/// nothing (dtrace's own symbols stand).
#[cfg(target_os = "linux")]
fn resolve_user_frames<'s>(
    os: TargetOs,
    watch: &TargetWatch,
    output: &mut Output,
    streamed: impl Iterator<Item = &'s mut Vec<crate::parse::ParsedFrame>>,
) -> std::collections::HashMap<String, lockscope_probes::Frame> {
    if os != TargetOs::Linux {
        return Default::default();
    }
    if watch.many.is_some() {
        // Each process's frames with its own mappings; a frame text seen in two processes
        // (the same library at the same address, as in a forked child) keeps the first.
        let mut resolved = std::collections::HashMap::new();
        for (pid, maps) in &watch.processes {
            if maps.is_empty() {
                continue;
            }
            let frames =
                crate::symbolize::UserSymbolizer::new(maps).resolve_records(output, Some(*pid));
            for (text, frame) in frames {
                resolved.entry(text).or_insert(frame);
            }
        }
        return resolved;
    }
    if watch.maps.is_empty() {
        return Default::default();
    }
    let symbolizer = crate::symbolize::UserSymbolizer::new(&watch.maps);
    let mut resolved = symbolizer.resolve_output(output);
    // The bottleneck stream records one process only (its script names `$target`).
    symbolizer.resolve_stacks(streamed, &mut resolved);
    resolved
}

/// Only the Linux recorder symbolizes frames itself.
#[cfg(not(target_os = "linux"))]
fn resolve_user_frames<'s>(
    _os: TargetOs,
    _watch: &TargetWatch,
    _output: &mut Output,
    _streamed: impl Iterator<Item = &'s mut Vec<crate::parse::ParsedFrame>>,
) -> std::collections::HashMap<String, lockscope_probes::Frame> {
    Default::default()
}

/// The C library of a DTrace OS, which ships with its kernel: named with the kernel release
/// when lockscope runs on that OS (`host`), unknown otherwise.
pub fn libc_description(os: TargetOs, host: Option<TargetOs>, release: &str) -> Option<String> {
    if host != Some(os) || release.is_empty() {
        return None;
    }
    Some(match os {
        TargetOs::MacOs => format!("libSystem (Darwin {release})"),
        TargetOs::FreeBsd => format!("FreeBSD libc {release}"),
        TargetOs::Illumos => format!("illumos libc {release}"),
        TargetOs::Linux => return lockscope_probes::host::glibc_version(),
    })
}
