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

package syncer

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

func TestKeptBy(t *testing.T) {
	for _, tc := range []struct {
		b    kbindv1alpha1.BindingObject
		want string
	}{
		{&kbindv1alpha1.ClusterBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}}, "ClusterBinding/widgets"},
		{&kbindv1alpha1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "widgets"}}, "Binding/team-a/widgets"},
	} {
		if got := KeptBy(tc.b); got != tc.want {
			t.Errorf("KeptBy(%s) = %q, want %q", tc.b.GetName(), got, tc.want)
		}
	}
}
