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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// referenceAPI creates, on the shared provider, an exported namespaced
// API of kind (plural: kind in lower case, "s" added) in a group of its
// own — one per test run, so that its consumer CRD is supplied by this
// test's Connection alone (a consumer CRD is supplied by one Connection),
// under t.Parallel and -count=N — and returns the API's name
// (<plural>.<group>) and apiVersion.
func referenceAPI(t *testing.T, kind string) (api, apiVersion string) {
	t.Helper()
	group := unique("ref") + ".example.org"
	plural := strings.ToLower(kind) + "s"
	crd := enginetest.CRD(plural, strings.ToLower(kind), kind, group, apiextensionsv1.NamespaceScoped, true)
	if err := env.Provider.Create(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, "provider CRD "+crd.Name+" established", func() error {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Provider.Get(context.Background(), client.ObjectKeyFromObject(crd), got); err != nil {
			return err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not established")
	})
	return crd.Name, group + "/v1alpha1"
}

func byReference(resource kbindv1alpha1.RelatedResourceKind, direction kbindv1alpha1.RelatedResourceDirection, api, path string) kbindv1alpha1.RelatedResource {
	return kbindv1alpha1.RelatedResource{Resource: resource, Direction: direction,
		Reference: &kbindv1alpha1.RelatedResourceReference{API: api, FieldPath: path}}
}

// connectWith creates a Connection named name to the provider with the
// given kubeconfig and extra spec, and waits until it is Ready.
func connectWith(t *testing.T, name string, kubeconfig []byte, isolation *kbindv1alpha1.Isolation) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: name}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
	mustCreate(t, env.Consumer, s)
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: name},
			NamespacedBindings: enginetest.AdmitAllNamespaces()}}
	if isolation != nil {
		conn.Spec.Isolation = *isolation
	}
	mustCreate(t, env.Consumer, conn)
	enginetest.WaitCondition(t, env.Consumer, conn, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	return s
}

// apiBinding creates a Binding of one API with the related entries and
// waits until its syncer runs.
func apiBinding(t *testing.T, connection, namespace, api string, entries ...kbindv1alpha1.RelatedResource) *kbindv1alpha1.Binding {
	t.Helper()
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "refs"}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef:    kbindv1alpha1.ConnectionReference{Name: connection},
		APIs:             []kbindv1alpha1.APIReference{{Name: api}},
		RelatedResources: entries,
	}}
	mustCreate(t, env.Consumer, b)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	return b
}

