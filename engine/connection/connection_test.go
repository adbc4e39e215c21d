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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// secretMarker is planted in kubeconfig data; it must never appear in
// conditions, Events or logs.
const secretMarker = "MARKER-d0-not-leak-7f3a"

func createSecret(t *testing.T, ns, name string, data map[string][]byte) *corev1.Secret {
	t.Helper()
	return createSecretOn(t, consumer, ns, name, data)
}

// createSecretOn creates a Secret on the consumer c, deleted when the test
// ends (after the Connections using it: cleanups run last first).
func createSecretOn(t *testing.T, c client.Client, ns, name string, data map[string][]byte) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := c.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), s.DeepCopy()); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting Secret %s/%s: %v", ns, name, err)
		}
	})
	return s
}

func createConnection(t *testing.T, name, secretNamespace, secretName string, mutate ...func(*kbindv1alpha1.Connection)) {
	t.Helper()
	createConnectionOn(t, consumer, name, secretNamespace, secretName, mutate...)
}

// createConnectionOn creates a Connection on the consumer c, deleted (and
// waited for) when the test ends.
func createConnectionOn(t *testing.T, c client.Client, name, secretNamespace, secretName string, mutate ...func(*kbindv1alpha1.Connection)) {
	t.Helper()
	conn := &kbindv1alpha1.Connection{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kbindv1alpha1.ConnectionSpec{
			KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: secretNamespace, Name: secretName},
		},
	}
	for _, m := range mutate {
		m(conn)
	}
	if err := c.Create(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteConnectionOn(t, c, name) })
}

// deleteConnection deletes a Connection and waits until it is gone.
func deleteConnection(t *testing.T, name string) {
	t.Helper()
	deleteConnectionOn(t, consumer, name)
}

