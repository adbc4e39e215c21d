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
