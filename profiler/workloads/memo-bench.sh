#!/usr/bin/env bash
# What a recorded wait and a blocking hop cost with the unwinder's stack memo on and off
# (LOCKSCOPE_STACK_MEMO): `lockscope bench --only ctx-2thread,mutex-handoff` untraced and
# recorded with each probe set and memo mode, interleaved (untraced, then every set x mode) --reps
# times. Two measures per run:
#   - wall time: the minimum over all repetitions' samples, µs per operation (the least disturbed);
#   - BPF time: the kernel's own accounting (kernel.bpf_stats_enabled=1, run_time_ns of the
#     recorder's programs read by bpftool while it runs) per recorded wait and per stack taken,
#     which other sessions on the CPUs do not inflate the way they do the wall time;
# and, per run, the share of recorded wait time (and waker stacks) on user stacks complete to the
# thread entry (not cut short, outermost frame clone3, start_thread, _start or __libc_start_main).
# A set named SET@generic (say futex@generic) records in a private mount namespace without
# tracefs or debugfs (which mounts tracefs when its tracing directory is looked at), so that the futex probe uses the generic sys_enter/sys_exit hooks whatever the machine
# has mounted (the machine's own mounts are not touched).
# Debian 12, as root. Documented in docs/BENCHMARKS.md ("The stack memo").
#
#   memo-bench.sh [--reps 5] [--sets "futex offcpu,wakeup"] [--modes "on off"]
#                 [--only ROWS] [--bench-flags "--quick"] [--lockscope BIN] [--out DIR]
#
# DIR (default /tmp/lockscope-memo-bench-<time>) gets each run's bench JSON, recorder stderr,
# profile export and BPF statistics, runs.tsv and table.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

reps=5
sets="futex futex@generic offcpu,wakeup"
modes="on off"
only="ctx-2thread,mutex-handoff"
bench_flags=""
lockscope_bin=$LOCKSCOPE_RELEASE
out="/tmp/lockscope-memo-bench-$(date +%Y%m%d-%H%M%S)"
parse_options "reps sets modes only bench-flags lockscope=lockscope_bin out" "$@"
need_root
copy_lockscope "$lockscope_bin" "$out"
environment_start "$out/environment.txt" \
    "tracefs: $(tracefs_state)" \
    "lockscope: $("$LOCKSCOPE" --version 2>&1)"

bpf_stats_on

for rep in $(seq 1 "$reps"); do
    "$LOCKSCOPE" bench $bench_flags --json --only "$only" >"$out/untraced-r$rep.json" 2>/dev/null
    for set in $sets; do
        for mode in $modes; do
            base="$out/${set//,/+}-$mode-r$rep"
            wrap=()
            [ "${set%@generic}" != "$set" ] && wrap=(unshare -m --propagation private sh -c \
                'umount -l /sys/kernel/tracing 2>/dev/null; umount -l /sys/kernel/debug 2>/dev/null; exec "$@"' sh)
            bpf_programs "$base.before"
            LOCKSCOPE_STACK_MEMO=$mode run_with_bpf_stats "$base.before" "$base.progs" "${wrap[@]}" \
                "$LOCKSCOPE" record --probes "${set%@generic}" -o "$base.lsp" -- \
                "$LOCKSCOPE" bench $bench_flags --json --only "$only" >"$base.json" 2>"$base.err"
            "$LOCKSCOPE" export --format json "$base.lsp" >"$base.export.json"
        done
    done
    log "repetition $rep done"
done
environment_end "$out/environment.txt"

python3 - "$out" "$sets" "$modes" >"$out/table.md" <<'PY'
import glob, json, os, re, sys

out, sets, modes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
ENTRIES = ("clone3", "clone", "start_thread", "_start", "__libc_start_main", "__libc_start_call_main")


def best(paths):
    rows = {}
    for path in paths:
        for row in json.load(open(path))["latency"]:
            rows[row["name"]] = min([rows.get(row["name"], float("inf"))] + row["samples_us"])
    return rows


def bpf_time(base):
    """ns of the recorder's programs: {name: (runs, ns)}, from the last bpftool listing."""
    progs = {}
    for p in json.load(open(base + ".progs")):
        if not p.get("name", "").startswith("lks_"):
            continue
        runs, ns = progs.get(p["name"], (0, 0))
        progs[p["name"]] = (runs + p.get("run_cnt", 0), ns + p.get("run_time_ns", 0))
    return progs


def complete(stack):
    if stack is None or stack["truncated"] or not stack["frames"]:
        return False
    outer = stack["frames"][-1].get("function") or ""
    return outer in ENTRIES


