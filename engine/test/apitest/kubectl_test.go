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

package apitest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// The rough edges kubectl showed (issue #54), each through the project's
// kubectl against an API server serving kbind's CRDs.

// column returns the value of column col in the row of kubectl table
// output out whose first field is name: kubectl aligns its columns, so the
// value starts where the column's header does (a header of two words,
// such as BINDINGS FROM, keeps field splitting from telling).
func column(t *testing.T, out, name, col string) string {
	t.Helper()
	lines := strings.Split(out, "\n")
	start := strings.Index(lines[0], col)
	if start < 0 {
		t.Fatalf("no column %s in:\n%s", col, out)
	}
	for _, line := range lines[1:] {
		if fields := strings.Fields(line); len(fields) > 0 && fields[0] == name {
			if len(line) <= start {
				return ""
			}
			value, _, _ := strings.Cut(line[start:], " ")
			return value
		}
	}
	t.Fatalf("no row %s in:\n%s", name, out)
	return ""
}

// `kubectl get connections -o wide` prints EXPIRES as the credential's
// expiry time — a future one too, which a date column showed as
// <invalid> — and leaves it empty when the credential does not expire.
func TestKubectlExpiresColumn(t *testing.T) {
	c := kube(t)
	cluster := shared.Get(t).cluster
	ctx := context.Background()

	expiring, lasting := newConnection(uniqueName("expires")), newConnection(uniqueName("lasts"))
	for _, conn := range []*kbindv1alpha1.Connection{expiring, lasting} {
		if err := c.Create(ctx, conn); err != nil {
			t.Fatal(err)
		}
	}
	at := metav1.NewTime(time.Now().Add(30 * 24 * time.Hour).UTC().Truncate(time.Second))
	expiring.Status.Credentials = &kbindv1alpha1.ConnectionCredentials{Kind: kbindv1alpha1.CredentialServiceAccountToken, ExpiresAt: &at}
	lasting.Status.Credentials = &kbindv1alpha1.ConnectionCredentials{Kind: kbindv1alpha1.CredentialClientCertificate}
	for _, conn := range []*kbindv1alpha1.Connection{expiring, lasting} {
		if err := c.Status().Update(ctx, conn); err != nil {
			t.Fatal(err)
		}
	}

	out, err := cluster.Kubectl(ctx, "get", "connections", expiring.Name, lasting.Name, "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := column(t, out, expiring.Name, "EXPIRES"), at.Format(time.RFC3339); got != want {
		t.Errorf("EXPIRES of a credential expiring in 30 days = %q, want %q:\n%s", got, want, out)
	}
	if got := column(t, out, lasting.Name, "EXPIRES"); got != "" {
		t.Errorf("EXPIRES of a credential that does not expire = %q, want it empty:\n%s", got, out)
	}
	if strings.Contains(out, "<invalid>") {
		t.Errorf("kubectl shows <invalid>:\n%s", out)
	}
	// Without -o wide the column is not printed.
	if out, err = cluster.Kubectl(ctx, "get", "connections", expiring.Name); err != nil || strings.Contains(out, "EXPIRES") {
		t.Errorf("EXPIRES without -o wide (%v):\n%s", err, out)
	}
}

