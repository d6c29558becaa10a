#!/usr/bin/env bash
# make k8s-check: the rendered chart against a real Kubernetes API server.
#
# Starts etcd and kube-apiserver (the k8s.io/kubernetes release of
# tools/kubeapiserver/go.mod) on loopback, applies the minimal Prometheus
# Operator, KEDA and Strimzi CRDs (tools/k8s/crds/), creates the namespaces (Pod Security
# "restricted" enforced, warned and audited) and their default
# ServiceAccounts (no controller-manager runs), then for the default,
# production, variant and operators (KEDA, Strimzi; also SCRAM users, the
# topic Job beside Strimzi users, and KEDA on the production values) values:
#
#   kubectl apply --dry-run=server --validate=strict   every rendered object:
#       real validation and admission (selectors, names, immutable shapes,
#       CRD schemas); a Pod Security warning on a workload fails the check,
#       and so does an object the server did not apply;
#   kubectl apply --dry-run=server                    one Pod per workload
#       (its pod template): Pod Security "restricted" is enforced on Pods.
#
# etcd and the API server are stopped by PID at the end. The first run builds
# kube-apiserver into .cache/bin (about 7 minutes on 2 cores, cached after);
# etcd and helm come as for make chart-test (scripts/lib/k8s-tools.sh).
#
# Environment: K8S_CHECK_PORT (API server, default 36443), K8S_CHECK_ETCD_PORT
# (default 32379; the peer port is the next one), KEEP=1 keeps the temp dir.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/k8s-tools.sh
source scripts/lib/k8s-tools.sh

API_PORT=${K8S_CHECK_PORT:-36443}
ETCD_PORT=${K8S_CHECK_ETCD_PORT:-32379}
ETCD_PEER_PORT=$((ETCD_PORT + 1))
CHART=helm/receipts
NS=receipts
start=$SECONDS
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

command -v kubectl >/dev/null || { echo "k8s-check: kubectl is needed on the PATH" >&2; exit 1; }
command -v openssl >/dev/null || { echo "k8s-check: openssl is needed on the PATH" >&2; exit 1; }
for p in "$API_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT"; do
  if ss -ltnH "sport = :$p" | grep -q .; then
    echo "k8s-check: port $p is taken (set K8S_CHECK_PORT / K8S_CHECK_ETCD_PORT)" >&2; exit 1
  fi
done

ensure_go_tools
ensure_etcd

