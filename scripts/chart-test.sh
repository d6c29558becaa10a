#!/usr/bin/env bash
# The chart's tests (make chart-test; part of make test). Offline, installs
# what it needs into .cache/ (scripts/lib/k8s-tools.sh), about 20 s once
# cached:
#
#   1. helm lint --strict with the default, production and variant values;
#      the default render is secure (an authenticated API, NetworkPolicies)
#      and NOTES.txt says how to read the token and warns of plaintext;
#   2. helm template of each, validated by kubeconform -strict against schemas
#      generated offline from the Kubernetes OpenAPI spec (and minimal
#      Prometheus Operator, KEDA and Strimzi CRDs), and by chartcheck's
#      policy checks (restricted security contexts, probes, grace periods
#      covering each container's shutdown delay and drain, credentials only
#      in Secrets); KEDA's ScaledObject and Strimzi's KafkaTopics and
#      KafkaUsers (their ACLs against tests/strimzi-acls.txt) carry the
#      values they are built from; the tracing values reach each service
#      as OTEL_* variables and --trace-sample-ratio, and nothing of them
#      renders while tracing is off;
#   3. every bad values file in helm/receipts/tests/bad-values/ makes helm
#      template (and, for schema errors, helm lint) fail with the expected
#      message;
#   4. promtool check rules and promtool test rules;
#   5. chartcheck: every alert tested firing and not, with a runbook section in
#      docs/operations.md; the dashboard JSON; every value documented in the
#      chart README; files/metric-names.txt equal to the names the rules and
#      the dashboard query;
#   6. the checkers themselves fail on planted faults (a strict-schema
#      violation, an insecure container, overlapping panels, a metrics dump
#      missing a name), so a green run means something.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/k8s-tools.sh
source scripts/lib/k8s-tools.sh

CHART=helm/receipts
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
start=$SECONDS
passed=0
failed=0
step() { log "$* ($((SECONDS - start)) s)"; }
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
# expect_fail DESCRIPTION COMMAND...: the command must fail.
expect_fail() {
  local what=$1; shift
  if "$@" >"$TMP/out" 2>&1; then bad "$what: succeeded, expected a failure"; else ok; fi
}

step "tools"
ensure_go_tools
ensure_promtool
ensure_jq
ensure_schemas
HELM=$BIN/helm
CHECK=$BIN/chartcheck

VALUES_SETS=(default "$CHART/ci/production-values.yaml" "$CHART/ci/variants-values.yaml" "$CHART/ci/operators-values.yaml")
values_args() { [ "$1" = default ] && return 0; echo "-f $1"; }

step "helm lint --strict"
for v in "${VALUES_SETS[@]}"; do
  # shellcheck disable=SC2046
  if "$HELM" lint --strict "$CHART" $(values_args "$v") >"$TMP/lint" 2>&1; then ok; else cat "$TMP/lint" >&2; bad "helm lint --strict ($v)"; fi
done

step "helm template | kubeconform -strict, policy checks"
for v in "${VALUES_SETS[@]}"; do
  out=$TMP/rendered-$(basename "$v" .yaml).yaml
  # shellcheck disable=SC2046
  if ! "$HELM" template receipts "$CHART" --namespace receipts $(values_args "$v") >"$out" 2>"$TMP/err"; then
    cat "$TMP/err" >&2; bad "helm template ($v)"; continue
  fi
  if kubeconform_strict "$out" >"$TMP/kc" 2>&1; then ok; else cat "$TMP/kc" >&2; bad "kubeconform ($v)"; fi
  grep -q 'Skipped: 0' "$TMP/kc" || { cat "$TMP/kc" >&2; bad "kubeconform skipped resources ($v)"; }
  if "$CHECK" manifests "$out"; then ok; else bad "policy checks ($v)"; fi
done
RENDERED=$TMP/rendered-default.yaml
PROD=$TMP/rendered-production-values.yaml
# The production values turn every optional object on: make sure they are there.
for kind in StatefulSet HorizontalPodAutoscaler NetworkPolicy PodDisruptionBudget ServiceMonitor PrometheusRule ConfigMap Job ServiceAccount; do
  if grep -q "^kind: $kind$" "$PROD"; then ok; else bad "production render has no $kind"; fi
