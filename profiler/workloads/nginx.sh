#!/usr/bin/env bash
# An nginx started by hand on 127.0.0.1 serving one small static page, with its own prefix,
# configuration, pid file and logs, for recording under lockscope. Debian 12, as root; installs
# nginx and apache2-utils (ab) if missing.
#
#   nginx.sh start                    write the prefix and start nginx on 127.0.0.1:$NGINX_PORT
#   nginx.sh run CONCURRENCY SECS     ab -k at that concurrency for that long; prints ab's output
#   nginx.sh rps CONCURRENCY SECS     the same, printing only the requests per second
#   nginx.sh pid                      the pid of the nginx process (non-zero exit when not running)
#   nginx.sh stop                     stop the nginx it started
#   nginx.sh clean                    stop, then delete the prefix
#
# One process serves everything (master_process off, daemon off): `lockscope record -p` then sees
# the worker and its thread pool. Static files are read through `aio threads`, so the thread
# pool's threads wait on a condition variable (futex) between tasks: waits under nginx's own
# functions. start and stop are idempotent.
# Settings (environment): NGINX_PORT (8081), LOCKSCOPE_WORKLOAD_DIR (/tmp/lockscope-workloads;
# the prefix is its nginx/).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${NGINX_PORT:=8081}"
PREFIX="$LOCKSCOPE_WORKLOAD_DIR/nginx"
PIDFILE="$PREFIX/nginx.pid"
URL="http://127.0.0.1:$NGINX_PORT/"

write_prefix() {
    mkdir -p "$PREFIX/html" "$PREFIX/logs" "$PREFIX/tmp"
    cat >"$PREFIX/html/index.html" <<'HTML'
<!DOCTYPE html>
<html><head><title>lockscope</title></head>
<body><p>A small static page served by nginx for lockscope's workload tests.</p></body></html>
HTML
    cat >"$PREFIX/nginx.conf" <<CONF
# Written by profiler/workloads/nginx.sh: one process on loopback, its own prefix.
daemon off;
master_process off;
worker_processes 1;
pid $PIDFILE;
error_log $PREFIX/logs/error.log warn;
thread_pool lockscope threads=4 max_queue=65536;
events {
    worker_connections 4096;
}
http {
    access_log off;
    client_body_temp_path $PREFIX/tmp/body;
    proxy_temp_path $PREFIX/tmp/proxy;
    fastcgi_temp_path $PREFIX/tmp/fastcgi;
    uwsgi_temp_path $PREFIX/tmp/uwsgi;
    scgi_temp_path $PREFIX/tmp/scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $PREFIX/html;
        sendfile off;
        aio threads=lockscope;
        location / {
            index index.html;
        }
    }
}
CONF
}

start() {
    need_root
    install_missing nginx apache2-utils
    if pidfile_alive "$PIDFILE"; then
        log "nginx already running (pid $(cat "$PIDFILE")) on $URL"
        return 0
    fi
    write_prefix
    nginx -t -q -p "$PREFIX" -c "$PREFIX/nginx.conf" || die "nginx rejects $PREFIX/nginx.conf"
    trap 'stop_pidfile "$PIDFILE" 10' EXIT
    log "starting nginx on $URL (prefix $PREFIX)"
    setsid nginx -p "$PREFIX" -c "$PREFIX/nginx.conf" </dev/null >>"$PREFIX/logs/stdout.log" 2>&1 &
    echo $! >"$PIDFILE"
    wait_for 20 curl_free_probe || die "nginx did not answer within 20 s: see $PREFIX/logs/error.log"
    trap - EXIT
    log "ready: pid $(cat "$PIDFILE"), $URL"
}

# One request with ab itself (curl is not a dependency).
curl_free_probe() {
    ab -q -n 1 "$URL" | grep -q '^Complete requests: *1$'
}

run() {
    local concurrency=${1:?usage: nginx.sh run CONCURRENCY SECONDS} seconds=${2:?usage: nginx.sh run CONCURRENCY SECONDS}
    pidfile_alive "$PIDFILE" || die "nginx is not running: nginx.sh start first"
    # -n caps -t's default of 50000 requests, so the run lasts the given time.
    ab -q -k -c "$concurrency" -t "$seconds" -n 100000000 "$URL"
}

case "${1:-}" in
start) start ;;
run) run "${2:-}" "${3:-}" ;;
rps)
    out=$(run "${2:-}" "${3:-}")
    rps=$(sed -n 's/^Requests per second: *\([0-9.]*\) .*/\1/p' <<<"$out")
    [ -n "$rps" ] || die "no requests per second in ab's output: $out"
    echo "$rps"
    ;;
pid) print_pid "$PIDFILE" ;;
stop) stop_pidfile "$PIDFILE" 10 ;;
clean)
    stop_pidfile "$PIDFILE" 10
    rm -rf "$PREFIX"
    ;;
*) usage ;;
esac
