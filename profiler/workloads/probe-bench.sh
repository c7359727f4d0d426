#!/usr/bin/env bash
# What each probe adds to the operations it hooks: the lmbench-style rows of `lockscope bench`
# run untraced and as the target of `lockscope record --probes P`, interleaved (untraced, then
# each probe set) --reps times; the table gives, per row and probe set, the minimum over all
# repetitions' samples in µs per operation (the minimum: the least disturbed by the machine).
# Debian 12, as root. Documented in docs/BENCHMARKS.md ("Per-probe overhead").
#
#   probe-bench.sh [--reps 3] [--sets "futex offcpu wakeup syscall lifecycle klock"]
#                  [--only ROWS] [--lockscope BIN] [--out DIR]
#
# DIR (default /tmp/lockscope-probe-bench-<time>) gets one bench JSON per run and table.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

reps=3
sets="futex offcpu wakeup syscall lifecycle klock"
only="null-call,stat,ctx-2thread,mutex-handoff,mmap-1mib,fork+exit,fork+exec"
lockscope_bin=$LOCKSCOPE_RELEASE
out="/tmp/lockscope-probe-bench-$(date +%Y%m%d-%H%M%S)"
parse_options "reps sets only lockscope=lockscope_bin out" "$@"
need_root
copy_lockscope "$lockscope_bin" "$out"
environment_start "$out/environment.txt" \
    "tracefs mounted: $(mountpoint -q /sys/kernel/tracing && echo yes || echo no)"

for rep in $(seq 1 "$reps"); do
    "$LOCKSCOPE" bench --quick --json --only "$only" >"$out/untraced-r$rep.json"
    for set in $sets; do
        "$LOCKSCOPE" record --probes "$set" -o "$out/$set-r$rep.lsp" -- \
            "$LOCKSCOPE" bench --quick --json --only "$only" >"$out/$set-r$rep.json" \
            2>"$out/$set-r$rep.err"
    done
    log "repetition $rep done"
done
environment_end "$out/environment.txt"

python3 - "$out" untraced $sets >"$out/table.md" <<'PY'
import json, sys, glob, os
out, modes = sys.argv[1], sys.argv[2:]
best = {}
rows = []
for mode in modes:
    for path in sorted(glob.glob(os.path.join(out, f"{mode}-r*.json"))):
        for row in json.load(open(path))["latency"]:
            if row["name"] not in rows:
                rows.append(row["name"])
            key = (row["name"], mode)
            best[key] = min([best.get(key, float("inf"))] + row["samples_us"])
print("| benchmark | " + " | ".join(modes) + " |")
print("|---|" + "---:|" * len(modes))
for name in rows:
    cells = []
    for mode in modes:
        v = best.get((name, mode))
        cells.append("-" if v is None else (f"{v:.2f}" if v < 100 else f"{v:.0f}"))
    print(f"| {name} | " + " | ".join(cells) + " |")
PY
cat "$out/table.md"
log "results in $out"
