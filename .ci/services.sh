#!/usr/bin/env bash
# Throwaway PostgreSQL, PgBouncer and Redis servers for the integration tests.
#
#   source .ci/services.sh && services_start   # installs (if missing) and starts them, exports TEST_* vars
#   services_stop                              # stops them and removes their data folder
#
# Everything lives in one `mktemp -d` folder; servers listen on loopback only:
#   PostgreSQL 127.0.0.1:${GATEHOUSE_PG_PORT:-54329}   Redis 127.0.0.1:${GATEHOUSE_REDIS_PORT:-63790}
#   PgBouncer  127.0.0.1:${GATEHOUSE_POOLER_PORT:-64329} (the Worker's stand-in for Hyperdrive, docs/workers.md)
# Exports (after services_start):
#   TEST_PG_URL      postgres://gatehouse_owner:owner@127.0.0.1:54329/gatehouse     (owns the db; runs migrations)
#   TEST_PG_APP_URL  postgres://gatehouse_runtime:runtime@127.0.0.1:54329/gatehouse (runtime role, member of gatehouse_app)
#   TEST_POOLER_URL, TEST_POOLER_APP_URL  the same two roles through PgBouncer (any database name)
#   TEST_REDIS_URL   redis://127.0.0.1:63790
# Works as root (PostgreSQL then runs as the `postgres` user) or as a normal user.
# services_start does not install a trap itself when sourced interactively;
# .ci/run sets `trap services_stop EXIT`.

SERVICES_PG_PORT="${GATEHOUSE_PG_PORT:-54329}"
SERVICES_REDIS_PORT="${GATEHOUSE_REDIS_PORT:-63790}"
SERVICES_POOLER_PORT="${GATEHOUSE_POOLER_PORT:-64329}"
SERVICES_DIR="${SERVICES_DIR:-}"

_services_log() { printf '[services] %s\n' "$*" >&2; }

# Runs a command as the postgres OS user when we are root (initdb/postgres refuse root).
_services_as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

_services_pg_bindir() {
  local d
  # Highest installed major version wins.
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      printf '%s\n' "$d"
      return 0
    fi
  done
  return 1
}

# Stops the process a pid file names: TERM, up to 5 s, then KILL.
_services_stop_pidfile() {
  local pid i
  [ -f "$1" ] || return 0
  pid="$(cat "$1" 2>/dev/null || true)"
  if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
    for i in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
}

