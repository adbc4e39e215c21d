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
