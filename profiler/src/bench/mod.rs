//! `lockscope bench`: a portable micro-benchmark suite of the kernel and libc primitives that
//! decide how fast a threaded server can be (system calls, signals, processes, context switches,
//! page faults, loopback TCP, pthread mutexes and condition variables), in the spirit of lmbench,
//! so two kernels can be compared with one command on each machine and one `bench diff`.
//!
//! Plain `std` + `libc`, no tracing: it runs on Linux, macOS and FreeBSD.
//!
//! - [`run_suite`] runs the benchmarks selected by [`BenchOptions`] into [`BenchResults`];
//! - [`write_table`] prints them (microseconds, as lmbench does; operations per second and
//!   scaling versus one thread for the thread-scaling tests);
//! - [`write_json`] / [`read_json`] store them with an environment fingerprint
//!   (schema: `docs/BENCH-JSON.md`);
//! - [`write_diff`] prints two runs side by side with ratios;
//! - [`BenchError`] says why the suite could not run (with the [`RunError`] of a benchmark that
//!   failed) or a file could not be read or written.
//!
//! Every latency benchmark is calibrated (iterations per repetition chosen so one repetition
//! lasts a target time), warmed up once, then repeated; each repetition gives one sample
//! (microseconds per operation) and the table shows their minimum, median and spread
//! (see [`Summary`]).

mod environment;
mod error;
mod network;
mod output;
mod processes;
mod pthread;
mod stats;
mod syscalls;
mod threads;

pub use environment::Environment;
pub use error::{BenchError, RunError};
pub use output::{read_json, write_diff, write_json, write_table};
pub use stats::Summary;

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `format` of every bench JSON file: tells it apart from other JSON (profiles, reports).
pub const FORMAT: &str = "lockscope-bench";

/// Version of the bench JSON schema this lockscope writes; [`read_json`] reads it and older.
pub const SCHEMA_VERSION: u32 = 1;

/// Thread counts of the scaling tests when none are given.
pub const DEFAULT_THREADS: [u32; 7] = [1, 2, 5, 10, 20, 35, 50];

/// The most threads a scaling test accepts.
pub const MAX_THREADS: u32 = 1024;

/// What `lockscope bench` runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BenchOptions {
    /// Fewer and shorter repetitions (the whole suite in a few seconds; noisier numbers).
    /// Default: `false`.
    pub quick: bool,
    /// Benchmarks to run, by [`benchmark_names`]; empty runs all of them. Default: empty.
    pub only: Vec<String>,
    /// Thread counts of the thread-scaling tests. One thread is always measured too, as the
    /// base of the scaling column. Default: [`DEFAULT_THREADS`] (1, 2, 5, 10, 20, 35, 50).
    pub threads: Vec<u32>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            quick: false,
            only: Vec::new(),
            threads: DEFAULT_THREADS.to_vec(),
        }
    }
}

/// One `lockscope bench` run: where it ran, how, and every row it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BenchResults {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// The machine the numbers belong to.
    pub environment: Environment,
    /// How the suite was run.
    pub settings: RunSettings,
    /// Latency rows, in [`benchmark_names`] order.
    pub latency: Vec<LatencyResult>,
    /// Thread-scaling rows: per test, one row per thread count, ascending.
    pub scaling: Vec<ScalingResult>,
}

/// How a suite was run (the options, and the repetition plan they led to).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunSettings {
    /// `--quick` was given.
    pub quick: bool,
    /// `--only` names (empty: all benchmarks).
    pub only: Vec<String>,
    /// Thread counts of the scaling tests, ascending, 1 included.
    pub threads: Vec<u32>,
    /// Timed repetitions of each latency benchmark (one sample each).
    pub latency_repetitions: u32,
    /// Target duration of one latency repetition, microseconds.
    pub latency_target_us: u64,
    /// Timed repetitions of each scaling test at each thread count.
    pub scaling_repetitions: u32,
    /// Duration of one scaling repetition, milliseconds.
    pub scaling_duration_ms: u64,
}

