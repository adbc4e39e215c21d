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

// Package v1alpha1 holds the core.kbind.io/v1alpha1 API: Connection,
// ClusterBinding and Binding, and the constants for every well-known label,
// annotation, finalizer, field manager, condition type and reason kbind uses.
// Other modules refer to these constants; they never spell the strings.
//
// +kubebuilder:object:generate=true
// +groupName=core.kbind.io
package v1alpha1
