#!/usr/bin/env bash
# What a Redis loss costs: on a stack of its own (scripts/run.sh without
# its demo), 10,000 users are warmed, then marks go on at a steady rate
# while Redis is flushed. Prints how long after the FLUSHALL the first
# mark of a warm user is answered with its state (it waits for the
# persister to write what was in flight), what the steady load saw
# (acknowledged, realtime_degraded and failed marks, latencies) and the
# gateway's restore metrics.
#
# Usage: scripts/bench-restore.sh
# Environment: RESTORE_RATE [5000], RESTORE_USERS [10000]; the stack's
#   ports as scripts/run.sh (RUN_API_PORT 8080, RUN_BROKER_PORT 9092,
#   RUN_ADMIN_PORTS "9100 9101 9102"); its Redis (RECEIPTS_REDIS_URL's
#   server) is flushed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/stack.sh
source scripts/lib/stack.sh
rate=${RESTORE_RATE:-5000}
users=${RESTORE_USERS:-10000}
export RUN_API_PORT=${RUN_API_PORT:-8080} RUN_BROKER_PORT=${RUN_BROKER_PORT:-9092} RUN_ADMIN_PORTS=${RUN_ADMIN_PORTS:-9100 9101 9102}
read -r gate_admin _ <<<"$RUN_ADMIN_PORTS"
api=http://127.0.0.1:$RUN_API_PORT
out=.run/bench-restore/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
scripts/services.sh
go build -o bin/ ./cmd/...
start_stack "$out/stack.log"
prefix="rc$(date +%s)-u"
load=(--target "$api" --brokers "127.0.0.1:$RUN_BROKER_PORT" --user-prefix "$prefix" --users "$users" --channels 20)
bin/receiptsctl load "${load[@]}" --duration 8s --rate 0 --batch 100 --concurrency 16 --quiet >/dev/null 2>&1
bin/receiptsctl load "${load[@]}" --duration 20s --rate "$rate" --batch 50 --concurrency 16 --json --quiet >"$out/load.json" 2>"$out/load.txt" &
lp=$!
sleep 8
user=${prefix}17
ch=$(redis-cli --raw hkeys "receipts:u:{$user}" | grep -v '^:' | head -1)
t0=$(date +%s%N)
redis-cli flushall >/dev/null
calls=0
while :; do
  calls=$((calls + 1))
  answer=$(curl -s -X POST "$api/v1/users/$user/channels/$ch/read" -H 'Content-Type: application/json' -d '{"seq": 1}')
  if grep -q '"state"' <<<"$answer"; then break; fi
done
t1=$(date +%s%N)
echo "first mark answered with its state after the FLUSHALL: $(((t1 - t0) / 1000000)) ms ($calls calls)" | tee "$out/summary.txt"
wait "$lp"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("steady load at %s/s through it: %d acknowledged, %d realtime_degraded, %d failed; p99 %.1f ms, max %.1f ms" % (sys.argv[2], r["acked"], r["realtime_degraded"], r["failed"], r["latency"]["p99_ms"], r["latency"]["max_ms"]))' "$out/load.json" "$rate" | tee -a "$out/summary.txt"
curl -s "127.0.0.1:$gate_admin/metrics" | grep -E '^receipts_kafkagate_(restores_total|redis_losses_total|restore_wait_seconds_(sum|count))' | tee -a "$out/summary.txt"