/// One latency benchmark: time per operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LatencyResult {
    /// Benchmark name (see [`benchmark_names`]).
    pub name: String,
    /// What one operation is.
    pub description: String,
    /// Operations per repetition (calibrated).
    pub iterations: u64,
    /// Summary of `samples_us`, microseconds per operation.
    pub time_us: Summary,
    /// One sample per repetition: microseconds per operation.
    pub samples_us: Vec<f64>,
}

/// One thread-scaling test at one thread count: throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScalingResult {
    /// Test name (see [`benchmark_names`]).
    pub name: String,
    /// What one operation is.
    pub description: String,
    /// Worker threads.
    pub threads: u32,
    /// Summary of `samples_ops_per_sec`.
    pub ops_per_sec: Summary,
    /// One sample per repetition: operations per second, all threads together.
    pub samples_ops_per_sec: Vec<f64>,
    /// Median throughput as a percentage of the same test's median with one thread
    /// (the seed's "Scaling (Concurrency one=100%)").
    pub scaling_percent: f64,
}

/// Runs one benchmark in a thread named after it (at most 15 bytes, Linux's limit). The threads
/// it starts inherit the name, so a recording of the suite (`lockscope bench --record`) tells
/// each benchmark's waits apart by thread name.
fn in_named_thread<T: Send>(
    name: &str,
    run: impl FnOnce() -> Result<T, RunError> + Send,
) -> Result<T, RunError> {
    let mut thread_name = name.to_string();
    thread_name.truncate(15);
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name(thread_name)
            .spawn_scoped(scope, run)
            .map_err(RunError::BenchmarkThread)?
            .join()
            .map_err(|_| RunError::Panicked {
                thread: "the benchmark thread",
            })?
    })
}

/// Shared state of a latency benchmark run: a scratch file for the file-system rows.
pub(crate) struct Fixture {
    /// A small regular file, removed when the fixture is dropped.
    path: std::path::PathBuf,
    /// The same path for libc calls.
    pub(crate) scratch_path: std::ffi::CString,
}

impl Fixture {
    fn new() -> Result<Fixture, BenchError> {
        // Unique per fixture, not just per process: two suites may run at once in one process.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let serial = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("lockscope-bench-{}-{serial}", std::process::id()));
        if let Err(source) = std::fs::write(&path, [0u8; 4096]) {
            return Err(BenchError::ScratchFile { path, source });
        }
        let scratch_path = match std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) {
            Ok(scratch_path) => scratch_path,
            Err(source) => return Err(BenchError::ScratchPath { path, source }),
        };
        Ok(Fixture { path, scratch_path })
    }

    /// The scratch file.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Runs `iterations` operations and returns how long they took (set-up excluded).
type LatencyFn = fn(&Fixture, u64) -> Result<Duration, RunError>;

/// Runs a scaling test with this many threads for about this long; returns operations done and
/// the time they took.
type ScalingFn = fn(u32, Duration) -> Result<(u64, Duration), RunError>;

/// A latency benchmark of the catalog.
struct LatencyBenchmark {
    name: &'static str,
    description: &'static str,
    /// Cap on calibrated iterations (bounds ephemeral ports, pipes of children, ...).
    max_iterations: u64,
    run: LatencyFn,
}

/// A thread-scaling test of the catalog.
struct ScalingBenchmark {
    name: &'static str,
    description: &'static str,
    run: ScalingFn,
}

