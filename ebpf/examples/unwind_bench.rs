//! Per-event cost of user-stack capture (docs/BENCHMARKS.md, "Stack unwinding cost"): a futex
//! ping-pong (`tests/data/pingpong.c`, every handoff one blocking wait on a ~30-frame stack) timed
//! without lockscope, and recorded by pid with user stacks off, by the kernel's frame-pointer
//! walk, and by the CFI unwinder; the extra time divided by the waits recorded is the cost per
//! event. Runs are interleaved and repeated; the table shows medians.
//!
//! Run as root:
//! `cargo run --release -p lockscope-ebpf --example unwind_bench [ROUNDS] [RUNS] [DEPTH]`.

use lockscope_ebpf::{RecordOptions, Recorder, UserStacks};
use lockscope_probes::Target;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const PINGPONG_C: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pingpong.c");
/// Default recursion depth before the ping-pong: with main/start_thread, libc and the loop,
/// stacks are about 30 frames deep.
const DEPTH: &str = "24";

/// One configuration: which binary, and how lockscope records it (`None`: not at all).
struct Config {
    name: &'static str,
    binary: PathBuf,
    user_stacks: Option<&'static str>,
}

/// One run: wall time of the ping-pong, waits recorded, the deepest user stack recorded, and the
/// time spent in lockscope's BPF programs (all hooks: every syscall of the target pays a little).
struct Run {
    elapsed_ns: u64,
    waits: u64,
    depth: usize,
    bpf_ns: u64,
}

/// `bpf(BPF_ENABLE_STATS, BPF_STATS_RUN_TIME)`: the kernel times every BPF program run while
/// the returned fd is open.
fn enable_bpf_stats() -> Option<std::os::fd::OwnedFd> {
    const BPF_ENABLE_STATS: libc::c_long = 32;
    let attr = [0u32; 4]; // enable_stats.type = BPF_STATS_RUN_TIME (0)
                          // SAFETY: bpf(2) reads `size` bytes of `attr`, which lives across the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_ENABLE_STATS,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    // SAFETY: a new fd owned by nobody else.
    (fd >= 0).then(|| unsafe { std::os::fd::FromRawFd::from_raw_fd(fd as i32) })
}

