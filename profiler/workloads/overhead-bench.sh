#!/usr/bin/env bash
# What recording costs the recorded: sysbench oltp_read_only TPS of MariaDB untraced and under
# lockscope and its peers (bpftrace, perf lock, perf trace, strace), in one run, repetitions
# interleaved (untraced, traced, untraced, traced, ...). Debian 12, as root; installs what it
# needs. Documented in docs/BENCHMARKS.md.
#
#   overhead-bench.sh [--threads "20 50"] [--reps 3] [--seconds 20] [--modes "MODE ..."]
#                     [--lockscope BIN] [--out DIR] [--bpf-stats yes|no]
#
# Modes: untraced (always run, between the others), lockscope-default (record -p, default
# probes), lockscope-futex (--probes futex), lockscope-futex-generic (the same with tracefs
# unmounted, so on the generic sys_enter/sys_exit hooks; only when this script mounted tracefs),
# lockscope-offcpu (--probes offcpu, when `lockscope probes` lists it), lockscope-offcpu-nostacks
# (the same with LOCKSCOPE_USER_STACKS=none: what unwinding costs), lockscope-preempt
# (--probes preempt: offcpu with the stacks of preempted threads), lockscope-bottleneck
# (--probes bottleneck: what `lockscope why` reads), lockscope-with-P1+P2... (--probes P1,P2...:
# any set, to tell where a set's cost comes from), bpftrace-futex,
# bpftrace-offcpu (the equivalent bpftrace scripts next to this one), bpftrace-switch-floor (a
# sched_switch program that only counts: the floor of any off-CPU probe), libbpf-offcputime
# (libbpf-tools' offcputime -p: frame-pointer stacks, aggregated in the kernel), perf-lock (perf lock record
# -p), perf-trace (perf trace -s -p), strace (strace -c -f -p); and the on-CPU profilers at 99 Hz:
# lockscope-cpu (--probes cpu), perf-cpu (perf record -F 99 --call-graph dwarf -p: perf's 8 KB
# stack copies), bpftrace-cpu (profile:hz:99 { @[ustack] = count(); }); cpu-stacks.sh DIR then
# gives each one's share of samples on stacks reaching the thread entry. tracefs is mounted for the whole
# run, as systemd mounts it at boot (bpftrace and perf need it; lockscope's futex probe then uses
# the per-syscall tracepoints), and unmounted at the end when it was not mounted before. Every tracer attaches to the running mariadbd before sysbench starts and is stopped with
# SIGINT after it ends, under /usr/bin/time -v for its CPU time and peak RSS; its CPU time while
# sysbench ran (what the server could not use) is read from /proc as well.
#
# The issue-46 comparison (the recorder's own CPU and the TPS it keeps, against its peers):
#   overhead-bench.sh --threads 50 --reps 5 --seconds 10 --bpf-stats no \
#       --modes "lockscope-offcpu lockscope-bottleneck libbpf-offcputime bpftrace-offcpu"
#
# Output: DIR (default /tmp/lockscope-overhead-<time>) holds runs.tsv (one line per run),
# summary.md (ratios to untraced with their spread, the paired ratios (each run against the mean
# of the untraced runs just before and after it, which cancels the machine's slow drift),
# lockscope's events/s, losses, CPU and RSS),
# bpf-stats.md (one more run per lockscope mode with kernel.bpf_stats_enabled: runs and ns per
# run of each of its BPF programs), environment.txt (machine, versions, what else was running)
# and each tracer's output. The lockscope binary is copied first, so a rebuild during the run changes nothing.
# Everything started here (MariaDB when it was not running, tracers, a tracefs mount) is stopped
# or undone on exit. --bpf-stats no skips the per-program statistics runs (bpf-stats.md).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

threads_list="20 50"
reps=3
seconds=20
modes="lockscope-default lockscope-futex lockscope-futex-generic lockscope-offcpu bpftrace-futex bpftrace-offcpu perf-lock perf-trace strace"
lockscope_bin=$LOCKSCOPE_RELEASE
out="/tmp/lockscope-overhead-$(date +%Y%m%d-%H%M%S)"
bpf_stats=yes
parse_options "threads=threads_list reps seconds modes lockscope=lockscope_bin out bpf-stats=bpf_stats" "$@"
# Seconds between a tracer's start and sysbench's, for tracers that do not say they are ready.
SETTLE=2

need_root
install_missing mariadb-server sysbench bpftrace libbpf-tools linux-perf strace time bpftool
copy_lockscope "$lockscope_bin" "$out"
MARIADB="$WORKLOADS_DIR/mariadb.sh"