/// Every latency benchmark, in table order.
const LATENCY: &[LatencyBenchmark] = &[
    LatencyBenchmark {
        name: "null-call",
        description: "null syscall: getppid()",
        max_iterations: 1 << 24,
        run: syscalls::null_call,
    },
    LatencyBenchmark {
        name: "null-io",
        description: "1-byte read of /dev/zero and write to /dev/null, mean",
        max_iterations: 1 << 24,
        run: syscalls::null_io,
    },
    LatencyBenchmark {
        name: "stat",
        description: "stat() of a scratch file",
        max_iterations: 1 << 22,
        run: syscalls::stat,
    },
    LatencyBenchmark {
        name: "open+close",
        description: "open() and close() of a scratch file",
        max_iterations: 1 << 22,
        run: syscalls::open_close,
    },
    LatencyBenchmark {
        name: "select-10",
        description: "select() on 10 ready file fds",
        max_iterations: 1 << 22,
        run: syscalls::select_10,
    },
    LatencyBenchmark {
        name: "select-100",
        description: "select() on 100 ready file fds",
        max_iterations: 1 << 22,
        run: syscalls::select_100,
    },
    LatencyBenchmark {
        name: "sig-install",
        description: "sigaction() installing a handler",
        max_iterations: 1 << 24,
        run: syscalls::signal_install,
    },
    LatencyBenchmark {
        name: "sig-catch",
        description: "raise() a signal and run its handler",
        max_iterations: 1 << 22,
        run: syscalls::signal_catch,
    },
    LatencyBenchmark {
        name: "pipe-rtt",
        description: "1-byte round trip over pipes between 2 processes",
        max_iterations: 1 << 20,
        run: processes::pipe_round_trip,
    },
    LatencyBenchmark {
        name: "ctx-2proc",
        description: "context switch in a ring of 2 processes (per hop, pipe I/O included)",
        max_iterations: 1 << 20,
        run: processes::context_switch_2,
    },
    LatencyBenchmark {
        name: "ctx-8proc",
        description: "context switch in a ring of 8 processes (per hop, pipe I/O included)",
        max_iterations: 1 << 20,
        run: processes::context_switch_8,
    },
    LatencyBenchmark {
        name: "ctx-2thread",
        description: "context switch between 2 threads (per hop, pipe I/O included)",
        max_iterations: 1 << 20,
        run: threads::context_switch,
    },
    #[cfg(target_os = "linux")]
    LatencyBenchmark {
        name: "yield-2thread",
        description: "switch between 2 runnable threads on one CPU by sched_yield() (per switch)",
        max_iterations: 1 << 20,
        run: threads::yield_switch,
    },
    LatencyBenchmark {
        name: "fork+exit",
        description: "fork(), child _exit(), parent waitpid()",
        max_iterations: 1 << 14,
        run: processes::fork_exit,
    },
    LatencyBenchmark {
        name: "fork+exec",
        description: "fork(), child execve() /bin/true, parent waitpid()",
        max_iterations: 1 << 12,
        run: processes::fork_exec_true,
    },
    LatencyBenchmark {
        name: "fork+sh",
        description: "fork(), child execve() /bin/sh -c /bin/true, parent waitpid()",
        max_iterations: 1 << 12,
        run: processes::fork_sh,
    },
    LatencyBenchmark {
        name: "thread-create",
        description: "pthread_create() and pthread_join()",
        max_iterations: 1 << 18,
        run: threads::create_join,
    },
    LatencyBenchmark {
        name: "mutex-handoff",
        description: "pthread mutex+condvar handoff between 2 threads (per handoff)",
        max_iterations: 1 << 20,
        run: threads::mutex_handoff,
    },
    LatencyBenchmark {
        name: "mmap-1mib",
        description: "mmap() 1 MiB anonymous, write every page, munmap()",
        max_iterations: 1 << 16,
        run: syscalls::mmap_touch_unmap,
    },
    LatencyBenchmark {
        name: "page-fault",
        description: "first write to a page of fresh anonymous memory (per page)",
        max_iterations: 1 << 24,
        run: syscalls::page_fault,
    },
    LatencyBenchmark {
        name: "tcp-rtt",
        description: "1-byte round trip over TCP on 127.0.0.1 (2 threads)",
        max_iterations: 1 << 20,
        run: network::tcp_round_trip,
    },
    LatencyBenchmark {
        name: "tcp-connect",
        description: "connect() to a listener on 127.0.0.1",
        max_iterations: 1 << 16,
        run: network::tcp_connect,
    },
];