// deleteConnectionOn deletes a Connection on the consumer c and waits until
// it is gone.
func deleteConnectionOn(t *testing.T, c client.Client, name string) {
	t.Helper()
	ctx := context.Background()
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Delete(ctx, conn); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	eventually(t, "connection "+name+" gone", func() error {
		err := c.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.Connection{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

func kubeSystemUID(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "kube-system"}, ns); err != nil {
		t.Fatal(err)
	}
	return string(ns.UID)
}

func kubeconfigOf(t *testing.T, cfg *rest.Config) []byte {
	t.Helper()
	kc, err := testenv.KubeconfigFor("provider", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// Not parallel: it checks the labels the konnector puts on the Lease
// namespace it creates, the shared provider's "kbind". Tests with a
// consumer of their own create it too, labelled with their own cluster's
// UID; every sequential test runs before the first parallel one, so the
// shared consumer's konnector is the one that creates it.
func TestConnectionReady(t *testing.T) {
	useShared(t)
	ctx := context.Background()
	name := unique("ready")
	createSecret(t, secretNS, name+"-kubeconfig", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, name, secretNS, name+"-kubeconfig")

	conn := waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	for _, typ := range []kbindv1alpha1.ConditionType{kbindv1alpha1.ConditionSecretValid, kbindv1alpha1.ConditionConnected} {
		waitCondition(t, name, typ, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	}
	waitCondition(t, name, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
	if conn.Status.RemoteClusterUID != kubeSystemUID(t, provider) || conn.Status.LocalClusterUID != kubeSystemUID(t, consumer) {
		t.Errorf("pinned UIDs %q/%q, want the kube-system UIDs", conn.Status.RemoteClusterUID, conn.Status.LocalClusterUID)
	}
	if conn.Status.ActiveSchemaSource != kbindv1alpha1.ActiveSchemaSourceCRD {
		t.Errorf("activeSchemaSource = %q, want CRD", conn.Status.ActiveSchemaSource)
	}
	want := []kbindv1alpha1.ExportedAPI{{Name: "widgets.example.org", Group: "example.org", Resource: "widgets", Scope: kbindv1alpha1.APIScopeNamespaced, Versions: []string{"v1alpha1"}}}
	if fmt.Sprint(conn.Status.ExportedAPIs) != fmt.Sprint(want) {
		t.Errorf("exportedAPIs = %+v, want %+v", conn.Status.ExportedAPIs, want)
	}
	if !controllerutil.ContainsFinalizer(conn, kbindv1alpha1.CleanupFinalizer) {
		t.Error("connection lacks the cleanup finalizer")
	}
	secret := &corev1.Secret{}
	if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: name + "-kubeconfig"}, secret); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(secret, kbindv1alpha1.CleanupFinalizer) {
		t.Error("secret lacks the cleanup finalizer")
	}

	// HB-1: the Lease, its markers, and renewal.
	leaseName := name + "-" + conn.Status.LocalClusterUID[:10]
	lease := &coordinationv1.Lease{}
	eventually(t, "heartbeat lease", func() error {
		return provider.Get(ctx, client.ObjectKey{Namespace: "kbind", Name: leaseName}, lease)
	})
	uid := conn.Status.LocalClusterUID
	if lease.Labels[kbindv1alpha1.ManagedLabel] != "true" || lease.Labels[kbindv1alpha1.ConsumerClusterUIDLabel] != uid ||
		lease.Annotations[kbindv1alpha1.ConsumerClusterUIDAnnotation] != uid || lease.Annotations[kbindv1alpha1.ConnectionAnnotation] != name {
		t.Errorf("lease markers: labels %v annotations %v", lease.Labels, lease.Annotations)
	}
	if *lease.Spec.HolderIdentity != uid || *lease.Spec.LeaseDurationSeconds != 60 {
		t.Errorf("lease spec %+v", lease.Spec)
	}
	first := lease.Spec.RenewTime.Time
	eventually(t, "lease renewal", func() error {
		if err := provider.Get(ctx, client.ObjectKey{Namespace: "kbind", Name: leaseName}, lease); err != nil {
			return err
		}
		if !lease.Spec.RenewTime.After(first) {
			return fmt.Errorf("renewTime still %v", first)
		}
		return nil
	})
	ns := &corev1.Namespace{}
	if err := provider.Get(ctx, client.ObjectKey{Name: "kbind"}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels[kbindv1alpha1.ManagedLabel] != "true" || ns.Labels[kbindv1alpha1.ConsumerClusterUIDLabel] != uid {
		t.Errorf("created lease namespace labels %v", ns.Labels)
	}
	if v, ok := ns.Labels[kbindv1alpha1.PrefixLabel]; ok {
		t.Errorf("the Lease namespace of a Connection without isolation carries %s=%q", kbindv1alpha1.PrefixLabel, v)
	}
	waitCondition(t, name, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "kbind/"+leaseName)

	// CONN-5: once converged, nothing is written while nothing changes,
	// across several discovery intervals and heartbeats: the window is
	// 2 × DiscoveryInterval (2 s in enginetest) + HeartbeatInterval (1 s).
	// A busy machine only makes it see fewer passes, never fail one.
	rv := getConnection(t, name).ResourceVersion
	deadline := time.Now().Add(2*2*time.Second + time.Second)
	for time.Now().Before(deadline) {
		if got := getConnection(t, name).ResourceVersion; got != rv {
			t.Fatalf("connection status rewritten without a change (resourceVersion %s -> %s)", rv, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestConnectionBeforeSecret(t *testing.T) {
	t.Parallel()
	useShared(t)
	name := unique("early")
	createConnection(t, name, secretNS, name+"-kubeconfig")
	waitCondition(t, name, kbindv1alpha1.ConditionSecretValid, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound, "Secret kbind/"+name+"-kubeconfig not found")
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound)
	createSecret(t, secretNS, name+"-kubeconfig", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
}

func TestBadKubeconfigSecrets(t *testing.T) {
	t.Parallel()
	useShared(t)
	valid := string(pair.Provider.Kubeconfig)
	twoContexts := strings.Replace(valid, "contexts:\n", "contexts:\n- context:\n    cluster: provider\n    user: provider\n  name: second\n", 1)
	twoContexts = strings.Replace(twoContexts, "current-context: provider\n", "", 1)
	cases := []struct {
		name      string
		namespace string
		data      map[string][]byte
		key       string
		fragments []string
	}{
		{"missing-key", secretNS, map[string][]byte{"config": pair.Provider.Kubeconfig}, "", []string{`has no key "kubeconfig"`}},
		{"empty-data", secretNS, map[string][]byte{"kubeconfig": {}}, "", []string{`key "kubeconfig" is empty`}},
		{"garbage", secretNS, map[string][]byte{"kubeconfig": []byte("\x00\xff" + secretMarker + "{{")}, "", []string{"not valid YAML or JSON kubeconfig"}},
		{"two-contexts", secretNS, map[string][]byte{"kubeconfig": []byte(twoContexts)}, "", []string{"defines 2 contexts (provider, second) and no current-context"}},
		{"exec-plugin", secretNS, map[string][]byte{"kubeconfig": []byte(execKubeconfig)}, "", []string{"users[u].exec runs a program"}},
		{"token-file", secretNS, map[string][]byte{"kubeconfig": []byte(tokenFileKubeconfig)}, "", []string{"users[u].tokenFile references a local file"}},
		{"custom-key-missing", secretNS, map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig}, "other", []string{`has no key "other"`}},
		{"not-allowed-namespace", otherNS, map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig}, "", []string{`namespace "elsewhere" is not one of the konnector's allowed Secret namespaces`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := unique("bad-" + tc.name)
			createSecret(t, tc.namespace, name, tc.data)
			createConnection(t, name, tc.namespace, name, func(c *kbindv1alpha1.Connection) { c.Spec.KubeconfigSecretRef.Key = tc.key })
			conn := waitCondition(t, name, kbindv1alpha1.ConditionSecretValid, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound, tc.fragments...)
			waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound)
			assertNoLeak(t, consumer, conn)
			if tc.namespace == otherNS {
				// A Secret outside the allowed namespaces is never touched.
				s := &corev1.Secret{}
				if err := consumer.Get(context.Background(), client.ObjectKey{Namespace: otherNS, Name: name}, s); err != nil {
					t.Fatal(err)
				}
				if len(s.Finalizers) != 0 {
					t.Errorf("a Secret outside the allowed namespaces got finalizers %v", s.Finalizers)
				}
			}
		})
	}
}

const execKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: p, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "echo ` + secretMarker + `"]}}}]
contexts: [{name: c, context: {cluster: p, user: u}}]
current-context: c
`

const tokenFileKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: p, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}}]
contexts: [{name: c, context: {cluster: p, user: u}}]
current-context: c
`

// assertNoLeak fails when Secret data shows up in the Connection's status,
// in the Events of consumer c or in the engines' logs.
func assertNoLeak(t *testing.T, c client.Client, conn *kbindv1alpha1.Connection) {
	t.Helper()
	if strings.Contains(fmt.Sprint(conn.Status), secretMarker) {
		t.Errorf("Secret data in the Connection status: %+v", conn.Status)
	}
	var events corev1.EventList
	if err := c.List(context.Background(), &events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, secretMarker) {
			t.Errorf("Secret data in Event %s: %s", e.Name, e.Message)
		}
	}
	if strings.Contains(logs.String(), secretMarker) {
		t.Error("Secret data in the engine logs")
	}
}

