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

package connection_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/connection"
	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// Regression tests for issue #14 (data loss, stuck deletions, security).

// A transient error while reading /openapi/v3 never shrinks the exports:
// the autoBind ClusterBinding (and with it every copy and the consumer CRD)
// stays; the error and a refusal are reported.
//
// Not parallel: it binds the shared provider's widgets.example.org (see
// TestAutoBindOffLeavesBinding) and counts the shared provider's exports.
func TestOpenAPIReadErrorKeepsExports(t *testing.T) {
	useShared(t)
	ctx := context.Background()
	name := unique("partial")
	proxy := enginetest.NewProxy(t, pair.Provider.Config)
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": proxy.Kubeconfig(t)})
	createConnection(t, name, secretNS, name, func(c *kbindv1alpha1.Connection) {
		c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceOpenAPI
		c.Spec.AutoBind = true
	})
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "2 API(s) exported")
	waitAutoBinding := func(what string) {
		t.Helper()
		cb := &kbindv1alpha1.ClusterBinding{}
		if err := consumer.Get(ctx, client.ObjectKey{Name: name}, cb); err != nil {
			t.Fatalf("%s: the autoBind ClusterBinding: %v", what, err)
		}
		if len(cb.Spec.APIs) != 2 || !cb.DeletionTimestamp.IsZero() {
			t.Fatalf("%s: autoBind ClusterBinding %+v (deleting: %v)", what, cb.Spec.APIs, !cb.DeletionTimestamp.IsZero())
		}
	}
	eventually(t, "autoBind ClusterBinding", func() error {
		return consumer.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.ClusterBinding{})
	})

	const groupDoc = "/openapi/v3/apis/example.org/"
	for _, tc := range []struct {
		name   string
		status int
		check  func()
	}{
		{"503", http.StatusServiceUnavailable, func() {
			waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected,
				"1 API group(s) could not be read, their last known exports are kept", "get /openapi/v3/apis/example.org/v1alpha1")
		}},
		{"403", http.StatusForbidden, func() {
			waitCondition(t, name, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
				"get /openapi/v3/apis/example.org/v1alpha1")
		}},
	} {
		proxy.SetFault(func(r *http.Request) enginetest.Fault {
			if strings.HasPrefix(r.URL.Path, groupDoc) {
				return enginetest.Fault{Status: tc.status}
			}
			return enginetest.Fault{}
		})
		tc.check()
		if n := len(getConnection(t, name).Status.ExportedAPIs); n != 2 {
			t.Fatalf("%s: %d exports left, want the last known 2", tc.name, n)
		}
		waitAutoBinding(tc.name)
	}

	proxy.SetFault(nil)
	waitCondition(t, name, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
	conn := waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "2 API(s) exported")
	if strings.Contains(meta(conn, kbindv1alpha1.ConditionReady), "could not be read") {
		t.Errorf("healed, but Ready still says: %s", meta(conn, kbindv1alpha1.ConditionReady))
	}
	waitAutoBinding("healed")
}

func meta(conn *kbindv1alpha1.Connection, typ kbindv1alpha1.ConditionType) string {
	for _, c := range conn.Status.Conditions {
		if c.Type == string(typ) {
			return c.Message
		}
	}
	return ""
}

// One provider that accepts connections and never answers must not stall
// the other Connections; it reports the timeout itself.
func TestSilentProviderDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	useShared(t)
	silentName, livelyName := unique("silent"), unique("lively")
	silent := enginetest.NewProxy(t, nil)
	createSecret(t, secretNS, silentName, map[string][]byte{"kubeconfig": silent.Kubeconfig(t)})
	createConnection(t, silentName, secretNS, silentName)
	silent.WaitRequests(t, 1) // a reconcile of "silent" is now waiting for an answer

	createSecret(t, secretNS, livelyName, map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, livelyName, secretNS, livelyName)
	waitCondition(t, livelyName, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	// The silent one times out (ProviderTimeout is 5s in tests) and says so.
	waitCondition(t, silentName, kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending,
		"reading the provider cluster identity failed")
}

