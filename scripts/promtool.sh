#!/usr/bin/env bash
# promtool.sh: makes sure promtool is at .cache/bin/promtool (Debian's
# prometheus package, unpacked there the way scripts/chart-test.sh takes
# it: scripts/lib/k8s-tools.sh ensure_promtool) and prints its path. The
# end-to-end metrics check runs it and fails without it (make e2e and make
# test run this first).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/k8s-tools.sh
source scripts/lib/k8s-tools.sh
ensure_promtool
"$PROMTOOL" --version >/dev/null
echo "$PROMTOOL"
