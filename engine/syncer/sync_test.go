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
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A consumer write that conflicts or finds the object gone is retried
// without an error; any other failure is an error; success goes on.
func TestAfterConsumerWrite(t *testing.T) {
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	cases := []struct {
		name    string
		err     error
		want    outcome
		wantErr bool
	}{
		{"written", nil, next, false},
		{"conflict", apierrors.NewConflict(gr, "w", errors.New("changed")), requeue, false},
		{"gone", apierrors.NewNotFound(gr, "w"), requeue, false},
		{"anything else", errors.New("connection refused"), done, true},
	}
	for _, tc := range cases {
		out, err := afterConsumerWrite(tc.err)
		if out != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: afterConsumerWrite = %v, %v; want %v, error %v", tc.name, out, err, tc.want, tc.wantErr)
		}
	}
}
