#!/usr/bin/env bash
# Apache httpd 2.4 under ab, as the seed's second benchmark, recorded by lockscope: its sweep and
# knee, the paired overhead of recording its whole process tree, the wait time on stacks cut short
# when it is launched under lockscope, the writeback case (`record -a` while a sequential writer
# keeps the kernel's flush threads busy), what every process recorded with `-a` costs the machine
# idle and loaded, and a soak. Debian 12, as root; installs apache2, apache2-utils and time.
# Documented in docs/BENCHMARKS.md.
#
#   apache-bench.sh sweep [--mpm event|prefork] [--levels 5,10,20,50,100,150] [--seconds 10]
#   apache-bench.sh overhead [--mpm event|prefork] [--concurrency 50] [--reps 5] [--seconds 10]
#   apache-bench.sh launched [--mpm event] [--concurrency 50] [--seconds 10]
#   apache-bench.sh writeback [--seconds 20] [--mebibytes 4096]
#   apache-bench.sh system [--probes "futex offcpu cpu"] [--concurrency 50] [--reps 3] [--seconds 10]
#   apache-bench.sh soak [--mpm event] [--concurrency 50] [--seconds 600] [--interval 10]
#   (every mode also takes --lockscope BIN and --out DIR)
#
# - sweep: `lockscope sweep --server` of httpd (its whole process tree at every level) with the
#   futex and offcpu probes, ab at each level; the sweep table, its knee and finding.
# - overhead: ab requests/s untraced and with `lockscope record -p PARENT --tree` (default probes),
#   repetitions interleaved (untraced, traced, untraced, ...); each traced run against the mean of
#   the untraced runs just before and after it (the paired ratio, which cancels the machine's
#   drift), and the recorder's CPU time and peak RSS (/usr/bin/time -v).
# - launched: `lockscope record -- httpd` under ab from the start: the share of the wait time on
#   user stacks cut short (the report header's "stacks" line).
# - writeback: `lockscope record -a --probes cpu,offcpu` while dd writes MEBIBYTES sequentially
#   through the page cache; the CPU time of the kernel's threads (flush workers) and their kernel
#   stacks (report --by process --probe cpu --kernel-stacks).
# - system: for each probe, `record -a --probes P`: the BPF programs' run time per second
#   (kernel.bpf_stats_enabled) and lockscope's own CPU time, on the idle machine and under ab
#   against httpd (whose requests/s, untraced and traced, interleaved, give the cost).
# - soak: `record -p PARENT --tree` for SECONDS under ab, sampling the recorder's RSS and CPU time
#   every INTERVAL; then the profile's losses.
#
# Output: DIR (default /tmp/lockscope-apache-<mode>-<time>) holds environment.txt (machine,
# load average before and after), the mode's results (summary.md) and every file they come from.
# httpd runs with its own configuration on 127.0.0.1:$APACHE_PORT (default 8082, apache.sh) and
# is stopped on exit; the lockscope binary is copied first.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mode=${1:-}
[ -n "$mode" ] || usage
shift
mpm=event
levels=5,10,20,50,100,150
concurrency=50
reps=5
seconds=10
mebibytes=4096
interval=10
probes="futex offcpu cpu"
lockscope_bin=$LOCKSCOPE_RELEASE
out="/tmp/lockscope-apache-$mode-$(date +%Y%m%d-%H%M%S)"
parse_options "mpm levels concurrency reps seconds mebibytes interval probes lockscope=lockscope_bin out" "$@"

need_root
install_missing apache2 apache2-utils time bpftool
copy_lockscope "$lockscope_bin" "$out"
APACHE="$WORKLOADS_DIR/apache.sh"
export APACHE_CGROUP=
recorder=
cleanup() {
    [ -n "$recorder" ] && kill -INT "$recorder" 2>/dev/null
    "$APACHE" stop
    sysctl -qw kernel.bpf_stats_enabled=0 2>/dev/null || true
    rm -f "$out/writeback.data"
    return 0
}
trap cleanup EXIT
environment_start "$out/environment.txt" "mode: $mode, mpm_$mpm, $(apache2 -v | head -1)" \
    "lockscope: $("$LOCKSCOPE" --version)"

# ab's requests per second at concurrency "$1" for "$2" seconds.
rps() {
    "$APACHE" rps "$1" "$2"
}

