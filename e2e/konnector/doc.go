// Package konnector holds end-to-end tests of the built konnector binary,
// run as a real process against a local consumer/provider pair and driven
// with the kubectl the project builds, the way an operator would.
package konnector
