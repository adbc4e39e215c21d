{{- define "konnector.name" -}}
konnector
{{- end -}}

{{- define "konnector.fullname" -}}
{{- if contains "konnector" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-konnector" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "konnector.selectorLabels" -}}
app.kubernetes.io/name: {{ include "konnector.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "konnector.labels" -}}
{{ include "konnector.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "konnector.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "konnector.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Leader election is forced on with more than one replica. */}}
{{- define "konnector.leaderElect" -}}
{{- if or .Values.leaderElect (gt (int .Values.replicaCount) 1) -}}true{{- else -}}false{{- end -}}
{{- end -}}

{{- define "konnector.secretNamespaces" -}}
{{- if .Values.secretNamespaces -}}
{{- join "," .Values.secretNamespaces -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}