started_mariadb=
mounted_tracefs=
tracer_pid=
cleanup() {
    sysctl -qw kernel.bpf_stats_enabled=0 2>/dev/null || true
    if [ -n "$tracer_pid" ] && kill -0 "$tracer_pid" 2>/dev/null; then
        pkill -INT -P "$tracer_pid" 2>/dev/null || true
        sleep 2
        kill -KILL "$tracer_pid" 2>/dev/null || true
    fi
    release_tracefs
    [ -n "$started_mariadb" ] && "$MARIADB" stop
    return 0
}
trap cleanup EXIT

# tracefs: mounted for the whole run (see the header); lockscope-futex-generic takes it away for
# its runs only when this script mounted it.
ensure_tracefs() {
    if ! mountpoint -q /sys/kernel/tracing; then
        mount -t tracefs nodev /sys/kernel/tracing
        mounted_tracefs=1
    fi
}
release_tracefs() {
    if [ -n "$mounted_tracefs" ]; then
        umount /sys/kernel/tracing || log "could not unmount /sys/kernel/tracing"
        mounted_tracefs=
    fi
}
tracefs_was_mounted=
mountpoint -q /sys/kernel/tracing && tracefs_was_mounted=1
ensure_tracefs

if "$MARIADB" pid >/dev/null 2>&1; then
    log "using the running MariaDB (pid $("$MARIADB" pid))"
else
    "$MARIADB" start
    started_mariadb=1
fi
PID=$("$MARIADB" pid)

offcpu_available=
"$LOCKSCOPE" probes | grep -qE '^ *offcpu ' && offcpu_available=1

{
    echo "date:      $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host:      $(uname -srm), $(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB"
    echo "mariadb:   $(mariadbd --version)"
    echo "sysbench:  $(sysbench --version)"
    echo "bpftrace:  $(bpftrace --version)"
    echo "libbpf-tools: $(dpkg-query -W -f='${Version}' libbpf-tools 2>/dev/null || echo none)"
    echo "perf:      $(perf --version)"
    echo "strace:    $(strace -V | head -1)"
    echo "lockscope: $("$LOCKSCOPE" --version) ($lockscope_bin; the repository is at $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown), which need not be the commit it was built from)"
    echo "settings:  threads $threads_list, $reps repetitions, $seconds s per run, modes: $modes"
    echo "offcpu probe available: ${offcpu_available:-no}"
    echo
    echo "load average at start: $(cat /proc/loadavg)"
    echo "busiest processes at start:"
    ps -eo pid,pcpu,etime,comm --sort=-pcpu | head -8
} >"$out/environment.txt"
cat "$out/environment.txt" >&2

printf 'mode\tthreads\trep\ttps\tevents\tlost\tstack_failures\trecorded_s\tcpu_s\trss_kb\tloadavg\tcpu_load_s\n' >"$out/runs.tsv"

