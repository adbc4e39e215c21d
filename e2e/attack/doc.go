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

// Package attack is kbind's attack suite (docs/isolation.md#what-each-mode-guarantees):
// it plays hostile tenants against real API servers with exactly the
// credentials a provider hands out — the kubeconfig `kubectl kbind grant`
// prints, and separately a token of the ServiceAccount the consumer-access
// chart renders — and, on the consumer side, a namespace user with a Role
// in one namespace only. Every attempt must be refused unless
// docs/isolation.md explicitly allows it; the suite prints the table of
// attempts and results, and holds docs/isolation.md's copy of it equal
// (KBIND_UPDATE_DOCS=1 rewrites it).
package attack