# kube-apiserver, built from tools/kubeapiserver once per change of its go.mod/go.sum.
kas_stamp=$(stamp tools/kubeapiserver/go.mod tools/kubeapiserver/go.sum)
if [ ! -x "$BIN/kube-apiserver" ] || [ "$(cat "$BIN/.kube-apiserver.stamp" 2>/dev/null)" != "$kas_stamp" ]; then
  log "building kube-apiserver $K8S_VERSION (tools/kubeapiserver; ~7 minutes the first time)"
  t0=$SECONDS
  ver=${K8S_VERSION#v}
  (cd tools/kubeapiserver && CGO_ENABLED=0 "$GO" build -trimpath -o "$BIN/kube-apiserver" \
    -ldflags "-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=${ver%%.*} -X k8s.io/component-base/version.gitMinor=$(echo "$ver" | cut -d. -f2)" \
    k8s.io/kubernetes/cmd/kube-apiserver)
  echo "$kas_stamp" > "$BIN/.kube-apiserver.stamp"
  log "built kube-apiserver in $((SECONDS - t0)) s"
fi

TMP=$(mktemp -d)
ETCD_PID= KAS_PID=
cleanup() {
  # Stop what this script started, by PID, API server first.
  [ -n "$KAS_PID" ] && kill "$KAS_PID" 2>/dev/null && wait "$KAS_PID" 2>/dev/null || true
  [ -n "$ETCD_PID" ] && kill "$ETCD_PID" 2>/dev/null && wait "$ETCD_PID" 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then log "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

log "etcd $("$ETCD" --version | head -1 | awk '{print $3}') on 127.0.0.1:$ETCD_PORT"
"$ETCD" --name k8s-check --data-dir "$TMP/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "k8s-check=http://127.0.0.1:$ETCD_PEER_PORT" >"$TMP/etcd.log" 2>&1 &
ETCD_PID=$!

openssl genrsa -out "$TMP/sa.key" 2048 2>/dev/null
openssl rsa -in "$TMP/sa.key" -pubout -out "$TMP/sa.pub" 2>/dev/null
TOKEN=$(openssl rand -hex 16)
echo "$TOKEN,admin,admin,\"system:masters\"" >"$TMP/tokens.csv"
mkdir -p "$TMP/certs"

log "kube-apiserver $("$BIN/kube-apiserver" --version | awk '{print $2}') on 127.0.0.1:$API_PORT"
"$BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
  --cert-dir="$TMP/certs" --token-auth-file="$TMP/tokens.csv" --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc \
  --service-account-key-file="$TMP/sa.pub" --service-account-signing-key-file="$TMP/sa.key" \
  --service-cluster-ip-range=10.96.0.0/24 --enable-priority-and-fairness=false \
  >"$TMP/kube-apiserver.log" 2>&1 &
KAS_PID=$!

export KUBECONFIG=$TMP/kubeconfig
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: k8s-check
    cluster: {server: "https://127.0.0.1:$API_PORT", insecure-skip-tls-verify: true}
users:
  - name: admin
    user: {token: "$TOKEN"}
contexts:
  - name: k8s-check
    context: {cluster: k8s-check, user: admin}
current-context: k8s-check
EOF

ready=0
for _ in $(seq 1 120); do
  if kubectl get --raw /readyz >/dev/null 2>&1; then ready=1; break; fi
  if ! kill -0 "$KAS_PID" 2>/dev/null || ! kill -0 "$ETCD_PID" 2>/dev/null; then break; fi
  sleep 0.5
done
if [ "$ready" != 1 ]; then
  echo "k8s-check: the API server did not become ready; its log:" >&2
  tail -30 "$TMP/kube-apiserver.log" >&2; tail -10 "$TMP/etcd.log" >&2
  exit 1
fi
log "API server ready after $((SECONDS - start)) s: $(kubectl version -o json 2>/dev/null | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -1)"

# CRDs for real (the dry-run of their objects needs them established).
for f in tools/k8s/crds/*.yaml; do kubectl apply -f "$f"; done
kubectl wait --for condition=established --timeout=60s \
  crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com \
  crd/scaledobjects.keda.sh crd/triggerauthentications.keda.sh \
  crd/kafkatopics.kafka.strimzi.io crd/kafkausers.kafka.strimzi.io
# kafka: where ci/operators-values.yaml puts its KafkaTopics.
for ns in "$NS" monitoring kafka; do
  kubectl create namespace "$ns"
  kubectl label namespace "$ns" pod-security.kubernetes.io/enforce=restricted \
    pod-security.kubernetes.io/warn=restricted pod-security.kubernetes.io/audit=restricted
  # No controller-manager: make the default ServiceAccount by hand.
  kubectl -n "$ns" create serviceaccount default
done
# The Pods below run as the chart's ServiceAccount, which the dry-runs do not
# create: make it for real (the chart's copy then dry-runs as an update).
kubectl -n "$NS" create serviceaccount receipts --save-config

check() {
  local name=$1; shift
  local out=$TMP/$name.yaml
  echo
  echo "== $name: helm template $*"
  "$BIN/helm" template receipts "$CHART" --namespace "$NS" "$@" >"$out"
  local objects
  objects=$(grep -c '^kind:' "$out")
  echo "-- kubectl apply --dry-run=server --validate=strict ($objects objects)"
  if kubectl apply --dry-run=server --validate=strict -f "$out" >"$TMP/apply.out" 2>&1; then ok; else bad "$name: the API server rejected the chart"; fi
  cat "$TMP/apply.out"
  if grep -qi '^warning' "$TMP/apply.out"; then bad "$name: warnings (Pod Security or deprecations) above"; else ok; fi
  # Every object went through the server, the operators' kinds included.
  local applied
  applied=$(grep -cE ' (created|configured|unchanged) \(server dry run\)$' "$TMP/apply.out" || true)
  if [ "$applied" = "$objects" ]; then ok; else bad "$name: $applied of $objects objects applied"; fi
  local kind
  for kind in ${EXPECT_KINDS:-}; do
    if grep -q "^kind: $kind$" "$out" && grep -qE "^${kind,,}\.[a-z.]+/.* created \(server dry run\)$" "$TMP/apply.out"; then ok
    else bad "$name: no $kind rendered and admitted"; fi
  done
  "$BIN/chartcheck" pods "$out" >"$TMP/$name-pods.yaml"
  echo "-- kubectl apply --dry-run=server: one Pod per workload, Pod Security restricted enforced"
  if kubectl apply --dry-run=server --validate=strict -f "$TMP/$name-pods.yaml" >"$TMP/apply.out" 2>&1; then ok; else bad "$name: pods rejected"; fi
  cat "$TMP/apply.out"
}
check default
check production -f "$CHART/ci/production-values.yaml"
check variants -f "$CHART/ci/variants-values.yaml"
# KEDA and Strimzi (their CRDs' schemas validate the objects): mutual TLS
# users and a ScaledObject (the operators values); SCRAM users; Strimzi
# users with the topic Job (its own KafkaUser, a hook); KEDA over SASL
# SCRAM with one TLS Secret (the production values, KEDA for the HPA).
EXPECT_KINDS="ScaledObject TriggerAuthentication KafkaTopic KafkaUser" check operators -f "$CHART/ci/operators-values.yaml"
EXPECT_KINDS="ScaledObject TriggerAuthentication KafkaTopic KafkaUser" check operators-scram -f "$CHART/ci/operators-values.yaml" \
  --set strimzi.users.authentication=scram-sha-512
EXPECT_KINDS="KafkaUser Job" check strimzi-topic-job -f "$CHART/ci/operators-values.yaml" --set strimzi.topics.enabled=false
EXPECT_KINDS="ScaledObject TriggerAuthentication" check keda-production -f "$CHART/ci/production-values.yaml" \
  --set persister.autoscaling.enabled=false --set persister.autoscaling.keda.enabled=true

# The server must catch what a client-side check cannot: a Deployment whose
# selector does not match its template's labels, and a privileged pod.
echo
echo "== planted faults (must be rejected)"
awk '/^kind: / {d = ($2 == "Deployment")} d && /^  name: receipts-persister$/ {p = 1}
     p && !done && /^      app.kubernetes.io\/component: persister$/ {sub(/persister$/, "persisterx"); done = 1} {print}' \
  "$TMP/default.yaml" >"$TMP/planted.yaml"
grep -q persisterx "$TMP/planted.yaml" || bad "planting the selector fault failed"
if kubectl apply --dry-run=server -f "$TMP/planted.yaml" >"$TMP/apply.out" 2>&1; then bad "selector/label mismatch accepted"
else ok; grep -i 'selector' "$TMP/apply.out" | head -2; fi
sed '0,/allowPrivilegeEscalation: false/s//allowPrivilegeEscalation: true/' "$TMP/default-pods.yaml" >"$TMP/planted-pods.yaml"
if kubectl apply --dry-run=server -f "$TMP/planted-pods.yaml" >"$TMP/apply.out" 2>&1; then bad "a pod allowing privilege escalation was admitted"
else ok; grep -i 'violate' "$TMP/apply.out" | head -2; fi

# The KEDA and Strimzi objects are checked against their CRDs' schemas (a
# CRD without one accepts anything): each planted fault, in one object of
# the operators render, must be rejected naming its field.
# doc KIND NAME FILE: the one rendered object of that kind and name.
doc() { awk -v k="$1" -v n="$2" '/^---/{if (hit) exit; buf=""; kind=""; next} /^kind: /{kind=$2} {buf = buf $0 "\n"} kind==k && $0 == "  name: " n {hit=1} END{if (hit) printf "%s", buf}' "$3"; }
# plant DESCRIPTION KIND NAME SED-SCRIPT WANT: the object with the sed
# script applied must change, and be rejected with WANT in the message.
plant() {
  local what=$1 kind=$2 obj=$3 script=$4 want=$5
  doc "$kind" "$obj" "$TMP/operators.yaml" >"$TMP/crd-ok.yaml"
  sed "$script" "$TMP/crd-ok.yaml" >"$TMP/crd-planted.yaml"
  if [ ! -s "$TMP/crd-ok.yaml" ] || cmp -s "$TMP/crd-ok.yaml" "$TMP/crd-planted.yaml"; then bad "planting '$what' in $kind $obj failed"; return; fi
  if kubectl apply --dry-run=server --validate=strict -f "$TMP/crd-planted.yaml" >"$TMP/apply.out" 2>&1; then bad "$kind with $what accepted"
  elif grep -qF -- "$want" "$TMP/apply.out"; then ok; echo "$kind, $what: $(grep -F -- "$want" "$TMP/apply.out" | head -1)"
  else cat "$TMP/apply.out" >&2; bad "$kind with $what rejected without '$want'"; fi
}
plant "a non-string trigger value" ScaledObject receipts-persister 's/allowIdleConsumers: "false"/allowIdleConsumers: false/' \
  'spec.triggers[0].metadata.allowIdleConsumers'
plant "an unknown field" ScaledObject receipts-persister 's/^  minReplicaCount: /  minReplicas: /' 'unknown field "spec.minReplicas"'
plant "no scale target" ScaledObject receipts-persister '/^  scaleTargetRef:$/,/^    name: /d' 'spec.scaleTargetRef: Required value'
plant "a secretTargetRef without its key" TriggerAuthentication receipts-persister-kafka '0,/^      key: /{/^      key: /d}' \
  'spec.secretTargetRef[0].key: Required value'
plant "zero partitions" KafkaTopic receipts-topic 's/^  partitions: .*/  partitions: 0/' 'spec.partitions: Invalid value'
plant "an unknown ACL operation" KafkaUser receipts-persister '0,/^          - Read$/s//          - Reed/' 'Unsupported value: "Reed"'
plant "an unknown authentication" KafkaUser receipts-persister 's/^    type: tls$/    type: mtls/' 'spec.authentication.type: Unsupported value: "mtls"'

echo
echo "k8s-check: took $((SECONDS - start)) s"
echo "k8s-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
