#!/usr/bin/env bash
# The release build's tools and runs (.goreleaser.yaml; docs/operations.md,
# "Releases"):
#
#   scripts/release.sh tools     install the pinned goreleaser and
#                                cyclonedx-gomod into .cache/bin (go install
#                                from the module proxy; once per version)
#   scripts/release.sh check     goreleaser check of .goreleaser.yaml (make lint)
#   scripts/release.sh snapshot  goreleaser release --snapshot --clean: every
#                                artifact of a release into dist/, built
#                                offline (GOPROXY=off), nothing published
#                                (make release-snapshot)
#
# A real release is a pushed tag and `goreleaser release --clean` with a
# GITHUB_TOKEN; see docs/operations.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

# Pinned: versions the module proxy here serves and that build with this
# Go (goreleaser v2.18.2 and newer need a newer one).
GORELEASER_VERSION=v2.15.1
CYCLONEDX_GOMOD_VERSION=v1.10.0
BIN=$ROOT/.cache/bin
GO=${GO:-go}
export PATH=$BIN:$PATH GOTOOLCHAIN=local

log() { printf -- '-- %s\n' "$*" >&2; }

# have BINARY MODULE VERSION: BINARY in $BIN was built from MODULE@VERSION.
have() {
  [ -x "$BIN/$1" ] && "$GO" version -m "$BIN/$1" 2>/dev/null | awk -v m="$2" -v v="$3" '$1 == "mod" && $2 == m && $3 == v {ok = 1} END {exit !ok}'
}

# install BINARY MODULE PACKAGE VERSION
install() {
  if have "$1" "$2" "$4"; then return; fi
  log "installing $1 $4 into .cache/bin (go install $3@$4)"
  mkdir -p "$BIN"
  GOBIN=$BIN "$GO" install "$3@$4"
}

tools() {
  install goreleaser github.com/goreleaser/goreleaser/v2 github.com/goreleaser/goreleaser/v2 "$GORELEASER_VERSION"
  install cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod "$CYCLONEDX_GOMOD_VERSION"
}

# goreleaser reads the commit through git, and without a remote (a local
# clone made without one) it gives up on all of it and stamps "none": name
# the project's remote for its commands alone when the repository has none.
git_env() {
  if ! git ls-remote --get-url >/dev/null 2>&1 || [ "$(git ls-remote --get-url 2>/dev/null)" = origin ]; then
    export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/readstate/receipts.git
  fi
}

case "${1:-}" in
  tools)
    tools
    ;;
  check)
    tools
    git_env
    goreleaser check
    ;;
  snapshot)
    tools
    git_env
    # What cyclonedx-gomod reads of the module graph (go list -m all: the
    # .info of modules no build needs) into the module cache, the one
    # step that may ask the module proxy (nothing to fetch once cached;
    # -mod=readonly: go.mod and go.sum stay as they are); the release
    # itself then runs offline.
    "$GO" list -mod=readonly -m -json all >/dev/null
    start=$SECONDS
    GOPROXY=off GOFLAGS=-mod=readonly goreleaser release --snapshot --clean
    log "release snapshot in $((SECONDS - start)) s; dist/:"
    (cd dist && ls -l ./*.tar.gz ./*.cdx.json ./*checksums.txt)
    (cd dist && sha256sum -c ./*checksums.txt)
    ;;
  *)
    echo "usage: scripts/release.sh tools|check|snapshot" >&2
    exit 2
    ;;
esac
