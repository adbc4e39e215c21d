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

// Package compat holds the pure decisions of the api module's compatibility
// gate (tools/apicompat): the comparison of CRD schemas between a baseline
// and the working tree, the exceptions that accept a breaking change, and
// which release tag is the baseline. It runs no command and reads no file.
package compat

// Change is one difference between the baseline and the working tree, as the
// gate prints it. Breaking changes fail the gate unless an exception accepts
// them; the others are informational.
type Change struct {
	// Message names the object and what changed, e.g.
	// "connections.core.kbind.io v1alpha1: .spec.secretRef.namespace: removed".
	// Exceptions match it exactly.
	Message  string
	Breaking bool
}