# Starts `lockscope record -o "$1" ARGS...` under /usr/bin/time -v (into "$1.time"), waits for
# its recording line; sets `recorder` to lockscope's pid.
start_recording() {
    local lsp=$1
    shift
    : >"$lsp.err"
    /usr/bin/time -v -o "$lsp.time" "$LOCKSCOPE" record -o "$lsp" "$@" 2>"$lsp.err" &
    local timer=$!
    wait_for 60 grep -q "^lockscope: recording " "$lsp.err" || die "lockscope did not start: $(cat "$lsp.err")"
    recorder=$(pgrep -P "$timer" -x lockscope) || die "no lockscope under /usr/bin/time"
    RECORDER_TIMER=$timer
}

# Stops the recording started last (SIGINT) and waits for its profile.
stop_recording() {
    kill -INT "$recorder"
    wait "$RECORDER_TIMER" || true
    recorder=
}

# CPU seconds (user + system) and peak RSS (kB) of a run under /usr/bin/time -v.
time_summary() {
    local user sys rss
    user=$(time_field "$1" "User time (seconds)")
    sys=$(time_field "$1" "System time (seconds)")
    rss=$(time_field "$1" "Maximum resident set size (kbytes)")
    echo "$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }') s CPU, ${rss} kB peak RSS"
}

case "$mode" in
sweep)
    command=$("$APACHE" command "$mpm")
    "$LOCKSCOPE" sweep --server "$command" --levels "$levels" -d "${seconds}s" \
        --settle 2s --server-startup 3s --probes futex,offcpu --throughput ab \
        --load "ab -q -c {c} -t $((seconds + 1)) -n 100000000 http://127.0.0.1:${APACHE_PORT:-8082}/index.html" \
        -o "$out/sweep" >"$out/summary.md" 2>"$out/sweep.err"
    "$LOCKSCOPE" chart "$out/sweep" -o "$out/scaling.svg"
    cat "$out/summary.md"
    ;;
overhead)
    "$APACHE" start "$mpm"
    parent=$("$APACHE" pid)
    rps "$concurrency" 3 >/dev/null # warm-up
    echo "run	mode	rps" >"$out/runs.tsv"
    for ((i = 1; i <= reps; i++)); do
        echo "$i	untraced	$(rps "$concurrency" "$seconds")" >>"$out/runs.tsv"
        start_recording "$out/traced-$i.lsp" -p "$parent" --tree
        echo "$i	traced	$(rps "$concurrency" "$seconds")" >>"$out/runs.tsv"
        stop_recording
        echo "$i: $(time_summary "$out/traced-$i.lsp.time"); $(tail -1 "$out/traced-$i.lsp.err")" >>"$out/recorder.txt"
    done
    echo "$((reps + 1))	untraced	$(rps "$concurrency" "$seconds")" >>"$out/runs.tsv"
    awk -F'\t' -v c="$concurrency" -v mpm="$mpm" '
        NR > 1 && $2 == "untraced" { u[$1] = $3; nu++; su += $3 }
        NR > 1 && $2 == "traced" { t[$1] = $3; nt++; st += $3 }
        END {
            printf "Apache httpd mpm_%s, ab -c %d: untraced %.0f req/s (mean of %d), traced %.0f req/s (mean of %d): %.3f\n", mpm, c, su / nu, nu, st / nt, nt, (st / nt) / (su / nu)
            printf "paired ratios (each traced run over the mean of the untraced runs around it):"
            for (i = 1; i <= nt; i++) {
                r = t[i] / ((u[i] + u[i + 1]) / 2); printf " %.3f", r; sp += r
            }
            printf "; mean %.3f\n", sp / nt
        }' "$out/runs.tsv" >"$out/summary.md"
    cat "$out/recorder.txt" >>"$out/summary.md"
    cat "$out/summary.md"
    ;;
launched)
    command=$("$APACHE" command "$mpm")
    # shellcheck disable=SC2086 # the command's words
    start_recording "$out/launched.lsp" -- $command
    # ab from httpd's first moments: as soon as its pid file is there.
    wait_for 20 "$APACHE" pid || die "httpd did not start under lockscope: $(cat "$out/launched.lsp.err")"
    "$APACHE" run "$concurrency" "$seconds" >"$out/ab.txt"
    stop_recording
    {
        grep '^Requests per second' "$out/ab.txt"
        "$LOCKSCOPE" report "$out/launched.lsp" --top 3 | sed -n '1,12p'
    } >"$out/summary.md"
    cat "$out/summary.md"
    ;;
