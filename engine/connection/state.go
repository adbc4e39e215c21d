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
// forConnection is what a Connection's provider sees of it.
type consumerUID struct {
	mu  sync.Mutex
	uid string
}

// read returns the identity connection presents to its provider, reading
// the cluster's through reader until a read succeeds.
func (c *consumerUID) read(ctx context.Context, reader *identity.Reader, connection string) (string, error) {
	c.mu.Lock()
	uid := c.uid
	c.mu.Unlock()
	if uid == "" {
		var err error
		if uid, err = reader.ClusterUID(ctx); err != nil {
			return "", err
		}
		c.mu.Lock()
		c.uid = uid
		c.mu.Unlock()
	}
	return consumerIdentity(uid, connection), nil
}

// consumerIdentity is the identity connection presents to its provider
// (CONN-3): the consumer cluster's own, the same for every Connection. A
// konnector built with the kbindbench tag (identity_bench.go, make bench
// only) derives one per Connection instead, so that one consumer cluster
// stands for many consumers in the provider-scale bench. It is a seam for
// the bench, not an option: no flag or setting reaches it.
var consumerIdentity = func(clusterUID, _ string) string { return clusterUID }
