#!/usr/bin/env bash
# Measures the local stack and, in the same run, the raw bounds it is
# compared with (BENCHMARKS.md): Redis (redis-benchmark), Postgres COPY and
# the persister's write path (go test -bench), then the whole pipeline
# driven by `receiptsctl load`. Raw outputs go to .run/bench/<time>/.
#
# Usage: scripts/bench.sh            (starts its own stack with scripts/run.sh --no-demo)
# Environment: BENCH_DURATION [30s], BENCH_USERS [100000], BENCH_CHANNELS [50]
#   BENCH_ROUNDS [1]          rounds of the throughput scenarios (gateway and
#                             HTTP floor interleaved; 3 for a reported figure)
#   BENCH_PREFILL_USERS [0]   when > 0 (e.g. 10000000): the cost-growth pair,
#                             max batched and single marks with 10k users'
#                             state in Redis and Postgres, then with this
#                             many; run last, and the
#                             prefilled keys and rows are deleted after;
#                             BENCH_PREFILL_ROUNDS [BENCH_ROUNDS, at least 1]
#                             runs of each level's pair
#   BENCH_LAG_RATE [0]        when > 0 (e.g. 50000): e2e lag (ack -> Postgres)
#                             at this rate for BENCH_LAG_DURATION [5m]
#   BENCH_TAIL_RATE [0]       when > 0: single marks at this rate for
#                             BENCH_TAIL_DURATION [10m], p99.9 vs p99 and the
#                             GC pauses (half of the max)
#   BENCH_PROFILE [max-batch100-c64-r1 max-single-route64-r1 tail-*]
#                             scenarios (glob patterns) during which the
#                             gateway's CPU is profiled (/debug/pprof on its
#                             admin port) for BENCH_PROFILE_SECONDS [10],
#                             from 3 s in: <scenario>.gate.pprof and .top.txt
#   RUN_API_PORT, RUN_BROKER_PORT, RUN_ADMIN_PORTS   as scripts/run.sh
#   BENCH_FLOOR_PORT [8090]   the HTTP floor (receiptsbench http-floor)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/stack.sh
. scripts/lib/stack.sh

duration=${BENCH_DURATION:-30s}
users=${BENCH_USERS:-100000}
channels=${BENCH_CHANNELS:-50}
rounds=${BENCH_ROUNDS:-1}
prefill_users=${BENCH_PREFILL_USERS:-0}
prefill_rounds=${BENCH_PREFILL_ROUNDS:-$((rounds > 0 ? rounds : 1))}
lag_rate=${BENCH_LAG_RATE:-0}
tail_rate=${BENCH_TAIL_RATE:-0}
profile_scenarios=${BENCH_PROFILE-max-batch100-c64-r1 max-single-route64-r1 tail-*}
profile_seconds=${BENCH_PROFILE_SECONDS:-10}
export RUN_API_PORT=${RUN_API_PORT:-8080} RUN_BROKER_PORT=${RUN_BROKER_PORT:-9092} RUN_ADMIN_PORTS=${RUN_ADMIN_PORTS:-9100 9101 9102}
# The services serve /debug/pprof only with --pprof; run.sh's services
# take it from the environment (also a build from before the flag, which
# served pprof anyway, starts with it set).
export RECEIPTS_PPROF=true
read -r gate_admin persister_admin _ <<<"$RUN_ADMIN_PORTS"
gate=http://127.0.0.1:$RUN_API_PORT
floor=http://127.0.0.1:${BENCH_FLOOR_PORT:-8090}
target=$gate
redis_url=${RECEIPTS_REDIS_URL:-redis://127.0.0.1:6379/0}
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
start_stack "$out/stack.log"

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
  curl -s "127.0.0.1:$persister_admin/metrics" | awk '
    /^receipts_persister_records_consumed_total / {c = $2}
    /^receipts_persister_rows_written_total / {w = $2}
    /^receipts_persister_batch_records_count / {b = $2}
    /^receipts_persister_upsert_duration_seconds_sum / {us = $2}
    /^receipts_persister_upsert_duration_seconds_count / {uc = $2}
    END {print c + 0, w + 0, b + 0, us + 0, uc + 0}'
}

# profile_gate NAME: the gateway's CPU profile, from 3 s into the load for
# profile_seconds, and its top functions (flat and cumulative).
profile_gate() {
  sleep 3
  curl -sf -o "$out/$1.gate.pprof" "127.0.0.1:$gate_admin/debug/pprof/profile?seconds=$profile_seconds" || return 0
  { go tool pprof -top -nodecount=40 bin/kafkagate "$out/$1.gate.pprof"
    echo; go tool pprof -top -cum -nodecount=40 bin/kafkagate "$out/$1.gate.pprof"; } >"$out/$1.gate.top.txt" 2>/dev/null || true
}

