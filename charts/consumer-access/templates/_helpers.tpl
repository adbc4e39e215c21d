{{- define "access.name" -}}
{{- printf "kbind-consumer-%s" .Values.consumer -}}
{{- end -}}

{{- define "access.labels" -}}
app.kubernetes.io/name: kbind-consumer-access
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
kbind.io/consumer: {{ .Values.consumer | quote }}
{{- end -}}

{{- define "access.serviceAccountName" -}}
{{- default (include "access.name" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The subject the roles are bound to, checked against the mode. */}}
{{- define "access.subject" -}}
{{- $mode := .Values.isolation.mode -}}
{{- if and (eq $mode "Namespace") (not .Values.isolation.namespace) -}}
{{- fail "isolation.mode Namespace needs isolation.namespace: the provider namespace this consumer's copies live in (the Connection's spec.isolation.namespace)" -}}
{{- end -}}
{{- if and (eq $mode "Prefixed") (not .Values.isolation.prefix) -}}
{{- fail "isolation.mode Prefixed needs isolation.prefix (the Connection's spec.isolation.prefix)" -}}
{{- end -}}
{{- if and .Values.related (ne $mode "Namespace") (not .Values.relatedClusterWide) -}}
{{- fail (printf "related with isolation.mode %s grants cluster-wide read of %v, so this consumer could read those of every tenant: use isolation.mode Namespace, or set relatedClusterWide=true to accept that" $mode .Values.related) -}}
{{- end -}}
{{- if .Values.user -}}
- kind: User
  apiGroup: rbac.authorization.k8s.io
  name: {{ .Values.user | quote }}
{{- else -}}
- kind: ServiceAccount
  name: {{ include "access.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}
{{- end -}}

{{/* The user name the admission policy matches. */}}
{{- define "access.username" -}}
{{- if .Values.user -}}
{{- .Values.user -}}
{{- else -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "access.serviceAccountName" .) -}}
{{- end -}}
{{- end -}}

{{/* Rules on the bound APIs, the Lease, reading Events (forwarded down) and related kinds. */}}
{{- define "access.objectRules" -}}
{{- range .Values.apis }}
- apiGroups: [{{ .group | quote }}]
  resources: {{ toJson .resources }}
  verbs: [get, list, watch, create, update, patch, delete]
{{- end }}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [get, list, watch]
{{- with .Values.related }}
- apiGroups: [""]
  resources: {{ toJson . }}
  verbs: [get, list, watch, create, update, patch, delete]
{{- end }}
{{- end -}}
