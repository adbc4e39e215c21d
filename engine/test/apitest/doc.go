// Package apitest holds the conformance tests of the core.kbind.io API
// against a real kube-apiserver: defaults, validation, immutability rules and
// printer columns as kubectl shows them. It has no non-test code.
package apitest
