#!/usr/bin/env bash
# Proves the layering rules of .golangci.yml (depguard) can fail: plants one
# forbidden import per rule in a file of its own, runs depguard on those
# packages, and fails unless every planted file is reported. The plants
# are removed on exit. `make lint` runs it after the real lint.
set -euo pipefail
cd "$(dirname "$0")/.."

mod=github.com/readstate/receipts
# DIR|IMPORT: a package and an import its layer must not make (and that
# makes no import cycle: a cycle fails the type check, not depguard). A
# DIR that does not exist is planted as a new package (zzplant) of that
# layer, which nothing imports, so it can import what imports its layer.
plants=(
  "pkg/thread|$mod/pkg/lifecycle"          # domain → plumbing
  "pkg/notification|$mod/pkg/spool"        # domain → store
  "pkg/event|$mod/pkg/admin"               # domain → plumbing
  "pkg/redisstore|$mod/pkg/gate/rest"      # store → service
  "pkg/pgstore|$mod/pkg/gate/rest"         # store → service
  "pkg/kinds/zzplant|$mod/pkg/gate"        # a kind's folder → service
  "pkg/kind/zzplant|$mod/pkg/kinds"        # the contract → the kinds
  "pkg/redisstore/zzplant|$mod/pkg/kind"   # store → the contract of kinds
  "pkg/pgstore/zzplant|$mod/pkg/kinds/notifications" # driver → a kind
  "pkg/kinds/zzplant|$mod/pkg/views/readby"  # a kind → a view
  "pkg/views/zzplant|$mod/pkg/drift"         # a view → service
  "pkg/redisstore/zzplant|$mod/pkg/views/readby" # driver → a view
  "pkg/gate|$mod/pkg/gate/rest"            # service → its transport
  "pkg/gate/rest|$mod/pkg/apiauth"         # pure codec → plumbing
  "pkg/persister|$mod/pkg/pgtest"          # product → test kit
  "pkg/client|$mod/pkg/redisstore"         # client → store
  "pkg/spool|$mod/internal/bench/loadgen"  # product → benchmark laboratory
)

# One plant at a time: two plants together could make a cycle.
plant=""
made=""
trap 'rm -f "$plant"; if [ -n "$made" ]; then rm -rf "$made"; fi' EXIT
for p in "${plants[@]}"; do
  dir=${p%%|*} imp=${p#*|}
  if go list -deps "$imp" | grep -qx "$mod/$dir"; then
    echo "layering-test: $imp imports $dir: planting it there would be a cycle; choose another plant" >&2
    exit 1
  fi
  plant=$dir/zz_layering_plant.go
  if [ -d "$dir" ]; then
    name=$(go list -f '{{.Name}}' "./$dir")
    made=""
  else
    name=$(basename "$dir") made=$dir
    mkdir "$dir"
  fi
  printf '// Package %s is planted by scripts/layering-test.sh.\npackage %s\n\nimport _ "%s"\n' "$name" "$name" "$imp" >"$plant"
  out=$(go tool -modfile=tools/lint/go.mod golangci-lint run --allow-serial-runners --enable-only depguard "./$dir/" 2>&1 || true)
  rm -f "$plant"
  if [ -n "$made" ]; then rmdir "$made"; fi
  if ! grep -q "$plant:.*depguard" <<<"$out"; then
    echo "layering-test: depguard did not refuse $dir importing $imp:" >&2
    echo "$out" >&2
    exit 1
  fi
done
echo "layering-test: depguard refused all ${#plants[@]} planted imports"
