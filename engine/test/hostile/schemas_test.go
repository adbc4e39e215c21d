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

package hostile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	kbindschema "github.com/kbind/kbind/engine/schema"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// keepLevels is how deep the keeps' schema nests objects that keep unknown
// fields.
const keepLevels = 5

// keepSchema is one level of keeps' schema: an object keeping unknown
// fields, with a known string, a list of objects that keep unknown fields
// too, a map of such objects, and the next level.
func keepSchema(level int) apiextensionsv1.JSONSchemaProps {
	preserve := true
	item := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve,
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"known": {Type: "string"}}}
	s := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve,
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"known": {Type: "string"},
			"list":  {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}},
			"byKey": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &item}},
		}}
	if level > 1 {
		s.Properties["next"] = keepSchema(level - 1)
	}
	return s
}

// keeps keeps unknown fields at every level of a nested schema — the root,
// spec and status, each nested object, list item and map value — not only
// at the root (which loose covers).
func keeps() *apiextensionsv1.CustomResourceDefinition {
	crd := enginetest.CRD("keeps", "keep", "Keep", "hostile.example.org", apiextensionsv1.NamespaceScoped, true)
	preserve := true
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema = &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve,
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": keepSchema(keepLevels), "status": keepSchema(keepLevels)}}
	return crd
}

// keepValue is a value for keepSchema(level): known fields, and unknown
// ones of every JSON type at every level, tagged with tag.
func keepValue(level int, tag string) map[string]any {
	v := map[string]any{
		"known": fmt.Sprintf("%s-known-%d", tag, level),
		fmt.Sprintf("%sUnknown%d", tag, level): map[string]any{
			"list": []any{int64(level), "two", map[string]any{"three": true, "none": nil}}, "empty": map[string]any{}, "ratio": 0.5,
		},
		"list":  []any{map[string]any{"known": tag, "extra": map[string]any{"level": int64(level)}}},
		"byKey": map[string]any{"k": map[string]any{"known": tag, "extra": []any{tag}}},
	}
	if level > 1 {
		v["next"] = keepValue(level-1, tag)
	}
	return v
}

// Unknown fields kept at every level, not only at the root: nested
// unknown fields of the spec go up, nested unknown fields of the status
// come down, and a change deep down goes up again. Nothing is pruned on
// the way, since the consumer CRD keeps the flag wherever the provider's
// has it.
func TestUnknownFieldsAtEveryLevel(t *testing.T) {
	env := newTenant(t)
	ctx := context.Background()
	env.ready(t, "keeps")
	consumerCRD := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "keeps.hostile.example.org"}, consumerCRD); err != nil {
		t.Fatal(err)
	}
	if got, want := preservingLevels(consumerCRD.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]), keepLevels; got != want {
		t.Fatalf("the consumer CRD keeps unknown fields at %d nested spec levels, want %d", got, want)
	}

	keep := schema.GroupVersionKind{Group: "hostile.example.org", Version: "v1alpha1", Kind: "Keep"}
	u := env.obj(keep, "k1", keepValue(keepLevels, "spec"))
	key := client.ObjectKeyFromObject(u)
	if err := env.Consumer.Create(ctx, u.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	copyOf := &unstructured.Unstructured{}
	copyOf.SetGroupVersionKind(keep)
	enginetest.Eventually(t, "the provider copy with every nested unknown field", func() error {
		if err := env.Provider.Get(ctx, key, copyOf); err != nil {
			return err
		}
		return sameJSON("provider spec", copyOf.Object["spec"], u.Object["spec"])
	})

	status := keepValue(keepLevels, "status")
	copyOf.Object["status"] = status
	if err := env.Provider.Status().Update(ctx, copyOf); err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(keep)
	enginetest.Eventually(t, "the status with every nested unknown field down", func() error {
		if err := env.Consumer.Get(ctx, key, got); err != nil {
			return err
		}
		return sameJSON("consumer status", got.Object["status"], status)
	})

	// A change at the deepest level, in an unknown field only.
	deepest := []string{"spec"}
	for i := keepLevels; i > 1; i-- {
		deepest = append(deepest, "next")
	}
	if err := unstructured.SetNestedField(got.Object, "changed", append(deepest, "specUnknown1", "added")...); err != nil {
		t.Fatal(err)
	}
	if err := env.Consumer.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the deepest unknown change up", func() error {
		if err := env.Provider.Get(ctx, key, copyOf); err != nil {
			return err
		}
		return sameJSON("provider spec", copyOf.Object["spec"], got.Object["spec"])
	})
}

// preservingLevels counts the nested levels of s, following next, that
// keep unknown fields along with their list items and map values.
func preservingLevels(s apiextensionsv1.JSONSchemaProps) int {
	n := 0
	for {
		keeps := func(p *apiextensionsv1.JSONSchemaProps) bool {
			return p != nil && p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields
		}
		list, byKey := s.Properties["list"], s.Properties["byKey"]
		if !keeps(&s) || list.Items == nil || !keeps(list.Items.Schema) || byKey.AdditionalProperties == nil || !keeps(byKey.AdditionalProperties.Schema) {
			return n
		}
		n++
		next, ok := s.Properties["next"]
		if !ok {
			return n
		}
		s = next
	}
}