// brokenKubeconfig returns the provider kubeconfig with its server, CA or
// credentials changed.
func providerConfigWith(mutate func(*rest.Config)) *rest.Config {
	cfg := rest.CopyConfig(pair.Provider.Config)
	mutate(cfg)
	return cfg
}

func TestConnectionFailures(t *testing.T) {
	t.Parallel()
	useShared(t)
	otherCA := testenvCA(t)
	cases := []struct {
		name      string
		cfg       *rest.Config
		condition kbindv1alpha1.ConditionType
		status    metav1.ConditionStatus
		reason    kbindv1alpha1.Reason
		fragments []string
	}{
		{"unreachable", providerConfigWith(func(c *rest.Config) { c.Host = "https://127.0.0.1:1" }),
			kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, []string{"reading the provider cluster identity failed", "connection refused"}},
		{"wrong-ca", providerConfigWith(func(c *rest.Config) { c.CAData = otherCA }),
			kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, []string{"certificate"}},
		{"rejected-credential", providerConfigWith(func(c *rest.Config) { c.CertData, c.KeyData, c.BearerToken = nil, nil, secretMarker }),
			kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending, []string{"Unauthorized"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := unique("fail-" + tc.name)
			createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": kubeconfigOf(t, tc.cfg)})
			createConnection(t, name, secretNS, name)
			conn := waitCondition(t, name, tc.condition, tc.status, tc.reason, tc.fragments...)
			waitCondition(t, name, kbindv1alpha1.ConditionSecretValid, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
			waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)
			assertNoLeak(t, consumer, conn)
		})
	}
}