services_install() {
  local missing=()
  _services_pg_bindir >/dev/null || missing+=(postgresql)
  # redis-server depends on redis-tools (redis-cli).
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    missing+=(redis-server)
  fi
  command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
  if [ "${#missing[@]}" -eq 0 ]; then
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    _services_log "missing packages: ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root"
    return 1
  fi
  _services_log "installing: ${missing[*]}"
  # The packages' maintainer scripts would start their stock services (postgresql on 5432,
  # redis on 6379) where an init system lets them; we start our own, so deny that for the
  # install unless the machine already has a policy.
  local own_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && own_policy=1
  fi
  local rc=0
  apt-get update </dev/null || rc=$?
  if [ "$rc" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" </dev/null || rc=$?
  fi
  [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d
  [ "$rc" -eq 0 ] || { _services_log "apt-get failed ($rc)"; return 1; }
  _services_pg_bindir >/dev/null || { _services_log "PostgreSQL binaries not found after install"; return 1; }
  command -v redis-server >/dev/null 2>&1 || { _services_log "redis-server not found after install"; return 1; }
  _services_pgbouncer >/dev/null || { _services_log "pgbouncer not found after install"; return 1; }
}

_services_pgbouncer() {
  command -v pgbouncer 2>/dev/null || { [ -x /usr/sbin/pgbouncer ] && printf '/usr/sbin/pgbouncer\n'; }
}

# True when nothing accepts connections on 127.0.0.1:$1.
_services_port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

_services_dump_logs() {
  local f
  for f in "$SERVICES_DIR/postgres.log" "$SERVICES_DIR/redis.log" "$SERVICES_DIR/pgbouncer.log"; do
    if [ -f "$f" ]; then
      _services_log "----- $f -----"
      tail -n 100 "$f" >&2 || true
    fi
  done
}

_services_start_postgres() {
  local bindir="$1" pgdata="$SERVICES_DIR/pgdata" sock="$SERVICES_DIR/pgsock" i
  mkdir -p "$pgdata" "$sock" || return 1
  if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres:postgres "$SERVICES_DIR" || return 1
  fi
  chmod 700 "$SERVICES_DIR" "$pgdata" || return 1
  _services_log "initdb ($bindir)"
  _services_as_pg "$bindir/initdb" -D "$pgdata" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
    >"$SERVICES_DIR/initdb.log" 2>&1 || {
    _services_log "initdb failed:"
    cat "$SERVICES_DIR/initdb.log" >&2
    return 1
  }
  # Loopback TCP needs a password (scram) so the app roles' passwords are really checked;
  # the unix socket inside the temp folder stays trust for the setup below.
  cat >"$pgdata/pg_hba.conf" <<HBA || return 1
local all all trust
host  all all 127.0.0.1/32 scram-sha-256
HBA
  _services_log "starting PostgreSQL on 127.0.0.1:$SERVICES_PG_PORT"
  _services_as_pg "$bindir/pg_ctl" -D "$pgdata" -l "$SERVICES_DIR/postgres.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $SERVICES_PG_PORT -c unix_socket_directories=$sock -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >/dev/null || {
    _services_log "PostgreSQL failed to start"
    return 1
  }
  for i in $(seq 1 60); do
    if "$bindir/pg_isready" -q -h 127.0.0.1 -p "$SERVICES_PG_PORT"; then
      break
    fi
    if [ "$i" -eq 60 ]; then
      _services_log "PostgreSQL not ready after 30s"
      return 1
    fi
    sleep 0.5
  done

  _services_log "creating roles and database"
  _services_as_pg "$bindir/psql" -h "$sock" -p "$SERVICES_PG_PORT" -U postgres -d postgres \
    -v ON_ERROR_STOP=1 -q >/dev/null <<'SQL' || { _services_log "creating roles/database failed"; return 1; }
SET client_min_messages = warning;
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gatehouse_owner') THEN
    CREATE ROLE gatehouse_owner LOGIN CREATEROLE CREATEDB PASSWORD 'owner';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gatehouse_runtime') THEN
    CREATE ROLE gatehouse_runtime LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD 'runtime';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gatehouse_app') THEN
    CREATE ROLE gatehouse_app NOLOGIN;
  END IF;
END
$$;
GRANT gatehouse_app TO gatehouse_runtime;
-- The tests drop their throwaway databases WITH (FORCE) as the owner; a backend
-- of the runtime role can outlive its client for a moment (a pooler's KILL
-- returns before the server process has exited), and terminating it needs this.
GRANT pg_signal_backend TO gatehouse_owner;
-- The runtime bounds (src/db/client.ts) as the role's own settings: the
-- Worker's connections go through a pooler (PgBouncer here, Hyperdrive in
-- production) that passes no such startup parameter through.
ALTER ROLE gatehouse_runtime SET lock_timeout = '5s';
ALTER ROLE gatehouse_runtime SET statement_timeout = '15s';
CREATE DATABASE gatehouse OWNER gatehouse_owner;
SQL
  # Only the owner may create objects in public (already the default since PostgreSQL 15,
  # where public belongs to pg_database_owner = gatehouse_owner).
  _services_as_pg "$bindir/psql" -h "$sock" -p "$SERVICES_PG_PORT" -U postgres -d gatehouse \
    -v ON_ERROR_STOP=1 -q -c 'REVOKE CREATE ON SCHEMA public FROM PUBLIC' >/dev/null || return 1
}

_services_start_redis() {
  local i
  _services_log "starting Redis on 127.0.0.1:$SERVICES_REDIS_PORT"
  redis-server --bind 127.0.0.1 --port "$SERVICES_REDIS_PORT" --protected-mode yes \
    --dir "$SERVICES_DIR" --save '' --appendonly no \
    --daemonize yes --pidfile "$SERVICES_DIR/redis.pid" --logfile "$SERVICES_DIR/redis.log" || {
    _services_log "redis-server failed to start"
    return 1
  }
  for i in $(seq 1 60); do
    if [ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$SERVICES_REDIS_PORT" ping 2>/dev/null)" = "PONG" ]; then
      return 0
    fi
    sleep 0.5
  done
  _services_log "Redis not ready after 30s"
  return 1
}

