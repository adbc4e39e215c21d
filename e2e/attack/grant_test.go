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
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
	"github.com/kbind/kbind/engine/test/enginetest"
	"github.com/kbind/kbind/engine/test/testenv"
)

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestGrantAttacks: what grant and revoke refuse or guarantee when a
// provider admin, or a tenant racing them, tries to get around the
// isolation — each row of docs/isolation.md's grant table.
func TestGrantAttacks(t *testing.T) {
	t.Parallel() // its own provider
	ctx := context.Background()
	provider := testenv.StartClusterT(t, "provider", testenv.ClusterOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		enginetest.CRD("widgets", "widget", "Widget", "example.org", apiextensionsv1.NamespaceScoped, true),
		enginetest.CRD("clusterwidgets", "clusterwidget", "ClusterWidget", "example.org", apiextensionsv1.ClusterScoped, true),
	}})
	kc := provider.KubeconfigPath
	admin := dynamic.NewForConfigOrDie(provider.Config)
	const apis = "widgets.example.org,clusterwidgets.example.org"
	var rows []string
	row := func(attempt, result string) { rows = append(rows, fmt.Sprintf("| %s | %s |", attempt, result)) }

	teamA := grant(t, provider, "team-a", "Prefixed", "team-a", "team-a", "--apis", apis)
	grant(t, provider, "victim", "Namespace", "kbind-victim", "", "--apis", "widgets.example.org")
	adminCreate(t, admin, namespaces, object(namespaces, "", "payments", nil, nil))

	// Refusals: each names the problem and what to do.
	for _, tc := range []struct {
		attempt string
		args    []string
		want    string
	}{
		{"a prefix another consumer's extends (`grant team` next to `team-a`)", []string{"grant", "team", "--isolation", "Prefixed", "--apis", apis}, `prefix "team" overlaps consumer team-a's prefix "team-a"`},
		{"a prefix extending another consumer's (`--prefix team-a-x`)", []string{"grant", "x", "--isolation", "Prefixed", "--prefix", "team-a-x", "--apis", apis}, "overlaps consumer team-a's"},
		{"the reserved prefix `kube`", []string{"grant", "kube", "--isolation", "Prefixed", "--apis", apis}, `--prefix "kube" is reserved`},
		{"the reserved prefix `kbind`", []string{"grant", "kbind", "--isolation", "Prefixed", "--apis", apis}, `--prefix "kbind" is reserved`},
		{"another consumer's namespace (`-n kbind-victim`)", []string{"grant", "intruder", "-n", "kbind-victim", "--apis", "widgets.example.org"}, "namespace kbind-victim is consumer victim's own namespace"},
		{"a namespace of the provider (`-n payments`)", []string{"grant", "intruder", "-n", "payments", "--apis", "widgets.example.org"}, "namespace payments exists and was not granted to consumer intruder"},
		{"a system namespace (`-n kube-system`)", []string{"grant", "intruder", "-n", "kube-system", "--apis", "widgets.example.org"}, "a namespace of the provider's system"},
		{"a change of isolation (`team-a` again with Namespace)", []string{"grant", "team-a", "--apis", "widgets.example.org"}, "run `kubectl kbind revoke team-a` first"},
	} {
		out, errOut, err := plugin(kc, tc.args...)
		if err == nil || !strings.Contains(errOut, tc.want) {
			t.Errorf("kubectl kbind %s: %v\n%s%s\nwant a refusal naming %q", strings.Join(tc.args, " "), err, out, errOut, tc.want)
			row(tc.attempt, "**granted**")
			continue
		}
		if strings.Contains(out, "kubeconfig") {
			t.Errorf("a refused grant printed a bundle:\n%s", out)
		}
		row(tc.attempt, "refused: "+lineWith(errOut, tc.want))
	}
	adminCreate(t, admin, namespaces, object(namespaces, "", "shop-orders", nil, nil))
	if _, errOut, err := plugin(kc, "grant", "shop", "--isolation", "Prefixed", "--apis", apis); err == nil || !strings.Contains(errOut, "covers namespaces that exist and are not this consumer's (shop-orders)") {
		t.Errorf("a prefix covering a provider namespace: %v %s", err, errOut)
	} else {
		row("a prefix covering a namespace that exists (`shop` over `shop-orders`)", "refused: "+lineWith(errOut, "covers namespaces"))
	}

	// The token of a new Prefixed grant is confined the moment grant
	// prints it: writes outside its prefix, right away and in a burst.
	fresh := grant(t, provider, "fresh", "Prefixed", "fresh", "fresh", "--apis", apis)
	outside := 0
	for i := range 20 {
		_, err := fresh.dyn.Resource(widgets).Namespace("default").Create(ctx, widget("default", fmt.Sprintf("early-%d", i), nil), metav1.CreateOptions{})
		if err == nil || !apierrors.IsForbidden(err) {
			outside++
			t.Errorf("write %d outside the prefix right after grant returned: %v", i, err)
		}
	}
	row("20 writes outside the prefix the moment grant printed the token", fmt.Sprintf("%d of 20 went through", outside))

	// Self-minted tokens: with exactly the printed token, a consumer may
	// mint tokens for its own ServiceAccount within what grant gave it
	// (the API server's audiences, --duration, unbound), and nothing else.
	minter := grant(t, provider, "minter", "Namespace", "kbind-minter", "", "--apis", "widgets.example.org", "--duration", "1h")
	adminCreate(t, admin, serviceAccounts, object(serviceAccounts, "kbind-minter", "app", nil, nil))
	mint := func(ns, sa string, spec authenticationv1.TokenRequestSpec) (string, error) {
		tr, err := minter.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return tr.Status.Token, nil
	}
	seconds := func(s int64) *int64 { return &s }
	// The token policy is in force the moment grant prints the token.
	through := 0
	for range 20 {
		if _, err := mint("kbind", "kbind-consumer-minter", authenticationv1.TokenRequestSpec{Audiences: []string{"https://vault.example.com"}}); err == nil {
			through++
		}
	}
	if through > 0 {
		t.Errorf("%d of 20 foreign-audience tokens minted right after grant returned", through)
	}
	row("20 tokens for a foreign audience the moment grant printed the token", fmt.Sprintf("%d of 20 minted", through))
	// The API server's audiences (envtest's: its own address) are the
	// printed token's; the table names them generically.
	apiAudiences, err := access.TokenAudiences(minter.cfg.BearerToken)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		attempt, ns, sa string
		spec            authenticationv1.TokenRequestSpec
		want            outcome
		message         string
	}{
		{"mint a token for itself for another audience", "kbind", "kbind-consumer-minter",
			authenticationv1.TokenRequestSpec{Audiences: []string{"https://vault.example.com"}}, refusedPolicy, "may mint tokens only for the API server's audiences"},
		{"mint a token for itself living longer than `--duration` (1h)", "kbind", "kbind-consumer-minter",
			authenticationv1.TokenRequestSpec{ExpirationSeconds: seconds(3601)}, refusedPolicy, "valid for at most 3600 s"},
		{"mint a token for itself bound to an object (a Pod-bound token may be extended to a year)", "kbind", "kbind-consumer-minter",
			authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Secret", Name: "anything"}}, refusedPolicy, "bound to no object"},
		{"mint a token for another consumer's ServiceAccount", "kbind", "kbind-consumer-victim", authenticationv1.TokenRequestSpec{}, refusedRBAC, "cannot create resource"},
		{"mint a token for a ServiceAccount in its own namespace", "kbind-minter", "app", authenticationv1.TokenRequestSpec{}, refusedRBAC, "cannot create resource"},
	} {
		_, err := mint(tc.ns, tc.sa, tc.spec)
		got := classify(t, tc.attempt, err)
		if got != tc.want || !strings.Contains(err.Error(), tc.message) {
			t.Errorf("%s: %v (%s), want %s naming %q", tc.attempt, err, got, tc.want, tc.message)
			row(tc.attempt, "**"+string(got)+"**")
			continue
		}
		msg := err.Error()
		if _, after, ok := strings.Cut(msg, "denied request: "); ok {
			msg = after
		}
		row(tc.attempt, string(got)+": "+strings.ReplaceAll(msg, strings.Join(apiAudiences, ", "), "<its --api-audiences>"))
	}
	// The positive control — without it the refusals prove nothing: as
	// the konnector renews, without audiences and with the lifetime of
	// its token, and again naming the API server's audiences.
	selfMinted, err := mint("kbind", "kbind-consumer-minter", authenticationv1.TokenRequestSpec{ExpirationSeconds: seconds(3600)})
	if err != nil {
		t.Fatalf("the consumer cannot mint a token for itself within its grant: %v", err)
	}
	if auds, err := access.TokenAudiences(selfMinted); err != nil || strings.Join(auds, ",") != strings.Join(apiAudiences, ",") {
		t.Errorf("the self-minted token's audiences %v (%v), want the printed one's %v", auds, err, apiAudiences)
	}
	if _, err := mint("kbind", "kbind-consumer-minter", authenticationv1.TokenRequestSpec{Audiences: apiAudiences, ExpirationSeconds: seconds(600)}); err != nil {
		t.Errorf("minting for the API server's audiences %v, named: %v", apiAudiences, err)
	}
	selfMintedCS := kubernetes.NewForConfigOrDie(withToken(minter.cfg, selfMinted))
	if _, err := selfMintedCS.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Errorf("the self-minted token does not work: %v", err)
	}
	if _, err := dynamic.NewForConfigOrDie(withToken(minter.cfg, selfMinted)).Resource(widgets).Namespace("kbind-minter").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the self-minted token cannot list the consumer's widgets: %v", err)
	}
	row("mint a token for itself as the konnector renews (no audiences, the lifetime granted, or naming the API server's audiences)", "allowed; the new token works")
	// revoke kills both at once: the ServiceAccount's UID is checked on
	// every request (the API server's token cache may answer for a few
	// seconds more).
	if _, errOut, err := plugin(kc, "revoke", "minter"); err != nil {
		t.Fatalf("revoke minter: %v %s", err, errOut)
	}
	for who, cs := range map[string]kubernetes.Interface{"the printed token": minter.cs, "the self-minted token": selfMintedCS} {
		enginetest.EventuallyWithin(t, 60*time.Second, who+" Unauthorized after revoke", func() error {
			if _, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); !apierrors.IsUnauthorized(err) {
				return fmt.Errorf("got %v", err)
			}
			return nil
		})
	}
	row("the printed and the self-minted token after `revoke`", "401 Unauthorized, both")

	tokenSecretAttacks(t, provider, row)

	// Re-granting the same mode renews and prunes: narrower APIs take the
	// earlier rights away from the earlier token too.
	if _, errOut, err := plugin(kc, "grant", "team-a", "--isolation", "Prefixed", "--apis", "widgets.example.org"); err != nil {
		t.Fatalf("renewing team-a: %v %s", err, errOut)
	} else if !strings.Contains(errOut, "earlier tokens stay valid until they expire") {
		t.Errorf("a renewal does not say the earlier tokens stay valid:\n%s", errOut)
	}
	enginetest.EventuallyWithin(t, 30*time.Second, "the earlier token loses ClusterWidgets", func() error {
		_, err := teamA.dyn.Resource(clusterWidgets).Create(ctx, widget("", "team-a-late", map[string]string{kbindv1alpha1.PrefixLabel: "team-a"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("still allowed: %v", err)
		}
		return nil
	})
	row("the earlier token after a renewal without clusterwidgets", "refused ClusterWidgets: the renewal pruned the earlier rights")

	// Derived names: "nd" keeps its rights when "nd-discovery" is granted.
	nd := grant(t, provider, "nd", "Namespace", "kbind-nd", "", "--apis", "widgets.example.org")
	// Under None the second's cluster-wide role once took the first's
	// discovery role's name.
	grant(t, provider, "nd-discovery", "None", "kbind-nd-discovery", "", "--apis", "widgets.example.org")
	if _, err := nd.cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Errorf("nd lost its identity read once nd-discovery was granted: %v", err)
	}
	if _, err := dynamic.NewForConfigOrDie(nd.cfg).Resource(crds).Get(ctx, "widgets.example.org", metav1.GetOptions{}); err != nil {
		t.Errorf("nd lost its CRD read once nd-discovery was granted: %v", err)
	}
	row("grant `nd-discovery` (None) after `nd`", "granted; nd keeps its identity and CRD reads (one ClusterRole kbind-consumer-<name> each: no derived name is shared)")

	// Revoke mid-write: a tenant writing as fast as it can, inside and
	// outside its prefix, while revoke runs. Nothing outside ever lands;
	// once revoke returns, the token is dead.
	var stop atomic.Bool
	var inside, escaped, unauthorized atomic.Int32
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				ns := "fresh-default"
				if i%2 == 1 {
					ns = "default"
				}
				_, err := fresh.dyn.Resource(widgets).Namespace(ns).Create(ctx, widget(ns, fmt.Sprintf("race-%d-%d", w, i), nil), metav1.CreateOptions{})
				switch {
				case err == nil && ns == "default":
					escaped.Add(1)
				case err == nil:
					inside.Add(1)
				case apierrors.IsUnauthorized(err):
					unauthorized.Add(1)
				}
			}
		}()
	}
	create(t, fresh, namespaces, object(namespaces, "", "fresh-default", map[string]string{kbindv1alpha1.PrefixLabel: "fresh"}, nil))
	enginetest.EventuallyWithin(t, 30*time.Second, "the racing tenant writes inside its prefix", func() error {
		if inside.Load() == 0 {
			return fmt.Errorf("no write yet")
		}
		return nil
	})
	if out, errOut, err := plugin(kc, "revoke", "fresh"); err != nil {
		t.Fatalf("revoke fresh: %v %s", err, errOut)
	} else if lines := strings.Split(strings.TrimSpace(out), "\n"); !strings.HasPrefix(lines[0], "ServiceAccount ") || !strings.HasPrefix(lines[len(lines)-1], "ValidatingAdmissionPolicy ") {
		t.Errorf("revoke must delete the ServiceAccount first and the policy last:\n%s", out)
	}
	// Once revoke returns, no write lands: refused at once (the roles are
	// gone), then Unauthorized once the API server's token cache forgets
	// the deleted ServiceAccount's token.
	landed := inside.Load() + escaped.Load()
	_, err = fresh.dyn.Resource(widgets).Namespace("fresh-default").Create(ctx, widget("fresh-default", "after-revoke", nil), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		t.Errorf("a write after revoke returned: %v, want a refusal", err)
	}
	enginetest.EventuallyWithin(t, 60*time.Second, "the revoked token Unauthorized", func() error {
		_, err := fresh.cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		if !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
	stop.Store(true)
	wg.Wait()
	if escaped.Load() > 0 {
		t.Errorf("%d writes outside the prefix went through while revoke ran", escaped.Load())
	}
	if late := inside.Load() + escaped.Load() - landed; late > 2 {
		// A write per worker may have been in flight when revoke returned.
		t.Errorf("%d writes landed after revoke returned", late)
	}
	row("writes inside and outside the prefix while `revoke` runs", fmt.Sprintf("%d outside went through; after revoke returned every write is refused, then Unauthorized", escaped.Load()))

	table := "| attempt | result |\n|---|---|\n" + strings.Join(rows, "\n") + "\n"
	t.Logf("grant table:\n%s", table)
	checkDocs(t, "grant-attacks", table)
}

// lineWith is the line of s that holds fragment, trimmed.
func lineWith(s, fragment string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, fragment) {
			return strings.TrimSpace(strings.TrimPrefix(line, "error: "))
		}
	}
	return strings.TrimSpace(s)
}

