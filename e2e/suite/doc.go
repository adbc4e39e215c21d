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

// Package suite is kbind's end-to-end suite on sigs.k8s.io/e2e-framework:
// a provider, a consumer and a second provider (local control planes, or
// kind where Docker runs — see e2e/harness), the konnector chart installed
// with Helm and the konnector running with the chart's ServiceAccount, and
// features that drive kubectl the way an operator does, including every
// command of the troubleshooting guide (guide_test.go).
//
// Requirement ids in comments (such as CONN-2) refer to docs/requirements.md.
package suite
