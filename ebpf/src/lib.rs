//! Linux eBPF backend of lockscope.
//!
//! [`Recorder`] records a target set ([`lockscope_probes::Target`]: processes by pid, with their
//! descendants on request, a cgroup's processes, every process, or a launched command; all their
//! threads, including threads created later, and the processes they fork while recorded) with
//! the selected probes. Waits are aggregated in the kernel into log2 histograms per key; what
//! streams to user space while recording is the target set's forks, execs and exits and, with
//! the `waitfor` probe, every off-CPU interval (ring buffers read at every [`Recorder::poll`]).
//! [`Recorder::finish`] drains the maps once, symbolizes the stacks with blazesym (user stacks
//! from `/proc/PID/maps` snapshots, so a target that already exited still symbolizes) and
//! returns a [`lockscope_probes::Profile`].
//!
//! A probe here is its BPF side `src/bpf/NAME.bpf.c` (its structs and enums in `NAME.h`, which
//! reach Rust through the generated skeleton's types) and its Rust loader `src/probes/NAME.rs`
//! (an implementation of the `Probe` trait of `probe.rs`), registered on its descriptor in the
//! OS-neutral catalog (`lockscope_probes::catalog`), which gives its name and hooks. The
//! `ProbeSet` holds the requested probes as a list of `Box<dyn Probe>`: it loads, attaches,
//! detaches, counts and drains them alike; futex is one of them (`probe_set.rs`); one that fails
//! to load or attach is kept with why, and the others record. Adding a probe: one `.bpf.c` and
//! one `.h` (build.rs compiles every `.bpf.c` and lists its skeleton in `skel.rs`), one Rust
//! file implementing `Probe` with its `REGISTERED` (build.rs lists every file of `probes/` for
//! `probes::all`), its descriptor in the catalog, and its report section in the profiler when it
//! has one.
//!
//! Every object shares the maps of the `shared` object (`shared.rs`: the target set, which also
//! follows forks and streams the forks, execs and exits of its processes to `targets.rs`'s
//! process table, the stack maps and the in-kernel user-stack unwinder's tables, filled by
//! `unwind/`); `object.rs` is the lifetime of one loaded object (links, skeleton, storage). At
//! the end, `resolve.rs` turns every probe's drained records into the profile in one step, with
//! one stack interner: a stack captured by two probes is stored once.
//!
//! Kernels from 5.10 on: every program that captures stacks comes in a default and a compat
//! variant, and [`ProgramVariant`] loads the one the running kernel takes (by asking it, not by
//! its version); [`probe_support`] loads each probe as `record` would and says which load, fail
//! (with the verifier's reason, captured by `libbpf_log`) or are absent (a kernel feature a probe
//! needs is missing). docs/KERNELS.md has what older kernels lack and what replaces it.
//!
//! Before anything is loaded, `environment` checks what the requested probes and target need
//! against this process's capabilities ([`check_privileges`]: root, or CAP_BPF and CAP_PERFMON
//! and what a probe or target adds, asked of the kernel; docs/PRIVILEGES.md). The files a traced
//! process maps are its own, possibly hostile: they are opened inside its root
//! (`procmaps::open_mapped_file`), and the table builder and the symbolizer bound what any of them
//! can cost to its own table and symbols (the `fuzzing` feature exposes that path to `fuzz/`).
//!
//! Configuration comes in through [`RecordOptions`], [`ProbeSettings`] and [`UnwindOptions`]:
//! this library reads no configuration from the environment (the `lockscope` binary reads
//! `LOCKSCOPE_FAIL_ATTACH`, `LOCKSCOPE_BPF_PROGRAMS`, `LOCKSCOPE_USER_STACKS` and
//! `LOCKSCOPE_STACK_MEMO` into them); `launch` reads `PATH` to find a command as execvp does.
//! `launch` starts a command only once the probes are attached; `procmaps` and `symbolize` turn
//! addresses into frames. The `cpu` probe (`probes/cpu.rs`) samples on-CPU time with per-CPU
//! cpu-clock perf events; its records are on-CPU time, never waits.

mod bottleneck;
mod environment;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod launch;
mod libbpf_log;
mod object;
mod priority;
mod probe;
mod probe_set;
mod probes;
mod procmaps;
mod recorder;
mod resolve;
mod shared;
mod skel;
mod symbolize;
mod syscalls;
mod target_set;
mod unwind;
mod variant;

pub use environment::{
    check_environment, check_kernel_btf, check_privileges, Capability, MissingCapabilities, Need,
    KERNEL_BTF,
};
pub use error::Error;
pub use probe::{syscall_numbers, ProbeSettings};
pub use probe_set::{probe_support, ProbeSupport};
pub use probes::{DEFAULT_FREQUENCY_HZ, MAX_FREQUENCY_HZ};
pub use recorder::{LiveSnapshot, RecordOptions, Recorder, RecorderStatus, Recording};
pub use target_set::target_processes;
pub use unwind::{
    StackMemo, TableBuild, UnwindOptions, UnwindStats, UserStacks, DEFAULT_CACHE_MAX_BYTES,
};
pub use variant::ProgramVariant;