func instance(apiVersion, kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func ref(field, name string) map[string]any {
	return map[string]any{field: map[string]any{"name": name}}
}

// setRef points an instance's reference field at name.
func setRef(t *testing.T, obj *unstructured.Unstructured, field, name string) {
	t.Helper()
	enginetest.Eventually(t, "setting "+field+" of "+obj.GetName()+" to "+name, func() error {
		if err := env.Consumer.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		obj.Object["spec"] = ref(field, name)
		return env.Consumer.Update(context.Background(), obj)
	})
}

func secretObj(namespace, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

// ownedBy checks a reference copy: our data, and the owner label.
func ownedBy(owner client.Object, want string) func(*corev1.Secret) error {
	return func(s *corev1.Secret) error {
		if string(s.Data["key"]) != want || s.Labels[kbindv1alpha1.RelatedOwnerLabel] != string(owner.GetUID()) ||
			s.Annotations[kbindv1alpha1.RelatedBindingAnnotation] == "" {
			return fmt.Errorf("copy %q labels %v annotations %v", s.Data["key"], s.Labels, s.Annotations)
		}
		return nil
	}
}

// TestReferenceFromProviderFollowsItsOwner: the Secret a Widget names in
// .spec.writeConnectionSecretToRef.name (written on the provider, as a
// provider's controller would) is copied next to the Widget, follows the
// field (the old copy goes, only if kbind made it), goes with the Widget,
// and stays when the Widget is deleted with the Orphan policy.
func TestReferenceFromProviderFollowsItsOwner(t *testing.T) {
	setup(t)
	ctx := context.Background()
	const field = "writeConnectionSecretToRef"
	nsName, refs := unique("ref-a"), unique("refs")
	api, apiVersion := referenceAPI(t, "Widget")
	connectWith(t, refs, env.Pair.Provider.Kubeconfig, nil)
	ns(t, env.Provider, nsName)
	for name, v := range map[string]string{"w1-conn": "v1", "w1-conn-v2": "v2", "hand-made": "provider", "w2-conn": "w2"} {
		mustCreate(t, env.Provider, secret(nsName, name, nil, v))
	}
	mustCreate(t, env.Consumer, secret(nsName, "hand-made", nil, "consumer's own"))
	b := apiBinding(t, refs, nsName, api,
		byReference(kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.FromProvider, api, ".spec."+field+".name"))

	w1 := instance(apiVersion, "Widget", nsName, "w1", ref(field, "w1-conn"))
	mustCreate(t, env.Consumer, w1)
	waitSecret(t, env.Consumer, nsName, "w1-conn", ownedBy(w1, "v1"))
	absent(t, env.Consumer, secretObj(nsName, "w1-conn-v2"), "no Widget names it")

	// The field changes: the new object is copied, the old copy goes.
	setRef(t, w1, field, "w1-conn-v2")
	waitSecret(t, env.Consumer, nsName, "w1-conn-v2", ownedBy(w1, "v2"))
	waitAbsent(t, env.Consumer, secretObj(nsName, "w1-conn"))

	// It names an object that exists on the consumer and is not kbind's:
	// reported, left untouched; the copy of the previous name goes.
	setRef(t, w1, field, "hand-made")
	waitAbsent(t, env.Consumer, secretObj(nsName, "w1-conn-v2"))
	waitEvent(t, b, "RelatedConflict", "secret "+nsName+"/hand-made exists and is not this binding's copy")
	waitRelatedStatus(t, b, kbindv1alpha1.RelatedStatus{Conflicts: 1})
	// Away from it again: the object kbind did not make stays.
	setRef(t, w1, field, "w1-conn")
	waitSecret(t, env.Consumer, nsName, "w1-conn", ownedBy(w1, "v1"))
	waitSecret(t, env.Consumer, nsName, "hand-made", data("consumer's own"))

	// The owner deleted: its copy goes.
	if err := env.Consumer.Delete(ctx, w1); err != nil {
		t.Fatal(err)
	}
	waitAbsent(t, env.Consumer, secretObj(nsName, "w1-conn"))

	// The owner deleted with the Orphan policy: the copy stays, released.
	w2 := instance(apiVersion, "Widget", nsName, "w2", ref(field, "w2-conn"))
	mustCreate(t, env.Consumer, w2)
	waitSecret(t, env.Consumer, nsName, "w2-conn", ownedBy(w2, "w2"))
	waitRelatedStatus(t, b, kbindv1alpha1.RelatedStatus{Copies: 1})
	enginetest.Eventually(t, "annotating w2 Orphan", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(w2), w2); err != nil {
			return err
		}
		w2.SetAnnotations(map[string]string{kbindv1alpha1.DeletionPolicyAnnotation: kbindv1alpha1.DeletionPolicyOrphan})
		return env.Consumer.Update(ctx, w2)
	})
	if err := env.Consumer.Delete(ctx, w2); err != nil {
		t.Fatal(err)
	}
	waitAbsent(t, env.Consumer, w2)
	// A pass after w2 went has counted no copies; the orphaned one is
	// still there, no longer the binding's.
	waitRelatedStatus(t, b, kbindv1alpha1.RelatedStatus{})
	waitSecret(t, env.Consumer, nsName, "w2-conn", func(s *corev1.Secret) error {
		if string(s.Data["key"]) != "w2" || s.Annotations[kbindv1alpha1.RelatedBindingAnnotation] != "" || s.Labels[kbindv1alpha1.RelatedOwnerLabel] != "" {
			return fmt.Errorf("orphaned copy: labels %v annotations %v", s.Labels, s.Annotations)
		}
		return nil
	})
}

