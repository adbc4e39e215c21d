// Package suite is kbind's end-to-end suite on sigs.k8s.io/e2e-framework:
// a provider, a consumer and a second provider (local control planes, or
// kind where Docker runs — see e2e/harness), the konnector chart installed
// with Helm and the konnector running with the chart's ServiceAccount, and
// features that drive kubectl the way an operator does, including every
// command of the troubleshooting guide (guide_test.go).
//
// Requirement ids in comments (such as CONN-2) refer to docs/requirements.md.
package suite
