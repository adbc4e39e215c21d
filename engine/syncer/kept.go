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

package syncer

import (
	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// KeptBy is the core.kbind.io/kept-by value naming binding b on the
// provider copies its deletion protection keeps (BIND-5):
// "ClusterBinding/<name>" or "Binding/<namespace>/<name>".
func KeptBy(b kbindv1alpha1.BindingObject) string {
	if b.BindingKind() == "ClusterBinding" {
		return "ClusterBinding/" + b.GetName()
	}
	return "Binding/" + b.GetNamespace() + "/" + b.GetName()
}
