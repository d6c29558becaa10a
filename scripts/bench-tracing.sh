#!/usr/bin/env bash
# Same-run cost of tracing on marks: BenchmarkMarks (pkg/gate/server: the
# REST fast path through an in-process gateway on the real Redis and
# kfake, 16 callers) on this tree — tracing off, on at 1 % and at 100 %
# (OTLP/HTTP to a receiver in the process) — beside the same benchmark
# on REV, a revision without tracing ("none": no instrumentation at all),
# in turns, the order reversed every other round. Prints each run, then
# per variant the median and the best run (the least disturbed by other
# work on the machine) with their ratios to none.
#
# Usage: scripts/bench-tracing.sh [REV]   (REV defaults to where this
#   branch left main: git merge-base HEAD main)
# Environment: BT_ROUNDS [6], BT_MARKS [6000] (marks per run)
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-$(git merge-base HEAD main)}
rounds=${BT_ROUNDS:-6}
marks=${BT_MARKS:-6000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The baseline: REV's tree with this benchmark and a variant "none".
mkdir -p "$tmp/base"
git archive "$rev" | tar -x -C "$tmp/base"
cp pkg/gate/server/bench_marks_test.go "$tmp/base/pkg/gate/server/"
cat >"$tmp/base/pkg/gate/server/bench_none_test.go" <<'GO'
package server_test

import (
	"testing"

	"github.com/readstate/receipts/pkg/gatetest"
)

var markVariants = []markVariant{
	{name: "none", configure: func(*testing.B, *gatetest.Config) {}, started: func(*testing.B, *gatetest.Stack) {}},
}
GO
(cd "$tmp/base" && go test -c -o "$tmp/none.test" ./pkg/gate/server/)
go test -c -o "$tmp/traced.test" ./pkg/gate/server/

run() { # binary: one run of every variant it has
  (cd pkg/gate/server && "$1" -test.run '^$' -test.bench BenchmarkMarks -test.benchtime "${marks}x" -test.benchmem) |
    grep '^BenchmarkMarks/' | tee -a "$tmp/all.txt"
}
echo "bench-tracing: $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); HEAD $(git rev-parse --short=12 HEAD) vs $rev $(git rev-parse --short=12 "$rev"); $rounds rounds of $marks marks"
for i in $(seq 1 "$rounds"); do
  if [ $((i % 2)) -eq 1 ]; then run "$tmp/none.test"; run "$tmp/traced.test"; else run "$tmp/traced.test"; run "$tmp/none.test"; fi
done
# Medians per variant: ns/op, marks/s, B/op, allocs/op.
awk '{ name=$1; sub(/^BenchmarkMarks\//, "", name); sub(/-[0-9]+$/, "", name)
       for (i = 3; i < NF; i++) { if ($(i+1) == "ns/op") ns[name] = ns[name] " " $i; if ($(i+1) == "marks/s") ms[name] = ms[name] " " $i
                                  if ($(i+1) == "B/op") by[name] = by[name] " " $i; if ($(i+1) == "allocs/op") al[name] = al[name] " " $i } }
     function median(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
                                          return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
     function least(s,   a, n, i, m) { n = split(s, a, " "); m = a[1]; for (i = 2; i <= n; i++) if (a[i] + 0 < m + 0) m = a[i]; return m }
     END { base = median(ns["none"]); best = least(ns["none"])
           printf "%-10s %10s %10s %8s %10s %8s %10s %10s\n", "variant", "ns/op", "marks/s", "x none", "best ns", "x none", "B/op", "allocs/op"
           split("none off on-1pct on-100pct", order, " ")
           for (k = 1; k <= 4; k++) { v = order[k]; if (!(v in ns)) continue; m = median(ns[v])
             printf "%-10s %10.0f %10.0f %8.3f %10.0f %8.3f %10.0f %10.0f\n", v, m, median(ms[v]), m / base, least(ns[v]), least(ns[v]) / best, median(by[v]), median(al[v]) } }' "$tmp/all.txt"
