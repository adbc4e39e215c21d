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

// Package patch owns how the engine writes its own objects, so that every
// reconciler writes them one way: finalizers added and removed by a merge
// patch guarded by the object's resourceVersion (a concurrent change is a
// conflict and a retry, never overwritten), status written once per
// reconcile from a before/after snapshot and only when it changed, and
// conditions set with a message the API server accepts and the observed
// generation.
package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// AddFinalizer adds finalizer to obj (updated in place from the answer);
// no request when it is there already.
func AddFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	controllerutil.AddFinalizer(obj, finalizer)
	p, err := finalizersPatch(obj)
	if err == nil {
		err = c.Patch(ctx, obj, p)
	}
	if err != nil {
		return fmt.Errorf("adding finalizer %s: %w", finalizer, err)
	}
	return nil
}

// AddFinalizerAnnotated adds finalizer to obj and sets annotations on it
// in one request (a merge patch guarded by the resourceVersion); no
// request when the finalizer is there and the annotations are set.
func AddFinalizerAnnotated(ctx context.Context, c client.Client, obj client.Object, finalizer string, annotations map[string]string) error {
	current := obj.GetAnnotations()
	missing := map[string]string{}
	for k, v := range annotations {
		if current[k] != v {
			missing[k] = v
		}
	}
	if controllerutil.ContainsFinalizer(obj, finalizer) && len(missing) == 0 {
		return nil
	}
	controllerutil.AddFinalizer(obj, finalizer)
	type metadata struct {
		Finalizers      []string          `json:"finalizers"`
		Annotations     map[string]string `json:"annotations,omitempty"`
		ResourceVersion string            `json:"resourceVersion"`
	}
	data, err := json.Marshal(struct {
		Metadata metadata `json:"metadata"`
	}{metadata{Finalizers: obj.GetFinalizers(), Annotations: missing, ResourceVersion: obj.GetResourceVersion()}})
	if err == nil {
		err = c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
	}
	if err != nil {
		return fmt.Errorf("adding finalizer %s: %w", finalizer, err)
	}
	return nil
}

// RemoveFinalizer removes finalizer from obj; no request when it is not
// there, and an object already gone is not an error.
func RemoveFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	controllerutil.RemoveFinalizer(obj, finalizer)
	p, err := finalizersPatch(obj)
	if err == nil {
		err = c.Patch(ctx, obj, p)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer %s: %w", finalizer, err)
	}
	return nil
}

// finalizersPatch is a merge patch setting obj's finalizers, guarded by
// its resourceVersion: the list is replaced whole, so a change made
// meanwhile must be a conflict. Written directly rather than diffed from a
// copy (client.MergeFrom marshals the object twice; this runs for every
// synced object).
func finalizersPatch(obj client.Object) (client.Patch, error) {
	type metadata struct {
		Finalizers      []string `json:"finalizers"`
		ResourceVersion string   `json:"resourceVersion"`
	}
	data, err := json.Marshal(struct {
		Metadata metadata `json:"metadata"`
	}{metadata{Finalizers: obj.GetFinalizers(), ResourceVersion: obj.GetResourceVersion()}})
	if err != nil {
		return nil, fmt.Errorf("encoding the finalizers patch: %w", err)
	}
	return client.RawPatch(types.MergePatchType, data), nil
}

// Status writes obj's status when it differs from before, a deep copy of
// obj taken before the reconcile changed the status: a merge patch of the
// status subresource carrying only the difference. An unchanged status
// costs no request.
//
// Each object has exactly one status writer. A merge patch replaces a list
// whole and the patch is not guarded by the resourceVersion, so a changed
// conditions list is sent complete, as this writer last read it: there is
// no merge of owned conditions (cluster-api's patch helper has one). A
// second writer of the same object's status would erase the other's
// conditions, or have its own erased. TestOneStatusWriter names the one
// package writing each kbind type and fails on a second.
func Status(ctx context.Context, c client.Client, before, obj client.Object) error {
	if equality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// MaxMessageLength is the API server's limit on a condition message.
const MaxMessageLength = 32768

// Truncate keeps msg within MaxMessageLength (on a rune boundary), marking
// the cut with "...": a longer message makes the whole status write fail,
// forever.
func Truncate(msg string) string {
	if len(msg) <= MaxMessageLength {
		return msg
	}
	cut := MaxMessageLength - len("...")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}

// Condition is a decided condition: what a reconciler's pure decision
// returns, without the bookkeeping fields SetConditions fills in.
type Condition struct {
	Type    kbindv1alpha1.ConditionType
	Status  metav1.ConditionStatus
	Reason  kbindv1alpha1.Reason
	Message string
}

// SetConditions sets every decided condition on conds (see SetCondition).
func SetConditions(conds *[]metav1.Condition, decided []Condition, generation int64) {
	for _, c := range decided {
		SetCondition(conds, metav1.Condition{Type: string(c.Type), Status: c.Status, Reason: string(c.Reason), Message: c.Message}, generation)
	}
}

// SetCondition sets c on conds with a truncated message and the generation
// as observedGeneration; an unchanged condition keeps its transition time.
func SetCondition(conds *[]metav1.Condition, c metav1.Condition, generation int64) {
	c.Message = Truncate(c.Message)
	c.ObservedGeneration = generation
	meta.SetStatusCondition(conds, c)
}
