{{/* Names ---------------------------------------------------------------- */}}

{{- define "receipts.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name; components append "-kafkagate" etc., so it is
kept to 40 characters (component names and pod suffixes stay within 63). */}}
{{- define "receipts.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "receipts.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "receipts.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "receipts.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels: call with (dict "ctx" $ "component" "kafkagate"). */}}
{{- define "receipts.selectorLabels" -}}
app.kubernetes.io/name: {{ include "receipts.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{- define "receipts.labels" -}}
helm.sh/chart: {{ include "receipts.chart" .ctx }}
{{ include "receipts.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: receipts
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "receipts.image" -}}
{{- $img := .Values.image -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{/* Secrets ------------------------------------------------------------- */}}

{{/* The Secret the chart creates for credentials given as values. */}}
{{- define "receipts.secretName" -}}
{{- printf "%s-credentials" (include "receipts.fullname" .) -}}
{{- end -}}

{{/* API tokens: the chart generates a token Secret when the API would
otherwise have no credential and is not open on purpose. */}}
{{- define "receipts.apiTokensGenerated" -}}
{{- $a := .Values.kafkagate.auth -}}
{{- if not (or $a.existingSecret .Values.kafkagate.tls.clientAuth $a.insecureAllowUnauthenticated) -}}
true
{{- end -}}
{{- end -}}

{{- define "receipts.apiTokensSecret" -}}
{{- default (printf "%s-api-tokens" (include "receipts.fullname" .)) .Values.kafkagate.auth.existingSecret -}}
{{- end -}}

{{/* The API authenticates: tokens (given or generated) or mTLS. */}}
{{- define "receipts.apiAuthenticated" -}}
{{- if or .Values.kafkagate.auth.existingSecret .Values.kafkagate.tls.clientAuth (include "receipts.apiTokensGenerated" .) -}}
true
{{- end -}}
{{- end -}}

{{- define "receipts.needsChartSecret" -}}
{{- if or (not .Values.postgres.existingSecret) (not .Values.redis.existingSecret) (include "receipts.chartSASLPassword" .) -}}
true
{{- end -}}
{{- end -}}

{{/* The chart's Secret holds the SASL password (kafka.sasl.password). */}}
{{- define "receipts.chartSASLPassword" -}}
{{- if and .Values.kafka.sasl.mechanism (not .Values.kafka.sasl.existingSecret) (not .Values.strimzi.users.enabled) -}}
true
{{- end -}}
{{- end -}}

{{/* secretKeyRef for Postgres / Redis / SASL: (dict "ctx" $ "which" "postgres"). */}}
{{- define "receipts.secretRef" -}}
{{- $v := .ctx.Values -}}
{{- if eq .which "postgres" -}}
name: {{ default (include "receipts.secretName" .ctx) $v.postgres.existingSecret }}
key: {{ ternary $v.postgres.urlKey "postgres-url" (ne $v.postgres.existingSecret "") }}
{{- else if eq .which "redis" -}}
name: {{ default (include "receipts.secretName" .ctx) $v.redis.existingSecret }}
key: {{ ternary $v.redis.urlKey "redis-url" (ne $v.redis.existingSecret "") }}
{{- else if eq .which "sasl" -}}
name: {{ default (include "receipts.secretName" .ctx) $v.kafka.sasl.existingSecret }}
key: {{ ternary $v.kafka.sasl.passwordKey "kafka-sasl-password" (ne $v.kafka.sasl.existingSecret "") }}
{{- end -}}
{{- end -}}

{{/* Checks that fail the render with a reason -------------------------- */}}

{{- define "receipts.validate" -}}
{{- $v := .Values -}}
{{- if not $v.kafka.brokers -}}
{{- fail "kafka.brokers: set the Kafka seed brokers (host:port list)" -}}
{{- end -}}
{{- if and (not $v.postgres.url) (not $v.postgres.existingSecret) -}}
{{- fail "postgres: set postgres.url or postgres.existingSecret" -}}
{{- end -}}
{{- if and (not $v.redis.url) (not $v.redis.existingSecret) -}}
{{- fail "redis: set redis.url or redis.existingSecret" -}}
{{- end -}}
{{- if and (ne $v.redis.mode "single") (not $v.redis.addrs) -}}
{{- fail (printf "redis.addrs: redis.mode %s needs the cluster seeds or sentinel addresses" $v.redis.mode) -}}
{{- end -}}
{{- if and (eq $v.redis.mode "sentinel") (not $v.redis.sentinelMaster) -}}
{{- fail "redis.sentinelMaster: redis.mode sentinel needs the master's name" -}}
{{- end -}}
{{- if and $v.kafka.sasl.mechanism (not $v.kafka.sasl.username) -}}
{{- fail "kafka.sasl.username: a SASL mechanism needs a username" -}}
{{- end -}}
{{- if and $v.kafka.sasl.mechanism (not $v.kafka.sasl.password) (not $v.kafka.sasl.existingSecret) -}}
{{- fail "kafka.sasl: set kafka.sasl.password or kafka.sasl.existingSecret" -}}
{{- end -}}
{{- if and $v.kafka.tls.existingSecret (not $v.kafka.tls.enabled) -}}
{{- fail "kafka.tls.existingSecret is set but kafka.tls.enabled is false" -}}
{{- end -}}
{{- if and (or $v.kafka.tls.caSecret $v.kafka.tls.certSecret) (not $v.kafka.tls.enabled) -}}
{{- fail "kafka.tls.caSecret or kafka.tls.certSecret is set but kafka.tls.enabled is false" -}}
{{- end -}}
{{- if and $v.kafkagate.tls.clientScopesKey (not $v.kafkagate.tls.clientAuth) -}}
{{- fail "kafkagate.tls.clientScopesKey needs kafkagate.tls.clientAuth (the scopes are of client certificates)" -}}
{{- end -}}
{{- if and $v.kafkagate.tls.clientAuth (not $v.kafkagate.tls.existingSecret) -}}
{{- fail "kafkagate.tls.clientAuth needs kafkagate.tls.existingSecret (the server certificate and the client CA)" -}}
{{- end -}}
{{- $parts := int $v.kafka.topicPartitions -}}
{{- $p := $v.persister -}}
{{- if $p.changeFeed.enabled -}}
{{- if not $p.changeFeed.topic -}}
{{- fail "persister.changeFeed.topic: the change feed is enabled without a topic" -}}
{{- end -}}
{{- if or (eq $p.changeFeed.topic $v.kafka.topic) (eq $p.changeFeed.topic $v.kafka.dltTopic) -}}
{{- fail (printf "persister.changeFeed.topic %q must differ from kafka.topic and kafka.dltTopic" $p.changeFeed.topic) -}}
{{- end -}}
{{- end -}}
{{- $keda := $p.autoscaling.keda -}}
{{- if and $p.autoscaling.enabled $keda.enabled -}}
{{- fail "persister.autoscaling.enabled and persister.autoscaling.keda.enabled are exclusive: KEDA makes its own HPA and refuses a workload another HPA scales; turn one off" -}}
{{- end -}}
{{- if $keda.enabled -}}
{{- if gt (int $keda.maxReplicaCount) $parts -}}
{{- fail (printf "persister.autoscaling.keda.maxReplicaCount (%d) exceeds kafka.topicPartitions (%d): consumers beyond the partition count sit idle" (int $keda.maxReplicaCount) $parts) -}}
{{- end -}}
{{- if gt (int $keda.minReplicaCount) (int $keda.maxReplicaCount) -}}
{{- fail "persister.autoscaling.keda.minReplicaCount exceeds maxReplicaCount" -}}
{{- end -}}
{{- else if $p.autoscaling.enabled -}}
{{- if gt (int $p.autoscaling.maxReplicas) $parts -}}
{{- fail (printf "persister.autoscaling.maxReplicas (%d) exceeds kafka.topicPartitions (%d): consumers beyond the partition count sit idle" (int $p.autoscaling.maxReplicas) $parts) -}}
{{- end -}}
{{- if gt (int $p.autoscaling.minReplicas) (int $p.autoscaling.maxReplicas) -}}
{{- fail "persister.autoscaling.minReplicas exceeds maxReplicas" -}}
{{- end -}}
{{- else if gt (int $p.replicas) $parts -}}
{{- fail (printf "persister.replicas (%d) exceeds kafka.topicPartitions (%d): consumers beyond the partition count sit idle" (int $p.replicas) $parts) -}}
{{- end -}}
{{- $s := $v.strimzi -}}
{{- if and (or $s.topics.enabled $s.users.enabled) (not $s.cluster) -}}
{{- fail "strimzi.cluster: Strimzi topics and users need the Kafka cluster's name (their strimzi.io/cluster label)" -}}
{{- end -}}
{{- if and (include "receipts.strimziTLS" .) (not $v.kafka.tls.enabled) -}}
{{- fail "strimzi.users.authentication tls needs kafka.tls.enabled (the client certificate is presented over TLS)" -}}
{{- end -}}
{{- if and $s.users.enabled $v.kafka.sasl.mechanism -}}
{{- fail "kafka.sasl.mechanism must be empty with strimzi.users.enabled: each component authenticates as its own KafkaUser" -}}
{{- end -}}
{{- if and $s.users.enabled $v.kafka.tls.certSecret -}}
{{- fail "kafka.tls.certSecret must be empty with strimzi.users.enabled: each component's certificate is its KafkaUser's Secret" -}}
{{- end -}}
{{- if and $v.tracing.enabled (not $v.tracing.endpoint) -}}
{{- fail "tracing.endpoint: tracing.enabled needs the OTLP collector's URL (http://otel-collector:4318, or :4317 with protocol grpc)" -}}
{{- end -}}
{{- if and $v.kafkagate.autoscaling.enabled (gt (int $v.kafkagate.autoscaling.minReplicas) (int $v.kafkagate.autoscaling.maxReplicas)) -}}
{{- fail "kafkagate.autoscaling.minReplicas exceeds maxReplicas" -}}
{{- end -}}
{{- end -}}

{{/* Pod pieces ---------------------------------------------------------- */}}

{{- define "receipts.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "receipts.containerSecurityContext" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Environment shared by every service binary: logging, Kafka (with
TLS/SASL), Postgres. Call with (dict "ctx" $ "component" "persister"). */}}
{{- define "receipts.env.common" -}}
{{- $v := .ctx.Values -}}
- name: RECEIPTS_LOG_FORMAT
  value: {{ $v.log.format | quote }}
- name: RECEIPTS_LOG_LEVEL
  value: {{ $v.log.level | quote }}
- name: RECEIPTS_PG_URL
  valueFrom:
    secretKeyRef:
      {{- include "receipts.secretRef" (dict "ctx" .ctx "which" "postgres") | nindent 6 }}
{{ include "receipts.env.kafka" . }}
{{- end -}}

{{/* The Kafka connection alone (brokers, TLS, SASL): the topic Job needs
nothing else. Call with (dict "ctx" $ "component" "topics"). */}}
{{- define "receipts.env.kafka" -}}
{{- $v := .ctx.Values -}}
{{- $tls := include "receipts.kafkaTLS" . | fromJson -}}
- name: RECEIPTS_BROKERS
  value: {{ join "," $v.kafka.brokers | quote }}
{{- if $v.kafka.tls.enabled }}
- name: RECEIPTS_KAFKA_TLS
  value: "true"
{{- if $tls.caSecret }}
- name: RECEIPTS_KAFKA_TLS_CA_FILE
  value: /etc/receipts/kafka-tls/ca.crt
{{- end }}
{{- if $tls.certSecret }}
- name: RECEIPTS_KAFKA_TLS_CERT_FILE
  value: /etc/receipts/kafka-tls/tls.crt
- name: RECEIPTS_KAFKA_TLS_KEY_FILE
  value: /etc/receipts/kafka-tls/tls.key
{{- end }}
{{- if $v.kafka.tls.serverName }}
- name: RECEIPTS_KAFKA_TLS_SERVER_NAME
  value: {{ $v.kafka.tls.serverName | quote }}
{{- end }}
{{- end }}
{{- if include "receipts.strimziSCRAM" .ctx }}
- name: RECEIPTS_KAFKA_SASL_MECHANISM
  value: SCRAM-SHA-512
- name: RECEIPTS_KAFKA_SASL_USERNAME
  value: {{ include "receipts.kafkaUserName" . | quote }}
- name: RECEIPTS_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "receipts.kafkaUserName" . }}
      key: password
{{- else if $v.kafka.sasl.mechanism }}
- name: RECEIPTS_KAFKA_SASL_MECHANISM
  value: {{ $v.kafka.sasl.mechanism | quote }}
