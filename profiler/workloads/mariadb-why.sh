#!/usr/bin/env bash
# MariaDB under sysbench oltp_read_only: why its throughput stops scaling, by `lockscope why`,
# checked by an experiment on the server (issue 23, item 9). Debian 12, as root; loopback only.
#
#   mariadb-why.sh [--levels 1,5,20,50] [--seconds 10] [--repetitions 3] [--out DIR]
#                  [--lockscope BIN]
#
# 1. `lockscope sweep --probes bottleneck` over LEVELS against a private mariadbd (mariadb.sh on
#    port $MARIADB_PORT, default 3318, its own state directory), then the sweep's table and
#    finding and `lockscope why` of the knee's level and of the last level.
# 2. The experiment: the CPUs the server may run on (`taskset -a -p`: every thread of mariadbd),
#    one against all of them, interleaved REPETITIONS times, at the first level and at the last,
#    SECONDS each (sysbench itself is not pinned); each run's TPS, the medians and the ratio.
#
# Reading it: when `why` traces the last level's waits to the connection threads' CPU work or to
# CPU saturation, the last level's TPS follows the CPUs the server is given (a ratio near the
# CPU count), while one connection, which runs on one CPU at a time, barely gains; when the
# cause is a lock's holder asleep or a sleep, more CPUs change neither.
set -euo pipefail
# Its own server state, apart from mariadb.sh's default one.
export LOCKSCOPE_WORKLOAD_DIR=${LOCKSCOPE_WORKLOAD_DIR:-/tmp/lockscope-mariadb-why}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

levels=1,5,20,50
seconds=10
repetitions=3
out=
lockscope_bin=$LOCKSCOPE_RELEASE
parse_options "levels seconds repetitions out lockscope=lockscope_bin" "$@"
need_root
need_lockscope "$lockscope_bin"
: "${MARIADB_PORT:=3318}"
export MARIADB_PORT
out=${out:-$(mktemp -d /tmp/lockscope-mariadb-why.XXXXXX)}
mkdir -p "$out"
MARIADB="$(dirname "${BASH_SOURCE[0]}")/mariadb.sh"
bash "$MARIADB" start
trap 'bash "$MARIADB" stop' EXIT
pid=$(bash "$MARIADB" pid)
all_cpus="0-$(($(nproc) - 1))"
taskset -a -p -c "$all_cpus" "$pid" >/dev/null

echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -sr), $(nproc) CPUs, $(mariadbd --version)"
echo "lockscope: $("$lockscope_bin" --version) ($lockscope_bin)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "== 1. sweep --probes bottleneck, levels $levels, ${seconds} s each"
"$lockscope_bin" sweep --levels "$levels" --probes bottleneck -d "${seconds}s" \
    --load "bash $(realpath "$MARIADB") run {c} $seconds" -p "$pid" -o "$out/sweep"
"$lockscope_bin" html "$out/sweep" -o "$out/sweep.html" 2>/dev/null || true
# The knee's level (the first when there is none) and the last, as "CONCURRENCY PROFILE" lines.
python3 - "$out/sweep/sweep.json" >"$out/explained" <<'PY'
import json, sys
sweep = json.load(open(sys.argv[1]))
levels = sweep["levels"]
knee = (sweep.get("knee") or {}).get("concurrency", levels[0]["concurrency"])
for level in levels:
    if level["concurrency"] in (knee, levels[-1]["concurrency"]):
        print(level["concurrency"], level["profile"])
print("finding:", sweep["finding"], file=sys.stderr)
PY
while read -r concurrency profile; do
    echo
    echo "lockscope why at concurrency $concurrency ($profile):"
    "$lockscope_bin" why "$out/sweep/$profile"
done <"$out/explained"

echo
echo "== 2. the experiment: mariadbd on 1 CPU against $(nproc), ${seconds} s runs, $repetitions rounds"
first=${levels%%,*}
last=${levels##*,}
declare -A tps
for round in $(seq "$repetitions"); do
    for threads in "$first" "$last"; do
        for cpus in 0 "$all_cpus"; do
            taskset -a -p -c "$cpus" "$pid" >/dev/null
            value=$(bash "$MARIADB" tps "$threads" "$seconds")
            tps[$threads/$cpus]="${tps[$threads/$cpus]:-} $value"
            echo "round $round: $threads threads, mariadbd on CPUs $cpus: $value TPS"
        done
    done
done
taskset -a -p -c "$all_cpus" "$pid" >/dev/null
for threads in "$first" "$last"; do
    # shellcheck disable=SC2086
    one=$(median ${tps[$threads/0]})
    # shellcheck disable=SC2086
    all=$(median ${tps[$threads/$all_cpus]})
    echo "$threads threads: median $one TPS on 1 CPU, $all TPS on $(nproc): x$(awk "BEGIN { printf \"%.2f\", $all / $one }")"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sweep, profiles and page in $out"