// A Connection deleted while it still has bindings drains them even when
// the konnector restarts in between (the restarted engine must rebuild the
// session the bindings drain through).
//
// Not parallel: it restarts the shared engine, and adds an exported CRD to
// the shared provider, whose exports other tests count (it is gone before
// the test ends).
func TestDeletionSurvivesRestart(t *testing.T) {
	useShared(t)
	ctx := context.Background()
	name := unique("restarting")
	crd := enginetest.CRD("restarts", "restart", "Restart", "example.org", apiextensionsv1.NamespaceScoped, true)
	if err := provider.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = provider.Delete(ctx, crd)
		eventually(t, "the provider CRD "+crd.Name+" gone", func() error {
			err := provider.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
	})
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, name, secretNS, name)
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: name}, APIs: []kbindv1alpha1.APIReference{{Name: "restarts.example.org"}}}}
	if err := consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitCondition(t, consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	obj := widgetObject("Restart", name+"-r1")
	if err := consumer.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	copyKey := client.ObjectKeyFromObject(obj)
	eventually(t, "the provider copy", func() error { return provider.Get(ctx, copyKey, obj.DeepCopy()) })

	if err := consumer.Delete(ctx, &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDrainingBindings)
	env.StopEngine()
	if err := env.StartEngine(); err != nil {
		t.Fatal(err)
	}
	if err := consumer.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the provider copy deleted", func() error {
		err := provider.Get(ctx, copyKey, obj.DeepCopy())
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	eventually(t, "binding and Connection gone", func() error {
		for _, o := range []client.Object{&kbindv1alpha1.ClusterBinding{}, &kbindv1alpha1.Connection{}} {
			if err := consumer.Get(ctx, client.ObjectKey{Name: name}, o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T still there (%v)", o, err)
			}
		}
		return nil
	})
}

// Liveness is "the konnector serves this Connection", not "everything is
// healthy": a discovery refusal or a broken Secret edit stops sync, never
// the heartbeat (the backend would reap a live consumer's copies).
func TestHeartbeatWhileNotReady(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	name := unique("alive")
	user, err := addProviderUser("kbind-"+name, "kbind:"+name)
	if err != nil {
		t.Fatal(err)
	}
	revokeBase := grantProvider(t, name+"-base", user.Name,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}})
	defer revokeBase()
	revokeCRDs := grantProvider(t, name+"-crds", user.Name, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"list"}})
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": kubeconfigOf(t, user.Config)})
	createConnection(t, name, secretNS, name)
	conn := waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, name, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	leaseKey := client.ObjectKey{Namespace: "kbind", Name: name + "-" + conn.Status.LocalClusterUID[:10]}

	revokeCRDs()
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden, "list customresourcedefinitions")
	waitRenewed(t, provider, leaseKey, 2)

	secret := &corev1.Secret{}
	if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["kubeconfig"] = []byte("not a kubeconfig")
	if err := consumer.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, kbindv1alpha1.ConditionSecretValid, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound)
	waitRenewed(t, provider, leaseKey, 2)
}

// A new kubeconfig pointing at another cluster is never used before its
// identity is verified: while the check is in flight (slowed down here),
// the bindings keep the verified session, and nothing is written to the
// other cluster.
//
// The verified provider is one of its own, its API in a group of its own:
// the shared provider's exports are counted by other tests, and the
// consumer CRD it binds is the test's alone. The other cluster is the
// package's bystander.
func TestSessionPublishedOnlyAfterIdentity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := unique("verify")
	group := name + ".example.org"
	crd := enginetest.CRD("verifies", "verify", "Verify", group, apiextensionsv1.NamespaceScoped, true)
	verified, vp := ownProvider(t, crd)
	other, otherClient := useBystander(t, crd)
	slow := enginetest.NewProxy(t, other.Config)
	slow.SetFault(func(r *http.Request) enginetest.Fault {
		if r.URL.Path == "/api/v1/namespaces/kube-system" {
			return enginetest.Fault{Delay: 3 * time.Second}
		}
		return enginetest.Fault{}
	})

	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": verified.Kubeconfig})
	createConnection(t, name, secretNS, name)
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-creds"}, Data: map[string][]byte{"k": []byte("v")}}
	if err := consumer.Create(ctx, creds); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = consumer.Delete(ctx, creds) })
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: name}, APIs: []kbindv1alpha1.APIReference{{Name: "verifies." + group}},
		RelatedResources: []kbindv1alpha1.RelatedResource{{Resource: kbindv1alpha1.RelatedResourceSecrets, Direction: kbindv1alpha1.FromConsumer,
			Selector: kbindv1alpha1.RelatedResourceSelector{Names: []string{name + "-creds"}}}}}}
	if err := consumer.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteBinding(t, cb) })
	enginetest.WaitCondition(t, consumer, cb, kbindv1alpha1.ConditionSynced, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	eventually(t, "the related copy", func() error { return vp.Get(ctx, client.ObjectKeyFromObject(creds), &corev1.Secret{}) })
	obj := widgetObjectIn(group, "Verify", "v1")
	if err := consumer.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the provider copy", func() error { return vp.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy()) })

	secret := &corev1.Secret{}
	if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["kubeconfig"] = slow.Kubeconfig(t)
	if err := consumer.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonClusterIdentityChanged)
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(group + "/v1alpha1")
	list.SetKind("VerifyList")
	if err := otherClient.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("%d object(s) written to the unverified cluster", len(list.Items))
	}
	if err := otherClient.Get(ctx, client.ObjectKeyFromObject(creds), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the consumer Secret was copied to the unverified cluster (%v)", err)
	}

	// Restoring the verified credentials resumes sync.
	secret.Data["kubeconfig"] = verified.Kubeconfig
	if err := consumer.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
}

