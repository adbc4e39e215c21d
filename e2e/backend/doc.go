// Package backend holds end-to-end tests of the built backend binary: a
// provider and two consumer clusters, a real konnector process per consumer,
// the backend chart's RBAC applied to the provider with the Helm SDK and the
// backend process running as the chart's ServiceAccount. One konnector stops;
// past the (short) stale window exactly its consumer's objects, namespaces
// and Lease go, and the live consumer's stay. The same with isolated
// consumers: each Connection authenticates with a ServiceAccount token that
// holds only what the consumer-access chart grants, two consumers with the
// same namespaces and names never meet, and the backend reaps exactly the
// stopped one's copies, prefixed namespaces and Leases.
package backend
