#!/usr/bin/env bash
# Of each on-CPU profiler's samples in an overhead-bench.sh run directory, the share on stacks
# that reach the thread entry: lockscope-cpu (profiles: stacks the unwinder did not cut short),
# perf-cpu (perf script: the outermost frame is a thread or process entry), bpftrace-cpu (its
# printed @[ustack] map: the same test on the outermost frame). Debian 12, as root.
#
#   cpu-stacks.sh DIR [--lockscope BIN]
#
# Prints a markdown table (one row per mode and thread count, the runs summed) and writes it to
# DIR/cpu-stacks.md. bpftrace prints its map when stopped and overhead-bench.sh kills it after
# 8 s of printing: its share is over the stacks it printed, and says how many samples those are.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

dir=${1:?usage: cpu-stacks.sh DIR [--lockscope BIN]}
shift
lockscope_bin="$dir/lockscope"
parse_options "lockscope=lockscope_bin" "$@"

# perf script's outermost frame of each sample (the last line of its block), with the sample's
# weight 1; one line per sample: "FRAME".
for data in "$dir"/perf-cpu-*.perf.data; do
    [ -e "$data" ] || continue
    perf script -i "$data" -F ip,sym 2>/dev/null |
        awk 'NF == 0 { if (last != "") print last; last = ""; next } { last = $2 } END { if (last != "") print last }' \
            >"${data%.perf.data}.outermost"
done
for lsp in "$dir"/lockscope-cpu-*.lsp; do
    [ -e "$lsp" ] || continue
    "$lockscope_bin" export "$lsp" --format json --probe cpu >"${lsp%.lsp}.json"
done

python3 - "$dir" <<'PY' | tee "$dir/cpu-stacks.md"
import glob, json, os, re, sys
from collections import defaultdict
d = sys.argv[1]
# Outermost frames of complete stacks: a thread's entry (glibc's start_thread, clone3/clone) or
# the process's (_start, __libc_start_main and its internal names).
ENTRY = re.compile(r"^(start_thread|clone3?|__clone3?|_start|__libc_start_main\w*|__libc_start_call_main)(\+|$)")
rows = defaultdict(lambda: [0, 0])  # (mode, threads) -> [complete samples, all samples]

def key(path, mode):
    # The measured runs (-tN-rR); overhead-bench.sh's extra BPF-statistics run counts apart.
    m = re.search(r"-t(\d+)-r\d+\.", os.path.basename(path))
    return (mode, int(m.group(1))) if m else (mode + " (BPF-statistics run)", 0)

for path in glob.glob(os.path.join(d, "lockscope-cpu-*.json")):
    p = json.load(open(path))
    for w in p["waits"]:
        stack = p["stacks"][w["user_stack"]] if w.get("user_stack") is not None else None
        row = rows[key(path, "lockscope-cpu")]
        row[1] += w["count"]
        if stack and not stack["truncated"]:
            row[0] += w["count"]
for path in glob.glob(os.path.join(d, "perf-cpu-*.outermost")):
    row = rows[key(path, "perf-cpu")]
    for line in open(path):
        row[1] += 1
        row[0] += bool(ENTRY.match(line.strip()))
for path in glob.glob(os.path.join(d, "bpftrace-cpu-*.out")):
    row = rows[key(path, "bpftrace-cpu")]
    frames = []
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("@["):
            frames = []
        elif line.startswith("]: "):
            n = int(line[3:])
            row[1] += n
            if frames and ENTRY.match(frames[-1]):
                row[0] += n
        elif line.strip():
            frames.append(line.strip())
print("| profiler | threads | samples | on stacks reaching the thread entry |")
print("|---|---:|---:|---:|")
for (mode, threads), (complete, total) in sorted(rows.items()):
    share = f"{100 * complete / total:.1f}%" if total else "-"
    print(f"| {mode} | {threads} | {total} | {share} |")
PY
