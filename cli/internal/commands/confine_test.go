package commands

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestInARow: confinement counts only consecutive confirmations; one
// unconfirmed probe starts over, a timeout says what the last one saw,
// and a probe error ends the wait.
func TestInARow(t *testing.T) {
	seq := func(answers ...bool) func(context.Context) (bool, string, error) {
		i := 0
		return func(context.Context) (bool, string, error) {
			a := answers[min(i, len(answers)-1)]
			i++
			if !a {
				return false, "allowed", nil
			}
			return true, "", nil
		}
	}
	if _, err := inARow(context.Background(), 5*time.Second, seq(false, true, true, false, true, true, true, true, true)); err != nil {
		t.Errorf("five in a row after a reset: %v", err)
	}
	calls := 0
	last, err := inARow(context.Background(), 600*time.Millisecond, func(context.Context) (bool, string, error) {
		calls++
		return calls%4 != 0, "allowed", nil // never five in a row
	})
	if !errors.Is(err, errNotInARow) || last != "allowed" {
		t.Errorf("never five in a row: %q, %v", last, err)
	}
	boom := errors.New("boom")
	if _, err := inARow(context.Background(), 5*time.Second, func(context.Context) (bool, string, error) { return false, "", boom }); !errors.Is(err, boom) {
		t.Errorf("a probe error: %v", err)
	}
}
