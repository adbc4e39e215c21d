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

package schema

import (
	"errors"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A consumer CRD at the edge of the storage limit is stored but never gets
// a status (the API server's naming controller cannot write it): the
// binding said "not established yet" for ever. Unestablished names the
// cause once the naming controller has had its time.
func TestUnestablished(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	crd := func(age time.Duration, conds ...apiextensionsv1.CustomResourceDefinitionCondition) *apiextensionsv1.CustomResourceDefinition {
		c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.org"}}
		if age >= 0 {
			c.CreationTimestamp = metav1.NewTime(now.Add(-age))
		}
		c.Status.Conditions = conds
		return c
	}
	cond := func(typ apiextensionsv1.CustomResourceDefinitionConditionType, status apiextensionsv1.ConditionStatus) apiextensionsv1.CustomResourceDefinitionCondition {
		return apiextensionsv1.CustomResourceDefinitionCondition{Type: typ, Status: status, Reason: "MultipleNames", Message: `"widget" is already in use`}
	}
	cases := []struct {
		name  string
		crd   *apiextensionsv1.CustomResourceDefinition
		wants []string // fragments; none: ""
	}{
		{"established", crd(time.Hour, cond(apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionTrue), cond(apiextensionsv1.Established, apiextensionsv1.ConditionTrue)), nil},
		{"just created, no status yet", crd(time.Second), nil},
		{"no status within the grace period", crd(NamesGrace - time.Second), nil},
		{"names accepted, establishing", crd(time.Hour, cond(apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionTrue)), nil},
		{"no creation time (not read from the API server)", crd(-1), nil},
		{"names refused", crd(time.Second, cond(apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse)),
			[]string{"widgets.example.org is not established", "refuses its names", "MultipleNames", `"widget" is already in use`}},
		{"no status long after creation: too large with its status", crd(NamesGrace),
			[]string{"widgets.example.org", "MiB", "is not established", "no status", "too large", "--max-request-bytes", "make the provider's schema smaller"}},
	}
	for _, tc := range cases {
		got := Unestablished(tc.crd, now)
		if len(tc.wants) == 0 && got != "" {
			t.Errorf("%s: %q, want none", tc.name, got)
		}
		for _, w := range tc.wants {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
	}
}

// The consumer's etcd refusing a CRD said "etcdserver: request is too
// large", naming neither the limit nor a way out.
func TestWriteError(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.org"}}
	cases := []struct {
		name  string
		err   error
		wants []string
	}{
		{"etcd's limit", apierrors.NewInternalError(errors.New("etcdserver: request is too large")),
			[]string{"creating consumer CRD widgets.example.org", "cannot store it", "MiB", "too large", "--max-request-bytes", "make the provider's schema smaller", "etcdserver: request is too large"}},
		{"the API server's 413", apierrors.NewRequestEntityTooLargeError("limit is 3145728"),
			[]string{"creating consumer CRD widgets.example.org", "too large", "limit is 3145728"}},
		{"anything else, as it is", apierrors.NewServiceUnavailable("down"),
			[]string{"creating consumer CRD widgets.example.org: down"}},
	}
	for _, tc := range cases {
		err := writeError("creating", crd.Name, crd, tc.err)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: %v does not wrap the API error", tc.name, err)
		}
		for _, w := range tc.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
	}
}
