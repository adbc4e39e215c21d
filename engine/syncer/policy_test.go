package syncer

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestFiltersSelect(t *testing.T) {
	sel := func(l map[string]string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: l} }
	spec := func(objects, namespaces *metav1.LabelSelector) kbindv1alpha1.BindingSpec {
		return kbindv1alpha1.BindingSpec{NamespaceSelector: namespaces, APIs: []kbindv1alpha1.APIReference{
			{Name: "widgets.example.org", ObjectSelector: objects},
			{Name: "gadgets.example.org", Projection: &kbindv1alpha1.Projection{Group: "acme.io"}, ObjectSelector: sel(map[string]string{"g": "1"})},
		}}
	}
	for _, tc := range []struct {
		name    string
		spec    kbindv1alpha1.BindingSpec
		crd     string
		ns, obj map[string]string
		want    bool
	}{
		{"no filters: everything", spec(nil, nil), "widgets.example.org", nil, nil, true},
		{"object selected", spec(sel(map[string]string{"sync": "yes"}), nil), "widgets.example.org", nil, map[string]string{"sync": "yes"}, true},
		{"object not selected", spec(sel(map[string]string{"sync": "yes"}), nil), "widgets.example.org", nil, map[string]string{"sync": "no"}, false},
		{"namespace selected", spec(nil, sel(map[string]string{"p": "east"})), "widgets.example.org", map[string]string{"p": "east"}, nil, true},
		{"namespace not selected", spec(nil, sel(map[string]string{"p": "east"})), "widgets.example.org", map[string]string{"p": "west"}, nil, false},
		{"both must match", spec(sel(map[string]string{"sync": "yes"}), sel(map[string]string{"p": "east"})), "widgets.example.org",
			map[string]string{"p": "east"}, map[string]string{"sync": "no"}, false},
		{"a projected entry by its consumer name", spec(nil, nil), "gadgets.acme.io", nil, map[string]string{"g": "1"}, true},
		{"a projected entry's selector", spec(nil, nil), "gadgets.acme.io", nil, nil, false},
		{"an empty selector selects everything", spec(&metav1.LabelSelector{}, nil), "widgets.example.org", nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policyOf(tc.spec, tc.crd)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.selects(tc.ns, tc.obj); got != tc.want {
				t.Errorf("selects = %v, want %v", got, tc.want)
			}
		})
	}
}

// A selector that does not parse gives no policy: the binding gives no
// scope, so nothing is synced and nothing released.
func TestFiltersInvalid(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "sync", Operator: "Sometimes"}}}
	for name, spec := range map[string]kbindv1alpha1.BindingSpec{
		"objectSelector":    {APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org", ObjectSelector: bad}}},
		"namespaceSelector": {NamespaceSelector: bad, APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}},
	} {
		if _, err := policyOf(spec, "widgets.example.org"); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an error naming it", name, err)
		}
	}
}
