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

package related_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// connect creates a kubeconfig Secret and a Connection, both named name,
// and waits until the Connection is Ready.
func connect(t *testing.T, name string, kubeconfig []byte) (*corev1.Secret, *kbindv1alpha1.Connection) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: name}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
	mustCreate(t, env.Consumer, s)
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: name},
			NamespacedBindings: enginetest.AdmitAllNamespaces()}}
	mustCreate(t, env.Consumer, conn)
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	return s, conn
}

// setKubeconfig replaces the kubeconfig in a Connection's Secret.
func setKubeconfig(t *testing.T, s *corev1.Secret, kubeconfig []byte) {
	t.Helper()
	enginetest.Eventually(t, "updating Secret "+s.Name, func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(s), s); err != nil {
			return err
		}
		s.Data = map[string][]byte{"kubeconfig": kubeconfig}
		return env.Consumer.Update(context.Background(), s)
	})
}

// useCredential replaces the kubeconfig in the Secret s of the Connection
// of the same name with that of user, and waits until the Connection
// says it uses it (status.credentials.subject): what the test does next
// is done with it, not with the credential before.
func useCredential(t *testing.T, s *corev1.Secret, kubeconfig []byte, user string) {
	t.Helper()
	setKubeconfig(t, s, kubeconfig)
	enginetest.Eventually(t, "Connection "+s.Name+" using the credential of "+user, func() error {
		conn := &kbindv1alpha1.Connection{}
		if err := env.Consumer.Get(context.Background(), client.ObjectKey{Name: s.Name}, conn); err != nil {
			return err
		}
		if c := conn.Status.Credentials; c == nil || c.Subject != user {
			return fmt.Errorf("credentials %+v", c)
		}
		return nil
	})
}

func bindingOn(t *testing.T, connection, namespace, name string, entries ...kbindv1alpha1.RelatedResource) *kbindv1alpha1.Binding {
	t.Helper()
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef:    kbindv1alpha1.ConnectionReference{Name: connection},
		APIs:             []kbindv1alpha1.APIReference{{Name: "none.example.org"}},
		RelatedResources: entries,
	}}
	mustCreate(t, env.Consumer, b)
	return b
}

func byLabel(resource kbindv1alpha1.RelatedResourceKind, direction kbindv1alpha1.RelatedResourceDirection, key, value string) kbindv1alpha1.RelatedResource {
	return kbindv1alpha1.RelatedResource{Resource: resource, Direction: direction,
		Selector: kbindv1alpha1.RelatedResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}}
}

func byName(resource kbindv1alpha1.RelatedResourceKind, direction kbindv1alpha1.RelatedResourceDirection, names ...string) kbindv1alpha1.RelatedResource {
	return kbindv1alpha1.RelatedResource{Resource: resource, Direction: direction, Selector: kbindv1alpha1.RelatedResourceSelector{Names: names}}
}

// stays asserts that obj exists now.
func stays(t *testing.T, c client.Client, obj client.Object, why string) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("%s/%s must stay (%s): %v", obj.GetNamespace(), obj.GetName(), why, err)
	}
}

func absent(t *testing.T, c client.Client, obj client.Object, why string) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
		t.Errorf("%T %s/%s must not exist (%s): %v", obj, obj.GetNamespace(), obj.GetName(), why, err)
	}
}

func waitRelatedStatus(t *testing.T, obj client.Object, want kbindv1alpha1.RelatedStatus) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("status.relatedResources %+v", want), func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		var got *kbindv1alpha1.RelatedStatus
		switch b := obj.(type) {
		case *kbindv1alpha1.Binding:
			got = b.Status.RelatedResources
		case *kbindv1alpha1.ClusterBinding:
			got = b.Status.RelatedResources
		}
		if got == nil || *got != want {
			return fmt.Errorf("status.relatedResources %+v", got)
		}
		return nil
	})
}

// waitEvent waits for a Warning Event with reason about obj whose message
// contains every fragment.
func waitEvent(t *testing.T, obj client.Object, reason string, fragments ...string) {
	t.Helper()
	enginetest.Eventually(t, fmt.Sprintf("Event %s %q", reason, fragments), func() error {
		var events corev1.EventList
		if err := env.Consumer.List(context.Background(), &events); err != nil {
			return err
		}
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.UID != obj.GetUID() {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason != reason || e.Type != corev1.EventTypeWarning {
				continue
			}
			all := true
			for _, f := range fragments {
				all = all && strings.Contains(e.Message, f)
			}
			if all {
				return nil
			}
		}
		return fmt.Errorf("events %q", seen)
	})
}

