# shellcheck shell=bash
# Tools for the chart checks (sourced by scripts/chart-test.sh and
# scripts/k8s-check.sh). Everything is pinned and installed on demand, into
# the git-ignored cache $CACHE (default .cache/ at the repository root):
#
#   helm v4, kubeconform     tools/k8s/go.mod (a tools module of its own, so
#                            the k8s dependencies never enter go.mod)
#   chartcheck,              tools/k8s/ (this repository's own checks and the
#   openapi2schema           OpenAPI → kubeconform schema converter)
#   kube-apiserver           tools/kubeapiserver/go.mod (k8s.io/kubernetes,
#                            built only by make k8s-check: ~7 min cold)
#   promtool, etcd           Debian's prometheus and etcd-server packages,
#                            fetched with `apt-get download` and unpacked into
#                            the cache rather than installed: installing them
#                            starts services (their init scripts start a
#                            Prometheus on :9090 and an etcd on :2379, and
#                            prometheus recommends node-exporter, which takes
#                            :9100, the gateway's dev admin port)
#   k8s schemas              generated offline from the OpenAPI spec inside
#                            the k8s.io/kubernetes module (same version as the
#                            API server) plus tools/k8s/crds/*.yaml

ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
CACHE=${CACHE:-$ROOT/.cache}
BIN=$CACHE/bin
GO=${GO:-go}
mkdir -p "$BIN"

# The Kubernetes release whose API the chart is checked against: the one the
# kube-apiserver tools module builds.
K8S_VERSION=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3} $1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' "$ROOT/tools/kubeapiserver/go.mod" | head -1)
[ -n "$K8S_VERSION" ] || { echo "cannot read the k8s.io/kubernetes version from tools/kubeapiserver/go.mod" >&2; exit 1; }
SCHEMAS=$CACHE/k8s-schemas/$K8S_VERSION

log() { printf '%s %s\n' "--" "$*" >&2; }

# stamp FILE... prints a hash of the files' contents (to rebuild when they change).
stamp() { cat "$@" | sha256sum | cut -c1-16; }

# ensure_go_tools builds helm, kubeconform, chartcheck and openapi2schema into
# $BIN, again only when tools/k8s changed.
ensure_go_tools() {
  local s
  s=$(stamp "$ROOT"/tools/k8s/go.mod "$ROOT"/tools/k8s/go.sum "$ROOT"/tools/k8s/*/*.go)
  if [ -x "$BIN/helm" ] && [ -x "$BIN/kubeconform" ] && [ -x "$BIN/chartcheck" ] && [ -x "$BIN/openapi2schema" ] &&
     [ "$(cat "$BIN/.k8s-tools.stamp" 2>/dev/null)" = "$s" ]; then
    return
  fi
  log "building helm, kubeconform, chartcheck, openapi2schema (tools/k8s; a few minutes the first time)"
  (cd "$ROOT/tools/k8s" && "$GO" build -o "$BIN/" \
    helm.sh/helm/v4/cmd/helm github.com/yannh/kubeconform/cmd/kubeconform ./chartcheck ./openapi2schema)
  echo "$s" > "$BIN/.k8s-tools.stamp"
}

# deb_binary PACKAGE PATH-IN-PACKAGE NAME: puts one binary of a Debian
# package into $BIN without installing the package (see the header).
deb_binary() {
  local pkg=$1 path=$2 name=$3 dir
  [ -x "$BIN/$name" ] && return
  dir=$(mktemp -d)
  log "fetching $name from Debian's $pkg package (apt-get download, unpacked into $BIN)"
  if ! (cd "$dir" && apt-get download -q "$pkg" >/dev/null 2>&1); then
    if [ "$(id -u)" = 0 ]; then
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
      (cd "$dir" && apt-get download -q "$pkg" >/dev/null)
    else
      echo "cannot download the Debian package $pkg: run 'apt-get update' as root, or install $name on the PATH" >&2
      rm -rf "$dir"; exit 1
    fi
  fi
  dpkg-deb -x "$dir"/"${pkg}"_*.deb "$dir/x"
  install -m 0755 "$dir/x/$path" "$BIN/$name"
  rm -rf "$dir"
}

# ensure_jq: jq from Debian when missing (root only; it starts no service).
ensure_jq() {
  command -v jq >/dev/null 2>&1 && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing jq (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null 2>&1 ||
      { DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null; }
  else
    echo "jq is missing: apt-get install -y jq" >&2; exit 1
  fi
}

# ensure_promtool and ensure_etcd take Debian's build (the same version on
# every machine of this kind) even when another one is on the PATH; only
# where apt-get is missing do they fall back to the PATH.
ensure_promtool() {
  if [ ! -x "$BIN/promtool" ] && ! command -v apt-get >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    PROMTOOL=$(command -v promtool); return
  fi
  deb_binary prometheus usr/bin/promtool promtool
  PROMTOOL=$BIN/promtool
}

ensure_etcd() {
  if [ ! -x "$BIN/etcd" ] && ! command -v apt-get >/dev/null 2>&1 && command -v etcd >/dev/null 2>&1; then
    ETCD=$(command -v etcd); return
  fi
  deb_binary etcd-server usr/bin/etcd etcd
  ETCD=$BIN/etcd
}

# ensure_schemas writes strict kubeconform schemas for $K8S_VERSION and the
# CRDs in tools/k8s/crds into $SCHEMAS.
ensure_schemas() {
  ensure_go_tools
  local s swagger
  s=$(stamp "$BIN/.k8s-tools.stamp" "$ROOT"/tools/k8s/crds/*.yaml)
  if [ -f "$SCHEMAS/.stamp" ] && [ "$(cat "$SCHEMAS/.stamp")" = "$s" ]; then
    return
  fi
  log "generating kubeconform schemas for Kubernetes $K8S_VERSION (offline, from the k8s.io/kubernetes module)"
  # The module's checksum is verified against tools/kubeapiserver/go.sum.
  swagger=$(cd "$ROOT/tools/kubeapiserver" && "$GO" mod download -json k8s.io/kubernetes | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/api/openapi-spec/swagger.json
  [ -f "$swagger" ] || { echo "no OpenAPI spec at $swagger" >&2; exit 1; }
  rm -rf "$SCHEMAS"
  local crds=()
  for f in "$ROOT"/tools/k8s/crds/*.yaml; do crds+=(-crd "$f"); done
  "$BIN/openapi2schema" -swagger "$swagger" "${crds[@]}" -out "$SCHEMAS"
  echo "$s" > "$SCHEMAS/.stamp"
}

kubeconform_strict() {
  "$BIN/kubeconform" -strict -summary -schema-location "$SCHEMAS/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$@"
}
