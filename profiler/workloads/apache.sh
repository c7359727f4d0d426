#!/usr/bin/env bash
# An Apache httpd 2.4 started by hand on 127.0.0.1 serving one small static page, with its own
# configuration, pid file and logs, for recording under lockscope. Debian 12, as root; installs
# apache2 and apache2-utils (ab) if missing.
#
#   apache.sh start [event|prefork]   write the configuration and start httpd (mpm_event, the
#                                     default, or mpm_prefork) on 127.0.0.1:$APACHE_PORT
#   apache.sh command [event|prefork] write the configuration and print the command line that
#                                     runs httpd in the foreground (for `lockscope record --` and
#                                     `lockscope sweep --server`); starts nothing
#   apache.sh run CONCURRENCY SECS    ab at that concurrency for that long; prints ab's output
#   apache.sh rps CONCURRENCY SECS    the same, printing only the requests per second
#   apache.sh pid                     the pid of httpd's parent (non-zero exit when not running)
#   apache.sh processes               the pids of httpd's parent and its children, one a line
#   apache.sh cgroup                  the cgroup (v2) path httpd runs in (APACHE_CGROUP)
#   apache.sh stop                    stop the httpd it started
#   apache.sh clean                   stop, then delete the configuration and logs
#
# httpd is many processes: a parent (as root) that forks the children (as www-data) serving the
# requests, 2 of 25 threads each with mpm_event, 5 or more single-threaded ones with
# mpm_prefork. `lockscope record -p $(apache.sh pid)` alone sees the parent's select(); the
# children are recorded with `-p PID --tree`, `--cgroup $(apache.sh cgroup)` or `-a`. ab opens a
# connection per request (no -k), as the seed's measurements did. start and stop are idempotent.
# Settings (environment): APACHE_PORT (8082), APACHE_CGROUP (lockscope-workloads/apache2.service:
# httpd is started in this cgroup of the v2 hierarchy, created if missing, as systemd runs a
# service; empty: in the caller's), LOCKSCOPE_WORKLOAD_DIR (/tmp/lockscope-workloads; the
# configuration is its apache/).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${APACHE_PORT:=8082}"
: "${APACHE_CGROUP=lockscope-workloads/apache2.service}"
PREFIX="$LOCKSCOPE_WORKLOAD_DIR/apache"
PIDFILE="$PREFIX/httpd.pid"
URL="http://127.0.0.1:$APACHE_PORT/index.html"
MODULES=/usr/lib/apache2/modules

write_config() {
    local mpm=${1:-event}
    case "$mpm" in
    event | prefork) ;;
    *) die "unknown MPM $mpm: event or prefork" ;;
    esac
    mkdir -p "$PREFIX/html" "$PREFIX/logs" "$PREFIX/run"
    chmod 755 "$PREFIX" "$PREFIX/html"
    cat >"$PREFIX/html/index.html" <<'HTML'
<!DOCTYPE html>
<html><head><title>lockscope</title></head>
<body><p>A small static page served by Apache httpd for lockscope's workload tests.</p></body></html>
HTML
    chmod 644 "$PREFIX/html/index.html"
    cat >"$PREFIX/httpd.conf" <<CONF
# Written by profiler/workloads/apache.sh: httpd on loopback with mpm_$mpm, its own files.
ServerRoot $PREFIX
ServerName 127.0.0.1
Listen 127.0.0.1:$APACHE_PORT
PidFile $PIDFILE
DefaultRuntimeDir $PREFIX/run
Mutex file:$PREFIX/run default
ErrorLog $PREFIX/logs/error.log
LogLevel warn
User www-data
Group www-data
LoadModule mpm_${mpm}_module $MODULES/mod_mpm_$mpm.so
LoadModule authz_core_module $MODULES/mod_authz_core.so
LoadModule mime_module $MODULES/mod_mime.so
TypesConfig /etc/mime.types
DocumentRoot $PREFIX/html
<Directory $PREFIX/html>
    Require all granted
</Directory>
# Apache's defaults (Debian's mpm_*.conf), the ones the seed's runs had.
<IfModule mpm_event_module>
    StartServers 2
    MinSpareThreads 25
    MaxSpareThreads 75
    ThreadLimit 64
    ThreadsPerChild 25
    MaxRequestWorkers 150
    MaxConnectionsPerChild 0