// TestFailedReadsNeverDelete: every read a delete depends on is made to
// fail in turn, by rotating the Connection's credential to narrower ones;
// the binding reports the refusal and nothing is deleted (issue 14, item
// 3). The reads: a FromProvider entry's sources (a refused source list
// used to delete every copy the entry made), the provider copies (before
// collecting them), the target before an immutable copy is replaced, and
// the provider copies before a deleted binding's cleanup.
func TestFailedReadsNeverDelete(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsG, nsG2, listing := unique("rel-g"), unique("rel-g2"), unique("listing")
	base := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
	}
	kubeconfigFor := func(user string, secretVerbs ...string) []byte {
		u, err := env.Pair.Provider.AddUser(user)
		if err != nil {
			t.Fatal(err)
		}
		enginetest.Grant(t, env.Provider, user, u.Name, append(append([]rbacv1.PolicyRule{}, base...),
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: secretVerbs})...)
		kc, err := testenv.KubeconfigFor("provider", u.Config)
		if err != nil {
			t.Fatal(err)
		}
		return kc
	}
	listerUser, nolistUser, noreadUser := unique("related-lister"), unique("related-nolist"), unique("related-noread")
	lister := kubeconfigFor(listerUser, "*")
	nolist := kubeconfigFor(nolistUser, "get", "create", "update", "patch", "delete")
	noread := kubeconfigFor(noreadUser, "create", "update", "patch", "delete")
	share := map[string]string{"share": "yes"}

	mustCreate(t, env.Provider, secret(nsG, "db-credentials", map[string]string{"app": "db"}, "v1"))
	mustCreate(t, env.Consumer, secret(nsG2, "api-key", share, "k1"))
	frozen := secret(nsG2, "frozen", share, "f1")
	frozen.Immutable = ptr.To(true)
	mustCreate(t, env.Consumer, frozen)
	ns(t, env.Provider, nsG2) // the credentials may not create namespaces
	s, _ := connect(t, listing, lister)
	down := bindingOn(t, listing, nsG, "down", byLabel(kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.FromProvider, "app", "db"))
	up := bindingOn(t, listing, nsG2, "up", byLabel(kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.FromConsumer, "share", "yes"))
	waitSecret(t, env.Consumer, nsG, "db-credentials", data("v1"))
	waitSecret(t, env.Provider, nsG2, "api-key", data("k1"))
	waitSecret(t, env.Provider, nsG2, "frozen", data("f1"))
	copyOf := func(namespace, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	}

	// A credential that may not list Secrets: the sources of "down" and the
	// provider copies of "up" cannot be read. Both bindings say so; the
	// copy of "down" stays, and so does the copy of a source that stopped
	// matching "up".
	useCredential(t, s, nolist, nolistUser)
	enginetest.WaitCondition(t, env.Consumer, down, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"list secrets (provider side)")
	stays(t, env.Consumer, copyOf(nsG, "db-credentials"), "its source could not be read")
	apiKey := &corev1.Secret{}
	if err := env.Consumer.Get(ctx, client.ObjectKey{Namespace: nsG2, Name: "api-key"}, apiKey); err != nil {
		t.Fatal(err)
	}
	apiKey.Labels = nil
	if err := env.Consumer.Update(ctx, apiKey); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, up, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"list secrets (provider side)")
	enginetest.WaitCondition(t, env.Consumer, down, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"list secrets (provider side)")
	stays(t, env.Consumer, copyOf(nsG, "db-credentials"), "its source could not be read")
	stays(t, env.Provider, copyOf(nsG2, "api-key"), "the provider copies could not be read")

	// A credential that may not read Secrets at all: an immutable source
	// re-created with other data cannot replace its copy (the target read
	// fails), and a deleted binding waits instead of forgetting its copies.
	useCredential(t, s, noread, noreadUser)
	if err := env.Consumer.Delete(ctx, frozen); err != nil {
		t.Fatal(err)
	}
	frozen = secret(nsG2, "frozen", share, "f2")
	frozen.Immutable = ptr.To(true)
	mustCreate(t, env.Consumer, frozen)
	enginetest.WaitCondition(t, env.Consumer, up, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"get secrets in namespace "+nsG2+" (provider side)")
	if err := env.Provider.Get(ctx, client.ObjectKey{Namespace: nsG2, Name: "frozen"}, frozen); err != nil || string(frozen.Data["key"]) != "f1" {
		t.Fatalf("the immutable copy must stay as it was while its target cannot be read: %v %q", err, frozen.Data["key"])
	}
	if err := env.Consumer.Delete(ctx, up); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, up, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"deleting: waiting for permission to delete related copies", "forbidden")
	stays(t, env.Provider, copyOf(nsG2, "api-key"), "the provider copies could not be read")
	stays(t, env.Provider, copyOf(nsG2, "frozen"), "the provider copies could not be read")
	stays(t, env.Consumer, copyOf(nsG, "db-credentials"), "its source could not be read")

	// The permission back: the deleted binding's copies go, then the
	// binding; the other binding's condition clears, its copy kept.
	useCredential(t, s, lister, listerUser)
	waitAbsent(t, env.Provider, copyOf(nsG2, "api-key"))
	waitAbsent(t, env.Provider, copyOf(nsG2, "frozen"))
	waitAbsent(t, env.Consumer, up)
	enginetest.WaitCondition(t, env.Consumer, down, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
	waitSecret(t, env.Consumer, nsG, "db-credentials", data("v1"))
}

