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

package doctor

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestConnectionOf(t *testing.T) {
	conn := func(name string) kbindv1alpha1.Connection {
		return kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	probed := func(name string, p ConnectionProbe, unchecked string) *connectionProbe {
		p.Connection = conn(name)
		return &connectionProbe{ConnectionProbe: p, unchecked: unchecked}
	}
	healthy := ConnectionProbe{Secret: SecretOK, Reached: true}
	conns := []kbindv1alpha1.Connection{conn("a"), conn("b"), conn("out-of-scope")}
	probes := map[string]*connectionProbe{
		"a":      probed("a", healthy, ""),
		"b":      probed("b", ConnectionProbe{Secret: SecretOK}, ""),
		"failed": probed("failed", healthy, "Connection failed: cannot read its Secret"),
	}
	for _, tc := range []struct {
		name, conn string
		wantConn   string // "" for none
		wantBroken bool
	}{
		{"probed and healthy", "a", "a", false},
		{"probed, provider not reached", "b", "b", true},
		{"probe could not run", "failed", "failed", true},
		{"not probed (out of scope): taken as is", "out-of-scope", "out-of-scope", false},
		{"no such Connection", "missing", "", false},
	} {
		b := BindingState{Kind: "ClusterBinding", Spec: kbindv1alpha1.BindingSpec{ConnectionRef: kbindv1alpha1.ConnectionReference{Name: tc.conn}}}
		got, broken := connectionOf(b, conns, probes)
		gotName := ""
		if got != nil {
			gotName = got.Name
		}
		if gotName != tc.wantConn || broken != tc.wantBroken {
			t.Errorf("%s: Connection %q broken %v, want %q broken %v", tc.name, gotName, broken, tc.wantConn, tc.wantBroken)
		}
	}
}

func TestRouteOf(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		owner, want string
	}{
		{nil, "east", "east"},
		{map[string]string{kbindv1alpha1.ConnectionAnnotation: "west"}, "east", "west"},
		{map[string]string{kbindv1alpha1.ConnectionAnnotation: ""}, "east", "east"},
		{map[string]string{"other": "x"}, "east", "east"},
	} {
		if got := RouteOf(tc.annotations, tc.owner); got != tc.want {
			t.Errorf("RouteOf(%v, %q) = %q, want %q", tc.annotations, tc.owner, got, tc.want)
		}
	}
}