// sameJSON compares two JSON values as JSON (numbers read back from the
// API server may change Go type), saying where they differ.
func sameJSON(what string, got, want any) error {
	g, err := json.Marshal(got)
	if err != nil {
		return err
	}
	w, err := json.Marshal(want)
	if err != nil {
		return err
	}
	var gv, wv any
	if err := json.Unmarshal(g, &gv); err != nil {
		return err
	}
	if err := json.Unmarshal(w, &wv); err != nil {
		return err
	}
	if !reflect.DeepEqual(gv, wv) {
		return fmt.Errorf("%s differs:\n got  %s\n want %s", what, g, w)
	}
	return nil
}

// The huge schema's shape: groups of nested objects, each level with
// hugeLeaves leaf properties (thousands of properties in all, nested
// hugeDepth deep).
const (
	hugeGroups = 48
	hugeDepth  = 25
	hugeLeaves = 16
)

// hugeSchema is a spec schema of hugeGroups chains of hugeDepth nested
// objects, each level with hugeLeaves typed, described leaves; pad bytes of
// description on the spec tune its size to the byte. It returns the
// number of properties too.
func hugeSchema(pad int) (apiextensionsv1.JSONSchemaProps, int) {
	types := []string{"string", "integer", "boolean", "number"}
	count := 0
	var level func(g, d int) apiextensionsv1.JSONSchemaProps
	level = func(g, d int) apiextensionsv1.JSONSchemaProps {
		s := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
		for l := 0; l < hugeLeaves; l++ {
			s.Properties[fmt.Sprintf("leaf%02d", l)] = apiextensionsv1.JSONSchemaProps{Type: types[l%len(types)],
				Description: fmt.Sprintf("leaf %d of level %d of group %d", l, d, g)}
			count++
		}
		if d < hugeDepth {
			s.Properties["nested"] = level(g, d+1)
			count++
		}
		return s
	}
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{},
		Description: strings.Repeat("p", pad)}
	for g := 0; g < hugeGroups; g++ {
		spec.Properties[fmt.Sprintf("group%02d", g)] = level(g, 1)
		count++
	}
	return spec, count
}

func hugeCRD(pad int) (*apiextensionsv1.CustomResourceDefinition, int) {
	crd := enginetest.CRD("hugeschemas", "hugeschema", "HugeSchema", "hostile.example.org", apiextensionsv1.NamespaceScoped, true)
	spec, n := hugeSchema(pad)
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	return crd, n
}

// updateCRD replaces the provider CRD's spec by crd's, at the current
// resourceVersion (the API server updates its status concurrently).
func (env *tenant) updateCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Provider.Get(ctx, client.ObjectKeyFromObject(crd), current); err != nil {
			return err
		}
		crd.ResourceVersion, crd.Status = current.ResourceVersion, current.Status
		return env.Provider.Update(ctx, crd)
	})
}

// storedSize is the size of obj's JSON as the API server returns it
// (managed fields included): close to what etcd stores for a CRD.
func storedSize(t *testing.T, obj client.Object) int {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return len(data)
}

