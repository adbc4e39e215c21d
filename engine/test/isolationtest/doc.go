// Package isolationtest holds the integration tests of Connection
// isolation (docs/isolation.md) against real API servers: one provider,
// two consumer clusters with their own engines, each Connection using
// credentials that hold only the documented provider permissions. It has
// no non-test code.
package isolationtest
