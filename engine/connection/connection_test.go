package connection_test

import (
	"context"
	"fmt"
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
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := consumer.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func createConnection(t *testing.T, name, secretNamespace, secretName string, mutate ...func(*kbindv1alpha1.Connection)) {
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
	if err := consumer.Create(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteConnection(t, name) })
}

// deleteConnection deletes a Connection and waits until it is gone.
func deleteConnection(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := consumer.Delete(ctx, conn); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	eventually(t, "connection "+name+" gone", func() error {
		err := consumer.Get(ctx, client.ObjectKey{Name: name}, &kbindv1alpha1.Connection{})
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

func TestConnectionReady(t *testing.T) {
	ctx := context.Background()
	createSecret(t, secretNS, "ready-kubeconfig", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, "ready", secretNS, "ready-kubeconfig")

	conn := waitCondition(t, "ready", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	for _, typ := range []kbindv1alpha1.ConditionType{kbindv1alpha1.ConditionSecretValid, kbindv1alpha1.ConditionConnected} {
		waitCondition(t, "ready", typ, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	}
	waitCondition(t, "ready", kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
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
	if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: "ready-kubeconfig"}, secret); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(secret, kbindv1alpha1.CleanupFinalizer) {
		t.Error("secret lacks the cleanup finalizer")
	}

	// HB-1: the Lease, its markers, and renewal.
	leaseName := "ready-" + conn.Status.LocalClusterUID[:10]
	lease := &coordinationv1.Lease{}
	eventually(t, "heartbeat lease", func() error {
		return provider.Get(ctx, client.ObjectKey{Namespace: "kbind", Name: leaseName}, lease)
	})
	uid := conn.Status.LocalClusterUID
	if lease.Labels[kbindv1alpha1.ManagedLabel] != "true" || lease.Labels[kbindv1alpha1.ConsumerClusterUIDLabel] != uid ||
		lease.Annotations[kbindv1alpha1.ConsumerClusterUIDAnnotation] != uid || lease.Annotations[kbindv1alpha1.ConnectionAnnotation] != "ready" {
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
	waitCondition(t, "ready", kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "kbind/"+leaseName)

	// CONN-5: once converged, nothing is written while nothing changes,
	// across several discovery intervals and heartbeats.
	rv := getConnection(t, "ready").ResourceVersion
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if got := getConnection(t, "ready").ResourceVersion; got != rv {
			t.Fatalf("connection status rewritten without a change (resourceVersion %s -> %s)", rv, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestConnectionBeforeSecret(t *testing.T) {
	createConnection(t, "early", secretNS, "early-kubeconfig")
	waitCondition(t, "early", kbindv1alpha1.ConditionSecretValid, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound, "Secret kbind/early-kubeconfig not found")
	waitCondition(t, "early", kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound)
	createSecret(t, secretNS, "early-kubeconfig", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	waitCondition(t, "early", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
}

func TestBadKubeconfigSecrets(t *testing.T) {
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
			name := "bad-" + tc.name
			createSecret(t, tc.namespace, name, tc.data)
			createConnection(t, name, tc.namespace, name, func(c *kbindv1alpha1.Connection) { c.Spec.KubeconfigSecretRef.Key = tc.key })
			conn := waitCondition(t, name, kbindv1alpha1.ConditionSecretValid, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound, tc.fragments...)
			waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonSecretNotFound)
			assertNoLeak(t, conn)
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
// in consumer Events or in the engine's logs.
func assertNoLeak(t *testing.T, conn *kbindv1alpha1.Connection) {
	t.Helper()
	if strings.Contains(fmt.Sprint(conn.Status), secretMarker) {
		t.Errorf("Secret data in the Connection status: %+v", conn.Status)
	}
	var events corev1.EventList
	if err := consumer.List(context.Background(), &events); err != nil {
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
			name := "fail-" + tc.name
			createSecret(t, secretNS, name, map[string][]byte{"kubeconfig": kubeconfigOf(t, tc.cfg)})
			createConnection(t, name, secretNS, name)
			conn := waitCondition(t, name, tc.condition, tc.status, tc.reason, tc.fragments...)
			waitCondition(t, name, kbindv1alpha1.ConditionSecretValid, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
			waitCondition(t, name, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)
			assertNoLeak(t, conn)
		})
	}
}

// testenvCA returns a CA that did not sign the provider's serving
// certificate: another control plane's.
func testenvCA(t *testing.T) []byte {
	t.Helper()
	other := testenv.StartClusterT(t, "other", testenv.ClusterOptions{})
	return other.Config.CAData
}

func TestProviderForbidden(t *testing.T) {
	user, err := pair.Provider.AddUser("kbind-limited", "kbind:limited")
	if err != nil {
		t.Fatal(err)
	}
	createSecret(t, secretNS, "limited", map[string][]byte{"kubeconfig": kubeconfigOf(t, user.Config)})
	createConnection(t, "limited", secretNS, "limited")

	// No RBAC at all: the identity read is refused.
	waitCondition(t, "limited", kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"get namespaces/kube-system", "forbidden")
	waitCondition(t, "limited", kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden)
	waitCondition(t, "limited", kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)

	// Identity allowed, CRD list refused.
	revoke := grantProvider(t, "limited-identity", user.Name, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}})
	defer revoke()
	waitCondition(t, "limited", kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionTrue, kbindv1alpha1.ReasonForbidden,
		"list customresourcedefinitions.apiextensions.k8s.io")
	waitCondition(t, "limited", kbindv1alpha1.ConditionConnected, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, "limited", kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden)

	// CRDs readable, Leases not: Ready anyway, Heartbeat says Forbidden.
	revoke2 := grantProvider(t, "limited-crds", user.Name, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"list"}})
	defer revoke2()
	waitCondition(t, "limited", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, "limited", kbindv1alpha1.ConditionPermissionDenied, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, "limited", kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonForbidden, "leases.coordination.k8s.io")
}

func TestClusterIdentityChanged(t *testing.T) {
	ctx := context.Background()
	createSecret(t, secretNS, "moving", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, "moving", secretNS, "moving")
	conn := waitCondition(t, "moving", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	pinned := conn.Status.RemoteClusterUID

	other := testenv.StartClusterT(t, "swapped", testenv.ClusterOptions{})
	secret := &corev1.Secret{}
	if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: "moving"}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["kubeconfig"] = other.Kubeconfig
	if err := consumer.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	conn = waitCondition(t, "moving", kbindv1alpha1.ConditionConnected, metav1.ConditionFalse, kbindv1alpha1.ReasonClusterIdentityChanged, "pinned to "+pinned)
	waitCondition(t, "moving", kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonClusterIdentityChanged)
	if conn.Status.RemoteClusterUID != pinned {
		t.Errorf("pinned UID changed to %s", conn.Status.RemoteClusterUID)
	}

	// Sync stopped (Ready=False), but the konnector still serves this
	// Connection: the session it verified keeps renewing the Lease on the
	// original provider, so a backend there never reaps a live consumer's
	// copies while the Secret points elsewhere. Nothing is written to the
	// unverified cluster.
	leaseKey := client.ObjectKey{Namespace: "kbind", Name: "moving-" + conn.Status.LocalClusterUID[:10]}
	waitRenewed(t, provider, leaseKey, 2)
	otherClient, err := client.New(other.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
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
	ctx := context.Background()
	createSecret(t, secretNS, "taken-kubeconfig", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, "taken", secretNS, "taken-kubeconfig")
	conn := waitCondition(t, "taken", kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	key := client.ObjectKey{Namespace: "kbind", Name: "taken-" + conn.Status.LocalClusterUID[:10]}
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
	waitCondition(t, "taken", kbindv1alpha1.ConditionHeartbeat, metav1.ConditionFalse, kbindv1alpha1.ReasonOwnedByAnother,
		"heartbeat Lease "+key.String(), `held by "intruder"`, "not by this consumer cluster ("+conn.Status.LocalClusterUID+")", "delete it")
	waitCondition(t, "taken", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
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
	waitCondition(t, "taken", kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, key.String())
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
	ctx := context.Background()
	data := providerKubeconfigWith(t, func(kc *clientcmdapi.Config) { kc.Contexts[kc.CurrentContext].Namespace = "team-hb" })
	createSecret(t, secretNS, "ctx-ns", map[string][]byte{"kubeconfig": data})
	createConnection(t, "ctx-ns", secretNS, "ctx-ns")
	conn := waitCondition(t, "ctx-ns", kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected, "team-hb/ctx-ns-")
	if err := provider.Get(ctx, client.ObjectKey{Namespace: "team-hb", Name: "ctx-ns-" + conn.Status.LocalClusterUID[:10]}, &coordinationv1.Lease{}); err != nil {
		t.Errorf("lease in the context namespace: %v", err)
	}
}

func TestAutoBindOffLeavesBinding(t *testing.T) {
	ctx := context.Background()
	createSecret(t, secretNS, "off", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, "off", secretNS, "off", func(c *kbindv1alpha1.Connection) {
		c.Spec.AutoBind = true
		c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceCRD
	})
	eventually(t, "autoBind ClusterBinding", func() error { return consumer.Get(ctx, client.ObjectKey{Name: "off"}, &kbindv1alpha1.ClusterBinding{}) })
	eventually(t, "autoBind turned off", func() error {
		conn := getConnection(t, "off")
		conn.Spec.AutoBind = false
		return consumer.Update(ctx, conn)
	})
	waitCondition(t, "off", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected) // observed the new generation
	if err := consumer.Get(ctx, client.ObjectKey{Name: "off"}, &kbindv1alpha1.ClusterBinding{}); err != nil {
		t.Errorf("turning autoBind off removed the ClusterBinding: %v", err)
	}
	// It is an explicit binding now: deleting the Connection waits for it.
	if err := consumer.Delete(ctx, getConnection(t, "off")); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, "off", kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDrainingBindings, "ClusterBinding off")
	if err := consumer.Delete(ctx, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "off"}}); err != nil {
		t.Fatal(err)
	}
}

func TestCredentialRotation(t *testing.T) {
	ctx := context.Background()
	everything := rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}
	oldUser, err := pair.Provider.AddUser("kbind-rotate-old")
	if err != nil {
		t.Fatal(err)
	}
	newUser, err := pair.Provider.AddUser("kbind-rotate-new")
	if err != nil {
		t.Fatal(err)
	}
	revokeOld := grantProvider(t, "rotate-old", oldUser.Name, everything)
	defer revokeOld()
	revokeNew := grantProvider(t, "rotate-new", newUser.Name, everything)
	defer revokeNew()

	createSecret(t, secretNS, "rotate", map[string][]byte{"kubeconfig": kubeconfigOf(t, oldUser.Config)})
	createConnection(t, "rotate", secretNS, "rotate")
	conn := waitCondition(t, "rotate", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	leaseKey := client.ObjectKey{Namespace: "kbind", Name: "rotate-" + conn.Status.LocalClusterUID[:10]}

	secret := &corev1.Secret{}
	if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: "rotate"}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["kubeconfig"] = kubeconfigOf(t, newUser.Config)
	if err := consumer.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// Wait until the new credential renewed the Lease, then revoke the old.
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
	waitCondition(t, "rotate", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, "rotate", kbindv1alpha1.ConditionHeartbeat, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
}

func TestAutoBind(t *testing.T) {
	ctx := context.Background()
	createSecret(t, secretNS, "auto", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, "auto", secretNS, "auto", func(c *kbindv1alpha1.Connection) {
		c.Spec.AutoBind = true
		c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceCRD
	})
	waitCondition(t, "auto", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	cb := &kbindv1alpha1.ClusterBinding{}
	eventually(t, "autoBind ClusterBinding", func() error { return consumer.Get(ctx, client.ObjectKey{Name: "auto"}, cb) })
	conn := getConnection(t, "auto")
	if !metav1.IsControlledBy(cb, conn) || cb.Labels[kbindv1alpha1.ManagedLabel] != "true" ||
		cb.Spec.ConnectionRef.Name != "auto" || cb.Spec.ConflictPolicy != kbindv1alpha1.ConflictPolicyFail ||
		fmt.Sprint(cb.Spec.ConsumerNames()) != "[widgets.example.org]" || cb.Spec.APIs[0].Projection != nil {
		t.Errorf("autoBind ClusterBinding %+v", cb)
	}

	// Deleting the Connection deletes its autoBind ClusterBinding first.
	deleteConnection(t, "auto")
	eventually(t, "autoBind ClusterBinding deleted", func() error {
		err := consumer.Get(ctx, client.ObjectKey{Name: "auto"}, &kbindv1alpha1.ClusterBinding{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

func TestAutoBindFollowsExports(t *testing.T) {
	ctx := context.Background()
	other := testenv.StartClusterT(t, "exports", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD("widgets", "example.org", true)}})
	otherClient, err := client.New(other.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	createSecret(t, secretNS, "follow", map[string][]byte{"kubeconfig": other.Kubeconfig})
	createConnection(t, "follow", secretNS, "follow", func(c *kbindv1alpha1.Connection) {
		c.Spec.AutoBind = true
		c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceCRD
	})
	eventually(t, "autoBind ClusterBinding", func() error {
		return consumer.Get(ctx, client.ObjectKey{Name: "follow"}, &kbindv1alpha1.ClusterBinding{})
	})

	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := otherClient.Get(ctx, client.ObjectKey{Name: "widgets.example.org"}, crd); err != nil {
		t.Fatal(err)
	}
	delete(crd.Labels, kbindv1alpha1.ExportedLabel)
	if err := otherClient.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	// autoBind only ever adds APIs (CONN-6): the last export gone, the
	// ClusterBinding stays and still lists it.
	eventually(t, "the last export gone", func() error {
		if n := len(getConnection(t, "follow").Status.ExportedAPIs); n != 0 {
			return fmt.Errorf("%d exports left", n)
		}
		return nil
	})
	cb := &kbindv1alpha1.ClusterBinding{}
	enginetest.WaitCondition(t, consumer, &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "follow"}},
		kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonAPINotExported, "widgets.example.org")
	if err := consumer.Get(ctx, client.ObjectKey{Name: "follow"}, cb); err != nil || !cb.DeletionTimestamp.IsZero() ||
		fmt.Sprint(cb.Spec.ConsumerNames()) != "[widgets.example.org]" {
		t.Errorf("the autoBind ClusterBinding %+v (%v)", cb.Spec, err)
	}
}

func TestDeletionDrainsBindingsAndReleasesSecret(t *testing.T) {
	ctx := context.Background()
	createSecret(t, secretNS, "shared", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, "first", secretNS, "shared")
	createConnection(t, "second", secretNS, "shared")
	waitCondition(t, "first", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	waitCondition(t, "second", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)

	b := &kbindv1alpha1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "uses-first"},
		Spec: kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "first"},
			APIs: []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}},
	}
	if err := consumer.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := consumer.Delete(ctx, &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "first"}}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, "first", kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonDrainingBindings,
		"waiting for 1 binding(s)", "Binding default/uses-first")
	if err := consumer.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	firstLease := client.ObjectKey{Namespace: "kbind", Name: "first-" + getConnection(t, "first").Status.LocalClusterUID[:10]}
	if err := provider.Get(ctx, firstLease, &coordinationv1.Lease{}); err != nil {
		t.Fatalf("the heartbeat Lease before deletion: %v", err)
	}
	deleteConnection(t, "first")
	// A Connection deleted on purpose takes its heartbeat Lease with it.
	eventually(t, "the deleted Connection's Lease gone", func() error {
		err := provider.Get(ctx, firstLease, &coordinationv1.Lease{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})

	// The Secret is still used by "second": it keeps its finalizer.
	secret := &corev1.Secret{}
	if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: "shared"}, secret); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(secret, kbindv1alpha1.CleanupFinalizer) {
		t.Fatal("secret released while another Connection uses it")
	}
	deleteConnection(t, "second")
	eventually(t, "secret finalizer released", func() error {
		if err := consumer.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: "shared"}, secret); err != nil {
			return err
		}
		if controllerutil.ContainsFinalizer(secret, kbindv1alpha1.CleanupFinalizer) {
			return fmt.Errorf("finalizers %v", secret.Finalizers)
		}
		return nil
	})
}

