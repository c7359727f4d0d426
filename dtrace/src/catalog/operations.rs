//! Wait operations by number or name: FreeBSD's `_umtx_op` and macOS's `ulock_wait`
//! operations, Linux futex commands and the glibc functions a futex wait is classed by, macOS's
//! psynch calls and plockstat's operations, each with the wait category it stands for.

use lockscope_probes::WaitKind;

/// Decodes a FreeBSD `_umtx_op` operation number (`sys/umtx.h`) into its name and the wait
/// category it stands for. `None` for operations that never block (wakes, unlocks, ...).
pub fn decode_umtx_op(op: u64) -> Option<(&'static str, WaitKind)> {
    Some(match op {
        2 => ("UMTX_OP_WAIT", WaitKind::Wait),
        5 => ("UMTX_OP_MUTEX_LOCK", WaitKind::Mutex),
        8 => ("UMTX_OP_CV_WAIT", WaitKind::Condvar),
        11 => ("UMTX_OP_WAIT_UINT", WaitKind::Wait),
        12 => ("UMTX_OP_RW_RDLOCK", WaitKind::RwlockRead),
        13 => ("UMTX_OP_RW_WRLOCK", WaitKind::RwlockWrite),
        15 => ("UMTX_OP_WAIT_UINT_PRIVATE", WaitKind::Wait),
        17 => ("UMTX_OP_MUTEX_WAIT", WaitKind::Mutex),
        19 => ("UMTX_OP_SEM_WAIT", WaitKind::Semaphore),
        23 => ("UMTX_OP_SEM2_WAIT", WaitKind::Semaphore),
        _ => return None,
    })
}

/// The blocking `_umtx_op` operation numbers, as the D predicate selects them.
pub const UMTX_WAIT_OPS: [u64; 10] = [2, 5, 8, 11, 12, 13, 15, 17, 19, 23];

/// Decodes the low byte of a macOS `ulock_wait`/`ulock_wait2` operation (`sys/ulock.h`).
pub fn decode_ulock_op(op: u64) -> (&'static str, WaitKind) {
    match op & 0xff {
        1 => ("UL_COMPARE_AND_WAIT", WaitKind::Wait),
        2 => ("UL_UNFAIR_LOCK", WaitKind::Mutex),
        3 => ("UL_COMPARE_AND_WAIT_SHARED", WaitKind::Wait),
        4 => ("UL_UNFAIR_LOCK64_SHARED", WaitKind::Mutex),
        5 => ("UL_COMPARE_AND_WAIT64", WaitKind::Wait),
        6 => ("UL_COMPARE_AND_WAIT64_SHARED", WaitKind::Wait),
        _ => ("UL_UNKNOWN", WaitKind::Wait),
    }
}

/// Linux `futex()` commands that block (`linux/futex.h`, the op without its flags):
/// `FUTEX_WAIT`, `FUTEX_LOCK_PI`, `FUTEX_WAIT_BITSET`, `FUTEX_WAIT_REQUEUE_PI`, `FUTEX_LOCK_PI2`.
pub const FUTEX_WAIT_CMDS: [u64; 5] = [0, 6, 9, 11, 13];

/// `FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME`: the flag bits of a futex op.
const FUTEX_FLAGS: u64 = 128 | 256;

/// The name of a Linux futex op as the eBPF backend writes it (strace's spelling):
/// `FUTEX_WAIT_PRIVATE`, `FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME`, `FUTEX_CMD_1`.
pub fn futex_op_name(op: u64) -> String {
    let mut name = match op & !FUTEX_FLAGS {
        0 => "FUTEX_WAIT".to_string(),
        6 => "FUTEX_LOCK_PI".to_string(),
        9 => "FUTEX_WAIT_BITSET".to_string(),
        11 => "FUTEX_WAIT_REQUEUE_PI".to_string(),
        13 => "FUTEX_LOCK_PI2".to_string(),
        other => format!("FUTEX_CMD_{other}"),
    };
    if op & 128 != 0 {
        name.push_str("_PRIVATE");
    }
    if op & 256 != 0 {
        name.push_str("|FUTEX_CLOCK_REALTIME");
    }
    name
}

