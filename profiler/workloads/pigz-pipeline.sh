#!/usr/bin/env bash
# pigz (Debian's parallel gzip, neither lockscope's nor its tests') as a known-answer workload of
# the pipeline class: its reading thread hands blocks to compressing threads and its writing
# thread waits on a condition variable (pigz's yarn library, over pthreads) for each block to be
# compressed, in order; the compressing threads are busy in zlib's deflate on the CPUs. The
# truth, by experiment:
#   true cause:   the compression's CPU work. Its cost at about 1/2: a lighter level (the level
#                 whose single-threaded CPU time on this input is closest to half the baseline
#                 level's, measured here first).
#   naive answer: the writer's (and reader's) condvar wait, the busiest wait: its cost at 1/2,
#                 blocks twice as large (-b), half the hand-offs and waits per megabyte.
# Debian 12, as root (installs pigz if missing); no network, bounded in time.
#
#   pigz-pipeline.sh [--threads 2] [--level 9] [--megabytes 96] [--repetitions 5]
#                    [--record FILE.lsp] [--lockscope BIN] [--probes bottleneck]
#
# Prints each run's throughput (MB/s of input), the medians, and the medians of each round's
# gains over its own baseline. The input is the
# first MEGABYTES of a tar of /usr/share/doc, /usr/share/man and /usr/lib/x86_64-linux-gnu (text
# and binaries, 2.6:1 or so at level 9). With --record, also records the baseline under
# `lockscope record --probes PROBES` and prints `lockscope why FILE`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

threads=2
level=9
megabytes=96
repetitions=5
record=
lockscope_bin=$LOCKSCOPE_RELEASE
probes=bottleneck
parse_options "threads level megabytes repetitions record lockscope=lockscope_bin probes" "$@"
install_missing pigz
if [ -n "$record" ]; then
    record=$(realpath -m "$record")
    need_lockscope "$lockscope_bin"
fi
STATE=$(mktemp -d /tmp/lockscope-pigz.XXXXXX)
trap 'rm -rf "$STATE"' EXIT
INPUT="$STATE/input"
tar -cf - /usr/share/doc /usr/share/man /usr/lib/x86_64-linux-gnu 2>/dev/null |
    head -c "$((megabytes << 20))" >"$INPUT" || true
size=$(stat -c %s "$INPUT")
[ "$size" -gt 0 ] || die "no input could be made"

# Runs pigz with "$@" on the input; prints "WALL USER+SYS" (seconds).
timed_pigz() {
    local TIMEFORMAT='%R %U %S' out wall user sys
    out=$({ time pigz "$@" -c "$INPUT" >/dev/null; } 2>&1)
    read -r wall user sys <<<"$out"
    echo "$wall $(calc "$user + $sys")"
}
# Prints the value of awk expression "$1" (awk rather than bc: every Debian has it).
calc() { awk "BEGIN { print $1 }"; }
mb_per_s() { calc "int($size / 1048576 / $1 * 10 + 0.5) / 10"; }
ratio() { calc "int($1 / $2 * 100 + 0.5) / 100"; }

echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -sr), $(nproc) CPUs, $(pigz --version 2>&1)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "input: $((size >> 20)) MiB; pigz -p $threads -$level is the baseline"

# The compression's CPU cost per level, single-threaded (-p 1: no hand-offs at all).
echo
echo "CPU time of the compression alone (pigz -p 1), per level:"
declare -A cpu
for l in $(seq 1 "$level"); do
    read -r _ seconds <<<"$(timed_pigz -p 1 "-$l")"
    cpu[$l]=$seconds
    echo "  -$l: ${cpu[$l]} s"
done
light=1
for l in $(seq 1 $((level - 1))); do
    half=$(calc "${cpu[$level]} / 2")
    if [ "$(calc "(${cpu[$l]} - $half)^2 < (${cpu[$light]} - $half)^2")" = 1 ]; then
        light=$l
    fi
done
light_ratio=$(ratio "${cpu[$light]}" "${cpu[$level]}")
echo "  the true cause's cost at about 1/2: -$light ($light_ratio of -$level's CPU time)"
[ "$(calc "$light_ratio >= 0.35 && $light_ratio <= 0.65")" = 1 ] ||
    log "warning: no level costs about half of -$level's CPU time on this input: the true cause's cost is scaled by $light_ratio"

echo
echo "throughput (MB/s of input), interleaved:"
settings=("baseline:-$level" "true cause at 1/2:-$light" "naive answer at 1/2:-$level -b 256")
declare -a runs0 runs1 runs2 gains_true gains_naive
for r in $(seq 1 "$repetitions"); do
    for i in 0 1 2; do
        k=$(((r + i) % 3))
        # shellcheck disable=SC2086 # the setting's words are pigz's options
        read -r wall _ <<<"$(timed_pigz -p "$threads" ${settings[$k]#*:})"
        rate=$(mb_per_s "$wall")
        eval "runs$k+=($rate)"
        echo "  run $r, ${settings[$k]%%:*} (pigz -p $threads ${settings[$k]#*:}): $rate MB/s"
    done
    # The round's gains over its own baseline: a change of load between rounds cancels out.
    gains_true+=("$(ratio "${runs1[-1]}" "${runs0[-1]}")")
    gains_naive+=("$(ratio "${runs2[-1]}" "${runs0[-1]}")")
done
echo
echo "medians of $repetitions rounds: baseline $(median "${runs0[@]}") MB/s, true cause at 1/2" \
    "$(median "${runs1[@]}") MB/s, naive answer at 1/2 $(median "${runs2[@]}") MB/s"
echo "median gains over each round's baseline: true cause at 1/2 x$(median "${gains_true[@]}")" \
    "(rounds: ${gains_true[*]}), naive answer at 1/2 x$(median "${gains_naive[@]}")" \
    "(rounds: ${gains_naive[*]})"

if [ -n "$record" ]; then
    echo
    echo "recorded: $lockscope_bin record --probes $probes -o $record -- pigz -p $threads -$level -c INPUT"
    # lockscope's own messages go to stderr; pigz's output, through lockscope's stdout, nowhere.
    "$lockscope_bin" record --probes "$probes" -o "$record" -- \
        pigz -p "$threads" "-$level" -c "$INPUT" >/dev/null 2>"$STATE/record.log" ||
        die "lockscope record failed: $(cat "$STATE/record.log")"
    print_why "$lockscope_bin" "$STATE/record.log" "$record"
fi
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