- name: RECEIPTS_KAFKA_SASL_USERNAME
  value: {{ $v.kafka.sasl.username | quote }}
- name: RECEIPTS_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      {{- include "receipts.secretRef" (dict "ctx" .ctx "which" "sasl") | nindent 6 }}
{{- end }}
{{- end -}}

{{/* Kafka TLS material of a component, as JSON: caSecret/caKey (the CA
bundle) and certSecret/certKey/keyKey (the client certificate); an empty
secret means none. The CA and the certificate may come from one Secret
(kafka.tls.existingSecret), from two (caSecret, certSecret), or from
Strimzi (the cluster CA Secret and the component's KafkaUser Secret).
Call with (dict "ctx" $ "component" "persister"). */}}
{{- define "receipts.kafkaTLS" -}}
{{- $t := .ctx.Values.kafka.tls -}}
{{- $out := dict "caSecret" "" "caKey" $t.caKey "certSecret" "" "certKey" $t.certKey "keyKey" $t.keyKey -}}
{{- if $t.enabled -}}
{{- if $t.caKey -}}
{{- $_ := set $out "caSecret" (default $t.existingSecret $t.caSecret) -}}
{{- end -}}
{{- if and $t.certKey $t.keyKey -}}
{{- $_ := set $out "certSecret" (default $t.existingSecret $t.certSecret) -}}
{{- end -}}
{{- if and .ctx.Values.strimzi.users.enabled (not $out.caSecret) -}}
{{- $_ := set $out "caSecret" (printf "%s-cluster-ca-cert" .ctx.Values.strimzi.cluster) -}}
{{- $_ := set $out "caKey" "ca.crt" -}}
{{- end -}}
{{- if include "receipts.strimziTLS" .ctx -}}
{{- $_ := set $out "certSecret" (include "receipts.kafkaUserName" .) -}}
{{- $_ := set $out "certKey" "user.crt" -}}
{{- $_ := set $out "keyKey" "user.key" -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Strimzi users: on, and how they authenticate. Call with $. */}}
{{- define "receipts.strimziTLS" -}}
{{- if and .Values.strimzi.users.enabled (eq .Values.strimzi.users.authentication "tls") -}}
true
{{- end -}}
{{- end -}}

