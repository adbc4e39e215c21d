package connection_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

// The package's tests share one consumer/provider pair and one running
// engine; each test uses its own Connection and Secret names.
var (
	env      *enginetest.Env
	pair     *testenv.Pair
	consumer client.Client
	provider client.Client
	scheme   *runtime.Scheme
	logs     *enginetest.SyncBuffer
)

const (
	secretNS = enginetest.SecretNamespace
	otherNS  = "elsewhere" // not an allowed Secret namespace
)

func TestMain(m *testing.M) {
	var err error
	var stop func()
	env, stop, err = enginetest.Start(enginetest.Options{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		widgetCRD("widgets", "example.org", true), widgetCRD("gadgets", "example.org", false),
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pair, consumer, provider, scheme, logs = env.Pair, env.Consumer, env.Provider, env.Scheme, env.Logs
	code := 1
	if err := consumer.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	stop()
	os.Exit(code)
}

func widgetCRD(plural, group string, exported bool) *apiextensionsv1.CustomResourceDefinition {
	kind := map[string]string{"widgets": "Widget", "gadgets": "Gadget", "logicalclusters": "LogicalCluster"}[plural]
	scope := apiextensionsv1.NamespaceScoped
	if plural == "logicalclusters" {
		scope = apiextensionsv1.ClusterScoped
	}
	return enginetest.CRD(plural, strings.ToLower(kind), kind, group, scope, exported)
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	enginetest.Eventually(t, what, check)
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
	conn := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}}
	enginetest.WaitCondition(t, consumer, conn, typ, status, reason, fragments...)
	return conn
}

// grantProvider grants rules on the provider to user.
func grantProvider(t *testing.T, name, user string, rules ...rbacv1.PolicyRule) (revoke func()) {
	t.Helper()
	return enginetest.Grant(t, provider, name, user, rules...)
}
