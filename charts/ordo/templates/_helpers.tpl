{{/* Names, labels and the derived settings every template shares. */}}

{{- define "ordo.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ordo.fullname" -}}
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

{{- define "ordo.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ordo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* Labels of everything the release makes, whichever component it belongs to. */}}
{{- define "ordo.baseLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "ordo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ordo
{{- end }}

{{- define "ordo.labels" -}}
{{ include "ordo.baseLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "ordo.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ordo.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ordo.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The namespaces a namespace-scoped operator serves, one per line. */}}
{{- define "ordo.watchNamespaces" -}}
{{- if .Values.watchNamespaces }}
{{- range .Values.watchNamespaces }}
{{ . }}
{{- end }}
{{- else }}
{{ .Release.Namespace }}
{{- end }}
{{- end }}

{{- define "ordo.clusterWide" -}}
{{- if eq .Values.rbac.scope "cluster" }}true{{ end }}
{{- end }}

{{/* kopf peering: on for 2+ replicas (or when forced); "true" or empty. */}}
{{- define "ordo.peering" -}}
{{- if or .Values.peering.enabled (gt (int .Values.replicaCount) 1) }}true{{ end }}
{{- end }}

{{- define "ordo.peeringName" -}}
{{- default (include "ordo.fullname" .) .Values.peering.name }}
{{- end }}

{{/*
The operator's permissions inside a namespace (or everywhere, for a ClusterRole). They are what
the operator's code calls; tests/deploy/test_rbac.py derives that set from the code and fails
when this list grants more or less.
*/}}
{{- define "ordo.namespacedRules" -}}
{{ include "ordo.readRules" . }}
{{ include "ordo.workloadRules" . }}
{{- end }}

{{/* What the operator needs wherever it serves: its resources, pods and Leases to read, Events. */}}
{{- define "ordo.readRules" -}}
# The custom resources: kopf lists and watches them and patches finalizers and its annotations;
# handlers write status through the status subresource.
- apiGroups: [ordo.dev]
  resources: [orderedtopicexpansions, producergroups, topicautoscalers]
  verbs: [list, watch, patch]
- apiGroups: [ordo.dev]
  resources: [orderedtopicexpansions/status, producergroups/status, topicautoscalers/status]
  verbs: [patch]
# TopicAutoscalers create the OrderedTopicExpansions they decide on, and read one back.
- apiGroups: [ordo.dev]
  resources: [orderedtopicexpansions]
  verbs: [create, get]
# ProducerGroup members: the operator follows their pods.
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
# ProducerGroup members' Leases: liveness and acknowledgements (members write them).
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [list, watch]
# Events on every phase change and rebalance (and kopf's own handler events).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end }}

{{/*
What the operator needs only where ordo's resources live: with rbac.scope=cluster and
rbac.workloadNamespaces, a RoleBinding in each of those namespaces grants it, not the ClusterRole.
*/}}
{{- define "ordo.workloadRules" -}}
# ProducerGroup members: their assignment is written into an annotation of their pod.
- apiGroups: [""]
  resources: [pods]
  verbs: [patch]
# spec.kafka.secretRef: the TLS/SASL settings of a resource's Kafka connection.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
# spec.kafkaTopicRef of an expansion: Strimzi's KafkaTopic raised to the partitions it created.
- apiGroups: [kafka.strimzi.io]
  resources: [kafkatopics]
  verbs: [get, patch]
{{- end }}

{{/*
A ProducerGroup member's permissions: its own Pod (read; list and watch with a field selector on
its name) and its own Lease. tests/deploy/test_rbac.py checks them against GroupProducer's calls.
*/}}
{{- define "ordo.memberRules" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
{{- end }}

{{/*
The Secrets kafka.authentication and kafka.tls name, one a line, each once: the Deployment mounts
each at /etc/ordo/kafka-secrets/<name>, where the operator reads them (ordo.connection).
*/}}
{{- define "ordo.kafkaSecretNames" -}}
{{- $names := list -}}
{{- with .Values.kafka.authentication -}}
{{- with .passwordSecret }}{{ $names = append $names .secretName }}{{ end -}}
{{- with .certificateAndKey }}{{ $names = append $names .secretName }}{{ end -}}
{{- with .clientSecret }}{{ $names = append $names .secretName }}{{ end -}}
{{- end -}}
{{- with .Values.kafka.tls -}}
{{- range .trustedCertificates }}{{ $names = append $names .secretName }}{{ end -}}
{{- end -}}
{{- $names | uniq | sortAlpha | join "\n" -}}
{{- end }}
