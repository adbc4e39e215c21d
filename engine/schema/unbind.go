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

package schema

import (
	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// UnbindFate is what decides whether unbinding an API from a ClusterBinding
// deletes its consumer CRD (SCHEMA-6).
type UnbindFate struct {
	// Connection: the binding's Connection exists (without it the policy
	// is unknown, and the CRD is kept); PullPolicy is its pullPolicy.
	Connection bool
	PullPolicy kbindv1alpha1.PullPolicy
	// OtherBindings counts the other bindings (ClusterBindings and
	// Bindings, through any Connection, deleting ones too) listing the API.
	OtherBindings int
	// CRD: the consumer CRD exists; CreatedForConnection: kbind created it
	// for this binding's Connection; CRDDeleting: it is being deleted.
	CRD, CreatedForConnection, CRDDeleting bool
}

// UnbindDeletesCRD decides whether unbinding the API deletes its consumer
// CRD, and with it every consumer object of the API: no other binding
// lists it, kbind created the CRD for this Connection, and pullPolicy is
// neither All (every export installed on a cluster admin's word, never
// deleted) nor None (CRDs managed outside kbind). The konnector writes it
// into status.boundAPIs[].unbindDeletesCRD; kubectl kbind unbind decides
// with it too, from what it reads on the consumer.
func UnbindDeletesCRD(f UnbindFate) bool {
	switch {
	case !f.Connection, f.PullPolicy == kbindv1alpha1.PullPolicyAll, f.PullPolicy == kbindv1alpha1.PullPolicyNone:
		return false
	case f.OtherBindings > 0:
		return false
	}
	return f.CRD && f.CreatedForConnection && !f.CRDDeleting
}