done
# The PrometheusRule carries the rule file's groups, runbook links included.
if grep -q 'runbook_url: https://github.com/readstate/receipts/blob/main/docs/operations.md#receiptsconsumerlaggrowing' "$PROD"; then ok; else bad "PrometheusRule lost its runbook links"; fi
# Secure by default: a plain install serves an authenticated API (a token
# file from the chart's generated Secret, never the open-API switch) behind
# the NetworkPolicies. secure_render fails on a render that is not.
secure_render() {
  local f=$1 ok=0
  grep -q '^kind: NetworkPolicy$' "$f" || { echo "no NetworkPolicy"; ok=1; }
  grep -q '^  name: receipts-kafkagate$' <(awk '/^kind: NetworkPolicy$/,/^---/' "$f") || { echo "no NetworkPolicy for kafkagate"; ok=1; }
  grep -q 'name: RECEIPTS_AUTH_TOKEN_FILE' "$f" || grep -q 'name: RECEIPTS_TLS_CLIENT_CA_FILE' "$f" || { echo "kafkagate has neither a token file nor mTLS"; ok=1; }
  if grep -q 'name: RECEIPTS_INSECURE_ALLOW_UNAUTHENTICATED' "$f"; then echo "kafkagate serves the API unauthenticated"; ok=1; fi
  return $ok
}
for f in "$RENDERED" "$PROD"; do
  if secure_render "$f" >"$TMP/sec" 2>&1; then ok; else cat "$TMP/sec" >&2; bad "$(basename "$f"): not secure by default"; fi
done
# The generated token Secret: one "default" token of 40 characters, mounted.
if grep -A12 '^kind: Secret$' "$RENDERED" | grep -q '^  name: receipts-api-tokens$' &&
  tok=$(awk '/^  name: receipts-api-tokens$/{f=1} f && /^  tokens: /{print $2; exit}' "$RENDERED" | base64 -d) &&
  [[ $tok =~ ^default:[A-Za-z0-9]{40}$ ]] && grep -q 'secretName: receipts-api-tokens' "$RENDERED"; then ok
else bad "default render lacks the generated, mounted token Secret receipts-api-tokens (default:<40 alphanumerics>)"; fi
# The checker fails on an open API and on a render without NetworkPolicies.
"$HELM" template receipts "$CHART" --namespace receipts --set kafkagate.auth.insecureAllowUnauthenticated=true >"$TMP/open.yaml"
expect_fail "secure-default check on an unauthenticated API" secure_render "$TMP/open.yaml"
"$HELM" template receipts "$CHART" --namespace receipts --set networkPolicy.enabled=false >"$TMP/nonp.yaml"
expect_fail "secure-default check without NetworkPolicies" secure_render "$TMP/nonp.yaml"
# NOTES.txt: how to read the token, and a warning for each plaintext
# connection (the default's Postgres sslmode=require, redis://, Kafka
# without TLS); the production values have no warning.
notes() { "$HELM" install receipts "$CHART" --namespace receipts --dry-run=client "$@" 2>&1 | sed -n '/^NOTES:/,$p'; }
notes >"$TMP/notes-default.txt"
for want in 'get secret receipts-api-tokens' 'base64 -d' 'WARNING: postgres.url does not verify the server' 'WARNING: redis.url is redis:// (plaintext)' 'WARNING: kafka.tls.enabled=false'; do
  if grep -qF -- "$want" "$TMP/notes-default.txt"; then ok; else cat "$TMP/notes-default.txt" >&2; bad "default NOTES lack '$want'"; fi
done
if grep -q 'served without authentication' "$TMP/notes-default.txt"; then bad "default NOTES say the API is unauthenticated"; else ok; fi
notes -f "$CHART/ci/production-values.yaml" >"$TMP/notes-prod.txt"
if grep -q WARNING "$TMP/notes-prod.txt"; then grep WARNING "$TMP/notes-prod.txt" >&2; bad "production NOTES warn"; else ok; fi
notes -f "$CHART/ci/operators-values.yaml" >"$TMP/notes-ops.txt"
for want in 'Topics are KafkaTopics of the Strimzi cluster events' 'copy it there from the Kafka cluster' 'scaled by KEDA on the lag of group receipts-persister'; do
  if grep -qF -- "$want" "$TMP/notes-ops.txt"; then ok; else cat "$TMP/notes-ops.txt" >&2; bad "operators NOTES lack '$want'"; fi