profiled() {
  local pat
  for pat in $profile_scenarios; do
    # shellcheck disable=SC2053 # a glob on purpose
    [[ $1 == $pat ]] && return 0
  done
  return 1
}

scenario() {
  local name=$1; shift
  log "scenario $name: $*"
  local prefix="b$(date +%s)$name-u"
  echo "bin/receiptsctl load --target $target --user-prefix $prefix --wait-lag --json --quiet $*" >"$out/$name.cmd"
  local pb pa prof=
  pb=$(persister_counters)
  # Redis' own time per command over the scenario (INFO commandstats).
  redis-cli config resetstat >/dev/null
  if [ "$target" = "$gate" ] && profiled "$name"; then
    profile_gate "$name" &
    prof=$!
  fi
  cpu_snapshot >"$out/$name.cpu.before"
  local t0=$SECONDS
  /usr/bin/time -f 'receiptsctl %U user %S sys seconds' -o "$out/$name.loadcpu" \
    bin/receiptsctl load --target "$target" --brokers "127.0.0.1:$RUN_BROKER_PORT" --user-prefix "$prefix" --wait-lag --json --quiet "$@" \
    >"$out/$name.json" 2>"$out/$name.txt"
  cpu_snapshot >"$out/$name.cpu.after"
  redis-cli info commandstats | tr -d '\r' | grep '^cmdstat_' >"$out/$name.redis" || true
  if [ -n "$prof" ]; then wait "$prof" || true; fi
  cpu_delta "$out/$name.cpu.before" "$out/$name.cpu.after" "$((SECONDS - t0))" >"$out/$name.cpu"
  pa=$(persister_counters)
  echo "$pb $pa" | awk '{c = $6 - $1; w = $7 - $2; b = $8 - $3; us = $9 - $4; uc = $10 - $5
    printf "persister: %d records consumed, %d rows written (%.2f rows/record after dedupe), %d batches (%.0f records/batch), upsert %.1f ms avg\n",
      c, w, (c ? w / c : 0), b, (b ? c / b : 0), (uc ? us / uc * 1000 : 0)}' >>"$out/$name.cpu"
  # GC pauses of the gateway since it started: the Go collector's histogram
  # (runtime/metrics), its count and the upper bound of the bucket holding
  # each quantile.
  curl -s "127.0.0.1:$gate_admin/metrics" | awk -F'[{}" ]+' '
    /^go_sched_pauses_total_gc_seconds_bucket/ { le[n] = $3; cum[n] = $NF; n++ }
    END {
      if (!n) exit
      total = cum[n - 1]
      printf "gc pauses: %d", total
      split("0.5 0.99 0.999 1", qs, " ")
      for (i = 1; i <= 4; i++) {
        for (j = 0; j < n; j++) if (cum[j] >= qs[i] * total) break
        printf ", p%s <= %s s", qs[i] * 100, le[j]
      }
      printf "\n"
    }' >"$out/$name.gc" || true
  cat "$out/$name.txt" "$out/$name.cpu" "$out/$name.loadcpu" "$out/$name.gc"
}

# The e2e lag measurement polls Postgres (up to 32 sampled keys every 20 ms),
# which costs some CPU: the pure throughput scenarios run without it.
common=(--users "$users" --channels "$channels" --zipf 1.1 --dup 0.2 --reorder 0.1)
scenario max-batch100-lag --duration "$duration" --rate 0 --batch 100 --concurrency 16 "${common[@]}" --pg-url "$pg_url"
scenario rate10k-batch100-lag --duration "$duration" --rate 10000 --batch 100 --concurrency 16 "${common[@]}" --pg-url "$pg_url"
scenario max-single --duration "$duration" --rate 0 --batch 1 --concurrency 32 "${common[@]}"

# The throughput scenarios, each beside the HTTP floor
# (receiptsbench http-floor: the same net/http server answering fixed marks,
# driven by the same load tool: what HTTP alone costs on this machine),
# interleaved round by round so both see the same machine.
bin/receiptsbench http-floor --addr "${floor#http://}" >"$out/floor.log" 2>&1 &
floor_pid=$!
trap 'kill -TERM $floor_pid 2>/dev/null; kill -TERM $stack 2>/dev/null; wait $stack 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q serving "$out/floor.log" && break; sleep 0.1; done
for r in $(seq "$rounds"); do
  target=$gate
  scenario "max-batch100-r$r" --duration "$duration" --rate 0 --batch 100 --concurrency 16 "${common[@]}"
  scenario "max-batch100-c64-r$r" --duration "$duration" --rate 0 --batch 100 --concurrency 64 "${common[@]}"
  scenario "max-single-route64-r$r" --duration "$duration" --rate 0 --single --concurrency 64 "${common[@]}"
  target=$floor
  scenario "floor-batch100-r$r" --duration "$duration" --rate 0 --batch 100 --concurrency 16 "${common[@]}"
  scenario "floor-batch100-c64-r$r" --duration "$duration" --rate 0 --batch 100 --concurrency 64 "${common[@]}"
  scenario "floor-single-route64-r$r" --duration "$duration" --rate 0 --single --concurrency 64 "${common[@]}"
