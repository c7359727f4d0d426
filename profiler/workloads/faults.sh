#!/usr/bin/env bash
# Faults during a recording of MariaDB under sysbench, each checked for the outcome lockscope
# promises. Debian 12, as root. Results in docs/RELIABILITY.md.
#
#   faults.sh [--lockscope BIN] [--threads 50] [CASE ...]
#
# Cases (default: all):
#   target-killed     mariadbd is SIGKILLed mid-recording: lockscope ends by itself, exit 0, and
#                     writes a complete profile (frames still named) whose end reason says so
#   lockscope-killed  lockscope is SIGKILLed mid-recording: no BPF program or link of its own is
#                     left in the kernel (bpftool prog/link), no profile or temporary file left
#   full-disk         the profile is written to a full filesystem (a small tmpfs): a one-line
#                     error, exit 1, nothing under the final name and no temporary file left
#
# Each case starts its own MariaDB (port $FAULTS_PORT, default 3309, state under a temporary
# LOCKSCOPE_WORKLOAD_DIR) and stops it, and anything else it started, on exit.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lockscope_bin=$LOCKSCOPE_RELEASE
threads=50
cases=()
while [ $# -gt 0 ]; do
    case "$1" in
    --lockscope) lockscope_bin=$2 && shift ;;
    --threads) threads=$2 && shift ;;
    target-killed | lockscope-killed | full-disk) cases+=("$1") ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
    esac
    shift
