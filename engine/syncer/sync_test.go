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