// testenvCA returns a CA that did not sign the provider's serving
// certificate: a self-signed one of its own (it used to be another control
// plane's, started for nothing else).
func testenvCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not-the-provider-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestProviderForbidden(t *testing.T) {
	t.Parallel()
	useShared(t)
	name := unique("limited")
	user, err := addProviderUser("kbind-"+name, "kbind:"+name)
	if err != nil {
		t.Fatal(err)
	}
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": kubeconfigOf(t, user.Config)})
	createConnection(t, name, secretNS, name)

	// No RBAC at all: the identity read is refused.
	waitCondition(t, name, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"get namespaces/kube-system", "forbidden")
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden)
	waitCondition(t, name, kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)

	// Identity allowed, CRD list refused.
	revoke := grantProvider(t, name+"-identity", user.Name, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}})
	defer revoke()
	waitCondition(t, name, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"list customresourcedefinitions.apiextensions.k8s.io")
	waitCondition(t, name, kbindv1alpha1.ConditionConnected, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden)

	// CRDs readable, Leases not: Ready anyway, Heartbeat says Forbidden.
	revoke2 := grantProvider(t, name+"-crds", user.Name, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"list"}})
	defer revoke2()
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, name, kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, name, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden, "leases.coordination.k8s.io")
}

func TestClusterIdentityChanged(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	name := unique("moving")
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, name, secretNS, name)
	conn := waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	pinned := conn.Status.RemoteClusterUID

	other, otherClient := useBystander(t)
	secret := &corev1.Secret{}
	if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["kubeconfig"] = other.Kubeconfig
	if err := consumer.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	conn = waitCondition(t, name, kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonClusterIdentityChanged, "pinned to "+pinned)
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonClusterIdentityChanged)
	if conn.Status.RemoteClusterUID != pinned {
		t.Errorf("pinned UID changed to %s", conn.Status.RemoteClusterUID)
	}

	// Sync stopped (Ready=False), but the konnector still serves this
	// Connection: the session it verified keeps renewing the Lease on the
	// original provider, so a backend there never reaps a live consumer's
	// copies while the Secret points elsewhere. Nothing is written to the
	// unverified cluster (the package's bystander: no test may write to it).
	leaseKey := client.ObjectKey{Namespace: "kbind", Name: name + "-" + conn.Status.LocalClusterUID[:10]}
	waitRenewed(t, provider, leaseKey, 2)
	var leases coordinationv1.LeaseList
	if err := otherClient.List(ctx, &leases, client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 0 {
		t.Errorf("the unverified cluster got %d Lease(s)", len(leases.Items))
	}
}

// TestHeartbeatLeaseTakenOver: someone with write access to the Lease
// namespace rewrites the holder of a Connection's heartbeat Lease. The
// konnector never writes it again — it stays exactly as the other holder
// left it — and the Connection says Heartbeat=False/OwnedByAnother, naming
// the Lease, the holder found and what to do; Ready is unaffected. Once the
// provider admin deletes the Lease, the konnector creates it again.
func TestHeartbeatLeaseTakenOver(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	name := unique("taken")
	createSecret(t, secretNS, name+"-kubeconfig", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, name, secretNS, name+"-kubeconfig")
	conn := waitCondition(t, name, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	key := client.ObjectKey{Namespace: "kbind", Name: name + "-" + conn.Status.LocalClusterUID[:10]}
	waitRenewed(t, provider, key, 1)

	lease := &coordinationv1.Lease{}
	eventually(t, "taking the Lease over", func() error {
		if err := provider.Get(ctx, key, lease); err != nil {
			return err
		}
		lease.Spec.HolderIdentity = ptr.To("intruder")
		return provider.Update(ctx, lease) // a conflict with a renewal: again
	})
	taken := lease.DeepCopy()
	waitCondition(t, name, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonOwnedByAnother,
		"heartbeat Lease "+key.String(), `held by "intruder"`, "not by this consumer cluster ("+conn.Status.LocalClusterUID+")", "delete it")
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	// Three more renewals refused, the foreign Lease is as its holder
	// left it.
	eventually(t, "three renewals refused", func() error {
		n := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "Heartbeat renewal failed") && strings.Contains(line, key.String()) && strings.Contains(line, "intruder") {
				n++
			}
		}
		if n < 3 {
			return fmt.Errorf("%d refused renewals logged", n)
		}
		return nil
	})
	if err := provider.Get(ctx, key, lease); err != nil {
		t.Fatal(err)
	}
	if lease.ResourceVersion != taken.ResourceVersion || *lease.Spec.HolderIdentity != "intruder" {
		t.Errorf("the taken-over Lease was written: resourceVersion %s → %s, holder %s", taken.ResourceVersion, lease.ResourceVersion, *lease.Spec.HolderIdentity)
	}

	// The provider admin deletes it: created again, and renewed.
	if err := provider.Delete(ctx, lease); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, key.String())
	if err := provider.Get(ctx, key, lease); err != nil || *lease.Spec.HolderIdentity != conn.Status.LocalClusterUID {
		t.Errorf("the Lease was not created again for this consumer: %v %v", err, lease.Spec.HolderIdentity)
	}
}

