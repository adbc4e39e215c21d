/*
Copyright The kbind Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

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
