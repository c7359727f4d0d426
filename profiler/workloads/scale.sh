#!/usr/bin/env bash
# The recorder at scale: PROCESSES processes of THREADS threads each (default 100 x 10: 1,000
# threads), every thread taking its process's mutex (held 100 us) then sleeping 1 ms, recorded
# with `lockscope record -p PARENT --tree` for SECONDS. Prints the profile's losses, processes and
# threads recorded, and the recorder's CPU time and peak RSS (/usr/bin/time -v). Debian 12, as
# root; builds profiler/tests/data/targets.c with cc. Documented in docs/BENCHMARKS.md.
#
#   scale.sh [--processes 100] [--threads 10] [--seconds 30] [--probes futex] [--lockscope BIN]
#            [--out DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

processes=100
threads=10
seconds=30
probes=futex
lockscope_bin=$LOCKSCOPE_RELEASE
out="/tmp/lockscope-scale-$(date +%Y%m%d-%H%M%S)"
parse_options "processes threads seconds probes lockscope=lockscope_bin out" "$@"

need_root
install_missing gcc time
copy_lockscope "$lockscope_bin" "$out"
data="$REPO_DIR/profiler/tests/data"
cc -O2 -pthread -shared -fPIC -DCOPY=host_copy -o "$out/libtargetlib.so" "$data/targetlib.c"
cc -O2 -pthread -o "$out/targets" "$data/targets.c" -L"$out" -ltargetlib -Wl,-rpath,"$out"
environment_start "$out/environment.txt" "$processes processes x $threads threads for $seconds s, probes $probes"

fleet=
cleanup() {
    [ -n "$fleet" ] && pkill -KILL -P "$fleet" 2>/dev/null
    [ -n "$fleet" ] && kill -KILL "$fleet" 2>/dev/null
    return 0
}
trap cleanup EXIT
mkfifo "$out/go"
"$out/targets" fleet "$processes" "$threads" "$seconds" <"$out/go" >"$out/fleet.pid" &
fleet=$!
exec 3>"$out/go"
/usr/bin/time -v -o "$out/record.time" "$LOCKSCOPE" record -p "$fleet" --tree --probes "$probes" \
    -o "$out/scale.lsp" 2>"$out/record.err" &
timer=$!
wait_for 60 grep -q "^lockscope: recording " "$out/record.err" || die "lockscope did not start: $(cat "$out/record.err")"
echo go >&3
exec 3>&-
wait "$fleet" || true
fleet=
wait "$timer" || true
environment_end "$out/environment.txt"
user=$(time_field "$out/record.time" "User time (seconds)")
sys=$(time_field "$out/record.time" "System time (seconds)")
rss=$(time_field "$out/record.time" "Maximum resident set size (kbytes)")
{
    tail -1 "$out/record.err"
    "$LOCKSCOPE" report "$out/scale.lsp" --top 1 | sed -n '1,11p'
    echo "recorder: ${user} s user + ${sys} s system CPU over the run, ${rss} kB peak RSS"
} | tee "$out/summary.md"
echo "results in $out" >&2