/// Total run time of the BPF programs this process holds (from their fdinfo).
fn own_bpf_run_time_ns() -> u64 {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    fds.filter_map(Result::ok)
        .filter(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().contains("bpf-prog"))
        })
        .filter_map(|fd| {
            std::fs::read_to_string(format!(
                "/proc/self/fdinfo/{}",
                fd.file_name().to_string_lossy()
            ))
            .ok()
        })
        .filter_map(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("run_time_ns:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

fn compile(output: &Path, frame_pointers: bool) {
    let flag = if frame_pointers {
        "-fno-omit-frame-pointer"
    } else {
        "-fomit-frame-pointer"
    };
    let status = Command::new("cc")
        .args(["-O2", "-pthread", flag, "-o"])
        .arg(output)
        .arg(PINGPONG_C)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed");
}

fn run(config: &Config, rounds: &str, depth: &str) -> Run {
    let mut child = Command::new(&config.binary)
        .args([rounds, depth])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start pingpong");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("pid line");
    let pid: u32 = line
        .trim()
        .strip_prefix("pid ")
        .and_then(|p| p.parse().ok())
        .expect("pid");
    let recorder = config.user_stacks.map(|mode| {
        let mut options = RecordOptions::new(Target::pid(pid));
        options.unwind.user_stacks = UserStacks::from_name(mode).expect("a user-stack mode");
        let started = std::time::Instant::now();
        let recorder = Recorder::start(options).expect("start recorder");
        if let Ok(Some(stats)) = recorder.unwind_stats() {
            eprintln!(
                "{}: attached in {:.1} ms, {} unwind tables, {} rows",
                config.name,
                started.elapsed().as_secs_f64() * 1e3,
                stats.tables,
                stats.rows_used
            );
        }
        recorder
    });
    child
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    line.clear();
    stdout.read_line(&mut line).expect("result line");
    let elapsed_ns = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("elapsed");
    child.wait().expect("wait");
    let (waits, depth, bpf_ns) = match recorder {
        Some(mut recorder) => {
            std::thread::sleep(Duration::from_millis(50));
            let _ = recorder.poll();
            let bpf_ns = own_bpf_run_time_ns();
            let profile = recorder.finish("benchmark").expect("finish");
            let waits = profile.waits.iter().map(|w| w.stats.count).sum();
            let depth = profile
                .waits
                .iter()
                .filter_map(|w| profile.stack(w.user_stack))
                .map(|s| s.frames.len())
                .max()
                .unwrap_or(0);
            (waits, depth, bpf_ns)
        }
        None => (0, 0, 0),
    };
    Run {
        elapsed_ns,
        waits,
        depth,
        bpf_ns,
    }
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = args.get(1).map_or("100000", String::as_str).to_owned();
    let runs: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(3);
    let depth = args.get(3).map_or(DEPTH, String::as_str).to_owned();
    let dir = std::env::temp_dir().join(format!("lockscope-unwind-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let no_fp = dir.join("pingpong");
    let fp = dir.join("pingpong-fp");
    compile(&no_fp, false);
    compile(&fp, true);
    let configs = [
        ("not recorded", &no_fp, None),
        ("not recorded (-fno-omit-frame-pointer)", &fp, None),
        ("no user stacks", &no_fp, Some("none")),
        (
            "frame pointers (-fno-omit-frame-pointer)",
            &fp,
            Some("frame-pointers"),
        ),
        ("frame pointers", &no_fp, Some("frame-pointers")),
        ("CFI", &no_fp, Some("cfi")),
        ("CFI (-fno-omit-frame-pointer)", &fp, Some("cfi")),
    ]
    .map(|(name, binary, user_stacks)| Config {
        name,
        binary: binary.clone(),
        user_stacks,
    });
    let _stats = enable_bpf_stats();
    if _stats.is_none() {
        eprintln!("BPF run-time statistics unavailable: the BPF time column stays empty");
    }
    let mut results: Vec<Vec<Run>> = configs.iter().map(|_| Vec::new()).collect();
    for _ in 0..runs {
        for (config, runs) in configs.iter().zip(&mut results) {
            runs.push(run(config, &rounds, &depth));
        }
    }
    let baseline = |binary: &Path| {
        configs
            .iter()
            .zip(&results)
            .find(|(c, _)| c.user_stacks.is_none() && c.binary == binary)
            .map(|(_, r)| median(r.iter().map(|r| r.elapsed_ns).collect()))
            .unwrap_or(0)
    };
    println!("{rounds} round trips, recursion depth {depth}, {runs} runs each, medians");
    println!(
        "| configuration | wall time | waits recorded | deepest user stack | BPF time per wait | \
         wall time per wait vs not recorded |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (config, runs) in configs.iter().zip(&results) {
        let elapsed = median(runs.iter().map(|r| r.elapsed_ns).collect());
        let waits = median(runs.iter().map(|r| r.waits).collect());
        let depth = runs.iter().map(|r| r.depth).max().unwrap_or(0);
        let bpf = if waits > 0 {
            let bpf_ns = median(runs.iter().map(|r| r.bpf_ns).collect());
            format!("{:.2} µs", bpf_ns as f64 / waits as f64 / 1000.0)
        } else {
            "-".to_owned()
        };
        let cost = if waits > 0 {
            let extra = elapsed as f64 - baseline(&config.binary) as f64;
            format!("{:.2} µs", extra / waits as f64 / 1000.0)
        } else {
            "-".to_owned()
        };
        println!(
            "| {} | {:.3} s | {waits} | {depth} | {bpf} | {cost} |",
            config.name,
            elapsed as f64 / 1e9
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
