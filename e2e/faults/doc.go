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
