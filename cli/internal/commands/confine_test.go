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
