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
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func setCondition(conds *[]metav1.Condition, t kbindv1alpha1.ConditionType, status metav1.ConditionStatus, reason kbindv1alpha1.Reason) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: string(t), Status: status, Reason: string(reason), Message: "set by test",
	})
}

// tableRow finds the header and the row of name in kubectl's table output
// and returns them as whitespace-separated fields.
func tableRow(t *testing.T, out, name string) (header, row []string) {
	t.Helper()
	var lastHeader []string
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if fields[0] == "NAME" || fields[0] == "NAMESPACE" {
			lastHeader = fields
			continue
		}
		for _, f := range fields {
			if f == name || strings.HasSuffix(f, "/"+name) {
				return lastHeader, fields
			}
		}
	}
	t.Fatalf("no row for %s in kubectl output:\n%s", name, out)
	return nil, nil
}

func assertColumns(t *testing.T, header, row []string, want map[string]string) {
	t.Helper()
	if len(header) != len(row) {
		t.Fatalf("header %v and row %v differ in length", header, row)
	}
	for col, wantValue := range want {
		idx := -1
		for i, h := range header {
			if h == col {
				idx = i
			}
		}
		if idx < 0 {
			t.Errorf("column %s missing from header %v", col, header)
			continue
		}
		if ok, _ := regexp.MatchString("^"+wantValue+"$", row[idx]); !ok {
			t.Errorf("column %s = %q, want %q (row %v)", col, row[idx], wantValue, row)
		}
	}
}

func TestKubectlPrinterColumns(t *testing.T) {
	c := kube(t)
	cluster := shared.Get(t).cluster
	ctx := context.Background()

	conn := newConnection(uniqueName("printer"))
	if err := c.Create(ctx, conn); err != nil {
		t.Fatal(err)
	}
	conn.Status.ActiveSchemaSource = kbindv1alpha1.ActiveSchemaSourceCRD
	setCondition(&conn.Status.Conditions, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	if err := c.Status().Update(ctx, conn); err != nil {
		t.Fatal(err)
	}

	spec := kbindv1alpha1.BindingSpec{
		ConnectionRef: kbindv1alpha1.ConnectionReference{Name: conn.Name},
		APIs:          []kbindv1alpha1.APIReference{{Name: "widgets.example.org"}},
	}
	cb := &kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("widgets")}, Spec: spec}
	if err := c.Create(ctx, cb); err != nil {
		t.Fatal(err)
	}
	setCondition(&cb.Status.Conditions, kbindv1alpha1.ConditionReady, metav1.ConditionTrue, kbindv1alpha1.ReasonAsExpected)
	setCondition(&cb.Status.Conditions, kbindv1alpha1.ConditionConflicts, metav1.ConditionFalse, kbindv1alpha1.ReasonAsExpected)
	if err := c.Status().Update(ctx, cb); err != nil {
		t.Fatal(err)
	}

	ns := uniqueName("team")
	ensureNamespace(t, c, ns)
	b := &kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "widgets", Namespace: ns}, Spec: spec}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	setCondition(&b.Status.Conditions, kbindv1alpha1.ConditionReady, metav1.ConditionFalse, kbindv1alpha1.ReasonPending)
	setCondition(&b.Status.Conditions, kbindv1alpha1.ConditionConflicts, metav1.ConditionTrue, kbindv1alpha1.ReasonForeignObjectExists)
	if err := c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}

	out, err := cluster.Kubectl(ctx, "get", "connections,clusterbindings")
	if err != nil {
		t.Fatal(err)
	}
	header, row := tableRow(t, out, conn.Name)
	if got := strings.Join(header, " "); got != "NAME READY SOURCE SECRET ISOLATION AGE" {
		t.Errorf("connection columns = %q", got)
	}
	assertColumns(t, header, row, map[string]string{"READY": "True", "SOURCE": "CRD", "SECRET": "provider-kubeconfig", "ISOLATION": "None", "AGE": `\d+s`})

	header, row = tableRow(t, out, cb.Name)
	if got := strings.Join(header, " "); got != "NAME CONNECTION READY CONFLICTS AGE" {
		t.Errorf("clusterbinding columns = %q", got)
	}
	assertColumns(t, header, row, map[string]string{"CONNECTION": conn.Name, "READY": "True", "CONFLICTS": "False"})

	out, err = cluster.Kubectl(ctx, "get", "bindings.core.kbind.io", "-A")
	if err != nil {
		t.Fatal(err)
	}
	header, row = tableRow(t, out, ns)
	if got := strings.Join(header, " "); got != "NAMESPACE NAME CONNECTION READY CONFLICTS AGE" {
		t.Errorf("binding columns = %q", got)
	}
	assertColumns(t, header, row, map[string]string{"NAMESPACE": ns, "NAME": "widgets", "CONNECTION": conn.Name, "READY": "False", "CONFLICTS": "True"})

	// The kbind category lists all three kinds.
	out, err = cluster.Kubectl(ctx, "get", "kbind", "-A", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"connection.core.kbind.io/" + conn.Name, "clusterbinding.core.kbind.io/" + cb.Name, "binding.core.kbind.io/widgets"} {
		if !strings.Contains(out, want) {
			t.Errorf("`kubectl get kbind -A` misses %s:\n%s", want, out)
		}
	}
}
