// Package chart tests the konnector Helm chart (charts/konnector) with the
// Helm Go SDK: lint, rendering with defaults and options, the values
// schema, and the rendered chart on a real API server with the konnector
// running under the chart's ServiceAccount permissions.
package chart
