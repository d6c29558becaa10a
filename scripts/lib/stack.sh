# shellcheck shell=bash
# start_stack LOG: starts scripts/run.sh without its demo in the background
# (its output in LOG), stops it when the calling script exits, and returns
# once it reports the stack running (or fails with its log). Sets $stack to
# run.sh's pid. Sourced by scripts/bench.sh and scripts/pgo.sh.
start_stack() {
  local log=$1
  RUN_NO_DEMO=1 scripts/run.sh >"$log" 2>&1 &
  stack=$!
  trap 'kill -TERM $stack 2>/dev/null; wait $stack 2>/dev/null || true' EXIT
  for _ in $(seq 120); do grep -q 'The stack is running' "$log" && return 0; sleep 0.5; done
  cat "$log"
  return 1
}