// widgetObject is a consumer object of an example.org/v1alpha1 kind in
// the default namespace.
func widgetObject(kind, name string) *unstructured.Unstructured {
	return widgetObjectIn("example.org", kind, name)
}

// widgetObjectIn is widgetObject of a kind in group.
func widgetObjectIn(group, kind, name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	obj.SetAPIVersion(group + "/v1alpha1")
	obj.SetKind(kind)
	obj.SetNamespace("default")
	obj.SetName(name)
	return obj
}

func deleteBinding(t *testing.T, b client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := consumer.Delete(ctx, b); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	eventually(t, "binding gone", func() error {
		err := consumer.Get(ctx, client.ObjectKeyFromObject(b), b)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// A Lease of the heartbeat's name held by someone else is never
// overwritten; the Heartbeat condition says so. The Lease is in a
// namespace of the test's own (its kubeconfig context's): the test creates
// it, and the shared provider's "kbind" namespace is the konnector's to
// create (TestConnectionReady checks its labels).
func TestLeaseHeldByAnotherIsLeftAlone(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	conn := unique("collide")
	leaseNS := conn + "-hb"
	name := conn + "-" + kubeSystemUID(t, consumer)[:10]
	foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone-else")}}
	if err := provider.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNS}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if err := provider.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = provider.Delete(ctx, foreign) })
	data := providerKubeconfigWith(t, func(kc *clientcmdapi.Config) { kc.Contexts[kc.CurrentContext].Namespace = leaseNS })
	createSecret(t, secretNS, conn, map[string][]byte{"kubeconfig": data})
	createConnection(t, conn, secretNS, conn)
	waitCondition(t, conn, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonOwnedByAnother, `held by "someone-else"`)
	lease := &coordinationv1.Lease{}
	if err := provider.Get(ctx, client.ObjectKeyFromObject(foreign), lease); err != nil {
		t.Fatal(err)
	}
	if *lease.Spec.HolderIdentity != "someone-else" || lease.Spec.RenewTime != nil || lease.Labels[kbindv1alpha1.ManagedLabel] != "" {
		t.Errorf("the foreign Lease was written: %+v %v", lease.Spec, lease.Labels)
	}
	// The deleting Connection leaves it alone too.
	deleteConnection(t, conn)
	if err := provider.Get(ctx, client.ObjectKeyFromObject(foreign), lease); err != nil {
		t.Errorf("the foreign Lease was deleted: %v", err)
	}
}

// Two Connections sharing a Secret and deleted at the same moment: the
// Secret's finalizer is released every time, whatever each of them saw of
// the other in its cache.
func TestSharedSecretReleasedWhenBothGoAtOnce(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	const rounds = 6
	prefix := unique("both")
	for i := 0; i < rounds; i++ {
		secret := fmt.Sprintf("%s-shared-%d", prefix, i)
		createSecret(t, secretNS, secret, map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
		for _, c := range []string{"a", "b"} {
			createConnection(t, fmt.Sprintf("%s-%s-%d", prefix, c, i), secretNS, secret)
		}
	}
	for i := 0; i < rounds; i++ {
		for _, c := range []string{"a", "b"} {
			waitCondition(t, fmt.Sprintf("%s-%s-%d", prefix, c, i), kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < rounds; i++ {
		for _, c := range []string{"a", "b"} {
			wg.Add(1)
			go func(name string) {
				defer wg.Done()
				_ = consumer.Delete(ctx, &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}})
			}(fmt.Sprintf("%s-%s-%d", prefix, c, i))
		}
	}
	wg.Wait()
	for i := 0; i < rounds; i++ {
		key := client.ObjectKey{Namespace: secretNS, Name: fmt.Sprintf("%s-shared-%d", prefix, i)}
		eventually(t, "finalizer of "+key.String()+" released", func() error {
			s := &corev1.Secret{}
			if err := consumer.Get(ctx, key, s); err != nil {
				return err
			}
			if controllerutil.ContainsFinalizer(s, kbindv1alpha1.CleanupFinalizer) {
				return fmt.Errorf("finalizers %v", s.Finalizers)
			}
			return nil
		})
	}
}

// Kubeconfigs that skip TLS verification are refused unless the
// Connection opts in, and the opt-in is visible in SecretValid.
func TestInsecureKubeconfigNeedsOptIn(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	name := unique("insecure")
	data := providerKubeconfigWith(t, func(kc *clientcmdapi.Config) {
		for _, c := range kc.Clusters {
			c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil
		}
	})
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": data})
	createConnection(t, name, secretNS, name)
	waitCondition(t, name, kbindv1alpha1.ConditionSecretValid, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound,
		"insecure-skip-tls-verify", "spec.allowInsecure lists SkipTLSVerify")
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound)

	conn := getConnection(t, name)
	conn.Spec.AllowInsecure = []kbindv1alpha1.InsecureKubeconfigFeature{kbindv1alpha1.InsecureSkipTLSVerify}
	if err := consumer.Update(ctx, conn); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, name, kbindv1alpha1.ConditionSecretValid, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected,
		"insecure features allowed by spec.allowInsecure: SkipTLSVerify")
}