done
if grep -q -- '-topics" hook Job' "$TMP/notes-ops.txt"; then bad "operators NOTES name the topic Job"; else ok; fi
notes --set kafkagate.auth.insecureAllowUnauthenticated=true >"$TMP/notes-open.txt"
if grep -q 'WARNING: the API is served without authentication' "$TMP/notes-open.txt"; then ok; else bad "NOTES do not warn of an open API"; fi
# The change feed (persister.changeFeed): off by default, so neither the
# topic Job nor the persister names it; on (production values), the Job
# ensures the topic with its partitions and configs and the persister
# writes it, both from the one value.
for arg in --changes-topic --changes-partitions --changes-config RECEIPTS_CHANGES_TOPIC; do
  if grep -q -- "$arg" "$RENDERED"; then bad "default render names $arg (the change feed is off by default)"; else ok; fi
done
for want in '- --changes-topic=read-state-changes' '- --changes-partitions=32' '- --changes-config=retention.ms=172800000' \
  '- --changes-config=min.insync.replicas=2' '- --changes-config=cleanup.policy=delete' 'name: RECEIPTS_CHANGES_TOPIC'; do
  if grep -qF -- "$want" "$PROD"; then ok; else bad "production render lacks '$want'"; fi
done
if "$HELM" template receipts "$CHART" -f "$CHART/ci/production-values.yaml" --set persister.changeFeed.topic=feed-x \
  --set topics.changes.partitions=7 >"$TMP/feed.yaml" 2>"$TMP/err"; then
  if grep -qF -- '- --changes-topic=feed-x' "$TMP/feed.yaml" && grep -qF -- '- --changes-partitions=7' "$TMP/feed.yaml" &&
    grep -A1 'name: RECEIPTS_CHANGES_TOPIC' "$TMP/feed.yaml" | grep -qF 'value: "feed-x"'; then ok
  else bad "persister.changeFeed.topic does not reach both the topic Job and the persister"; fi
else cat "$TMP/err" >&2; bad "helm template with persister.changeFeed.topic set"; fi

# CORS (kafkagate.cors.allowedOrigins): off by default; the variants'
# origins reach the gateway as one comma list.
if grep -q RECEIPTS_CORS_ALLOWED_ORIGINS "$RENDERED"; then bad "default render turns CORS on"; else ok; fi
if grep -A1 'name: RECEIPTS_CORS_ALLOWED_ORIGINS' "$TMP/rendered-variants-values.yaml" |
  grep -qF 'value: "https://chat.example.com,http://localhost:3000"'; then ok
else bad "variants render lacks RECEIPTS_CORS_ALLOWED_ORIGINS=https://chat.example.com,http://localhost:3000"; fi

# doc KIND NAME FILE: the one rendered object of that kind and name.
doc() { awk -v k="$1" -v n="$2" '/^---/{if (hit) exit; buf=""; kind=""; next} /^kind: /{kind=$2} {buf = buf $0 "\n"} kind==k && $0 == "  name: " n {hit=1} END{if (hit) printf "%s", buf}' "$3"; }

# Tracing (tracing.*): off by default, so no OTEL_* variable, no sample
# ratio and no collector egress; on (the variants values), each service
# exports to the endpoint with its own service name, the sample ratio as
# --trace-sample-ratio and the headers from their Secret; the hook Jobs
# never trace.
for f in "$RENDERED" "$PROD"; do
  if grep -qE 'OTEL_|RECEIPTS_TRACE_SAMPLE_RATIO|port: 431[78]$' "$f"; then bad "$(basename "$f"): tracing rendered while off"; else ok; fi