/// The libc entry points whose `pid$target` probes tell what a Linux futex wait is for, with
/// the code the script stores in `self->lockscope_futex_ctx` (its index plus one) and the
/// category. glibc's `pthread_cond_wait` and `pthread_cond_timedwait` have two versions each
/// (`@GLIBC_2.2.5` and `@@GLIBC_2.3.2`) and dtrace's pid provider resolves the name to the old
/// one, which current programs never call: see [`futex_kind`] for how those waits are told.
pub const FUTEX_ENTRY_POINTS: &[(&str, WaitKind)] = &[
    ("pthread_cond_wait", WaitKind::Condvar),
    ("pthread_cond_timedwait", WaitKind::Condvar),
    ("pthread_cond_clockwait", WaitKind::Condvar),
    ("pthread_join", WaitKind::Join),
    ("pthread_timedjoin_np", WaitKind::Join),
    ("pthread_clockjoin_np", WaitKind::Join),
    ("pthread_rwlock_rdlock", WaitKind::RwlockRead),
    ("pthread_rwlock_timedrdlock", WaitKind::RwlockRead),
    ("pthread_rwlock_clockrdlock", WaitKind::RwlockRead),
    ("pthread_rwlock_wrlock", WaitKind::RwlockWrite),
    ("pthread_rwlock_timedwrlock", WaitKind::RwlockWrite),
    ("pthread_rwlock_clockwrlock", WaitKind::RwlockWrite),
    ("sem_wait", WaitKind::Semaphore),
    ("sem_timedwait", WaitKind::Semaphore),
    ("sem_clockwait", WaitKind::Semaphore),
    ("pthread_barrier_wait", WaitKind::Semaphore),
];

/// glibc's internal futex wait helpers that a stack walked by frame pointers often stops at
/// (Debian's libc has no frame pointers): the leaf frame of condvar, join, rwlock and
/// semaphore waits (`FUTEX_WAIT_BITSET`).
const GLIBC_ABSTIMED_WAIT: &[&str] = &[
    "__futex_abstimed_wait_common",
    "__futex_abstimed_wait_common64",
    "__GI___futex_abstimed_wait_common",
    "__GI___futex_abstimed_wait_common64",
];

/// The category of a Linux futex wait recorded by DTrace, in this order:
///
/// 1. `FUTEX_LOCK_PI`/`LOCK_PI2` are mutexes, `FUTEX_WAIT_REQUEUE_PI` a condvar (PI condvars);
/// 2. the user stack (`symbols`, leaf first) through [`WaitKind::classify_user_wait`], as the
///    eBPF backend does (`__lll_lock_wait` is a mutex wait however short the stack);
/// 3. the libc entry point the wait ran under (`ctx`, 1-based index in
///    [`FUTEX_ENTRY_POINTS`], 0 for none), for a `FUTEX_WAIT_BITSET` wait;
/// 4. a `FUTEX_WAIT_BITSET` wait whose leaf is glibc's `__futex_abstimed_wait_common` and that
///    no probed entry point claimed: every other glibc caller of that helper (join, rwlock,
///    semaphore, barrier, the old condvar) is probed, so it is `pthread_cond_wait@@GLIBC_2.3.2`
///    or `pthread_cond_timedwait@@GLIBC_2.3.2`, which the pid provider cannot name;
/// 5. else a plain wait.
pub fn futex_kind(op: u64, ctx: u64, symbols: &[String]) -> WaitKind {
    let cmd = op & !FUTEX_FLAGS;
    match cmd {
        6 | 13 => return WaitKind::Mutex,
        11 => return WaitKind::Condvar,
        _ => {}
    }
    let by_stack = WaitKind::classify_user_wait(symbols.iter().map(String::as_str), WaitKind::Wait);
    if by_stack != WaitKind::Wait {
        return by_stack;
    }
    if cmd == 9 {
        let entry = usize::try_from(ctx)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| FUTEX_ENTRY_POINTS.get(i));
        if let Some((_, kind)) = entry {
            return *kind;
        }
        let leaf = symbols.first().map(String::as_str).unwrap_or_default();
        if GLIBC_ABSTIMED_WAIT.contains(&leaf) {
            return WaitKind::Condvar;
        }
    }
    WaitKind::Wait
}

/// The category of a macOS psynch syscall or a plockstat operation; `None` when the name alone
/// does not tell.
pub fn kind_of_operation(operation: &str) -> Option<WaitKind> {
    Some(match operation {
        "psynch_mutexwait" | "mutex-block" | "mutex-spin" | "lwp_mutex_timedlock" => {
            WaitKind::Mutex
        }
        "hold" => WaitKind::Hold,
        "psynch_cvwait" => WaitKind::Condvar,
        "psynch_rw_rdlock" | "rw-rdlock" => WaitKind::RwlockRead,
        "psynch_rw_wrlock" | "rw-wrlock" => WaitKind::RwlockWrite,
        "__semwait_signal" => WaitKind::Semaphore,
        _ => return None,
    })
}
