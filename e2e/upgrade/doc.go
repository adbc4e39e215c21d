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

// Package upgrade holds the upgrade test (make test-upgrade, in .ci/run):
// a konnector of the previous release and its core.kbind.io CRDs sync
// objects of two APIs with related Secrets and provider Events under
// Namespace isolation; then the CRDs and the binary are upgraded to this
// tree's, as helm upgrade applies them, and the test requires every object
// still synced, no provider copy re-created, no object written by the
// upgrade beyond the intended one-time changes in exceptions.yaml, the
// Connection Ready again quickly, and a change still synced. Then the same
// for a downgrade (the previous release's CRDs and binary, as helm
// rollback applies them) and the upgrade again; at the end every deletion
// completes behind its finalizer. Until a release is tagged, "the previous release"
// is the api compatibility gate's baseline commit
// (hack/api-compat/baseline), built from this clone's history.
package upgrade