writeback)
    target_dir=$(dirname "$out/writeback.data")
    start_recording "$out/writeback.lsp" -a --probes cpu,offcpu -d "${seconds}s"
    # Through the page cache, no O_DIRECT or sync: the kernel's flush workers write it back.
    dd if=/dev/zero of="$out/writeback.data" bs=1M count="$mebibytes" status=none conv=notrunc &
    dd_pid=$!
    wait "$RECORDER_TIMER" || true
    recorder=
    kill "$dd_pid" 2>/dev/null || true
    wait "$dd_pid" 2>/dev/null || true
    {
        echo "dd wrote to $(df --output=source,fstype "$target_dir" | tail -1) for ${seconds} s"
        "$LOCKSCOPE" report "$out/writeback.lsp" --by process --probe cpu --kernel-stacks --top 8
    } >"$out/summary.md"
    sed -n '1,60p' "$out/summary.md"
    ;;
system)
    echo "probe	load	run	bpf_ns_per_s	lockscope_cpu_s	rps" >"$out/runs.tsv"
    # BPF programs' run time per second of the recording, from bpftool's run_time_ns.
    bpf_ns() {
        bpftool prog show --json | python3 -c '
import json, sys
print(sum(p.get("run_time_ns", 0) for p in json.load(sys.stdin) if p.get("name", "").startswith("lks_")))'
    }
    sysctl -qw kernel.bpf_stats_enabled=1
    "$APACHE" start event
    rps "$concurrency" 3 >/dev/null # warm-up
    for probe in $probes; do
        for ((i = 1; i <= reps; i++)); do
            for load in idle ab; do
                start_recording "$out/$probe-$load-$i.lsp" -a --probes "$probe"
                sleep 1 # past the attach
                before=$(bpf_ns)
                t0=$(date +%s%N)
                if [ "$load" = ab ]; then
                    r=$(rps "$concurrency" "$seconds")
                else
                    sleep "$seconds"
                    r=-
                fi
                after=$(bpf_ns)
                t1=$(date +%s%N)
                stop_recording
                cpu=$(time_summary "$out/$probe-$load-$i.lsp.time" | cut -d' ' -f1)
                ns=$(awk -v a="$after" -v b="$before" -v t="$((t1 - t0))" 'BEGIN { printf "%.0f", (a - b) / (t / 1e9) }')
                echo "$probe	$load	$i	$ns	$cpu	$r" >>"$out/runs.tsv"
            done
            echo "untraced	ab	$i	0	0	$(rps "$concurrency" "$seconds")" >>"$out/runs.tsv"
        done
    done
    awk -F'\t' '
        NR == 1 { next }
        $1 == "untraced" { ur += $6; un++; next }
        { k = $1 "\t" $2; ns[k] += $4; cpu[k] += $5; n[k]++; if ($6 != "-") { rps[k] += $6 } }
        END {
            printf "| probe | load | BPF run time (CPU ms per s) | lockscope CPU (s per run) | ab req/s (untraced %.0f) |\n|---|---|---|---|---|\n", ur / un
            for (k in n) {
                split(k, f, "\t")
                printf "| %s | %s | %.1f | %.2f | %s |\n", f[1], f[2], ns[k] / n[k] / 1e6, cpu[k] / n[k], (f[2] == "ab" ? sprintf("%.0f (%.3f)", rps[k] / n[k], (rps[k] / n[k]) / (ur / un)) : "-")
            }
        }' "$out/runs.tsv" | sort >"$out/summary.md"
    cat "$out/summary.md"
    ;;
soak)
    "$APACHE" start "$mpm"
    parent=$("$APACHE" pid)
    start_recording "$out/soak.lsp" -p "$parent" --tree
    "$APACHE" run "$concurrency" "$seconds" >"$out/ab.txt" &
    load=$!
    echo "elapsed_s	vmrss_kb	vmhwm_kb	cpu_s	processes" >"$out/samples.tsv"
    tick=$(getconf CLK_TCK)
    start=$SECONDS
    while kill -0 "$load" 2>/dev/null; do
        status=/proc/$recorder/status
        rss=$(awk '/^VmRSS/ { print $2 }' "$status")
        hwm=$(awk '/^VmHWM/ { print $2 }' "$status")
        cpu=$(awk -v t="$tick" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$recorder/stat")
        echo "$((SECONDS - start))	$rss	$hwm	$cpu	$("$APACHE" processes | wc -l)" >>"$out/samples.tsv"
        sleep "$interval"
    done
    wait "$load" || true
    stop_recording
    {
        grep -E '^(Complete|Failed) requests|^Requests per second' "$out/ab.txt"
        tail -1 "$out/soak.lsp.err"
        echo "recorder: $(time_summary "$out/soak.lsp.time")"
        "$LOCKSCOPE" report "$out/soak.lsp" --top 1 | sed -n '1,12p'
    } >"$out/summary.md"
    cat "$out/summary.md"
    ;;
*) usage ;;
esac
environment_end "$out/environment.txt"
echo "results in $out" >&2