// TestReferenceFromConsumerUnderNamespaceIsolation: a ConfigMap a Gadget
// names in .spec.configRef.name goes up next to the Gadget's provider
// copy, under the Namespace isolation mapping, and the provider copy's
// field names it there; it goes with the Gadget.
func TestReferenceFromConsumerUnderNamespaceIsolation(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsName, tenant, refsIso := unique("ref-b"), unique("tenant-r"), unique("refs-iso")
	api, apiVersion := referenceAPI(t, "Gadget")
	ns(t, env.Provider, tenant)
	connectWith(t, refsIso, env.Pair.Provider.Kubeconfig, &kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: tenant})
	mustCreate(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: "settings"}, Data: map[string]string{"mode": "fast"}})
	apiBinding(t, refsIso, nsName, api,
		byReference(kbindv1alpha1.RelatedResourceConfigMaps, kbindv1alpha1.FromConsumer, api, ".spec.configRef.name"))
	g1 := instance(apiVersion, "Gadget", nsName, "g1", ref("configRef", "settings"))
	mustCreate(t, env.Consumer, g1)

	copyKey := client.ObjectKey{Namespace: tenant, Name: nsName + ".settings"}
	enginetest.Eventually(t, "the ConfigMap at "+copyKey.String(), func() error {
		cm := &corev1.ConfigMap{}
		if err := env.Provider.Get(ctx, copyKey, cm); err != nil {
			return err
		}
		if cm.Data["mode"] != "fast" || cm.Labels[kbindv1alpha1.RelatedOwnerLabel] != string(g1.GetUID()) ||
			cm.Annotations[kbindv1alpha1.ConsumerNamespaceAnnotation] != nsName || cm.Annotations[kbindv1alpha1.ConsumerNameAnnotation] != "settings" {
			return fmt.Errorf("copy %v labels %v annotations %v", cm.Data, cm.Labels, cm.Annotations)
		}
		return nil
	})
	absent(t, env.Provider, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "settings"}}, "the unmapped name would collide across consumer namespaces")
	enginetest.Eventually(t, "the provider copy names the mapped ConfigMap", func() error {
		p := instance(apiVersion, "Gadget", tenant, nsName+".g1", nil)
		if err := env.Provider.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if got, _, _ := unstructured.NestedString(p.Object, "spec", "configRef", "name"); got != copyKey.Name {
			return fmt.Errorf("provider copy spec.configRef.name %q", got)
		}
		return nil
	})
	if got, _, _ := unstructured.NestedString(g1.Object, "spec", "configRef", "name"); got != "settings" {
		t.Errorf("the consumer object was changed: %q", got)
	}

	if err := env.Consumer.Delete(ctx, g1); err != nil {
		t.Fatal(err)
	}
	waitAbsent(t, env.Provider, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: copyKey.Namespace, Name: copyKey.Name}})
}

// TestReferenceFailedReadNeverDeletes: while the credential may not list
// the provider's Secrets, a Thing whose field moves to another Secret
// keeps the copy it has (the new source cannot be read), and the binding
// says why; with the permission back the copy follows the field.
func TestReferenceFailedReadNeverDeletes(t *testing.T) {
	setup(t)
	nsName, refsLimited := unique("ref-c"), unique("refs-limited")
	api, apiVersion := referenceAPI(t, "Thing")
	group, _, _ := strings.Cut(apiVersion, "/")
	ns(t, env.Provider, nsName) // the credentials may not create namespaces
	base := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{group}, Resources: []string{"things", "things/status"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
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
	listerUser, nolistUser := unique("ref-lister"), unique("ref-nolist")
	lister := kubeconfigFor(listerUser, "*")
	nolist := kubeconfigFor(nolistUser, "get", "create", "update", "patch", "delete")
	mustCreate(t, env.Provider, secret(nsName, "t1-conn", nil, "one"))
	mustCreate(t, env.Provider, secret(nsName, "t1-conn-v2", nil, "two"))
	s := connectWith(t, refsLimited, lister, nil)
	b := apiBinding(t, refsLimited, nsName, api,
		byReference(kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.FromProvider, api, ".spec.secretRef.name"))
	t1 := instance(apiVersion, "Thing", nsName, "t1", ref("secretRef", "t1-conn"))
	mustCreate(t, env.Consumer, t1)
	waitSecret(t, env.Consumer, nsName, "t1-conn", ownedBy(t1, "one"))

	useCredential(t, s, nolist, nolistUser)
	setRef(t, t1, "secretRef", "t1-conn-v2")
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"list secrets (provider side)")
	stays(t, env.Consumer, secretObj(nsName, "t1-conn"), "the entry's sources could not be read")
	absent(t, env.Consumer, secretObj(nsName, "t1-conn-v2"), "it could not be read")

	useCredential(t, s, lister, listerUser)
	waitSecret(t, env.Consumer, nsName, "t1-conn-v2", ownedBy(t1, "two"))
	waitAbsent(t, env.Consumer, secretObj(nsName, "t1-conn"))
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
}

