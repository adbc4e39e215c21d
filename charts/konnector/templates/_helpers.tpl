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

{{/*
The API groups of rbac.boundResourceGroups, checked: the list must be set,
and Kubernetes' own groups and kbind's are refused, since kbind never binds
them (a rule for them would only widen the konnector's reach).
*/}}
{{- define "konnector.boundResourceGroups" -}}
{{- $groups := .Values.rbac.boundResourceGroups | default list -}}
{{- if not $groups -}}
{{- fail "rbac.boundResourceGroups is empty: set it to the API groups of the APIs you bind, e.g. --set 'rbac.boundResourceGroups={example.org}' (docs/installation.md). The konnector may sync instances of these groups only." -}}
{{- end -}}
{{- range $groups -}}
{{- if or (has . (list "" "apps" "batch" "extensions" "policy" "autoscaling" "k8s.io" "core.kbind.io")) (hasSuffix ".k8s.io" .) -}}
{{- fail (printf "rbac.boundResourceGroups: %q is a built-in API group (Kubernetes' own, or kbind's core.kbind.io), which kbind never binds; list only the groups of the APIs you bind, e.g. example.org" .) -}}
{{- end -}}
{{- end -}}
{{- toJson $groups -}}
{{- end -}}