def shares(export):
    """(waits, share of wait time on complete user stacks, waker stacks, share complete)."""
    stacks = export["stacks"]
    lookup = lambda i: stacks[i] if i is not None and i < len(stacks) else None
    waits = [w for w in export["waits"] if "run-queue" not in w["operation"] and "preempted" not in w["operation"]]
    total = sum(w["total_ns"] for w in waits) or 1
    good = sum(w["total_ns"] for w in waits if complete(lookup(w.get("user_stack"))))
    wakeups = export.get("wakeups", [])
    wtotal = sum(w["total_ns"] for w in wakeups)
    wgood = sum(w["total_ns"] for w in wakeups if complete(lookup(w.get("waker_user_stack"))))
    return (sum(w["count"] for w in waits), good / total,
            sum(w["count"] for w in wakeups), (wgood / wtotal) if wtotal else None)


def unwinding(err):
    line = next((l for l in open(err) if "unwinding: " in l), "")
    m = re.search(r"(\d+) user stacks \((\d+) from the stack memo\)", line)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


base_rows = best(glob.glob(os.path.join(out, "untraced-r*.json")))
names = list(base_rows)
tsv = open(os.path.join(out, "runs.tsv"), "w")
tsv.write("set\tmode\trep\twaits\tstacks\tmemo_hits\tbpf_ns\tbpf_ns_per_wait\tbpf_ns_per_stack\tcomplete_share\twaker_complete_share\n")
summary = []
for s in sets:
    for mode in modes:
        tag = f"{s.replace(',', '+')}-{mode}"
        paths = sorted(p for p in glob.glob(os.path.join(out, f"{tag}-r*.json"))
                       if not p.endswith(".export.json"))
        rows = best(paths)
        per_wait, per_stack, share, wshare, hits, per_run = [], [], [], [], [], {}
        for path in paths:
            base = path[: -len(".json")]
            waits, sh, wakes, wsh = shares(json.load(open(base + ".export.json")))
            stacks, memo_hits = unwinding(base + ".err")
            progs = bpf_time(base)
            for name, (runs, pns) in progs.items():
                if runs:
                    per_run[name] = min(per_run.get(name, float("inf")), pns / runs)
            ns = sum(v[1] for v in progs.values())
            per_wait.append(ns / waits if waits else float("nan"))
            per_stack.append(ns / stacks if stacks else float("nan"))
            share.append(sh)
            if wsh is not None:
                wshare.append(wsh)
            hits.append(memo_hits / stacks if stacks else 0)
            tsv.write(f"{s}\t{mode}\t{base[-1]}\t{waits}\t{stacks}\t{memo_hits}\t{ns}\t{per_wait[-1]:.0f}\t{per_stack[-1]:.0f}\t{sh:.4f}\t{'' if wsh is None else f'{wsh:.4f}'}\n")
        summary.append((s, mode, rows, min(per_wait), min(per_stack), min(share),
                        min(wshare) if wshare else None, sum(hits) / len(hits), per_run))

print("Wall time, µs per operation (minimum over the repetitions; in parentheses: minus untraced):\n")
print("| benchmark | untraced | " + " | ".join(f"`{s}` memo {m}" for s, m, *_ in summary) + " |")
print("|---|---:|" + "---:|" * len(summary))
for n in names:
    cells = [f"{base_rows[n]:.2f}"]
    for _, _, rows, *_ in summary:
        v = rows.get(n)
        cells.append("-" if v is None else f"{v:.2f} (+{v - base_rows[n]:.2f})")
    print(f"| {n} | " + " | ".join(cells) + " |")
print("\nBPF time (kernel accounting of the recorder's programs, best run; a recorded wait is a")
print("futex wait or an off-CPU sleep of 10 µs or more) and stacks:\n")
print("| probes | memo | ns per recorded wait (all programs) | ns per user stack (all programs) | ns per program run | stacks from the memo (mean) | wait time on complete stacks (worst run) | waker stacks complete (worst run) |")
print("|---|---|---:|---:|---|---:|---:|---:|")
MAIN = ("lks_exit", "lks_enter", "lks_offcpu_switch", "lks_offcpu_waking")
for s, mode, _, pw, ps, sh, wsh, hit, per_run in summary:
    runs = ", ".join(f"{n} {v:.0f}" for n, v in sorted(per_run.items()) if n.startswith(MAIN))
    pw = f"{pw:.0f}" if s.startswith("futex") else "-"
    print(f"| `{s}` | {mode} | {pw} | {ps:.0f} | {runs} | {hit:.1%} | {sh:.2%} | {'-' if wsh is None else f'{wsh:.2%}'} |")
PY
cat "$out/table.md"
log "results in $out"
