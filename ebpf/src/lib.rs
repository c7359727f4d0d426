//! Linux eBPF backend of lockscope.
//!
//! [`Recorder`] records a target process (all its threads, including threads created later, and
//! the processes it forks while recorded) with the selected probes, each a CO-RE BPF object of
//! its own (`src/bpf/NAME.bpf.c`, its structs in `NAME.h`) sharing the maps of the `targets`
//! object (`shared`): the target set, the stack maps and the in-kernel user-stack unwinder's tables
//! (`unwind`). Waits are aggregated in the kernel into log2 histograms per key; nothing streams to
//! user space while recording. [`Recorder::finish`] drains the maps once, symbolizes the stacks
//! with blazesym (user stacks from `/proc/PID/maps` snapshots, so a target that already exited
//! still symbolizes) and returns a [`lockscope_probes::Profile`].
//!
//! Kernels from 5.10 on: every program that captures stacks comes in a default and a compat
//! variant, and [`ProgramVariant`] loads the one the running kernel takes (by asking it, not by
//! its version); [`probe_support`] loads each probe as `record` would and says which load, fail
//! (with the verifier's reason, captured by `libbpf_log`) or are absent. docs/KERNELS.md has what
//! older kernels lack and what replaces it.
//!
//! Layout: `bpf` is the futex object's loader (tracefs's per-syscall tracepoints, else the generic
//! hooks, tp_btf or raw_tp), `probeset` the other probes' and the drain into records (`cpu` the
//! on-CPU sampler's: per-CPU cpu-clock perf events, its samples aggregated in the kernel as
//! on-CPU time, not waits), `recorder`
//! the recording session, `launch` starts a command only once the probes are attached, `procmaps`
//! and `symbolize` turn addresses into frames.

mod bpf;
mod cpu;
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

pub use cpu::{DEFAULT_FREQUENCY_HZ, MAX_FREQUENCY_HZ};
pub use environment::{check_environment, check_kernel_btf, KERNEL_BTF};
pub use error::Error;
pub use probeset::{probe_support, syscall_numbers, ProbeSettings, ProbeSupport, FAIL_ATTACH_ENV};
pub use recorder::{RecordOptions, Recorder, RecorderStatus, TargetSpec};
pub use unwind::{
    TableBuild, UnwindOptions, UnwindStats, DEFAULT_CACHE_MAX_BYTES, USER_STACKS_ENV,
};
pub use variant::{ProgramVariant, PROGRAM_VARIANT_ENV};