done
VAR=$TMP/rendered-variants-values.yaml
# workload NAME FILE: the Deployment or StatefulSet of that name.
workload() { awk -v n="  name: $1" '/^kind: (Deployment|StatefulSet)$/{d=1} /^---/{d=0; p=0} d && $0 == n {p=1} p' "$2"; }
# env_value NAME: the quoted value of env variable NAME in stdin.
env_value() { grep -A1 -- "- name: $1\$" | sed -n 's/^ *value: //p'; }
for c in kafkagate persister dlt-reconciler; do
  w=$(workload "receipts-$c" "$VAR")
  got="$(env_value OTEL_EXPORTER_OTLP_ENDPOINT <<<"$w") $(env_value OTEL_EXPORTER_OTLP_PROTOCOL <<<"$w") $(env_value OTEL_SERVICE_NAME <<<"$w") $(env_value RECEIPTS_TRACE_SAMPLE_RATIO <<<"$w")"
  want='"http://otel-collector.observability:4317" "grpc" "'$c'" "0.25"'
  if [ "$got" = "$want" ]; then ok; else bad "variants $c tracing env: got $got, want $want"; fi
  if grep -A4 -- '- name: OTEL_EXPORTER_OTLP_HEADERS$' <<<"$w" | tr -d '\n' | sed 's/ \+/ /g' |
    grep -qF 'valueFrom: secretKeyRef: name: otlp-auth key: otlp-headers'; then ok
  else bad "variants $c: OTEL_EXPORTER_OTLP_HEADERS is not from Secret otlp-auth, key otlp-headers"; fi
  if grep -F 'value: "k8s.namespace.name=receipts,k8s.pod.name=$(RECEIPTS_CLIENT_ID)"' <<<"$w" >/dev/null &&
    [ "$(grep -n -- '- name: RECEIPTS_CLIENT_ID$' <<<"$w" | cut -d: -f1)" -lt "$(grep -n -- '- name: OTEL_RESOURCE_ATTRIBUTES$' <<<"$w" | cut -d: -f1)" ]; then ok
  else bad "variants $c: OTEL_RESOURCE_ATTRIBUTES does not name the namespace and the pod (after RECEIPTS_CLIENT_ID)"; fi
done
if awk '/^kind: NetworkPolicy$/,/^---/' "$VAR" | grep -q 'port: 4317$'; then ok; else bad "variants render: no egress to the OTLP collector"; fi
"$HELM" template receipts "$CHART" --namespace receipts --set tracing.enabled=true --set tracing.endpoint=http://otel:4318 >"$TMP/tracing.yaml"
for j in topics migrate; do
  if doc Job "receipts-$j" "$TMP/tracing.yaml" | grep -q 'OTEL_\|TRACE_SAMPLE'; then bad "the $j Job traces"; else ok; fi
done
if workload receipts-persister "$TMP/tracing.yaml" | grep -q OTEL_EXPORTER_OTLP_HEADERS; then bad "headers rendered without tracing.headersSecret"; else ok; fi
if workload receipts-kafkagate "$TMP/tracing.yaml" | env_value OTEL_EXPORTER_OTLP_PROTOCOL | grep -qx '"http/protobuf"'; then ok; else bad "tracing's default protocol is not http/protobuf"; fi

# KEDA (persister.autoscaling.keda, on in the operators values): a
# ScaledObject on the persister group's lag built from the chart's values,
# and then no CPU HPA for the persister and no replicas in its Deployment.
OPS=$TMP/rendered-operators-values.yaml
for kind in ScaledObject TriggerAuthentication KafkaTopic KafkaUser; do
  if grep -q "^kind: $kind$" "$OPS"; then ok; else bad "operators render has no $kind"; fi
  if grep -q "^kind: $kind$" "$RENDERED" "$PROD"; then bad "default or production render has a $kind (off by default)"; else ok; fi
done
doc ScaledObject receipts-persister "$OPS" >"$TMP/so.yaml"
for want in 'name: receipts-persister' 'type: kafka' 'bootstrapServers: "events-kafka-bootstrap.kafka.svc:9093"' 'consumerGroup: "receipts-persister"' \
  'topic: "read-receipts"' 'lagThreshold: "200000"' 'minReplicaCount: 2' 'maxReplicaCount: 16' 'offsetResetPolicy: earliest' 'tls: enable' \
  'name: receipts-persister-kafka'; do
  if grep -qF -- "$want" "$TMP/so.yaml"; then ok; else cat "$TMP/so.yaml" >&2; bad "ScaledObject lacks '$want'"; fi