// waitRenewed waits until the Lease's renewTime has advanced n times.
func waitRenewed(t *testing.T, c client.Client, key client.ObjectKey, n int) {
	t.Helper()
	ctx := context.Background()
	lease := &coordinationv1.Lease{}
	var last time.Time
	renewals := -1
	eventually(t, fmt.Sprintf("Lease %s renewed %d times", key, n), func() error {
		if err := c.Get(ctx, key, lease); err != nil {
			return err
		}
		if rt := lease.Spec.RenewTime; rt != nil && rt.After(last) {
			last = rt.Time
			renewals++
		}
		if renewals < n {
			return fmt.Errorf("renewed %d times", renewals)
		}
		return nil
	})
}

// providerKubeconfigWith is the provider's admin kubeconfig, changed by
// mutate.
func providerKubeconfigWith(t *testing.T, mutate func(*clientcmdapi.Config)) []byte {
	t.Helper()
	kc, err := clientcmd.Load(pair.Provider.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	mutate(kc)
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLeaseNamespaceFromContext(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	name := unique("ctx-ns")
	data := providerKubeconfigWith(t, func(kc *clientcmdapi.Config) { kc.Contexts[kc.CurrentContext].Namespace = "team-hb" })
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": data})
	createConnection(t, name, secretNS, name)
	conn := waitCondition(t, name, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "team-hb/"+name+"-")
	if err := provider.Get(ctx, client.ObjectKey{Namespace: "team-hb", Name: name + "-" + conn.Status.LocalClusterUID[:10]}, &coordinationv1.Lease{}); err != nil {
		t.Errorf("lease in the context namespace: %v", err)
	}
}

// Not parallel: it binds the shared provider's widgets.example.org, as
// TestAutoBind and TestOpenAPIReadErrorKeepsExports do; one consumer CRD
// bound by two bindings at once would be a conflict of the tests' making.
func TestAutoBindOffLeavesBinding(t *testing.T) {
	useShared(t)
	ctx := context.Background()
	name := unique("off")
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, name, secretNS, name, func(c *kbindv1alpha1.Connection) {
		c.Spec.AutoBind = true
		c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceCRD
	})
	eventually(t, "autoBind ClusterBinding", func() error { return consumer.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.ClusterBinding{}) })
	eventually(t, "autoBind turned off", func() error {
		conn := getConnection(t, name)
		conn.Spec.AutoBind = false
		return consumer.Update(ctx, conn)
	})
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected) // observed the new generation
	if err := consumer.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.ClusterBinding{}); err != nil {
		t.Errorf("turning autoBind off removed the ClusterBinding: %v", err)
	}
	// It is an explicit binding now: deleting the Connection waits for it.
	if err := consumer.Delete(ctx, getConnection(t, name)); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDrainingBindings, "ClusterBinding "+name)
	if err := consumer.Delete(ctx, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func TestCredentialRotation(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	name := unique("rotate")
	everything := rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}
	oldUser, err := addProviderUser("kbind-" + name + "-old")
	if err != nil {
		t.Fatal(err)
	}
	newUser, err := addProviderUser("kbind-" + name + "-new")
	if err != nil {
		t.Fatal(err)
	}
	revokeOld := grantProvider(t, name+"-old", oldUser.Name, everything)
	defer revokeOld()
	revokeNew := grantProvider(t, name+"-new", newUser.Name, everything)
	defer revokeNew()

	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": kubeconfigOf(t, oldUser.Config)})
	createConnection(t, name, secretNS, name)
	conn := waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	leaseKey := client.ObjectKey{Namespace: "kbind", Name: name + "-" + conn.Status.LocalClusterUID[:10]}

	secret := &corev1.Secret{}
	if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["kubeconfig"] = kubeconfigOf(t, newUser.Config)
	if err := consumer.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// Wait until the new credential renewed the Lease, then revoke the old:
	// a renewal within 2 s is one since the update (HeartbeatInterval 1 s
	// in enginetest, managedFields times in whole seconds); a renewal a
	// busy machine delayed is waited for, not failed on.
	eventually(t, "lease renewed by the new credential", func() error {
		lease := &coordinationv1.Lease{}
		if err := provider.Get(ctx, leaseKey, lease); err != nil {
			return err
		}
		for _, mf := range lease.ManagedFields {
			if mf.Manager == "kbind-konnector" && mf.Time != nil && time.Since(mf.Time.Time) < 2*time.Second {
				return nil
			}
		}
		return fmt.Errorf("no recent renewal")
	})
	revokeOld()
	lease := &coordinationv1.Lease{}
	if err := provider.Get(ctx, leaseKey, lease); err != nil {
		t.Fatal(err)
	}
	revokedAt := lease.Spec.RenewTime.Time
	eventually(t, "lease renewal after revoking the old credential", func() error {
		if err := provider.Get(ctx, leaseKey, lease); err != nil {
			return err
		}
		if !lease.Spec.RenewTime.After(revokedAt.Add(time.Second)) {
			return fmt.Errorf("not renewed since %v", revokedAt)
		}
		return nil
	})
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, name, kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
}