// TestReferenceOfAProjectedAPI: reference entries name a projected API by
// the provider's name (as spec.apis does) and read the field from the
// objects of its consumer API: a Secret an AcmeThing names comes down from
// the provider, a ConfigMap it names goes up, and both go with it. (A
// ClusterBinding: only ClusterBindings project.)
func TestReferenceOfAProjectedAPI(t *testing.T) {
	setup(t)
	ctx := context.Background()
	nsName, refsProj := unique("ref-p"), unique("refs-proj")
	api, _ := referenceAPI(t, "Thing")
	acme := unique("acme") + ".example.com"
	connectWith(t, refsProj, env.Pair.Provider.Kubeconfig, nil)
	ns(t, env.Provider, nsName)
	mustCreate(t, env.Provider, secret(nsName, "t1-conn", nil, "from the provider"))
	mustCreate(t, env.Consumer, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: "t1-settings"}, Data: map[string]string{"mode": "fast"}})
	b := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("refs-projected")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: refsProj},
		APIs: []kbindv1alpha1.APIReference{{Name: api,
			Projection: &kbindv1alpha1.Projection{Group: acme, Kind: "AcmeThing"}}},
		RelatedResources: []kbindv1alpha1.RelatedResource{
			byReference(kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.FromProvider, api, ".spec.secretRef.name"),
			byReference(kbindv1alpha1.RelatedResourceConfigMaps, kbindv1alpha1.FromConsumer, api, ".spec.configRef.name"),
		},
	}}
	mustCreate(t, env.Consumer, b)
	enginetest.WaitCondition(t, env.Consumer, b, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	t1 := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"secretRef": map[string]any{"name": "t1-conn"}, "configRef": map[string]any{"name": "t1-settings"}}}}
	t1.SetAPIVersion(acme + "/v1alpha1")
	t1.SetKind("AcmeThing")
	t1.SetNamespace(nsName)
	t1.SetName("t1")
	mustCreate(t, env.Consumer, t1)
	waitSecret(t, env.Consumer, nsName, "t1-conn", ownedBy(t1, "from the provider"))
	enginetest.Eventually(t, "the ConfigMap t1-settings on the provider", func() error {
		cm := &corev1.ConfigMap{}
		if err := env.Provider.Get(ctx, client.ObjectKey{Namespace: nsName, Name: "t1-settings"}, cm); err != nil {
			return err
		}
		if cm.Data["mode"] != "fast" || cm.Labels[kbindv1alpha1.RelatedOwnerLabel] != string(t1.GetUID()) {
			return fmt.Errorf("copy %v labels %v", cm.Data, cm.Labels)
		}
		return nil
	})

	if err := env.Consumer.Delete(ctx, t1); err != nil {
		t.Fatal(err)
	}
	waitAbsent(t, env.Consumer, secretObj(nsName, "t1-conn"))
	waitAbsent(t, env.Provider, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: "t1-settings"}})
}

