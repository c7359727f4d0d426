#!/usr/bin/env bash
# A private PostgreSQL 15 cluster on a Unix socket (no TCP) whose pgbench clients all update one
# row: every transaction queues for that row's lock, and PostgreSQL's lock manager puts each
# waiting backend to sleep in epoll_wait (WaitLatch under ProcSleep) until the holder sets its
# latch. Debian 12, as root; installs postgresql-15 if missing. The server runs as the
# `postgres` user (it refuses root); lockscope launches it (`record -- $(postgres.sh command)`)
# so that the backends it forks are recorded with it.
#
#   postgres.sh init                 initdb into its own data directory and pgbench -i (scale 1)
#   postgres.sh command              print the command that runs the server in the foreground
#   postgres.sh ready                wait until the server accepts connections (30 s at most)
#   postgres.sh run CLIENTS SECS     pgbench, every client updating row 1; prints pgbench's output
#   postgres.sh sample SECS          every 100 ms for SECS, the wait event of each pgbench backend
#                                    (pg_stat_activity), then one `COUNT EVENT` line per event
#   postgres.sh stop                 stop the server (fast shutdown)
#   postgres.sh clean                stop, then delete the cluster
#
# Settings (environment): POSTGRES_PORT (5433, the socket's name), LOCKSCOPE_WORKLOAD_DIR
# (/tmp/lockscope-workloads; the cluster goes under its postgres/).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${POSTGRES_PORT:=5433}"
BIN=/usr/lib/postgresql/15/bin
STATE="$LOCKSCOPE_WORKLOAD_DIR/postgres"
DATA="$STATE/data"
SOCKET_DIR="$STATE/socket"
SCRIPT="$STATE/one-row.sql"

as_postgres() {
    setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
}

psql_args() {
    echo -h "$SOCKET_DIR" -p "$POSTGRES_PORT" -U postgres
}

server_args() {
    echo -D "$DATA" -p "$POSTGRES_PORT" -k "$SOCKET_DIR" -c listen_addresses= -c max_connections=100
}

init() {
    need_root
    install_missing postgresql-15
    [ -f "$DATA/PG_VERSION" ] && [ -f "$SCRIPT" ] && return 0
    rm -rf "$STATE"
    mkdir -p "$DATA" "$SOCKET_DIR"
    chown -R postgres:postgres "$STATE"
    log "creating the cluster in $DATA"
    as_postgres "$BIN/initdb" -D "$DATA" -A trust -U postgres >"$STATE/initdb.log" 2>&1 ||
        die "initdb failed: see $STATE/initdb.log"
    trap 'as_postgres "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true' EXIT
    # shellcheck disable=SC2046 # word splitting of the argument lists is meant
    as_postgres "$BIN/pg_ctl" -D "$DATA" -o "$(server_args | cut -d' ' -f3-)" -l "$STATE/init.log" -w start >/dev/null ||
        die "the server did not start: see $STATE/init.log"
    # shellcheck disable=SC2046
    as_postgres "$BIN/pgbench" $(psql_args) -i -s 1 postgres >"$STATE/pgbench-init.log" 2>&1 ||
        die "pgbench -i failed: see $STATE/pgbench-init.log"
    as_postgres "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
    trap - EXIT
    echo 'UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1;' >"$SCRIPT"
    chown postgres "$SCRIPT"
}

ready() {
    # shellcheck disable=SC2046
    wait_for 30 "$BIN/pg_isready" $(psql_args) -q || die "the server does not accept connections"
}

run() {
    local clients=$1 seconds=$2
    # shellcheck disable=SC2046
    as_postgres "$BIN/pgbench" $(psql_args) -n -c "$clients" -j 2 -T "$seconds" -f "$SCRIPT" postgres
}

sample() {
    local seconds=$1 i samples
    samples=$(mktemp)
    for ((i = 0; i < seconds * 10; i++)); do
        # shellcheck disable=SC2046
        as_postgres "$BIN/psql" $(psql_args) -Atc "select coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, '-') from pg_stat_activity where application_name = 'pgbench'" postgres >>"$samples" 2>/dev/null || true
        sleep 0.1
    done
    sort "$samples" | uniq -c | sort -rn | awk '{print $1, $2}'
    rm -f "$samples"
}

stop() {
    [ -f "$DATA/postmaster.pid" ] || return 0
    as_postgres "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
}

case "${1:-}" in
init) init ;;
command) echo setpriv --reuid=postgres --regid=postgres --init-groups -- "$BIN/postgres" "$(server_args)" ;;
ready) ready ;;
run) [ $# -eq 3 ] || usage; run "$2" "$3" ;;
sample) [ $# -eq 2 ] || usage; sample "$2" ;;
stop) stop ;;
clean) stop; rm -rf "$STATE" ;;
*) usage ;;
esac
