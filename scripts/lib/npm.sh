# shellcheck shell=bash
# ts_deps: makes sure clients/ts/node_modules matches package-lock.json,
# running `npm ci` only when the lockfile changed since the last install
# (a stamp in node_modules), with npm's download cache in the git-ignored
# .cache/npm: repeated runs cost nothing, and CI re-downloads nothing it
# has seen. Sourced by scripts/generate.sh and scripts/clients-test.sh.
ts_deps() {
  local root dir stamp want
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  dir=$root/clients/ts
  stamp=$dir/node_modules/.lock-sha256
  want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  command -v npm >/dev/null 2>&1 || {
    echo "npm is missing: the TypeScript client needs Node.js >= 20 and npm (.ci/run installs them as root)" >&2
    return 1
  }
  echo "npm ci in clients/ts" >&2
  (cd "$dir" && npm ci --no-audit --no-fund --prefer-offline --cache "$root/.cache/npm" --loglevel=error >&2)
  echo "$want" >"$stamp"
}