# Starts the tracer of mode "$1" on $PID, writing to files "$2".*; returns once it is attached.
start_tracer() {
    local mode=$1 base=$2 ready="" cmd=()
    tracer_mode=$mode
    case "$mode" in
    lockscope-default) cmd=("$LOCKSCOPE" record -p "$PID" -o "$base.lsp") ready="recording pid" ;;
    lockscope-futex) cmd=("$LOCKSCOPE" record -p "$PID" --probes futex -o "$base.lsp") ready="recording pid" ;;
    lockscope-futex-generic)
        release_tracefs
        cmd=("$LOCKSCOPE" record -p "$PID" --probes futex -o "$base.lsp") ready="recording pid"
        ;;
    lockscope-offcpu) cmd=("$LOCKSCOPE" record -p "$PID" --probes offcpu -o "$base.lsp") ready="recording pid" ;;
    lockscope-offcpu-nostacks)
        # The same without user stacks (LOCKSCOPE_USER_STACKS=none): what unwinding costs.
        cmd=(env LOCKSCOPE_USER_STACKS=none "$LOCKSCOPE" record -p "$PID" --probes offcpu -o "$base.lsp")
        ready="recording pid"
        ;;
    lockscope-preempt) cmd=("$LOCKSCOPE" record -p "$PID" --probes preempt -o "$base.lsp") ready="recording pid" ;;
    lockscope-bottleneck) cmd=("$LOCKSCOPE" record -p "$PID" --probes bottleneck -o "$base.lsp") ready="recording pid" ;;
    lockscope-cpu) cmd=("$LOCKSCOPE" record -p "$PID" --probes cpu -o "$base.lsp") ready="recording pid" ;;
    lockscope-with-*)
        # A set of probes of one's own, `+`-separated: where a set's cost comes from.
        cmd=("$LOCKSCOPE" record -p "$PID" --probes "$(tr + , <<<"${mode#lockscope-with-}")" -o "$base.lsp")
        ready="recording pid"
        ;;
    perf-cpu) cmd=(perf record -F 99 --call-graph dwarf -p "$PID" -o "$base.perf.data") ;;
    bpftrace-cpu)
        cmd=(bpftrace -e 'profile:hz:99 /pid == $1/ { @[ustack] = count(); }' "$PID")
        ready="Attaching"
        ;;
    bpftrace-futex) cmd=(bpftrace "$WORKLOADS_DIR/futex-wait.bt" "$PID") ready="Attaching" ;;
    bpftrace-offcpu) cmd=(bpftrace "$WORKLOADS_DIR/offcpu.bt" "$PID") ready="Attaching" ;;
    bpftrace-switch-floor) cmd=(bpftrace "$WORKLOADS_DIR/switch-floor.bt" "$PID") ready="Attaching" ;;
    # Prints nothing until it ends: attached once its maps exist, SETTLE covers it.
    libbpf-offcputime) cmd=(offcputime -p "$PID") ;;
    perf-lock) cmd=(perf lock record -p "$PID" -o "$base.perf.data") ;;
    perf-trace) cmd=(perf trace -s -p "$PID" -o "$base.perf-trace.txt") ;;
    strace) cmd=(strace -c -f -p "$PID" -o "$base.strace.txt") ready="attached" ;;
    *) die "unknown mode $mode" ;;
    esac
    /usr/bin/time -v -o "$base.time" "${cmd[@]}" >"$base.out" 2>"$base.err" &
    tracer_pid=$!
    if [ -n "$ready" ]; then
        wait_for 60 grep -q "$ready" "$base.out" "$base.err" || {
            cat "$base.err" >&2
            die "$mode did not start"
        }
    fi
    sleep "$SETTLE"
    kill -0 "$tracer_pid" 2>/dev/null || {
        cat "$base.err" >&2
        die "$mode exited early"
    }
}

# Stops the tracer with SIGINT (its child: /usr/bin/time ignores SIGINT) and waits for it, at
# most STOP_TIMEOUT seconds: bpftrace symbolizes and prints every stack of its maps on exit, which
# takes minutes for mariadbd's thousands of stacks and is not part of what sysbench measured; it
# is then killed (its CPU time and RSS are then those of the recording alone). lockscope's own
# modes get longer: their profile is read afterwards (its events and losses), and the analysis
# and symbolization at the end of a `bottleneck` recording of mariadbd take seconds.
STOP_TIMEOUT=8
LOCKSCOPE_STOP_TIMEOUT=120
stop_tracer() {
    local status=0 timeout=$STOP_TIMEOUT
    [[ ${tracer_mode:-} == lockscope-* ]] && timeout=$LOCKSCOPE_STOP_TIMEOUT
    pkill -INT -P "$tracer_pid" || true
    local deadline=$((SECONDS + timeout))
    while kill -0 "$tracer_pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if kill -0 "$tracer_pid" 2>/dev/null; then
        log "tracer still printing after ${timeout}s: killing it"
        pkill -KILL -P "$tracer_pid" || true
    fi
    wait "$tracer_pid" || status=$?
    # 130: exited on SIGINT (perf, strace); 137: killed above.
    case $status in 0 | 130 | 137) ;; *) log "tracer exited with status $status (see its .err)" ;; esac
    tracer_pid=
    # lockscope-futex-generic unmounted it for its run.
    ensure_tracefs
}

# CPU seconds (user + system) the tracer under /usr/bin/time "$1" has used so far; - when gone.
TICKS=$(getconf CLK_TCK)
tracer_cpu() {
    local child
    child=$(pgrep -P "$1" | head -1) || { echo -; return; }
    # utime and stime, fields 14 and 15 after the command name (which may hold spaces).
    sed 's/^.*) //' "/proc/$child/stat" 2>/dev/null |
        awk -v t="$TICKS" '{printf "%.2f", ($12 + $13) / t}' || echo -
}

