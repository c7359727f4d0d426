//! lockscope's integration tests, one test binary: a module per subject, from the library's API
//! to the `lockscope` binary end to end, the helpers they share in `common` (with the synthetic
//! profiles in `common::fixtures`). The tests that need root with BPF or QEMU are ignored by a
//! plain `cargo test` and say why; those that need a real dtrace print `skipped: REASON` where
//! there is none. `.ci/run` runs them all.

mod common;

mod bench;
mod bench_cli;
mod bottleneck;
mod demo_answer;
mod diff;
mod errors;
mod exports;
mod golden;
mod hostile;
mod html;
mod import_dtrace;
mod import_perf;
mod kernels;
mod outputs;
mod privilege;
mod probes;
mod record;
mod record_dtrace;
mod stack_memo;
mod sweep;
mod targets;
mod top;
mod views_agree;
mod waits_by_waker;
mod why_diff;
mod why_kernel;
mod workloads;
