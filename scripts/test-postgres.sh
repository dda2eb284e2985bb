#!/usr/bin/env bash
# A throwaway PostgreSQL 15 for the ledger tests and benchmarks, in a temporary directory.
#
#   scripts/test-postgres.sh start    initdb + start on a free port, create verify_test, print the URL
#   scripts/test-postgres.sh url      print the URL of the running server
#   scripts/test-postgres.sh env      print `export` lines: VERIFY_TEST_POSTGRES_URL, VERIFY_TEST_PG_DATA,
#                                     VERIFY_TEST_PG_CTL (this script, for the outage test's pause/resume)
#   scripts/test-postgres.sh pause    stop the server, keep its data (the outage test)
#   scripts/test-postgres.sh resume   start it again on the same port
#   scripts/test-postgres.sh stop     stop the server and delete its directory
#   scripts/test-postgres.sh tls-dir  print the directory of the TLS files (a server started with VERIFY_PG_TLS=1)
#
# With VERIFY_PG_TLS=1, `start` makes a server that also speaks TLS (the sslmode tests): in the state's `tls`
# directory, openssl makes ca.pem (the CA that signed the server's certificate, for 127.0.0.1 and localhost) and
# other-ca.pem (a CA that signed nothing of this server); the server listens on 127.0.0.1 and 127.0.0.2 (an address
# its certificate does not name).
#
# Runs as root (the server runs as the `postgres` user) or as the postgres user itself.
# State lives in $VERIFY_PG_STATE (default /tmp/verify-pg-state). Typical CI use:
#   scripts/test-postgres.sh start >/dev/null && eval "$(scripts/test-postgres.sh env)"
set -euo pipefail


PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
STATE="${VERIFY_PG_STATE:-/tmp/verify-pg-state}"
DATABASE="verify_test"
SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"

# Starts the server with every descriptor inherited from the caller closed (except stdin/out/err and bash's own
# 255), however high its number: the server is a daemon and would otherwise hold them for its whole life.
# Foundation's `Process` (the tests, the chaos harness) learns that a child exited from end of file on a socket the
# child inherited, then reaps it with a blocking `waitpid` on the one thread that serves every `Process`:
#   - held by the server, the socket never reported this script's exit (a test waited for ever; seen with a
#     descriptor numbered 279);
#   - closed by this script itself (an earlier version closed them all at the top), it reported the exit at once and
#     that thread then blocked in `waitpid` until the script really ended (`initdb` under load: minutes), holding
#     up every other child's exit in the test process.
# So only the subshell that starts the server closes them.
start_server() {
    (
        for fd_path in /proc/$BASHPID/fd/*; do
            fd="${fd_path##*/}"
            if [ "$fd" -gt 2 ] 2>/dev/null && [ "$fd" -ne 255 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
        done
        as_postgres "'$PG_BIN/pg_ctl' -D '$1' -l '$2' -w -t 60 start >/dev/null"
    )
}

as_postgres() {
    if [ "$(id -un)" = "postgres" ]; then
        bash -c "$1"
    else
        su postgres -s /bin/bash -c "$1"
    fi
}

free_port() {
    python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

# The TLS files of a VERIFY_PG_TLS=1 server, and the settings that serve them (see the top of this file).
make_tls() {
    local tls="$1/tls"
    mkdir -p "$tls"
    (
        cd "$tls"
        for ca in ca other-ca; do
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=verify test $ca" \
                -keyout "$ca.key" -out "$ca.pem" >/dev/null 2>&1
        done
        openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr >/dev/null 2>&1
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext \
            -out server.crt >/dev/null 2>&1
        chmod 600 server.key
    )
    if [ "$(id -u)" = "0" ]; then chown -R postgres:postgres "$tls"; fi
    chmod 755 "$tls"
    chmod 644 "$tls"/*.pem
    as_postgres "cat >>'$1/data/postgresql.conf' <<CONF
ssl = on
ssl_cert_file = '$tls/server.crt'
ssl_key_file = '$tls/server.key'
listen_addresses = '127.0.0.1,127.0.0.2'
CONF
echo 'host all all 127.0.0.0/8 trust' >>'$1/data/pg_hba.conf'"
}

load_state() {
    [ -f "$STATE" ] || { echo "no test PostgreSQL running (run: $SELF start)" >&2; exit 1; }
    # shellcheck disable=SC1090
    . "$STATE"
}

url() { echo "postgres://postgres@127.0.0.1:${PORT}/${DATABASE}?sslmode=disable"; }

is_running() { as_postgres "'$PG_BIN/pg_ctl' -D '$DATA' status" >/dev/null 2>&1; }

case "${1:-}" in
start)
    if [ -f "$STATE" ]; then
        load_state
        if is_running; then url; exit 0; fi
        rm -f "$STATE"
    fi
    [ -x "$PG_BIN/initdb" ] || { echo "PostgreSQL 15 not found in $PG_BIN (apt-get install postgresql-15)" >&2; exit 1; }
    DATA="$(mktemp -d /tmp/verify-pg-XXXXXX)"
    chmod 700 "$DATA"
    if [ "$(id -u)" = "0" ]; then chown postgres:postgres "$DATA"; fi
    PORT="$(free_port)"
    # --no-sync: a throw-away test cluster; skipping initdb's final flush of every file saves seconds on a busy disk.
    as_postgres "'$PG_BIN/initdb' -D '$DATA/data' --auth=trust --username=postgres --encoding=UTF8 --no-sync >'$DATA/initdb.log' 2>&1"
    # Settings go in the configuration file so `pause`/`resume` restart the server identically.
    as_postgres "cat >>'$DATA/data/postgresql.conf' <<CONF
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DATA'
max_connections = 200
CONF"
    if [ "${VERIFY_PG_TLS:-}" = "1" ]; then make_tls "$DATA"; fi
    start_server "$DATA/data" "$DATA/server.log"
    as_postgres "'$PG_BIN/createdb' -h 127.0.0.1 -p $PORT -U postgres $DATABASE"
    printf 'DATA=%q\nPORT=%q\n' "$DATA/data" "$PORT" >"$STATE"
    DATA="$DATA/data"
    url
    ;;
url)
    load_state
    url
    ;;
env)
    load_state
    echo "export VERIFY_TEST_POSTGRES_URL='$(url)'"
    echo "export VERIFY_TEST_PG_DATA='$DATA'"
    echo "export VERIFY_TEST_PG_CTL='$SELF'"
    ;;
pause)
    load_state
    as_postgres "'$PG_BIN/pg_ctl' -D '$DATA' -w -t 60 -m fast stop >/dev/null"
    ;;
resume)
    load_state
    is_running || start_server "$DATA" "$(dirname "$DATA")/server.log"
    ;;
tls-dir)
    load_state
    echo "$(dirname "$DATA")/tls"
    ;;
stop)
    if [ -f "$STATE" ]; then
        load_state
        as_postgres "'$PG_BIN/pg_ctl' -D '$DATA' -w -t 60 -m fast stop >/dev/null" || true
        case "$DATA" in /tmp/verify-pg-*/data) rm -rf "$(dirname "$DATA")" ;; esac
        rm -f "$STATE"
    fi
    ;;
*)
    echo "usage: $0 start|url|env|pause|resume|stop|tls-dir" >&2
    exit 2
    ;;
esac