// TestHungProviderReportedWithDefaults: with the default intervals
// (heartbeat 30 s, request timeout 30 s, identity recheck 10 min), a
// provider that accepts requests and never answers them is reported
// Connected=False within the heartbeat's worst case (the longest jittered
// wait, 33 s, and one renewal's timeout, 7.5 s: 40.5 s) plus the slack,
// and the Connection is Ready within a retry's worst case (MaxProbeBackoff,
// 10 s, and the read in flight at the heal timing out,
// DisconnectedProbeTimeout, 5 s: 15 s) plus the slack of the provider
// answering again.
// Before, the renewal waited without a bound for the hung request (forever
// behind a proxy that keeps the connection alive, 54-90 s for a frozen API
// server), and only then did an identity read wait out the request timeout
// too (30 s): the bounds, slack included, still tell those apart.
//
// A consumer and an engine of its own (its intervals); the provider is the
// shared one, behind a proxy of the test's own.
func TestHungProviderReportedWithDefaults(t *testing.T) {
	t.Parallel()
	interval, timeout := 30*time.Second, 30*time.Second
	// slack is what the bounds allow beyond the intervals: the reconcile
	// that reports, its requests and its status write on the consumer, and
	// the test's poll, on a machine busy with other tests (2 cores).
	const slack = 5 * time.Second
	cc, c := ownConsumer(t)
	proxy := enginetest.NewProxy(t, pair.Provider.Config)
	env.StartEngineOn(t, cc.Config, func(o *engine.Options) {
		o.DiscoveryInterval, o.RecheckInterval = 30*time.Second, 10*time.Minute
		o.HeartbeatInterval, o.ProviderTimeout = interval, timeout
	})
	name := unique("hung")
	connectOn(t, c, name, proxy.Kubeconfig(t))

	proxy.SetFault(func(*http.Request) enginetest.Fault { return enginetest.Fault{Delay: time.Hour} })
	hung := time.Now()
	condition := func(typ kbindv1alpha1.ConditionType, status metav1.ConditionStatus, fragment string) func() error {
		return func() error {
			conn := &kbindv1alpha1.Connection{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: name}, conn); err != nil {
				return err
			}
			cond := apimeta.FindStatusCondition(conn.Status.Conditions, string(typ))
			if cond == nil || cond.Status != status || !strings.Contains(cond.Message, fragment) {
				return fmt.Errorf("%s: %+v", typ, cond)
			}
			return nil
		}
	}
	enginetest.EventuallyWithin(t, 2*time.Minute, "Connected=False", condition(kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, "the provider does not answer"))
	bound := heartbeat.Jittered(interval, 1) + heartbeat.RenewTimeout(interval, timeout) + slack
	if took := time.Since(hung); took > bound {
		t.Errorf("the hung provider was reported after %s, want within %s", took, bound)
	} else {
		t.Logf("the hung provider was reported after %s (bound %s)", took.Round(100*time.Millisecond), bound)
	}

	proxy.SetFault(nil)
	healed := time.Now()
	enginetest.EventuallyWithin(t, 2*time.Minute, "Ready=True", condition(kbindv1alpha1.ConditionReady, metav1.ConditionTrue, ""))
	bound = connection.MaxProbeBackoff + connection.DisconnectedProbeTimeout + slack
	if took := time.Since(healed); took > bound {
		t.Errorf("Ready %s after the provider answered again, want within %s", took, bound)
	} else {
		t.Logf("Ready %s after the provider answered again (bound %s)", took.Round(100*time.Millisecond), bound)
	}
}
