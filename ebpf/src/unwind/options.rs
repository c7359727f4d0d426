//! What a caller gives the unwinder: the BPF maps it writes, and how it gets its tables and
//! captures user stacks ([`UnwindOptions`], with the stack memo's and the capture's modes).

use super::DEFAULT_CACHE_MAX_BYTES;
use crate::shared::SharedMaps;
use libbpf_rs::MapHandle;
use std::path::PathBuf;
use std::time::Duration;

/// Default of [`UnwindOptions::urgent_wait`].
const DEFAULT_URGENT_WAIT: Duration = Duration::from_secs(3);

/// The unwinder's maps among the shared maps of a recording (see `bpf/unwind_maps.bpf.h`).
pub struct StackMaps<'a> {
    /// `unwind_rows`.
    pub rows: &'a MapHandle,
    /// `unwind_pages`.
    pub pages: &'a MapHandle,
    /// `unwind_procs`.
    pub procs: &'a MapHandle,
    /// `unwind_files`.
    pub files: &'a MapHandle,
    /// `unwind_config`.
    pub config: &'a MapHandle,
    /// `unwind_counters`.
    pub counters: &'a MapHandle,
    /// `unwind_generation`.
    pub generation: &'a MapHandle,
    /// `unwind_memos`.
    pub memos: &'a MapHandle,
}

impl<'a> StackMaps<'a> {
    /// The unwinder's maps among the maps every probe object shares; `None` if one is missing.
    pub fn from_shared(shared: &'a SharedMaps) -> Option<Self> {
        Some(StackMaps {
            rows: shared.map("unwind_rows")?,
            pages: shared.map("unwind_pages")?,
            procs: shared.map("unwind_procs")?,
            files: shared.map("unwind_files")?,
            config: shared.map("unwind_config")?,
            counters: shared.map("unwind_counters")?,
            generation: shared.map("unwind_generation")?,
            memos: shared.map("unwind_memos")?,
        })
    }
}

/// How the unwinder gets its tables.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct UnwindOptions {
    /// Directory of the persistent table cache, shared by recorders (see `unwind/cache.rs`);
    /// `None`: no cache. Default: none (the `lockscope` binary passes
    /// `$XDG_CACHE_HOME/lockscope`).
    pub cache_dir: Option<PathBuf>,
    /// Size bound of the cache directory; least recently used tables go beyond it.
    /// Default: 256 MiB.
    pub cache_max_bytes: u64,
    /// Build tables while recording already runs: a process is attached once the tables of its
    /// main executable and libc are ready (at most [`UnwindOptions::urgent_wait`]); its other
    /// mappings are marked as pending until theirs are, and stacks reaching them are cut there
    /// and counted ([`UnwindStats::table_pending`](super::UnwindStats::table_pending)).
    /// Default: false (every table is ready before
    /// `Unwinder::add_process` returns).
    pub background: bool,
    /// Longest wait for the main executable's and libc's tables with
    /// [`UnwindOptions::background`]. Default: 3 s.
    pub urgent_wait: Duration,
    /// Builder threads. Default: `None`, one per CPU. `Some(0)`: none; tables are then built on
    /// the recording's thread when they are waited for (the urgent ones, and every one without
    /// [`UnwindOptions::background`]), and the others stay pending, which tests use.
    pub builder_threads: Option<usize>,
    /// How user stacks are captured, to measure what unwinding costs. Default:
    /// [`UserStacks::Cfi`].
    pub user_stacks: UserStacks,
    /// Whether a thread's stack that its memo shows unchanged is taken from the memo instead of
    /// unwound again (`bpf/unwind_memo.bpf.h`). Default: [`StackMemo::On`].
    pub stack_memo: StackMemo,
}

/// Whether the BPF unwinder takes a stack from the thread's memo of its last walk when the
/// registers and every stack word that walk read are unchanged (the same stack, proven so in
/// `bpf/unwind_memo.bpf.h`), instead of unwinding it again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StackMemo {
    /// Use the memo.
    #[default]
    On,
    /// Unwind every stack: to measure what the memo saves.
    Off,
    /// Unwind every stack and compare it with the memo's answer where there is one
    /// ([`UnwindStats::memo_mismatches`](super::UnwindStats::memo_mismatches), 0 unless the
    /// memo is wrong): for tests.
    Verify,
}

impl StackMemo {
    /// The mode named `on`, `off` or `verify` (how `LOCKSCOPE_STACK_MEMO` names them).
    pub fn from_name(name: &str) -> Option<StackMemo> {
        match name {
            "on" => Some(StackMemo::On),
            "off" => Some(StackMemo::Off),
            "verify" => Some(StackMemo::Verify),
            _ => None,
        }
    }
}

/// How user stacks are captured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UserStacks {
    /// CFI tables, frame pointers where a pc has none.
    #[default]
    Cfi,
    /// The kernel's frame-pointer walk alone (`bpf_get_stack(BPF_F_USER_STACK)`).
    FramePointers,
    /// No user stacks.
    None,
}

impl UserStacks {
    /// The mode named `cfi`, `frame-pointers` or `none` (how `LOCKSCOPE_USER_STACKS` names
    /// them).
    pub fn from_name(name: &str) -> Option<UserStacks> {
        match name {
            "cfi" => Some(UserStacks::Cfi),
            "frame-pointers" => Some(UserStacks::FramePointers),
            "none" => Some(UserStacks::None),
            _ => None,
        }
    }
}

impl Default for UnwindOptions {
    fn default() -> Self {
        UnwindOptions {
            cache_dir: None,
            cache_max_bytes: DEFAULT_CACHE_MAX_BYTES,
            background: false,
            urgent_wait: DEFAULT_URGENT_WAIT,
            builder_threads: None,
            user_stacks: UserStacks::Cfi,
            stack_memo: StackMemo::On,
        }
    }
}
