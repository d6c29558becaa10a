#!/usr/bin/env bash
# Proves the layering rules of .golangci.yml (depguard) can fail: plants one
# forbidden import per rule in a file of its own, runs depguard on those
# packages, and fails unless every planted file is reported. The plants
# are removed on exit. `make lint` runs it after the real lint.
set -euo pipefail
cd "$(dirname "$0")/.."

mod=github.com/readstate/receipts
# DIR|IMPORT: a package and an import its layer must not make (and that
# makes no import cycle: a cycle fails the type check, not depguard).
plants=(
  "pkg/thread|$mod/pkg/lifecycle"          # domain → plumbing
  "pkg/notification|$mod/pkg/spool"        # domain → store
  "pkg/event|$mod/pkg/admin"               # domain → plumbing
  "pkg/redisstore|$mod/pkg/movelog"        # store → service
  "pkg/pgstore|$mod/pkg/gate/rest"         # store → service
  "pkg/kinds|$mod/pkg/gate"                # kind → service
  "pkg/gate|$mod/pkg/gate/rest"            # service → its transport
  "pkg/gate/rest|$mod/pkg/apiauth"         # pure codec → plumbing
  "pkg/persister|$mod/pkg/pgtest"          # product → test kit
  "pkg/client|$mod/pkg/redisstore"         # client → store
  "pkg/spool|$mod/internal/bench/loadgen"  # product → benchmark laboratory
)

# One plant at a time: two plants together could make a cycle.
plant=""
trap 'rm -f "$plant"' EXIT
for p in "${plants[@]}"; do
  dir=${p%%|*} imp=${p#*|}
  if go list -deps "$imp" | grep -qx "$mod/$dir"; then
    echo "layering-test: $imp imports $dir: planting it there would be a cycle; choose another plant" >&2
    exit 1
  fi
  plant=$dir/zz_layering_plant.go
  printf 'package %s\n\nimport _ "%s"\n' "$(go list -f '{{.Name}}' "./$dir")" "$imp" >"$plant"
  out=$(go tool -modfile=tools/lint/go.mod golangci-lint run --allow-serial-runners --enable-only depguard "./$dir/" 2>&1 || true)
  rm -f "$plant"
  if ! grep -q "$plant:.*depguard" <<<"$out"; then
    echo "layering-test: depguard did not refuse $dir importing $imp:" >&2
    echo "$out" >&2
    exit 1
  fi
done
echo "layering-test: depguard refused all ${#plants[@]} planted imports"