// TestSystemNamespacesAreNeverCopied: sources in kube-system, kube-public,
// kube-node-lease and the kubeconfig Secret namespaces are skipped and
// reported, on both sides (issue 14, item 12b).
func TestSystemNamespacesAreNeverCopied(t *testing.T) {
	// Not in parallel: its ClusterBinding covers none.example.org in
	// every namespace, which the other tests' Bindings name; it is gone
	// before they start.
	shared.Get(t)
	ctx := context.Background()
	nsH, leakName, leakValue := unique("rel-h"), unique("leak"), unique("yes")
	leak := map[string]string{"leak": leakValue}
	denied := []string{"kube-system", "kube-public", "kube-node-lease", enginetest.SecretNamespace}
	for _, namespace := range append([]string{nsH}, denied...) {
		mustCreate(t, env.Provider, secret(namespace, leakName, leak, "provider secret"))
	}
	for _, namespace := range []string{nsH, "kube-system", enginetest.SecretNamespace} {
		mustCreate(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: leakName, Labels: leak}, Data: map[string]string{"k": "v"}})
	}
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("related-system")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
		APIs:          []kbindv1alpha1.APIReference{{Name: "none.example.org"}},
		RelatedResources: []kbindv1alpha1.RelatedResource{
			byLabel(kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.FromProvider, "leak", leakValue),
			byLabel(kbindv1alpha1.RelatedResourceConfigMaps, kbindv1alpha1.FromConsumer, "leak", leakValue),
		},
	}}
	mustCreate(t, env.Consumer, cb)
	t.Cleanup(func() {
		if err := env.Consumer.Delete(ctx, cb); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
		waitAbsent(t, env.Consumer, cb)
	})
	waitSecret(t, env.Consumer, nsH, leakName, data("provider secret"))
	enginetest.Eventually(t, "the consumer ConfigMap on the provider", func() error {
		return env.Provider.Get(ctx, client.ObjectKey{Namespace: nsH, Name: leakName}, &corev1.ConfigMap{})
	})
	waitRelatedStatus(t, cb, kbindv1alpha1.RelatedStatus{Copies: 2, Skipped: 6})
	// One Event per skipped source, each naming its object (not folded
	// into one series).
	for _, what := range []string{"Secret kube-system/" + leakName, "Secret kube-public/" + leakName, "Secret kube-node-lease/" + leakName,
		"Secret kbind/" + leakName, "ConfigMap kube-system/" + leakName, "ConfigMap kbind/" + leakName} {
		waitEvent(t, cb, "RelatedSkipped", what)
	}
	for _, namespace := range denied {
		absent(t, env.Consumer, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: leakName}}, "copied into "+namespace)
		absent(t, env.Provider, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: leakName}}, "copied into "+namespace)
	}
}