done
if doc HorizontalPodAutoscaler receipts-persister "$OPS" | grep -q .; then bad "operators render has a persister HPA beside KEDA"; else ok; fi
if doc Deployment receipts-persister "$OPS" | grep -q '^  replicas:'; then bad "persister Deployment sets replicas under KEDA"; else ok; fi
# The TriggerAuthentication is the persister's own Kafka credentials.
doc TriggerAuthentication receipts-persister-kafka "$OPS" | tr -d '\n' | sed 's/ \+/ /g' >"$TMP/ta.txt"
for want in '- parameter: ca name: events-cluster-ca-cert key: ca.crt' '- parameter: cert name: receipts-persister key: user.crt' \
  '- parameter: key name: receipts-persister key: user.key'; do
  if grep -qF -- "$want" "$TMP/ta.txt"; then ok; else cat "$TMP/ta.txt" >&2; bad "TriggerAuthentication lacks '$want'"; fi
done
# KEDA over SCRAM and one TLS Secret (the production values with KEDA
# instead of the HPA): the password from the SASL Secret, the username from
# the persister container.
if "$HELM" template receipts "$CHART" --namespace receipts -f "$CHART/ci/production-values.yaml" --set persister.autoscaling.enabled=false \
  --set persister.autoscaling.keda.enabled=true --set persister.autoscaling.keda.maxReplicaCount=32 >"$TMP/keda-prod.yaml" 2>"$TMP/err"; then
  if kubeconform_strict "$TMP/keda-prod.yaml" >"$TMP/kc" 2>&1 && grep -q 'Skipped: 0' "$TMP/kc"; then ok; else cat "$TMP/kc" >&2; bad "kubeconform (production values with KEDA)"; fi
  doc TriggerAuthentication receipts-persister-kafka "$TMP/keda-prod.yaml" | tr -d '\n' | sed 's/ \+/ /g' >"$TMP/ta.txt"
  for want in '- parameter: username name: RECEIPTS_KAFKA_SASL_USERNAME containerName: persister' '- parameter: password name: receipts-kafka-sasl key: password' \
    '- parameter: ca name: receipts-kafka-tls key: ca.crt' '- parameter: cert name: receipts-kafka-tls key: tls.crt'; do
    if grep -qF -- "$want" "$TMP/ta.txt"; then ok; else cat "$TMP/ta.txt" >&2; bad "TriggerAuthentication (SCRAM) lacks '$want'"; fi
  done
  if doc ScaledObject receipts-persister "$TMP/keda-prod.yaml" | grep -qF 'sasl: scram_sha512'; then ok; else bad "ScaledObject lacks sasl: scram_sha512"; fi
  if grep -q '^kind: HorizontalPodAutoscaler$' "$TMP/keda-prod.yaml" && doc HorizontalPodAutoscaler receipts-persister "$TMP/keda-prod.yaml" | grep -q .; then
    bad "a persister HPA beside KEDA"; else ok; fi
else cat "$TMP/err" >&2; bad "helm template (production values with KEDA)"; fi
# The consumer group is one value: the persister joins it, kafkagate waits
# on it, KEDA reads its lag, its KafkaUser may read it.
"$HELM" template receipts "$CHART" -f "$CHART/ci/operators-values.yaml" --set persister.consumerGroup=g-x >"$TMP/group.yaml"
if [ "$(grep -A1 -E 'name: RECEIPTS_(PERSISTER_)?GROUP$' "$TMP/group.yaml" | grep -cF 'value: "g-x"')" = 2 ] &&
  doc ScaledObject receipts-persister "$TMP/group.yaml" | grep -qF 'consumerGroup: "g-x"' &&
  doc KafkaUser receipts-persister "$TMP/group.yaml" | grep -qF 'name: g-x'; then ok
else bad "persister.consumerGroup does not reach the persister, kafkagate, the ScaledObject and the KafkaUser"; fi

