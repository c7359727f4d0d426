//! Text and JSON outputs of `lockscope bench`: the results table, the JSON file (schema in
//! `docs/BENCH-JSON.md`) and the side-by-side diff of two JSON files.

use super::{
    BenchError, BenchResults, Environment, LatencyResult, ScalingResult, FORMAT, SCHEMA_VERSION,
};
use crate::render::WriteError;
use std::io::{self, Write};
use std::path::Path;

/// Microseconds with about three significant digits, as lmbench prints them (`0.052`, `1.06`,
/// `143`).
fn format_us(us: f64) -> String {
    if us < 1.0 {
        format!("{us:.3}")
    } else if us < 10.0 {
        format!("{us:.2}")
    } else if us < 100.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

/// Operations per second, whole.
fn format_rate(rate: f64) -> String {
    format!("{rate:.0}")
}

/// One line naming the machine of a run.
fn describe(environment: &Environment) -> String {
    format!(
        "{}: {} {} {}, {} ({} CPUs), {}, lockscope {}, {}",
        environment.hostname,
        environment.os,
        environment.kernel_release,
        environment.machine,
        environment.cpu_model,
        environment.cpu_count,
        environment.libc,
        environment.lockscope_version,
        environment.date
    )
}

/// Prints `results` as tables: latency rows (minimum, median and spread in microseconds, as
/// lmbench reports), then the thread-scaling rows (operations per second, scaling versus one
/// thread).
pub fn write_table(results: &BenchResults, out: &mut dyn Write) -> Result<(), WriteError> {
    table_to(results, out).map_err(WriteError::io("the bench table"))
}

fn table_to(results: &BenchResults, out: &mut dyn Write) -> io::Result<()> {
    let settings = &results.settings;
    writeln!(out, "lockscope bench on {}", describe(&results.environment))?;
    writeln!(
        out,
        "{} run: latency {} repetitions of ~{} ms each after calibration and warm-up; \
         scaling {} repetitions of {} ms",
        if settings.quick { "quick" } else { "full" },
        settings.latency_repetitions,
        settings.latency_target_us / 1000,
        settings.scaling_repetitions,
        settings.scaling_duration_ms
    )?;
    if !results.latency.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "Latency, microseconds per operation (lower is better); spread = max - min"
        )?;
        writeln!(
            out,
            "{:<16} {:>9} {:>9} {:>9} {:>8} {:>10}  operation",
            "benchmark", "min", "median", "spread", "spread%", "iterations"
        )?;
        for row in &results.latency {
            writeln!(
                out,
                "{:<16} {:>9} {:>9} {:>9} {:>7.1}% {:>10}  {}",
                row.name,
                format_us(row.time_us.min),
                format_us(row.time_us.median),
                format_us(row.time_us.spread),
                row.time_us.spread_percent(),
                row.iterations,
                row.description
            )?;
        }
    }
    if !results.scaling.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "Thread scaling, operations per second of all threads (higher is better); \
             scaling: one thread = 100%"
        )?;
        writeln!(
            out,
            "{:<16} {:>7} {:>12} {:>12} {:>8} {:>8}",
            "benchmark", "threads", "min ops/s", "median ops/s", "spread%", "scaling"
        )?;
        let mut previous: Option<&str> = None;
        for row in &results.scaling {
            if previous.is_some_and(|name| name != row.name) {
                writeln!(out)?;
            }
            previous = Some(&row.name);
            writeln!(
                out,
                "{:<16} {:>7} {:>12} {:>12} {:>7.1}% {:>7.1}%",
                row.name,
                row.threads,
                format_rate(row.ops_per_sec.min),
                format_rate(row.ops_per_sec.median),
                row.ops_per_sec.spread_percent(),
                row.scaling_percent
            )?;
        }
        let mut described: Vec<&str> = Vec::new();
        for row in &results.scaling {
            if !described.contains(&row.name.as_str()) {
                described.push(&row.name);
                writeln!(out, "  {}: {}", row.name, row.description)?;
            }
        }
    }
    Ok(())
}

/// Writes `results` as pretty-printed JSON (schema: `docs/BENCH-JSON.md`), ending with a newline.
pub fn write_json(results: &BenchResults, out: &mut dyn Write) -> Result<(), WriteError> {
    const WHAT: &str = "the bench results as JSON";
    serde_json::to_writer_pretty(&mut *out, results).map_err(WriteError::json(WHAT))?;
    writeln!(out).map_err(WriteError::io(WHAT))?;
    Ok(())
}

/// Reads a file written by [`write_json`]. Errors say whether the file is unreadable, not JSON,
/// not bench JSON, from a newer lockscope, or malformed.
pub fn read_json(path: &Path) -> Result<BenchResults, BenchError> {
    let path_buf = || path.to_path_buf();
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::Read {
        path: path_buf(),
        source,
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| BenchError::NotJson {
            path: path_buf(),
            source,
        })?;
    if value.get("format").and_then(serde_json::Value::as_str) != Some(FORMAT) {
        return Err(BenchError::NotBenchJson { path: path_buf() });
    }
    let version = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| BenchError::NoSchemaVersion { path: path_buf() })?;
    if version > u64::from(SCHEMA_VERSION) {
        return Err(BenchError::NewerSchema {
            path: path_buf(),
            version,
        });
    }
    serde_json::from_value(value).map_err(|source| BenchError::Malformed {
        path: path_buf(),
        source,
    })
}

