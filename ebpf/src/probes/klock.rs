//! The `klock` probe (`bpf/klock.bpf.c`, `bpf/klock.h`): kernel lock contention of the targets
//! (lock:contention_begin/end, Linux 5.19+), by lock address and type, with stacks.

use super::{load_object, Aggregating, AggregationKey};
use crate::error::ProbeError;
use crate::object::{LoadedObject, Plain};
use crate::probe::{KernelFeature, LoadContext, ProbeInfo, Registered};
use crate::skel::klock::types::klock_key;
use crate::skel::klock::{KlockSkel, KlockSkelBuilder};
use lockscope_probes::{catalog, WaitKind};

/// The probe's loader, found by `probes::all`: it aggregates by `struct klock_key`.
pub(crate) const REGISTERED: fn() -> Registered = Registered::of::<Aggregating<klock_key>>;

// SAFETY: a generated #[repr(C)] struct of integers: valid for every bit pattern.
unsafe impl Plain for klock_key {}

impl AggregationKey for klock_key {
    type Skel = KlockSkel<'static>;
    const MAP: &'static str = "contentions";
    const KIND: WaitKind = WaitKind::KernelLock;

    fn info() -> ProbeInfo {
        ProbeInfo {
            descriptor: &catalog::KLOCK,
            also_serves: &[],
            needs: &[KernelFeature::BtfTracepoint {
                system: "lock",
                name: "contention_begin",
                since: "5.19",
            }],
            privileged: &[],
        }
    }

    fn load(cx: &LoadContext<'_>) -> Result<LoadedObject<Self::Skel>, ProbeError> {
        load_object(KlockSkelBuilder::default(), cx, |_| {})
    }

    fn thread(&self) -> (u32, u32) {
        (self.tgid, self.tid)
    }

    fn object(&self) -> u64 {
        self.lock
    }

    fn operation(&self) -> String {
        klock_flags_name(self.flags)
    }

    fn stack_ids(&self) -> (i32, i32) {
        (self.user_stack_id, self.kernel_stack_id)
    }
}

/// The lock type of `LCB_F_*` flags (include/trace/events/lock.h), named as `perf lock` does.
fn klock_flags_name(flags: u32) -> String {
    const SPIN: u32 = 1;
    const READ: u32 = 2;
    const WRITE: u32 = 4;
    const RT: u32 = 8;
    const PERCPU: u32 = 16;
    const MUTEX: u32 = 32;
    let name = if flags & PERCPU != 0 {
        if flags & WRITE != 0 {
            "percpu-rwsem-write"
        } else {
            "percpu-rwsem-read"
        }
    } else if flags & RT != 0 {
        if flags & READ != 0 {
            "rwlock-rt-read"
        } else if flags & WRITE != 0 {
            "rwlock-rt-write"
        } else {
            "rtmutex"
        }
    } else if flags & MUTEX != 0 {
        if flags & SPIN != 0 {
            "mutex-spin"
        } else {
            "mutex"
        }
    } else if flags & SPIN != 0 {
        if flags & READ != 0 {
            "rwlock-read"
        } else if flags & WRITE != 0 {
            "rwlock-write"
        } else {
            "spinlock"
        }
    } else if flags & READ != 0 {
        "rwsem-read"
    } else if flags & WRITE != 0 {
        "rwsem-write"
    } else {
        return format!("lock-flags-{flags:#x}");
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lock flags name the lock types as `perf lock contention` does.
    #[test]
    fn klock_flags() {
        assert_eq!(klock_flags_name(1), "spinlock");
        assert_eq!(klock_flags_name(4), "rwsem-write");
        assert_eq!(klock_flags_name(2), "rwsem-read");
        assert_eq!(klock_flags_name(32), "mutex");
        assert_eq!(klock_flags_name(33), "mutex-spin");
        assert_eq!(klock_flags_name(1 | 2), "rwlock-read");
        assert_eq!(klock_flags_name(16 | 4), "percpu-rwsem-write");
        assert_eq!(klock_flags_name(0), "lock-flags-0x0");
    }
}