run_one() {
    local mode=$1 threads=$2 rep=$3 base="$out/$1-t$2-r$3" tps
    local events=- lost=- failures=- recorded=- cpu=- rss=- cpu_before=- cpu_load=-
    if [ "$mode" != untraced ]; then
        start_tracer "$mode" "$base"
        cpu_before=$(tracer_cpu "$tracer_pid")
    fi
    tps=$("$MARIADB" tps "$threads" "$seconds")
    if [ "$mode" != untraced ]; then
        cpu_load=$(awk -v a="$cpu_before" -v b="$(tracer_cpu "$tracer_pid")" \
            'BEGIN {if (a == "-" || b == "-") print "-"; else printf "%.2f", b - a}')
        stop_tracer
        cpu=$(awk -v u="$(time_field "$base.time" 'User time (seconds)')" \
            -v s="$(time_field "$base.time" 'System time (seconds)')" 'BEGIN {printf "%.2f", u + s}')
        rss=$(time_field "$base.time" 'Maximum resident set size (kbytes)')
        if [[ $mode == lockscope-* ]]; then
            # lockscope: wrote `F`: N waits in R records from T threads over D s (...); L lost, S stack failures
            local line
            line=$(grep '^lockscope: wrote' "$base.err" | tail -1)
            events=$(sed -n 's/.*`: \([0-9]*\) waits in .*/\1/p' <<<"$line")
            recorded=$(sed -n 's/.* over \([0-9.]*\) s .*/\1/p' <<<"$line")
            lost=$(sed -n 's/.*; \([0-9]*\) lost, .*/\1/p' <<<"$line")
            failures=$(sed -n 's/.* lost, \([0-9]*\) stack failures.*/\1/p' <<<"$line")
        fi
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$threads" "$rep" "$tps" \
        "${events:--}" "${lost:--}" "${failures:--}" "${recorded:--}" "$cpu" "${rss:--}" \
        "$(cut -d' ' -f1 /proc/loadavg)" "$cpu_load" >>"$out/runs.tsv"
    log "$(date +%H:%M:%S) $mode, $threads threads, rep $rep: $tps TPS"
}

active_modes=()
for mode in $modes; do
    if [ "$mode" = lockscope-offcpu ] && [ -z "$offcpu_available" ]; then
        log "lockscope has no offcpu probe: lockscope-offcpu is not available"
        continue
    fi
    if [ "$mode" = libbpf-offcputime ] && ! command -v offcputime >/dev/null; then
        log "no offcputime (libbpf-tools): libbpf-offcputime is not available"
        continue
    fi
    if [ "$mode" = lockscope-futex-generic ] && [ -n "$tracefs_was_mounted" ]; then
        log "tracefs was mounted before this run: lockscope-futex-generic would unmount it; skipped"
        continue
    fi
    active_modes+=("$mode")
done

for threads in $threads_list; do
    log "warm-up: $threads threads, $seconds s"
    "$MARIADB" tps "$threads" "$seconds" >/dev/null
done
for rep in $(seq 1 "$reps"); do
    for threads in $threads_list; do
        for mode in "${active_modes[@]}"; do
            run_one untraced "$threads" "$rep"
            run_one "$mode" "$threads" "$rep"
        done
        run_one untraced "$threads" "$rep"
    done
done