# Strimzi (on in the operators values): KafkaTopics from the topic values
# (and no topic Job), KafkaUsers with exactly the ACLs of
# tests/strimzi-acls.txt, and mutual TLS from two Secrets: the cluster CA
# and each component's user Secret.
if grep -q '^  name: receipts-topics$' <(awk '/^kind: Job$/,/^---/' "$OPS"); then bad "the topic Job runs beside the KafkaTopics"; else ok; fi
for t in "topic read-receipts 16" "dlt read-receipts-dlt 4" "changes read-state-changes 32"; do
  set -- $t
  doc KafkaTopic "receipts-$1" "$OPS" >"$TMP/kt.yaml"
  if grep -qF "topicName: $2" "$TMP/kt.yaml" && grep -qF "partitions: $3" "$TMP/kt.yaml" && grep -qF 'replicas: 3' "$TMP/kt.yaml" &&
    grep -qF 'namespace: kafka' "$TMP/kt.yaml" && grep -qF 'strimzi.io/cluster: events' "$TMP/kt.yaml" &&
    grep -qF 'helm.sh/resource-policy: keep' "$TMP/kt.yaml" && grep -qF 'min.insync.replicas: "2"' "$TMP/kt.yaml"; then ok
  else cat "$TMP/kt.yaml" >&2; bad "KafkaTopic receipts-$1 is not $2 with $3 partitions, 3 replicas, in kafka, kept"; fi
