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

package attack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
	"github.com/kbind/kbind/e2e/harness"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var pluginBin, konnectorBin string

func TestMain(m *testing.M) {
	harness.RunWithBinaries(m, map[*string]string{
		&pluginBin:    "github.com/kbind/kbind/cli/cmd/kubectl-kbind",
		&konnectorBin: "github.com/kbind/kbind/konnector/cmd/konnector",
	})
}

var (
	widgets         = schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "widgets"}
	clusterWidgets  = schema.GroupVersionResource{Group: "example.org", Version: "v1alpha1", Resource: "clusterwidgets"}
	leases          = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	secrets         = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMaps      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	events          = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	namespaces      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	serviceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
)

// tenant is one consumer's provider credentials, as handed out.
type tenant struct {
	name string
	mode string
	// own is its own provider namespace (isolation namespace, prefix, or
	// None Lease namespace); prefix its Prefixed prefix.
	own, prefix string
	kubeconfig  []byte
	cfg         *rest.Config
	dyn         dynamic.Interface
	cs          kubernetes.Interface
}

// newTenant builds the clients of a kubeconfig exactly as handed out.
func newTenant(t *testing.T, name, mode, own, prefix string, kubeconfig []byte) *tenant {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatalf("%s's kubeconfig: %v", name, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return &tenant{name: name, mode: mode, own: own, prefix: prefix, kubeconfig: kubeconfig, cfg: cfg,
		dyn: dynamic.NewForConfigOrDie(cfg), cs: kubernetes.NewForConfigOrDie(cfg)}
}

// plugin runs kubectl-kbind against the provider and returns its stdout
// and stderr, and its error.
func plugin(kubeconfig string, args ...string) (string, string, error) {
	cmd := exec.Command(pluginBin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// grant runs `kubectl kbind grant` and returns the tenant holding the
// kubeconfig its bundle carries.
func grant(t *testing.T, provider *testenv.Cluster, name, mode, own, prefix string, args ...string) *tenant {
	t.Helper()
	out, errOut, err := plugin(provider.KubeconfigPath, append([]string{"grant", name, "--isolation", mode}, args...)...)
	if err != nil {
		t.Fatalf("kubectl kbind grant %s: %v\n%s", name, err, errOut)
	}
	return newTenant(t, name, mode, own, prefix, bundleKubeconfig(t, out))
}

// bundleKubeconfig is the provider kubeconfig a grant bundle's Secret holds.
func bundleKubeconfig(t *testing.T, bundle string) []byte {
	t.Helper()
	for _, doc := range strings.Split(bundle, "\n---\n") {
		var secret corev1.Secret
		if err := yaml.Unmarshal([]byte(doc), &secret); err == nil && secret.Kind == "Secret" {
			return []byte(secret.StringData["kubeconfig"])
		}
	}
	t.Fatalf("the bundle holds no kubeconfig Secret:\n%s", bundle)
	return nil
}

// chartTenant installs the consumer-access chart rendered with values (as
// `helm template | kubectl apply` would: without the cluster) and returns
// the tenant holding a token of its ServiceAccount, with the context
// namespace the chart's NOTES ask for.
func chartTenant(t *testing.T, provider *testenv.Cluster, name, mode, own, prefix string, values map[string]any) *tenant {
	t.Helper()
	c := loadChart(t, "consumer-access")
	values["consumer"] = name
	// As the chart's values say: the API server's --api-audiences.
	values["tokenRenewal"] = map[string]any{"audiences": toAny(apiServerAudiences(t, provider))}
	rel, err := harness.RenderChart(c, "consumer-"+name, "kbind", values)
	if err != nil {
		t.Fatalf("rendering consumer-access for %s: %v", name, err)
	}
	file := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(file, []byte(rel.Manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := testenv.Kubectl(context.Background(), provider.KubeconfigPath, "apply", "-f", file); err != nil {
		t.Fatalf("applying consumer-access for %s: %v\n%s", name, err, out)
	}
	seconds := int64(3600)
	tr, err := kubernetes.NewForConfigOrDie(provider.Config).CoreV1().ServiceAccounts("kbind").CreateToken(context.Background(), "kbind-consumer-"+name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := testenv.KubeconfigFor("provider", &rest.Config{Host: provider.Config.Host, BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: provider.Config.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	tn := newTenant(t, name, mode, own, prefix, withContextNamespace(t, kc, own))
	related, _ := values["related"].([]any)
	waitConfined(t, tn, mode == "Namespace" && slices.Contains(related, any("secrets")))
	return tn
}

// apiServerAudiences are the audiences the provider's API server gives a
// token requested without any (envtest's: its own address), read from a
// token of a ServiceAccount of no tenant.
func apiServerAudiences(t *testing.T, provider *testenv.Cluster) []string {
	t.Helper()
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(provider.Config)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind", Name: "audiences"}}
	if _, err := cs.CoreV1().ServiceAccounts("kbind").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	seconds := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts("kbind").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	auds, err := access.TokenAudiences(tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	return auds
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// waitConfined waits until the tenant's admission policies refuse it five
// times in a row — a dry-run write (Prefixed, None), a dry-run
// service-account token Secret (Namespace with related Secrets) and a
// token for a foreign audience — as grant does before it prints a token:
// the API server loads a new policy asynchronously, and a chart's objects
// are all applied at once.
func waitConfined(t *testing.T, tn *tenant, secretsPolicy bool) {
	t.Helper()
	probe := object(namespaces, "", "kbind-probe", map[string]string{kbindv1alpha1.PrefixLabel: "kbind-probe"}, nil)
	tokenSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.own, Name: "kbind-probe", Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
		Type: corev1.SecretTypeServiceAccountToken}
	refusals := 0
	enginetest.EventuallyWithin(t, 60*time.Second, tn.name+"'s admission policies in force", func() error {
		var err error
		if tn.mode != "Namespace" {
			_, err = tn.dyn.Resource(namespaces).Create(context.Background(), probe.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		}
		if secretsPolicy {
			_, err = tn.cs.CoreV1().Secrets(tn.own).Create(context.Background(), tokenSecret.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		}
		if err == nil || strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			// TokenRequest ignores dryRun: a token minted here has an
			// audience nothing accepts and is dropped.
			_, err = tn.cs.CoreV1().ServiceAccounts("kbind").CreateToken(context.Background(), "kbind-consumer-"+tn.name,
				&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"kbind.io/probe"}}}, metav1.CreateOptions{})
		}
		if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			refusals = 0
			return fmt.Errorf("the probe got %v", err)
		}
		if refusals++; refusals < 5 {
			return fmt.Errorf("%d refusals in a row", refusals)
		}
		return nil
	})
}

func withContextNamespace(t *testing.T, kubeconfig []byte, ns string) []byte {
	t.Helper()
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Contexts {
		c.Namespace = ns
	}
	out, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// outcome classifies what the API server answered an attempt.
type outcome string

const (
	allowed         outcome = "allowed"
	refusedRBAC     outcome = "refused (RBAC)"
	refusedPolicy   outcome = "refused (admission policy)"
	refusedInvalid  outcome = "refused (invalid)"
	refusedNotFound outcome = "not found"
)

func (o outcome) refused() bool { return strings.HasPrefix(string(o), "refused") }

// classify names the API server's answer; anything but a success or a
// refusal is the test's own failure.
func classify(t *testing.T, attack string, err error) outcome {
	t.Helper()
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return allowed
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy"):
		return refusedPolicy
	case apierrors.IsForbidden(err):
		return refusedRBAC
	case apierrors.IsInvalid(err):
		return refusedInvalid
	case apierrors.IsNotFound(err):
		// A 404 means RBAC let the request through to a missing object: the
		// catalogue only targets objects that exist.
		return refusedNotFound
	case errors.As(err, &status):
		t.Errorf("%s: unexpected answer %v", attack, err)
	default:
		t.Errorf("%s: %v", attack, err)
	}
	return outcome("error: " + err.Error())
}

// loadChart loads one of the repository's charts.
func loadChart(t *testing.T, name string) *chart.Chart {
	t.Helper()
	c, err := loader.Load(filepath.Join("..", "..", "charts", name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
