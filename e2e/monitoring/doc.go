// Package monitoring proves the monitoring the charts ship against a real
// Prometheus (docs/metrics.md): a Prometheus built from its pinned Go module
// scrapes a real konnector and backend syncing real objects between two
// local API servers, every query of both Grafana dashboards (template
// variables expanded to the test's values) returns data, and the charts'
// alerts stay silent while all is well and fire, then resolve, in the
// scenario each is about.
package monitoring
