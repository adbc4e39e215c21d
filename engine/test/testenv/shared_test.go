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
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestSharedStartsOnceOnFirstUse(t *testing.T) {
	var starts, stops atomic.Int32
	s := NewShared("thing", func() (int, func() error, error) {
		starts.Add(1)
		return 42, func() error { stops.Add(1); return nil }, nil
	})
	if err := s.Stop(); err != nil || stops.Load() != 0 {
		t.Fatalf("Stop before any Get: err %v, %d stops; want nothing stopped", err, stops.Load())
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := s.Get(t); got != 42 {
				t.Errorf("Get = %d, want 42", got)
			}
		})
	}
	wg.Wait()
	if starts.Load() != 1 {
		t.Fatalf("%d starts for 8 concurrent Gets, want 1", starts.Load())
	}
	if err := s.Stop(); err != nil || stops.Load() != 1 {
		t.Fatalf("Stop: err %v, %d stops, want 1", err, stops.Load())
	}
	if err := s.Stop(); err != nil || stops.Load() != 1 {
		t.Fatalf("a second Stop stopped again (%d stops, err %v)", stops.Load(), err)
	}
}

func TestSharedStartErrorIsKept(t *testing.T) {
	var starts atomic.Int32
	s := NewShared("thing", func() (int, func() error, error) {
		starts.Add(1)
		return 0, nil, errors.New("no etcd")
	})
	for range 2 {
		if _, err := s.get(); err == nil || err.Error() != "thing: no etcd" {
			t.Fatalf("get error = %v, want %q", err, "thing: no etcd")
		}
	}
	if starts.Load() != 1 {
		t.Fatalf("a failed start was retried (%d starts)", starts.Load())
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop after a failed start: %v", err)
	}
}

func TestPoolHandsOutFreshValuesAndStopsThem(t *testing.T) {
	var started, stopped atomic.Int32
	p := NewPool("thing", func() (int32, func() error, error) {
		n := started.Add(1)
		return n, func() error { stopped.Add(1); return nil }, nil
	})
	seen := map[int32]bool{}
	for i := range 3 {
		t.Run("take", func(t *testing.T) {
			v := p.Take(t)
			if seen[v] {
				t.Fatalf("take %d got %d again", i, v)
			}
			seen[v] = true
		})
	}
	if stopped.Load() != 3 {
		t.Fatalf("%d stopped after three tests ended, want 3", stopped.Load())
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if started.Load() != 4 || stopped.Load() != 4 {
		t.Fatalf("after Stop: %d started, %d stopped; want the one started ahead stopped too (4, 4)", started.Load(), stopped.Load())
	}
}