// TestReferenceFromConsumerNeverForImported: a ClusterBinding that imports
// the provider's Grabs and copies up, by reference, the Secret each Grab
// names. A provider-side tenant creates an unmarked Grab naming a Secret
// of team-b that no one in team-b ever referenced: it is imported into
// team-b, but the Secret is never copied up (issue #51: imported objects
// own no FromConsumer related objects); the binding says so and counts it
// skipped. A Grab the consumer made gets its Secret copied (the positive
// control), and so does the imported one once it is adopted.
func TestReferenceFromConsumerNeverForImported(t *testing.T) {
	setup(t)
	ctx := context.Background()
	const field = "passwordSecretRef"
	nsName, tenant, refsImport := unique("team-b"), unique("tenant-imp"), unique("refs-import")
	api, apiVersion := referenceAPI(t, "Grab")
	ns(t, env.Provider, tenant)
	ns(t, env.Consumer, nsName)
	for _, name := range []string{"payroll-db", "mine-db"} {
		mustCreate(t, env.Consumer, secret(nsName, name, nil, name))
	}
	connectWith(t, refsImport, env.Pair.Provider.Kubeconfig, &kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationNamespace, Namespace: tenant})
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: unique("grabs")}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: refsImport},
		APIs:          []kbindv1alpha1.APIReference{{Name: api, ProviderObjects: kbindv1alpha1.ProviderObjectsImport}},
		RelatedResources: []kbindv1alpha1.RelatedResource{
			byReference(kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.FromConsumer, api, ".spec."+field+".name")},
	}}
	mustCreate(t, env.Consumer, cb)
	enginetest.WaitCondition(t, env.Consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	// The tenant's Grab, written on the provider without markers, as the
	// grant's credentials may.
	mustCreate(t, env.Provider, instance(apiVersion, "Grab", tenant, nsName+".grab", ref(field, "payroll-db")))
	imported := instance(apiVersion, "Grab", nsName, "grab", nil)
	enginetest.Eventually(t, "the tenant's Grab imported into "+nsName, func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(imported), imported); err != nil {
			return err
		}
		if imported.GetAnnotations()[kbindv1alpha1.OwnerAnnotation] != kbindv1alpha1.OwnerProvider {
			return fmt.Errorf("annotations %v", imported.GetAnnotations())
		}
		return nil
	})
	// The consumer's own Grab: its Secret goes up (the positive control,
	// and proof that the entry has read its owners since the import).
	mustCreate(t, env.Consumer, instance(apiVersion, "Grab", nsName, "mine", ref(field, "mine-db")))
	enginetest.Eventually(t, "the Secret the consumer's own Grab names, copied up", func() error {
		return env.Provider.Get(ctx, client.ObjectKey{Namespace: tenant, Name: nsName + ".mine-db"}, &corev1.Secret{})
	})
	absent(t, env.Provider, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: nsName + ".payroll-db"}},
		"a Secret named only by an imported object must never reach the provider")
	enginetest.Eventually(t, "the ClusterBinding says why the imported Grab's Secret is not copied", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cb.Status.Conditions, string(kbindv1alpha1.ConditionPermissionDenied))
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "1 imported "+api+" object(s)") ||
			!strings.Contains(c.Message, nsName+"/grab") {
			return fmt.Errorf("PermissionDenied %+v", c)
		}
		if rs := cb.Status.RelatedResources; rs == nil || rs.Skipped < 1 {
			return fmt.Errorf("related status %+v", rs)
		}
		return nil
	})
	waitEvent(t, cb, "RelatedSkipped", "imported "+api, nsName+"/grab")

	// Adopted, the Grab is the consumer's: what it names is copied up.
	enginetest.Eventually(t, "asking to adopt the imported Grab", func() error {
		if err := env.Consumer.Get(ctx, client.ObjectKeyFromObject(imported), imported); err != nil {
			return err
		}
		ann := imported.GetAnnotations()
		ann[kbindv1alpha1.HandOverAnnotation] = kbindv1alpha1.HandOverConsumer
		imported.SetAnnotations(ann)
		return env.Consumer.Update(ctx, imported)
	})
	enginetest.Eventually(t, "the adopted Grab's Secret copied up", func() error {
		return env.Provider.Get(ctx, client.ObjectKey{Namespace: tenant, Name: nsName + ".payroll-db"}, &corev1.Secret{})
	})
}
