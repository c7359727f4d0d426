# Shared helpers of the workload scripts: sourced, never run. Debian 12, as root.
#
# Every server runs by hand (no systemd) on loopback, with its state under
# $LOCKSCOPE_WORKLOAD_DIR (default /tmp/lockscope-workloads): data directory, socket, pid file and
# log, so nothing touches the system's own instances.

: "${LOCKSCOPE_WORKLOAD_DIR:=/tmp/lockscope-workloads}"
WORKLOADS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$WORKLOADS_DIR/../.." && pwd)"

log() { echo "$(basename "$0"): $*" >&2; }
die() {
    log "error: $*"
    exit 1
}

need_root() {
    [ "$(id -u)" -eq 0 ] || die "must run as root (installs packages, starts servers, loads BPF)"
}

# Installs the Debian packages in "$@" that are missing, without letting their maintainer scripts
# start services (a policy-rc.d that denies every start, only for the time of the install).
install_missing() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    need_root
    log "installing ${missing[*]}"
    local policy=/usr/sbin/policy-rc.d added_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# lockscope workloads: no service starts during install\nexit 101\n' >"$policy"
        chmod +x "$policy"
        added_policy=1
    fi
    local rc=0
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; } || rc=$?
    [ -n "$added_policy" ] && rm -f "$policy"
    [ $rc -eq 0 ] || die "apt-get install ${missing[*]} failed"
}

