#!/usr/bin/env bash
# `make test-clients`: the TypeScript client (clients/ts) against a real
# stack of its own, then in a headless Chromium.
#
#  1. builds bin/ (go build: incremental, so cheap after make build) and
#     makes sure Postgres and Redis are up (scripts/services.sh);
#  2. installs Debian's chromium when missing (as root, apt-get);
#  3. npm ci when package-lock.json changed (scripts/lib/npm.sh; cache in
#     .cache/npm), compiles the package and its tests (tsc) and bundles the
#     browser test page (esbuild);
#  4. starts devbroker and kafkagate on free ports, on a Postgres database
#     and a Redis key prefix of this run alone (dropped and deleted at the
#     end), with a server token (the tests' chat backend), an HS256 key for
#     end-user tokens (the tests mint them: the browser page holds one, as
#     an app would) and CORS allowed for the test page's origin;
#  5. runs node --test over clients/ts/dist/test/.
#
# The persister and the reconciler are not started: the client's calls are
# answered by the gateway (Redis and Kafka) alone.
# Environment: CHROMIUM (/usr/bin/chromium), READY_TIMEOUT (60 s),
# TEST_REDIS_URL (redis://127.0.0.1:6379/1, the tests' logical database).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS

say() { echo "clients-test: $*" >&2; }
die() { say "$*"; exit 1; }

# 1. Binaries, Postgres, Redis.
make -s build
scripts/services.sh

# 2. Chromium, for the browser test.
chromium=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing chromium (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    die "$chromium is missing: apt-get install -y chromium (as root)"
  fi
fi

# 3. The package, its tests and the browser page.
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
[ "$node_major" -ge 20 ] || die "Node.js >= 20 is needed (found: $(node --version 2>/dev/null || echo none))"
# shellcheck source=scripts/lib/npm.sh
source scripts/lib/npm.sh
ts_deps
(cd clients/ts && rm -rf dist && npm run --silent build && npm run --silent bundle:browser)

# 4. The stack.
free_port() { node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'; }
broker_port=$(free_port) api_port=$(free_port) admin_port=$(free_port) page_port=$(free_port)
dir=$(mktemp -d)
run=clients$$x$RANDOM
pg_admin="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
pg_url="postgres://postgres@127.0.0.1:5432/receipts_$run?sslmode=disable"
redis_url=${TEST_REDIS_URL:-redis://127.0.0.1:6379/1}
redis_db=${redis_url##*/}
prefix="$run:"
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf 'clients-test:%s\n' "$token" >"$dir/tokens"
jwt_key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$jwt_key" >"$dir/jwt.key"
jwt_audience=receipts-clients-test

pids=()
cleanup() {
  local rc=$? i f
  trap - EXIT INT TERM
  # The gateway first, the broker last: the gateway flushes to it.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  if [ "$rc" != 0 ]; then
    for f in "$dir"/*.log; do echo "---- last lines of $(basename "$f") ----" >&2; tail -n 30 "$f" >&2; done
  fi
  psql -q "$pg_admin" -c "DROP DATABASE IF EXISTS \"receipts_$run\" WITH (FORCE)" >/dev/null 2>&1 || true
  redis-cli -n "$redis_db" --scan --pattern "$prefix*" | xargs -r -n 500 redis-cli -n "$redis_db" del >/dev/null || true
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Leftovers of runs that died without cleaning up (their pid is in the name).
for db in $(psql -At "$pg_admin" -c "SELECT datname FROM pg_database WHERE datname ~ '^receipts_clients[0-9]+x[0-9]+\$'"); do
  old=${db#receipts_} pid=${old#clients}
  kill -0 "${pid%%x*}" 2>/dev/null && continue
  psql -q "$pg_admin" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
  redis-cli -n "$redis_db" --scan --pattern "$old:*" | xargs -r -n 500 redis-cli -n "$redis_db" del >/dev/null || true
done
psql -q "$pg_admin" -c "CREATE DATABASE \"receipts_$run\"" >/dev/null
bin/persister migrate --pg-url "$pg_url" >"$dir/migrate.log" 2>&1

bin/devbroker --listen-port "$broker_port" --data-dir "$dir/kafka" >"$dir/devbroker.log" 2>&1 &
pids+=($!)
page_origin=http://127.0.0.1:$page_port
bin/kafkagate --listen "127.0.0.1:$api_port" --admin-addr "127.0.0.1:$admin_port" \
  --brokers "127.0.0.1:$broker_port" --pg-url "$pg_url" --redis-url "$redis_url" --redis-prefix "$prefix" \
  --spool-dir "$dir/spool" --auth-token-file "$dir/tokens" \
  --auth-jwt-hs256-key-file "$dir/jwt.key" --auth-jwt-audience "$jwt_audience" --cors-allowed-origins "$page_origin" \
  --log-level warn >"$dir/kafkagate.log" 2>&1 &
pids+=($!)
deadline=$((SECONDS + ${READY_TIMEOUT:-60}))
until curl -fs -o /dev/null --max-time 2 "http://127.0.0.1:$admin_port/readyz"; do
  kill -0 "${pids[1]}" 2>/dev/null || die "kafkagate exited"
  [ "$SECONDS" -lt "$deadline" ] || die "kafkagate not ready within ${READY_TIMEOUT:-60} s"
  sleep 0.2
done
say "stack ready in $((SECONDS - start)) s: API 127.0.0.1:$api_port, page origin $page_origin"

# 5. The tests.
(cd clients/ts && RECEIPTS_API="http://127.0.0.1:$api_port" RECEIPTS_TOKEN="$token" RECEIPTS_RUN="$run" \
  RECEIPTS_JWT_KEY="$jwt_key" RECEIPTS_JWT_AUDIENCE="$jwt_audience" \
  PAGE_PORT="$page_port" CHROMIUM="$chromium" node --test --test-concurrency=1 --test-timeout=60000 --test-reporter=spec dist/test/*.test.js)
say "passed in $((SECONDS - start)) s"
