//! Unwind tables of a running process, file by file (docs/BENCHMARKS.md, "Attaching to a loaded
//! server"): attaches to PID with every table built before recording (in parallel, below the
//! target's priority), once with an empty cache and once with the cache that run filled, and
//! prints how long each file's table took and its size.
//!
//! Run as root:
//! `cargo run --release -p lockscope-ebpf --example attach_tables PID [FILE-FILTER...]`.

use lockscope_ebpf::{RecordOptions, Recorder, UnwindOptions};
use lockscope_probes::Target;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let pid: u32 = args
        .next()
        .ok_or("usage: attach_tables PID [FILTER...]")?
        .parse()?;
    let filters: Vec<String> = args.collect();
    let cache = tempfile::tempdir()?;
    println!("| attach | file | rows | table size | time |");
    println!("|---|---|---:|---:|---:|");
    for run in ["first (empty cache)", "second (cached)"] {
        let mut options = RecordOptions::new(Target::pid(pid));
        let mut unwind = UnwindOptions::default();
        unwind.cache_dir = Some(cache.path().to_path_buf());
        options.unwind = unwind;
        let started = Instant::now();
        let recorder = Recorder::start(options)?;
        let attach = started.elapsed();
        let stats = recorder.unwind_stats()?.ok_or("no unwinder")?;
        for build in &stats.table_builds {
            let name = build.name.rsplit('/').next().unwrap_or(&build.name);
            if !filters.is_empty() && !filters.iter().any(|f| name.starts_with(f.as_str())) {
                continue;
            }
            println!(
                "| {run} | {name} | {} | {:.2} MiB | {:.1} ms{} |",
                build.rows,
                build.bytes as f64 / (1 << 20) as f64,
                build.elapsed.as_secs_f64() * 1e3,
                if build.cached { " (cache)" } else { "" },
            );
        }
        let total: u64 = stats.table_builds.iter().map(|b| b.bytes).sum();
        println!(
            "| {run} | all {} files | {} | {:.1} MiB | {:.0} ms to attach |",
            stats.table_builds.len(),
            stats.rows_used,
            total as f64 / (1 << 20) as f64,
            attach.as_secs_f64() * 1e3,
        );
        recorder.finish("attach_tables")?;
    }
    Ok(())
}
