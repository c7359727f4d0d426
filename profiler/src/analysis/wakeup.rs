//! Wakeup chains as folded stacks, for FlameGraph-style chain graphs (offwaketime's idea): each
//! line is the sleeper's stack, root first, then a `--` frame, then the waker's stack leaf first
//! (so the waker's frames stand on top of the sleeper's, upside down, as in `chaingraph.pl`),
//! then the waker's name; the value is the sleep time the waker ended (or the number of sleeps).
//!
//! ```text
//! worker-2;start_thread;worker_main;pthread_mutex_lock;__lll_lock_wait;--;__lll_lock_wake;pthread_mutex_unlock;worker_main;start_thread;worker-1 401000000
//! ```
//!
//! Frames are sanitized as [`crate::analysis::fold`] does; with [`FoldOptions::kernel_stacks`] the kernel
//! frames (suffixed `_[k]`) follow the user frames on each side of the delimiter.

use crate::analysis::fold::{
    merged_lines, names_root_first, sanitize_frame, FoldOptions, KERNEL_SUFFIX, NO_USER_STACK,
};
use lockscope_probes::{Profile, StackId, WakeupRecord};

/// The frame between the sleeper's and the waker's stacks.
pub const CHAIN_DELIMITER: &str = "--";

/// Frame names of stack `id` outermost first, inlined functions expanded, sanitized.
fn root_first(profile: &Profile, id: Option<StackId>) -> Vec<String> {
    profile
        .stack(id)
        .map(|stack| names_root_first(stack).collect())
        .unwrap_or_default()
}

/// One side of a chain, root first: user frames, then kernel frames when asked (or when there
/// is no user stack), or [`NO_USER_STACK`].
fn side(
    profile: &Profile,
    user: Option<StackId>,
    kernel: Option<StackId>,
    options: &FoldOptions,
) -> Vec<String> {
    let mut frames = root_first(profile, user);
    let kernel_frames = root_first(profile, kernel);
    if frames.is_empty() {
        frames = kernel_frames;
    } else if options.kernel_stacks {
        frames.extend(kernel_frames.into_iter().map(|f| f + KERNEL_SUFFIX));
    }
    if frames.is_empty() {
        frames.push(NO_USER_STACK.to_string());
    }
    frames
}

fn chain(profile: &Profile, w: &WakeupRecord, options: &FoldOptions) -> String {
    let mut frames = vec![profile
        .thread_name(w.pid, w.tid)
        .map_or_else(|| format!("[{}]", w.tid), sanitize_frame)];
    frames.extend(side(profile, w.user_stack, w.kernel_stack, options));
    frames.push(CHAIN_DELIMITER.to_string());
    let mut waker = side(profile, w.waker_user_stack, w.waker_kernel_stack, options);
    waker.reverse();
    frames.extend(waker);
    frames.push(sanitize_frame(&w.waker_name));
    frames.join(";")
}

/// The wakeups of `profile` as sorted, merged folded lines (no trailing newline).
pub fn wakeup_lines(profile: &Profile, options: &FoldOptions) -> Vec<String> {
    merged_lines(profile.wakeups.iter().filter_map(|w| {
        let value = options.weight.of_stats(&w.stats);
        (value > 0).then(|| (chain(profile, w, options), value))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockscope_probes::{AddressSpace, Frame, Stack, ThreadInfo, WaitStats};

    fn stack(names: &[&str]) -> Stack {
        Stack {
            space: AddressSpace::User,
            frames: names
                .iter()
                .map(|n| Frame {
                    function: Some(n.to_string()),
                    ..Frame::unsymbolized(0x1000)
                })
                .collect(),
            truncated: false,
        }
    }

    /// The sleeper's stack reads root to leaf, then the delimiter, then the waker's stack leaf
    /// to root and the waker's name.
    #[test]
    fn chain_layout() {
        let profile = Profile {
            threads: vec![ThreadInfo {
                pid: 1,
                tid: 2,
                name: "worker-2".into(),
            }],
            stacks: vec![
                stack(&["__lll_lock_wait", "pthread_mutex_lock", "worker_main"]),
                stack(&["__lll_lock_wake", "pthread_mutex_unlock", "worker_main"]),
            ],
            wakeups: vec![WakeupRecord {
                pid: 1,
                tid: 2,
                syscall: Some("futex".into()),
                user_stack: Some(0),
                kernel_stack: None,
                waker_pid: 1,
                waker_tid: 3,
                waker_name: "worker-1".into(),
                waker_user_stack: Some(1),
                waker_kernel_stack: None,
                stats: WaitStats {
                    count: 2,
                    total_ns: 500,
                    ..WaitStats::default()
                },
            }],
            ..Profile::default()
        };
        let lines = wakeup_lines(&profile, &FoldOptions::default());
        assert_eq!(
            lines,
            [
                "worker-2;worker_main;pthread_mutex_lock;__lll_lock_wait;--;__lll_lock_wake;\
              pthread_mutex_unlock;worker_main;worker-1 500"
            ]
        );
    }
}
