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

package isolationtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/related"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// TestRelatedFromProviderStaysInItsNamespace plays the attack of a
// consumer namespace on another's provider Secrets under Namespace
// isolation (docs/isolation.md#related-secrets-and-configmaps): every
// consumer namespace's objects live in one provider namespace as
// "<namespace>.<name>", and a Binding in team-b must not pull team-a's
// down, neither by naming its provider name nor by a label selector that
// matches it. team-b's own objects are copied under their consumer names,
// a copy kbind made before from team-a's Secret is deleted, and the
// bindings say why nothing else was copied.
func TestRelatedFromProviderStaysInItsNamespace(t *testing.T) {
	ctx := context.Background()
	const ns = "tenant-rel"
	tn := consumerA(t)
	ensureNamespace(t, env.Provider, ns)
	user := "consumer-a-" + t.Name()
	bindRole(t, "", "kbind-discovery-rel", user, discoveryRules)
	bindRole(t, ns, "kbind-consumer", user, append(objectRules("gadgets"), relatedRule))
	iso := kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: ns}
	connect(t, tn, iso, nil)
	t.Cleanup(func() { teardown(t, tn) })

	// The provider's controller wrote a connection Secret for team-a's
	// database and for two of team-b's (one under a name so long that its
	// provider name is the hashed form).
	long := strings.Repeat("l", 250)
	hashed, err := isolation.For(iso).Object(key("team-b", long))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(hashed.Name, "team-b.") {
		t.Fatalf("%s is not the hashed form", hashed.Name)
	}
	db := map[string]string{"app": "db"}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-a.db1-conn", Labels: db}, Data: map[string][]byte{"owner": []byte("team-a")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-b.db2", Labels: db}, Data: map[string][]byte{"owner": []byte("team-b")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hashed.Name, Labels: db}, Data: map[string][]byte{"owner": []byte("team-b-long")}},
	} {
		if err := env.Provider.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	secrets := func(sel kbindv1alpha1.RelatedResourceSelector) kbindv1alpha1.RelatedResource {
		return kbindv1alpha1.RelatedResource{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromProvider, Selector: sel}
	}
	bind := func(name string, entry kbindv1alpha1.RelatedResource) *kbindv1alpha1.Binding {
		ensureNamespace(t, tn.consumer, "team-b")
		b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: name}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"}, APIs: []kbindv1alpha1.APIReference{{Name: "gadgets.example.org"}},
			RelatedResources: []kbindv1alpha1.RelatedResource{entry}}}
		if err := tn.consumer.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	byLabel := secrets(kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: db}})
	labelled := bind("by-label", byLabel)
	byName := bind("by-name", secrets(kbindv1alpha1.RelatedResourceSelector{Names: []string{"team-a.db1-conn", long}}))

	// A copy of team-a's Secret that kbind made for the label entry before
	// (when a Binding copied every provider object its selector matched).
	stale := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "team-a.db1-conn"}, Data: map[string][]byte{"owner": []byte("team-a")}}
	conn := &kbindv1alpha1.Connection{}
	if err := tn.consumer.Get(ctx, key("", "provider"), conn); err != nil {
		t.Fatal(err)
	}
	kbindv1alpha1.RelatedCopyMarkers(conn.Status.LocalClusterUID, related.Owner(string(labelled.UID), related.EntryID(byLabel))).Stamp(&stale.ObjectMeta)
	if err := tn.consumer.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}

	// team-b's own Secrets arrive under their consumer names.
	waitData(t, tn.consumer, &corev1.Secret{}, key("team-b", "db2"), "team-b", client.ObjectKey{})
	waitData(t, tn.consumer, &corev1.Secret{}, key("team-b", long), "team-b-long", client.ObjectKey{})

	// The bindings say why the rest was not copied; the stale copy goes.
	enginetest.WaitCondition(t, tn.consumer, labelled, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"relatedResources[0]", "2 provider Secret(s) in "+ns+" not named team-b.<name>", "never another consumer namespace's")
	enginetest.WaitCondition(t, tn.consumer, byName, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"relatedResources[0].selector.names", "team-a.db1-conn", ns+"/team-b.team-a.db1-conn")
	enginetest.Eventually(t, "the stale copy deleted", func() error {
		err := tn.consumer.Get(ctx, client.ObjectKeyFromObject(stale), &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	enginetest.Eventually(t, "the deletion reported", func() error {
		var events corev1.EventList
		if err := tn.consumer.List(ctx, &events, client.InNamespace("team-b")); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.UID == labelled.UID && e.Reason == "RelatedSkipped" && strings.Contains(e.Message, "deleted Secret team-b/team-a.db1-conn") {
				return nil
			}
		}
		return fmt.Errorf("%d Events, none about the deleted copy", len(events.Items))
	})
	enginetest.Eventually(t, "status.relatedResources", func() error {
		if err := tn.consumer.Get(ctx, client.ObjectKeyFromObject(labelled), labelled); err != nil {
			return err
		}
		// db2 copied; team-a's Secret refused; the hashed name is matched
		// by names only.
		if st := labelled.Status.RelatedResources; st == nil || st.Copies != 1 || st.Skipped != 2 {
			return fmt.Errorf("status.relatedResources %+v", st)
		}
		return nil
	})

	// Nothing of team-a's landed in team-b, under any name.
	var list corev1.SecretList
	if err := tn.consumer.List(ctx, &list, client.InNamespace("team-b")); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if string(s.Data["owner"]) == "team-a" {
			t.Errorf("team-a's provider Secret was copied into team-b as %s", s.Name)
		}
	}
}

// consumerA is consumer A (env's) with a provider user of its own that has
// no permissions yet; unlike tenants it starts no second consumer.
func consumerA(t *testing.T) tenant {
	t.Helper()
	start(t)
	return tenantOn(t, env.Consumer)
}

// tenantOn is tenant "a" on consumer c, with a provider user of its own
// that has no permissions yet.
func tenantOn(t *testing.T, c client.Client) tenant {
	t.Helper()
	user, err := env.Pair.Provider.AddUser("consumer-a-" + t.Name())
	if err != nil {
		t.Fatal(err)
	}
	pc, err := client.New(user.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return tenant{name: "a", consumer: c, provider: pc, kubeconfig: user.Kubeconfig}
}
