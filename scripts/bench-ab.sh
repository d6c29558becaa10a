#!/usr/bin/env bash
# Same-run A/B of the gateway: this tree's kafkagate beside another
# revision's, on one stack (scripts/run.sh without its demo: devbroker,
# Postgres, Redis, persister, dlt-reconciler), driven by the same load in
# turns, the order reversed every other round, so both see the same
# machine. Prints each round and the medians; raw outputs go to
# .run/bench-ab/<time>/.
#
# Usage: scripts/bench-ab.sh REV
# Environment: AB_ROUNDS [4], AB_DURATION [15s], AB_USERS [100000],
#   AB_CHANNELS [50], AB_SCENARIOS ["batch single"]
#     batch:  100 marks a call, 16 callers, as fast as they go
#     single: one mark a call (the REST route), 64 callers
#     unread: GET /v1/users/U/unread of one user in 1,000 channels (10
#             messages, 2 mentions and a deleted message each), 1 caller
#   each on users new to the stack (a prefix per run: every user's first
#   mark is in the run) and again on the same users (warm).
#   RUN_API_PORT, RUN_BROKER_PORT, RUN_ADMIN_PORTS as scripts/run.sh; the
#   two gateways under test listen on RUN_API_PORT+1 and +2.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/stack.sh
source scripts/lib/stack.sh

rev=${1:?usage: scripts/bench-ab.sh REV}
rounds=${AB_ROUNDS:-4}
duration=${AB_DURATION:-15s}
users=${AB_USERS:-100000}
channels=${AB_CHANNELS:-50}
scenarios=${AB_SCENARIOS:-batch single}
export RUN_API_PORT=${RUN_API_PORT:-8080} RUN_BROKER_PORT=${RUN_BROKER_PORT:-9092} RUN_ADMIN_PORTS=${RUN_ADMIN_PORTS:-9100 9101 9102}
out=.run/bench-ab/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
log() { echo "bench-ab: $*" >&2; }

old=$(git rev-parse --short=12 "$rev")
new=$(git rev-parse --short=12 HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then new="$new+changes"; fi
{
  echo "date: $(date -u +%FT%TZ)"
  echo "nproc: $(nproc); cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
  echo "new: $new; old: $old"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/machine.txt"

scripts/services.sh
go build -o bin/ ./cmd/...
src=.cache/ab/src-$old
if [ ! -x ".cache/ab/bin-$old/kafkagate" ]; then
  log "building kafkagate of $old"
  rm -rf "$src" && mkdir -p "$src"
  git archive "$old" | tar -x -C "$src"
  (cd "$src" && go build -o "../bin-$old/" ./cmd/kafkagate)
fi

start_stack "$out/stack.log"
gates=()
start_gate() { # NAME BINARY PORT ADMINPORT
  local dir=$out/spool-$1
  mkdir -p "$dir"
  "$2" --listen "127.0.0.1:$3" --admin-addr "127.0.0.1:$4" --brokers "127.0.0.1:$RUN_BROKER_PORT" \
    --spool-dir "$dir" --log-level warn >"$out/gate-$1.log" 2>&1 &
  gates+=($!)
  for _ in $(seq 100); do curl -sf "127.0.0.1:$4/readyz" >/dev/null && return 0; sleep 0.2; done
  cat "$out/gate-$1.log"
  return 1
}
trap 'kill -TERM "${gates[@]}" 2>/dev/null; kill -TERM $stack 2>/dev/null; wait $stack 2>/dev/null || true' EXIT
start_gate new bin/kafkagate $((RUN_API_PORT + 1)) 9111
start_gate old ".cache/ab/bin-$old/kafkagate" $((RUN_API_PORT + 2)) 9112
declare -A port=([new]=$((RUN_API_PORT + 1)) [old]=$((RUN_API_PORT + 2)))

unread_user="abu$(date +%s)-1000"
if [[ " $scenarios " == *" unread "* ]]; then
  bin/receiptsbench unread-bench --target "http://127.0.0.1:${port[new]}" --user "$unread_user" --channels 1000 \
    --deletions 1 --duration 1s --concurrency 1 >"$out/unread-setup.txt"
fi

run() { # WHICH SCENARIO PREFIX: prints events/s (unread: calls/s) and p99 ms
  if [ "$2" = unread ]; then
    bin/receiptsbench unread-bench --target "http://127.0.0.1:${port[$1]}" --user "$unread_user" --no-setup \
      --channels 1000 --duration "$duration" --concurrency 1 >"$out/$3.txt" 2>&1
    python3 -c 'import re,sys; t=open(sys.argv[1]).read(); print(re.search(r"([0-9.]+)/s", t).group(1), (re.search(r"p99[ =:]*([0-9.]+)", t) or [None, "-"])[1])' "$out/$3.txt"
    return
  fi
  local args=(--duration "$duration" --rate 0 --users "$users" --channels "$channels" --zipf 1.1 --dup 0.2 --reorder 0.1)
  case $2 in
    batch) args+=(--batch 100 --concurrency 16) ;;
    single) args+=(--single --concurrency 64) ;;
  esac
  bin/receiptsctl load --target "http://127.0.0.1:${port[$1]}" --brokers "127.0.0.1:$RUN_BROKER_PORT" \
    --user-prefix "$3" --json --quiet "${args[@]}" >"$out/$3.json" 2>"$out/$3.txt"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.0f %.2f" % (r["events_per_sec"], r["latency"]["p99_ms"]))' "$out/$3.json"
}

echo "round scenario users build events/s p99_ms" | tee "$out/rounds.txt"
for r in $(seq "$rounds"); do
  order="new old"
  if (( r % 2 == 0 )); then order="old new"; fi
  for sc in $scenarios; do
    for which in $order; do
      prefix="ab$(date +%s)$which$sc-u"
      read -r eps p99 <<<"$(run "$which" "$sc" "$prefix")"
      if [ "$sc" != unread ]; then echo "$r $sc fresh $which $eps $p99" | tee -a "$out/rounds.txt"; fi
      read -r eps p99 <<<"$(run "$which" "$sc" "$prefix")"
      echo "$r $sc warm $which $eps $p99" | tee -a "$out/rounds.txt"
    done
  done
done

echo
echo "medians (events/s), new ÷ old per round:"
python3 - "$out/rounds.txt" <<'EOF' | tee "$out/summary.txt"
import sys, statistics, collections
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
by = collections.defaultdict(dict)
for r, sc, u, which, eps, p99 in rows:
    by[(sc, u)].setdefault(which, {})[r] = float(eps)
for (sc, u), d in sorted(by.items()):
    ratios = [d["new"][r] / d["old"][r] for r in d["new"] if r in d.get("old", {})]
    print(f"{sc:6} {u:5}  new {statistics.median(d['new'].values()):9.0f}  old {statistics.median(d['old'].values()):9.0f}  "
          f"new/old median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")
EOF
