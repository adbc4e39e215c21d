// Package cli holds end-to-end tests of the built kubectl-kbind plugin
// (docs/cli.md) against a real provider and consumer: export, the
// two-command onboarding (grant on the provider, apply the bundle on the
// consumer) with a real konnector process, token renewal without a
// restart, revoke, and the refusals.
package cli
