#!/usr/bin/env bash
# A throwaway PostgreSQL 15 server on loopback for the PostgreSQL store tests and benchmarks,
# from Debian's postgresql-15 packages: initdb into a temporary directory, one free port on
# 127.0.0.1, password (SCRAM) authentication for the user "rubric".
#
# Usage:
#   .ci/postgres.sh setup             # idempotent: installs postgresql-15 if missing (as root)
#                                     # and, as root, the unprivileged system user the server runs as
#   .ci/postgres.sh start STATE_FILE  # initdb + start + wait for pg_isready; writes the
#                                     # shell-sourceable STATE_FILE:
#                                     #   RUBRIC_STUDIO_PG_URL=postgresql://rubric:PW@127.0.0.1:PORT/rubric_studio
#                                     #   RUBRIC_STUDIO_PG_PID=PID   (the postmaster)
#                                     #   RUBRIC_STUDIO_PG_DIR=DIR   (temporary; removed by stop)
#                                     # and prints the URL. A server already recorded in
#                                     # STATE_FILE is stopped first.
#   .ci/postgres.sh stop STATE_FILE   # pg_ctl stop -m fast, then removes DIR; no-op if not running
#   (the server's log is copied to STATE_FILE.log at stop, and kept)
#
# The role "rubric" may log in over TCP with its password and create databases (CREATEDB, no
# superuser), and owns the database "rubric_studio". The superuser "postgres" has no password:
# it can only connect through the Unix socket inside DIR (mode 0700, owned by the server's user).
#
# Environment (all optional):
#   RUBRIC_STUDIO_PG_BIN            PostgreSQL binaries (default /usr/lib/postgresql/15/bin)
#   RUBRIC_STUDIO_PG_USER           OS user the server runs as when started by root (default rubricpg,
#                                   created by setup/start; falls back to nobody if it cannot be)
#   RUBRIC_STUDIO_PG_START_TIMEOUT  seconds to wait for the server to accept connections (default 60)
#   RUBRIC_STUDIO_PG_MAX_CONNECTIONS  max_connections (default 200: pools of many workers)
set -euo pipefail

PG_BIN="${RUBRIC_STUDIO_PG_BIN:-/usr/lib/postgresql/15/bin}"
RUN_USER="${RUBRIC_STUDIO_PG_USER:-rubricpg}"
START_TIMEOUT="${RUBRIC_STUDIO_PG_START_TIMEOUT:-60}"
MAX_CONNECTIONS="${RUBRIC_STUDIO_PG_MAX_CONNECTIONS:-200}"
DB_USER="rubric"
DB_NAME="rubric_studio"
FALLBACK_PORT=55432

