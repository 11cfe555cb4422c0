{{/*
Names and labels.
*/}}
{{- define "lockgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lockgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lockgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lockgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "lockgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "lockgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The Secret holding the API keys: auth.existingSecret, or the one this chart renders from
auth.keys (named after the release only, so that a parent chart including the sidecar finds
it under the same name). Empty without keys.
*/}}
{{/*
The Secret the shared service's token secret is generated into (templates/token-secret.yaml)
when no existing one is named.
*/}}
{{- define "lockgate.tokenSecret" -}}
{{- printf "%s-lockgate-token" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lockgate.keysSecret" -}}
{{- if .Values.auth.existingSecret }}
{{- .Values.auth.existingSecret }}
{{- else if .Values.auth.keys }}
{{- printf "%s-lockgate-api-keys" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
Checks that exactly one store is configured.
*/}}
{{- define "lockgate.checkStore" -}}
{{- $stores := 0 }}
{{- if .Values.redis.url }}{{ $stores = add1 $stores }}{{ end }}
{{- if .Values.redis.urlSecret }}{{ $stores = add1 $stores }}{{ end }}
{{- if or .Values.sentinel.urls .Values.sentinel.urlsSecret }}{{ $stores = add1 $stores }}{{ end }}
{{- if or .Values.cluster.urls .Values.cluster.urlsSecret }}{{ $stores = add1 $stores }}{{ end }}
{{- if or .Values.redlock.urls .Values.redlock.urlsSecret }}{{ $stores = add1 $stores }}{{ end }}
{{- if and .Values.sentinel.urls .Values.sentinel.urlsSecret }}
{{- fail "lockgate: give sentinel.urls or sentinel.urlsSecret, not both" }}
{{- end }}
{{- if and .Values.cluster.urls .Values.cluster.urlsSecret }}
{{- fail "lockgate: give cluster.urls or cluster.urlsSecret, not both" }}
{{- end }}
{{- if and .Values.redlock.urls .Values.redlock.urlsSecret }}
{{- fail "lockgate: give redlock.urls or redlock.urlsSecret, not both" }}
{{- end }}
{{- /* A URL with a password would be in the pod spec (anyone who can get pods) and in ps. */}}
{{- range (concat (list .Values.redis.url) .Values.sentinel.urls .Values.cluster.urls .Values.redlock.urls) }}
{{- if regexMatch "^[a-z]+://[^/@]*:[^/@]*@" . }}
{{- fail "lockgate: a store URL in the values carries a password; put it in a Secret (redis.urlSecret, sentinel.urlsSecret, cluster.urlsSecret or redlock.urlsSecret)" }}
{{- end }}
{{- end }}
{{- if .Values.dev }}{{ $stores = add1 $stores }}{{ end }}
{{- if ne $stores 1 }}
{{- fail "lockgate: configure exactly one store: redis.url, redis.urlSecret, sentinel.urls(Secret), cluster.urls(Secret), redlock.urls(Secret) or dev" }}
{{- end }}
{{- if and (or .Values.sentinel.urls .Values.sentinel.urlsSecret) (not .Values.sentinel.master) }}
{{- fail "lockgate: sentinel.urls needs sentinel.master" }}
{{- end }}
{{- end }}

{{/*
The lockgate container. Call with a dict: "root" (a context whose .Values are lockgate's
values, with .Release and .Chart) and "sidecar" (true: listen on 127.0.0.1, exec probes,
restartPolicy Always for a native sidecar under initContainers).
*/}}
{{- define "lockgate.container" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $sidecar := .sidecar }}
{{- include "lockgate.checkStore" $root }}
{{- $keys := include "lockgate.keysSecret" $root }}
{{- if and (not $sidecar) (not $keys) (not $v.auth.allowUnauthenticated) }}
{{- fail "lockgate: a shared service needs API keys (auth.existingSecret or auth.keys), or auth.allowUnauthenticated=true" }}
{{- end }}
{{- $gateway := printf "http://127.0.0.1:%v" $v.port }}
name: lockgate
{{- if and $sidecar (not $v.image.tag) }}
{{- fail "lockgate: set lockgate.image.tag for the sidecar (the including chart's version says nothing about lockgate's)" }}
{{- end }}
image: "{{ $v.image.repository }}:{{ $v.image.tag | default $root.Chart.AppVersion }}"
imagePullPolicy: {{ $v.image.pullPolicy }}
{{- if $sidecar }}
restartPolicy: Always
{{- end }}
args:
  - --listen={{ if $sidecar }}127.0.0.1{{ else }}0.0.0.0{{ end }}:{{ $v.port }}
  {{- if and $sidecar $v.sidecarMetricsPort }}
  - --metrics-listen=0.0.0.0:{{ $v.sidecarMetricsPort }}
  {{- end }}
  {{- if $v.redis.url }}
  - --redis-url={{ $v.redis.url }}
  {{- end }}
  {{- if $v.sentinel.urls }}
  - --sentinel={{ join "," $v.sentinel.urls }}
  {{- end }}
  {{- if or $v.sentinel.urls $v.sentinel.urlsSecret }}
  - --sentinel-master={{ $v.sentinel.master }}
  {{- end }}
  {{- if $v.cluster.urls }}
  - --cluster={{ join "," $v.cluster.urls }}
  {{- end }}
  {{- if $v.redlock.urls }}
  - --redlock={{ join "," $v.redlock.urls }}
  - --redlock-node-timeout={{ $v.redlock.nodeTimeout }}
  {{- end }}
  {{- if $v.dev }}
  - --dev
  {{- end }}
  {{- if $v.redis.caSecret }}
  - --redis-ca-file=/etc/lockgate/redis-ca/{{ $v.redis.caSecret.key }}
  {{- end }}
  {{- if $keys }}
  - --api-keys-file=/etc/lockgate/api-keys/keys.json
  {{- else if and (not $sidecar) $v.auth.allowUnauthenticated }}
  - --allow-unauthenticated
  {{- $svc := include "lockgate.fullname" $root }}
  {{- $ns := $root.Release.Namespace }}
  {{- $hosts := concat (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) $v.auth.allowedHosts }}
  - --allowed-hosts={{ join "," $hosts }}
  {{- else if and $v.auth.allowedHosts (not $keys) }}
  - --allowed-hosts={{ join "," $v.auth.allowedHosts }}
  {{- end }}
  - --metrics-auth={{ $v.auth.metrics }}
  - --default-ttl={{ $v.limits.defaultTtl }}
  - --max-ttl={{ $v.limits.maxTtl }}
  - --max-wait={{ $v.limits.maxWait }}
  - --max-waiters={{ $v.limits.maxWaiters }}
  - --max-watchers={{ $v.limits.maxWatchers }}
  {{- with $v.limits.maxHold }}
  - --max-hold={{ . }}
  {{- end }}
  - --max-concurrent-requests={{ $v.limits.maxConcurrentRequests }}
  - --request-timeout={{ $v.limits.requestTimeout }}
  - --shutdown-delay={{ $v.shutdown.delay }}
  - --shutdown-grace={{ $v.shutdown.grace }}
  - --log-format={{ $v.logFormat }}
  {{- $workers := $v.workerThreads }}
  {{- if and (not $workers) $sidecar }}
  {{- $workers = 1 }}
  {{- end }}
  {{- with $workers }}
  - --worker-threads={{ . }}
  {{- end }}
  {{- range $v.extraArgs }}
  - {{ . | quote }}
  {{- end }}
env:
  - name: RUST_LOG
    value: {{ $v.logLevel | quote }}
  - name: LOCKGATE_GATEWAY
    value: {{ $gateway | quote }}
  {{- $tokenSecret := $v.tokenSecret.existingSecret }}
  {{- if and (not $tokenSecret) (not $sidecar) }}
  {{- $tokenSecret = include "lockgate.tokenSecret" $root }}
  {{- end }}
  {{- with $tokenSecret }}
  - name: LOCKGATE_TOKEN_SECRET
    valueFrom:
      secretKeyRef:
        name: {{ . }}
        key: {{ $v.tokenSecret.key }}
  {{- end }}
  {{- range $env, $secret := dict "LOCKGATE_REDIS_URL" $v.redis.urlSecret "LOCKGATE_SENTINELS" $v.sentinel.urlsSecret "LOCKGATE_CLUSTER" $v.cluster.urlsSecret "LOCKGATE_REDLOCK" $v.redlock.urlsSecret }}
  {{- with $secret }}
  - name: {{ $env }}
    valueFrom:
      secretKeyRef:
        name: {{ .name }}
        key: {{ .key }}
  {{- end }}
  {{- end }}
  {{- with $v.sentinel.credentialsSecret }}
  - name: LOCKGATE_REDIS_USERNAME
    valueFrom:
      secretKeyRef:
        name: {{ .name }}
        key: {{ .usernameKey }}
  - name: LOCKGATE_REDIS_PASSWORD
    valueFrom:
      secretKeyRef:
        name: {{ .name }}
        key: {{ .passwordKey }}
  {{- end }}
  {{- with $v.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- if not $sidecar }}
ports:
  - name: http
    containerPort: {{ $v.port }}
    protocol: TCP
{{- else if $v.sidecarMetricsPort }}
ports:
  - name: lockgate-prom
    containerPort: {{ $v.sidecarMetricsPort }}
    protocol: TCP
{{- end }}
{{- if $sidecar }}
{{- /* Loopback only: the kubelet cannot reach it over HTTP, so the binary checks itself. */}}
startupProbe:
  exec:
    command: ["/usr/local/bin/lockgate", "healthcheck"]
  {{- toYaml $v.probes.startup | nindent 2 }}
livenessProbe:
  exec:
    command: ["/usr/local/bin/lockgate", "healthcheck"]
  {{- toYaml $v.probes.liveness | nindent 2 }}
{{- /* Ready while serving: a Redis outage is 503s on lock calls, not the Pod taken out of its
     Services (unless sidecarReadinessFollowsBackend). */}}
readinessProbe:
  exec:
    command: ["/usr/local/bin/lockgate", "healthcheck"{{ if $v.sidecarReadinessFollowsBackend }}, "--ready"{{ end }}]
  {{- toYaml $v.probes.readiness | nindent 2 }}
{{- else }}
startupProbe:
  httpGet:
    path: /healthz
    port: http
  {{- toYaml $v.probes.startup | nindent 2 }}
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  {{- toYaml $v.probes.liveness | nindent 2 }}
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  {{- toYaml $v.probes.readiness | nindent 2 }}
{{- end }}
resources:
  {{- toYaml $v.resources | nindent 2 }}
securityContext:
  {{- toYaml $v.securityContext | nindent 2 }}
{{- if or $keys $v.redis.caSecret }}
volumeMounts:
  {{- if $keys }}
  - name: lockgate-api-keys
    mountPath: /etc/lockgate/api-keys
    readOnly: true
  {{- end }}
  {{- if $v.redis.caSecret }}
  - name: lockgate-redis-ca
    mountPath: /etc/lockgate/redis-ca
    readOnly: true
  {{- end }}
{{- end }}
{{- end }}

{{/*
The volumes the container mounts (a list, possibly empty). Same argument as lockgate.volumes
callers use for the sidecar: a context whose .Values are lockgate's values.
*/}}
{{- define "lockgate.volumes" -}}
{{- $keys := include "lockgate.keysSecret" . }}
{{- if $keys }}
- name: lockgate-api-keys
  secret:
    secretName: {{ $keys }}
    items:
      - key: keys.json
        path: keys.json
{{- end }}
{{- with .Values.redis.caSecret }}
- name: lockgate-redis-ca
  secret:
    secretName: {{ .name }}
{{- end }}
{{- end }}

{{/*
For other charts: lockgate as a native sidecar (Kubernetes 1.29+), to put under the pod's
initContainers. It starts before the application's containers and stops after them, so the
application can still release its locks while it shuts down. Call it with lockgate's values
(which must set image.tag):

  initContainers:
    {{- include "lockgate.sidecarContainer" (dict "Values" .Values.lockgate "Release" .Release "Chart" .Chart) | nindent 4 }}
  volumes:
    {{- include "lockgate.volumes" (dict "Values" .Values.lockgate "Release" .Release) | nindent 4 }}
*/}}
{{- define "lockgate.sidecarContainer" -}}
- {{ include "lockgate.container" (dict "root" . "sidecar" true) | trim | nindent 2 | trim }}
{{- end }}

{{/*
The ServiceAccount the pods run as (mode: service).
*/}}
{{- define "lockgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "lockgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
A duration of the chart's form (a number and one unit: ns, us, ms, s, m, h, d) in whole
milliseconds.
*/}}
{{- define "lockgate.durationMillis" -}}
{{- $n := regexFind "^[0-9]+" . -}}
{{- $unit := trimPrefix $n . -}}
{{- $scale := dict "ns" 0 "us" 0 "ms" 1 "s" 1000 "m" 60000 "h" 3600000 "d" 86400000 -}}
{{- mul (atoi $n) (get $scale $unit) -}}
{{- end }}

{{/*
Fails unless terminationGracePeriodSeconds covers shutdown.delay + shutdown.grace: Kubernetes
would otherwise kill the pod while it still drains, and hold streams would lose their locks
without a release.
*/}}
{{- define "lockgate.checkShutdown" -}}
{{- $needed := add (include "lockgate.durationMillis" .Values.shutdown.delay | atoi) (include "lockgate.durationMillis" .Values.shutdown.grace | atoi) }}
{{- if le (mul (int .Values.terminationGracePeriodSeconds) 1000) $needed }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed shutdown.delay + shutdown.grace (%s + %s)" .Values.terminationGracePeriodSeconds .Values.shutdown.delay .Values.shutdown.grace) }}
{{- end }}
{{- end }}

{{- /*
`helm test` against a gateway with API keys: the test pod needs a key (helmTest.apiKeySecret)
that may acquire helmTest.lockName. With keys rendered by the chart (auth.keys) and
helmTest.keyName naming the one in the Secret, its prefixes (none: every name) and operations
(none: all) are checked here, so that a test cannot fail on 401 or 403.
*/}}
{{- define "lockgate.checkHelmTestKey" -}}
{{- $test := .Values.helmTest }}
{{- if or .Values.auth.keys .Values.auth.existingSecret }}
{{- if not $test.apiKeySecret }}
{{- fail "lockgate: the gateway has API keys: set helmTest.apiKeySecret ({name, key} of a Secret with a key allowed to acquire helmTest.lockName), or helmTest.enabled=false" }}
{{- end }}
{{- if .Values.auth.keys }}
{{- if not $test.keyName }}
{{- fail "lockgate: with auth.keys, set helmTest.keyName to the name of the key helmTest.apiKeySecret holds" }}
{{- end }}
{{- $found := false }}
{{- range .Values.auth.keys }}
{{- if eq .name $test.keyName }}
{{- $found = true }}
{{- $named := not .prefixes }}
{{- range (.prefixes | default list) }}
{{- if hasPrefix . $test.lockName }}
{{- $named = true }}
{{- end }}
{{- end }}
{{- if not $named }}
{{- fail (printf "lockgate: the key %q may not use helmTest.lockName %q (its prefixes: %v): set a lockName under one of them" .name $test.lockName .prefixes) }}
{{- end }}
{{- if and .operations (not (has "acquire" .operations)) }}
{{- fail (printf "lockgate: the key %q may not acquire (its operations: %v): helmTest.keyName must name a key that may" .name .operations) }}
{{- end }}
{{- end }}
{{- end }}
{{- if not $found }}
{{- fail (printf "lockgate: helmTest.keyName %q is not among auth.keys" $test.keyName) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
