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

// Package goroutines tracks the goroutines a long-running part of the
// engine starts (a manager.Runnable's informers, watches, heartbeats), so
// that stopping it can wait until they have all returned.
package goroutines

import "sync"

// Group runs and tracks goroutines. Once closed it starts none: whatever
// races the shutdown cannot leave one behind. The zero value is ready to
// use.
type Group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs fn in a tracked goroutine and reports whether it did: once
// CloseAndWait has been called nothing starts any more.
func (g *Group) Go(fn func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(fn)
	return true
}

// CloseAndWait refuses new goroutines and waits for the running ones. The
// caller first makes them return (cancels their context).
func (g *Group) CloseAndWait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