/// Every thread-scaling test, in table order.
const SCALING: &[ScalingBenchmark] = &[
    ScalingBenchmark {
        name: "mutex-contention",
        description: "N threads: lock a shared pthread mutex, compute, unlock, compute",
        run: threads::mutex_contention,
    },
    ScalingBenchmark {
        name: "condvar-queue",
        description: "1 producer, N consumers on a pthread mutex+condvar work queue",
        run: threads::condvar_queue,
    },
];

/// Names of every benchmark, in table order: the values `--only` accepts.
pub fn benchmark_names() -> Vec<&'static str> {
    LATENCY
        .iter()
        .map(|benchmark| benchmark.name)
        .chain(SCALING.iter().map(|benchmark| benchmark.name))
        .collect()
}

/// Checks `--only` names against [`benchmark_names`]; the error lists the known names.
pub fn check_names(names: &[String]) -> Result<(), BenchError> {
    let known = benchmark_names();
    match names.iter().find(|name| !known.contains(&name.as_str())) {
        Some(name) => Err(BenchError::UnknownBenchmark { name: name.clone() }),
        None => Ok(()),
    }
}

/// Checks the thread counts and returns them sorted, deduplicated, with 1 added.
fn thread_counts(threads: &[u32]) -> Result<Vec<u32>, BenchError> {
    if let Some(&count) = threads
        .iter()
        .find(|&&count| count == 0 || count > MAX_THREADS)
    {
        return Err(BenchError::InvalidThreadCount { count });
    }
    let mut counts = threads.to_vec();
    counts.push(1);
    counts.sort_unstable();
    counts.dedup();
    Ok(counts)
}

/// The repetition plan of a run.
fn settings(options: &BenchOptions, threads: Vec<u32>) -> RunSettings {
    let (latency_repetitions, latency_target_us, scaling_repetitions, scaling_duration_ms) =
        if options.quick {
            (5, 2_000, 3, 40)
        } else {
            (11, 20_000, 5, 200)
        };
    RunSettings {
        quick: options.quick,
        only: options.only.clone(),
        threads,
        latency_repetitions,
        latency_target_us,
        scaling_repetitions,
        scaling_duration_ms,
    }
}

