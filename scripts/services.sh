#!/usr/bin/env bash
# Makes sure the local Postgres (127.0.0.1:5432, user postgres without a
# password, database "receipts") and Redis (127.0.0.1:6379) that the project
# runs and tests against are up.
#
#  - A server that already answers is used as it is.
#  - An installed server that is down is started (Debian's pg_ctlcluster;
#    redis-server daemonized without persistence).
#  - A missing server is installed with apt-get when running as root.
#  - Otherwise it prints exactly what is missing and exits non-zero.
#
# Idempotent; prints nothing when everything is already in place.
# Environment: PG_PORT (5432), REDIS_PORT (6379), PG_DATABASE (receipts).
set -euo pipefail
cd "$(dirname "$0")/.."

PG_HOST=127.0.0.1
PG_PORT=${PG_PORT:-5432}
PG_DATABASE=${PG_DATABASE:-receipts}
PG_ADMIN_URL="postgresql://postgres@${PG_HOST}:${PG_PORT}/postgres?connect_timeout=5"
REDIS_PORT=${REDIS_PORT:-6379}

missing=()
apt_updated=0

say() { echo "services.sh: $*" >&2; }
is_root() { [ "$(id -u)" = 0 ]; }
have() { command -v "$1" >/dev/null 2>&1; }

# tcp_open HOST PORT: whether something accepts connections there.
tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# wait_for SECONDS CMD...: polls CMD every 0.2 s until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}

