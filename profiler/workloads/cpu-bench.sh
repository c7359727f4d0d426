#!/usr/bin/env bash
# What the `cpu` probe costs per sample, two ways, interleaved --reps times:
#  1. the BPF program's own time per run: the kernel's BPF statistics (kernel.bpf_stats_enabled
#     is set for the script's run and restored after), run_time_ns and run_cnt of
#     `lks_cpu_sample`, read by bpftool while `lockscope record --probes cpu --frequency F`
#     records the workload (the program lives as long as the recording); divided by the
#     recording's target samples (its `events`) it is the cost of one unwound sample, the early
#     returns of the other processes' samples included;
#  2. what sampling costs the sampled: a CPU-bound single thread (sha256sum of a 1 GiB file in
#     tmpfs: always on CPU, so it takes every sample of its CPU) timed untraced and recorded at
#     each frequency; (traced / untraced - 1) / F is the cost per sample as the workload feels
#     it (the hrtimer interrupt, perf's overflow path and the program), the best run of each.
# Debian 12, as root. Documented in docs/BENCHMARKS.md ("The cpu probe: cost per sample").
#
#   cpu-bench.sh [--reps 3] [--frequencies "99 997 9973"] [--lockscope BIN] [--out DIR]
#
# DIR (default /tmp/lockscope-cpu-bench-<time>) gets the run times, the BPF statistics, the
# profiles and table.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

reps=3
frequencies="99 997 9973"
lockscope_bin=$LOCKSCOPE_RELEASE
out="/tmp/lockscope-cpu-bench-$(date +%Y%m%d-%H%M%S)"
parse_options "reps frequencies lockscope=lockscope_bin out" "$@"
need_root
command -v bpftool >/dev/null || die "no bpftool (apt-get install bpftool)"
copy_lockscope "$lockscope_bin" "$out"
stats_before=$(sysctl -n kernel.bpf_stats_enabled)
data=$(mktemp /dev/shm/lockscope-cpu-bench.XXXXXX)
trap 'rm -f "$data"; sysctl -qw kernel.bpf_stats_enabled="$stats_before"' EXIT
sysctl -qw kernel.bpf_stats_enabled=1
head -c 1G /dev/zero >"$data"
environment_start "$out/environment.txt"

# The workload, timing itself into the file $1 (ns): only what runs once the probe is attached.
printf '%s\n' 'start=$(date +%s%N)' "sha256sum $data >/dev/null" \
    'echo $(($(date +%s%N) - start)) >"$1"' >"$out/work.sh"

# The last statistics of `lks_cpu_sample` seen while the recording runs, into $1.
poll_stats() {
    local file=$1
    while true; do
        if bpftool -j prog show name lks_cpu_sample >"$file.tmp" 2>/dev/null &&
            grep -q run_cnt "$file.tmp"; then
            mv "$file.tmp" "$file"
        fi
        sleep 0.1
    done
}

for rep in $(seq 1 "$reps"); do
    sh "$out/work.sh" "$out/untraced-r$rep.ns"
    for hz in $frequencies; do
        poll_stats "$out/stats-$hz-r$rep.json" &
        poller=$!
        "$LOCKSCOPE" record --probes cpu --frequency "$hz" -o "$out/cpu-$hz-r$rep.lsp" -- \
            sh "$out/work.sh" "$out/cpu-$hz-r$rep.ns" 2>"$out/cpu-$hz-r$rep.err"
        kill "$poller"
        wait "$poller" 2>/dev/null || true
    done
    log "repetition $rep done"
done
environment_end "$out/environment.txt"

python3 - "$out" "$frequencies" "$LOCKSCOPE" >"$out/table.md" <<'PY'
import glob, json, os, subprocess, sys
out, frequencies, lockscope = sys.argv[1], sys.argv[2].split(), sys.argv[3]

def best(pattern):
    return min(int(open(p).read()) for p in glob.glob(os.path.join(out, pattern))) / 1e9

def target_samples(lsp):
    report = subprocess.run([lockscope, "report", "--json", lsp],
                            capture_output=True, check=True, text=True).stdout
    return json.loads(report)["header"]["events"]

untraced = best("untraced-r*.ns")
print("| frequency | program runs | target samples | µs per run | µs per target sample | "
      "untraced (s) | traced (s) | cost per sample as felt (µs) |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for hz in frequencies:
    run_ns = run_cnt = targets = 0
    for path in sorted(glob.glob(os.path.join(out, f"stats-{hz}-r*.json"))):
        progs = json.load(open(path))
        for prog in progs if isinstance(progs, list) else [progs]:
            run_ns += prog.get("run_time_ns", 0)
            run_cnt += prog.get("run_cnt", 0)
        targets += target_samples(path.replace("stats-", "cpu-").replace(".json", ".lsp"))
    traced = best(f"cpu-{hz}-r*.ns")
    felt = (traced / untraced - 1) / int(hz) * 1e6
    per_run = f"{run_ns / run_cnt / 1e3:.2f}" if run_cnt else "-"
    per_target = f"{run_ns / targets / 1e3:.2f}" if targets else "-"
    print(f"| {hz} Hz | {run_cnt} | {targets} | {per_run} | {per_target} | {untraced:.3f} | "
          f"{traced:.3f} | {felt:.2f} |")
PY
cat "$out/table.md"
log "results in $out"
