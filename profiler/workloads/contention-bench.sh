#!/usr/bin/env bash
# A lock handed over several hundred thousand times a second, and what recording it costs:
# stress-ng's mutex stressor (a pthread mutex contended by the threads of each instance, with
# their priorities changing; stress-ng reports bogo operations per second) untraced, under
# lockscope (the default probe, and offcpu with waker stacks) and under the bpftrace scripts that
# take the same events with the kernel's frame-pointer `ustack` (contention-futex.bt,
# contention-offwake.bt), interleaved: each repetition runs untraced, mode 1, untraced, mode 2,
# ..., untraced, so a traced run is paired with the untraced runs just before and after it.
# The kernel's accounting of each tracer's BPF programs (kernel.bpf_stats_enabled) gives their
# CPU time per event, which the machine's other work disturbs far less than the throughput.
# Then one more run per tracer to see its stacks while the workload still runs (symbolized):
# frames per stack and the share of waits on stacks that reach the thread entry.
# Debian 12, as root. Documented in docs/BENCHMARKS.md ("A lock handed over 400 000 times a second").
#
#   contention-bench.sh [--reps 5] [--seconds 5] [--instances 2]
#                       [--modes "lockscope-futex lockscope-offwake bpftrace-futex bpftrace-offwake"]
#                       [--lockscope BIN] [--out DIR]
#
# DIR (default /tmp/lockscope-contention-<time>) gets runs.tsv, summary.md, each run's BPF
# programs (MODE-rN.progs) and each tracer's output.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

reps=5
seconds=5
instances=2
modes="lockscope-futex lockscope-offwake bpftrace-futex bpftrace-offwake"
lockscope_bin=$LOCKSCOPE_RELEASE
out="/tmp/lockscope-contention-$(date +%Y%m%d-%H%M%S)"
parse_options "reps seconds instances modes lockscope=lockscope_bin out" "$@"
need_root
install_missing stress-ng bpftrace
bpf_stats_on
copy_lockscope "$lockscope_bin" "$out"
COMM=stress-ng-mutex
environment_start "$out/environment.txt" \
    "$(stress-ng --version 2>&1 | head -1); $(bpftrace --version 2>&1)" \
    "tracefs: $(tracefs_state)"

workload() {
    stress-ng --mutex "$instances" --timeout "$seconds" --metrics-brief
}

# bogo ops/s (real time) from stress-ng's metrics on stdin/stderr file "$1".
bogo_ops() {
    awk '/metrc:/ && $4 == "mutex" && $5 ~ /^[0-9]+$/ { print $9; exit }' "$1"
}

# Starts bpftrace script "$1" (for $COMM) with output to "$2"; sets $tracer_pid once attached.
start_bpftrace() {
    bpftrace "$WORKLOADS_DIR/$1" "$COMM" >"$2" 2>&1 &
    tracer_pid=$!
    local i
    for i in $(seq 1 150); do
        grep -qs "^Attaching" "$2" && break
        kill -0 "$tracer_pid" 2>/dev/null || die "bpftrace $1 exited: $(cat "$2")"
        sleep 0.2
    done
    sleep 1
}

# Stops the bpftrace started last (SIGINT, then KILL after "$1" seconds, default 60: it prints
# its maps first, symbolizing every stack of a process still running).
stop_bpftrace() {
    kill -INT "$tracer_pid" 2>/dev/null || true
    local i
    for i in $(seq 1 $((${1:-60} * 5))); do
        kill -0 "$tracer_pid" 2>/dev/null || break
        sleep 0.2
    done
    kill -KILL "$tracer_pid" 2>/dev/null || true
    wait "$tracer_pid" 2>/dev/null || true
}

# One run of mode "$1", repetition "$2": its bogo ops/s on stdout; the tracer's BPF programs
# in $out/MODE-rN.progs.
run_mode() {
    local mode=$1 rep=$2 base="$out/$1-r$2"
    bpf_programs "$base.before"
    case "$mode" in
    untraced) workload >"$base.out" 2>&1 ;;
    lockscope-futex)
        run_with_bpf_stats "$base.before" "$base.progs" "$LOCKSCOPE" record --probes futex \
            -o "$base.lsp" -- stress-ng --mutex "$instances" --timeout "$seconds" --metrics-brief \
            >"$base.out" 2>&1
        "$LOCKSCOPE" export --format json "$base.lsp" >"$base.json" ;;
    lockscope-offwake)
        run_with_bpf_stats "$base.before" "$base.progs" "$LOCKSCOPE" record \
            --probes offcpu,wakeup -o "$base.lsp" -- \
            stress-ng --mutex "$instances" --timeout "$seconds" --metrics-brief >"$base.out" 2>&1 ;;
    bpftrace-futex | bpftrace-offwake)
        start_bpftrace "contention-${mode#bpftrace-}.bt" "$base.bt"
        run_with_bpf_stats "$base.before" "$base.progs" \
            stress-ng --mutex "$instances" --timeout "$seconds" --metrics-brief >"$base.out" 2>&1
        stop_bpftrace ;;
    *) die "unknown mode $mode" ;;
    esac
    bogo_ops "$base.out"
}

