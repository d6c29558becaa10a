#!/usr/bin/env bash
# Channels and counts figures for BENCHMARKS.md, against a running
# stack (scripts/run.sh --no-demo): marks/s and notices/s in the same run,
# then GET /v1/users/U/unread latency for users with 10, 100 and 1,000
# channels under a steady background mark load.
#   TARGET (http://127.0.0.1:8080)  BROKERS (127.0.0.1:9092)  DURATION (20s)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${TARGET:-http://127.0.0.1:8080}
brokers=${BROKERS:-127.0.0.1:9092}
duration=${DURATION:-20s}
run=$(date +%s)
ctl=bin/receiptsctl
bench=bin/receiptsbench

echo "== marks alone ($duration, open loop at an unreachable 50,000/s: the achieved rate is the capacity)"
$ctl load --target "$target" --brokers "$brokers" --duration "$duration" --rate 50000 --users 10000 --channels 50 \
  --batch 50 --concurrency 8 --user-prefix "bm$run-" 2>&1 | grep -E "events/s|latency|errors" | tail -4
echo "== notices alone ($duration, closed loop, 8 callers x 50 notices, 1 mention each)"
$bench notices --target "$target" --duration "$duration" --concurrency 8 --batch 50 --channels 1000 --users 10000 --mentions 1 --prefix "bn$run-"
echo "== persister lag after both (must return to 0)"
start=$(date +%s)
until $ctl lag --brokers "$brokers" | head -1 | grep -q "total lag 0$"; do
  if [ $(( $(date +%s) - start )) -gt 120 ]; then echo "lag did not return to 0 in 120s"; break; fi
  sleep 1
done
echo "lag back to 0 after $(( $(date +%s) - start ))s: $($ctl lag --brokers "$brokers" | head -1)"

echo "== GET unread under a steady background load of 2,000 marks/s"
$ctl load --target "$target" --brokers "$brokers" --duration 600s --rate 2000 --users 10000 --channels 50 \
  --batch 20 --concurrency 4 --user-prefix "bg$run-" >/dev/null 2>&1 &
bg=$!
trap 'kill $bg 2>/dev/null || true' EXIT
for n in 10 100 1000; do
  $bench unread-bench --target "$target" --user "ub$run-$n" --channels "$n" --duration "$duration" --concurrency 1
done
kill $bg 2>/dev/null || true
