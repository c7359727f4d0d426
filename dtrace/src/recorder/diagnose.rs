//! What dtrace's stderr says: drops counted into losses, refusals made into clear errors (with
//! a hint when lockscope knows why), and the catalog probe a "does not match" message names.

use super::Recorder;
use crate::catalog::{DtraceProbe, TargetOs, MACOS_INTROSPECTION};
use crate::script::ScriptTarget;
use crate::Error;
use lockscope_probes::Losses;
use std::process::ExitStatus;
use std::time::{SystemTime, UNIX_EPOCH};

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
    /// DTrace for Linux's "BPF program load for 'P' failed: ..." line, when the kernel refused
    /// one of its programs.
    pub bpf_load_failed: Option<String>,
    /// The verifier's log lines (`BPF: ...`), without the prefix.
    pub verifier_log: Vec<String>,
    /// DTrace for Linux's "could not enable tracing: Failed to enable probe": a probe's event
    /// (a uprobe or tracepoint) could not be opened when tracing started. Besides a lasting
    /// fault, this happens when another dtrace ends meanwhile: each dtrace removes every uprobe
    /// it used when it ends, those it shares with a dtrace still starting too.
    pub enabling_failed: Option<String>,
    /// Other lines (dtrace's errors), without the `dtrace: ` prefix.
    pub errors: Vec<String>,
}

/// Classifies dtrace's stderr lines.
pub fn diagnose(lines: &[String]) -> Diagnosis {
    let mut d = Diagnosis::default();
    for line in lines {
        // The verifier log comes first: its lines mention registers and "permission denied",
        // which are nothing of the kind here.
        if let Some(log) = line.strip_prefix("BPF:") {
            d.verifier_log.push(log.trim().to_string());
            continue;
        }
        let message = line.strip_prefix("dtrace: ").unwrap_or(line).trim();
        let lower = message.to_ascii_lowercase();
        if lower.contains("bpf program load for") || lower.starts_with("bpf verifier log is") {
            if lower.contains("bpf program load for") {
                d.bpf_load_failed.get_or_insert_with(|| message.to_string());
            }
        } else if lower.starts_with("set dtrace option 'bpflogsize'")
            || lower.starts_with("(current size is")
        {
            // The rest of DTrace's "log is incomplete" note.
        } else if lower.contains("system integrity protection is on") {
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
        } else if lower.contains("could not enable tracing: failed to enable probe") {
            d.enabling_failed.get_or_insert_with(|| message.to_string());
            d.errors.push(message.to_string());
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

impl Recorder {
    pub(super) fn failure(&self, status: &ExitStatus, stderr: &[String], d: &Diagnosis) -> Error {
        if let Some(message) = &d.bpf_load_failed {
            return verifier_error(message, stderr, d);
        }
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

    pub(super) fn probe_hint(&self, message: &str) -> String {
        let os = self.options.script.os;
        if message.contains("plockstat") && os == TargetOs::MacOs {
            return match self.options.script.target {
                ScriptTarget::Pid(pid) => format!(
                    ": macOS has plockstat probes only in the introspection libpthread, and \
                     process {pid} was not started with it; restart it with \
                     DYLD_LIBRARY_PATH={MACOS_INTROSPECTION}, let lockscope launch it, or leave \
                     out the plockstat and mutex-hold probes (psynch and ulock see the same waits \
                     from the kernel side)"
                ),
                ScriptTarget::Command => format!(
                    ": the command did not load the introspection libpthread: `dtrace -c` \
                     passes DYLD_LIBRARY_PATH={MACOS_INTROSPECTION} through the SIP-protected \
                     dtrace binary, which drops DYLD_* variables; let lockscope launch it \
                     (the default launcher does for plockstat), or leave out the plockstat and \
                     mutex-hold probes"
                ),
                // The plockstat probes are refused for these targets before dtrace runs.
                ScriptTarget::Pids { .. } | ScriptTarget::All => String::new(),
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

/// One clear error for a program the kernel refused, with dtrace's whole stderr (thousands of
/// `BPF:` verifier lines) saved to a file rather than printed.
pub(super) fn verifier_error(message: &str, stderr: &[String], d: &Diagnosis) -> Error {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    let path = std::env::temp_dir().join(format!(
        "lockscope-dtrace-verifier-{}-{nanos}.log",
        std::process::id()
    ));
    let saved = std::fs::write(&path, stderr.join("\n") + "\n").is_ok();
    // The verifier's reason is its last lines ("R1 type=scalar expected=map_ptr", "processed
    // N insns"): the last one that is not the instruction count says why.
    let reason = d
        .verifier_log
        .iter()
        .rev()
        .find(|l| {
            !l.is_empty() && !l.starts_with("processed ") && !l.starts_with("verification time")
        })
        .cloned()
        .unwrap_or_else(|| "no verifier log (set the D option bpflog to get one)".to_string());
    Error::VerifierRejected {
        message: message.to_string(),
        reason,
        log: saved.then_some(path),
        lines: d.verifier_log.len(),
    }
}

/// The catalog probe whose hook a "probe description D does not match any probes" message
/// names: same provider (`plockstat4242` is `plockstat$target`), and the function and name when
/// the hook gives them.
pub fn probe_of_message(
    os: TargetOs,
    probes: &[&'static DtraceProbe],
    message: &str,
) -> Option<&'static DtraceProbe> {
    let description = message
        .split_once("probe description ")?
        .1
        .split_once(" does not match")?
        .0
        .trim();
    let mut fields = description.splitn(4, ':');
    let provider = fields
        .next()?
        .trim_end_matches(|c: char| c.is_ascii_digit());
    let (_module, function, name) = (fields.next()?, fields.next()?, fields.next()?);
    probes.iter().copied().find(|p| {
        p.hooks_on(os).iter().any(|hook| {
            let mut h = hook.splitn(4, ':');
            let (Some(h_provider), Some(_), Some(h_function), Some(h_names)) =
                (h.next(), h.next(), h.next(), h.next())
            else {
                return false;
            };
            h_provider.trim_end_matches("$target") == provider
                && (h_function.is_empty() || h_function == function)
                && (h_names.is_empty() || h_names.split('/').any(|n| n == name))
        })
    })
}

/// A warning when the plockstat probes saw nothing on macOS although psynch saw mutex waits:
/// the command most likely did not load the introspection libpthread (a platform binary, whose
/// DYLD_* variables dyld ignores).
pub(super) fn silent_plockstat(
    profile: &lockscope_probes::Profile,
    probes: &[&'static DtraceProbe],
    os: TargetOs,
) -> Option<String> {
    if os != TargetOs::MacOs || !probes.iter().any(|p| p.name == "plockstat") {
        return None;
    }
    let count = |probe: &str| -> u64 {
        profile
            .waits
            .iter()
            .filter(|w| w.probe == probe && w.kind == lockscope_probes::WaitKind::Mutex)
            .fold(0u64, |sum, w| sum.saturating_add(w.stats.count))
    };
    let psynch = count("psynch");
    (count("plockstat") == 0 && psynch > 0).then(|| {
        format!(
            "plockstat saw no mutex waits although psynch saw {psynch}: the target probably did \
             not load the introspection libpthread ({MACOS_INTROSPECTION}; dyld ignores \
             DYLD_LIBRARY_PATH for platform binaries)"
        )
    })
}
