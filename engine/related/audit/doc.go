// Package audit proves, from the API servers' audit logs, what the related
// copier reads on both clusters: Secrets and ConfigMaps are listed and
// watched only through selected informers (never cluster-wide without a
// selector), and not once per reconcile. It holds tests only; it runs in a
// process of its own so that its short resync and its metrics are its own.
package audit
