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

package commands

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kbind/kbind/cli/access"
)

// TestSplitTokenSecrets: revoke deletes the token Secrets created after
// the grant's ServiceAccount in a namespace where the consumer could write
// Secrets, and only lists those created before it or in the same second
// (timestamps have one-second resolution: not provably the grant's) — and
// every one where it could not.
func TestSplitTokenSecrets(t *testing.T) {
	granted := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	at := func(name string, d time.Duration) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(granted.Add(d))}}
	}
	names := func(l []metav1.PartialObjectMetadata) string {
		var out []string
		for _, s := range l {
			out = append(out, s.Name)
		}
		return strings.Join(out, ",")
	}
	mixed := []metav1.PartialObjectMetadata{at("z-late", time.Minute), at("b-old", -time.Hour), at("a-late", 2*time.Second), at("a-same", 0)}
	for _, tc := range []struct {
		name          string
		secrets       []metav1.PartialObjectMetadata
		wroteSecrets  bool
		after, before string
	}{
		{"none", nil, true, "", ""},
		{"a second later", []metav1.PartialObjectMetadata{at("late", time.Second)}, true, "late", ""},
		{"a day later", []metav1.PartialObjectMetadata{at("later", 24*time.Hour)}, true, "later", ""},
		{"the same second", []metav1.PartialObjectMetadata{at("same", 0)}, true, "", "same"},
		{"the same second, later within it", []metav1.PartialObjectMetadata{at("same", 999*time.Millisecond)}, true, "", "same"},
		{"a second earlier", []metav1.PartialObjectMetadata{at("old", -time.Second)}, true, "", "old"},
		{"mixed, sorted by name", mixed, true, "a-late,z-late", "a-same,b-old"},
		{"a consumer that could not write Secrets: none is its doing", mixed, false, "", "a-late,a-same,b-old,z-late"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after, before := splitTokenSecrets(tc.secrets, granted, tc.wroteSecrets)
			if names(after) != tc.after || names(before) != tc.before {
				t.Errorf("deleted %q, listed %q; want deleted %q, listed %q", names(after), names(before), tc.after, tc.before)
			}
		})
	}
}

// TestSweepOf: revoke reads the consumer's namespace and the grant's
// start from its ServiceAccount; one sweep per namespace, from the
// earliest grant.
func TestSweepOf(t *testing.T) {
	sa := func(ns string, created time.Time) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetCreationTimestamp(metav1.NewTime(created))
		if ns != "" {
			u.SetAnnotations(map[string]string{access.NamespaceAnnotation: ns, access.IsolationModeAnnotation: "Namespace"})
		}
		return u
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, ok := sweepOf("a", sa("", t0)); ok {
		t.Error("a ServiceAccount without the namespace annotation gives a sweep")
	}
	s, ok := sweepOf("a", sa("tenant-a", t0))
	if !ok || s.namespace != "tenant-a" || s.mode != "Namespace" || !s.granted.Time.Equal(t0) || s.consumer != "a" {
		t.Errorf("sweep %+v", s)
	}
	later, _ := sweepOf("a", sa("tenant-a", t0.Add(time.Hour)))
	other, _ := sweepOf("a", sa("tenant-b", t0.Add(time.Hour)))
	sweeps := addSweep(addSweep(addSweep(nil, later), s), other)
	if len(sweeps) != 2 || !sweeps[0].granted.Time.Equal(t0) || sweeps[1].namespace != "tenant-b" {
		t.Errorf("sweeps %+v: one per namespace, from the earliest grant", sweeps)
	}
}

