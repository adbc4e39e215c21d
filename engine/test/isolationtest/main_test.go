package isolationtest

import (
	"fmt"
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/kbind/kbind/engine/test/enginetest"
)

// env is the provider and consumer A (with its engine); each test starts
// consumer B itself.
var env *enginetest.Env

func TestMain(m *testing.M) {
	var err error
	var stop func()
	env, stop, err = enginetest.Start(enginetest.Options{ProviderCRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("clusterwidgets", "clusterwidget", "ClusterWidget", "example.org", apiextensionsv1.ClusterScoped, true),
		enginetest.CRD("gadgets", "gadget", "Gadget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("clustergadgets", "clustergadget", "ClusterGadget", "example.org", apiextensionsv1.ClusterScoped, true),
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}