</IfModule>
<IfModule mpm_prefork_module>
    StartServers 5
    MinSpareServers 5
    MaxSpareServers 10
    MaxRequestWorkers 150
    MaxConnectionsPerChild 0
</IfModule>
CONF
}

# The command line that runs httpd in the foreground, one word a line.
foreground_command() {
    printf '%s\n' /usr/sbin/apache2 -f "$PREFIX/httpd.conf" -DFOREGROUND
}

# The v2 hierarchy's mount point.
cgroup2_root() {
    awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo
}

start() {
    need_root
    install_missing apache2 apache2-utils
    if pidfile_alive "$PIDFILE"; then
        log "httpd already running (pid $(cat "$PIDFILE")) on $URL"
        return 0
    fi
    write_config "${1:-event}"
    mapfile -t command < <(foreground_command)
    "${command[0]}" -t -f "$PREFIX/httpd.conf" 2>/dev/null || die "httpd rejects $PREFIX/httpd.conf"
    local procs=
    if [ -n "$APACHE_CGROUP" ]; then
        local root
        root=$(cgroup2_root)
        [ -n "$root" ] || die "no cgroup v2 hierarchy mounted: set APACHE_CGROUP= to start in this cgroup"
        mkdir -p "$root/$APACHE_CGROUP"
        procs="$root/$APACHE_CGROUP/cgroup.procs"
    fi
    trap 'stop_pidfile "$PIDFILE" 10' EXIT
    log "starting httpd (mpm_${1:-event}) on $URL${APACHE_CGROUP:+ in cgroup /$APACHE_CGROUP}"
    # The shell moves itself into the cgroup, then becomes httpd: every process of httpd starts
    # there, as under systemd.
    # shellcheck disable=SC2016 # expanded by the inner shell
    setsid sh -c '[ -z "$1" ] || echo $$ >"$1"; shift; exec "$@"' sh "$procs" "${command[@]}" \
        </dev/null >>"$PREFIX/logs/stdout.log" 2>&1 &
    wait_for 20 probe || die "httpd did not answer within 20 s: see $PREFIX/logs/error.log"
    trap - EXIT
    log "ready: pid $(cat "$PIDFILE"), $(processes | wc -l) processes, $URL"
}

# One request with ab itself (curl is not a dependency).
probe() {
    ab -q -n 1 "$URL" | grep -q '^Complete requests: *1$'
}

# httpd's parent and its children.
processes() {
    local parent
    parent=$(print_pid "$PIDFILE") || return 1
    echo "$parent"
    ps -o pid= --ppid "$parent" | tr -d ' '
}

run() {
    local concurrency=${1:?usage: apache.sh run CONCURRENCY SECONDS} seconds=${2:?usage: apache.sh run CONCURRENCY SECONDS}
    pidfile_alive "$PIDFILE" || die "httpd is not running: apache.sh start first"
    # -n caps -t's default of 50000 requests, so the run lasts the given time.
    ab -q -c "$concurrency" -t "$seconds" -n 100000000 "$URL"
}

case "${1:-}" in
start) start "${2:-event}" ;;
command)
    write_config "${2:-event}"
    foreground_command | paste -sd' '
    ;;
run) run "${2:-}" "${3:-}" ;;
rps)
    out=$(run "${2:-}" "${3:-}")
    rps=$(sed -n 's/^Requests per second: *\([0-9.]*\) .*/\1/p' <<<"$out")
    [ -n "$rps" ] || die "no requests per second in ab's output: $out"
    echo "$rps"
    ;;
pid) print_pid "$PIDFILE" ;;
processes) processes ;;
cgroup)
    [ -n "$APACHE_CGROUP" ] || die "APACHE_CGROUP is empty: httpd runs in its caller's cgroup"
    echo "/$APACHE_CGROUP"
    ;;
stop) stop_pidfile "$PIDFILE" 10 ;;
clean)
    stop_pidfile "$PIDFILE" 10
    rm -rf "$PREFIX"
    if [ -n "$APACHE_CGROUP" ] && root=$(cgroup2_root) && [ -d "$root/$APACHE_CGROUP" ]; then
        rmdir "$root/$APACHE_CGROUP" 2>/dev/null || true
    fi
    ;;
*) usage ;;
esac
