#!/usr/bin/env bash
# Measures the local stack and, in the same run, the raw bounds it is
# compared with (BENCHMARKS.md): Redis (redis-benchmark), Postgres COPY and
# the persister's write path (go test -bench), then the whole pipeline
# driven by `receiptsctl load`. Raw outputs go to .run/bench/<time>/.
#
# Usage: scripts/bench.sh            (starts its own stack with scripts/run.sh --no-demo)
# Environment: BENCH_DURATION [30s], BENCH_USERS [100000], BENCH_CHANNELS [50]
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${BENCH_DURATION:-30s}
users=${BENCH_USERS:-100000}
channels=${BENCH_CHANNELS:-50}
pg_url=${RECEIPTS_PG_URL:-postgres://postgres@127.0.0.1:5432/receipts?sslmode=disable}
out=.run/bench/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
log() { echo "bench: $*" >&2; }

{
  echo "date: $(date -u +%FT%TZ)"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
  echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "go: $(go version | cut -d' ' -f3-)"
  echo "postgres: $(psql "$pg_url" -qtAc 'SHOW server_version') (shared_buffers $(psql "$pg_url" -qtAc 'SHOW shared_buffers'), synchronous_commit $(psql "$pg_url" -qtAc 'SHOW synchronous_commit'), fsync $(psql "$pg_url" -qtAc 'SHOW fsync'))"
  echo "redis: $(redis-cli info server | awk -F: '/redis_version/ {print $2}' | tr -d '\r') (appendonly $(redis-cli config get appendonly | tail -n 1))"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/machine.txt"

scripts/services.sh
go build -o bin/ ./cmd/...

# 1. Redis: plain HSET and SET, pipelined (-P 100), 50 connections; db 15 is
#    flushed afterwards so nothing is left behind.
log "redis-benchmark"
redis-benchmark -h 127.0.0.1 -p 6379 --dbnum 15 -P 100 -n 2000000 -r 100000 -q -t set,hset | tr '\r' '\n' | grep -E '^[A-Z]+: [0-9.]+ requests per second' | tee "$out/redis.txt"
redis-cli -n 15 flushdb >/dev/null

# 2. Postgres: COPY baseline and the persister's write path (500-row batches).
log "go test -bench (pkg/persister)"
go test -run '^$' -bench 'BenchmarkCopyBaseline|BenchmarkWritePath' -benchtime 200x -count 3 ./pkg/persister/ | tee "$out/pg.txt"

# 3. The pipeline: start a stack (no demo), then the load scenarios.
log "starting the stack"
RUN_NO_DEMO=1 scripts/run.sh >"$out/stack.log" 2>&1 &
stack=$!
trap 'kill -TERM $stack 2>/dev/null; wait $stack 2>/dev/null || true' EXIT
for _ in $(seq 120); do grep -q 'The stack is running' "$out/stack.log" && break; sleep 0.5; done
grep -q 'The stack is running' "$out/stack.log" || { cat "$out/stack.log"; exit 1; }

# cpu_snapshot prints "pid comm ticks" for the processes whose CPU we
# account: the services, the broker, Postgres backends and Redis.
cpu_snapshot() {
  local d comm
  for d in /proc/[0-9]*; do
    comm=$(cat "$d/comm" 2>/dev/null) || continue
    case $comm in
      kafkagate|persister|dlt-reconciler|devbroker|postgres|redis-server)
        awk -v p="${d#/proc/}" -v c="$comm" '{print p, c, $14 + $15}' "$d/stat" 2>/dev/null || true ;;
    esac
  done
}

# cpu_delta BEFORE AFTER SECONDS: cores used per process name over the interval.
cpu_delta() {
  awk -v hz="$(getconf CLK_TCK)" -v secs="$3" '
    NR == FNR { before[$1] = $3; next }
    { used[$2] += $3 - before[$1] }
    END { for (c in used) printf "%s %.2f cores\n", c, used[c] / hz / secs }' "$1" "$2" | sort
}

# persister_counters prints the persister's totals that explain its batching.
persister_counters() {
  curl -s 127.0.0.1:9101/metrics | awk '
    /^receipts_persister_records_consumed_total / {c = $2}
    /^receipts_persister_rows_written_total / {w = $2}
    /^receipts_persister_batch_records_count / {b = $2}
    /^receipts_persister_upsert_duration_seconds_sum / {us = $2}
    /^receipts_persister_upsert_duration_seconds_count / {uc = $2}
    END {print c + 0, w + 0, b + 0, us + 0, uc + 0}'
}

scenario() {
  local name=$1; shift
  log "scenario $name: $*"
  local prefix="b$(date +%s)$name-u"
  echo "bin/receiptsctl load --user-prefix $prefix --wait-lag --json --quiet $*" >"$out/$name.cmd"
  local pb pa
  pb=$(persister_counters)
  cpu_snapshot >"$out/$name.cpu.before"
  local t0=$SECONDS
  /usr/bin/time -f 'receiptsctl %U user %S sys seconds' -o "$out/$name.loadcpu" \
    bin/receiptsctl load --user-prefix "$prefix" --wait-lag --json --quiet "$@" \
    >"$out/$name.json" 2>"$out/$name.txt"
  cpu_snapshot >"$out/$name.cpu.after"
  cpu_delta "$out/$name.cpu.before" "$out/$name.cpu.after" "$((SECONDS - t0))" >"$out/$name.cpu"
  pa=$(persister_counters)
  echo "$pb $pa" | awk '{c = $6 - $1; w = $7 - $2; b = $8 - $3; us = $9 - $4; uc = $10 - $5
    printf "persister: %d records consumed, %d rows written (%.2f rows/record after dedupe), %d batches (%.0f records/batch), upsert %.1f ms avg\n",
      c, w, (c ? w / c : 0), b, (b ? c / b : 0), (uc ? us / uc * 1000 : 0)}' >>"$out/$name.cpu"
  # GC pauses of the gateway since it started (runtime/metrics quantiles).
  curl -s 127.0.0.1:9100/metrics | awk '/^receipts_kafkagate_gc_pause/ {printf "%s %s\n", $1, $2}' >"$out/$name.gc" || true
  cat "$out/$name.txt" "$out/$name.cpu" "$out/$name.loadcpu" "$out/$name.gc"
}

# The e2e lag measurement polls Postgres (up to 32 sampled keys every 20 ms),
# which costs some CPU: the pure throughput scenarios run without it.
common=(--users "$users" --channels "$channels" --zipf 1.1 --dup 0.2 --reorder 0.1)
scenario max-batch100 --duration "$duration" --rate 0 --batch 100 --concurrency 16 "${common[@]}"
scenario max-batch100-lag --duration "$duration" --rate 0 --batch 100 --concurrency 16 "${common[@]}" --pg-url "$pg_url"
scenario rate10k-batch100-lag --duration "$duration" --rate 10000 --batch 100 --concurrency 16 "${common[@]}" --pg-url "$pg_url"
scenario max-single --duration "$duration" --rate 0 --batch 1 --concurrency 32 "${common[@]}"
# Issue 7: single marks on their own routes from 64 concurrent clients
# (group commit shares their Redis and Kafka round trips).
scenario max-single-route64 --duration "$duration" --rate 0 --single --concurrency 64 "${common[@]}"

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
log "results in $out"