// TestTokenSweepOnAPIServer: against a real API server, the sweep sees
// only service-account token Secrets, deletes one only while it is the
// object it listed (a UID precondition), and a list it cannot make is an
// error saying so — never "nothing to delete".
func TestTokenSweepOnAPIServer(t *testing.T) {
	ctx := context.Background()
	provider := sharedProvider.Get(t)
	c, err := client.New(provider.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}); err != nil {
		t.Fatal(err)
	}
	tokenSecret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name, Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
			Type: corev1.SecretTypeServiceAccountToken}
	}
	for _, s := range []*corev1.Secret{tokenSecret("minted"), tokenSecret("replaced"),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "opaque"}, StringData: map[string]string{"k": "v"}}} {
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	// A list the caller may not make is an error that says so.
	user, err := provider.AddUser("no-rights")
	if err != nil {
		t.Fatal(err)
	}
	denied, err := client.New(user.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out, notes strings.Builder
	sweep := tokenSweep{consumer: "a", namespace: "tenant-a", wroteSecrets: true} // granted at the epoch: every token Secret is after it
	err = sweep.run(ctx, denied, &out, &notes)
	if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "listing the service-account token Secrets of namespace tenant-a") ||
		!strings.Contains(err.Error(), "none of them was deleted") || !strings.Contains(err.Error(), "kubectl -n tenant-a get secrets --field-selector type=kubernetes.io/service-account-token") {
		t.Errorf("a forbidden list: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("a forbidden list printed %q", out.String())
	}

	// Only the token Secrets are listed.
	listed, err := listTokenSecrets(ctx, c, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range listed {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "minted,replaced" {
		t.Fatalf("listed %v, want the two token Secrets", names)
	}
	// One is replaced between the list and the delete: the new one is not
	// the object revoke judged, and stays.
	replaced := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant-a", Name: "replaced"}, replaced); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, replaced); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, tokenSecret("replaced")); err != nil {
		t.Fatal(err)
	}
	for _, s := range listed {
		err := deleteTokenSecret(ctx, c, s)
		switch s.Name {
		case "minted":
			if err != nil {
				t.Errorf("deleting minted: %v", err)
			}
		case "replaced":
			if err == nil || !strings.Contains(err.Error(), "was replaced since revoke listed it") {
				t.Errorf("deleting the replaced Secret: %v, want a refusal", err)
			}
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant-a", Name: "minted"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("minted after the sweep: %v, want gone", err)
	}
	for _, name := range []string{"replaced", "opaque"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant-a", Name: name}, &corev1.Secret{}); err != nil {
			t.Errorf("%s after the sweep: %v, want kept", name, err)
		}
	}
	// Gone already is no error.
	if err := deleteTokenSecret(ctx, c, listed[0]); err != nil {
		t.Errorf("deleting a Secret already gone: %v", err)
	}
}

// TestMayCreate: what revoke remembered of the roles it deleted says
// where the consumer could create Secrets — in the namespace of a Role
// that names them, or everywhere with a ClusterRole.
func TestMayCreate(t *testing.T) {
	role := func(kind, ns string, resources ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"rules": []any{map[string]any{
			"apiGroups": []any{""}, "resources": toAny(resources), "verbs": []any{"get", "list", "watch", "create", "update", "patch", "delete"}}}}}
		u.SetKind(kind)
		u.SetNamespace(ns)
		return u
	}
	var namespaced, clusterWide, none revokedAccess
	for _, r := range []struct {
		access *revokedAccess
		obj    *unstructured.Unstructured
	}{
		{&namespaced, role("Role", "tenant-a", "configmaps", "secrets")},
		{&clusterWide, role("ClusterRole", "", "secrets")},
		{&none, role("Role", "tenant-a", "configmaps")},
		{&none, role("Role", "kbind", "serviceaccounts/token")},
	} {
		if err := r.access.remember(r.obj.GetKind(), r.obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		access revokedAccess
		ns     string
		want   bool
	}{
		{"a Role naming Secrets, its namespace", namespaced, "tenant-a", true},
		{"a Role naming Secrets, another namespace", namespaced, "tenant-b", false},
		{"a ClusterRole naming Secrets", clusterWide, "tenant-b", true},
		{"no role naming Secrets", none, "tenant-a", false},
	} {
		if got := tc.access.mayCreate(tc.ns, "", "secrets"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