// TestFromProviderCopiesOnlyWhatIsMeantForThisConsumer: kbind's own copies
// and objects labelled for another consumer are never pulled down (issue
// 14, item 12c).
func TestFromProviderCopiesOnlyWhatIsMeantForThisConsumer(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsI := unique("rel-i")
	conn := &kbindv1alpha1.Connection{}
	if err := env.Consumer.Get(ctx, client.ObjectKey{Name: "provider"}, conn); err != nil || conn.Status.LocalClusterUID == "" {
		t.Fatalf("the consumer's identity: %v %q", err, conn.Status.LocalClusterUID)
	}
	ours := conn.Status.LocalClusterUID
	withLabels := func(name string, extra map[string]string, annotations map[string]string) *corev1.Secret {
		l := map[string]string{"app": "shared"}
		for k, v := range extra {
			l[k] = v
		}
		s := secret(nsI, name, l, name)
		s.Annotations = annotations
		return s
	}
	for _, s := range []*corev1.Secret{
		withLabels("plain", nil, nil),
		withLabels("for-us", map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: ours}, nil),
		withLabels("for-another", map[string]string{kbindv1alpha1.ConsumerClusterUIDLabel: "another-consumer"}, nil),
		withLabels("copy-of-another", map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: "another-consumer"},
			map[string]string{kbindv1alpha1.RelatedBindingAnnotation: "another-binding/0123456789", kbindv1alpha1.ConsumerClusterUIDAnnotation: "another-consumer"}),
		withLabels("managed-for-us", map[string]string{kbindv1alpha1.ManagedLabel: "true", kbindv1alpha1.ConsumerClusterUIDLabel: ours}, nil),
	} {
		mustCreate(t, env.Provider, s)
	}
	b := binding(t, nsI, "related", byLabel(kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.FromProvider, "app", "shared"))
	waitSecret(t, env.Consumer, nsI, "plain", data("plain"))
	waitSecret(t, env.Consumer, nsI, "for-us", data("for-us"))
	waitRelatedStatus(t, b, kbindv1alpha1.RelatedStatus{Copies: 2})
	for _, name := range []string{"for-another", "copy-of-another", "managed-for-us"} {
		absent(t, env.Consumer, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsI, Name: name}}, "not meant for this consumer")
	}
}

// TestCleanupWaitsForTheProvider: with no provider session, a binding
// whose entries are removed, or that is deleted, keeps its provider
// copies and waits, saying so; once the session is back the copies go,
// and then the deleted binding (issue 14, item 7).
func TestCleanupWaitsForTheProvider(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsJ, nsK, fragile := unique("rel-j"), unique("rel-k"), unique("fragile")
	s, conn := connect(t, fragile, env.Pair.Provider.Kubeconfig)
	mustCreate(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsJ, Name: "cfg"}, Data: map[string]string{"k": "j"}})
	mustCreate(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsK, Name: "cfg"}, Data: map[string]string{"k": "k"}})
	deleting := bindingOn(t, fragile, nsJ, "deleting", byName(kbindv1alpha1.RelatedResourceConfigMaps, kbindv1alpha1.FromConsumer, "cfg"))
	emptied := bindingOn(t, fragile, nsK, "emptied", byName(kbindv1alpha1.RelatedResourceConfigMaps, kbindv1alpha1.FromConsumer, "cfg"))
	jCopy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsJ, Name: "cfg"}}
	kCopy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsK, Name: "cfg"}}
	for _, c := range []*corev1.ConfigMap{jCopy, kCopy} {
		enginetest.Eventually(t, "the copy on the provider", func() error { return env.Provider.Get(ctx, client.ObjectKeyFromObject(c), c) })
	}
	waitRelatedStatus(t, emptied, kbindv1alpha1.RelatedStatus{Copies: 1})

	// The provider session goes away.
	setKubeconfig(t, s, []byte("not a kubeconfig"))
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound)

	// Entries removed: the binding waits and remembers its copies.
	enginetest.Eventually(t, "removing the entries", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(emptied), emptied); err != nil {
			return err
		}
		emptied.Spec.RelatedResources = nil
		return env.Consumer.Update(ctx, emptied)
	})
	enginetest.WaitCondition(t, env.Consumer, emptied, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"waiting for the provider to delete related copies")
	if emptied.Status.RelatedResources == nil {
		t.Error("the binding forgot it has related copies while they still exist")
	}
	stays(t, env.Provider, kCopy, "the provider could not be reached yet")

	// Binding deleted: it waits, saying so, and the copy stays.
	if err := env.Consumer.Delete(ctx, deleting); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, env.Consumer, deleting, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"waiting for the provider to delete related copies")
	stays(t, env.Provider, jCopy, "the provider could not be reached yet")

	// The session is back: both copies go, then the deleted binding.
	setKubeconfig(t, s, env.Pair.Provider.Kubeconfig)
	waitAbsent(t, env.Provider, kCopy)
	waitAbsent(t, env.Provider, jCopy)
	waitAbsent(t, env.Consumer, deleting)
	enginetest.Eventually(t, "status.relatedResources cleared", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(emptied), emptied); err != nil {
			return err
		}
		if emptied.Status.RelatedResources != nil {
			return fmt.Errorf("status.relatedResources %+v", emptied.Status.RelatedResources)
		}
		return nil
	})
}

