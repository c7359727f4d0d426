//! Canonical stacks: a profile's waits folded so that profiles of one server recorded on
//! different kernels, by different backends, line up frame by frame (`lockscope diff`, the
//! sweep's sites and thread groups, the HTML page's summaries).
//!
//! - the root frame is the thread's name with every run of digits replaced by `*`
//!   (`mutex-waiter-3` → `mutex-waiter-*`, [`thread_group`]), so pools of numbered threads merge
//!   and runs with other thread ids still match;
//! - user frames follow, outermost first, inlined functions expanded; a DTrace ``module`symbol``
//!   loses its module and a `+0x..` offset is dropped, and glibc's `__GI_` aliases lose the prefix;
//! - the outermost synchronization entry point (`pthread_mutex_lock`, `___pthread_cond_wait`,
//!   Rust's `std::sync::Mutex`, ... see [`sync_entry`]) keeps its public name and is followed by
//!   `[kernel wait]`: the C library's internals under it differ per OS and are dropped; without
//!   one, the first frame that enters the kernel to wait (`__lll_lock_wait`,
//!   `__psynch_mutexwait`, `_umtx_op_err`, `__lwp_park`, ... see [`canonical_frame`]) becomes
//!   `[kernel wait]`, and the frames below it are dropped;
//! - the leaf frame is the wait kind in brackets (`[mutex]`, `[condvar]`, `[wait]`), so the same
//!   kind of wait lines up across kernels even when the stacks are truncated;
//! - a record without a user stack folds to `thread;[no user stack];[kind]`.
//!
//! A place where a thread ran or slept (a `why` cause's stack, leaf first) folds the same way
//! ([`canonical_place`]), without the thread and kind frames: `why BASE OTHER` matches causes
//! across kernels and backends by it.

use crate::analysis::fold::{sanitize_frame, NO_USER_STACK, UNKNOWN_THREAD};
use lockscope_probes::{Frame, Profile, WaitKind, WaitRecord, WaitStats};
use std::collections::BTreeMap;

/// The frame that replaces the user-space entry into a kernel wait.
pub const KERNEL_WAIT_FRAME: &str = lockscope_probes::wait::CANONICAL_KERNEL_WAIT;

/// The OS-neutral name of a frame that enters the kernel to wait (`[kernel wait]`), or `None`:
/// [`lockscope_probes::wait::canonical_wait_frame`], which accepts DTrace's ``module`symbol+0x..``
/// and glibc's `__GI_` aliases.
pub fn canonical_frame(name: &str) -> Option<&'static str> {
    lockscope_probes::wait::canonical_wait_frame(name)
}

/// `module`symbol+0x1f` → `symbol`.
fn bare_symbol(name: &str) -> &str {
    let symbol = name.rsplit_once('`').map_or(name, |(_, symbol)| symbol);
    match symbol.rsplit_once("+0x") {
        Some((base, offset))
            if !base.is_empty() && offset.chars().all(|c| c.is_ascii_hexdigit()) =>
        {
            base
        }
        _ => symbol,
    }
}

/// A thread's name with every run of digits replaced by `*` (`worker-12` → `worker-*`).
pub fn thread_group(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_digits = false;
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('*');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// The public synchronization entry point a frame names (`___pthread_mutex_lock` →
/// `pthread_mutex_lock`), or `None`: a frame the wait taxonomy classifies (pthread mutex, condvar,
/// rwlock, semaphore, join entry points, Rust's std locks), with glibc's leading underscores and
/// `__GI_` prefix removed.
pub fn sync_entry(name: &str) -> Option<String> {
    let symbol = bare_symbol(name);
    // `Syscall` never comes out of the user-stack taxonomy: getting it back means "not a
    // synchronization entry point".
    let kind = WaitKind::classify_user_wait([symbol], WaitKind::Syscall);
    if kind == WaitKind::Syscall || canonical_frame(symbol).is_some() {
        return None;
    }
    let trimmed = symbol.trim_start_matches('_');
    let trimmed = trimmed
        .strip_prefix("GI_")
        .map_or(trimmed, |t| t.trim_start_matches('_'));
    Some(trimmed.to_string())
}

/// How deep two profiles' wait sites are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteDepth {
    /// The whole canonical stack.
    Full,
    /// The leaf frame only (where the thread entered the kernel) and the kind: for two
    /// profiles whose user stacks were walked differently ([`StackWalk`](lockscope_probes::StackWalk)), where the deeper
    /// frames differ because one walk stopped early, not because the program changed.
    Leaf,
}

