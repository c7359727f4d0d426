//! Linux eBPF backend of lockscope.
//!
//! [`Recorder`] records every futex wait of a target process (all its threads, including threads
//! created later, and the processes it forks while recorded) with CO-RE BPF programs on the
//! `sys_enter`/`sys_exit` tracepoints (tp_btf, falling back to raw_tp), aggregated in the kernel
//! per (thread, futex word, op, user stack, kernel stack) into log2 histograms. Nothing streams
//! to user space while recording: [`Recorder::finish`] drains the aggregation map once,
//! symbolizes the stacks with blazesym (user stacks from `/proc/PID/maps` snapshots, so a target
//! that already exited still symbolizes) and returns a [`lockscope_probes::Profile`].
//!
//! Layout: `src/bpf/` holds the BPF C (`futex.bpf.c`, the shared `futex.h`, and `stacks.bpf.h`,
//! the stack-capture seam); [`bpf`](crate) loads it through a libbpf-cargo skeleton; `launch`
//! starts a command only once the probes are attached; `procmaps` and `symbolize` turn addresses
//! into frames.

mod bpf;
mod environment;
mod error;
mod launch;
mod libbpf_log;
mod ops;
mod probeset;
mod procmaps;
mod recorder;
mod shared;
mod skel;
mod skels;
mod symbolize;
mod syscalls;
mod unwind;
mod variant;

pub use environment::{check_environment, check_kernel_btf, KERNEL_BTF};
pub use error::Error;
pub use probeset::{probe_support, syscall_numbers, ProbeSettings, ProbeSupport, FAIL_ATTACH_ENV};
pub use recorder::{RecordOptions, Recorder, RecorderStatus, TargetSpec};
pub use unwind::{UnwindStats, USER_STACKS_ENV};
pub use variant::{ProgramVariant, PROGRAM_VARIANT_ENV};