log() { printf '[postgres] %s\n' "$*" >&2; }
die() { printf '[postgres] error: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }

binaries_present() {
    [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_ctl" ] && [ -x "$PG_BIN/pg_isready" ] &&
        [ -x "$PG_BIN/psql" ] && [ -x "$PG_BIN/postgres" ]
}

ensure_binaries() {
    binaries_present && return 0
    if is_root && [ "$PG_BIN" = /usr/lib/postgresql/15/bin ]; then
        log "installing Debian's postgresql-15"
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
        # The package's own cluster (and its service) is of no use here; tests get their own.
        binaries_present && return 0
    fi
    die "no PostgreSQL 15 binaries in $PG_BIN (initdb, pg_ctl, pg_isready, psql, postgres); install Debian's postgresql-15 (apt-get install -y postgresql-15) or set RUBRIC_STUDIO_PG_BIN"
}

ensure_user() {
    # As root, the server must run as someone else (postgres refuses to run as root).
    is_root || return 0
    id -u "$RUN_USER" >/dev/null 2>&1 && return 0
    if useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
        "$RUN_USER" >/dev/null 2>&1; then
        log "created system user $RUN_USER"
        return 0
    fi
    id -u "$RUN_USER" >/dev/null 2>&1 && return 0 # created meanwhile by a parallel start
    log "could not create system user $RUN_USER; running the server as nobody"
    RUN_USER=nobody
}

as_server_user() {
    # Runs a command as the server's user, from a directory that user can enter.
    if is_root; then
        (cd / && runuser -u "$RUN_USER" -- "$@")
    else
        (cd / && "$@")
    fi
}

free_port() {
    # Ask the OS for a free loopback port; without python3, try a range from $FALLBACK_PORT.
    if command -v python3 >/dev/null 2>&1 &&
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' 2>/dev/null; then
        return 0
    fi
    local port
    for port in $(seq "$FALLBACK_PORT" $((FALLBACK_PORT + 99))); do
        # A refused connection means nothing listens there.
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    die "no free port in $FALLBACK_PORT-$((FALLBACK_PORT + 99))"
}

new_password() {
    if command -v openssl >/dev/null 2>&1; then
        openssl rand -hex 16
    else
        od -An -N16 -tx1 /dev/urandom | tr -d ' \n'
    fi
}

wait_ready() {
    # wait_ready PORT DATA_DIR: 0 once pg_isready answers, 1 if the postmaster died, 2 on timeout.
    local port="$1" data="$2" deadline pid
    deadline=$((SECONDS + START_TIMEOUT))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -t 2 >/dev/null 2>&1; then
            return 0
        fi
        pid="$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)"
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
            return 1
        fi
        sleep 0.2
    done
    return 2
}

stop_dir() {
    # stop_dir DIR LOG: stops the server whose data directory is DIR/data, copies its log to LOG,
    # removes DIR.
    local dir="$1" logcopy="$2" data pid
    data="$dir/data"
    if [ -f "$data/postmaster.pid" ]; then
        pid="$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)"
        if ! as_server_user "$PG_BIN/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null 2>&1; then
            if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                log "pg_ctl stop failed; sending SIGQUIT (immediate shutdown) to postmaster $pid"
                kill -QUIT "$pid" 2>/dev/null || true
                for _ in $(seq 1 50); do
                    kill -0 "$pid" 2>/dev/null || break
                    sleep 0.2
                done
                kill -KILL "$pid" 2>/dev/null || true
            fi
        fi
        [ -z "$pid" ] || log "server $pid stopped"
    fi
    if [ -n "$logcopy" ] && [ -f "$dir/server.log" ]; then
        cp "$dir/server.log" "$logcopy" 2>/dev/null || true
    fi
    rm -rf "$dir"
}

cmd_setup() {
    ensure_binaries
    ensure_user
    local user
    user="$(id -un)"
    is_root && user="$RUN_USER"
    log "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') in $PG_BIN; the server runs as $user"
}

cmd_start() {
    local state="${1:-}"
    [ -n "$state" ] || die "start needs a state file: $0 start STATE_FILE"
    ensure_binaries
    ensure_user
    if [ -f "$state" ]; then
        cmd_stop "$state"
    fi
    mkdir -p "$(dirname "$state")"
    local dir data password port attempt rc pid url
    dir="$(mktemp -d "${TMPDIR:-/tmp}/rubric-pg.XXXXXX")"
    data="$dir/data"
    # Whatever goes wrong from here on, leave no server and no directory behind.
    # shellcheck disable=SC2064
    trap "stop_dir '$dir' '$state.log'" EXIT
    chmod 0700 "$dir"
    if is_root; then
        chown "$RUN_USER" "$dir"
    fi
    as_server_user "$PG_BIN/initdb" -D "$data" -U postgres -E UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; die "initdb into $data failed; see its output above"; }
    password="$(new_password)"
    for attempt in 1 2 3; do
        port="$(free_port)"
        log "starting PostgreSQL on 127.0.0.1:$port (attempt $attempt), data $data"
        # Settings go on the command line: loopback only, the Unix socket inside DIR, fsync on
        # (the store's durability promise is what the tests check).
        rc=0
        as_server_user "$PG_BIN/pg_ctl" -D "$data" -l "$dir/server.log" -w -t "$START_TIMEOUT" \
            -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c unix_socket_permissions=0700 -c max_connections=$MAX_CONNECTIONS -c password_encryption=scram-sha-256" \
            start >/dev/null 2>&1 || rc=$?
        if [ "$rc" -eq 0 ]; then
            rc=0
            wait_ready "$port" "$data" || rc=$?
            [ "$rc" -eq 0 ] && break
        fi
        tail -n 10 "$dir/server.log" >&2 2>/dev/null || true
        if [ -f "$data/postmaster.pid" ]; then
            as_server_user "$PG_BIN/pg_ctl" -D "$data" -m immediate -w -t 10 stop >/dev/null 2>&1 || true
        fi
        [ "$attempt" -lt 3 ] || die "PostgreSQL did not start, or did not accept connections within ${START_TIMEOUT}s, in 3 attempts (last port $port); see its log above"
        log "server did not come up (port taken?); retrying on another port"
    done
    # The role and its database, through the superuser's Unix socket. psql's :'pw' quotes the
    # password as an SQL literal.
    as_server_user "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres \
        -v pw="$password" >/dev/null <<SQL ||
CREATE ROLE $DB_USER LOGIN CREATEDB PASSWORD :'pw';
CREATE DATABASE $DB_NAME OWNER $DB_USER TEMPLATE template0 ENCODING 'UTF8';
-- The tests drop their databases WITH (FORCE): that also ends an autovacuum worker busy in
-- one, which only pg_signal_backend may do (a worker belongs to no role the test owns).
GRANT pg_signal_backend TO $DB_USER;
SQL
        die "could not create the role $DB_USER and the database $DB_NAME"
    url="postgresql://$DB_USER:$password@127.0.0.1:$port/$DB_NAME"
    # The password must work over TCP, as every client will use it.
    PGPASSWORD="$password" "$PG_BIN/psql" -X -q -At -h 127.0.0.1 -p "$port" -U "$DB_USER" -d "$DB_NAME" \
        -c 'SELECT 1' >/dev/null || die "the new role $DB_USER cannot log in over TCP with its password"
    pid="$(head -n 1 "$data/postmaster.pid")"
    (
        umask 077 # the state file holds the password
        {
            echo "RUBRIC_STUDIO_PG_URL=$url"
            echo "RUBRIC_STUDIO_PG_PID=$pid"
            echo "RUBRIC_STUDIO_PG_DIR=$dir"
        } >"$state"
    )
    trap - EXIT
    log "server $pid ready on 127.0.0.1:$port, database $DB_NAME"
    echo "$url"
}

cmd_stop() {
    local state="${1:-}"
    [ -n "$state" ] || die "stop needs the state file given to start: $0 stop STATE_FILE"
    [ -f "$state" ] || return 0
    local dir pid
    dir="$(sed -n 's/^RUBRIC_STUDIO_PG_DIR=//p' "$state")"
    pid="$(sed -n 's/^RUBRIC_STUDIO_PG_PID=//p' "$state")"
    case "$dir" in
        */rubric-pg.*) ;;
        *) die "$state names no data directory of ours (RUBRIC_STUDIO_PG_DIR=$dir); not removing it" ;;
    esac
    if [ -d "$dir" ]; then
        stop_dir "$dir" "$state.log"
    elif [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        log "data directory $dir is gone but postmaster $pid runs; stopping it"
        kill -QUIT "$pid" 2>/dev/null || true
    fi
    rm -f "$state"
}

case "${1:-}" in
    setup) cmd_setup ;;
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    *) die "unknown command '${1:-}'; use one of: setup, start STATE_FILE, stop STATE_FILE" ;;
esac