# Where lockscope's cost goes: one more run per lockscope mode at the last thread count with the
# kernel's BPF statistics on (kernel.bpf_stats_enabled: run count and run time per program, which
# itself costs a little, hence not during the measured runs), read before the recording stops.
# BPF run time is charged to whichever thread hit the hook, not to lockscope's CPU time.
bpf_stats_run() {
    local mode=$1 threads=$2 base="$out/$1-t$2-bpfstats" before ours
    before=$(bpftool prog show | sed -n 's/^\([0-9]*\): .* name lks_.*/\1/p' | sort)
    sysctl -qw kernel.bpf_stats_enabled=1
    start_tracer "$mode" "$base"
    # Attached (ready line) SETTLE seconds ago: the programs have been running since about then.
    local attached elapsed
    attached=$(awk -v now="$(date +%s.%N)" -v settle="$SETTLE" 'BEGIN {printf "%.3f", now - settle}')
    "$MARIADB" tps "$threads" "$seconds" >"$base.tps"
    elapsed=$(awk -v now="$(date +%s.%N)" -v t="$attached" 'BEGIN {printf "%.3f", now - t}')
    ours=$(comm -13 <(echo "$before") <(bpftool prog show | sed -n 's/^\([0-9]*\): .* name lks_.*/\1/p' | sort) | tr '\n' ' ')
    for id in $ours; do
        bpftool prog show id "$id" | sed -n 1p
    done | awk -v mode="$mode" -v secs="$elapsed" '{
        for (i = 1; i <= NF; i++) {
            if ($i == "name") name = $(i + 1)
            if ($i == "run_time_ns") t = $(i + 1)
            if ($i == "run_cnt") c = $(i + 1)
        }
        if (c > 0) printf "| %s | %s | %d | %.0f | %.0f | %.1f%% |\n", mode, name, c, c / secs, t / c, 100 * t / (secs * 1e9)
        t = 0; c = 0
    }' >>"$out/bpf-stats.md"
    sysctl -qw kernel.bpf_stats_enabled=0
    stop_tracer
}
last_threads=${threads_list##* }
{
    echo "| mode | program | runs | runs/s | ns/run | CPU (% of one) |"
    echo "|---|---|---|---|---|---|"
} >"$out/bpf-stats.md"
for mode in "${active_modes[@]}"; do
    [[ $mode == lockscope-* ]] || continue
    [ "$bpf_stats" = yes ] || break
    command -v bpftool >/dev/null || break
    bpf_stats_run "$mode" "$last_threads"
done
cat "$out/bpf-stats.md" >&2

{
    echo
    echo "load average at end: $(cat /proc/loadavg)"
    echo "busiest processes at end:"
    ps -eo pid,pcpu,etime,comm --sort=-pcpu | head -8
} >>"$out/environment.txt"

# The summary: per mode and thread count, mean TPS as a ratio to the untraced mean at the same
# thread count, with the spread (min-max of the runs' ratios) and, for lockscope, its costs.
awk -F'\t' -v offcpu="${offcpu_available:-no}" -v modes="${active_modes[*]}" -v threads_list="$threads_list" '
NR == 1 { next }
# Paired ratios: a traced run against the mean of the untraced runs just before and after it.
$1 == "untraced" {
    if (pending[$2] != "") {
        split(pending[$2], p, SUBSEP)
        pk = p[1] SUBSEP $2
        np[pk]++; pr[pk, np[pk]] = p[2] / ((last[$2] + $4) / 2)
        pending[$2] = ""
    }
    last[$2] = $4
}
$1 != "untraced" && last[$2] != "" { pending[$2] = $1 SUBSEP $4 }
{
    key = $1 SUBSEP $2
    n[key]++; sum[key] += $4; tps[key, n[key]] = $4
    if ($5 != "-") { ev[key] += $5; rec[key] += $8; lost[key] += $6; fail[key] += $7 }
    if ($9 != "-") { cpu[key] += $9; if ($10 > rss[key]) rss[key] = $10 }
    if ($12 != "" && $12 != "-") { cpuload[key] += $12; ncl[key]++ }
}
END {
    nt = split(threads_list, ts, " ")
    nm = split("untraced " modes, ms, " ")
    print "| mode | threads | runs | mean TPS | ratio to untraced | spread (min-max) | paired ratio: median (min-max) | events/s | lost | stack failures | tracer CPU s/run | of which while the load ran | tracer peak RSS MB |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for (j = 1; j <= nt; j++) {
        t = ts[j]; base = sum["untraced", t] / n["untraced", t]
        for (i = 1; i <= nm; i++) {
            m = ms[i]; key = m SUBSEP t
            if (!n[key]) continue
            lo = 1e9; hi = 0
            for (r = 1; r <= n[key]; r++) { q = tps[key, r] / base; if (q < lo) lo = q; if (q > hi) hi = q }
            mean = sum[key] / n[key]
            eps = (rec[key] > 0) ? sprintf("%.0f", ev[key] / rec[key]) : "-"
            l = (m ~ /^lockscope/) ? lost[key] : "-"
            f = (m ~ /^lockscope/) ? fail[key] : "-"
            c = (m == "untraced") ? "-" : sprintf("%.2f", cpu[key] / n[key])
            s = (m == "untraced") ? "-" : sprintf("%.0f", rss[key] / 1024)
            cl = (ncl[key]) ? sprintf("%.2f", cpuload[key] / ncl[key]) : "-"
            paired = "-"
            if (np[key]) {
                # insertion sort of the few paired ratios, for the median
                for (a = 1; a <= np[key]; a++) v[a] = pr[key, a]
                for (a = 2; a <= np[key]; a++) for (b = a; b > 1 && v[b - 1] > v[b]; b--) { x = v[b]; v[b] = v[b - 1]; v[b - 1] = x }
                med = (np[key] % 2) ? v[(np[key] + 1) / 2] : (v[np[key] / 2] + v[np[key] / 2 + 1]) / 2
                paired = sprintf("%.3f (%.3f-%.3f)", med, v[1], v[np[key]])
            }
            printf "| %s | %s | %d | %.0f | %.3f | %.3f-%.3f | %s | %s | %s | %s | %s | %s | %s |\n", m, t, n[key], mean, mean / base, lo, hi, paired, eps, l, f, c, cl, s
        }
    }
    if (offcpu == "no") print "\nlockscope-offcpu: not available (this lockscope has no offcpu probe)."
}' "$out/runs.tsv" >"$out/summary.md"
cat "$out/summary.md"
log "results in $out"
