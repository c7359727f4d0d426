//! A `kernel-lock` change: the causes of one side whose time was spent under one sleeping kernel
//! lock, matched across kernels by the lock's slow path and where the kernel was entered to take
//! it ([`lock_key`]), and listed as its parts ([`LockPart`]).

use super::matching::MatchKey;
use super::ChangeKind;
use crate::why::model::{Cause, CauseKind, KernelLock};
use serde::Serialize;

/// One of the causes a `kernel-lock` change gathers on one side.
#[derive(Debug, Serialize)]
pub struct LockPart {
    /// The cause's kind.
    pub kind: CauseKind,
    /// Its root's stack, leaf first, a few frames (as `why` shows it).
    pub stack: Vec<String>,
    /// Its time, nanoseconds.
    pub total_ns: u64,
}

/// Frames of a [`LockPart`]'s stack kept.
const PART_FRAMES: usize = 4;

/// `cause` as one of the parts of its `kernel-lock` change.
pub(super) fn lock_part(cause: &Cause) -> LockPart {
    LockPart {
        kind: cause.kind,
        stack: cause.stack.iter().take(PART_FRAMES).cloned().collect(),
        total_ns: cause.total_ns,
    }
}

/// The `kernel-lock` change a cause is part of: its kernel lock's slow path and where the
/// kernel was entered to take it ([`lock_entry`]), so that one mechanism matches across kernels
/// whose functions between the two differ; `None` without a kernel lock.
pub(super) fn lock_key(cause: &Cause) -> Option<MatchKey> {
    let lock = cause.kernel_lock.as_ref()?;
    let sleep = lock_sleep(&lock.stack)?;
    Some(MatchKey {
        kind: ChangeKind::KernelLock,
        stack: lock_entry(lock).into_iter().collect(),
        call: None,
        kernel_lock: Some(sleep),
    })
}

/// Where the kernel was entered on a kernel lock's path: its system call (`__x64_sys_munmap`)
/// or its exception handler (`exc_page_fault`), the first frame from the lock out that is one;
/// else (a path cut short) the first caller past the lock's entry points. Without compiler
/// suffixes (`.constprop.0`). The functions in between change across kernels: 6.1 takes the
/// mmap_lock at a fault in `lock_mm_and_find_vma`, 5.10 in `do_user_addr_fault` itself.
pub(super) fn lock_entry(lock: &KernelLock) -> Option<String> {
    let bare = |f: &String| f.split('.').next().unwrap_or(f).to_string();
    let entry = |f: &&String| {
        let f = f.trim_start_matches('_');
        f.contains("_sys_") || f.starts_with("exc_") || f == "do_page_fault"
    };
    lock.stack
        .iter()
        .find(entry)
        .or(lock.callers().first())
        .map(bare)
}

/// The slow path a kernel lock's path (leaf first) sleeps in: the entry of
/// [`KERNEL_LOCK_SLEEPS`](lockscope_probes::kernel_frames::KERNEL_LOCK_SLEEPS) its first frame starts
/// with.
pub(super) fn lock_sleep(path: &[String]) -> Option<&'static str> {
    let leaf = path.first()?;
    lockscope_probes::kernel_frames::KERNEL_LOCK_SLEEPS
        .iter()
        .copied()
        .find(|p| leaf.starts_with(p))
}
