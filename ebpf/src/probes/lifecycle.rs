//! The `lifecycle` probe (`bpf/lifecycle.bpf.c`, `bpf/lifecycle.h`): fork, vfork, clone, thread
//! creation, exec and exit of the targets, counted and timed with their stacks.

use super::{load_object, with_errno, Aggregating, AggregationKey};
use crate::error::ProbeError;
use crate::object::{LoadedObject, Plain};
use crate::probe::{LoadContext, ProbeInfo, Registered};
use crate::skel::lifecycle::types::{lifecycle_key, lifecycle_op as Op};
use crate::skel::lifecycle::{LifecycleSkel, LifecycleSkelBuilder};
use lockscope_probes::{catalog, WaitKind};

/// The probe's loader, found by `probes::all`: it aggregates by `struct lifecycle_key`.
pub(crate) const REGISTERED: fn() -> Registered = Registered::of::<Aggregating<lifecycle_key>>;

// SAFETY: a generated #[repr(C)] struct of integers and a #[repr(transparent)] u32 enum: valid
// for every bit pattern.
unsafe impl Plain for lifecycle_key {}

impl AggregationKey for lifecycle_key {
    type Skel = LifecycleSkel<'static>;
    const MAP: &'static str = "events";
    const KIND: WaitKind = WaitKind::Lifecycle;

    fn info() -> ProbeInfo {
        ProbeInfo {
            descriptor: &catalog::LIFECYCLE,
            also_serves: &[],
            needs: &[],
            privileged: &[],
        }
    }

    fn load(cx: &LoadContext<'_>) -> Result<LoadedObject<Self::Skel>, ProbeError> {
        load_object(LifecycleSkelBuilder::default(), cx, |_| {})
    }

    fn thread(&self) -> (u32, u32) {
        (self.tgid, self.tid)
    }

    fn operation(&self) -> String {
        with_errno(op_name(self.op).to_owned(), self.err)
    }

    fn stack_ids(&self) -> (i32, i32) {
        (self.user_stack_id, self.kernel_stack_id)
    }
}

/// `enum lifecycle_op` (bpf/lifecycle.h) as profiles name it.
fn op_name(op: Op) -> &'static str {
    match op {
        Op::LKS_LIFE_FORK => "fork",
        Op::LKS_LIFE_VFORK => "vfork",
        Op::LKS_LIFE_THREAD => "thread",
        Op::LKS_LIFE_EXEC => "exec",
        Op::LKS_LIFE_EXIT_THREAD => "exit-thread",
        Op::LKS_LIFE_EXIT_PROCESS => "exit-process",
        Op::LKS_LIFE_CLONE => "clone",
        _ => "unknown",
    }
}
