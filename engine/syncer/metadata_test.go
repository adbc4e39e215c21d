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
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/isolation"
)

func TestSelectKeys(t *testing.T) {
	from := map[string]string{
		"team": "a", "tier": "gold", "example.org/owner": "me", "example.org/cost": "1", "other.io/x": "y",
		"core.kbind.io/conflict": "OwnedByAnother", lastAppliedAnnotation: "{...}",
	}
	cases := []struct {
		name  string
		rules []string
		want  map[string]string
	}{
		{"none", nil, map[string]string{}},
		{"a key", []string{"team"}, map[string]string{"team": "a"}},
		{"a prefix", []string{"example.org/"}, map[string]string{"example.org/owner": "me", "example.org/cost": "1"}},
		{"a prefix without its slash is a key", []string{"example.org"}, map[string]string{}},
		{"everything but kbind's keys and last-applied", []string{"*"}, map[string]string{"team": "a", "tier": "gold", "example.org/owner": "me", "example.org/cost": "1", "other.io/x": "y"}},
		{"kbind's keys are never copied, even by name", []string{"core.kbind.io/conflict", "core.kbind.io/"}, map[string]string{}},
		{"nor last-applied", []string{lastAppliedAnnotation, "kubectl.kubernetes.io/"}, map[string]string{}},
	}
	for _, tc := range cases {
		if got := selectKeys(tc.rules, from); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMetadataStampAndUpToDate(t *testing.T) {
	consumer := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	consumer.SetLabels(map[string]string{"team": "a", "other": "x"})
	consumer.SetAnnotations(map[string]string{"example.org/owner": "me"})
	desired := func(rules MetadataRules) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
		rules.Stamp(u, consumer)
		return u
	}
	rules := MetadataRules{Labels: []string{"team"}, Annotations: []string{"example.org/"}}
	got := desired(rules)
	if !reflect.DeepEqual(got.GetLabels(), map[string]string{"team": "a"}) ||
		got.GetAnnotations()["example.org/owner"] != "me" ||
		got.GetAnnotations()[kbindv1alpha1.SyncedMetadataAnnotation] != "labels=team;annotations=example.org/owner" {
		t.Fatalf("stamped %v %v", got.GetLabels(), got.GetAnnotations())
	}
	if none := desired(MetadataRules{}); none.GetLabels() != nil || none.GetAnnotations() != nil {
		t.Errorf("no rules stamped %v %v", none.GetLabels(), none.GetAnnotations())
	}

	// The provider copy as last applied, plus a label its controller set.
	provider := got.DeepCopy()
	provider.SetLabels(map[string]string{"team": "a", "provider.io/shard": "3"})
	cases := []struct {
		name  string
		rules MetadataRules
		want  bool
	}{
		{"unchanged (the provider's own label does not matter)", rules, true},
		{"a key no longer selected must go", MetadataRules{Annotations: []string{"example.org/"}}, false},
		{"rules removed: the copied keys must go", MetadataRules{}, false},
		{"a new key selected", MetadataRules{Labels: []string{"team", "other"}, Annotations: []string{"example.org/"}}, false},
	}
	for _, tc := range cases {
		if got := upToDate(provider, desired(tc.rules)); got != tc.want {
			t.Errorf("%s: upToDate %v, want %v", tc.name, got, tc.want)
		}
	}
	// A copy that never had metadata rules, and still has none: up to date
	// (no write for existing users).
	plain := desired(MetadataRules{})
	if !upToDate(plain.DeepCopy(), plain) {
		t.Error("a copy without metadata rules is not up to date")
	}
}

// TestUpToDateSeesAMissingPrefixLabel: a cluster-scoped copy written
// before kbind stamped core.kbind.io/prefix is not up to date, so its next
// sync applies the label.
func TestUpToDateSeesAMissingPrefixLabel(t *testing.T) {
	iso := isolation.For(kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationPrefixed, Prefix: "a"})
	desired := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	iso.Markers("uid", types.NamespacedName{Name: "c1"}, "obj").Stamp(desired)
	old := desired.DeepCopy()
	labels := old.GetLabels()
	delete(labels, kbindv1alpha1.PrefixLabel)
	old.SetLabels(labels)
	if upToDate(old, desired) {
		t.Error("a copy without the prefix label is taken for up to date")
	}
	if !upToDate(desired.DeepCopy(), desired) {
		t.Error("a copy with the prefix label is not up to date")
	}
}
