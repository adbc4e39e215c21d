package connection

import (
	"context"
	"sync"

	"github.com/kbind/kbind/engine/identity"
)

// The reconciler's own memory between reconciles is about the consumer
// side only — each Connection's credential renewal (credentials.go),
// whether its time to Ready was observed, the consumer cluster's identity.
// What is known of a provider (probes, heartbeat, exports watch) is the
// session layer's: session.Manager.Health.

// perConnection is state kept per Connection name, safe for concurrent
// use. Its zero value is ready to use.
type perConnection[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

// get returns the Connection's value, the zero value when there is none.
func (p *perConnection[V]) get(name string) V {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[name]
}

// set stores the Connection's value.
func (p *perConnection[V]) set(name string, v V) {
	p.swap(name, v)
}

// swap stores the Connection's value and returns the one it replaced.
func (p *perConnection[V]) swap(name string, v V) (old V) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]V{}
	}
	old = p.m[name]
	p.m[name] = v
	return old
}

// delete forgets the Connection.
func (p *perConnection[V]) delete(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, name)
}

// consumerUID is the consumer cluster's identity, read once it is first
// needed and kept: it does not change under a running konnector.
type consumerUID struct {
	mu  sync.Mutex
	uid string
}

// read returns the identity, reading it through reader until a read
// succeeds.
func (c *consumerUID) read(ctx context.Context, reader *identity.Reader) (string, error) {
	c.mu.Lock()
	uid := c.uid
	c.mu.Unlock()
	if uid != "" {
		return uid, nil
	}
	uid, err := reader.ClusterUID(ctx)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.uid = uid
	c.mu.Unlock()
	return uid, nil
}
