#!/usr/bin/env bash
# check-metric-names.sh DUMP [DUMP...]
#
# Fails, listing them, when a metric name that the chart's alerts or
# dashboard query (helm/receipts/files/metric-names.txt) appears in none of
# the given Prometheus text-format dumps (e.g. `curl -s host:9100/metrics`
# of kafkagate, persister and dlt-reconciler). A name counts as present when
# a sample line uses it (histograms: name_bucket, _sum, _count) or a
# `# TYPE` line declares it.
#
# A counter or histogram with labels only appears in a dump once a child
# exists: scrape binaries that have done some work (or pre-create the label
# values, as the persister and reconciler do).
#
#   METRIC_NAMES=other-list.txt scripts/check-metric-names.sh dump.prom
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIST=${METRIC_NAMES:-$ROOT/helm/receipts/files/metric-names.txt}
if [ $# -eq 0 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
for f in "$@"; do [ -r "$f" ] || { echo "check-metric-names: cannot read $f" >&2; exit 2; }; done

present=$(mktemp)
trap 'rm -f "$present"' EXIT
# Sample lines: the name ends at '{' or a blank. TYPE lines: the third field.
awk '
  /^# TYPE / { print $3; next }
  /^#/ || NF == 0 { next }
  { n = $1; sub(/\{.*/, "", n); print n }
' "$@" | sort -u >"$present"

missing=$(grep -v '^[[:space:]]*$' "$LIST" | sort -u | comm -23 - "$present")
if [ -n "$missing" ]; then
  echo "check-metric-names: $(echo "$missing" | wc -l) metric name(s) used by the alerts or the dashboard are missing from $*:" >&2
  echo "$missing" | sed 's/^/  /' >&2
  exit 1
fi
echo "check-metric-names: all $(grep -vc '^[[:space:]]*$' "$LIST") names present"