{{- define "receipts.strimziSCRAM" -}}
{{- if and .Values.strimzi.users.enabled (eq .Values.strimzi.users.authentication "scram-sha-512") -}}
true
{{- end -}}
{{- end -}}

{{/* The topic Job runs: topics.create, unless Strimzi manages the topics. */}}
{{- define "receipts.topicJob" -}}
{{- if and .Values.topics.create (not .Values.strimzi.topics.enabled) -}}
true
{{- end -}}
{{- end -}}

{{/* A component's KafkaUser (and its Secret's) name:
(dict "ctx" $ "component" "persister"). */}}
{{- define "receipts.kafkaUserName" -}}
{{- printf "%s-%s" (include "receipts.fullname" .ctx) .component -}}
{{- end -}}

{{/* Environment of the long-running services (not the hook Jobs). */}}
{{- define "receipts.env.service" -}}
- name: RECEIPTS_ADMIN_ADDR
  value: "0.0.0.0:9090"
- name: RECEIPTS_MIGRATE
  value: "false"
- name: RECEIPTS_CLIENT_ID
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- /* The services collect garbage at 400 % (--gc-percent): the container's
memory limit becomes Go's soft limit, so a heap that grows toward it is
collected sooner instead of the pod being killed. */}}
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- end -}}

{{/* OpenTelemetry tracing of a long-running service (tracing.enabled): the
OTLP endpoint and protocol, the sample ratio (--trace-sample-ratio), the
resource, and the exporter's headers from a Secret. Nothing when off: the
binaries then install no instrumentation. Call with
(dict "ctx" $ "component" "persister"), after receipts.env.service (the
resource names the pod through RECEIPTS_CLIENT_ID). */}}
{{- define "receipts.env.tracing" -}}
{{- $t := .ctx.Values.tracing -}}
{{- if $t.enabled -}}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $t.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $t.protocol | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ .component | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "k8s.namespace.name=%s,k8s.pod.name=$(RECEIPTS_CLIENT_ID)" .ctx.Release.Namespace | quote }}
- name: RECEIPTS_TRACE_SAMPLE_RATIO
  value: {{ $t.sampleRatio | toString | quote }}
{{- if $t.headersSecret }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ $t.headersSecret }}
      key: {{ $t.headersKey }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "receipts.env.redis" -}}
{{- $r := .Values.redis -}}
- name: RECEIPTS_REDIS_MODE
  value: {{ $r.mode | quote }}
