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
