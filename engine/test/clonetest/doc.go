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

// Package clonetest holds the integration tests of clone detection
// (docs/troubleshooting.md#duplicate-consumer) against real API servers: a
// consumer cluster restored from an etcd snapshot of another (a
// disaster-recovery drill, a staging clone) keeps its identity, its object
// UIDs and its kubeconfig Secret, and its konnector must never delete the
// provider copies production still uses. It has no non-test code.
package clonetest
