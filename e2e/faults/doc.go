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

// Package faults is kbind's fault suite (`make test-faults`): a consumer
// and a provider control plane, the built konnector between them with a
// fault-injecting TCP proxy (toxiproxy, in process) in front of the
// provider's kube-apiserver, and a load of Widgets created, updated,
// status-patched and deleted on both sides while one fault is injected
// and healed. Each scenario states how soon the Connection must report the
// fault and how soon everything must converge after the heal, and then
// checks the invariants (Check): every live consumer object has exactly
// one provider copy with its current spec and the provider's status back,
// no orphaned copy, no stuck deletion, nothing foreign touched, the
// konnector's goroutines and the API servers' open watches back to their
// level. The churn runs (Connection create/delete cycles, credential
// rotations) then hold the konnector's goroutines, memory, provider
// connections and watches to where they started. docs/reliability.md
// lists the scenarios and what they measured.
package faults