/// Runs the benchmarks `options` selects. `progress` gets one line per benchmark (and per thread
/// count of the scaling tests) before it runs, e.g. `running fork+exit`.
pub fn run_suite(
    options: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<BenchResults, BenchError> {
    check_names(&options.only)?;
    let threads = thread_counts(&options.threads)?;
    let settings = settings(options, threads);
    let environment = Environment::current();
    let selected = |name: &str| options.only.is_empty() || options.only.iter().any(|n| n == name);

    let mut latency = Vec::new();
    let latency_benchmarks: Vec<&LatencyBenchmark> =
        LATENCY.iter().filter(|b| selected(b.name)).collect();
    if !latency_benchmarks.is_empty() {
        let fixture = Fixture::new()?;
        for benchmark in latency_benchmarks {
            progress(&format!("running {}", benchmark.name));
            let (iterations, samples_us) = in_named_thread(benchmark.name, || {
                measure_latency(&settings, benchmark, &fixture)
            })
            .map_err(|source| BenchError::Failed {
                name: benchmark.name,
                threads: None,
                source,
            })?;
            let time_us = Summary::of(&samples_us).ok_or(BenchError::NoValidSamples {
                name: benchmark.name,
            })?;
            latency.push(LatencyResult {
                name: benchmark.name.to_string(),
                description: benchmark.description.to_string(),
                iterations,
                time_us,
                samples_us,
            });
        }
    }

    let mut scaling = Vec::new();
    for benchmark in SCALING.iter().filter(|b| selected(b.name)) {
        let mut rows: Vec<ScalingResult> = Vec::new();
        for &count in &settings.threads {
            let plural = if count == 1 { "" } else { "s" };
            progress(&format!(
                "running {} with {count} thread{plural}",
                benchmark.name
            ));
            let samples = in_named_thread(benchmark.name, || {
                measure_scaling(&settings, benchmark, count)
            })
            .map_err(|source| BenchError::Failed {
                name: benchmark.name,
                threads: Some(count),
                source,
            })?;
            let ops_per_sec = Summary::of(&samples).ok_or(BenchError::NoValidSamples {
                name: benchmark.name,
            })?;
            rows.push(ScalingResult {
                name: benchmark.name.to_string(),
                description: benchmark.description.to_string(),
                threads: count,
                ops_per_sec,
                samples_ops_per_sec: samples,
                scaling_percent: 0.0,
            });
        }
        // thread_counts() always includes 1 and sorts, so the first row is the base.
        let base = rows
            .first()
            .map(|row| row.ops_per_sec.median)
            .unwrap_or(0.0);
        for row in &mut rows {
            row.scaling_percent = if base > 0.0 {
                row.ops_per_sec.median / base * 100.0
            } else {
                0.0
            };
        }
        scaling.extend(rows);
    }

    Ok(BenchResults {
        format: FORMAT.to_string(),
        schema_version: SCHEMA_VERSION,
        environment,
        settings,
        latency,
        scaling,
    })
}

/// Calibrates, warms up and repeats one latency benchmark; returns the iterations per
/// repetition and one sample (µs per operation) per repetition.
fn measure_latency(
    settings: &RunSettings,
    benchmark: &LatencyBenchmark,
    fixture: &Fixture,
) -> Result<(u64, Vec<f64>), RunError> {
    let target = Duration::from_micros(settings.latency_target_us);
    // Calibration: grow the iteration count until one repetition lasts the target time.
    let mut iterations: u64 = 1;
    loop {
        let elapsed = (benchmark.run)(fixture, iterations)?;
        if elapsed >= target || iterations >= benchmark.max_iterations {
            break;
        }
        let grow = if elapsed.is_zero() {
            10.0
        } else {
            // Aim 10% past the target, at most 10 times more per step.
            (target.as_secs_f64() / elapsed.as_secs_f64() * 1.1).min(10.0)
        };
        // Truncating float-to-int cast is fine: the value is small and positive.
        let next = (iterations as f64 * grow) as u64;
        iterations = next.max(iterations + 1).min(benchmark.max_iterations);
    }
    // Warm-up at the final size, then the timed repetitions.
    (benchmark.run)(fixture, iterations)?;
    let mut samples = Vec::with_capacity(settings.latency_repetitions as usize);
    for _ in 0..settings.latency_repetitions {
        let elapsed = (benchmark.run)(fixture, iterations)?;
        samples.push(elapsed.as_secs_f64() * 1e6 / iterations as f64);
    }
    Ok((iterations, samples))
}

/// Warms up and repeats one scaling test at one thread count; returns operations per second of
/// each repetition.
fn measure_scaling(
    settings: &RunSettings,
    benchmark: &ScalingBenchmark,
    threads: u32,
) -> Result<Vec<f64>, RunError> {
    let duration = Duration::from_millis(settings.scaling_duration_ms);
    (benchmark.run)(threads, duration / 4)?;
    let mut samples = Vec::with_capacity(settings.scaling_repetitions as usize);
    for _ in 0..settings.scaling_repetitions {
        let (operations, elapsed) = (benchmark.run)(threads, duration)?;
        if elapsed.is_zero() {
            return Err(RunError::NoTime);
        }
        samples.push(operations as f64 / elapsed.as_secs_f64());
    }
    Ok(samples)
}
