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

package attack

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// object builds an unstructured object of gvr.
func object(gvr schema.GroupVersionResource, ns, name string, labels map[string]string, fields map[string]any) *unstructured.Unstructured {
	kinds := map[string]string{"widgets": "Widget", "clusterwidgets": "ClusterWidget", "things": "Thing", "leases": "Lease", "secrets": "Secret",
		"configmaps": "ConfigMap", "events": "Event", "namespaces": "Namespace"}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kinds[gvr.Resource])
	u.SetNamespace(ns)
	if name != "" {
		u.SetName(name)
	} else {
		u.SetGenerateName("attack-")
	}
	u.SetLabels(labels)
	return u
}

func widget(ns, name string, labels map[string]string) *unstructured.Unstructured {
	gvr := widgets
	if ns == "" {
		gvr = clusterWidgets
	}
	return object(gvr, ns, name, labels, map[string]any{"spec": map[string]any{"owner": "attacker"}})
}

func lease(ns, name, holder string, labels map[string]string) *unstructured.Unstructured {
	return object(leases, ns, name, labels, map[string]any{"spec": map[string]any{"holderIdentity": holder, "leaseDurationSeconds": int64(60)}})
}

// ownedBy sets the object's spec.owner: an attacker's write changes it.
func ownedBy(u *unstructured.Unstructured, owner string) *unstructured.Unstructured {
	_ = unstructured.SetNestedField(u.Object, owner, "spec", "owner")
	return u
}

// markers are the labels a consumer's konnector puts on what it writes.
func markers(uid string, extra ...string) map[string]string {
	l := map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue, kbindv1alpha1.ConsumerClusterUIDLabel: uid}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

func resource(d dynamic.Interface, gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	if ns == "" {
		return d.Resource(gvr)
	}
	return d.Resource(gvr).Namespace(ns)
}

// create writes obj as tn and fails the test unless it is allowed — a
// tenant's own writes are the positive control of every refusal. It
// retries while the grant's RBAC is not in force yet (a Role takes effect
// when the API server's authorizer has seen it).
func create(t *testing.T, tn *tenant, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	var out *unstructured.Unstructured
	enginetest.EventuallyWithin(t, 30*time.Second, fmt.Sprintf("%s creates its own %s %s/%s", tn.name, gvr.Resource, obj.GetNamespace(), obj.GetName()), func() error {
		var err error
		out, err = resource(tn.dyn, gvr, obj.GetNamespace()).Create(context.Background(), obj.DeepCopy(), metav1.CreateOptions{})
		return err
	})
	return out
}

// adminCreate writes obj as the provider's administrator.
func adminCreate(t *testing.T, admin dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
	t.Helper()
	if _, err := resource(admin, gvr, obj.GetNamespace()).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvr.Resource, obj.GetNamespace(), obj.GetName(), err)
	}
}
