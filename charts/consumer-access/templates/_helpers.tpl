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

{{/*
The consumer's own provider namespace, where its heartbeat Lease lives:
the isolation namespace (Namespace), the prefix (Prefixed), the Lease
namespace (None, default kbind-<consumer>). Every value is checked here:
each template includes it.
*/}}
{{- define "access.ownNamespace" -}}
{{- $mode := .Values.isolation.mode -}}
{{- if and (eq $mode "Namespace") (not .Values.isolation.namespace) -}}
{{- fail "isolation.mode Namespace needs isolation.namespace: the provider namespace this consumer's copies live in (the Connection's spec.isolation.namespace)" -}}
{{- end -}}
{{- if and (eq $mode "Prefixed") (not .Values.isolation.prefix) -}}
{{- fail "isolation.mode Prefixed needs isolation.prefix (the Connection's spec.isolation.prefix)" -}}
{{- end -}}
{{- if and .Values.related (eq $mode "None") -}}
{{- fail (printf "related with isolation.mode None cannot be confined: the consumer could read and write %v in every namespace, kube-system's included; use isolation.mode Namespace" .Values.related) -}}
{{- end -}}
{{- if and .Values.related (eq $mode "Prefixed") (not .Values.relatedClusterWide) -}}
{{- fail (printf "related with isolation.mode Prefixed grants cluster-wide read of %v: this consumer could read those of every namespace of the provider, kube-system's (service-account tokens, certificates) included, which amounts to administrator access on most clusters; use isolation.mode Namespace, or set relatedClusterWide=true to accept that" .Values.related) -}}
{{- end -}}
{{- if and .Values.providerEventsClusterWide (eq $mode "Namespace") -}}
{{- fail "providerEventsClusterWide goes with isolation.mode Prefixed or None: Namespace isolation reads the Events of its own namespace always" -}}
{{- end -}}
{{- $own := "" -}}
{{- if eq $mode "Namespace" -}}
{{- $own = .Values.isolation.namespace -}}
{{- else if eq $mode "Prefixed" -}}
{{- $own = .Values.isolation.prefix -}}
{{- if or (eq $own .Release.Namespace) (hasPrefix (printf "%s-" $own) .Release.Namespace) -}}
{{- fail (printf "isolation.prefix %q covers the release namespace %s, which holds the consumers' ServiceAccounts: the consumer could write there; choose another prefix" $own .Release.Namespace) -}}
{{- end -}}
{{- range list "kube" "kbind" "default" "openshift" "system" -}}
{{- if or (eq $own .) (hasPrefix (printf "%s-" .) $own) (hasPrefix (printf "%s-" $own) .) -}}
{{- fail (printf "isolation.prefix %q is reserved: its namespaces %s and %s-* are the provider's own (%s); choose another prefix" $own $own $own .) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- $own = default (printf "kbind-%s" .Values.consumer) .Values.leaseNamespace -}}
{{- end -}}
{{- if ne $mode "Prefixed" -}}
{{- if or (eq $own .Release.Namespace) (eq $own "kbind") (eq $own "default") (hasPrefix "kube-" $own) (hasPrefix "openshift-" $own) -}}
{{- fail (printf "%s cannot be the consumer's own namespace (isolation.namespace, or leaseNamespace with None): it is the release namespace holding the ServiceAccount, kbind, default, or a namespace of the provider's system" $own) -}}
{{- end -}}
{{- end -}}
{{- $own -}}
{{- end -}}

{{/* The subject the roles are bound to. */}}
{{- define "access.subject" -}}
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

{{/* Every verb on the bound APIs, one rule per group. */}}
{{- define "access.apiRules" -}}
{{- range .Values.apis }}
- apiGroups: [{{ .group | quote }}]
  resources: {{ toJson .resources }}
  verbs: [get, list, watch, create, update, patch, delete]
{{- end }}
{{- end -}}

{{/* Reading the provider's Events on the copies (forwarded to the consumer objects). */}}
{{- define "access.eventsRule" -}}
- apiGroups: [""]
  resources: [events]
  verbs: [get, list, watch]
{{- end -}}

{{/* A policy variable holding label $key of $obj ('' when absent); $guard says when $obj exists. */}}
{{- define "access.labelVariable" -}}
- name: {{ .name }}
  expression: {{ printf "%s && %s != null && has(%s.metadata.labels) && %q in %s.metadata.labels ? %s.metadata.labels[%q] : ''" .guard .obj .obj .key .obj .obj .key | quote }}
{{- end -}}

{{/* Every consumer policy that matches Secrets refuses service-account token Secrets (a credential that would outlive the grant). */}}
{{- define "access.tokenSecretValidation" -}}
- expression: "request.resource.resource != 'secrets' || request.operation == 'DELETE' || !has(object.type) || object.type != 'kubernetes.io/service-account-token'"
  message: {{ printf "kbind consumer %s may not create or change service-account token Secrets: the token the cluster fills in would outlive its grant (kbind never copies such Secrets: a related Secret of that type is skipped); keep a credential in a Secret of another type, such as Opaque" .Values.consumer | quote }}
  reason: Forbidden
{{- end -}}