// withToken is cfg with another bearer token.
func withToken(cfg *rest.Config, token string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.BearerToken, out.BearerTokenFile = token, ""
	return out
}

// tokenSecretAttacks: a Namespace grant with related Secrets lets the
// tenant write every Secret of its namespace, but never a service-account
// token Secret — the cluster's token controller would fill it with a token
// that outlives revoke — and revoke deletes one made while it was granted
// (as before the Secrets policy existed or was loaded), listing older ones
// without deleting them. The namespace exists before the grant, labelled
// for the consumer by the admin, who keeps a token Secret of its own
// there. envtest runs no token controller: these Secrets stay unfilled,
// and the test asserts on the objects and the admission answers.
func tokenSecretAttacks(t *testing.T, provider *testenv.Cluster, row func(attempt, result string)) {
	t.Helper()
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(provider.Config)
	const ns = "sweeper-own"
	tokenSecret := func(name, sa string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}},
			Type: corev1.SecretTypeServiceAccountToken}
	}
	adminSecret := func(s *corev1.Secret) {
		t.Helper()
		if _, err := admin.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating Secret %s/%s: %v", ns, s.Name, err)
		}
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{access.ConsumerLabel: "sweeper"}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	adminSecret(tokenSecret("provider-token", "builder"))

	sweeper := grant(t, provider, "sweeper", "Namespace", ns, "", "-n", ns, "--apis", "widgets.example.org", "--related", "secrets")
	// The Secrets policy is in force the moment grant prints the token.
	through := 0
	for i := range 20 {
		if _, err := sweeper.cs.CoreV1().Secrets(ns).Create(ctx, tokenSecret(fmt.Sprintf("early-%d", i), "default"), metav1.CreateOptions{}); err == nil {
			through++
		}
	}
	if through > 0 {
		t.Errorf("%d of 20 service-account token Secrets created right after grant returned", through)
	}
	row("20 service-account token Secrets the moment grant printed the token (Namespace, `--related secrets`)", fmt.Sprintf("%d of 20 created", through))
	// The positive control: every other Secret of its namespace is its own.
	create(t, sweeper, secrets, object(secrets, ns, "mine", nil, map[string]any{"stringData": map[string]any{"k": "v"}}))

	_, err := sweeper.cs.CoreV1().Secrets(ns).Create(ctx, tokenSecret("forever", "default"), metav1.CreateOptions{})
	tokenSecretRow(t, row, "a service-account token Secret for `default` in its own namespace (Namespace, `--related secrets`)", err)

	// One made after the grant, by the admin: a stand-in for one the
	// tenant made in the moment before the policy was loaded (or under a
	// grant made before the policy existed). Creation timestamps have a
	// resolution of one second and revoke deletes only what is provably
	// younger than the grant's ServiceAccount: wait, at most a second, for
	// the clock to leave the second that ServiceAccount was created in.
	sa, err := admin.CoreV1().ServiceAccounts("kbind").Get(ctx, "kbind-consumer-sweeper", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	enginetest.EventuallyWithin(t, 2*time.Second, "a second after the grant's ServiceAccount", func() error {
		if next := sa.CreationTimestamp.Add(time.Second); time.Now().Before(next) {
			return fmt.Errorf("it is not %s yet", next)
		}
		return nil
	})
	adminSecret(tokenSecret("late", "kbind-consumer-sweeper"))
	adminSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin-config"}, StringData: map[string]string{"k": "v"}})

	// Changing a token Secret already there — pointed at another
	// ServiceAccount, the token controller would fill it for that one.
	late, err := sweeper.cs.CoreV1().Secrets(ns).Get(ctx, "late", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the tenant reads the Secrets of its namespace: %v", err)
	}
	late.Annotations[corev1.ServiceAccountNameKey] = "default"
	delete(late.Annotations, corev1.ServiceAccountUIDKey)
	_, err = sweeper.cs.CoreV1().Secrets(ns).Update(ctx, late, metav1.UpdateOptions{})
	tokenSecretRow(t, row, "point a service-account token Secret already in its namespace at `default` (an update)", err)

	// A consumer granted related Secrets before the Secrets policy existed
	// (a stand-in: the admin deletes the policy) makes token Secrets at
	// will; granted again, its earlier token is refused too.
	for _, kind := range []string{"validatingadmissionpolicybinding", "validatingadmissionpolicy"} {
		if out, err := testenv.Kubectl(ctx, provider.KubeconfigPath, "delete", kind, "kbind-consumer-sweeper"); err != nil {
			t.Fatalf("deleting the Secrets policy: %v\n%s", err, out)
		}
	}
	enginetest.EventuallyWithin(t, 30*time.Second, "the tenant makes a token Secret without the Secrets policy", func() error {
		_, err := sweeper.cs.CoreV1().Secrets(ns).Create(ctx, tokenSecret("legacy", "default"), metav1.CreateOptions{})
		return err
	})
	if _, errOut, err := plugin(provider.KubeconfigPath, "grant", "sweeper", "-n", ns, "--apis", "widgets.example.org", "--related", "secrets"); err != nil {
		t.Fatalf("granting sweeper again: %v\n%s", err, errOut)
	}
	_, err = sweeper.cs.CoreV1().Secrets(ns).Create(ctx, tokenSecret("forever-again", "default"), metav1.CreateOptions{})
	tokenSecretRow(t, row, "a service-account token Secret with the earlier token of a consumer granted related Secrets before the Secrets policy, once granted again", err)

	out, errOut, err := plugin(provider.KubeconfigPath, "revoke", "sweeper")
	if err != nil {
		t.Fatalf("revoke sweeper: %v\n%s%s", err, out, errOut)
	}
	t.Logf("revoke sweeper:\n%s%s", out, errOut)
	swept := true
	if !strings.Contains(out, "Secret "+ns+"/late deleted") || !strings.Contains(out, "Secret "+ns+"/legacy deleted") ||
		!strings.Contains(errOut, "kubectl -n "+ns+" delete secret provider-token") {
		swept = false
		t.Errorf("revoke must delete the token Secret made after the grant and list the older one:\n%s%s", out, errOut)
	}
	if strings.Contains(out, "provider-token") || strings.Contains(out, "admin-config") || strings.Contains(out, ns+"/mine") {
		swept = false
		t.Errorf("revoke deleted more than the token Secret made after the grant:\n%s", out)
	}
	for name, want := range map[string]bool{"late": false, "legacy": false, "provider-token": true, "mine": true, "admin-config": true} {
		_, err := admin.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case want && err != nil:
			swept = false
			t.Errorf("Secret %s/%s after revoke: %v; want it kept", ns, name, err)
		case !want && !apierrors.IsNotFound(err):
			swept = false
			t.Errorf("Secret %s/%s after revoke: %v; want it deleted", ns, name, err)
		}
	}
	result := "deleted the ones made after the grant (by the tenant under the earlier grant, by the admin); listed the admin's, made before it, " +
		"with the command to delete it (`kubectl -n " + ns + " delete secret provider-token`), and kept it; Secrets of other types kept"
	if !swept {
		result = "**not as documented**"
	}
	row("token Secrets in its namespace at `revoke` (two made after the grant, one the admin made before it)", result)

	// Granted again without Secrets: the Secrets policy goes (once the API
	// server denies the consumer writing Secrets), and RBAC refuses them.
	dropper := grant(t, provider, "dropper", "Namespace", "kbind-dropper", "", "--apis", "widgets.example.org", "--related", "secrets")
	create(t, dropper, secrets, object(secrets, "kbind-dropper", "mine", nil, map[string]any{"stringData": map[string]any{"k": "v"}}))
	if _, errOut, err := plugin(provider.KubeconfigPath, "grant", "dropper", "--apis", "widgets.example.org"); err != nil {
		t.Fatalf("granting dropper again without Secrets: %v\n%s", err, errOut)
	} else if !strings.Contains(errOut, "deleted ValidatingAdmissionPolicy /kbind-consumer-dropper, which the earlier grant made") {
		t.Errorf("a re-grant without Secrets does not prune the Secrets policy:\n%s", errOut)
	}
	_, err = dropper.cs.CoreV1().Secrets("kbind-dropper").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kbind-dropper", Name: "forever",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}, metav1.CreateOptions{})
	if got := classify(t, "a token Secret after a re-grant without Secrets", err); got != refusedRBAC {
		t.Errorf("a token Secret after a re-grant without Secrets: %v (%s), want %s", err, got, refusedRBAC)
		row("a service-account token Secret with the earlier token after a re-grant without `--related secrets`", "**"+string(got)+"**")
	} else {
		row("a service-account token Secret with the earlier token after a re-grant without `--related secrets`",
			string(got)+": the re-grant drops the Secrets policy only once the API server denies the consumer writing Secrets")
	}
	if _, errOut, err := plugin(provider.KubeconfigPath, "revoke", "dropper"); err != nil {
		t.Fatalf("revoke dropper: %v\n%s", err, errOut)
	}
}

// tokenSecretRow records an attempt at a service-account token Secret,
// which the Secrets policy must refuse with its message.
func tokenSecretRow(t *testing.T, row func(attempt, result string), attempt string, err error) {
	t.Helper()
	got := classify(t, attempt, err)
	if got != refusedPolicy || !strings.Contains(err.Error(), "may not create or change service-account token Secrets") {
		t.Errorf("%s: %v (%s), want %s by the Secrets policy", attempt, err, got, refusedPolicy)
		row(attempt, "**"+string(got)+"**")
		return
	}
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "denied request: "); ok {
		msg = after
	}
	row(attempt, string(got)+": "+msg)
}
