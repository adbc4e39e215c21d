// Package session owns provider sessions (spec CONN-8): one client and one
// cache per Ready Connection, shared by everything that talks to that
// provider, with explicit QPS, burst and timeout. A session is rebuilt when
// the kubeconfig data changes and stopped when its Connection stops being
// Ready or is deleted. Starting one provider's cache never blocks another:
// no lock is held across a cache start or sync.
package session

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Options are the client settings of every provider session.
type Options struct {
	QPS     float32
	Burst   int
	Timeout time.Duration
	// Scheme knows every typed object sessions read or write.
	Scheme *runtime.Scheme
	// UserAgent identifies kbind on the provider.
	UserAgent string
}

// Session is one provider connection. Its clients are usable from
// creation; its cache starts on Activate.
type Session struct {
	// Connection is the name of the Connection the session belongs to.
	Connection string
	// Hash identifies the kubeconfig data the session was built from.
	Hash string
	// Namespace is the provider kubeconfig context's namespace, "" if unset.
	Namespace string
	// Config is the provider rest config with QPS, burst and timeout.
	Config *rest.Config
	// Client is a direct (uncached) client with the request timeout.
	Client client.Client
	// Discovery is a discovery client with the request timeout.
	Discovery discovery.DiscoveryInterface

	cluster  cluster.Cluster
	ctx      context.Context
	cancel   context.CancelFunc
	activate sync.Once
}

// Cache is the session's shared provider cache. Informers added to it
// start once the session is active.
func (s *Session) Cache() cache.Cache { return s.cluster.GetCache() }

// Context is cancelled when the session stops; goroutines bound to the
// session use it.
func (s *Session) Context() context.Context { return s.ctx }

// Done is closed when the session has stopped.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Activate starts the session's cache in the background, once. It returns
// at once: callers wait with WaitForCacheSync if they need to.
func (s *Session) Activate() {
	s.activate.Do(func() {
		go func() {
			if err := s.cluster.Start(s.ctx); err != nil {
				log.FromContext(s.ctx).Error(err, "Provider cache stopped with an error")
			}
		}()
	})
}

// WaitForCacheSync waits until every informer of the session's cache has
// synced, the session stops or ctx ends.
func (s *Session) WaitForCacheSync(ctx context.Context) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.ctx.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return s.cluster.GetCache().WaitForCacheSync(ctx)
}

// Go runs fn in a goroutine bound to the session's lifetime.
func (s *Session) Go(fn func(ctx context.Context)) {
	go fn(s.ctx)
}

// Manager holds the sessions of all Connections.
type Manager struct {
	opts Options
	base context.Context

	mu        sync.Mutex
	sessions  map[string]*Session
	listeners []func(connection string)
}

// NewManager returns a Manager whose sessions live at most as long as base.
func NewManager(base context.Context, opts Options) *Manager {
	return &Manager{opts: opts, base: base, sessions: map[string]*Session{}}
}

// Subscribe registers fn to be called (without locks held) whenever a
// Connection's session is created, rebuilt or stopped.
func (m *Manager) Subscribe(fn func(connection string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, fn)
}

// Get returns the Connection's session.
func (m *Manager) Get(connection string) (*Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[connection]
	return s, ok
}

// Ensure returns the Connection's session for the kubeconfig identified by
// hash, building it from cfg when there is none or the hash changed (the
// old session is stopped: credential rotation takes effect without a
// restart).
func (m *Manager) Ensure(connection, hash, namespace string, cfg *rest.Config) (*Session, error) {
	m.mu.Lock()
	old, ok := m.sessions[connection]
	if ok && old.Hash == hash {
		m.mu.Unlock()
		return old, nil
	}
	m.mu.Unlock()

	s, err := m.build(connection, hash, namespace, cfg)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if cur, ok := m.sessions[connection]; ok && cur != old {
		// Another reconcile won the race; keep its session.
		m.mu.Unlock()
		s.cancel()
		return cur, nil
	}
	m.sessions[connection] = s
	m.mu.Unlock()
	if old != nil {
		old.cancel()
	}
	m.notify(connection)
	return s, nil
}

// Stop stops and forgets the Connection's session, if any.
func (m *Manager) Stop(connection string) {
	m.mu.Lock()
	s, ok := m.sessions[connection]
	delete(m.sessions, connection)
	m.mu.Unlock()
	if ok {
		s.cancel()
		m.notify(connection)
	}
}

func (m *Manager) notify(connection string) {
	m.mu.Lock()
	listeners := append([]func(string){}, m.listeners...)
	m.mu.Unlock()
	for _, fn := range listeners {
		fn(connection)
	}
}

func (m *Manager) build(connection, hash, namespace string, base *rest.Config) (*Session, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = m.opts.QPS, m.opts.Burst
	// One token bucket for every request of the session (controller-runtime
	// builds a REST client per API, each of which would otherwise get its
	// own QPS budget).
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(m.opts.QPS, m.opts.Burst)
	cfg.UserAgent = m.opts.UserAgent
	// Watches must outlive the request timeout; only one-shot requests get it.
	direct := rest.CopyConfig(cfg)
	direct.Timeout = m.opts.Timeout

	cl, err := cluster.New(cfg, func(o *cluster.Options) {
		o.Scheme = m.opts.Scheme
		o.Cache.DefaultTransform = cache.TransformStripManagedFields()
		o.Logger = log.Log.WithName("provider").WithValues("connection", connection)
	})
	if err != nil {
		return nil, fmt.Errorf("creating provider cache: %w", err)
	}
	c, err := client.New(direct, client.Options{Scheme: m.opts.Scheme, Mapper: cl.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("creating provider client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(direct)
	if err != nil {
		return nil, fmt.Errorf("creating provider discovery client: %w", err)
	}
	ctx, cancel := context.WithCancel(log.IntoContext(m.base, log.Log.WithValues("connection", connection)))
	return &Session{
		Connection: connection, Hash: hash, Namespace: namespace,
		Config: cfg, Client: c, Discovery: dc,
		cluster: cl, ctx: ctx, cancel: cancel,
	}, nil
}