- name: RECEIPTS_REDIS_URL
  valueFrom:
    secretKeyRef:
      {{- include "receipts.secretRef" (dict "ctx" . "which" "redis") | nindent 6 }}
{{- if $r.addrs }}
- name: RECEIPTS_REDIS_ADDRS
  value: {{ join "," $r.addrs | quote }}
{{- end }}
{{- if eq $r.mode "sentinel" }}
- name: RECEIPTS_REDIS_SENTINEL_MASTER
  value: {{ $r.sentinelMaster | quote }}
{{- end }}
- name: RECEIPTS_REDIS_PREFIX
  value: {{ $r.prefix | quote }}
{{- if $r.tls.existingSecret }}
- name: RECEIPTS_REDIS_TLS_CA_FILE
  value: /etc/receipts/redis-tls/{{ $r.tls.caKey }}
{{- end }}
{{- end -}}

{{/* The Redis CA (redis.tls.existingSecret), for the pods that use Redis. */}}
{{- define "receipts.volumes.redis" -}}
{{- if .Values.redis.tls.existingSecret }}
- name: redis-tls
  secret:
    secretName: {{ .Values.redis.tls.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "receipts.mounts.redis" -}}
{{- if .Values.redis.tls.existingSecret }}
- name: redis-tls
  mountPath: /etc/receipts/redis-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* Volumes and mounts every pod has: a writable /tmp, and the Kafka TLS