// TestConnectionGoneReleasesWithEvent: when the Connection itself is gone,
// a deleted binding still deletes its consumer-side copies, releases, and
// names the provider copies it leaves for the backend reaper.
func TestConnectionGoneReleasesWithEvent(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsL, doomed := unique("rel-l"), unique("doomed")
	_, conn := connect(t, doomed, env.Pair.Provider.Kubeconfig)
	mustCreate(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsL, Name: "up"}, Data: map[string]string{"k": "up"}})
	mustCreate(t, env.Provider, secret(nsL, "down", map[string]string{"app": "down"}, "down"))
	b := bindingOn(t, doomed, nsL, "orphaned",
		byName(kbindv1alpha1.RelatedResourceConfigMaps, kbindv1alpha1.FromConsumer, "up"),
		byLabel(kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.FromProvider, "app", "down"))
	up := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsL, Name: "up"}}
	enginetest.Eventually(t, "the copy on the provider", func() error { return env.Provider.Get(ctx, client.ObjectKeyFromObject(up), up) })
	waitSecret(t, env.Consumer, nsL, "down", data("down"))

	// The Connection goes for good (its finalizer removed by force).
	if err := env.Consumer.Delete(ctx, conn); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "the Connection gone", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(conn), conn); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		return env.Consumer.Patch(ctx, conn, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})

	if err := env.Consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitAbsent(t, env.Consumer, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsL, Name: "down"}})
	waitAbsent(t, env.Consumer, b)
	waitEvent(t, b, "RelatedCopiesLeft", nsL+"/up", "backend reaper")
	stays(t, env.Provider, up, "nothing can delete it without the Connection")
}

// A pass that copies some sources and fails on another (the provider
// answers 500) still records that the binding has copies: removing every
// entry afterwards deletes the copy it made instead of leaking it.
func TestAPartlyFailedPassIsRemembered(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsM, flaky := unique("rel-m"), unique("flaky")
	proxy := enginetest.NewProxy(t, env.Pair.Provider.Config)
	proxy.SetFault(func(r *http.Request) enginetest.Fault {
		if r.Method == http.MethodPatch && r.URL.Path == "/api/v1/namespaces/"+nsM+"/configmaps/bad" {
			return enginetest.Fault{Status: http.StatusInternalServerError}
		}
		return enginetest.Fault{}
	})
	connect(t, flaky, proxy.Kubeconfig(t))
	for _, name := range []string{"good", "bad"} {
		mustCreate(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsM, Name: name}, Data: map[string]string{"k": name}})
	}
	b := bindingOn(t, flaky, nsM, "partly", byName(kbindv1alpha1.RelatedResourceConfigMaps, kbindv1alpha1.FromConsumer, "good", "bad"))
	good := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsM, Name: "good"}}
	enginetest.Eventually(t, "the copy that could be made", func() error { return env.Provider.Get(ctx, client.ObjectKeyFromObject(good), good) })
	enginetest.Eventually(t, "the binding remembers it has copies", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		if b.Status.RelatedResources == nil {
			return fmt.Errorf("status.relatedResources not set")
		}
		return nil
	})

	enginetest.Eventually(t, "removing the entries", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		b.Spec.RelatedResources = nil
		return env.Consumer.Update(ctx, b)
	})
	waitAbsent(t, env.Provider, good)
}
