#!/usr/bin/env bash
# A MariaDB server started by hand on 127.0.0.1 with sysbench's oltp_read_only tables, for
# recording under lockscope. Debian 12, as root; installs mariadb-server and sysbench if missing.
#
#   mariadb.sh start            install-db into its own datadir (first time), start mariadbd on
#                               127.0.0.1:$MARIADB_PORT, create the sysbench user and prepare
#                               $MARIADB_TABLES tables x $MARIADB_TABLE_SIZE rows (first time)
#   mariadb.sh run THREADS SECS sysbench oltp_read_only; prints sysbench's output
#   mariadb.sh tps THREADS SECS the same, printing only the transactions per second
#   mariadb.sh pid              the pid of mariadbd (non-zero exit when it is not running)
#   mariadb.sh connection-tids [USER]  the thread ids (TID) of the server threads serving client
#                               connections now (only USER's, e.g. sbtest), one per line
#   mariadb.sh stop             stop the server it started (the data directory stays)
#   mariadb.sh clean            stop, then delete the data directory
#
# start and stop are idempotent. A start that fails half-way stops the server it started.
# Settings (environment): MARIADB_PORT (3307), MARIADB_TABLES (4), MARIADB_TABLE_SIZE (20000),
# LOCKSCOPE_WORKLOAD_DIR (/tmp/lockscope-workloads; the state goes under its mariadb/).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${MARIADB_PORT:=3307}"
: "${MARIADB_TABLES:=4}"
: "${MARIADB_TABLE_SIZE:=20000}"
STATE="$LOCKSCOPE_WORKLOAD_DIR/mariadb"
DATADIR="$STATE/data"
SOCKET="$STATE/mariadb.sock"
PIDFILE="$STATE/mariadbd.pid"
LOGFILE="$STATE/mariadbd.log"
PREPARED="$STATE/prepared-${MARIADB_TABLES}x${MARIADB_TABLE_SIZE}"
SB_USER=sbtest
SB_PASSWORD=sbtest

sysbench_args() {
    echo oltp_read_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$MARIADB_PORT" \
        --mysql-user="$SB_USER" --mysql-password="$SB_PASSWORD" --mysql-db=sbtest \
        --tables="$MARIADB_TABLES" --table-size="$MARIADB_TABLE_SIZE"
}

admin_sql() {
    mariadb --no-defaults --socket="$SOCKET" -uroot -e "$1"
}

start() {
    need_root
    install_missing mariadb-server sysbench
    mkdir -p "$STATE"
    if pidfile_alive "$PIDFILE"; then
        log "mariadbd already running (pid $(cat "$PIDFILE")) on 127.0.0.1:$MARIADB_PORT"
    else
        if [ ! -d "$DATADIR/mysql" ]; then
            rm -rf "$DATADIR" "$STATE"/prepared-*
            log "creating the data directory $DATADIR"
            mariadb-install-db --no-defaults --datadir="$DATADIR" --user=root \
                --auth-root-authentication-method=normal --skip-test-db >"$STATE/install-db.log" 2>&1 ||
                die "mariadb-install-db failed: see $STATE/install-db.log"
        fi
        # Until the server is up and prepared, a failure stops it again: nothing is left behind.
        trap 'stop_pidfile "$PIDFILE" 30' EXIT
        log "starting mariadbd on 127.0.0.1:$MARIADB_PORT (log $LOGFILE)"
        setsid mariadbd --no-defaults --datadir="$DATADIR" --socket="$SOCKET" \
            --port="$MARIADB_PORT" --bind-address=127.0.0.1 --pid-file="$PIDFILE" \
            --log-error="$LOGFILE" --user=root --skip-log-bin --max-connections=500 \
            </dev/null >>"$LOGFILE" 2>&1 &
        echo $! >"$PIDFILE"
        wait_for 60 mariadb-admin --no-defaults --socket="$SOCKET" -uroot ping ||
            die "mariadbd did not answer within 60 s: see $LOGFILE"
    fi
    if [ ! -e "$PREPARED" ]; then
        trap 'stop_pidfile "$PIDFILE" 30' EXIT
        admin_sql "CREATE DATABASE IF NOT EXISTS sbtest;
            CREATE USER IF NOT EXISTS '$SB_USER'@'127.0.0.1' IDENTIFIED BY '$SB_PASSWORD';
            GRANT ALL ON sbtest.* TO '$SB_USER'@'127.0.0.1';"
        log "preparing oltp_read_only: $MARIADB_TABLES tables x $MARIADB_TABLE_SIZE rows"
        # shellcheck disable=SC2046
        sysbench $(sysbench_args) cleanup >/dev/null
        # shellcheck disable=SC2046
        sysbench $(sysbench_args) --threads="$MARIADB_TABLES" prepare >"$STATE/prepare.log" ||
            die "sysbench prepare failed: see $STATE/prepare.log"
        touch "$PREPARED"
    fi
    trap - EXIT
    log "ready: pid $(cat "$PIDFILE"), 127.0.0.1:$MARIADB_PORT, socket $SOCKET"
}

run() {
    local threads=${1:?usage: mariadb.sh run THREADS SECONDS} seconds=${2:?usage: mariadb.sh run THREADS SECONDS}
    pidfile_alive "$PIDFILE" || die "mariadbd is not running: mariadb.sh start first"
    [ -e "$PREPARED" ] || die "the sysbench tables are not prepared: mariadb.sh start first"
    # shellcheck disable=SC2046
    sysbench $(sysbench_args) --threads="$threads" --time="$seconds" --report-interval=0 run
}

case "${1:-}" in
start) start ;;
run) run "${2:-}" "${3:-}" ;;
tps)
    out=$(run "${2:-}" "${3:-}")
    tps=$(sed -n 's/^ *transactions: .*(\([0-9.]*\) per sec.)/\1/p' <<<"$out")
    [ -n "$tps" ] || die "no TPS in sysbench's output: $out"
    echo "$tps"
    ;;
pid) print_pid "$PIDFILE" ;;
connection-tids)
    pidfile_alive "$PIDFILE" || die "mariadbd is not running"
    mariadb --no-defaults --socket="$SOCKET" -uroot --batch --skip-column-names \
        -e "SELECT TID FROM information_schema.PROCESSLIST
            WHERE COMMAND <> 'Daemon' AND USER LIKE '${2:-%}' ORDER BY TID"
    ;;
stop) stop_pidfile "$PIDFILE" 60 ;;
clean)
    stop_pidfile "$PIDFILE" 60
    rm -rf "$STATE"
    ;;
*) usage ;;
esac
