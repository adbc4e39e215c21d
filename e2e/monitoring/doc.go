// Package monitoring tests what kbind ships for Prometheus. The alert rules
// of the konnector and backend charts, rendered with the Helm SDK as `helm
// template` renders them, are checked and unit-tested with promtool (built
// from the pinned prometheus module by tools/prometheus/build.sh), their
// runbook links against docs/troubleshooting.md, and their names against the
// contract the dashboards and docs rely on. And against a real Prometheus
// (docs/metrics.md#proven-against-a-real-prometheus), scraping a real
// konnector and backend syncing real objects between two local API servers:
// every query of both Grafana dashboards (template variables expanded to the
// test's values) returns data, and the charts' alerts stay silent while all
// is well and fire, then resolve, in the scenario each is about.
package monitoring
