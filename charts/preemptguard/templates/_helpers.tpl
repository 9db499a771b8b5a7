{{/* The chart's name, or nameOverride: the app.kubernetes.io/name label and the default Prometheus job. */}}
{{- define "preemptguard.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Names: fullnameOverride, else <release> when it already contains the name, else <release>-<name> (63 chars max). */}}
{{- define "preemptguard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "preemptguard.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "preemptguard.certsName" -}}{{ include "preemptguard.fullname" . }}-certs{{- end -}}
{{- define "preemptguard.tlsSecretName" -}}{{ include "preemptguard.fullname" . }}-tls{{- end -}}
{{- define "preemptguard.configName" -}}{{ include "preemptguard.fullname" . }}-config{{- end -}}
{{- define "preemptguard.priorityClassName" -}}{{ include "preemptguard.fullname" . }}-critical{{- end -}}
{{/* The replicas' PriorityClass: an existing one, else the chart's own when it makes one, else none. */}}
{{- define "preemptguard.podPriorityClassName" -}}
{{- if .Values.priorityClassName -}}{{ .Values.priorityClassName }}
{{- else if .Values.priorityClass.create -}}{{ include "preemptguard.priorityClassName" . }}
{{- end -}}
{{- end -}}
{{/* The Prometheus job the alerts select on. */}}
{{- define "preemptguard.metricsJob" -}}{{ .Values.metricsJob | default (include "preemptguard.name" .) }}{{- end -}}
{{- define "preemptguard.labelPolicyName" -}}{{ include "preemptguard.fullname" . }}-namespace-labels{{- end -}}
{{- define "preemptguard.tenantLabelPolicyName" -}}{{ include "preemptguard.fullname" . }}-tenant-label{{- end -}}
{{/* Both webhook configurations carry this name; `preempt-guard certs` patches them by it. */}}
{{- define "preemptguard.webhookConfigurationName" -}}{{ include "preemptguard.fullname" . }}.io{{- end -}}

{{- define "preemptguard.clientCAConfigMap" -}}
{{- .Values.clientAuth.existingConfigMap | default (printf "%s-client-ca" (include "preemptguard.fullname" .)) -}}
{{- end -}}

{{- define "preemptguard.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: name and instance; callers add app.kubernetes.io/component. */}}
{{- define "preemptguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "preemptguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "preemptguard.labels" -}}
{{ include "preemptguard.selectorLabels" . }}
app.kubernetes.io/part-of: preemptguard
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.labels (with an optional component) and metadata.annotations of every object. */}}
{{- define "preemptguard.metadata" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
labels:
  {{- include "preemptguard.labels" $root | nindent 2 }}
  {{- with $component }}
  app.kubernetes.io/component: {{ . }}
  {{- end }}
{{- with $root.Values.commonAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The security settings of every pod and container the chart runs (values podSecurityContext and
containerSecurityContext; Pod Security "restricted", read-only root, by default). */}}
{{- define "preemptguard.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext -}}
{{- end -}}

{{- define "preemptguard.containerSecurityContext" -}}
{{- toYaml .Values.containerSecurityContext -}}
{{- end -}}

{{/* A list of strings as a CEL list literal; the schema forbids quotes and backslashes in them. */}}
{{- define "preemptguard.celList" -}}
[{{ range $i, $item := . }}{{ if $i }}, {{ end }}'{{ $item }}'{{ end }}]
{{- end -}}

{{/* Annotations of the webhook configurations: cert-manager's CA injection in certManager mode. */}}
{{- define "preemptguard.webhookAnnotations" -}}
{{- $annotations := deepCopy .Values.commonAnnotations -}}
{{- if eq .Values.certificates.mode "certManager" -}}
{{- $_ := set $annotations "cert-manager.io/inject-ca-from" (printf "%s/%s" .Release.Namespace (include "preemptguard.tlsSecretName" .)) -}}
{{- end -}}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The pod template of the certificate Job and CronJob (selfSigned mode). */}}
{{- define "preemptguard.certsPod" -}}
{{- $root := index . 0 -}}
metadata:
  labels:
    {{- include "preemptguard.labels" $root | nindent 4 }}
    app.kubernetes.io/component: certs
spec:
  serviceAccountName: {{ include "preemptguard.certsName" $root }}
  restartPolicy: OnFailure
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- include "preemptguard.podSecurityContext" $root | nindent 4 }}
  {{- include "preemptguard.scheduling" (list $root false) | nindent 2 }}
  containers:
    - name: certs
      image: {{ include "preemptguard.image" $root }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        - certs
        - --in-cluster
        - --namespace={{ $root.Release.Namespace }}
        - --secret-name={{ include "preemptguard.tlsSecretName" $root }}
        - --service-name={{ include "preemptguard.fullname" $root }}
        - --mutating-webhook-config={{ include "preemptguard.webhookConfigurationName" $root }}
        - --validating-webhook-config={{ include "preemptguard.webhookConfigurationName" $root }}
        - --days={{ $root.Values.certificates.selfSigned.days }}
        - --renew-before-days={{ $root.Values.certificates.selfSigned.renewBeforeDays }}
      resources:
        requests:
          cpu: 50m
          memory: 64Mi
        limits:
          cpu: 500m
          memory: 128Mi
      securityContext:
        {{- include "preemptguard.containerSecurityContext" $root | nindent 8 }}
{{- end -}}

{{/* nodeSelector, tolerations and (for the webhook replicas, spread=true) affinity and topology spread. */}}
{{- define "preemptguard.scheduling" -}}
{{- $root := index . 0 -}}
{{- $spread := index . 1 -}}
{{- with $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $spread }}
{{- $selector := printf "%s\napp.kubernetes.io/component: webhook" (include "preemptguard.selectorLabels" $root) }}
topologySpreadConstraints:
{{- if $root.Values.topologySpreadConstraints }}
  {{- toYaml $root.Values.topologySpreadConstraints | nindent 2 }}
{{- else }}
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- $selector | nindent 8 }}
    matchLabelKeys: [pod-template-hash]
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: DoNotSchedule
    # Tainted nodes (control plane) cannot take a replica, so they must not count as empty domains.
    nodeTaintsPolicy: Honor
    labelSelector:
      matchLabels:
        {{- $selector | nindent 8 }}
    matchLabelKeys: [pod-template-hash]
{{- end }}
affinity:
{{- if $root.Values.affinity }}
  {{- toYaml $root.Values.affinity | nindent 2 }}
{{- else }}
  podAntiAffinity:
    # Preferred, not required: a one- or two-node cluster must still run every replica.
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- $selector | nindent 14 }}
{{- end }}
{{- end }}
{{- end -}}
