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

package testenv

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestPair(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := StartPairT(t, PairOptions{})

	// The two clusters are distinct: different kube-system UIDs.
	uid := func(c *Cluster) string {
		cs := kubernetes.NewForConfigOrDie(c.Config)
		ns, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		return string(ns.UID)
	}
	if uid(p.Consumer) == uid(p.Provider) {
		t.Fatal("consumer and provider share a kube-system UID")
	}

	// The pair kubeconfig addresses both by the guide's context names; only
	// the consumer has the kbind API.
	out, err := Kubectl(ctx, p.KubeconfigPath, "--context=consumer", "api-resources", "--api-group=core.kbind.io", "-o", "name")
	if err != nil || !strings.Contains(out, "connections.core.kbind.io") {
		t.Errorf("consumer context lacks the kbind API: %v\n%s", err, out)
	}
	out, err = Kubectl(ctx, p.KubeconfigPath, "--context=provider", "api-resources", "--api-group=core.kbind.io", "-o", "name")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("provider context should not serve the kbind API: %v\n%s", err, out)
	}

	// A provisioned user is authenticated but has no permissions.
	u, err := p.Provider.AddUser("restricted", "kbind:test")
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubernetes.NewForConfigOrDie(u.Config).CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("restricted user reading kube-system: %v, want Forbidden", err)
	}
	if !strings.Contains(string(u.Kubeconfig), "client-certificate-data") {
		t.Error("user kubeconfig should carry inline credentials")
	}
}

// Not parallel: it changes the process's environment (t.Setenv), which
// the parallel tests read when they start clusters after it.
func TestAssetsDirExplainsMissingBinaries(t *testing.T) {
	t.Setenv(AssetsEnv, t.TempDir())
	_, err := AssetsDir()
	if err == nil || !strings.Contains(err.Error(), "make controlplane") {
		t.Errorf("AssetsDir() error %v should tell to run make controlplane", err)
	}
}
