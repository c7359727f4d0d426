#!/usr/bin/env bash
# `lockscope bench` on the kernels of the matrix (the Debian series of .ci/kernels under QEMU,
# through .ci/kernel-vm): in each guest the whole suite untraced (`bench --quick --json`, for
# `lockscope bench diff` across kernels), then a few rows recorded with each probe alone, the
# probes that take user stacks also with the stack memo off (LOCKSCOPE_STACK_MEMO=off). 5.10 runs
# the compat programs (no bpf_loop), the others the default ones. QEMU emulates the CPU (TCG):
# the times are not a real machine's; compare shapes (which probe costs more, what the memo
# changes), not values. Root (QEMU, apt-get for its packages).
#
#   kernel-bench.sh [--kernels "SERIES..."] [--lockscope BIN] [--out DIR]
#
# --kernels: the series to run, space-separated (default: every series of .ci/kernels).
#
# DIR (default /tmp/lockscope-kernel-bench-<time>) gets one directory per kernel with the guest's
# bench JSON files, and table.md: per kernel, probe and row, the minimum µs per operation.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

kernels=$(awk '!/^#/ && NF { print $1 }' "$REPO_DIR/.ci/kernels" | paste -sd' ' -)
lockscope_bin=$LOCKSCOPE_RELEASE
out="/tmp/lockscope-kernel-bench-$(date +%Y%m%d-%H%M%S)"
parse_options "kernels lockscope=lockscope_bin out" "$@"
need_root
need_lockscope "$lockscope_bin"
mkdir -p "$out"
# The guest gets lockscope without its debug information: a far smaller initramfs.
strip --strip-debug -o "$out/lockscope" "$lockscope_bin"
environment_start "$out/environment.txt" "lockscope: $("$out/lockscope" --version 2>&1)"

rows="null-call,stat,ctx-2thread,mutex-handoff,fork+exit"
cat >"$out/guest.sh" <<EOF
L=$out/lockscope
ROWS=$rows
EOF
cat >>"$out/guest.sh" <<'EOF'
export XDG_CACHE_HOME=/tmp/cache
uname -r >/out/kernel
"$L" bench --quick --json >/out/bench.json 2>/out/bench.err
"$L" bench --quick --json --only "$ROWS" >/out/untraced.json 2>/dev/null
for probe in futex offcpu wakeup preempt syscall lifecycle klock cpu; do
    "$L" record --probes "$probe" -o "/out/$probe.lsp" -- \
        "$L" bench --quick --json --only "$ROWS" >"/out/$probe.json" 2>"/out/$probe.err"
done
for probe in futex offcpu wakeup; do
    LOCKSCOPE_STACK_MEMO=off "$L" record --probes "$probe" -o "/out/$probe-nomemo.lsp" -- \
        "$L" bench --quick --json --only "$ROWS" >"/out/$probe-nomemo.json" 2>"/out/$probe-nomemo.err"
done
"$L" bench --quick --json --only "$ROWS" >/out/untraced-2.json 2>/dev/null
rm -f /out/*.lsp
exit 0
EOF

for kernel in $kernels; do
    log "kernel $kernel"
    bash "$REPO_DIR/.ci/kernel-vm" run --kernel "$kernel" --timeout 3600 --script "$out/guest.sh" \
        --out "$out/$kernel" --file "$out/lockscope" || log "the $kernel guest failed: see $out/$kernel/console.log"
done
environment_end "$out/environment.txt"

python3 - "$out" $kernels >"$out/table.md" <<'PY'
import json, os, sys

out, kernels = sys.argv[1], sys.argv[2:]
modes = ["untraced", "futex", "futex-nomemo", "offcpu", "offcpu-nomemo", "wakeup", "wakeup-nomemo",
         "preempt", "syscall", "lifecycle", "klock", "cpu"]


def best(path):
    try:
        rows = json.load(open(path))["latency"]
    except (OSError, ValueError, KeyError):
        return {}
    return {r["name"]: min(r["samples_us"]) for r in rows}


for kernel in kernels:
    d = os.path.join(out, kernel)
    if not os.path.isdir(d):
        continue
    release = open(os.path.join(d, "kernel")).read().strip() if os.path.exists(os.path.join(d, "kernel")) else kernel
    results = {m: best(os.path.join(d, f"{m}.json")) for m in modes}
    second = best(os.path.join(d, "untraced-2.json"))
    for name, v in second.items():
        results["untraced"][name] = min(v, results["untraced"].get(name, v))
    names = list(results["untraced"]) or sorted({n for r in results.values() for n in r})
    print(f"\n{kernel} ({release}, emulated), µs per operation, minimum of the run's samples:\n")
    print("| benchmark | " + " | ".join(m.replace("-nomemo", " (memo off)") for m in modes) + " |")
    print("|---|" + "---:|" * len(modes))
    for n in names:
        cells = []
        for m in modes:
            v = results[m].get(n)
            cells.append("-" if v is None else (f"{v:.2f}" if v < 100 else f"{v:.0f}"))
        print(f"| {n} | " + " | ".join(cells) + " |")
PY
cat "$out/table.md"
log "results in $out"
