// Package clonetest holds the integration tests of clone detection
// (docs/troubleshooting.md#duplicate-consumer) against real API servers: a
// consumer cluster restored from an etcd snapshot of another (a
// disaster-recovery drill, a staging clone) keeps its identity, its object
// UIDs and its kubeconfig Secret, and its konnector must never delete the
// provider copies production still uses. It has no non-test code.
package clonetest