# True while the process in pid file "$1" is alive.
pidfile_alive() {
    [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

# Waits up to "$1" seconds for the command "${@:2}" to succeed.
wait_for() {
    local seconds=$1
    shift
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.2
    done
}

# Prints the pid in pid file "$1", or exits with status 1 when that process is not running.
print_pid() {
    pidfile_alive "$1" || exit 1
    cat "$1"
}

# Prints the script's usage (its header comment, up to `set -euo pipefail`) on stderr and exits
# with status 2.
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

# Sends TERM to the process in pid file "$1", waits up to "$2" seconds, then KILLs it.
stop_pidfile() {
    local pidfile=$1 seconds=${2:-30} pid
    [ -s "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        local deadline=$((SECONDS + seconds))
        while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
            log "pid $pid ignored SIGTERM for ${seconds}s: killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$pidfile"
}

# Sets variables from the "--NAME VALUE" pairs "${@:2}": each word of "$1" is an option NAME,
# whose variable is NAME with dashes as underscores, or NAME=VARIABLE. Any other argument, or an
# option without its value, is a usage error that points at the script's header.
parse_options() {
    local spec=$1 word option var
    shift
    while [ $# -gt 0 ]; do
        option=${1#--}
        var=
        if [ "$option" != "$1" ]; then
            for word in $spec; do
                case "$word" in
                "$option") var=${option//-/_} ;;
                "$option="*) var=${word#*=} ;;
                esac
            done
        fi
        [ -n "$var" ] || die "unknown argument $1 (see the header of $0)"
        [ $# -ge 2 ] || die "$1 needs a value (see the header of $0)"
        printf -v "$var" '%s' "$2"
        shift 2
    done
}

# The lockscope binary the scripts run unless told otherwise (--lockscope BIN).
# shellcheck disable=SC2034 # for the scripts that source this file
LOCKSCOPE_RELEASE="$REPO_DIR/target/release/lockscope"

# Fails unless "$1" is a lockscope binary that can run.
need_lockscope() {
    [ -x "$1" ] || die "no lockscope at $1: cargo build --release -p lockscope"
}

# Copies the lockscope binary "$1" into directory "$2" (created) and names the copy LOCKSCOPE:
# a rebuild while the script runs changes nothing.
copy_lockscope() {
    need_lockscope "$1"
    mkdir -p "$2"
    LOCKSCOPE="$2/lockscope"
    cp "$1" "$LOCKSCOPE"
}

# Writes the date, the kernel and the CPUs to file "$1", then the lines "${@:2}", then the load
# average at the start of the run; environment_end adds the load average at its end.
environment_start() {
    local file=$1
    shift
    {
        echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -sr), $(nproc) CPUs"
        [ $# -eq 0 ] || printf '%s\n' "$@"
        echo "load average at start: $(cat /proc/loadavg)"
        # With autogroups on, each session is weighed as a group: a build in another session
        # (even SCHED_IDLE or niced) takes up to its share of the CPUs from the benchmark.
        echo "kernel.sched_autogroup_enabled: $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo absent)"
    } >"$file"
}
environment_end() {
    echo "load average at end: $(cat /proc/loadavg)" >>"$1"
}

# Sets MARIADB to mariadb.sh for a server of the script's own: on port "$1", with its state in a
# new temporary directory /tmp/"$2".XXXXXX (LOCKSCOPE_WORKLOAD_DIR, for the caller's cleanup to
# remove).
private_mariadb() {
    export MARIADB_PORT=$1
    LOCKSCOPE_WORKLOAD_DIR=$(mktemp -d "/tmp/$2.XXXXXX")
    export LOCKSCOPE_WORKLOAD_DIR
    # shellcheck disable=SC2034 # for the scripts that source this file
    MARIADB="$WORKLOADS_DIR/mariadb.sh"
}

# The value of field "$2" in the `/usr/bin/time -v` output file "$1".
time_field() {
    sed -n "s/^[[:space:]]*$2: //p" "$1"
}

# After a recording whose stderr is in file "$2": prints the recorder's summary line, then
# `lockscope why` of profile "$3" by the lockscope binary "$1" (a lockscope without `why` says so
# and the script goes on).
print_why() {
    grep -E "^lockscope: wrote" "$2" || true
    echo
    echo "lockscope why $3:"
    "$1" why "$3" || log "lockscope why failed (does this lockscope have it?)"
}

# BPF statistics (kernel.bpf_stats_enabled): on for the rest of the script, restored at its exit.
bpf_stats_on() {
    command -v bpftool >/dev/null || install_missing bpftool
    BPF_STATS_BEFORE=$(sysctl -n kernel.bpf_stats_enabled)
    trap 'sysctl -qw kernel.bpf_stats_enabled="$BPF_STATS_BEFORE"' EXIT
    sysctl -qw kernel.bpf_stats_enabled=1
}

# Writes bpftool's JSON listing of the loaded BPF programs to file "$1".
bpf_programs() {
    bpftool prog show -j >"$1"
}

# Runs "${@:3}" and writes to "$2" the BPF programs loaded since listing "$1" (bpf_programs), as
# bpftool showed them last before any of them was unloaded: their run counts and run times
# (with bpf_stats_on) then cover all the command did. Exits with the command's status.
run_with_bpf_stats() {
    python3 - "$@" <<'PY'
import json, subprocess, sys, time

def listing():
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
    try:
        return {p["id"]: p for p in json.loads(out.stdout)}
    except ValueError:
        return None

before = {p["id"] for p in json.load(open(sys.argv[1]))}
child = subprocess.Popen(sys.argv[3:])
seen, last = set(), {}
while child.poll() is None:
    now = listing()
    if now is not None:
        new = {i: p for i, p in now.items() if i not in before}
        if seen <= set(new):
            seen |= set(new)
            last = new
    time.sleep(0.05)
json.dump(list(last.values()), open(sys.argv[2], "w"))
sys.exit(child.returncode)
PY
}

# Where the futex probe finds the per-syscall tracepoints (then it uses them), or "none".
tracefs_state() {
    local dir
    for dir in /sys/kernel/tracing /sys/kernel/debug/tracing; do
        [ -d "$dir/events/syscalls" ] && { echo "$dir (per-syscall tracepoints)"; return; }
    done
    echo "none (generic sys_enter/sys_exit hooks)"
}

# The median of the numbers in "$@" (the lower of the two middle ones for an even count).
median() { printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p"; }
