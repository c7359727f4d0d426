//! The probes of a recording: a [`ProbeSet`] holds the requested ones as a list of
//! `Box<dyn Probe>`, loads them, attaches them to the target, detaches them, and drains their
//! maps into raw records ([`Drained`]) for the `resolve` step. A probe that fails to load or
//! attach is kept as failed, with the reason, and the others keep working; `lockscope probes`
//! asks the same loaders ([`probe_support`]).

use crate::error::{Error, ProbeError};
use crate::object::Counters;
use crate::probe::{
    error_chain, monotonic_ns, AttachContext, DrainContext, Drained, LoadContext, Probe, ProbeInfo,
    ProbeSettings,
};
use crate::probes;
use crate::shared::SharedMaps;
use crate::variant::ProgramVariant;
use lockscope_probes::{AttachStatus, ProbeAttachment};

/// Every catalog name the backend implements, in catalog order.
pub(crate) fn probe_names() -> Vec<&'static str> {
    probes::all().iter().flat_map(|r| r.info.names()).collect()
}

/// One requested probe: loaded, or failed with why.
struct Slot {
    info: ProbeInfo,
    probe: Option<Box<dyn Probe>>,
    failure: Option<ProbeError>,
}

/// The probes of a recording.
pub(crate) struct ProbeSet {
    slots: Vec<Slot>,
    settings: ProbeSettings,
    variant: ProgramVariant,
    /// CLOCK_MONOTONIC when the probes were detached: the end of the per-thread times.
    ended_ns: Option<u64>,
}

impl ProbeSet {
    /// Loads the probes named in `names` (the others are not loaded). A probe that fails to
    /// load, or whose kernel lacks what it needs, is kept as failed.
    pub fn load(names: &[String], shared: &SharedMaps, settings: &ProbeSettings) -> ProbeSet {
        let variant = settings.variant();
        let cx = LoadContext {
            shared,
            settings,
            variant,
            requested: names,
        };
        let slots = probes::all()
            .into_iter()
            .filter(|r| r.info.names().any(|n| names.iter().any(|w| w == n)))
            .map(|r| {
                let loaded = match r.absent() {
                    Some(reason) => Err(ProbeError::Absent(reason)),
                    None => (r.load)(&cx),
                };
                let (probe, failure) = match loaded {
                    Ok(probe) => (Some(probe), None),
                    Err(reason) => (None, Some(reason)),
                };
                Slot {
                    info: r.info,
                    probe,
                    failure,
                }
            })
            .collect();
        ProbeSet {
            slots,
            settings: settings.clone(),
            variant,
            ended_ns: None,
        }
    }

    /// Attaches every loaded probe to process `pid` (`None`: the processes of the `targets` set,
    /// whichever they are); one that fails is kept as failed and detached.
    pub fn attach(&mut self, pid: Option<u32>) {
        let cx = AttachContext {
            pid,
            variant: self.variant,
            frequency_hz: self.settings.frequency_hz,
        };
        for slot in &mut self.slots {
            let Some(probe) = &mut slot.probe else {
                continue;
            };
            let simulated = slot
                .info
                .names()
                .any(|name| self.settings.fail_attach.iter().any(|f| f.trim() == name));
            let result = if simulated {
                Err(ProbeError::Simulated)
            } else {
                probe.attach(&cx)
            };
            if let Err(reason) = result {
                slot.failure = Some(reason);
                slot.probe = None;
            }
        }
    }

    /// Detaches every probe; the maps stay readable. The first call ends the per-thread times.
    pub fn detach(&mut self) {
        self.ended_ns.get_or_insert_with(monotonic_ns);
        for probe in self.loaded_mut() {
            probe.detach();
        }
    }

    /// What became of probe `name`, if this set handles it.
    pub fn status(&self, name: &str) -> Option<ProbeAttachment> {
        let slot = self.slots.iter().find(|s| s.info.serves(name))?;
        let (hook, status) = match (&slot.probe, &slot.failure) {
            (Some(probe), _) => {
                let (hook, status) = probe.status();
                let hook = if hook.is_empty() {
                    slot.info.hooks().to_owned()
                } else {
                    hook
                };
                (hook, status)
            }
            (None, failure) => (
                slot.info.hooks().to_owned(),
                AttachStatus::Failed {
                    reason: failure
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                },
            ),
        };
        Some(ProbeAttachment {
            probe: name.to_owned(),
            hook,
            status,
        })
    }

    /// Events and losses of every working probe, summed.
    pub fn counters(&self) -> Result<Counters, Error> {
        let mut sum = Counters::default();
        for probe in self.loaded() {
            sum = sum.add(probe.counters()?);
        }
        Ok(sum)
    }

    /// Reads every probe's maps (call after [`ProbeSet::detach`]). `targets` are the recorded
    /// processes.
    pub fn drain(&self, targets: &[u32]) -> Result<Drained, Error> {
        let cx = DrainContext {
            targets,
            ended_ns: self.ended_ns.unwrap_or_else(monotonic_ns),
        };
        let mut drained = Drained::default();
        for probe in self.loaded() {
            probe.drain(&cx, &mut drained)?;
        }
        Ok(drained)
    }

    fn loaded(&self) -> impl Iterator<Item = &dyn Probe> {
        self.slots.iter().filter_map(|s| s.probe.as_deref())
    }

    fn loaded_mut(&mut self) -> impl Iterator<Item = &mut Box<dyn Probe>> {
        self.slots.iter_mut().filter_map(|s| s.probe.as_mut())
    }
}

/// Whether a probe of the eBPF backend works on this kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeSupport {
    /// It loads, alone and together with every other probe, as `record` would load it.
    Loads,
    /// Its programs are refused: why (the verifier's last line, or libbpf's complaint).
    Fails(String),
    /// The kernel lacks what it hooks: why.
    Absent(String),
}

/// Loads every probe of the eBPF backend as `record` would, without attaching anything: each
/// alone, then all together. A probe loads when both did; else the first reason.
pub fn probe_support(settings: &ProbeSettings) -> Vec<(&'static str, ProbeSupport)> {
    let all_names = probe_names();
    let shared = match SharedMaps::load(None) {
        Ok(shared) => shared,
        Err(e) => {
            let reason = error_chain(&e);
            return all_names
                .into_iter()
                .map(|n| (n, ProbeSupport::Fails(reason.clone())))
                .collect();
        }
    };
    // The failure of probe `name` in `set`.
    let failure = |set: &ProbeSet, name: &str| match set.status(name).map(|s| s.status) {
        Some(AttachStatus::Failed { reason }) => Some(reason),
        _ => None,
    };
    let owned = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    // Together: every probe in one set.
    let together = ProbeSet::load(&owned(&all_names), &shared, settings);
    let together: Vec<Option<String>> = all_names.iter().map(|n| failure(&together, n)).collect();
    probes::all()
        .iter()
        .flat_map(|r| r.info.names().map(move |name| (r, name)))
        .zip(together)
        .map(|((registered, name), with_others)| {
            if let Some(reason) = registered.absent() {
                return (name, ProbeSupport::Absent(reason));
            }
            let alone = failure(&ProbeSet::load(&owned(&[name]), &shared, settings), name);
            let support = match (alone, with_others) {
                (None, None) => ProbeSupport::Loads,
                (Some(reason), _) => ProbeSupport::Fails(reason),
                (None, Some(reason)) => {
                    ProbeSupport::Fails(format!("with the other probes: {reason}"))
                }
            };
            (name, support)
        })
        .collect()
}