printf 'mode\trep\tbogo_ops_per_s\tload\n' >"$out/runs.tsv"
record_run() {
    local ops
    ops=$(run_mode "$1" "$2")
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "${ops:-nan}" "$(cut -d' ' -f1 /proc/loadavg)" >>"$out/runs.tsv"
}

workload >/dev/null 2>&1 # warm-up
for rep in $(seq 1 "$reps"); do
    record_run untraced "$rep"
    for mode in $modes; do
        record_run "$mode" "$rep"
        record_run untraced "$rep"
    done
    log "repetition $rep done"
done

# Stacks, symbolized while the workload runs: each tracer stops half-way through a run.
stack_seconds=$((seconds > 4 ? seconds : 4))
for mode in $modes; do
    base="$out/stacks-$mode"
    case "$mode" in
    lockscope-futex | lockscope-offwake)
        probes=futex
        [ "$mode" = lockscope-offwake ] && probes=offcpu,wakeup
        "$LOCKSCOPE" record --probes "$probes" -o "$base.lsp" -- \
            stress-ng --mutex "$instances" --timeout "$stack_seconds" >/dev/null 2>&1
        "$LOCKSCOPE" export --format json "$base.lsp" >"$base.json" ;;
    bpftrace-*)
        stress-ng --mutex "$instances" --timeout "$((stack_seconds + 60))" >/dev/null 2>&1 &
        sn_pid=$!
        sleep 1
        start_bpftrace "contention-${mode#bpftrace-}.bt" "$base.bt"
        sleep $((stack_seconds / 2))
        stop_bpftrace 600
        kill -INT "$sn_pid" 2>/dev/null || true
        wait "$sn_pid" 2>/dev/null || true ;;
    esac
done
environment_end "$out/environment.txt"

python3 - "$out" $modes >"$out/summary.md" <<'PY'
import csv, glob, json, os, re, statistics, sys

out, modes = sys.argv[1], sys.argv[2:]
runs = list(csv.DictReader(open(os.path.join(out, "runs.tsv")), delimiter="\t"))
for r in runs:
    r["ops"] = float(r["bogo_ops_per_s"])
untraced = [r["ops"] for r in runs if r["mode"] == "untraced"]
base = statistics.mean(untraced)
print(f"stress-ng --mutex: bogo ops/s, {len(untraced)} untraced runs, mean {base:,.0f} "
      f"(spread {min(untraced) / base:.3f}-{max(untraced) / base:.3f})\n")
print("| mode | runs | mean bogo ops/s | ratio to untraced | paired ratio: median (min-max) |")
print("|---|---:|---:|---:|---|")
for mode in modes:
    paired, values = [], []
    for i, r in enumerate(runs):
        if r["mode"] != mode:
            continue
        values.append(r["ops"])
        around = [runs[j]["ops"] for j in (i - 1, i + 1)
                  if 0 <= j < len(runs) and runs[j]["mode"] == "untraced"]
        if around:
            paired.append(r["ops"] / statistics.mean(around))
    if not values:
        continue
    m = statistics.mean(values)
    print(f"| {mode} | {len(values)} | {m:,.0f} | {m / base:.3f} | "
          f"{statistics.median(paired):.3f} ({min(paired):.3f}-{max(paired):.3f}) |")

ENTRIES = ("clone3", "clone", "start_thread", "_start", "__libc_start_main")


def tracer_programs(path, mode):
    """The tracer's programs in a .progs file (loaded during the run): lockscope's are named
    lks_*, bpftrace's after their probes. A tracer's programs share maps; when the run's
    programs of that kind form more than one group (another session's recorder loaded during
    the run), which is the tracer's is not known: None, and the run is left out."""
    try:
        progs = json.load(open(path))
    except (OSError, ValueError):
        return None
    lks = mode.startswith("lockscope")
    progs = [p for p in progs if p.get("name", "").startswith("lks_") == lks]
    groups = []
    for p in progs:
        maps = set(p.get("map_ids", []))
        joined = [g for g in groups if g[0] & maps]
        merged = (maps, [p])
        for g in joined:
            groups.remove(g)
            merged = (merged[0] | g[0], merged[1] + g[1])
        groups.append(merged)
    if len(groups) != 1:
        return None
    return [p for p in groups[0][1] if p.get("run_cnt")]


