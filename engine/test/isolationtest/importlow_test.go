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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// logged reports whether the engine logged a line containing every
// fragment.
func logged(fragments ...string) bool {
	for line := range strings.SplitSeq(env.Logs.String(), "\n") {
		all := true
		for _, f := range fragments {
			all = all && strings.Contains(line, f)
		}
		if all {
			return true
		}
	}
	return false
}

// importRoles gives the tenant's provider user what importing from
// provider namespace ns needs.
func importRoles(t *testing.T, ns string) {
	t.Helper()
	user := "consumer-a-" + t.Name()
	bindRole(t, "", "kbind-discovery-"+ns, user, discoveryRules)
	bindRole(t, ns, "kbind-consumer", user, objectRules("widgets", "widgets/status"))
}

// TestImportKeepsItsCopyWhenTheProviderObjectComesBack (issue #52, path 7):
// the provider deletes an imported object and re-creates it at once (a
// restore, a namespace re-created by GitOps); the consumer copy is kept —
// the same UID, its consumer-side labels — and follows the re-created
// object. An absence that lasts past the confirmation window (the binding
// resync) still deletes the copy.
//
// The provider object must come back within the confirmation window as
// the engine sees it, which on a busy machine a 2 s window (enginetest's
// BindingResync) does not leave room for: this test's consumer is its own,
// its engine confirming an absence after absenceWindow.
func TestImportKeepsItsCopyWhenTheProviderObjectComesBack(t *testing.T) {
	ctx := context.Background()
	const absenceWindow = 20 * time.Second
	a := tenantOn(t, startConsumer(t, func(o *engine.Options) { o.BindingResync = absenceWindow }))
	const nsP, nsC = "import-restore", "team-r"
	ensureNamespace(t, env.Provider, nsP)
	importRoles(t, nsP)
	providerWidget(t, nsP, nsC+".db", 1)
	ensureNamespace(t, a.consumer, nsC)
	connect(t, a, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: nsP}, nil, "widgets.example.org")
	waitBound(t, []tenant{a}, "widgets.example.org")
	importing(t, a, "widgets.example.org")

	// A consumer-side label on the copy: the consumer's own, kept by the
	// import (it writes only the labels the binding selects).
	db := waitImported(t, a, key(nsC, "db"), 1, "")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := object(widgetGVK, "", "", nil)
		if err := a.consumer.Get(ctx, key(nsC, "db"), u); err != nil {
			return err
		}
		u.SetLabels(map[string]string{"team": "payments"})
		return a.consumer.Update(ctx, u)
	})
	if err != nil {
		t.Fatal(err)
	}
	uid := db.GetUID()

	// The provider's object deleted, then restored (a new UID, a new spec)
	// once kbind has seen it gone: the copy either noted the absence and
	// waits, or (the bug) was deleted.
	pdb := object(widgetGVK, nsP, nsC+".db", nil)
	if err := env.Provider.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the absence of the provider object seen", func() error {
		if logged(absenceNoted, `"namespace": "`+nsC+`"`) {
			return nil
		}
		u := object(widgetGVK, "", "", nil)
		switch err := a.consumer.Get(ctx, key(nsC, "db"), u); {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case u.GetUID() != uid:
			return nil
		}
		return fmt.Errorf("neither noted nor deleted yet")
	})
	providerWidget(t, nsP, nsC+".db", 2)
	got := waitImported(t, a, key(nsC, "db"), 2, "")
	if got.GetUID() != uid || got.GetLabels()["team"] != "payments" {
		t.Errorf("the imported copy was deleted and made again on a provider object that came back: UID %s, was %s; labels %v, had team=payments",
			got.GetUID(), uid, got.GetLabels())
	}

	// Gone for good: the copy goes once the absence is confirmed — the
	// window after the sync that notes it, plus a sync (the PollTimeout
	// every wait allows for).
	if err := env.Provider.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	gone := time.Now()
	enginetest.EventuallyWithin(t, absenceWindow+enginetest.PollTimeout, "the imported copy deleted once the absence is confirmed", func() error {
		err := a.consumer.Get(ctx, key(nsC, "db"), object(widgetGVK, "", "", nil))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	t.Logf("the copy was deleted %s after the provider object (absence window %s)", time.Since(gone).Round(time.Millisecond), absenceWindow)
}

// absenceNoted is what the Syncer logs when it first sees the provider
// object of an imported copy gone.
const absenceNoted = "The provider object of an imported copy is gone; the copy is kept until its absence is confirmed"

// TestDrainWithAnUnusableConnectionKeepsOtherBindingsImports (issue #52,
// path 7): a ClusterBinding imports into the namespaces it selects, a
// Binding of the same Connection into its own; the Connection becomes
// unusable (its kubeconfig Secret broken) and the ClusterBinding is
// deleted. Its drain deletes its own imported copies, never the Binding's.
func TestDrainWithAnUnusableConnectionKeepsOtherBindingsImports(t *testing.T) {
	ctx := context.Background()
	a := consumerA(t)
	const nsP, nsCluster, nsOwn = "import-drain", "team-cb", "team-b"
	ensureNamespace(t, env.Provider, nsP)
	importRoles(t, nsP)
	providerWidget(t, nsP, nsCluster+".db", 1)
	providerWidget(t, nsP, nsOwn+".db", 2)
	if err := a.consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsCluster, Labels: map[string]string{"import": "cluster"}}}); err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, a.consumer, nsOwn)
	connect(t, a, kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: nsP}, nil, "widgets.example.org")
	defer teardown(t, a)
	updateClusterBinding(t, a, "widgets.example.org", func(spec *kbindv1alpha1.BindingSpec) {
		spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"import": "cluster"}}
		spec.APIs[0].ProviderObjects = kbindv1alpha1.ProviderObjectsImport
	})
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: nsOwn, Name: "widgets"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:          []kbindv1alpha1.APIReference{{Name: "widgets.example.org", ProviderObjects: kbindv1alpha1.ProviderObjectsImport}},
	}}
	if err := a.consumer.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitImported(t, a, key(nsCluster, "db"), 1, "")
	own := waitImported(t, a, key(nsOwn, "db"), 2, "")

	// The Connection unusable: its kubeconfig Secret no longer parses.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := &corev1.Secret{}
		if err := a.consumer.Get(ctx, key(enginetest.SecretNamespace, "provider"), s); err != nil {
			return err
		}
		s.Data = map[string][]byte{"kubeconfig": []byte("not a kubeconfig")}
		return a.consumer.Update(ctx, s)
	})
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the Connection not Ready", func() error {
		conn := &kbindv1alpha1.Connection{}
		if err := a.consumer.Get(ctx, key("", "provider"), conn); err != nil {
			return err
		}
		if meta.IsStatusConditionTrue(conn.Status.Conditions, string(kbindv1alpha1.ConditionReady)) {
			return fmt.Errorf("still Ready")
		}
		return nil
	})

	if err := a.consumer.Delete(ctx, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.org"}}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, a.consumer, kbindv1alpha1.GroupVersion.WithKind("ClusterBinding"), key("", "widgets.example.org"))
	waitGone(t, a.consumer, widgetGVK, key(nsCluster, "db"))
	u := object(widgetGVK, "", "", nil)
	if err := a.consumer.Get(ctx, key(nsOwn, "db"), u); err != nil || u.GetUID() != own.GetUID() {
		t.Errorf("the Binding's imported copy %s/db after the ClusterBinding's drain: %v (UID %s, was %s)", nsOwn, err, u.GetUID(), own.GetUID())
	}
	assertExists(t, env.Provider, key(nsP, nsOwn+".db"))
	assertExists(t, env.Provider, key(nsP, nsCluster+".db"))
}