/// [`SiteDepth::Leaf`] when `a` and `b` walked their user stacks differently.
pub fn site_depth(a: &Profile, b: &Profile) -> SiteDepth {
    if a.metadata.user_stack_walk() == b.metadata.user_stack_walk() {
        SiteDepth::Full
    } else {
        SiteDepth::Leaf
    }
}

/// The canonical frames of one record below its thread frame: user frames down to the outermost
/// synchronization entry point (its public name) or, without one, down to the frame that enters
/// the kernel; then `[kernel wait]` and the kind. What lies between the entry point and the
/// kernel is the C library's own business and differs per OS, so it is dropped. At
/// [`SiteDepth::Leaf`], only the leaf frame is read (inlined functions included). An imported
/// sample ([`WaitKind::is_sampled`]) did not wait: its frames are kept down to its leaf.
pub fn canonical_site(profile: &Profile, record: &WaitRecord, depth: SiteDepth) -> Vec<String> {
    let mut frames = Vec::new();
    match profile.stack(record.user_stack) {
        Some(stack) if record.kind.is_sampled() && !stack.frames.is_empty() => {
            let names = stack
                .frames
                .iter()
                .rev()
                .flat_map(Frame::names_outermost_first);
            let names: Vec<String> = names.collect();
            match depth {
                SiteDepth::Leaf => {
                    frames.extend(names.last().map(|name| sanitize_frame(bare_symbol(name))))
                }
                SiteDepth::Full => {
                    frames.extend(names.iter().map(|name| sanitize_frame(bare_symbol(name))))
                }
            }
        }
        Some(stack) if depth == SiteDepth::Leaf && !stack.frames.is_empty() => {
            let names = stack.frames[0].names_outermost_first();
            let site = names.iter().find_map(|name| {
                canonical_frame(name)
                    .map(|wait| vec![wait.to_string()])
                    .or_else(|| {
                        sync_entry(name).map(|entry| {
                            vec![sanitize_frame(&entry), KERNEL_WAIT_FRAME.to_string()]
                        })
                    })
            });
            frames.extend(site.unwrap_or_else(|| {
                // The innermost name: the function the thread waited in.
                names
                    .last()
                    .map(|name| vec![sanitize_frame(bare_symbol(name))])
                    .unwrap_or_default()
            }));
        }
        Some(stack) if !stack.frames.is_empty() => {
            for name in stack
                .frames
                .iter()
                .rev()
                .flat_map(Frame::names_outermost_first)
            {
                if let Some(entry) = sync_entry(&name) {
                    frames.push(sanitize_frame(&entry));
                    frames.push(KERNEL_WAIT_FRAME.to_string());
                    break;
                }
                if let Some(wait) = canonical_frame(&name) {
                    frames.push(wait.to_string());
                    break;
                }
                frames.push(sanitize_frame(bare_symbol(&name)));
            }
        }
        _ => frames.push(NO_USER_STACK.to_string()),
    }
    frames.push(format!("[{}]", record.kind));
    frames
}

/// The canonical form of a place where a thread ran or slept, given as function names leaf first
/// (a `why` cause's stack), leaf first: DTrace modules and offsets dropped; from the outermost
/// synchronization entry point (its public name) or, without one, the frame that enters the
/// kernel to wait (`[kernel wait]`) outward, the C library's frames under it dropped as
/// [`canonical_site`] drops them. At [`SiteDepth::Leaf`], its first frame alone.
pub fn canonical_place(names: &[String], depth: SiteDepth) -> Vec<String> {
    let bare: Vec<&str> = names.iter().map(|n| bare_symbol(n)).collect();
    let entry = bare.iter().rposition(|n| sync_entry(n).is_some());
    let mut frames: Vec<String> = match entry {
        Some(at) => std::iter::once(sync_entry(bare[at]).unwrap_or_default())
            .chain(bare[at + 1..].iter().map(|n| n.to_string()))
            .collect(),
        None => match bare.iter().rposition(|n| canonical_frame(n).is_some()) {
            Some(at) => std::iter::once(KERNEL_WAIT_FRAME.to_string())
                .chain(bare[at + 1..].iter().map(|n| n.to_string()))
                .collect(),
            None => bare.iter().map(|n| n.to_string()).collect(),
        },
    };
    frames = frames.iter().map(|f| sanitize_frame(f)).collect();
    if depth == SiteDepth::Leaf {
        frames.truncate(1);
    }
    frames
}

/// The canonical thread frame of a record.
pub fn canonical_thread(profile: &Profile, record: &WaitRecord) -> String {
    let name = profile
        .thread_name(record.pid, record.tid)
        .unwrap_or(UNKNOWN_THREAD);
    sanitize_frame(&thread_group(name))
}

