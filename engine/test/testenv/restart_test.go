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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestParentPID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stat string
		want int
	}{
		{"123 (etcd) S 77 123 123 0 -1", 77},
		{"123 (a b) c)) R 9 1 1", 9},
		{"123 (etcd)", -1},
		{"garbage", -1},
		{"1 (x) S notanumber", -1},
	} {
		if got := parentPID(tc.stat); got != tc.want {
			t.Errorf("parentPID(%q) = %d, want %d", tc.stat, got, tc.want)
		}
	}
}

func TestMatchesComponent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"/a/etcd", "--x=1", "--data-dir=/d"}, true},
		{[]string{"/a/etcd", "--data-dir=/d2"}, false},
		{[]string{"/a/kube-apiserver", "--data-dir=/d"}, false},
		{[]string{"/a/etcd"}, false},
		{nil, false},
	} {
		if got := matchesComponent(tc.args, "etcd", "--data-dir=/d"); got != tc.want {
			t.Errorf("matchesComponent(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// TestRestartComponents stops and starts etcd and the kube-apiserver on
// their data: an object written before is there after, through the same
// admin credentials and address.
func TestRestartComponents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := StartClusterT(t, "restart", ClusterOptions{})
	cs := kubernetes.NewForConfigOrDie(c.Config)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: "default"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.StartComponent(Etcd); err == nil {
		t.Error("starting a running etcd should fail")
	}
	// The API server first: without its etcd it shuts down slowly.
	for _, comp := range []Component{APIServer, Etcd} {
		start := time.Now()
		if err := c.StopComponent(comp); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s stopped in %s", comp, time.Since(start))
		if err := c.StopComponent(comp); err == nil {
			t.Errorf("stopping %s twice should fail", comp)
		}
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server still answers after it was stopped")
	}
	for _, comp := range []Component{Etcd, APIServer} {
		start := time.Now()
		if err := c.StartComponent(comp); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s started in %s", comp, time.Since(start))
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("the object written before the restart: %v", err)
	}
	// A second round goes through the processes the first one started.
	if err := c.StopComponent(APIServer); err != nil {
		t.Fatal(err)
	}
	if err := c.StartComponent(APIServer); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("after the second restart: %v", err)
	}
}