# PgBouncer in front of PostgreSQL, the Worker's local stand-in for Hyperdrive
# (docs/workers.md "A local Hyperdrive: PgBouncer"). Session pooling: Debian 12's 1.18
# keeps protocol-level (named) prepared statements only in session mode, and
# Hyperdrive supports them, so postgres.js runs as it does in production
# (prepare: true). The Worker's client lives for one request, so a server
# connection is held for one request and then reused by the next client;
# server_reset_query (DISCARD ALL) leaves nothing of one request's session to
# the next. Every database name maps to the same server (the e2e suite makes
# one database per run).
_services_start_pgbouncer() {
  local bin dir="$SERVICES_DIR/pgbouncer" i  # $1: PostgreSQL's bin directory
  bin="$(_services_pgbouncer)" || return 1
  mkdir -p "$dir" || return 1
  cat >"$dir/pgbouncer.ini" <<INI || return 1
[databases]
* = host=127.0.0.1 port=$SERVICES_PG_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $SERVICES_POOLER_PORT
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $dir/userlist.txt
pool_mode = session
server_reset_query = DISCARD ALL
default_pool_size = 20
max_client_conn = 500
max_db_connections = 40
ignore_startup_parameters = extra_float_digits
logfile = $SERVICES_DIR/pgbouncer.log
pidfile = $dir/pgbouncer.pid
admin_users = gatehouse_owner
stats_users = gatehouse_owner
INI
  # The roles' SCRAM secrets as PostgreSQL stores them, not their passwords:
  # PgBouncer then checks a client's proof with two HMACs instead of deriving
  # the key (4096 PBKDF2 rounds) on every login, and its single thread is not
  # the bound of a Worker that logs in once per request.
  _services_as_pg "$1/psql" -h "$SERVICES_DIR/pgsock" -p "$SERVICES_PG_PORT" -U postgres -d postgres -At \
    -c "select format('\"%s\" \"%s\"', rolname, rolpassword) from pg_authid where rolname in ('gatehouse_owner', 'gatehouse_runtime') order by rolname" \
    >"$dir/userlist.txt" || return 1
  chmod 600 "$dir/userlist.txt"
  if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres:postgres "$dir" && touch "$SERVICES_DIR/pgbouncer.log" && chown postgres:postgres "$SERVICES_DIR/pgbouncer.log" || return 1
  fi
  _services_log "starting PgBouncer (session pooling) on 127.0.0.1:$SERVICES_POOLER_PORT"
  _services_as_pg "$bin" -d "$dir/pgbouncer.ini" >/dev/null 2>&1 || { _services_log "pgbouncer failed to start"; return 1; }
  for i in $(seq 1 60); do
    if ! _services_port_free "$SERVICES_POOLER_PORT"; then
      return 0
    fi
    sleep 0.25
  done
  _services_log "PgBouncer not listening after 15s"
  return 1
}

services_start() {
  if [ -n "$SERVICES_DIR" ] && [ -d "$SERVICES_DIR" ]; then
    _services_log "already started in $SERVICES_DIR (run services_stop first)"
    return 1
  fi
  services_install || return 1
  local port
  for port in "$SERVICES_PG_PORT" "$SERVICES_REDIS_PORT" "$SERVICES_POOLER_PORT"; do
    if ! _services_port_free "$port"; then
      _services_log "127.0.0.1:$port is already in use (a leftover instance? set GATEHOUSE_PG_PORT / GATEHOUSE_REDIS_PORT / GATEHOUSE_POOLER_PORT)"
      return 1
    fi
  done
  local bindir
  bindir="$(_services_pg_bindir)" || { _services_log "no PostgreSQL binaries in /usr/lib/postgresql/*/bin"; return 1; }
  SERVICES_DIR="$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-services.XXXXXX")" || return 1
  export SERVICES_DIR
  _services_log "data folder: $SERVICES_DIR"
  if ! _services_start_postgres "$bindir" || ! _services_start_pgbouncer "$bindir" || ! _services_start_redis; then
    _services_dump_logs
    services_stop
    return 1
  fi
  export TEST_PG_URL="postgres://gatehouse_owner:owner@127.0.0.1:${SERVICES_PG_PORT}/gatehouse"
  export TEST_PG_APP_URL="postgres://gatehouse_runtime:runtime@127.0.0.1:${SERVICES_PG_PORT}/gatehouse"
  export TEST_POOLER_URL="postgres://gatehouse_owner:owner@127.0.0.1:${SERVICES_POOLER_PORT}/gatehouse"
  export TEST_POOLER_APP_URL="postgres://gatehouse_runtime:runtime@127.0.0.1:${SERVICES_POOLER_PORT}/gatehouse"
  export TEST_REDIS_URL="redis://127.0.0.1:${SERVICES_REDIS_PORT}"
  _services_log "ready: TEST_PG_URL=$TEST_PG_URL TEST_PG_APP_URL=$TEST_PG_APP_URL TEST_POOLER_APP_URL=$TEST_POOLER_APP_URL TEST_REDIS_URL=$TEST_REDIS_URL"
}

services_stop() {
  local dir="${SERVICES_DIR:-}" bindir
  [ -n "$dir" ] || return 0
  if [ -f "$dir/pgdata/postmaster.pid" ] && bindir="$(_services_pg_bindir)"; then
    _services_as_pg "$bindir/pg_ctl" -D "$dir/pgdata" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
  _services_stop_pidfile "$dir/pgbouncer/pgbouncer.pid"
  _services_stop_pidfile "$dir/redis.pid"
  rm -rf -- "$dir"
  SERVICES_DIR=""
  unset TEST_PG_URL TEST_PG_APP_URL TEST_POOLER_URL TEST_POOLER_APP_URL TEST_REDIS_URL
  _services_log "stopped and removed $dir"
}
