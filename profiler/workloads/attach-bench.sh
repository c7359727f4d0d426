#!/usr/bin/env bash
# Attach time of `lockscope record -p` on MariaDB (issue 14; docs/BENCHMARKS.md, "Attaching to a
# loaded server"), idle and under sysbench, with an empty unwind-table cache (first attach) and a
# filled one (cached attach), against `perf record -p` and bpftrace in the same run; and the TPS
# sysbench lost while each tool attached. Debian 12, as root, with mariadb.sh's server started.
#
#   attach-bench.sh [THREADS [ROUNDS]]    default 50 threads, 3 rounds
#
# Attach time: from the command's start to its "ready" line (lockscope: "recording pid"; bpftrace:
# its BEGIN probe, which runs once every probe is attached; perf: the ack of an `enable` sent on
# its control fifo, started disabled with -D -1). Each tool then records 3 s. TPS: sysbench's
# per-second reports overlapping the attach window, against the 5 s before the command.
# Settings (environment): LOCKSCOPE (the binary; default target/release/lockscope), LOCKSCOPE_OLD
# (optional: an older binary, without the table cache, measured as a fifth tool), as mariadb.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${MARIADB_PORT:=3307}"
: "${MARIADB_TABLES:=4}"
: "${MARIADB_TABLE_SIZE:=20000}"
: "${LOCKSCOPE:=$REPO_DIR/target/release/lockscope}"
THREADS=${1:-50}
ROUNDS=${2:-3}
need_root
PID=$("$WORKLOADS_DIR/mariadb.sh" pid) || die "mariadbd is not running: mariadb.sh start first"
WORK=$(mktemp -d /tmp/lockscope-attach-bench.XXXXXX)
trap 'rm -rf "$WORK"; kill $(jobs -p) 2>/dev/null || true' EXIT
CACHE="$WORK/cache"

now() { date +%s.%N; }

# Runs "$@" in the background, its stderr and stdout to $WORK/out, until a line matches $READY;
# prints the seconds that took, then waits for the command to end.
time_until_ready() {
    local ready=$1 start pid
    shift
    : >"$WORK/out"
    start=$(now)
    "$@" >"$WORK/out" 2>&1 &
    pid=$!
    until grep -q -- "$ready" "$WORK/out"; do
        kill -0 "$pid" 2>/dev/null || die "$1 ended before it was ready: $(cat "$WORK/out")"
        sleep 0.005
    done
    echo "$start $(now)"
    wait "$pid" || true
}

lockscope_first() {
    rm -rf "$CACHE"
    time_until_ready "recording pid" "$LOCKSCOPE" record -p "$PID" -d 3s -o "$WORK/x.lsp" --cache-dir "$CACHE"
    grep "unwinding:" "$WORK/out" >&2 || true
}

lockscope_cached() {
    time_until_ready "recording pid" "$LOCKSCOPE" record -p "$PID" -d 3s -o "$WORK/x.lsp" --cache-dir "$CACHE"
    grep "unwinding:" "$WORK/out" >&2 || true
}

lockscope_old() {
    time_until_ready "recording pid" "$LOCKSCOPE_OLD" record -p "$PID" -d 3s -o "$WORK/x.lsp"
}

bpftrace_attach() {
    time_until_ready "^ready" timeout -s INT 3 bpftrace -e "BEGIN { printf(\"ready\\n\"); }
        tracepoint:syscalls:sys_enter_futex /pid == $PID/ { @[ustack] = count(); }"
}

perf_attach() {
    rm -f "$WORK/ctl" "$WORK/ack"
    mkfifo "$WORK/ctl" "$WORK/ack"
    local start end pid
    start=$(now)
    perf record -q -e syscalls:sys_enter_futex --call-graph dwarf -p "$PID" -o "$WORK/perf.data" \
        -D -1 --control "fifo:$WORK/ctl,$WORK/ack" >/dev/null 2>&1 &
    pid=$!
    echo enable >"$WORK/ctl"
    head -c 3 "$WORK/ack" >/dev/null
    end=$(now)
    echo "$start $end"
    sleep 3
    kill -INT "$pid"
    wait "$pid" || true
}

# Mean TPS of sysbench's reports (seconds since $1) in [$2, $3] (epoch seconds).
tps_between() {
    awk -v t0="$1" -v from="$2" -v to="$3" '
        /^\[ *[0-9]+s \]/ { s = $2 + 0; t = t0 + s; if (t >= from && t - 1 <= to) { sum += $7; n++ } }
        END { if (n) printf "%.0f", sum / n; else printf "nan" }' "$WORK/sysbench"
}

TOOLS=(lockscope_first lockscope_cached perf_attach bpftrace_attach)
[ -n "${LOCKSCOPE_OLD:-}" ] && TOOLS+=(lockscope_old)
results() {
    printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$WORK/results"
}

log "idle: $ROUNDS rounds"
for _ in $(seq "$ROUNDS"); do
    for tool in "${TOOLS[@]}"; do
        $tool >"$WORK/times"
        read -r start end <"$WORK/times"
        results idle "$tool" "$(echo "$end - $start" | bc)" - -
    done
done

log "under sysbench oltp_read_only, $THREADS threads: $ROUNDS rounds"
sb_start=$(now)
sysbench oltp_read_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$MARIADB_PORT" \
    --mysql-user=sbtest --mysql-password=sbtest --mysql-db=sbtest --tables="$MARIADB_TABLES" \
    --table-size="$MARIADB_TABLE_SIZE" --threads="$THREADS" --time=0 \
    --report-interval=1 run >"$WORK/sysbench" 2>&1 &
sysbench_pid=$!
sleep 10
for _ in $(seq "$ROUNDS"); do
    for tool in "${TOOLS[@]}"; do
        $tool >"$WORK/times"
        read -r start end <"$WORK/times"
        base=$(tps_between "$sb_start" "$(echo "$start - 6" | bc)" "$(echo "$start - 1" | bc)")
        during=$(tps_between "$sb_start" "$start" "$end")
        results load "$tool" "$(echo "$end - $start" | bc)" "$base" "$during"
        sleep 6
    done
done
kill "$sysbench_pid"
wait "$sysbench_pid" || true
echo "mode	tool	attach_s	tps_before	tps_attaching"
cat "$WORK/results"
