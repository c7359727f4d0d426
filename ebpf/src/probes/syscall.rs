//! The `syscall` probe (`bpf/syscall.bpf.c`, `bpf/syscall.h`): every system call of the targets
//! (or those of `--syscalls`), counted and timed by number and errno, with stacks for the slow
//! ones.

use super::{load_object, with_errno, Aggregating, AggregationKey};
use crate::error::ProbeError;
use crate::object::{LoadedObject, Plain};
use crate::probe::{syscall_numbers, LoadContext, ProbeInfo, Registered};
use crate::skel::syscall::types::syscall_key;
use crate::skel::syscall::{OpenSyscallSkel, SyscallSkel, SyscallSkelBuilder};
use crate::syscalls::syscall_name;
use libbpf_rs::{MapCore, MapFlags};
use lockscope_probes::{catalog, WaitKind};

/// The probe's loader, found by `probes::all`: it aggregates by `struct syscall_key`.
pub(crate) const REGISTERED: fn() -> Registered = Registered::of::<Aggregating<syscall_key>>;

// SAFETY: a generated #[repr(C)] struct of integers: valid for every bit pattern.
unsafe impl Plain for syscall_key {}

impl AggregationKey for syscall_key {
    type Skel = SyscallSkel<'static>;
    const MAP: &'static str = "calls";
    const KIND: WaitKind = WaitKind::Syscall;

    fn info() -> ProbeInfo {
        ProbeInfo {
            descriptor: &catalog::SYSCALL,
            also_serves: &[],
            needs: &[],
            privileged: &[],
        }
    }

    fn load(cx: &LoadContext<'_>) -> Result<LoadedObject<Self::Skel>, ProbeError> {
        let numbers = syscall_numbers(&cx.settings.syscalls)?;
        let slow = u64::try_from(cx.settings.slow_syscall.as_nanos()).unwrap_or(u64::MAX);
        let filter = !numbers.is_empty();
        let object = load_object(
            SyscallSkelBuilder::default(),
            cx,
            |open: &mut OpenSyscallSkel<'static>| {
                if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
                    rodata.targ_filter = filter;
                    rodata.targ_slow_ns = slow;
                }
            },
        )?;
        for nr in &numbers {
            object
                .skel()
                .maps
                .selected
                .update(&nr.to_ne_bytes(), &[1u8], MapFlags::ANY)
                .map_err(ProbeError::SyscallFilter)?;
        }
        Ok(object)
    }

    fn thread(&self) -> (u32, u32) {
        (self.tgid, self.tid)
    }

    fn operation(&self) -> String {
        with_errno(syscall_name(self.nr), self.err)
    }

    fn stack_ids(&self) -> (i32, i32) {
        (self.user_stack_id, self.kernel_stack_id)
    }
}