apt_install() {
  is_root && have apt-get || return 1
  if [ "$apt_updated" = 0 ]; then
    say "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    apt_updated=1
  fi
  say "apt-get install -y $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# ---------------------------------------------------------------- Postgres

pg_up() {
  if have pg_isready; then
    pg_isready -h "$PG_HOST" -p "$PG_PORT" -q 2>/dev/null
  else
    tcp_open "$PG_HOST" "$PG_PORT"
  fi
}

pg_version() { ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1; }

# pg_cluster prints "VERSION NAME" of the local Debian cluster on PG_PORT.
pg_cluster() {
  have pg_lsclusters || return 0
  pg_lsclusters -h 2>/dev/null | awk -v p="$PG_PORT" '$3 == p { print $1, $2; exit }'
}

psql_admin() { psql "$PG_ADMIN_URL" -v ON_ERROR_STOP=1 -qtA "$@"; }

# trust_local_tcp rewrites the local cluster's pg_hba.conf so that TCP from
# 127.0.0.1 and ::1 is trusted (Debian's default is scram-sha-256 there),
# then reloads. Dev machines only: this is what the tests' default URL
# postgres://postgres@127.0.0.1:5432 needs.
trust_local_tcp() {
  local ver name hba
  read -r ver name <<<"$(pg_cluster)"
  [ -n "$ver" ] || return 1
  hba=/etc/postgresql/$ver/$name/pg_hba.conf
  [ -w "$hba" ] || return 1
  if ! grep -q '^# receipts: trust local TCP' "$hba"; then
    local tmp
    tmp=$(mktemp)
    { printf '%s\n' '# receipts: trust local TCP (added by scripts/services.sh, dev only)' \
        'host    all    all    127.0.0.1/32    trust' \
        'host    all    all    ::1/128         trust'
      cat "$hba"; } >"$tmp"
    cat "$tmp" >"$hba" && rm -f "$tmp"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" reload >/dev/null
  say "set trust auth for 127.0.0.1/32 and ::1/128 in $hba and reloaded"
}

ensure_postgres() {
  if ! pg_up; then
    if [ -z "$(pg_version)" ]; then
      if ! apt_install postgresql; then
        missing+=("PostgreSQL: not installed and not running on $PG_HOST:$PG_PORT. As root: apt-get install -y postgresql (or start your own server there)")
        return
      fi
    fi
    local ver name
    read -r ver name <<<"$(pg_cluster)"
    if [ -z "$ver" ]; then
      ver=$(pg_version)
      if ! is_root || [ -d "/etc/postgresql/$ver/main" ]; then
        missing+=("PostgreSQL $ver is installed but has no cluster on port $PG_PORT (see pg_lsclusters). As root: pg_createcluster --port $PG_PORT $ver <name>")
        return
      fi
      say "creating cluster $ver/main on port $PG_PORT"
      pg_createcluster --port "$PG_PORT" "$ver" main >/dev/null
      name=main
    fi
    if ! is_root; then
      missing+=("PostgreSQL $ver/$name is installed but not running on $PG_HOST:$PG_PORT. As root: pg_ctlcluster --skip-systemctl-redirect $ver $name start")
      return
    fi
    say "starting PostgreSQL $ver/$name"
    pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start || true
    if ! wait_for 30 pg_up; then
      missing+=("PostgreSQL $ver/$name did not come up on $PG_HOST:$PG_PORT within 30 s; see /var/log/postgresql/postgresql-$ver-$name.log")
      return
    fi
  fi
  if ! have psql; then
    if ! apt_install postgresql-client; then
      missing+=("psql (the PostgreSQL client) is needed to create the database. As root: apt-get install -y postgresql-client")
      return
    fi
  fi
  local out
  if ! out=$(PGPASSWORD=${PGPASSWORD:-} psql_admin -c 'SELECT 1' 2>&1); then
    if grep -qiE 'password|authentication' <<<"$out" && is_root && trust_local_tcp && psql_admin -c 'SELECT 1' >/dev/null 2>&1; then
      :
    else
      missing+=("PostgreSQL on $PG_HOST:$PG_PORT does not let user postgres in without a password:
      $out
    Either trust local TCP in pg_hba.conf (lines 'host all all 127.0.0.1/32 trust' and
    'host all all ::1/128 trust' above the others, then pg_ctlcluster <ver> main reload), or set a
    password and point everything at it:
      export PGPASSWORD=secret
      export RECEIPTS_PG_URL='postgres://postgres:secret@127.0.0.1:5432/receipts?sslmode=disable'
      export TEST_DATABASE_URL='postgres://postgres:secret@127.0.0.1:5432/receipts_test?sslmode=disable'")
      return
    fi
  fi
  if [ -z "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DATABASE'")" ]; then
    say "creating database $PG_DATABASE"
    psql_admin -c "CREATE DATABASE \"$PG_DATABASE\"" >/dev/null
  fi
}

# ------------------------------------------------------------------- Redis

redis_up() {
  if have redis-cli; then
    [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]
  else
    tcp_open 127.0.0.1 "$REDIS_PORT"
  fi
}

ensure_redis() {
  redis_up && return
  if ! have redis-server; then
    if ! apt_install redis-server; then
      missing+=("Redis: not installed and not running on 127.0.0.1:$REDIS_PORT. As root: apt-get install -y redis-server (or start your own server there)")
      return
    fi
    # The package may have started one already.
    wait_for 3 redis_up && return
  fi
  local dir logfile
  if is_root && mkdir -p /var/lib/redis /var/log/redis 2>/dev/null && [ -w /var/lib/redis ]; then
    dir=/var/lib/redis logfile=/var/log/redis/ci.log
  else
    dir=$PWD/.devdata/redis logfile=$PWD/.devdata/redis/redis.log
    if ! mkdir -p "$dir" 2>/dev/null; then
      missing+=("Redis is installed but not running on 127.0.0.1:$REDIS_PORT, and $dir cannot be created. Start it: redis-server --daemonize yes --bind 127.0.0.1 --port $REDIS_PORT --save '' --appendonly no --dir <a writable dir>")
      return
    fi
  fi
  say "starting redis-server on 127.0.0.1:$REDIS_PORT (no persistence, log $logfile)"
  if ! redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
    --save "" --appendonly no --dir "$dir" --logfile "$logfile" >/dev/null || ! wait_for 10 redis_up; then
    missing+=("redis-server did not answer PING on 127.0.0.1:$REDIS_PORT within 10 s; see $logfile")
  fi
}

ensure_postgres
ensure_redis

if [ ${#missing[@]} -gt 0 ]; then
  say "the local services are not ready:"
  for m in "${missing[@]}"; do
    echo "  - $m" >&2
  done
  exit 1
fi
