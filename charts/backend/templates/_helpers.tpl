{{- define "backend.name" -}}
kbind-backend
{{- end -}}

{{- define "backend.fullname" -}}
{{- if contains "backend" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-backend" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "backend.selectorLabels" -}}
app.kubernetes.io/name: {{ include "backend.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "backend.labels" -}}
{{ include "backend.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "backend.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "backend.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Leader election is forced on with more than one replica. */}}
{{- define "backend.leaderElect" -}}
{{- if or .Values.leaderElect (gt (int .Values.replicaCount) 1) -}}true{{- else -}}false{{- end -}}
{{- end -}}

{{/*
The API groups of rbac.reapGroups, checked: with reap on the list must be
set, and Kubernetes' own groups and kbind's are refused, since kbind never
exports them and the reaper never deletes copies there.
*/}}
{{- define "backend.reapGroups" -}}
{{- $groups := .Values.rbac.reapGroups | default list -}}
{{- if not $groups -}}
{{- fail "reap is true but rbac.reapGroups is empty: set it to the API groups you export to consumers (the groups of the APIs konnectors bind), e.g. --set 'rbac.reapGroups={example.org}' (docs/backend.md). The reaper may delete copies in these groups only." -}}
{{- end -}}
{{- range $groups -}}
{{- if or (has . (list "" "apps" "batch" "extensions" "policy" "autoscaling" "k8s.io" "core.kbind.io")) (hasSuffix ".k8s.io" .) -}}
{{- fail (printf "rbac.reapGroups: %q is a built-in API group (Kubernetes' own, or kbind's core.kbind.io), which kbind never exports and the reaper never deletes copies in; list only the groups you export, e.g. example.org" .) -}}
{{- end -}}
{{- end -}}
{{- toJson $groups -}}
{{- end -}}
