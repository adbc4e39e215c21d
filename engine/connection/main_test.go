package connection_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/testenv"
)

// The package's tests share one consumer/provider pair and one running
// engine; each test uses its own Connection and Secret names.
var (
	pair     *testenv.Pair
	consumer client.Client
	provider client.Client
	scheme   = runtime.NewScheme()
	logs     = &syncBuffer{}
)

const (
	secretNS    = "kbind"
	otherNS     = "elsewhere" // not an allowed Secret namespace
	pollTimeout = 30 * time.Second
)

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if err := engine.AddToScheme(scheme); err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "kbind-connection-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	pair, err = testenv.StartPair(testenv.PairOptions{Dir: dir, ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		widgetCRD("widgets", "example.org", true), widgetCRD("gadgets", "example.org", false),
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pair.Stop()
	if consumer, err = client.New(pair.Consumer.Config, client.Options{Scheme: scheme}); err != nil {
		panic(err)
	}
	if provider, err = client.New(pair.Provider.Config, client.Options{Scheme: scheme}); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ns := range []string{secretNS, otherNS} {
		if err := consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			panic(err)
		}
	}

	// Everything the engine logs, at every verbosity, is kept so tests can
	// assert that no Secret data ever reaches the logs.
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true), zap.Level(zapcore.Level(-10))))
	opts := engine.Options{
		SecretNamespaces:  []string{secretNS},
		DiscoveryInterval: 2 * time.Second,
		HeartbeatInterval: time.Second,
		ProviderTimeout:   5 * time.Second,
	}
	cacheOpts := cache.Options{}
	engine.ConfigureCache(opts, &cacheOpts)
	mgr, err := ctrl.NewManager(pair.Consumer.Config, ctrl.Options{
		Scheme: scheme, Cache: cacheOpts, Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		panic(err)
	}
	if _, err := engine.Setup(ctx, mgr, opts); err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

func widgetCRD(plural, group string, exported bool) *apiextensionsv1.CustomResourceDefinition {
	kind := map[string]string{"widgets": "Widget", "gadgets": "Gadget", "logicalclusters": "LogicalCluster"}[plural]
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List", Singular: strings.ToLower(kind)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", XPreserveUnknownFields: ptrTrue()},
						"status": {Type: "object", XPreserveUnknownFields: ptrTrue()},
					},
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
	if plural == "logicalclusters" {
		crd.Spec.Scope = apiextensionsv1.ClusterScoped
	}
	if exported {
		crd.Labels = map[string]string{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}
	}
	return crd
}

func ptrTrue() *bool { t := true; return &t }

// eventually polls check until it returns nil or the timeout passes.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %v", what, err)
}

// getConnection reads a Connection from the consumer.
func getConnection(t *testing.T, name string) *kbindv1alpha1.Connection {
	t.Helper()
	conn := &kbindv1alpha1.Connection{}
	if err := consumer.Get(context.Background(), client.ObjectKey{Name: name}, conn); err != nil {
		t.Fatalf("getting connection %s: %v", name, err)
	}
	return conn
}

// waitCondition waits until the Connection's condition has the status and
// reason, and its message contains every fragment.
func waitCondition(t *testing.T, name string, typ kbindv1alpha1.ConditionType, status metav1.ConditionStatus, reason kbindv1alpha1.Reason, fragments ...string) *kbindv1alpha1.Connection {
	t.Helper()
	var conn *kbindv1alpha1.Connection
	eventually(t, fmt.Sprintf("%s %s=%s/%s %q", name, typ, status, reason, fragments), func() error {
		conn = &kbindv1alpha1.Connection{}
		if err := consumer.Get(context.Background(), client.ObjectKey{Name: name}, conn); err != nil {
			return err
		}
		c := meta.FindStatusCondition(conn.Status.Conditions, string(typ))
		if c == nil {
			return fmt.Errorf("no %s condition; conditions %+v", typ, conn.Status.Conditions)
		}
		if c.Status != status || c.Reason != string(reason) {
			return fmt.Errorf("%s=%s/%s: %s", typ, c.Status, c.Reason, c.Message)
		}
		for _, f := range fragments {
			if !bytes.Contains([]byte(c.Message), []byte(f)) {
				return fmt.Errorf("%s message %q lacks %q", typ, c.Message, f)
			}
		}
		if c.ObservedGeneration != conn.Generation {
			return fmt.Errorf("%s observedGeneration %d, generation %d", typ, c.ObservedGeneration, conn.Generation)
		}
		return nil
	})
	return conn
}

// grantProvider creates a ClusterRole named name with rules and binds it
// to a provider user.
func grantProvider(t *testing.T, name, user string, rules ...rbacv1.PolicyRule) (cleanup func()) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kbind-test-" + name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kbind-test-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := provider.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		for _, obj := range []client.Object{binding, role} {
			if err := provider.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
	}
}