/// Wait statistics merged per key of their records, each sleep once
/// ([`Profile::counted_waits`]), raw (not normalized).
fn stats_by(
    profile: &Profile,
    key: impl Fn(&Profile, &WaitRecord) -> String,
) -> BTreeMap<String, WaitStats> {
    let mut out: BTreeMap<String, WaitStats> = BTreeMap::new();
    for record in profile.counted_waits() {
        out.entry(key(profile, record))
            .or_default()
            .merge(&record.stats);
    }
    out
}

/// The canonical folded stack of one record at `depth`: its thread group, then its site.
pub fn canonical_stack(profile: &Profile, record: &WaitRecord, depth: SiteDepth) -> String {
    let mut frames = vec![canonical_thread(profile, record)];
    frames.extend(canonical_site(profile, record, depth));
    frames.join(";")
}

/// Wait statistics per canonical folded stack (thread group first, kind last), raw (not
/// normalized).
pub fn canonical_stacks(profile: &Profile) -> BTreeMap<String, WaitStats> {
    canonical_stacks_at(profile, SiteDepth::Full)
}

/// [`canonical_stacks`] with sites at `depth`.
pub fn canonical_stacks_at(profile: &Profile, depth: SiteDepth) -> BTreeMap<String, WaitStats> {
    stats_by(profile, |p, r| canonical_stack(p, r, depth))
}

/// Wait statistics per canonical site (the canonical stack without its thread frame), raw.
pub fn canonical_sites(profile: &Profile) -> BTreeMap<String, WaitStats> {
    stats_by(profile, |p, r| {
        canonical_site(p, r, SiteDepth::Full).join(";")
    })
}

/// Wait statistics per thread group (thread names with digits merged as `*`), raw.
pub fn thread_groups(profile: &Profile) -> BTreeMap<String, WaitStats> {
    stats_by(profile, canonical_thread)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wait entries of several OSes, decorated as each backend writes them, become one frame.
    #[test]
    fn canonical_frames() {
        assert_eq!(
            canonical_frame("__GI___lll_lock_wait"),
            Some(KERNEL_WAIT_FRAME)
        );
        assert_eq!(
            canonical_frame("libsystem_kernel.dylib`__psynch_mutexwait+0xa"),
            Some(KERNEL_WAIT_FRAME)
        );
        assert_eq!(
            canonical_frame("libthr.so.3`_umtx_op_err"),
            Some(KERNEL_WAIT_FRAME)
        );
        assert_eq!(canonical_frame("pthread_mutex_lock"), None);
        assert_eq!(
            bare_symbol("mysqld`row_search_mvcc+0x1f0"),
            "row_search_mvcc"
        );
        assert_eq!(bare_symbol("plain"), "plain");
        assert_eq!(thread_group("mutex-waiter-12"), "mutex-waiter-*");
        assert_eq!(thread_group("t1x22"), "t*x*");
        assert_eq!(
            sync_entry("___pthread_cond_wait").as_deref(),
            Some("pthread_cond_wait")
        );
        assert_eq!(
            sync_entry("libsystem_pthread.dylib`pthread_mutex_lock+0x10").as_deref(),
            Some("pthread_mutex_lock")
        );
        assert_eq!(sync_entry("__lll_lock_wait"), None);
        assert_eq!(sync_entry("worker_main"), None);
    }

    /// A place from Linux (glibc's internals under the unlock) and one from macOS (DTrace's
    /// modules and offsets) fold to the same frames; at the leaf depth, to the first one.
    #[test]
    fn canonical_places() {
        let names = |frames: &[&str]| frames.iter().map(|f| f.to_string()).collect::<Vec<_>>();
        let linux = names(&[
            "__lll_lock_wake",
            "___pthread_mutex_unlock",
            "crit",
            "worker",
        ]);
        let macos = names(&[
            "libsystem_kernel.dylib`__psynch_mutexdrop+0xa",
            "libsystem_pthread.dylib`pthread_mutex_unlock+0x10",
            "app`crit+0x20",
            "app`worker+0x44",
        ]);
        let folded = canonical_place(&linux, SiteDepth::Full);
        assert_eq!(folded, ["pthread_mutex_unlock", "crit", "worker"]);
        assert_eq!(canonical_place(&macos, SiteDepth::Full), folded);
        let sleep = names(&["__futex_abstimed_wait_common64", "do_wait", "worker"]);
        assert_eq!(
            canonical_place(&sleep, SiteDepth::Full),
            [KERNEL_WAIT_FRAME, "do_wait", "worker"]
        );
        assert_eq!(
            canonical_place(&linux, SiteDepth::Leaf),
            ["pthread_mutex_unlock"]
        );
        assert!(canonical_place(&[], SiteDepth::Full).is_empty());
    }
}
