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
