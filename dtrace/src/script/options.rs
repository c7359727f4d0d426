//! [`ScriptOptions`]: what a script records and how, the probes they select on their OS, and
//! their validation.

use super::target::{needs_one_process, ScriptTarget};
use super::{BOTTLENECK_SET, WAIT_FOR_PROBES};
use crate::catalog::{self, TargetOs};
use crate::Error;
use lockscope_probes::catalog::WAITFOR;
use std::time::Duration;

/// Options of [`generate_script`]. Build with [`ScriptOptions::new`] and set fields.
///
/// [`generate_script`]: super::generate_script
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScriptOptions {
    /// The OS the script runs on. Default: the host's, else macOS.
    pub os: TargetOs,
    /// Catalog names of the probes to enable; empty means the defaults for `os` and `target`
    /// (see [`catalog::defaults_for`]). Default: empty.
    pub probes: Vec<String>,
    /// What is traced. Default: [`ScriptTarget::Command`].
    pub target: ScriptTarget,
    /// Most user-stack frames captured (`ustackframes`). Default: 100.
    pub ustack_frames: u32,
    /// Most kernel-stack frames captured (`stackframes`). Default: 40.
    pub kernel_stack_frames: u32,
    /// Recording length: adds a `profile:::tick-N` clause that calls `exit(0)`. Default: none
    /// (until the target exits or lockscope interrupts dtrace).
    pub duration: Option<Duration>,
    /// Aggregation buffer size in bytes (`aggsize`). Default: 32 MiB.
    pub aggsize: u64,
    /// Thread-local variable space in bytes (`dynvarsize`). Default: 16 MiB.
    pub dynvarsize: u64,
    /// Principal buffer size in bytes (`bufsize`). Default: 8 MiB.
    pub bufsize: u64,
    /// Linux `futex` probe: also trace the libc entry points ([`FUTEX_ENTRY_POINTS`]) with
    /// `pid$target` probes to tell condvar, join, rwlock and semaphore waits apart when the
    /// user stack is too short to. The recorder turns it off when the target has no such
    /// functions (a static or non-glibc binary: the descriptions match nothing). Default: true.
    ///
    /// [`FUTEX_ENTRY_POINTS`]: crate::catalog::FUTEX_ENTRY_POINTS
    pub libc_entry_points: bool,
}

impl Default for ScriptOptions {
    fn default() -> Self {
        Self::new(TargetOs::host().unwrap_or(TargetOs::MacOs))
    }
}

impl ScriptOptions {
    /// Default options for `os`.
    pub fn new(os: TargetOs) -> Self {
        ScriptOptions {
            os,
            probes: Vec::new(),
            target: ScriptTarget::Command,
            ustack_frames: 100,
            kernel_stack_frames: 40,
            duration: None,
            aggsize: 32 << 20,
            dynvarsize: 16 << 20,
            bufsize: 8 << 20,
            libc_entry_points: true,
        }
    }

    /// The catalog probes these options select, in catalog order, after validation (the
    /// `bottleneck` set expanded). The bottleneck analysis (`waitfor`, `bottleneck`) exists where
    /// the sched provider has a usable wakeup probe ([`catalog::has_wait_for`]); elsewhere it is
    /// refused by name ([`Error::NoBottleneck`]).
    pub fn selected_probes(&self) -> Result<Vec<&'static catalog::DtraceProbe>, Error> {
        if let ScriptTarget::Pids { pids, .. } = &self.target {
            if pids.is_empty() {
                return Err(Error::InvalidOption {
                    option: "target",
                    reason: "no process given".into(),
                });
            }
        }
        let launched = self.target == ScriptTarget::Command;
        if self.probes.is_empty() {
            // Of several processes, the defaults that need one process's provider are left out.
            return Ok(catalog::defaults_for(self.os, launched)
                .filter(|p| self.target.is_one_process() || !needs_one_process(p, self))
                .collect());
        }
        let names = self.expanded_probes();
        for name in &names {
            if WAIT_FOR_PROBES.contains(&name.as_str()) && !catalog::has_wait_for(self.os) {
                return Err(Error::NoBottleneck {
                    probe: name.clone(),
                    os: self.os,
                });
            }
            if let Some(reason) =
                lockscope_probes::catalog::find(name).and_then(|d| d.dtrace_absence)
            {
                return Err(Error::NotOffered {
                    probe: name.clone(),
                    reason,
                });
            }
            let known = catalog::find(name)
                .is_some_and(|p| p.supports(self.os) || p.absent_on(self.os).is_some());
            if !known {
                let known: Vec<&str> = catalog::probes_for(self.os).map(|p| p.name).collect();
                return Err(Error::UnknownProbe {
                    probe: name.clone(),
                    os: self.os,
                    known: known.join(", "),
                });
            }
        }
        Ok(catalog::probes_for(self.os)
            .filter(|p| names.iter().any(|n| n == p.name))
            .collect())
    }

    /// The probe names asked for, with the `bottleneck` set expanded: the OS's defaults (the
    /// report's wait sites) and `waitfor` (`lockscope why`), as on the eBPF backend. Sets are
    /// expanded only where the bottleneck analysis exists; elsewhere the name stays, to be refused
    /// by name.
    fn expanded_probes(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for name in &self.probes {
            if name == BOTTLENECK_SET && catalog::has_wait_for(self.os) {
                let launched = self.target == ScriptTarget::Command;
                // As when no probe is named: of several processes, not the defaults that need
                // one process's provider.
                names.extend(
                    catalog::defaults_for(self.os, launched)
                        .filter(|p| self.target.is_one_process() || !needs_one_process(p, self))
                        .map(|p| p.name.to_string()),
                );
                names.push(WAITFOR.name.to_string());
            } else {
                names.push(name.clone());
            }
        }
        names
    }

    /// The probes asked for that cannot fire on this OS's dtrace, with the reason
    /// ([`catalog::DtraceProbe::absent`]); they are left out of the script.
    pub fn absent_probes(&self) -> Vec<(&'static catalog::DtraceProbe, &'static str)> {
        catalog::DTRACE_CATALOG
            .iter()
            .filter(|p| self.probes.iter().any(|n| n == p.name))
            .filter_map(|p| Some((p, p.absent_on(self.os)?)))
            .collect()
    }

    pub(super) fn validate(&self) -> Result<(), Error> {
        if !(1..=4096).contains(&self.ustack_frames) {
            return Err(Error::InvalidOption {
                option: "ustack_frames",
                reason: format!("{} is not in 1..=4096", self.ustack_frames),
            });
        }
        if !(1..=4096).contains(&self.kernel_stack_frames) {
            return Err(Error::InvalidOption {
                option: "kernel_stack_frames",
                reason: format!("{} is not in 1..=4096", self.kernel_stack_frames),
            });
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return Err(Error::InvalidOption {
                option: "duration",
                reason: "a recording cannot last zero seconds".into(),
            });
        }
        for (option, bytes) in [
            ("aggsize", self.aggsize),
            ("dynvarsize", self.dynvarsize),
            ("bufsize", self.bufsize),
        ] {
            if bytes < 4096 {
                return Err(Error::InvalidOption {
                    option,
                    reason: format!("{bytes} bytes is too small (at least 4096)"),
                });
            }
        }
        Ok(())
    }
}