// kbconn, kbcb and kbb are kbind's kinds for kubectl, and the kbind
// category lists all three; `kubectl get bindings` still reaches the core
// Binding (v1, create-only, so kubectl cannot list it), as it always did:
// bindings.core.kbind.io or kbb are kbind's (docs/concepts.md).
func TestKubectlShortNames(t *testing.T) {
	c := kube(t)
	cluster := shared.Get(t).cluster
	ctx := context.Background()

	conn := newConnection(uniqueName("short"))
	if err := c.Create(ctx, conn); err != nil {
		t.Fatal(err)
	}
	spec := kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: conn.Name},
		APIs:          []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}},
	}
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("short")}, Spec: spec}
	if err := c.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	ns := uniqueName("team-short")
	ensureNamespace(t, c, ns)
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "widgets", Namespace: ns}, Spec: spec}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "kbconn", conn.Name, "-o", "name"}, "connection.core.kbind.io/" + conn.Name},
		{[]string{"get", "kbcb", cb.Name, "-o", "name"}, "clusterbinding.core.kbind.io/" + cb.Name},
		{[]string{"get", "kbb", "-n", ns, "-o", "name"}, "binding.core.kbind.io/widgets"},
		{[]string{"get", "bindings.core.kbind.io", "-n", ns, "-o", "name"}, "binding.core.kbind.io/widgets"},
	} {
		out, err := cluster.Kubectl(ctx, tc.args...)
		if err != nil || strings.TrimSpace(out) != tc.want {
			t.Errorf("kubectl %s = %q (%v), want %q", strings.Join(tc.args, " "), out, err, tc.want)
		}
	}
	out, err := cluster.Kubectl(ctx, "get", "kbb", "-A")
	if err != nil {
		t.Fatal(err)
	}
	if header, row := tableRow(t, out, ns); strings.Join(header, " ") != "NAMESPACE NAME CONNECTION READY CONFLICTS AGE" || row[1] != "widgets" {
		t.Errorf("kubectl get kbb -A:\n%s", out)
	}

	// The core Binding keeps its name.
	out, err = cluster.Kubectl(ctx, "get", "bindings", "-n", ns)
	if err == nil || !strings.Contains(out, "MethodNotAllowed") {
		t.Errorf("kubectl get bindings reached something else than the core Binding (%v):\n%s", err, out)
	}
	out, err = cluster.Kubectl(ctx, "explain", "bindings")
	if err != nil || !strings.Contains(out, "VERSION:    v1\n") || strings.Contains(out, "core.kbind.io") {
		t.Errorf("kubectl explain bindings explains something else than the core Binding (%v):\n%s", err, out)
	}
}

// kubectl explain documents every value of the enum fields a user picks
// from: each value is listed (ENUM) and said what it does (DESCRIPTION).
func TestKubectlExplainsEveryValue(t *testing.T) {
	kube(t)
	cluster := shared.Get(t).cluster
	ctx := context.Background()
	for _, tc := range []struct {
		field  string
		values []string
	}{
		{"connections.spec.schema.source", []string{"Auto", "CRD", "OpenAPI"}},
		{"connections.spec.schema.pullPolicy", []string{"Bound", "All", "None"}},
		{"connections.spec.schema.updatePolicy", []string{"Always", "Once"}},
		{"clusterbindings.spec.conflictPolicy", []string{"Fail", "Adopt"}},
		{"clusterbindings.spec.deletionPolicy", []string{"Delete", "Orphan", "Foreground"}},
		{"kbb.spec.conflictPolicy", []string{"Fail", "Adopt"}},
		{"kbb.spec.deletionPolicy", []string{"Delete", "Orphan", "Foreground"}},
		// docs/concepts.md's examples.
		{"kbconn.spec.schema.pullPolicy", []string{"Bound", "All", "None"}},
		{"kbcb.spec.conflictPolicy", []string{"Fail", "Adopt"}},
	} {
		out, err := cluster.Kubectl(ctx, "explain", tc.field)
		if err != nil {
			t.Errorf("kubectl explain %s: %v", tc.field, err)
			continue
		}
		enum, description, ok := strings.Cut(out, "DESCRIPTION:")
		_, enum, hasEnum := strings.Cut(enum, "ENUM:")
		if !ok || !hasEnum {
			t.Errorf("kubectl explain %s has no ENUM or DESCRIPTION:\n%s", tc.field, out)
			continue
		}
		if got, want := strings.Fields(enum), tc.values; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("kubectl explain %s lists %v, want %v", tc.field, got, want)
		}
		words := strings.FieldsFunc(description, func(r rune) bool { return !unicode.IsLetter(r) })
		for _, v := range tc.values {
			if !slices.Contains(words, v) {
				t.Errorf("kubectl explain %s does not say what %s does:\n%s", tc.field, v, description)
			}
		}
	}
}
