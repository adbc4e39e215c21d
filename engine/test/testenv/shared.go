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
	"fmt"
	"os"
	"sync"
	"testing"
)

// Shared is what a package's tests share — a cluster, a pair, a running
// engine — started by the first test that asks for it and stopped once,
// by the package's TestMain (see Main). A test that never asks never waits
// for it: pure tests of a package with API server tests start at once.
//
// A start that fails is not retried: every later Get fails the same way,
// so one broken control plane reads as one cause, not as a cascade of
// timeouts.
type Shared[T any] struct {
	name  string
	start func() (T, func() error, error)

	mu      sync.Mutex
	started bool
	v       T
	stop    func() error
	err     error
}

// NewShared returns a Shared that start starts on first use; name says
// what it is in errors ("consumer/provider pair").
func NewShared[T any](name string, start func() (T, func() error, error)) *Shared[T] {
	return &Shared[T]{name: name, start: start}
}

// Get returns the shared value, starting it when no test has yet, and
// fails the test when it cannot be started.
func (s *Shared[T]) Get(tb testing.TB) T {
	tb.Helper()
	v, err := s.get()
	if err != nil {
		tb.Fatalf("starting the package's shared %s: %v", s.name, err)
	}
	return v
}

func (s *Shared[T]) get() (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		s.v, s.stop, s.err = s.start()
		if s.err != nil {
			s.err = fmt.Errorf("%s: %w", s.name, s.err)
		}
	}
	return s.v, s.err
}

// Stop stops the shared value if a test started it.
func (s *Shared[T]) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.err != nil || s.stop == nil {
		return nil
	}
	stop := s.stop
	s.stop = nil
	if err := stop(); err != nil {
		return fmt.Errorf("stopping %s: %w", s.name, err)
	}
	return nil
}

// Stopper is what Main stops after the tests ran: a Shared or a Pool.
type Stopper interface{ Stop() error }

// Main runs a package's tests, then stops whatever of stoppers they
// started, and exits with the tests' code (1 when a stop failed after
// passing tests). Use it as the whole of a TestMain:
//
//	var pair = testenv.NewShared("consumer/provider pair", ...)
//	func TestMain(m *testing.M) { testenv.Main(m, pair) }
func Main(m *testing.M, stoppers ...Stopper) {
	code := m.Run()
	var errs []error
	for _, s := range stoppers {
		errs = append(errs, s.Stop())
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Pool hands out fresh, unshared values — a cluster or a pair — to tests
// that need one of their own: their own consumer identity, an engine of
// their own, restarts of a component, a second provider. From the second
// Take on, the next one is started in the background as one is taken, so
// a test waits only for what the previous test left unfinished (a package
// that takes one only once never pays for a second); each is stopped when
// its test ends. Nothing is started before the first Take.
type Pool[T any] struct {
	name  string
	start func() (T, func() error, error)

	mu     sync.Mutex
	ready  chan pooled[T] // the one started ahead, if any
	taken  int
	closed bool
}

type pooled[T any] struct {
	v    T
	stop func() error
	err  error
}

// NewPool returns a Pool of values start starts; name says what they are.
func NewPool[T any](name string, start func() (T, func() error, error)) *Pool[T] {
	return &Pool[T]{name: name, start: start}
}

// Take returns a fresh value for tb, stopped when tb ends, and starts the
// next one in the background.
func (p *Pool[T]) Take(tb testing.TB) T {
	tb.Helper()
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.taken++
	if !p.closed && p.taken > 1 {
		p.ready = p.startAhead()
	}
	p.mu.Unlock()
	var got pooled[T]
	if ready != nil {
		got = <-ready
	} else {
		got = p.startOne()
	}
	if got.err != nil {
		tb.Fatalf("starting a fresh %s: %v", p.name, got.err)
	}
	tb.Cleanup(func() {
		if err := got.stop(); err != nil {
			tb.Errorf("stopping a %s: %v", p.name, err)
		}
	})
	return got.v
}

func (p *Pool[T]) startOne() pooled[T] {
	v, stop, err := p.start()
	return pooled[T]{v: v, stop: stop, err: err}
}

func (p *Pool[T]) startAhead() chan pooled[T] {
	ch := make(chan pooled[T], 1)
	go func() { ch <- p.startOne() }()
	return ch
}

// Stop stops the value started ahead, if any, and starts no more.
func (p *Pool[T]) Stop() error {
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.closed = true
	p.mu.Unlock()
	if ready == nil {
		return nil
	}
	got := <-ready
	if got.err != nil || got.stop == nil {
		return nil
	}
	if err := got.stop(); err != nil {
		return fmt.Errorf("stopping the unused %s: %w", p.name, err)
	}
	return nil
}

// SharedPair is a consumer/provider pair a package's tests share, started
// by the first test that asks (opts.Dir: a temporary directory).
func SharedPair(opts PairOptions) *Shared[*Pair] {
	return NewShared("consumer/provider pair", func() (*Pair, func() error, error) { return startPair(opts) })
}

// PairPool hands out fresh consumer/provider pairs, one per test.
func PairPool(opts PairOptions) *Pool[*Pair] {
	return NewPool("consumer/provider pair", func() (*Pair, func() error, error) { return startPair(opts) })
}

// SharedCluster is a single cluster a package's tests share.
func SharedCluster(name string, opts ClusterOptions) *Shared[*Cluster] {
	return NewShared("cluster "+name, func() (*Cluster, func() error, error) { return startOneCluster(name, opts) })
}

// ClusterPool hands out fresh single clusters, one per test.
func ClusterPool(name string, opts ClusterOptions) *Pool[*Cluster] {
	return NewPool("cluster "+name, func() (*Cluster, func() error, error) { return startOneCluster(name, opts) })
}

// startPair and startOneCluster start in a directory of their own under
// opts.Dir (or the system's temporary directory), removed when stopped
// cleanly: a pool starts many with the same options.
func startPair(opts PairOptions) (*Pair, func() error, error) {
	dir, err := os.MkdirTemp(opts.Dir, "kbind-pair-")
	if err != nil {
		return nil, nil, fmt.Errorf("creating pair directory: %w", err)
	}
	opts.Dir = dir
	p, err := StartPair(opts)
	if err != nil {
		return nil, nil, err
	}
	return p, func() error { return removeAfter(p.Stop(), dir) }, nil
}

func startOneCluster(name string, opts ClusterOptions) (*Cluster, func() error, error) {
	dir, err := os.MkdirTemp(opts.Dir, "kbind-cluster-")
	if err != nil {
		return nil, nil, fmt.Errorf("creating cluster directory: %w", err)
	}
	opts.Dir = dir
	c, err := StartCluster(name, opts)
	if err != nil {
		return nil, nil, err
	}
	return c, func() error { return removeAfter(c.Stop(), dir) }, nil
}

// removeAfter removes dir when stopping succeeded; a failed stop keeps the
// logs for the reader.
func removeAfter(stopErr error, dir string) error {
	if stopErr != nil {
		return stopErr
	}
	return os.RemoveAll(dir)
}
