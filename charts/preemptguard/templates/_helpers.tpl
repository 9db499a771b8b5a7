{{/* Names: <release> when it already contains the chart name, else <release>-preemptguard (63 chars max). */}}
{{- define "preemptguard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "preemptguard.certsName" -}}{{ include "preemptguard.fullname" . }}-certs{{- end -}}
{{- define "preemptguard.tlsSecretName" -}}{{ include "preemptguard.fullname" . }}-tls{{- end -}}
{{- define "preemptguard.configName" -}}{{ include "preemptguard.fullname" . }}-config{{- end -}}
{{- define "preemptguard.priorityClassName" -}}{{ include "preemptguard.fullname" . }}-critical{{- end -}}
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
app.kubernetes.io/name: {{ .Chart.Name }}
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

{{/* The pod security settings every container runs with (Pod Security "restricted", read-only root). */}}
{{- define "preemptguard.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "preemptguard.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
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
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
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
        allowPrivilegeEscalation: false
        privileged: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: [ALL]
{{- end -}}
