#!/usr/bin/env bash
# A throw-away PostgreSQL server on loopback for the shared-study tests.
#   .ci/postgres.sh start   -> installs Debian's postgresql if needed, starts a cluster in
#                              $PGDIR (default /tmp/kerneltune-pg), prints its URL
#   .ci/postgres.sh stop
set -euo pipefail
PGDIR=${PGDIR:-/tmp/kerneltune-pg}
PORT=${PGPORT:-54329}
case "${1:-}" in
  start)
    if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >/tmp/kerneltune-pg-apt.log 2>&1 \
        || { echo "postgres: apt-get install postgresql failed (see /tmp/kerneltune-pg-apt.log)" >&2; exit 1; }
    fi
    BIN=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")
    RUN=""; [ "$(id -u)" -eq 0 ] && RUN="runuser -u postgres --"
    # A server left running by an interrupted run would hold the port: stop it first.
    [ -d "$PGDIR/data" ] && { $RUN "$BIN/pg_ctl" -D "$PGDIR/data" -m fast stop >/dev/null 2>&1 || true; }
    rm -rf "$PGDIR"; mkdir -p "$PGDIR"; [ -n "$RUN" ] && chown postgres "$PGDIR"
    $RUN "$BIN/initdb" -D "$PGDIR/data" -U kerneltune --auth=trust >"$PGDIR/initdb.log" 2>&1
    $RUN "$BIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w \
      -o "-c listen_addresses=127.0.0.1 -p $PORT -k $PGDIR" start >/dev/null
    $RUN "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U kerneltune kerneltune
    echo "postgresql://kerneltune@127.0.0.1:$PORT/kerneltune"
    ;;
  stop)
    BIN=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -n 1)")
    RUN=""; [ "$(id -u)" -eq 0 ] && RUN="runuser -u postgres --"
    [ -d "$PGDIR/data" ] && $RUN "$BIN/pg_ctl" -D "$PGDIR/data" -m fast stop >/dev/null || true
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