/// `B / A`, or `-` when either is missing or A is 0.
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 => format!("{:.2}", b / a),
        _ => "-".to_string(),
    }
}

/// Distinct keys of `a` then those only in `b`, in order of first appearance.
fn union_keys<K: PartialEq + Clone>(a: &[K], b: &[K]) -> Vec<K> {
    let mut keys: Vec<K> = Vec::new();
    for key in a.iter().chain(b) {
        if !keys.contains(key) {
            keys.push(key.clone());
        }
    }
    keys
}

/// Prints two runs side by side, with the ratio B/A of their medians: latency rows (B/A above
/// 1: B is slower), then scaling rows (B/A above 1: B does more). Rows present in only one run
/// (e.g. a run with `--only`) show `missing`.
pub fn write_diff(
    a: &BenchResults,
    b: &BenchResults,
    out: &mut dyn Write,
) -> Result<(), WriteError> {
    diff_to(a, b, out).map_err(WriteError::io("the bench diff"))
}

fn diff_to(a: &BenchResults, b: &BenchResults, out: &mut dyn Write) -> io::Result<()> {
    const MISSING: &str = "missing";
    writeln!(out, "A: {}", describe(&a.environment))?;
    writeln!(out, "B: {}", describe(&b.environment))?;

    let latency_of = |results: &BenchResults, name: &str| -> Option<f64> {
        results
            .latency
            .iter()
            .find(|row| row.name == name)
            .map(|row: &LatencyResult| row.time_us.median)
    };
    let names_a: Vec<String> = a.latency.iter().map(|row| row.name.clone()).collect();
    let names_b: Vec<String> = b.latency.iter().map(|row| row.name.clone()).collect();
    let names = union_keys(&names_a, &names_b);
    if !names.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "Latency, median microseconds per operation; B/A above 1: B is slower"
        )?;
        writeln!(
            out,
            "{:<16} {:>10} {:>10} {:>7}",
            "benchmark", "A", "B", "B/A"
        )?;
        for name in &names {
            let (in_a, in_b) = (latency_of(a, name), latency_of(b, name));
            writeln!(
                out,
                "{:<16} {:>10} {:>10} {:>7}",
                name,
                in_a.map_or_else(|| MISSING.to_string(), format_us),
                in_b.map_or_else(|| MISSING.to_string(), format_us),
                ratio(in_a, in_b)
            )?;
        }
    }

    let scaling_of = |results: &BenchResults, key: &(String, u32)| -> Option<(f64, f64)> {
        results
            .scaling
            .iter()
            .find(|row| row.name == key.0 && row.threads == key.1)
            .map(|row: &ScalingResult| (row.ops_per_sec.median, row.scaling_percent))
    };
    // Tests in order of first appearance; within a test, every thread count of either run,
    // ascending, so a count only one run measured lands in its place.
    let tests_of = |results: &BenchResults| -> Vec<String> {
        results.scaling.iter().map(|row| row.name.clone()).collect()
    };
    let mut keys: Vec<(String, u32)> = Vec::new();
    for test in union_keys(&tests_of(a), &tests_of(b)) {
        let mut counts: Vec<u32> = a
            .scaling
            .iter()
            .chain(&b.scaling)
            .filter(|row| row.name == test)
            .map(|row| row.threads)
            .collect();
        counts.sort_unstable();
        counts.dedup();
        keys.extend(counts.into_iter().map(|count| (test.clone(), count)));
    }
    if !keys.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "Thread scaling, median operations per second (scaling: one thread = 100%); \
             B/A above 1: B does more"
        )?;
        writeln!(
            out,
            "{:<16} {:>7} {:>12} {:>9} {:>12} {:>9} {:>7}",
            "benchmark", "threads", "A ops/s", "A scaling", "B ops/s", "B scaling", "B/A"
        )?;
        let mut previous: Option<&str> = None;
        for key in &keys {
            if previous.is_some_and(|name| name != key.0) {
                writeln!(out)?;
            }
            previous = Some(&key.0);
            let (in_a, in_b) = (scaling_of(a, key), scaling_of(b, key));
            let rate = |side: Option<(f64, f64)>| {
                side.map_or_else(|| MISSING.to_string(), |(rate, _)| format_rate(rate))
            };
            let scaling = |side: Option<(f64, f64)>| {
                side.map_or_else(|| "-".to_string(), |(_, percent)| format!("{percent:.1}%"))
            };
            writeln!(
                out,
                "{:<16} {:>7} {:>12} {:>9} {:>12} {:>9} {:>7}",
                key.0,
                key.1,
                rate(in_a),
                scaling(in_a),
                rate(in_b),
                scaling(in_b),
                ratio(in_a.map(|(rate, _)| rate), in_b.map(|(rate, _)| rate))
            )?;
        }
    }
    Ok(())
}
