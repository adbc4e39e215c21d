package chart

import (
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/lint/support"
)

const backendChartDir = "../../charts/backend"

// renderBackend renders the backend chart as `helm install backend
// charts/backend -n kbind` would, without a cluster, by kind/name@namespace.
func renderBackend(t *testing.T, values map[string]any) (map[string]map[string]any, error) {
	t.Helper()
	c, err := loader.Load(backendChartDir)
	if err != nil {
		t.Fatal(err)
	}
	return renderChart(t, c, "backend", values)
}

func backendArgs(t *testing.T, objs map[string]map[string]any) string {
	t.Helper()
	return containerArgs(t, objs, "backend")
}

func TestBackendLint(t *testing.T) {
	lint := action.NewLint()
	lint.Strict = true
	for _, values := range []map[string]any{nil, {"reap": true}} {
		res := lint.Run([]string{backendChartDir}, values)
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint %v: %s", values, m)
			}
		}
		for _, err := range res.Errors {
			t.Errorf("helm lint %v: %v", values, err)
		}
	}
}

func TestBackendRenderDefaults(t *testing.T) {
	objs, err := renderBackend(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := backendArgs(t, objs)
	for _, want := range []string{"--namespace=kbind", "--leader-elect=false", "--stale-after=30m", "--reap=false", "--reap-interval=30s",
		"--qps=50", "--burst=100", "--timeout=30s", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081"} {
		if !strings.Contains(a, want) {
			t.Errorf("args %q lack %s", a, want)
		}
	}
	for _, k := range []string{"ServiceAccount/backend@kbind", "ClusterRole/backend", "ClusterRoleBinding/backend",
		"Role/backend-leader-election@kbind", "RoleBinding/backend-leader-election@kbind"} {
		if objs[k] == nil {
			t.Errorf("%s not rendered; rendered %v", k, keys(objs))
		}
	}
	// Report only: the backend may delete nothing.
	if rules := fmt.Sprint(objs["ClusterRole/backend"]["rules"]); strings.Contains(rules, "delete") {
		t.Errorf("report-only RBAC grants delete: %s", rules)
	}
	if rules := fmt.Sprint(objs["ClusterRole/backend"]["rules"]); !strings.Contains(rules, "resources:[leases] verbs:[get list watch patch]") {
		t.Errorf("the backend must read and annotate Leases: %s", rules)
	}
}

func TestBackendRenderReap(t *testing.T) {
	objs, err := renderBackend(t, map[string]any{
		"replicaCount": 2, "reap": true, "staleAfter": "1h",
		"rbac":    map[string]any{"reapGroups": []any{"example.org"}},
		"metrics": map[string]any{"service": map[string]any{"enabled": true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := backendArgs(t, objs)
	for _, want := range []string{"--leader-elect=true", "--reap=true", "--stale-after=1h"} {
		if !strings.Contains(a, want) {
			t.Errorf("args %q lack %s", a, want)
		}
	}
	rules := fmt.Sprint(objs["ClusterRole/backend"]["rules"])
	for _, want := range []string{
		"apiGroups:[example.org] resources:[*] verbs:[list delete]",
		"resources:[secrets configmaps namespaces] verbs:[list delete]",
		"resources:[leases] verbs:[get list watch patch delete]",
	} {
		if !strings.Contains(rules, want) {
			t.Errorf("reap RBAC lacks %s: %s", want, rules)
		}
	}
	if strings.Contains(rules, "apiGroups:[*] resources:[*] verbs:[list delete]") {
		t.Errorf("narrowed reap groups still delete everywhere: %s", rules)
	}
	if objs["Service/backend-metrics@kbind"] == nil {
		t.Error("metrics Service not rendered")
	}
}

func TestBackendSchemaRejectsBadValues(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"typo":            {"staleAfterr": "1h"},
		"wrong type":      {"reap": "yes"},
		"bad duration":    {"staleAfter": "soon"},
		"empty groups":    {"rbac": map[string]any{"reapGroups": []any{}}},
		"nested typo":     {"client": map[string]any{"qsp": 5}},
		"zero replicas":   {"replicaCount": 0},
		"negative burst":  {"client": map[string]any{"burst": -1}},
		"bad pull policy": {"image": map[string]any{"pullPolicy": "Sometimes"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := renderBackend(t, values); err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
				t.Errorf("expected a schema error, got %v", err)
			}
		})
	}
}
