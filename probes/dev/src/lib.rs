//! lockscope's shared test code, one crate for every crate's tests (`publish = false`):
//!
//! - [`golden`]: the golden-file check (`LOCKSCOPE_BLESS=1` rewrites);
//! - [`self_run`]: re-running a test binary as one of its own ignored tests, alone, for tests
//!   that need another process running code of their own;
//! - [`dtrace`]: the DTrace backend's helpers, for its tests and the profiler's.
//!
//! `module_list.rs` beside this crate is not part of it: the build scripts of `ebpf` and
//! `profiler` include it by path (a build dependency would build the probes crate before them).

pub mod dtrace;
pub mod golden;
pub mod self_run;

use std::path::PathBuf;

/// The workspace's root directory (this crate is `probes/dev` in it).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}
