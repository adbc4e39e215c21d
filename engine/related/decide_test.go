package related

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

var denied = DeniedNamespaces([]string{"kbind"})

func TestDeniedNamespaces(t *testing.T) {
	for ns, want := range map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true, "kbind": true, "default": false, "team-a": false} {
		if denied[ns] != want {
			t.Errorf("%s denied = %v, want %v", ns, denied[ns], want)
		}
	}
}

func TestPlanEntries(t *testing.T) {
	secrets, cms := kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.RelatedResourceConfigMaps
	labelled := kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}
	cases := []struct {
		name      string
		entry     kbindv1alpha1.RelatedResource
		namespace string
		source    side
		keys      []key
		names     []string
		skip      string
		keep      bool
	}{{
		name:   "label selector, cluster-wide, kbind's own objects excluded server-side",
		entry:  kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromProvider, Selector: labelled},
		source: providerSide,
		keys:   []key{{resource: secrets, labels: "app=db,core.kbind.io/managed!=true"}},
	}, {
		name:      "names only: one informer per name, in the Binding's namespace",
		entry:     kbindv1alpha1.RelatedResource{Resource: cms, Direction: kbindv1alpha1.FromConsumer, Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{"b", "a"}}},
		namespace: "team-a",
		source:    consumerSide,
		keys: []key{
			{resource: cms, namespace: "team-a", labels: "core.kbind.io/managed!=true", fields: "metadata.name=a"},
			{resource: cms, namespace: "team-a", labels: "core.kbind.io/managed!=true", fields: "metadata.name=b"},
		},
	}, {
		name: "both: the label selector server-side, names client-side",
		entry: kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromConsumer,
			Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: labelled.LabelSelector, Names: []string{"x"}}},
		source: consumerSide,
		keys:   []key{{resource: secrets, labels: "app=db,core.kbind.io/managed!=true"}},
		names:  []string{"x"},
	}, {
		name:   "no selector (stored before the API required one): nothing read, copies kept",
		entry:  kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromConsumer},
		source: consumerSide,
		skip:   "relatedResources[0] has no selector", keep: true,
	}, {
		name: "an empty label selector is no selector",
		entry: kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromConsumer,
			Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{}}},
		source: consumerSide,
		skip:   "has no selector", keep: true,
	}, {
		name: "an invalid label selector: nothing read, copies kept",
		entry: kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromConsumer,
			Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}}},
		source: consumerSide,
		skip:   "invalid labelSelector", keep: true,
	}, {
		name:      "a Binding in a denied namespace reads nothing; its copies go",
		entry:     kbindv1alpha1.RelatedResource{Resource: secrets, Direction: kbindv1alpha1.FromProvider, Selector: labelled},
		namespace: "kube-system",
		source:    providerSide,
		skip:      "never copies secrets from or into namespace kube-system",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plans := planEntries([]kbindv1alpha1.RelatedResource{tc.entry}, tc.namespace, tc.namespace, false, denied, nil)
			if len(plans) != 1 {
				t.Fatalf("%d plans", len(plans))
			}
			p := plans[0]
			if p.source != tc.source || p.id != EntryID(tc.entry) || !reflect.DeepEqual(p.keys, tc.keys) || p.keep != tc.keep {
				t.Errorf("plan source=%v keys=%+v keep=%v, want source=%v keys=%+v keep=%v", p.source, p.keys, p.keep, tc.source, tc.keys, tc.keep)
			}
			if (tc.skip == "") != (p.skip == "") || !strings.Contains(p.skip, tc.skip) {
				t.Errorf("skip %q, want %q", p.skip, tc.skip)
			}
			var names []string
			for n := range p.names {
				names = append(names, n)
			}
			if !reflect.DeepEqual(names, tc.names) {
				t.Errorf("names %v, want %v", names, tc.names)
			}
		})
	}
}

func TestCopiesKey(t *testing.T) {
	if got := copiesKey(providerSide, kbindv1alpha1.RelatedResourceSecrets, "team-a", "uid-1"); got.labels != "core.kbind.io/consumer-cluster-uid=uid-1,core.kbind.io/managed=true" || got.namespace != "team-a" || got.fields != "" {
		t.Errorf("provider copies key %+v", got)
	}
	if got := copiesKey(consumerSide, kbindv1alpha1.RelatedResourceConfigMaps, "", ""); got.labels != "core.kbind.io/consumer-cluster-uid,core.kbind.io/managed=true" {
		t.Errorf("consumer copies key %+v", got)
	}
}