// Not parallel: it binds the shared provider's widgets.example.org (see
// TestAutoBindOffLeavesBinding).
func TestAutoBind(t *testing.T) {
	useShared(t)
	ctx := context.Background()
	name := unique("auto")
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, name, secretNS, name, func(c *kbindv1alpha1.Connection) {
		c.Spec.AutoBind = true
		c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceCRD
	})
	waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	cb := &kbindv1alpha1.ClusterBinding{}
	eventually(t, "autoBind ClusterBinding", func() error { return consumer.Get(ctx, client.ObjectKey{Name: name}, cb) })
	conn := getConnection(t, name)
	if !metav1.IsControlledBy(cb, conn) || cb.Labels[kbindv1alpha1.ManagedLabel] != "true" ||
		cb.Spec.ConnectionRef.Name != name || cb.Spec.ConflictPolicy != kbindv1alpha1.ConflictPolicyFail ||
		fmt.Sprint(cb.Spec.ConsumerNames()) != "[widgets.example.org]" || cb.Spec.APIs[0].Projection != nil {
		t.Errorf("autoBind ClusterBinding %+v", cb)
	}

	// Deleting the Connection deletes its autoBind ClusterBinding first.
	deleteConnection(t, name)
	eventually(t, "autoBind ClusterBinding deleted", func() error {
		err := consumer.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.ClusterBinding{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// A provider of its own exporting widgets of a group of its own: the
// consumer CRD it binds is the test's alone, so it runs in parallel.
func TestAutoBindFollowsExports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := unique("follow")
	group := name + ".example.org"
	other, otherClient := ownProvider(t, widgetCRD("widgets", group, true))
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": other.Kubeconfig})
	createConnection(t, name, secretNS, name, func(c *kbindv1alpha1.Connection) {
		c.Spec.AutoBind = true
		c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceCRD
	})
	eventually(t, "autoBind ClusterBinding", func() error {
		return consumer.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.ClusterBinding{})
	})

	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := otherClient.Get(ctx, client.ObjectKey{Name: "widgets." + group}, crd); err != nil {
		t.Fatal(err)
	}
	delete(crd.Labels, kbindv1alpha1.ExportedLabel)
	if err := otherClient.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	// autoBind only ever adds APIs (CONN-6): the last export gone, the
	// ClusterBinding stays and still lists it.
	eventually(t, "the last export gone", func() error {
		if n := len(getConnection(t, name).Status.ExportedAPIs); n != 0 {
			return fmt.Errorf("%d exports left", n)
		}
		return nil
	})
	cb := &kbindv1alpha1.ClusterBinding{}
	enginetest.WaitCondition(t, consumer, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: name}},
		kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonAPINotExported, "widgets."+group)
	if err := consumer.Get(ctx, client.ObjectKey{Name: name}, cb); err != nil || !cb.DeletionTimestamp.IsZero() ||
		fmt.Sprint(cb.Spec.ConsumerNames()) != "[widgets."+group+"]" {
		t.Errorf("the autoBind ClusterBinding %+v (%v)", cb.Spec, err)
	}
}

