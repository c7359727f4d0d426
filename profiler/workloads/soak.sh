#!/usr/bin/env bash
# Soak: MariaDB under sysbench at 50 threads with lockscope attached for a long time, sampling
# the recorder's memory and CPU, then checking the profile for losses. Debian 12, as root.
# Results in docs/RELIABILITY.md (record) and docs/TOP.md (top).
#
#   soak.sh [--seconds 600] [--threads 50] [--interval 10] [--probes LIST] [--lockscope BIN]
#           [--view record|top] [--out DIR]
#
# --view top soaks `lockscope top --plain` (its blocks in top.txt, no profile) instead of
# `lockscope record`. DIR (default /tmp/lockscope-soak-<time>) gets samples.tsv (elapsed s, VmRSS
# and VmHWM in kB, CPU seconds of lockscope so far), sysbench.txt, record.err and soak.lsp.
# MariaDB runs on port $SOAK_PORT (default 3310) with its own state directory; everything is
# stopped on exit.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

seconds=600
threads=50
interval=10
probes=
lockscope_bin=$LOCKSCOPE_RELEASE
view=record
out="/tmp/lockscope-soak-$(date +%Y%m%d-%H%M%S)"
parse_options "seconds threads interval probes lockscope=lockscope_bin view out" "$@"
case "$view" in record | top) ;; *) die "--view is record or top, not $view" ;; esac

need_root
install_missing mariadb-server sysbench time
copy_lockscope "$lockscope_bin" "$out"
private_mariadb "${SOAK_PORT:-3310}" lockscope-soak-state

load_pid=
recorder_pid=
time_pid=
cleanup() {
    [ -n "$time_pid" ] && pkill -KILL -P "$time_pid" 2>/dev/null
    [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null
    "$MARIADB" stop
    rm -rf "$LOCKSCOPE_WORKLOAD_DIR"
    return 0
}
trap cleanup EXIT

"$MARIADB" start
probe_args=()
[ -n "$probes" ] && probe_args=(--probes "$probes")
: >"$out/record.err"
# Under /usr/bin/time -v for the peak RSS of the whole run, symbolization at the end included.
if [ "$view" = top ]; then
    /usr/bin/time -v -o "$out/time.txt" "$LOCKSCOPE" top --plain -p "$("$MARIADB" pid)" \
        "${probe_args[@]}" >"$out/top.txt" 2>"$out/record.err" &
    started="$out/top.txt"
else
    /usr/bin/time -v -o "$out/time.txt" "$LOCKSCOPE" record -p "$("$MARIADB" pid)" \
        "${probe_args[@]}" -o "$out/soak.lsp" 2>"$out/record.err" &
    started="$out/record.err"
fi
time_pid=$!
wait_for 30 grep -q "recording pid" "$started" || die "lockscope did not start: $(cat "$out/record.err")"
recorder_pid=$(pgrep -P "$time_pid" -x lockscope) || die "no lockscope under /usr/bin/time"
"$MARIADB" run "$threads" "$seconds" >"$out/sysbench.txt" 2>&1 &
load_pid=$!

ticks=$(getconf CLK_TCK)
printf 'elapsed_s\trss_kb\thwm_kb\tcpu_s\n' >"$out/samples.tsv"
start=$SECONDS
while kill -0 "$load_pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$recorder_pid/status")
    hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$recorder_pid/status")
    # utime and stime, fields 14 and 15 of /proc/PID/stat (the command name has no spaces here).
    cpu=$(awk -v t="$ticks" '{printf "%.2f", ($14 + $15) / t}' "/proc/$recorder_pid/stat")
    printf '%s\t%s\t%s\t%s\n' $((SECONDS - start)) "$rss" "$hwm" "$cpu" >>"$out/samples.tsv"
    sleep "$interval"
done
wait "$load_pid" || die "sysbench failed: $(tail -5 "$out/sysbench.txt")"
load_pid=
kill -INT "$recorder_pid"
wait "$time_pid" || die "lockscope failed: $(cat "$out/record.err")"
time_pid=

grep 'transactions:' "$out/sysbench.txt"
tail -1 "$out/record.err"
awk -F'\t' 'NR == 2 {first = $2} NR > 1 {last = $2; if ($3 > max) max = $3; cpu = $4; t = $1}
    END {share = (t > 0) ? 100 * cpu / t : 0
        printf "lockscope while recording: RSS %.1f MB after start, %.1f MB at %d s, peak %.1f MB; CPU %.1f s (%.2f%% of one CPU)\n",
        first / 1024, last / 1024, t, max / 1024, cpu, share}' "$out/samples.tsv"
echo "lockscope whole run (finish and symbolization included):" \
    "peak RSS $(time_field "$out/time.txt" "Maximum resident set size (kbytes)") kB," \
    "CPU $(time_field "$out/time.txt" "User time (seconds)") s user" \
    "+ $(time_field "$out/time.txt" "System time (seconds)") s system"
log "results in $out"
