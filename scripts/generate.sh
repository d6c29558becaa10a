#!/usr/bin/env bash
# Regenerates the protobuf stubs, the REST contract api/openapi.json
# (tools/openapigen) and the TypeScript client's code (clients/ts/src/gen,
# with the retry table of api/retries/retries.json)
# with version-pinned plugins: Go ones from tools/go.mod, protoc-gen-es
# from clients/ts/package-lock.json. googleapis' http annotations come from
# the Go module cache into a git-ignored third_party/ folder: nothing
# fetched is committed.
set -euo pipefail
cd "$(dirname "$0")/.."
gg=$(go mod download -modfile=tools/go.mod -json github.com/grpc-ecosystem/grpc-gateway@v1.16.0 | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
mkdir -p third_party/google/api
for f in annotations.proto http.proto; do
  install -m 0644 "$gg/third_party/googleapis/google/api/$f" third_party/google/api/$f
done
go tool -modfile=tools/go.mod buf generate
source scripts/lib/npm.sh
ts_deps
go tool -modfile=tools/go.mod buf generate --template clients/ts/buf.gen.yaml
# After buf, which empties clients/ts/src/gen: the retry table's copy.
node clients/ts/scripts/retries.mjs
