//! Decoding the `op` of a recorded wait (see `enum futex_wait_op` in `bpf/futex.h`).

use crate::skel::types::futex_wait_op as Op;
use lockscope_probes::WaitKind;

const FLAGS: u32 = Op::LKS_FUTEX_PRIVATE_FLAG.0 | Op::LKS_FUTEX_CLOCK_REALTIME.0;

/// The name users read: `FUTEX_WAIT_PRIVATE`, `FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME`,
/// `futex_waitv`, `futex_wait` (strace's spelling).
pub fn op_name(op: u32) -> String {
    match Op(op) {
        Op::LKS_OP_FUTEX_WAITV => return "futex_waitv".to_owned(),
        Op::LKS_OP_FUTEX_WAIT => return "futex_wait".to_owned(),
        _ => {}
    }
    let mut name = match Op(op & !FLAGS) {
        Op::LKS_FUTEX_WAIT => "FUTEX_WAIT".to_owned(),
        Op::LKS_FUTEX_LOCK_PI => "FUTEX_LOCK_PI".to_owned(),
        Op::LKS_FUTEX_WAIT_BITSET => "FUTEX_WAIT_BITSET".to_owned(),
        Op::LKS_FUTEX_WAIT_REQUEUE_PI => "FUTEX_WAIT_REQUEUE_PI".to_owned(),
        Op::LKS_FUTEX_LOCK_PI2 => "FUTEX_LOCK_PI2".to_owned(),
        Op(other) => format!("FUTEX_CMD_{other}"),
    };
    if op & Op::LKS_FUTEX_PRIVATE_FLAG.0 != 0 {
        name.push_str("_PRIVATE");
    }
    if op & Op::LKS_FUTEX_CLOCK_REALTIME.0 != 0 {
        name.push_str("|FUTEX_CLOCK_REALTIME");
    }
    name
}

/// The kind a wait has when its user stack names no known entry point: the priority-inheritance
/// lock commands can only be mutexes; anything else stays a plain wait.
pub fn fallback_kind(op: u32) -> WaitKind {
    match Op(op & !FLAGS) {
        Op::LKS_FUTEX_LOCK_PI | Op::LKS_FUTEX_LOCK_PI2 => WaitKind::Mutex,
        _ => WaitKind::Wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commands, flags and the two futex2 syscalls decode to strace-style names; the raw values
    /// are those of linux/futex.h.
    #[test]
    fn decodes_ops() {
        assert_eq!(op_name(0), "FUTEX_WAIT");
        assert_eq!(op_name(128), "FUTEX_WAIT_PRIVATE");
        assert_eq!(
            op_name(9 | 128 | 256),
            "FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME"
        );
        assert_eq!(op_name(9 | 256), "FUTEX_WAIT_BITSET|FUTEX_CLOCK_REALTIME");
        assert_eq!(op_name(6 | 128), "FUTEX_LOCK_PI_PRIVATE");
        assert_eq!(op_name(13), "FUTEX_LOCK_PI2");
        assert_eq!(op_name(11 | 128), "FUTEX_WAIT_REQUEUE_PI_PRIVATE");
        assert_eq!(op_name(1), "FUTEX_CMD_1");
        assert_eq!(op_name(Op::LKS_OP_FUTEX_WAITV.0), "futex_waitv");
        assert_eq!(op_name(Op::LKS_OP_FUTEX_WAIT.0), "futex_wait");
    }

    /// Only the PI lock commands fall back to mutex.
    #[test]
    fn fallback_kinds() {
        assert_eq!(fallback_kind(6 | 128), WaitKind::Mutex);
        assert_eq!(fallback_kind(13), WaitKind::Mutex);
        assert_eq!(fallback_kind(11 | 128), WaitKind::Wait);
        assert_eq!(fallback_kind(128), WaitKind::Wait);
        assert_eq!(fallback_kind(Op::LKS_OP_FUTEX_WAITV.0), WaitKind::Wait);
    }
}