func TestJudgeSource(t *testing.T) {
	fromProvider := entryPlan{source: providerSide}
	fromConsumer := entryPlan{source: consumerSide}
	byName := entryPlan{source: providerSide, names: map[string]bool{"wanted": true}}
	obj := func(namespace, name string, labels, annotations map[string]string) client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels, Annotations: annotations}}
	}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "t"}, Type: corev1.SecretTypeServiceAccountToken}
	cases := []struct {
		name string
		obj  client.Object
		plan entryPlan
		want sourceVerdict
	}{
		{"plain", obj("team-a", "s", nil, nil), fromProvider, copyIt},
		{"labelled for this consumer", obj("team-a", "s", map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: "ours"}, nil), fromProvider, copyIt},
		{"labelled for another consumer", obj("team-a", "s", map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: "theirs"}, nil), fromProvider, notSelected},
		{"annotated for another consumer", obj("team-a", "s", nil, map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: "theirs"}), fromProvider, notSelected},
		{"another consumer's copy", obj("team-a", "s", map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: "theirs"}, nil), fromProvider, notSelected},
		{"our own copy", obj("team-a", "s", map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: "ours"}, nil), fromProvider, notSelected},
		{"a copy whose labels were removed", obj("team-a", "s", nil, map[string]string{kbindv1alpha1.RelatedBindingAnnotation: "b/e"}), fromConsumer, notSelected},
		{"a consumer object may carry any cluster label", obj("team-a", "s", map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: "x"}, nil), fromConsumer, copyIt},
		{"kube-system", obj("kube-system", "s", nil, nil), fromProvider, deniedNamespace},
		{"the kubeconfig Secret namespace", obj("kbind", "s", nil, nil), fromConsumer, deniedNamespace},
		{"a service-account token", token, fromConsumer, serviceAccountToken},
		{"another name", obj("team-a", "other", nil, nil), byName, notSelected},
		{"the name", obj("team-a", "wanted", nil, nil), byName, copyIt},
	}
	for _, tc := range cases {
		if got := judgeSource(tc.obj, tc.plan, "ours", denied); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCollectable(t *testing.T) {
	claims := map[string]claim{"secrets/ns/a": {entry: "e1", target: providerSide}}
	cases := []struct {
		name  string
		owner string
		side  side
		key   string
		kept  map[string]bool
		want  bool
	}{
		{"claimed by its entry on this side", "b/e1", providerSide, "secrets/ns/a", nil, false},
		{"claimed on the other side", "b/e1", consumerSide, "secrets/ns/a", nil, true},
		{"claimed by another entry", "b/e2", providerSide, "secrets/ns/a", nil, true},
		{"unclaimed: the source went or stopped matching", "b/e1", providerSide, "secrets/ns/gone", nil, true},
		{"its entry could not read its sources", "b/e1", providerSide, "secrets/ns/gone", map[string]bool{"e1": true}, false},
		{"its entry was removed", "b/removed", providerSide, "secrets/ns/x", map[string]bool{"e1": true}, true},
		{"another binding's", "other/e1", providerSide, "secrets/ns/x", nil, false},
	}
	for _, tc := range cases {
		if got := collectable(tc.owner, "b", tc.side, tc.key, claims, tc.kept); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReadable(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("no"))
	other := errors.New("connection refused")
	cases := []struct {
		name   string
		synced bool
		err    error
		want   error
	}{
		{"synced", true, nil, nil},
		{"not listed yet", false, nil, errNotSynced},
		{"refused before the first list", false, forbidden, forbidden},
		{"refused after a good list: reported, not acted on", true, forbidden, forbidden},
		{"failing before the first list", false, other, other},
		{"a transient watch error after a good list: the cache holds the last good state", true, other, nil},
	}
	for _, tc := range cases {
		if got := readable(tc.synced, tc.err); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestStripTransform(t *testing.T) {
	transform := stripTransform(denied)
	in := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "s",
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"password":"c2VjcmV0"}}`, "keep": "me"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Data: map[string][]byte{"password": []byte("secret")}}
	out, err := transform(in)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Secret)
	if _, ok := s.Annotations[corev1.LastAppliedConfigAnnotation]; ok || s.Annotations["keep"] != "me" || s.ManagedFields != nil || string(s.Data["password"]) != "secret" {
		t.Errorf("transformed %+v", s)
	}
	sys := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "c"}, Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"b": {1}}}
	out, _ = transform(sys)
	if cm := out.(*corev1.ConfigMap); cm.Data != nil || cm.BinaryData != nil {
		t.Errorf("a payload in a denied namespace was cached: %+v", cm)
	}
	tombstone := toolscache.DeletedFinalStateUnknown{Key: "a/b"}
	if out, err := transform(tombstone); err != nil || out != tombstone {
		t.Errorf("a tombstone: %v %v", out, err)
	}
}
