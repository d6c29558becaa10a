#!/usr/bin/env bash
# buf lint (buf.yaml's rules), then buf breaking against the proto as it was
# before this change: on main (or a detached HEAD, as in CI's clone), the
# previous commit; on a branch, the commit it left main at, so every
# commit of the branch is checked. BUF_AGAINST=<commit> overrides. Run by
# make verify, after make generate (which lays out third_party/).
set -euo pipefail
cd "$(dirname "$0")/.."
buf() { go tool -modfile=tools/go.mod buf "$@"; }

buf lint
echo "buf lint: ok"

head=$(git rev-parse HEAD)
against=${BUF_AGAINST:-}
if [ -z "$against" ]; then
  base=$(git merge-base HEAD main 2>/dev/null || true)
  if [ -n "$base" ] && [ "$base" != "$head" ]; then
    against=$base
  elif [ "$(git rev-list --count HEAD)" -gt 1 ] || [ "$(git rev-parse --is-shallow-repository)" = true ]; then
    if ! git rev-parse -q --verify 'HEAD~1^{commit}' >/dev/null; then
      # A shallow clone: one commit more is enough.
      git fetch -q --deepen=1 origin 2>/dev/null || true
      git rev-parse -q --verify 'HEAD~1^{commit}' >/dev/null || {
        echo "buf breaking: HEAD~1 is not in this shallow clone and could not be fetched (git fetch --deepen=1)" >&2
        exit 1
      }
    fi
    against=$(git rev-parse 'HEAD~1')
  else
    echo "buf breaking: the first commit has no earlier proto to compare with"
    exit 0
  fi
fi

# The earlier tree's buf modules, with today's third_party/ (git-ignored,
# so absent from every commit): buf's .git input alone cannot build them.
old=$(mktemp -d)
trap 'rm -rf "$old"' EXIT
if ! git cat-file -e "$against:buf.yaml" 2>/dev/null; then
  echo "buf breaking: $(git rev-parse --short "$against") has no buf.yaml: nothing to compare with"
  exit 0
fi
git archive "$against" buf.yaml api | tar -x -C "$old"
cp -R third_party "$old/"
buf breaking --against "$old"
echo "buf breaking against $(git rev-parse --short "$against"): ok"
