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

package goroutines

import (
	"sync/atomic"
	"testing"
)

// TestCloseAndWait: CloseAndWait returns only after the running goroutines
// have, and nothing starts after it.
func TestCloseAndWait(t *testing.T) {
	var g Group
	release := make(chan struct{})
	var returned atomic.Bool
	if !g.Go(func() {
		<-release
		returned.Store(true)
	}) {
		t.Fatal("Go refused a goroutine before CloseAndWait")
	}
	closed := make(chan struct{})
	go func() {
		g.CloseAndWait()
		close(closed)
	}()
	close(release)
	<-closed
	if !returned.Load() {
		t.Error("CloseAndWait returned before the running goroutine did")
	}
	if g.Go(func() { t.Error("a goroutine started after CloseAndWait") }) {
		t.Error("Go reported a start after CloseAndWait")
	}
}
