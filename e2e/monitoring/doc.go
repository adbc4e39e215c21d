// Package monitoring tests what kbind ships for Prometheus: the alert rules
// of the konnector and backend charts, rendered with the Helm SDK as `helm
// template` renders them, checked and unit-tested with promtool (built from
// the pinned prometheus module by tools/prometheus/build.sh), their runbook
// links against docs/troubleshooting.md, and their names against the
// contract the dashboards and docs rely on.
package monitoring