def futex_waits(mode, base):
    if mode == "lockscope-futex":
        d = json.load(open(base + ".json"))
        return sum(w["count"] for w in d["waits"] if w["probe"] == "futex")
    text = open(base + ".bt").read()
    return sum(int(x) for x in re.findall(r"^\[[^)]*\)\s+(\d+)", text, re.M))


print("\nBPF time of each tracer's programs (kernel accounting; median over the runs):\n")
print("| mode | program: ns per run (runs in a run of the workload) | ns of BPF per futex wait |")
print("|---|---|---:|")
for mode in modes:
    if mode == "untraced":
        continue
    per_prog, per_wait, left_out = {}, [], 0
    for r in (r for r in runs if r["mode"] == mode):
        base = os.path.join(out, f"{mode}-r{r['rep']}")
        progs = tracer_programs(base + ".progs", mode)
        if progs is None:
            left_out += 1
            continue
        for p in progs:
            per_prog.setdefault(p["name"], []).append((p["run_time_ns"] / p["run_cnt"], p["run_cnt"]))
        if mode.endswith("futex") and progs:
            waits = futex_waits(mode, base)
            if waits:
                per_wait.append(sum(p["run_time_ns"] for p in progs) / waits)
    cells = ", ".join(
        f"{n} {statistics.median([v for v, _ in xs]):.0f} ({statistics.median([c for _, c in xs]):,.0f} runs)"
        for n, xs in sorted(per_prog.items()))
    if left_out:
        cells += f" ({left_out} run(s) left out: another recorder's programs loaded meanwhile)"
    print(f"| {mode} | {cells} | {statistics.median(per_wait):.0f} |" if per_wait else f"| {mode} | {cells} | - |")


def lockscope_stacks(path, key):
    d = json.load(open(path))
    stacks, rows = d["stacks"], d[key]
    field = "user_stack" if key == "waits" else "waker_user_stack"
    total = depth = complete = 0
    for w in rows:
        if key == "waits" and ("run-queue" in w["operation"] or "preempted" in w["operation"]):
            continue
        i = w.get(field)
        s = stacks[i] if i is not None and i < len(stacks) else None
        n = w["count"]
        total += n
        if s:
            depth += n * len(s["frames"])
            outer = s["frames"][-1].get("function") if s["frames"] else None
            complete += n if (not s["truncated"] and outer in ENTRIES) else 0
    return total, depth / total if total else 0, complete / total if total else 0


def bpftrace_stacks(path):
    """Per map entry: its first stack's frames and its histogram count."""
    text = open(path).read()
    total = depth = complete = 0
    for m in re.finditer(r"^@\w+\[\n(.*?)\]: \n(.*?)(?=^@|\Z)", text, re.S | re.M):
        frames = [l.strip() for l in m.group(1).split("\n") if l.strip() and l.strip() != ","]
        first = []
        for f in frames:  # the sleeper's stack ends at the first ", " separator
            if f.startswith(","):
                break
            first.append(f.rstrip(","))
            if f.endswith(","):
                break
        n = sum(int(x) for x in re.findall(r"^\[[^)]*\)\s+(\d+)", m.group(2), re.M))
        total += n
        depth += n * len(first)
        outer = re.sub(r"\+\d+$", "", first[-1]) if first else ""
        complete += n if outer in ENTRIES else 0
    return total, depth / total if total else 0, complete / total if total else 0


print("\nStacks (a run stopped while the workload runs, so that bpftrace can symbolize):\n")
print("| tracer | stacks of | waits | frames per stack (mean) | waits on stacks reaching the thread entry |")
print("|---|---|---:|---:|---:|")
for mode in modes:
    b = os.path.join(out, f"stacks-{mode}")
    if mode.startswith("lockscope"):
        rows = [("futex waits" if mode.endswith("futex") else "sleeps", lockscope_stacks(b + ".json", "waits"))]
        if mode.endswith("offwake"):
            rows.append(("wakers", lockscope_stacks(b + ".json", "wakeups")))
    else:
        rows = [("futex waits" if mode.endswith("futex") else "sleeps", bpftrace_stacks(b + ".bt"))]
    for what, (n, d, c) in rows:
        print(f"| {mode} | {what} | {n:,} | {d:.1f} | {c:.1%} |")
PY
cat "$out/summary.md"
log "results in $out"
