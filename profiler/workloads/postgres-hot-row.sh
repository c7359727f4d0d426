#!/usr/bin/env bash
# PostgreSQL 15 under pgbench where every client updates the same row: row-lock contention in a
# process-per-connection server that builds its own locks. Each backend queues in the lock
# manager for the holder's transaction id and sleeps in epoll_wait until the holder sets its
# latch, so no pthread lock and hardly a futex is in sight. The server's own wait-event sampling
# is the independent truth: pg_stat_activity's wait_event_type/wait_event of every pgbench
# backend, sampled every 100 ms while pgbench runs, says what share of the backends' time is
# Lock/transactionid (queueing for the row) and what the rest is (the holder's WAL flush, CPU).
# Debian 12, as root; installs postgresql-15 if missing. Loopback only, bounded in time.
#
#   postgres-hot-row.sh [--clients 16] [--seconds 20] [--port 5440] [--cpus LIST]
#                       [--record FILE.lsp] [--lockscope BIN] [--probes bottleneck]
#
# --cpus pins the server (the postmaster, its processes and every backend it forks) to the CPUs
# of LIST (taskset's syntax: 0, 0-1) for an experiment on what `why` says of the CPUs; pgbench is
# not pinned.
#
# Runs pgbench untraced once and prints its TPS and the sampled wait-event shares. With
# --record, runs it once more under `lockscope record -p POSTMASTER --tree --probes PROBES`
# (every backend, including those forked for pgbench's connections after the attach; this needs
# `record --tree`, which another branch adds) and prints `lockscope why FILE`: the answer to
# compare with the sampled truth. The cluster is private (initdb in a temporary directory, run
# by the postgres user with pg_ctl, on 127.0.0.1:PORT and a socket in that directory), never the
# system's service, and is removed on exit.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

clients=16
seconds=20
port=5440
record=
lockscope_bin=$LOCKSCOPE_RELEASE
probes=bottleneck
cpus=
parse_options "clients seconds port cpus record lockscope=lockscope_bin probes" "$@"
need_root
install_missing postgresql-15
PG_BIN=/usr/lib/postgresql/15/bin
[ -x "$PG_BIN/postgres" ] || die "no PostgreSQL 15 at $PG_BIN"
if [ -n "$record" ]; then
    record=$(realpath -m "$record")
    need_lockscope "$lockscope_bin"
fi

STATE=$(mktemp -d /tmp/lockscope-postgres.XXXXXX)
DATA="$STATE/data"
chown postgres: "$STATE"
as_postgres() { runuser -u postgres -- "$@"; }
psql_admin() { as_postgres "$PG_BIN/psql" -X -q -h "$STATE" -p "$port" -U postgres -d postgres "$@"; }
cleanup() {
    [ -z "${RECORDER:-}" ] || kill "$RECORDER" 2>/dev/null || true
    if [ -s "$DATA/postmaster.pid" ]; then
        as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$STATE"
}
trap cleanup EXIT

log "initdb in $DATA"
as_postgres "$PG_BIN/initdb" -D "$DATA" -U postgres --auth=trust >"$STATE/initdb.log" 2>&1 ||
    die "initdb failed: $(tail -5 "$STATE/initdb.log")"
log "starting postgres on 127.0.0.1:$port"
as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -l "$STATE/postgres.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $STATE -c max_connections=$((clients + 10))" \
    start >/dev/null || die "pg_ctl start failed: $(tail -5 "$STATE/postgres.log")"
POSTMASTER=$(head -1 "$DATA/postmaster.pid")
if [ -n "$cpus" ]; then
    # Its processes now; the backends it forks later inherit the postmaster's affinity.
    for p in "$POSTMASTER" $(pgrep -P "$POSTMASTER"); do
        taskset -a -p -c "$cpus" "$p" >/dev/null
    done
    log "the server pinned to CPUs $cpus"
fi
psql_admin -c "CREATE TABLE hot (id int PRIMARY KEY, n bigint NOT NULL);
    INSERT INTO hot VALUES (1, 0);
    CREATE UNLOGGED TABLE wait_samples (sample int, wait text);"
