#!/usr/bin/env bash
# Read-by and ticks figures for BENCHMARKS.md, against a running
# stack (scripts/run.sh --no-demo):
#  1. GET …/messages/{seq}/receipts and GET …/ticks of a 50-member channel,
#     beside GET …/unread (one member, that channel) and a Redis PING,
#     interleaved in ROUNDS rounds, 1 caller each, while `receiptsctl load`
#     offers a steady BG_RATE marks/s elsewhere and 10 messages/s are posted
#     and read in the channel itself (receiptsbench readby-bench);
#  2. once that load has stopped: cursor-move log rows per mark for channels
#     of 4, 50, 51 and 1,000 members (receiptsbench movelog-bench; rows counted
#     in cursor_moves and cross-checked with the persister's
#     receipts_persister_cursor_moves_logged_total).
#   TARGET (http://127.0.0.1:8080)  BROKERS (127.0.0.1:9092)
#   PG_URL (postgres://postgres@127.0.0.1:5432/receipts?sslmode=disable)
#   REDIS_URL (redis://127.0.0.1:6379/0)  METRICS (http://127.0.0.1:9101/metrics)
#   DURATION (5s per operation per round)  ROUNDS (3)  BG_RATE (1000)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${TARGET:-http://127.0.0.1:8080}
brokers=${BROKERS:-127.0.0.1:9092}
pg_url=${PG_URL:-postgres://postgres@127.0.0.1:5432/receipts?sslmode=disable}
redis_url=${REDIS_URL:-redis://127.0.0.1:6379/0}
metrics=${METRICS:-http://127.0.0.1:9101/metrics}
duration=${DURATION:-5s}
rounds=${ROUNDS:-3}
bg_rate=${BG_RATE:-1000}
run=$(date +%s)
ctl=bin/receiptsctl
bench=bin/receiptsbench

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- cmd pkg || echo ' (+ local changes)'), $(nproc) CPUs"
echo "== uptime before: $(uptime)"

echo "== 1. receipts and ticks of a 50-member channel under $bg_rate marks/s of background load"
# The background outlasts the measurement (setup + 4 operations x rounds x
# duration); its summary, printed at its end, is the rate it achieved.
secs=${duration%s}
bg_for=$((secs * 4 * rounds + 30))s
bg_out=$(mktemp)
$ctl load --target "$target" --duration "$bg_for" --rate "$bg_rate" --users 10000 --channels 50 \
  --batch 20 --concurrency 4 --user-prefix "rbg$run-" --quiet >"$bg_out" 2>&1 &
bg=$!
trap 'kill $bg 2>/dev/null || true; rm -f "$bg_out"' EXIT
sleep 2
$bench readby-bench --target "$target" --redis-url "$redis_url" --channel "rb$run" --members 50 --messages 200 \
  --duration "$duration" --rounds "$rounds" --channel-rate 10
echo "== uptime during: $(uptime)"
wait $bg || true
echo "background load (receiptsctl load --rate $bg_rate --batch 20 --concurrency 4, for $bg_for):"
grep -E "events/s|latency|errors" "$bg_out" | sed 's/^/  /' | head -6

echo "== 2. cursor-move log rows per mark (nothing else marking)"
$bench movelog-bench --target "$target" --brokers "$brokers" --pg-url "$pg_url" --metrics-url "$metrics" \
  --prefix "ml$run-" --sizes 4,50,51,1000 --events 2000 --rate 500 --batch 20
echo "== uptime after: $(uptime)"