material projected into one directory (ca.crt, tls.crt, tls.key) from one
Secret or two. Call with (dict "ctx" $ "component" "persister"). */}}
{{- define "receipts.volumes.common" -}}
{{- $tls := include "receipts.kafkaTLS" . | fromJson -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if or $tls.caSecret $tls.certSecret }}
- name: kafka-tls
  projected:
    defaultMode: 0440
    sources:
      {{- if $tls.caSecret }}
      - secret:
          name: {{ $tls.caSecret }}
          items:
            - key: {{ $tls.caKey }}
              path: ca.crt
      {{- end }}
      {{- if $tls.certSecret }}
      - secret:
          name: {{ $tls.certSecret }}
          items:
            - key: {{ $tls.certKey }}
              path: tls.crt
            - key: {{ $tls.keyKey }}
              path: tls.key
      {{- end }}
{{- end }}
{{- end -}}

{{- define "receipts.mounts.common" -}}
{{- $tls := include "receipts.kafkaTLS" . | fromJson -}}
- name: tmp
  mountPath: /tmp
{{- if or $tls.caSecret $tls.certSecret }}
- name: kafka-tls
  mountPath: /etc/receipts/kafka-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* Probes on the admin port: (dict "startupSeconds" 60). */}}
{{- define "receipts.probes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: admin
  periodSeconds: 2
  failureThreshold: 30
livenessProbe:
  httpGet:
    path: /healthz
    port: admin
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: admin
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
{{- end -}}

{{/* Pod annotations that roll the pods when chart-made credentials change. */}}
{{- define "receipts.checksums" -}}
checksum/credentials: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end -}}

{{/* Scheduling fields of a component's values. */}}
{{- define "receipts.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}