func TestDeletionDrainsBindingsAndReleasesSecret(t *testing.T) {
	t.Parallel()
	useShared(t)
	ctx := context.Background()
	first, second, secretName, bindingName := unique("first"), unique("second"), unique("shared"), unique("uses-first")
	createSecret(t, secretNS, secretName, map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, first, secretNS, secretName)
	createConnection(t, second, secretNS, secretName)
	waitCondition(t, first, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, second, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	b := &kbindv1alpha1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: bindingName},
		Spec: kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: first},
			APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}},
	}
	if err := consumer.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := consumer.Delete(ctx, &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: first}}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, first, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDrainingBindings,
		"waiting for 1 binding(s)", "Binding default/"+bindingName)
	if err := consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	firstLease := client.ObjectKey{Namespace: "kbind", Name: first + "-" + getConnection(t, first).Status.LocalClusterUID[:10]}
	if err := provider.Get(ctx, firstLease, &coordinationv1.Lease{}); err != nil {
		t.Fatalf("the heartbeat Lease before deletion: %v", err)
	}
	deleteConnection(t, first)
	// A Connection deleted on purpose takes its heartbeat Lease with it.
	eventually(t, "the deleted Connection's Lease gone", func() error {
		err := provider.Get(ctx, firstLease, &coordinationv1.Lease{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})

	// The Secret is still used by second: it keeps its finalizer.
	secret := &corev1.Secret{}
	if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: secretName}, secret); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(secret, kbindv1alpha1.CleanupFinalizer) {
		t.Fatal("secret released while another Connection uses it")
	}
	deleteConnection(t, second)
	eventually(t, "secret finalizer released", func() error {
		if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: secretName}, secret); err != nil {
			return err
		}
		if controllerutil.ContainsFinalizer(secret, kbindv1alpha1.CleanupFinalizer) {
			return fmt.Errorf("finalizers %v", secret.Finalizers)
		}
		return nil
	})
}

func TestDiscoverySources(t *testing.T) {
	t.Parallel()
	useShared(t)
	name := unique("openapi")
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, name, secretNS, name, func(c *kbindv1alpha1.Connection) { c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceOpenAPI })
	conn := waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	if conn.Status.ActiveSchemaSource != kbindv1alpha1.ActiveSchemaSourceOpenAPI {
		t.Errorf("activeSchemaSource %q", conn.Status.ActiveSchemaSource)
	}
	var names []string
	for _, e := range conn.Status.ExportedAPIs {
		names = append(names, e.Name)
	}
	// The label filter does not apply to OpenAPI: the unlabelled gadgets
	// are exported too; built-in groups are not.
	if strings.Join(names, ",") != "gadgets.example.org,widgets.example.org" {
		t.Errorf("OpenAPI exports %v", names)
	}
}

func TestKcpIdentityAndAutoFallthrough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := unique("kcp")
	kcp, kcpClient := ownProvider(t, widgetCRD("logicalclusters", "core.kcp.io", false))
	lc := &unstructured.Unstructured{}
	lc.SetAPIVersion("core.kcp.io/v1alpha1")
	lc.SetKind("LogicalCluster")
	lc.SetName("cluster")
	if err := kcpClient.Create(ctx, lc); err != nil {
		t.Fatal(err)
	}
	createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": kcp.Kubeconfig})
	createConnection(t, name, secretNS, name)
	conn := waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	if conn.Status.RemoteClusterUID != string(lc.GetUID()) {
		t.Errorf("remoteClusterUID %s, want the LogicalCluster's %s", conn.Status.RemoteClusterUID, lc.GetUID())
	}
	// No labelled CRD: Auto falls through to OpenAPI.
	if conn.Status.ActiveSchemaSource != kbindv1alpha1.ActiveSchemaSourceOpenAPI {
		t.Errorf("activeSchemaSource %q, want OpenAPI", conn.Status.ActiveSchemaSource)
	}
}
