//! Which programs of each BPF object the running kernel takes.
//!
//! Every program that captures stacks comes in two variants (see `bpf/stacks.bpf.h`): `NAME`
//! unwinds with `bpf_loop` and finds unknown code with `bpf_find_vma` (Linux 5.17+); `NAME_compat`
//! uses neither, for older kernels, whose verifiers reject a program that merely contains the
//! callback those helpers take. Before an object is loaded, [`ProgramVariant::select`] turns off
//! the autoload of the variant not chosen (by default the one the kernel does not take); attaching then skips programs that were
//! not loaded. The choice is made by asking the kernel (libbpf's helper probes), not by version.

use libbpf_rs::libbpf_sys::{bpf_func_id, BPF_FUNC_find_vma, BPF_FUNC_loop};
use libbpf_rs::{OpenObject, ProgramType};
use std::collections::HashSet;
use std::sync::OnceLock;

/// Suffix of the compat variant of a program.
const COMPAT_SUFFIX: &str = "_compat";

/// The variant of the stack-capturing programs to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramVariant {
    /// `bpf_loop` and `bpf_find_vma` (Linux 5.17+).
    Default,
    /// Bounded loops and the VMA list instead (older kernels).
    Compat,
}

impl ProgramVariant {
    /// The variant named `default` or `compat` (how `LOCKSCOPE_BPF_PROGRAMS` names them, which
    /// lets the tests run the compat programs on a current kernel).
    pub fn from_name(name: &str) -> Option<ProgramVariant> {
        match name {
            "default" => Some(ProgramVariant::Default),
            "compat" => Some(ProgramVariant::Compat),
            _ => None,
        }
    }

    /// The variant this kernel takes (asked once per process).
    pub fn detect() -> ProgramVariant {
        static DETECTED: OnceLock<ProgramVariant> = OnceLock::new();
        *DETECTED.get_or_init(ProgramVariant::ask_kernel)
    }

    /// Asks the kernel for the helpers of the default variant.
    fn ask_kernel() -> ProgramVariant {
        let has = |helper: bpf_func_id| {
            ProgramType::RawTracepoint
                .is_helper_supported(helper)
                .unwrap_or(false)
        };
        if has(BPF_FUNC_loop) && has(BPF_FUNC_find_vma) {
            ProgramVariant::Default
        } else {
            ProgramVariant::Compat
        }
    }

    /// How `lockscope probes` names it.
    pub fn describe(self) -> &'static str {
        match self {
            ProgramVariant::Default => {
                "default programs (the unwinder on bpf_loop, unknown code found by bpf_find_vma)"
            }
            ProgramVariant::Compat => {
                "compat programs (no bpf_loop or bpf_find_vma: the unwinder in bounded loops, \
                 unknown code found on the VMA list)"
            }
        }
    }

    /// Turns off the autoload of every program of `object` that belongs to the other variant.
    /// Programs without a compat twin serve both and stay as they are.
    pub fn select(self, object: &mut OpenObject) {
        let names: HashSet<String> = object
            .progs()
            .map(|p| p.name().to_string_lossy().into_owned())
            .collect();
        for mut program in object.progs_mut() {
            let name = program.name().to_string_lossy().into_owned();
            let keep = match name.strip_suffix(COMPAT_SUFFIX) {
                Some(_) => self == ProgramVariant::Compat,
                None if names.contains(&format!("{name}{COMPAT_SUFFIX}")) => {
                    self == ProgramVariant::Default
                }
                None => continue,
            };
            if !keep {
                program.set_autoload(false);
            }
        }
    }

    /// Of a program and its compat twin, the one this variant loads.
    pub fn pick<'a, P>(self, default: &'a P, compat: &'a P) -> &'a P {
        match self {
            ProgramVariant::Default => default,
            ProgramVariant::Compat => compat,
        }
    }
}
