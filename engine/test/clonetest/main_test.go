package clonetest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/engine/test/enginetest"
)

// env is production: the provider and the consumer cluster with its
// engine, its Connection "provider" and the ClusterBinding "widgets".
var env *enginetest.Env

// interval is the heartbeat interval of every engine here.
const interval = time.Second

func TestMain(m *testing.M) {
	var err error
	var stop func()
	env, stop, err = enginetest.Start(enginetest.Options{
		ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
			enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
		},
		Engine: engine.Options{HeartbeatInterval: interval},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := setup()
	if code == 0 {
		code = m.Run()
	}
	if code != 0 && os.Getenv("KBIND_DEBUG_LOGS") != "" {
		fmt.Fprintln(os.Stderr, env.Logs.String())
	}
	stop()
	os.Exit(code)
}

// setup connects production to the provider and binds widgets
// cluster-wide.
func setup() int {
	ctx := context.Background()
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: enginetest.SecretNamespace, Name: "provider"},
			Data: map[string][]byte{"kubeconfig": env.Pair.Provider.Kubeconfig}},
		&kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "provider"},
			Spec: kbindv1alpha1.ConnectionSpec{KubeconfigSecretRef: kbindv1alpha1.SecretKeyReference{Namespace: enginetest.SecretNamespace, Name: "provider"},
				NamespacedBindings: enginetest.AdmitAllNamespaces()}},
		&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}, Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef: kbindv1alpha1.ConnectionReference{Name: "provider"},
			APIs:          []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}}}},
	}
	for _, o := range objs {
		if err := env.Consumer.Create(ctx, o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	deadline := time.Now().Add(enginetest.PollTimeout)
	for {
		cb := &kbindv1alpha1.ClusterBinding{}
		err := env.Consumer.Get(ctx, client.ObjectKey{Name: "widgets"}, cb)
		if err == nil && metaTrue(cb.Status.Conditions, kbindv1alpha1.ConditionSynced) {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "clusterbinding widgets not Synced: %v %+v\n", err, cb.Status)
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func metaTrue(conds []metav1.Condition, t kbindv1alpha1.ConditionType) bool {
	for _, c := range conds {
		if c.Type == string(t) {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
