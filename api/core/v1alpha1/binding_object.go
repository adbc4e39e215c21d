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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BindingObject is a binding of either kind: a ClusterBinding (every
// namespace of the consumer) or a Binding (its own namespace). Both share
// BindingSpec and BindingStatus; code that handles either kind reads them
// through this interface rather than switching on the type. Every
// BindingObject is also a controller-runtime client.Object.
//
// +kubebuilder:object:generate=false
type BindingObject interface {
	metav1.Object
	runtime.Object
	// BindingSpec returns the binding's spec, a pointer into the object.
	BindingSpec() *BindingSpec
	// BindingStatus returns the binding's status, a pointer into the object.
	BindingStatus() *BindingStatus
	// BindingKind is "ClusterBinding" or "Binding" (an object read from a
	// cache has no TypeMeta to tell).
	BindingKind() string
}

var (
	_ BindingObject = &ClusterBinding{}
	_ BindingObject = &Binding{}
)

// BindingSpec returns the ClusterBinding's spec.
func (b *ClusterBinding) BindingSpec() *BindingSpec { return &b.Spec }

// BindingStatus returns the ClusterBinding's status.
func (b *ClusterBinding) BindingStatus() *BindingStatus { return &b.Status }

// BindingKind returns "ClusterBinding".
func (b *ClusterBinding) BindingKind() string { return "ClusterBinding" }

// BindingSpec returns the Binding's spec.
func (b *Binding) BindingSpec() *BindingSpec { return &b.Spec }

// BindingStatus returns the Binding's status.
func (b *Binding) BindingStatus() *BindingStatus { return &b.Status }

// BindingKind returns "Binding".
func (b *Binding) BindingKind() string { return "Binding" }
