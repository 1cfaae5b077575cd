{{/*
Names and labels.
*/}}
{{- define "alicia.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "alicia.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The name of one component's objects: <fullname>-<component>. */}}
{{- define "alicia.componentName" -}}
{{- printf "%s-%s" (include "alicia.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "alicia.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object of a component; dict root, component. */}}
{{- define "alicia.labels" -}}
helm.sh/chart: {{ include "alicia.chart" .root }}
{{ include "alicia.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: alicia
{{- end -}}

{{/* Selector labels of a component; dict root, component. */}}
{{- define "alicia.selectorLabels" -}}
app.kubernetes.io/name: {{ include "alicia.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "alicia.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "alicia.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* An image; dict root, image (the component's image values). */}}
{{- define "alicia.image" -}}
{{- $g := .root.Values.global.image -}}
{{- $tag := .image.tag | default $g.tag | default .root.Chart.AppVersion -}}
{{- if $g.registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $g.registry) .image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Where secret files are mounted in every container. */}}
{{- define "alicia.secretsDir" -}}/run/secrets/alicia{{- end -}}

{{/*
The NATS environment of a component: its URL and, with auth, its own user
and password file. dict root, component. Returns a JSON object
{"env": {...}, "files": [...]}.
*/}}
{{- define "alicia.natsConfig" -}}
{{- $v := .root.Values -}}
{{- $env := dict "ALICIA_NATS_URL" (join "," $v.nats.urls) -}}
{{- $files := list -}}
{{- if $v.nats.auth.enabled -}}
{{- $_ := set $env "ALICIA_NATS_USER" .component -}}
{{- $files = append $files (dict "env" "ALICIA_NATS_PASSWORD_FILE" "secret" $v.nats.auth.secretName "key" .component "file" "nats-password") -}}
{{- end -}}
{{- /* Stream replicas: every service ensures the streams and the llm LLM_TURNS. */ -}}
{{- if $v.global.streamReplicas -}}
{{- $n := $v.global.streamReplicas | int -}}
{{- if or (lt $n 1) (gt $n 5) -}}
{{- fail (printf "global.streamReplicas %v: want 1 to 5 (servers of the NATS cluster holding each stream)" $v.global.streamReplicas) -}}
{{- end -}}
{{- $_ := set $env "ALICIA_STREAM_REPLICAS" ($n | toString) -}}
{{- end -}}
{{- if $v.global.conversationsMaxBytes -}}
{{- $_ := set $env "ALICIA_CONVERSATIONS_MAX_BYTES" ($v.global.conversationsMaxBytes | int64 | toString) -}}
{{- end -}}
{{- /* Stream retention: every service ensures the streams (bus.Connect). */ -}}
{{- if $v.global.streamMaxAge -}}
{{- $_ := set $env "ALICIA_STREAM_MAX_AGE" ($v.global.streamMaxAge | toString) -}}
{{- end -}}
{{- if $v.global.systemMaxBytes -}}
{{- $_ := set $env "ALICIA_SYSTEM_MAX_BYTES" ($v.global.systemMaxBytes | int64 | toString) -}}
{{- end -}}
{{- dict "env" $env "files" $files | toJson -}}
{{- end -}}

{{/*
A model engine's variables: dict prefix (LLM, EMBEDDING, ASR, TTS), model
(its values), env, files (appended to). Returns {"env": ..., "files": ...}.
*/}}
{{- define "alicia.modelConfig" -}}
{{- $env := .env -}}
{{- $files := .files -}}
{{- if .model.url -}}
{{- $_ := set $env (printf "ALICIA_%s_URL" .prefix) .model.url -}}
{{- end -}}
{{- if .model.model -}}
{{- $_ := set $env (printf "ALICIA_%s_MODEL" .prefix) .model.model -}}
{{- end -}}
{{- with .model.apiKeySecret -}}
{{- if .name -}}
{{- $files = append $files (dict "env" (printf "ALICIA_%s_API_KEY_FILE" $.prefix) "secret" .name "key" .key "file" (printf "%s-api-key" (lower $.prefix))) -}}
{{- end -}}
{{- end -}}
{{- dict "env" $env "files" $files | toJson -}}
{{- end -}}

{{/*
The container environment: the chart's variables (env), then global.env,
then the component's env (each overriding the one before), then one
*_FILE variable per mounted secret file, then GOMEMLIMIT.
dict root, values (the component's), env, files.
*/}}
{{- define "alicia.containerEnv" -}}
{{- $all := merge (deepCopy (.values.env | default dict)) (deepCopy (.root.Values.global.env | default dict)) .env -}}
{{- range $name := keys $all | sortAlpha }}
- name: {{ $name }}
  value: {{ get $all $name | toString | quote }}
{{- end }}
{{- range .files }}
- name: {{ .env }}
  value: {{ printf "%s/%s" (include "alicia.secretsDir" $) .file | quote }}
{{- end }}
{{- if .root.Values.global.goMemLimitFromResources }}
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- end }}
{{- end -}}

{{/*
The secret files as one projected volume (only the keys each container
reads); dict files. Renders nothing without files.
*/}}
{{- define "alicia.secretsVolume" -}}
{{- if .files }}
- name: secrets
  projected:
    defaultMode: 0440
    sources:
{{- range .files }}
      - secret:
          name: {{ .secret }}
          items:
            - key: {{ .key | quote }}
              path: {{ .file }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The probes of a component; dict root, port (name), live, ready (paths).
live answers while the process serves HTTP, whatever NATS and Postgres do:
the startup and liveness probes (whose failures restart the container) use
it, so a database failover or a NATS outage never restarts the pods.
ready checks the service's dependencies: while it fails the pod only leaves
its Service's endpoints.
*/}}
{{- define "alicia.probes" -}}
{{- $p := .root.Values.probes -}}
startupProbe:
  httpGet: {path: {{ .live }}, port: {{ .port }}}
  periodSeconds: {{ $p.startup.periodSeconds }}
  timeoutSeconds: {{ $p.startup.timeoutSeconds }}
  failureThreshold: {{ $p.startup.failureThreshold }}
readinessProbe:
  httpGet: {path: {{ .ready }}, port: {{ .port }}}
  periodSeconds: {{ $p.readiness.periodSeconds }}
  timeoutSeconds: {{ $p.readiness.timeoutSeconds }}
  failureThreshold: {{ $p.readiness.failureThreshold }}
livenessProbe:
  httpGet: {path: {{ .live }}, port: {{ .port }}}
  periodSeconds: {{ $p.liveness.periodSeconds }}
  timeoutSeconds: {{ $p.liveness.timeoutSeconds }}
  failureThreshold: {{ $p.liveness.failureThreshold }}
{{- end -}}

{{/*
One Alicia service: its Deployment, Service and, when it runs more than one
replica, its PodDisruptionBudget. dict:
  root       the chart's context
  component  the service's name (its NATS user, its label)
  values     the service's values
  env        the chart's variables for it (a dict)
  files      its secret files (a list of {env, secret, key, file})
  port       {name, number}: the port of its HTTP server (probes, Service)
  live, ready  the probe paths
  replicas   the replica count, or nil with an autoscaler
  strategy   the Deployment strategy (optional)
*/}}
{{- define "alicia.service" -}}
{{- $root := .root -}}
{{- $v := .values -}}
{{- $g := $root.Values.global -}}
{{- $labelCtx := dict "root" $root "component" .component -}}
{{- $name := include "alicia.componentName" $labelCtx -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  labels:
    {{- include "alicia.labels" $labelCtx | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" .replicas) }}
  replicas: {{ .replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  {{- with .strategy }}
  strategy:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "alicia.selectorLabels" $labelCtx | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "alicia.labels" $labelCtx | nindent 8 }}
        {{- with $g.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        {{- if $g.prometheusScrapeAnnotations }}
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ .port.number | quote }}
        prometheus.io/path: /metrics
        {{- end }}
        {{- with (merge (deepCopy ($v.podAnnotations | default dict)) ($g.podAnnotations | default dict)) }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "alicia.serviceAccountName" $root }}
      automountServiceAccountToken: {{ $root.Values.serviceAccount.automountServiceAccountToken }}
      enableServiceLinks: false
      {{- with $v.terminationGracePeriodSeconds }}
      terminationGracePeriodSeconds: {{ . }}
      {{- end }}
      {{- with $g.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $g.podSecurityContext | nindent 8 }}
      {{- with ($v.nodeSelector | default $g.nodeSelector) }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with ($v.tolerations | default $g.tolerations) }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with ($v.affinity | default $g.affinity) }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "alicia.image" (dict "root" $root "image" $v.image) }}
          imagePullPolicy: {{ $g.image.pullPolicy }}
          ports:
            - name: {{ .port.name }}
              containerPort: {{ .port.number }}
              protocol: TCP
          env:
            {{- include "alicia.containerEnv" (dict "root" $root "values" $v "env" .env "files" .files) | trim | nindent 12 }}
          {{- include "alicia.probes" (dict "root" $root "port" .port.name "live" .live "ready" .ready) | nindent 10 }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- toYaml $g.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- if .files }}
            - name: secrets
              mountPath: {{ include "alicia.secretsDir" . }}
              readOnly: true
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- include "alicia.secretsVolume" (dict "files" .files) | trim | nindent 8 }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  labels:
    {{- include "alicia.labels" $labelCtx | nindent 4 }}
  {{- with (and $v.service $v.service.annotations) }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ (and $v.service $v.service.type) | default "ClusterIP" }}
  selector:
    {{- include "alicia.selectorLabels" $labelCtx | nindent 4 }}
  ports:
    - name: {{ .port.name }}
      port: {{ (and $v.service $v.service.port) | default .port.number }}
      targetPort: {{ .port.name }}
      protocol: TCP
{{- $min := .replicas | default 0 -}}
{{- if kindIs "invalid" .replicas -}}
{{- $min = $v.autoscaling.minReplicas -}}
{{- end -}}
{{- if and $v.pdb $v.pdb.enabled (gt (int $min) 1) }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  labels:
    {{- include "alicia.labels" $labelCtx | nindent 4 }}
spec:
  maxUnavailable: {{ $v.pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "alicia.selectorLabels" $labelCtx | nindent 6 }}
{{- end }}
{{- end -}}