func TestDiscoverySources(t *testing.T) {
	createSecret(t, secretNS, "openapi", map[string][]byte{"kubeconfig": pair.Provider.Kubeconfig})
	createConnection(t, "openapi", secretNS, "openapi", func(c *kbindv1alpha1.Connection) { c.Spec.Schema.Source = kbindv1alpha1.SchemaSourceOpenAPI })
	conn := waitCondition(t, "openapi", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
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
	ctx := context.Background()
	kcp := testenv.StartClusterT(t, "kcp", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD("logicalclusters", "core.kcp.io", false)}})
	kcpClient, err := client.New(kcp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	lc := &unstructured.Unstructured{}
	lc.SetAPIVersion("core.kcp.io/v1alpha1")
	lc.SetKind("LogicalCluster")
	lc.SetName("cluster")
	if err := kcpClient.Create(ctx, lc); err != nil {
		t.Fatal(err)
	}
	createSecret(t, secretNS, "kcp", map[string][]byte{"kubeconfig": kcp.Kubeconfig})
	createConnection(t, "kcp", secretNS, "kcp")
	conn := waitCondition(t, "kcp", kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	if conn.Status.RemoteClusterUID != string(lc.GetUID()) {
		t.Errorf("remoteClusterUID %s, want the LogicalCluster's %s", conn.Status.RemoteClusterUID, lc.GetUID())
	}
	// No labelled CRD: Auto falls through to OpenAPI.
	if conn.Status.ActiveSchemaSource != kbindv1alpha1.ActiveSchemaSourceOpenAPI {
		t.Errorf("activeSchemaSource %q, want OpenAPI", conn.Status.ActiveSchemaSource)
	}
}