done
target=$gate

# Tails over a long run at a fixed rate of single marks. Before
# the lag scenario: that one offers 50k events/s, more than a slow host
# sustains, and the backlog and the larger tables it leaves would be the
# persister's and Postgres' work during the tail.
if [ "$tail_rate" != 0 ]; then
  scenario "tail-rate$tail_rate-single-route64" --duration "${BENCH_TAIL_DURATION:-10m}" --rate "$tail_rate" --single --concurrency 64 "${common[@]}"
fi

# E2e lag (ack -> Postgres) sustained at a fixed rate.
if [ "$lag_rate" != 0 ]; then
  scenario "lag-rate$lag_rate-batch100" --duration "${BENCH_LAG_DURATION:-5m}" --rate "$lag_rate" --batch 100 --concurrency 64 "${common[@]}" --pg-url "$pg_url"
fi

# Cost growth: the same load against stores holding 10k, then many users'
# state: Redis and Postgres alike, as in production (with Redis alone the
# drift sweep spent the measured run repairing Postgres). Last, because
# the prefilled rows are deleted afterwards.
if [ "$prefill_users" -gt 0 ]; then
  pf="bpf$(date +%s)-"
  for n in 10000 "$prefill_users"; do
    log "prefill: $n users' state"
    bin/receiptsctl load prefill --users "$n" --user-prefix "$pf" --redis-url "$redis_url" --pg-url "$pg_url" --quiet | tee "$out/prefill-$n.txt"
    redis-cli info memory | grep -E '^used_memory:' | tr -d '\r' >>"$out/prefill-$n.txt"
    psql "$pg_url" -qtAc "SELECT 'read_receipts rows: ' || count(*) FROM read_receipts" >>"$out/prefill-$n.txt"
    for r in $(seq "$prefill_rounds"); do
      scenario "prefill$n-batch100-r$r" --duration "$duration" --rate 0 --batch 100 --concurrency 16 "${common[@]}"
      scenario "prefill$n-single-route64-r$r" --duration "$duration" --rate 0 --single --concurrency 64 "${common[@]}"
    done
  done
  log "deleting the prefilled keys and rows"
  redis-cli --scan --pattern "*u:{$pf*" | xargs -r -n 10000 redis-cli unlink >/dev/null
  psql "$pg_url" -qc "DELETE FROM read_receipts WHERE user_id LIKE '$pf%'" -c "VACUUM read_receipts"
fi

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"

# The summary table BENCHMARKS.md quotes: one row per scenario, from the
# load tool's text summary and the CPU accounting of the same interval.
{
  echo "| scenario | acked events/s | requests/s | request p50 / p99 / p99.9 | e2e lag p50 / p95 | gateway cores | gateway µs CPU per event | whole stack cores |"
  echo "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: |"
  for f in "$out"/*.cmd; do
    name=$(basename "$f" .cmd)
    awk -v name="$name" '
      # seconds of a Go duration such as 20.01s, 5m0.23s or 1h0m0s
      function secs_of(d,   t, n) {
        t = 0
        while (match(d, /^[0-9.]+(h|ms|m|s|µs|us|ns)/)) {
          n = substr(d, 1, RLENGTH); d = substr(d, RLENGTH + 1)
          if (n ~ /ms$/) t += n / 1e3; else if (n ~ /(µs|us)$/) t += n / 1e6; else if (n ~ /ns$/) t += n / 1e9
          else if (n ~ /h$/) t += n * 3600; else if (n ~ /m$/) t += n * 60; else t += n
        }
        return t
      }
      FILENAME ~ /\.txt$/ && /^rate:/ { ev = $2; for (i = 1; i <= NF; i++) if ($i ~ /^\(/) { rq = substr($i, 2) } ; el = $6 }
      FILENAME ~ /\.txt$/ && /^latency:/ { p50 = $3; p99 = $7; p999 = $9 }
      FILENAME ~ /\.txt$/ && /^e2e lag:/ { l50 = $4; l95 = $6 }
      FILENAME ~ /\.cpu$/ && $1 == "kafkagate" { gw = $2 }
      FILENAME ~ /\.cpu$/ && $3 == "cores" { all += $2 }
      END {
        secs = secs_of(el); if (secs == 0) secs = 1
        printf "| %s | %s | %.0f | %s / %s / %s | %s / %s | %.2f | %.1f | %.2f |\n", name, ev, rq / secs, p50, p99, p999,
          (l50 == "" ? "-" : l50), (l95 == "" ? "-" : l95), gw, (ev > 0 ? gw * 1e6 / ev : 0), all
      }' "$out/$name.txt" "$out/$name.cpu"
  done
} >"$out/summary.md"
cat "$out/summary.md"
log "results in $out"