SCRIPT="$STATE/hot-row.sql"
echo 'UPDATE hot SET n = n + 1 WHERE id = 1;' >"$SCRIPT"
chown postgres: "$SCRIPT"

# Samples every pgbench backend's wait event every 100 ms for "$1" seconds, in the server itself
# (one backend, so the sampling costs no process start per sample); a backend on a CPU has no
# wait event and counts as CPU.
sample_waits() {
    psql_admin -c "TRUNCATE wait_samples;
        DO \$\$ BEGIN
            FOR i IN 1..$(($1 * 10)) LOOP
                PERFORM pg_stat_clear_snapshot();
                INSERT INTO wait_samples
                    SELECT i, coalesce(wait_event_type || '/' || wait_event, 'CPU')
                    FROM pg_stat_activity
                    WHERE application_name = 'pgbench' AND backend_type = 'client backend';
                PERFORM pg_sleep(0.1);
            END LOOP;
        END \$\$;"
}

# Prints the sampled shares of the wait events, most frequent first.
print_samples() {
    psql_admin -At -F ' ' -c "SELECT round(100.0 * count(*) / sum(count(*)) OVER (), 1) || '%',
            wait, count(*) || ' samples'
        FROM wait_samples GROUP BY wait ORDER BY count(*) DESC LIMIT 8;" |
        sed 's/^/  /'
    psql_admin -At -c "SELECT 'share of the pgbench backends'' time in Lock/transactionid: ' ||
        round(100.0 * count(*) FILTER (WHERE wait = 'Lock/transactionid') / count(*), 1) ||
        '%, in any heavyweight lock (Lock/*, the row lock''s queue): ' ||
        round(100.0 * count(*) FILTER (WHERE wait LIKE 'Lock/%') / count(*), 1) || '%'
        FROM wait_samples;"
}

# One pgbench run of "$seconds" with the wait sampler beside it (samples before pgbench's
# backends connect, or after they left, find none of them and count nothing); prints pgbench's
# summary and the samples.
run_pgbench() {
    sample_waits "$seconds" &
    local sampler=$!
    as_postgres "$PG_BIN/pgbench" -n -h 127.0.0.1 -p "$port" -U postgres -c "$clients" -j 2 \
        -T "$seconds" -f "$SCRIPT" postgres >"$STATE/pgbench.out" 2>&1 ||
        die "pgbench failed: $(cat "$STATE/pgbench.out")"
    wait "$sampler"
    grep -E '^(number of clients|duration|number of transactions actually|latency average|tps)' \
        "$STATE/pgbench.out" | sed 's/^/  /'
    echo "pg_stat_activity wait events of the pgbench backends (every 100 ms):"
    print_samples
}

echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -sr), $(nproc) CPUs, $("$PG_BIN/postgres" --version)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "workload: pgbench -c $clients -j 2 -T $seconds, every transaction: $(cat "$SCRIPT")"
echo "server CPUs: ${cpus:-all $(nproc)}"
echo
echo "untraced:"
run_pgbench

if [ -n "$record" ]; then
    echo
    echo "recorded: $lockscope_bin record -p $POSTMASTER --tree --probes $probes -d $((seconds + 2))s -o $record"
    "$lockscope_bin" record -p "$POSTMASTER" --tree --probes "$probes" -d "$((seconds + 2))s" \
        -o "$record" 2>"$STATE/record.log" &
    RECORDER=$!
    # Past the attach (the recorder says so on stderr), then the same load.
    recorder_attached() { grep -q "^lockscope: recording" "$STATE/record.log" || ! kill -0 "$RECORDER" 2>/dev/null; }
    if ! wait_for 60 recorder_attached || ! kill -0 "$RECORDER" 2>/dev/null; then
        die "lockscope record did not start: $(cat "$STATE/record.log")"
    fi
    run_pgbench
    wait "$RECORDER" || die "lockscope record failed: $(cat "$STATE/record.log")"
    RECORDER=
    print_why "$lockscope_bin" "$STATE/record.log" "$record"
fi
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
