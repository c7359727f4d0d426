#!/usr/bin/env bash
# Throughput of the workloads untraced, per concurrency level, as a markdown table: MariaDB
# sysbench oltp_read_only TPS per thread count and nginx ab -k requests/s per concurrency, to
# compare with the reference figures in docs/BENCHMARKS.md. Debian 12, as root.
#
#   scaling.sh [--seconds 20] [--threads "1 2 5 10 20 35 50"] [--concurrency "5 20 50 100 150"]
#
# Uses the running servers of mariadb.sh and nginx.sh, or starts them and stops them on exit.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

seconds=20
threads_list="1 2 5 10 20 35 50"
concurrency_list="5 20 50 100 150"
parse_options "seconds threads=threads_list concurrency=concurrency_list" "$@"
need_root
MARIADB="$WORKLOADS_DIR/mariadb.sh"
NGINX="$WORKLOADS_DIR/nginx.sh"
started=()
cleanup() {
    local script
    for script in "${started[@]}"; do "$script" stop; done
    return 0
}
trap cleanup EXIT
for script in "$MARIADB" "$NGINX"; do
    if ! "$script" pid >/dev/null 2>&1; then
        "$script" start
        started+=("$script")
    fi
done

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| sysbench threads | TPS |"
echo "|---|---|"
"$MARIADB" tps "${threads_list%% *}" "$seconds" >/dev/null # warm-up
for t in $threads_list; do
    echo "| $t | $("$MARIADB" tps "$t" "$seconds") |"
done
echo
echo "| ab -k concurrency | requests/s |"
echo "|---|---|"
for c in $concurrency_list; do
    echo "| $c | $("$NGINX" rps "$c" "$seconds") |"
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