done
[ ${#cases[@]} -gt 0 ] || cases=(target-killed lockscope-killed full-disk)

need_root
install_missing mariadb-server sysbench bpftool time
need_lockscope "$lockscope_bin"

private_mariadb "${FAULTS_PORT:-3309}" lockscope-faults
WORK="$LOCKSCOPE_WORKLOAD_DIR/work"
copy_lockscope "$lockscope_bin" "$WORK"

load_pid=
recorder_pid=
small_fs=
cleanup() {
    [ -n "$recorder_pid" ] && kill -KILL "$recorder_pid" 2>/dev/null
    [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null
    "$MARIADB" stop
    if [ -n "$small_fs" ]; then umount "$small_fs" 2>/dev/null || log "could not unmount $small_fs"; fi
    rm -rf "$LOCKSCOPE_WORKLOAD_DIR"
    return 0
}
trap cleanup EXIT

failed=0
pass() { echo "PASS  $1: $2"; }
fail() {
    echo "FAIL  $1: $2"
    failed=1
}

# Starts sysbench for "$1" seconds in the background.
start_load() {
    "$MARIADB" run "$threads" "$1" >"$WORK/sysbench.out" 2>&1 &
    load_pid=$!
}

# Starts `lockscope record -p mariadbd -o "$1" ${@:2}` in the background; returns once it records.
start_recorder() {
    local out=$1
    shift
    # Emptied first: the background job's redirection may come after wait_for's first look.
    : >"$WORK/record.err"
    "$LOCKSCOPE" record -p "$("$MARIADB" pid)" -o "$out" "$@" 2>"$WORK/record.err" &
    recorder_pid=$!
    wait_for 30 grep -q "recording pid" "$WORK/record.err" || die "lockscope did not start: $(cat "$WORK/record.err")"
}

# Ids of lockscope's BPF programs (named lks_*) loaded now, one per line.
lockscope_prog_ids() {
    bpftool prog show | sed -n 's/^\([0-9]*\): .* name lks_.*/\1/p' | sort
}

# The `bpftool prog` and `bpftool link` lines of the programs whose ids are in "$@".
bpf_objects_of() {
    [ $# -gt 0 ] || return 0
    local alternatives
    alternatives=$(IFS='|' && echo "$*")
    bpftool prog show | grep -E "^($alternatives): " || true
    bpftool link show | grep -E "prog ($alternatives)\b" || true
}

case_target_killed() {
    "$MARIADB" start
    local lsp="$WORK/target-killed.lsp" mariadbd status=0
    mariadbd=$("$MARIADB" pid)
    start_load 30
    start_recorder "$lsp"
    sleep 5
    kill -KILL "$mariadbd"
    local killed_at=$SECONDS
    wait "$recorder_pid" || status=$?
    recorder_pid=
    wait "$load_pid" 2>/dev/null || true
    load_pid=
    rm -f "$LOCKSCOPE_WORKLOAD_DIR/mariadb/mariadbd.pid"
    local took=$((SECONDS - killed_at))
    tail -1 "$WORK/record.err"
    [ $status -eq 0 ] && pass target-killed "lockscope exited 0, ${took}s after the kill" ||
        fail target-killed "lockscope exited $status: $(cat "$WORK/record.err")"
    if [ -s "$lsp" ]; then
        local header named
        header=$("$LOCKSCOPE" report "$lsp" --top 1 | sed -n '2,7p')
        echo "$header"
        grep -q "ended: target exited" <<<"$header" &&
            pass target-killed "profile written, end reason: $(sed -n 's/.*ended: //p' <<<"$header")" ||
            fail target-killed "end reason: $header"
        named=$("$LOCKSCOPE" export "$lsp" --format json | grep -c '"module": "mariadbd"' || true)
        [ "$named" -gt 0 ] && pass target-killed "$named mariadbd frames symbolized after the target died" ||
            fail target-killed "no mariadbd frame in the profile"
    else
        fail target-killed "no profile written"
    fi
}

case_lockscope_killed() {
    "$MARIADB" start
    local lsp="$WORK/lockscope-killed.lsp" left before ours
    # Other lockscopes (tests, other users) may be running: only this one's programs count.
    before=$(lockscope_prog_ids)
    start_load 15
    start_recorder "$lsp"
    mapfile -t ours < <(comm -13 <(echo "$before") <(lockscope_prog_ids))
    echo "while recording, this lockscope's programs and links:"
    bpf_objects_of "${ours[@]}" | sed 's/^/  /'
    # Without them the check below would prove nothing.
    [ ${#ours[@]} -gt 0 ] || fail lockscope-killed "no lks_* program of this lockscope seen while recording"
    sleep 3
    kill -KILL "$recorder_pid"
    wait "$recorder_pid" 2>/dev/null || true
    recorder_pid=
    # The kernel releases the links and programs when the last fd closes, with the process; the
    # programs' memory is freed after an RCU grace period, so they may be listed a little longer.
    local killed_at=$SECONDS links_gone=
    while left=$(bpf_objects_of "${ours[@]}") && [ -n "$left" ] && [ $((SECONDS - killed_at)) -lt 60 ]; do
        [ -z "$links_gone" ] && ! grep -q ' prog ' <<<"$left" && links_gone=$((SECONDS - killed_at))
        sleep 0.2
    done
    [ -z "$left" ] && pass lockscope-killed "none of its ${#ours[@]} BPF programs or their links left after SIGKILL (links gone within ${links_gone:-0} s, programs within $((SECONDS - killed_at)) s)" ||
        fail lockscope-killed "left behind 60 s after SIGKILL: $left"
    local files
    files=$(find "$WORK" -name '*lockscope-killed*' -printf '%f ')
    [ -z "$files" ] && pass lockscope-killed "no profile or temporary file left" ||
        fail lockscope-killed "files left: $files"
    local load_status=0
    wait "$load_pid" || load_status=$?
    load_pid=
    [ $load_status -eq 0 ] && grep -q 'transactions:' "$WORK/sysbench.out" &&
        pass lockscope-killed "MariaDB and sysbench ran on undisturbed" ||
        fail lockscope-killed "sysbench failed ($load_status): $(tail -3 "$WORK/sysbench.out")"
}

case_full_disk() {
    "$MARIADB" start
    small_fs="$WORK/small-fs"
    mkdir -p "$small_fs"
    mount -t tmpfs -o size=1m lockscope-full "$small_fs"
    # Fill it: lockscope's start-up check (an empty file) passes, the profile's write fails.
    dd if=/dev/zero of="$small_fs/filler" bs=4k status=none 2>/dev/null || true
    df -h "$small_fs" | tail -1
    local lsp="$small_fs/full-disk.lsp" status=0
    start_load 10
    start_recorder "$lsp" -d 5s
    wait "$recorder_pid" || status=$?
    recorder_pid=
    wait "$load_pid" 2>/dev/null || true
    load_pid=
    local err
    err=$(grep -v '^lockscope: recording pid' "$WORK/record.err" || true)
    echo "stderr: $err"
    [ $status -eq 1 ] && pass full-disk "exit status 1" || fail full-disk "exit status $status"
    [ "$(wc -l <<<"$err")" -eq 1 ] && grep -q "No space left on device" <<<"$err" &&
        pass full-disk "one-line error naming the cause" || fail full-disk "error: $err"
    local files
    files=$(find "$small_fs" -mindepth 1 ! -name filler -printf '%f ')
    [ -z "$files" ] && pass full-disk "nothing under the final name, no temporary file left" ||
        fail full-disk "files left: $files"
    umount "$small_fs"
    small_fs=
}

for c in "${cases[@]}"; do
    echo "== $c"
    "case_${c//-/_}"
    "$MARIADB" stop
done
exit $failed