// A provider CRD as large as the provider stores (thousands of properties,
// nested deep): kbind installs its consumer CRD, or — when the consumer
// cannot store it (kbind's markers make the consumer's copy a little
// larger) — the binding says so, naming the CRD and the limit; objects
// round-trip once it fits, and other bindings keep syncing throughout.
func TestAHugeSchema(t *testing.T) {
	env := newTenant(t)
	ctx := context.Background()
	start := time.Now()

	// Grow the provider CRD by updates until the provider refuses (etcd's
	// 1.5 MiB request limit): each refused update leaves the last stored
	// one, so the search ends with the largest the provider stores, found
	// to within 64 bytes. Created small, its status is written before it
	// grows; a CRD created at that size could not get its status (below).
	crd, props := hugeCRD(0)
	if err := env.Provider.Create(ctx, crd); err != nil {
		t.Fatalf("the base huge CRD (%d properties): %v", props, err)
	}
	t.Cleanup(func() { _ = env.Provider.Delete(context.Background(), crd) })
	// Establishing a CRD of thousands of properties is the provider API
	// server's work, slow on a loaded machine (over 30 s once): as long as
	// the consumer's below, measured and logged.
	enginetest.EventuallyWithin(t, 2*time.Minute, "the provider CRD established", func() error {
		if err := env.Provider.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		if !kbindschema.Established(crd) {
			return fmt.Errorf("not established: %+v", crd.Status.Conditions)
		}
		return nil
	})
	t.Logf("the base huge CRD (%d properties) established %s after its create", props, time.Since(start).Round(time.Millisecond))
	const limit = 1536 * 1024
	base := storedSize(t, crd)
	lo, hi := max(limit-base-8*1024, 0), limit-base+8*1024
	crd, _ = hugeCRD(lo)
	if err := env.updateCRD(ctx, crd); err != nil {
		t.Fatalf("growing the huge CRD to a %d-byte pad, 8 KiB below the limit: %v", lo, err)
	}
	attempts := 1
	for hi-lo > 64 {
		mid := (lo + hi) / 2
		next, _ := hugeCRD(mid)
		attempts++
		if err := env.updateCRD(ctx, next); err != nil {
			if !strings.Contains(err.Error(), "too large") {
				t.Fatalf("growing the huge CRD to a %d-byte pad: %v", mid, err)
			}
			hi = mid
			continue
		}
		lo, crd = mid, next
	}
	providerSize := storedSize(t, crd)
	t.Logf("the largest CRD the provider stores: %d bytes as JSON with managed fields (%d properties, %d levels deep, %d-byte padding); found in %d updates, %s",
		providerSize, props, hugeDepth+1, lo, attempts, time.Since(start).Round(time.Millisecond))

	bound := time.Now()
	if err := env.Consumer.Create(ctx, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "hugeschemas"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:          []kbindv1alpha1.APIReference{{Name: "hugeschemas.hostile.example.org"}}}}); err != nil {
		t.Fatal(err)
	}
	var installed bool
	cb := &kbindv1alpha1.ClusterBinding{}
	enginetest.EventuallyWithin(t, 60*time.Second, "the huge CRD installed or its problem reported", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "hugeschemas"}, cb); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cb.Status.Conditions, string(kbindv1alpha1.ConditionReady))
		switch {
		case c == nil:
			return fmt.Errorf("no Ready condition")
		case c.Status == metav1.ConditionTrue:
			installed = true
			return nil
		case strings.Contains(c.Message, "too large"):
			t.Logf("hugeschemas: Ready=False/%s: %s (after %s)", c.Reason, c.Message, time.Since(bound).Round(time.Millisecond))
			for _, want := range []string{"hugeschemas.hostile.example.org", "consumer"} {
				if !strings.Contains(c.Message, want) {
					t.Errorf("the message does not name %q", want)
				}
			}
			return nil
		}
		return fmt.Errorf("Ready=%s/%s: %s; the consumer API server's log: %s", c.Status, c.Reason, c.Message, apiserverLog(env.Pair.Consumer.Dir, "hugeschemas", 5))
	})
	// Other bindings keep syncing while it is reported (or installed).
	env.roundTrip(t, env.obj(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Widget"}, "beside-huge", map[string]any{"size": int64(3)}))

	if !installed {
		// Make room for kbind's markers on the consumer: 4 KiB less.
		smaller, _ := hugeCRD(lo - 4096)
		if err := env.updateCRD(ctx, smaller); err != nil {
			t.Fatal(err)
		}
		shrunk := time.Now()
		// Establishing a 1.5 MiB CRD of 20400 properties (its structural
		// schema, its OpenAPI) takes the consumer API server a while on a
		// loaded 2-core machine: over 30 s once in CI, so 2 minutes here.
		enginetest.EventuallyWithin(t, 2*time.Minute, "hugeschemas Ready after the shrink", func() error {
			if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "hugeschemas"}, cb); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(cb.Status.Conditions, string(kbindv1alpha1.ConditionReady)); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Ready: %+v", c)
			}
			return nil
		})
		t.Logf("4 KiB smaller, the consumer CRD is installed %s later", time.Since(shrunk).Round(time.Millisecond))
	} else {
		t.Logf("the consumer stored it too, %s after binding", time.Since(bound).Round(time.Millisecond))
	}
	consumerCRD := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "hugeschemas.hostile.example.org"}, consumerCRD); err != nil {
		t.Fatal(err)
	}
	t.Logf("the consumer CRD: %d bytes as JSON with managed fields", storedSize(t, consumerCRD))

	// Values at the top and at the deepest level round-trip; the schema
	// is enforced on the consumer as on the provider.
	deep := map[string]any{"leaf00": "top", "leaf01": int64(1)}
	cur := deep
	for d := 2; d <= hugeDepth; d++ {
		next := map[string]any{"leaf02": true, "leaf03": 0.25}
		cur["nested"] = next
		cur = next
	}
	env.roundTrip(t, env.obj(schema.GroupVersionKind{Group: "hostile.example.org", Version: "v1alpha1", Kind: "HugeSchema"}, "h1",
		map[string]any{"group00": deep, "group23": map[string]any{"leaf00": "last group"}}))
	t.Logf("TestAHugeSchema took %s", time.Since(start).Round(time.Millisecond))
}

// apiserverLog is the last n lines of the API server log in dir that
// mention word.
func apiserverLog(dir, word string, n int) string {
	data, err := os.ReadFile(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		return err.Error()
	}
	return lastLines(string(data), word, n)
}
