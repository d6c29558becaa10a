#!/usr/bin/env bash
# Takes the CPU profiles a profile-guided build of the services would use
# (Go's PGO): it starts a stack (scripts/run.sh, no demo), drives it with
# batched calls, then with single marks, takes a CPU profile of kafkagate
# and of the persister under each load from their admin ports
# (/debug/pprof/profile) and merges each service's two into
# .run/pgo/<time>/<service>.pgo. Nothing is built with them by default:
# on this project's 2-core hosts the gain was within the noise
# (BENCHMARKS.md, "PGO"), against a first build twice as long.
# To try them on your hardware:
#   go build -pgo=.run/pgo/<time>/kafkagate.pgo -o bin/ ./cmd/kafkagate
# or copy one to cmd/<service>/default.pgo, which `go build` then uses.
#
# Usage: scripts/pgo.sh
# Environment: PGO_SECONDS [25] profile length per load; RUN_API_PORT,
#   RUN_BROKER_PORT, RUN_ADMIN_PORTS as scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/stack.sh
. scripts/lib/stack.sh

secs=${PGO_SECONDS:-25}
export RUN_API_PORT=${RUN_API_PORT:-8080} RUN_BROKER_PORT=${RUN_BROKER_PORT:-9092} RUN_ADMIN_PORTS=${RUN_ADMIN_PORTS:-9100 9101 9102}
# The services serve /debug/pprof only with --pprof; run.sh's services
# take it from the environment (also a build from before the flag, which
# served pprof anyway, starts with it set).
export RECEIPTS_PPROF=true
read -r gate_admin persister_admin _ <<<"$RUN_ADMIN_PORTS"
out=.run/pgo/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
log() { echo "pgo: $*" >&2; }

scripts/services.sh
go build -o bin/ ./cmd/...
log "starting the stack"
start_stack "$out/stack.log"

# profile LOAD_NAME LOAD_FLAGS...: the load runs past both ends of the
# profiles, so they see only the steady state.
profile() {
  local name=$1; shift
  log "load $name: $*"
  bin/receiptsctl load --target "http://127.0.0.1:$RUN_API_PORT" --brokers "127.0.0.1:$RUN_BROKER_PORT" \
    --user-prefix "pgo$(date +%s)$name-u" --quiet --rate 0 --duration "$((secs + 15))s" \
    --users 100000 --channels 50 --zipf 1.1 --dup 0.2 --reorder 0.1 --concurrency 64 "$@" >"$out/$name.load.txt" 2>&1 &
  local load=$!
  sleep 5
  curl -sf -o "$out/kafkagate-$name.pprof" "127.0.0.1:$gate_admin/debug/pprof/profile?seconds=$secs" &
  local gate_profile=$!
  curl -sf -o "$out/persister-$name.pprof" "127.0.0.1:$persister_admin/debug/pprof/profile?seconds=$secs"
  wait "$gate_profile"
  wait "$load"
  sed -n 2,3p "$out/$name.load.txt" >&2
}
profile batch --batch 100
profile single --single

for svc in kafkagate persister; do
  go tool pprof -proto "$out/$svc-batch.pprof" "$out/$svc-single.pprof" >"$out/$svc.pgo"
  log "$out/$svc.pgo: $(wc -c <"$out/$svc.pgo") bytes; build with: go build -pgo=$out/$svc.pgo -o bin/ ./cmd/$svc"
done