done
# acls FILE: "user resource-type:name operations" for each ACL rule.
acls() { awk '/^kind: /{u=($2=="KafkaUser")} u && /^  name: /{user=$2} u && /^          name: /{rn=$2} u && /^          type: /{rt=$2}
  u && /^          - /{ops = ops (ops == "" ? "" : ",") $2} u && /^        host: /{print user, rt ":" rn, ops; ops=""}' "$1"; }
# With the topic Job on (Strimzi users without Strimzi topics), the Job has
# a user of its own too.
"$HELM" template receipts "$CHART" -f "$CHART/ci/operators-values.yaml" --set strimzi.topics.enabled=false >"$TMP/users.yaml"
acls "$TMP/users.yaml" >"$TMP/acls.txt"
if diff -u "$CHART/tests/strimzi-acls.txt" "$TMP/acls.txt" >"$TMP/diff"; then ok; else cat "$TMP/diff" >&2; bad "KafkaUser ACLs differ from $CHART/tests/strimzi-acls.txt"; fi
if doc KafkaUser receipts-topics "$TMP/users.yaml" | grep -qF 'helm.sh/hook-weight: "-6"' && grep -q '^  name: receipts-topics$' <(awk '/^kind: Job$/,/^---/' "$TMP/users.yaml"); then ok
else bad "with the topic Job, its KafkaUser is not a hook before it"; fi
if doc KafkaUser receipts-topics "$OPS" | grep -q .; then bad "a topic KafkaUser without the topic Job"; else ok; fi
for c in kafkagate persister dlt-reconciler; do
  w=$(awk -v n="  name: receipts-$c" '/^kind: (Deployment|StatefulSet)$/{d=1} /^---/{d=0; p=0} d && $0 == n {p=1} p' "$OPS")
  if grep -q 'name: events-cluster-ca-cert' <<<"$w" && grep -A3 "name: receipts-$c$" <<<"$w" | grep -q 'key: user.crt' &&
    grep -qF 'value: /etc/receipts/kafka-tls/tls.crt' <<<"$w"; then ok
  else bad "$c does not mount the cluster CA and its own user certificate"; fi
done
# SCRAM users: each component's name and the password from its user Secret.
"$HELM" template receipts "$CHART" -f "$CHART/ci/operators-values.yaml" --set strimzi.users.authentication=scram-sha-512 >"$TMP/scram.yaml"
if kubeconform_strict "$TMP/scram.yaml" >"$TMP/kc" 2>&1 && "$CHECK" manifests "$TMP/scram.yaml"; then ok; else cat "$TMP/kc" >&2; bad "Strimzi SCRAM render invalid"; fi
if grep -A1 'name: RECEIPTS_KAFKA_SASL_USERNAME' "$TMP/scram.yaml" | grep -qF 'value: "receipts-persister"' &&
  grep -A4 'name: RECEIPTS_KAFKA_SASL_PASSWORD' "$TMP/scram.yaml" | grep -A1 'name: receipts-persister$' | grep -q 'key: password' &&
  ! grep -q RECEIPTS_KAFKA_TLS_CERT_FILE "$TMP/scram.yaml"; then ok
else bad "Strimzi SCRAM users: the persister does not authenticate as receipts-persister with its user Secret's password"; fi
# The one-Secret way still works: the production render mounts
# receipts-kafka-tls for the CA and the client certificate.
if grep -A12 'name: kafka-tls$' "$PROD" | grep -q 'name: receipts-kafka-tls' && grep -qF 'value: /etc/receipts/kafka-tls/ca.crt' "$PROD"; then ok
else bad "production render lost the one-Secret Kafka TLS"; fi

# kafkagate's shutdown delay reaches the binary, and the grace period
# covers delay + drain (chartcheck fails a grace period shorter than that).
if grep -A1 'name: RECEIPTS_SHUTDOWN_DELAY' "$RENDERED" | grep -qF 'value: "5s"'; then ok; else bad "default render lacks RECEIPTS_SHUTDOWN_DELAY=5s"; fi
"$HELM" template receipts "$CHART" --set kafkagate.shutdownDelay=40s >"$TMP/long-delay.yaml"
expect_fail "policy check on a grace period shorter than delay + drain" "$CHECK" manifests "$TMP/long-delay.yaml"

step "bad values files must fail"
for f in "$CHART"/tests/bad-values/*.yaml; do
  want=$(sed -n 's/^# expect: //p' "$f")
  [ -n "$want" ] || { bad "$f: no '# expect: <message>' line"; continue; }
  if "$HELM" template receipts "$CHART" -f "$f" >/dev/null 2>"$TMP/err"; then
    bad "$f: helm template accepted it"
  elif grep -qF -- "$want" "$TMP/err"; then ok
  else bad "$f: helm template failed without '$want':"; cat "$TMP/err" >&2
  fi
  if grep -q '^# lint: fail' "$f"; then
    if "$HELM" lint --strict "$CHART" -f "$f" >"$TMP/lint" 2>&1; then bad "$f: helm lint --strict accepted it"
    elif grep -qF -- "$want" "$TMP/lint"; then ok
    else bad "$f: helm lint failed without '$want'"; cat "$TMP/lint" >&2
    fi
  fi
done

step "promtool check rules, test rules"
RULES=$CHART/files/prometheus-rules.yaml
RULE_TESTS=("$CHART"/tests/rules-test.yaml "$CHART"/tests/rules-slo-test.yaml)
if "$PROMTOOL" check rules "$RULES" >"$TMP/pt" 2>&1; then ok; else cat "$TMP/pt" >&2; bad "promtool check rules"; fi
if "$PROMTOOL" test rules "${RULE_TESTS[@]}" >"$TMP/pt" 2>&1; then ok; else cat "$TMP/pt" >&2; bad "promtool test rules"; fi

step "alerts ↔ tests ↔ runbook, dashboard, values documented, metric names"
DASH=$CHART/files/dashboards/receipts.json
if "$CHECK" rules -rules "$RULES" -tests "$(IFS=,; echo "${RULE_TESTS[*]}")" -runbook docs/operations.md; then ok; else bad "alerts: tests or runbook sections missing"; fi
if jq -e '.panels | length > 0' "$DASH" >/dev/null; then ok; else bad "$DASH is not valid JSON with panels"; fi
if "$CHECK" dashboard "$DASH"; then ok; else bad "dashboard checks"; fi
if "$CHECK" values-doc -values "$CHART/values.yaml" -readme "$CHART/README.md"; then ok; else bad "values missing from $CHART/README.md"; fi
"$CHECK" metric-names -rules "$RULES" -dashboard "$DASH" >"$TMP/names"
if diff -u "$CHART/files/metric-names.txt" "$TMP/names" >"$TMP/diff"; then ok
else cat "$TMP/diff" >&2; bad "$CHART/files/metric-names.txt differs from the names the rules and dashboard use (left: the file; right: the queries)"; fi

step "the checkers catch planted faults"
# A field kubeconform's strict schemas do not know, and a string for an integer.
sed 's/^  revisionHistoryLimit: 5$/  revisionHistoryLimit: "5"\n  replicaz: 2/' "$RENDERED" >"$TMP/planted.yaml"
grep -q replicaz "$TMP/planted.yaml" || bad "planting a fault in the render failed"
expect_fail "kubeconform on an unknown field" kubeconform_strict "$TMP/planted.yaml"
# An insecure container and a literal database URL.
sed '0,/readOnlyRootFilesystem: true/s//readOnlyRootFilesystem: false/' "$RENDERED" >"$TMP/insecure.yaml"
expect_fail "policy check on a writable root filesystem" "$CHECK" manifests "$TMP/insecure.yaml"
awk '/name: RECEIPTS_PG_URL/ && !done {print; print "              value: postgres://u:p@db/x"; getline; getline; getline; getline; done=1; next} {print}' "$RENDERED" >"$TMP/literal.yaml"
expect_fail "policy check on a literal RECEIPTS_PG_URL" "$CHECK" manifests "$TMP/literal.yaml"
# The OTLP exporter's headers (the collector's credentials) as a literal.
"$HELM" template receipts "$CHART" --set tracing.enabled=true --set tracing.endpoint=http://otel:4318 \
  --set 'persister.extraEnv[0].name=OTEL_EXPORTER_OTLP_HEADERS' --set 'persister.extraEnv[0].value=x-api-key=abc' >"$TMP/otlp-literal.yaml"
expect_fail "policy check on literal OTLP headers" "$CHECK" manifests "$TMP/otlp-literal.yaml"
# Two dashboard panels at the same place.
jq '.panels[2].gridPos = .panels[1].gridPos' "$DASH" >"$TMP/dash.json"
expect_fail "dashboard check on overlapping panels" "$CHECK" dashboard "$TMP/dash.json"
# A KEDA trigger metadata value that is not a string, and an ACL operation
# Strimzi does not know.
sed 's/allowIdleConsumers: "false"/allowIdleConsumers: false/' "$OPS" >"$TMP/planted-keda.yaml"
grep -q 'allowIdleConsumers: false' "$TMP/planted-keda.yaml" || bad "planting the KEDA fault failed"
expect_fail "kubeconform on a non-string KEDA trigger value" kubeconform_strict "$TMP/planted-keda.yaml"
sed '0,/          - Write/s//          - Wrte/' "$OPS" >"$TMP/planted-acl.yaml"
expect_fail "kubeconform on an unknown ACL operation" kubeconform_strict "$TMP/planted-acl.yaml"
# An ACL more than the table allows.
sed '0,/          - Write/s//          - Write\n          - Alter/' "$TMP/users.yaml" >"$TMP/planted-acl.yaml"
acls "$TMP/planted-acl.yaml" >"$TMP/acls.txt"
expect_fail "ACL check on an extra operation" diff -q "$CHART/tests/strimzi-acls.txt" "$TMP/acls.txt"
# A test file without the not-firing cases.
grep -v 'exp_alerts: \[\]' "$CHART/tests/rules-test.yaml" >"$TMP/rules-test.yaml"
expect_fail "rules check without not-firing cases" "$CHECK" rules -rules "$RULES" -tests "$TMP/rules-test.yaml" -runbook docs/operations.md
# scripts/check-metric-names.sh: a dump with every name passes, one without
# a name fails naming it.
awk '{print "# TYPE " $1 " counter"; print $1 "{pod=\"x\"} 1"}' "$CHART/files/metric-names.txt" >"$TMP/full.prom"
if scripts/check-metric-names.sh "$TMP/full.prom" >"$TMP/cmn" 2>&1; then ok; else cat "$TMP/cmn" >&2; bad "check-metric-names.sh rejects a complete dump"; fi
missing=$(sed -n 3p "$CHART/files/metric-names.txt")
grep -v "^$missing[{ ]" "$TMP/full.prom" | grep -v "^# TYPE $missing " >"$TMP/partial.prom"
if scripts/check-metric-names.sh "$TMP/partial.prom" >"$TMP/cmn" 2>&1; then bad "check-metric-names.sh accepts a dump without $missing"
elif grep -qx "  $missing" "$TMP/cmn"; then ok
else cat "$TMP/cmn" >&2; bad "check-metric-names.sh did not name $missing"; fi

echo "chart-test: took $((SECONDS - start)) s"
echo "chart-test: $passed passed, $failed failed"
[ "$failed" = 0 ]
