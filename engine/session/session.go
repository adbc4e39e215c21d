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

// Package session owns provider sessions (CONN-8): one client and one
// cache per Connection, shared by everything that talks to that provider,
// with explicit QPS, burst and timeout. A session built from new kubeconfig
// data is a candidate until the Connection reconciler has verified the
// provider's identity with it; only then is it published (Get returns it)
// and the previous one stopped, so nothing is ever written to an unverified
// cluster. Every one-shot request — direct client, discovery, the REST
// mapper's discovery — carries the request timeout, so a provider that
// accepts connections and never answers cannot block a caller. Starting one
// provider's cache never blocks another: no lock is held across a cache
// start or sync.
//
// The Manager also owns each Connection's provider health (health.go): the
// last identity probe and discovery pass, the heartbeat that renews its
// Lease (HB-1) and its last result, and the watch of the exported CRDs.
// The Connection reconciler reads that health and is woken through one
// channel, HealthChanges. The Manager is a leader-elected
// manager.Runnable whose Start stops all of it and waits for its
// goroutines (lifecycle.go).
//
// Requirement ids in comments (such as CONN-8) refer to docs/requirements.md.
package session

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/identity"
	"github.com/kbind/kbind/engine/internal/goroutines"
	"github.com/kbind/kbind/engine/internal/slim"
	"github.com/kbind/kbind/engine/internal/watchjson"
	"github.com/kbind/kbind/engine/isolation"
)

// Options are the client settings of every provider session.
type Options struct {
	QPS     float32
	Burst   int
	Timeout time.Duration
	// DisableCompression refuses gzip-compressed responses.
	DisableCompression bool
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
	// ConfinedTo is the one provider namespace the session's cache watches
	// (Namespace isolation), "" for every namespace.
	ConfinedTo string
	// Isolation is the Connection's isolation mapping (ConfinedTo is its
	// ConfinedTo).
	Isolation isolation.Mapping
	// Config is the provider rest config with QPS and burst, without a
	// request timeout (watches use it).
	Config *rest.Config
	// Direct is Config with the request timeout, for one-shot requests.
	Direct *rest.Config
	// Client is a direct (uncached) client with the request timeout.
	Client client.Client
	// Discovery is a discovery client with the request timeout.
	Discovery discovery.DiscoveryInterface
	// HTTPClient (for watches, no timeout) and DirectHTTPClient (with the
	// request timeout) share the session's own transport: clients made
	// for the session use them, so that its provider connections are its
	// own and close when it stops.
	HTTPClient, DirectHTTPClient *http.Client
	// CRDs reads provider CRDs for schema discovery: the exported ones from
	// a watch once it has synced, the rest directly (see ExportedCRDs).
	CRDs *ExportedCRDs

	// token is the bearer token every request carries when the kubeconfig
	// authenticates with one (nil otherwise): SetToken swaps it in place.
	token *bearer

	// identity reads the provider's cluster identity, made on first use
	// (ClusterUID).
	identityMu sync.Mutex
	identity   *identity.Reader

	// duplicate is the Manager's verdict on the Connection's heartbeat
	// Lease (Manager.Duplicate); nil: Alone.
	duplicate func() heartbeat.Verdict

	// spawn runs the session's goroutines (the Manager's tracked ones);
	// shutdown is closed when the Manager stops.
	spawn    func(func()) bool
	shutdown <-chan struct{}

	cluster  cluster.Cluster
	ctx      context.Context
	cancel   context.CancelFunc
	activate sync.Once
	// started is set when the cache starts; stopped is closed when it has
	// stopped.
	started atomic.Bool
	stopped chan struct{}
}

// SetToken makes every request of the session from now on carry token:
// a renewed credential replaces the kubeconfig's without rebuilding the
// session — its cache, informers and open watches stay (a watch is
// authenticated when it opens, and the next one opens with the new
// token). It reports whether the token changed, and does nothing for a
// session whose kubeconfig holds no bearer token.
func (s *Session) SetToken(token string) bool {
	if s.token == nil || token == "" {
		return false
	}
	return s.token.set(token)
}

// Token returns the bearer token the session's requests carry, "" when
// it authenticates otherwise.
func (s *Session) Token() string {
	if s.token == nil {
		return ""
	}
	return s.token.get()
}

// Duplicate is the verdict, now, on the Connection's heartbeat Lease
// (Manager.Duplicate): whether another live konnector renews it with this
// consumer's identity (a restored clone). The releaser deletes provider
// copies only while it is heartbeat.Alone.
func (s *Session) Duplicate() heartbeat.Verdict {
	if s.duplicate == nil {
		return heartbeat.Alone
	}
	return s.duplicate()
}

// Cache is the session's shared provider cache. Informers added to it
// start once the session is active.
func (s *Session) Cache() cache.Cache { return s.cluster.GetCache() }

// Context is cancelled when the session stops; goroutines bound to the
// session use it.
func (s *Session) Context() context.Context { return s.ctx }

// Stopped tells whether the session has stopped (been replaced, stopped
// or unpublished).
func (s *Session) Stopped() bool { return s.ctx != nil && s.ctx.Err() != nil }

// Done is closed when the session has stopped.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Activate starts the session's cache in the background, once. It returns
// at once: callers wait with WaitForCacheSync if they need to.
func (s *Session) Activate() {
	s.activate.Do(func() {
		s.started.Store(true)
		started := s.spawn(func() {
			defer close(s.stopped)
			if err := s.cluster.Start(s.ctx); err != nil {
				log.FromContext(s.ctx).Error(err, "Provider cache stopped with an error")
			}
		})
		if !started {
			// The Manager has stopped: so has the session.
			close(s.stopped)
		}
	})
}

// ClusterUID reads the provider's cluster identity through the session's
// direct client: every identity request carries the request timeout. The
// reader, which asks discovery once whether the provider is kcp, is the
// session's own — a new session, even of the same kubeconfig, asks again.
func (s *Session) ClusterUID(ctx context.Context) (string, error) {
	s.identityMu.Lock()
	reader := s.identity
	if reader == nil {
		var err error
		if reader, err = identity.NewReaderForClient(s.Direct, s.DirectHTTPClient); err != nil {
			s.identityMu.Unlock()
			return "", err
		}
		s.identity = reader
	}
	s.identityMu.Unlock()
	return reader.ClusterUID(ctx)
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

// Go runs fn in a goroutine bound to the session's lifetime (and the
// Manager's: its Start waits for fn to return).
func (s *Session) Go(fn func(ctx context.Context)) {
	s.spawn(func() { fn(s.ctx) })
}

// Manager holds the sessions of all Connections — at most one published
// session and one unverified candidate per Connection — and each
// Connection's provider health (health.go). It is a manager.Runnable
// (lifecycle.go).
type Manager struct {
	opts Options
	// ctx bounds every session, heartbeat and watch; cancel ends them
	// (Start, once its context ends).
	ctx        context.Context
	cancel     context.CancelFunc
	goroutines goroutines.Group
	// changes carries HealthChanges.
	changes chan event.TypedGenericEvent[*kbindv1alpha1.Connection]

	// nonce is this konnector process's (heartbeat.NewNonce), written on
	// every heartbeat Lease it renews.
	nonce string

	mu         sync.Mutex
	sessions   map[string]*Session
	candidates map[string]*Session
	records    map[string]*connRecord
	listeners  []func(connection string)
}

// NewManager returns a Manager whose sessions, heartbeats and watches live
// at most as long as base, and until Start's context ends.
func NewManager(base context.Context, opts Options) *Manager {
	ctx, cancel := context.WithCancel(base)
	return &Manager{
		opts: opts, ctx: ctx, cancel: cancel, nonce: heartbeat.NewNonce(),
		changes:  make(chan event.TypedGenericEvent[*kbindv1alpha1.Connection], healthChangesBuffer),
		sessions: map[string]*Session{}, candidates: map[string]*Session{}, records: map[string]*connRecord{},
	}
}

// Subscribe registers fn to be called (without locks held) whenever a
// Connection's published session is replaced or stopped.
func (m *Manager) Subscribe(fn func(connection string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, fn)
}

// Get returns the Connection's published (identity-verified) session.
func (m *Manager) Get(connection string) (*Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[connection]
	return s, ok
}

// Prepare returns the session for the kubeconfig identified by hash: the
// published one when its hash matches (published is true), else a candidate
// built from cfg — built once per hash and kept until it is published or
// another hash replaces it. A candidate's clients work; its cache does not
// run and nobody else sees it until Publish.
//
// consumerUID is the consumer cluster's identity: the provider cache keeps
// the full content only of this consumer's copies (labelled with it) and
// the metadata of every other object of a bound API (ownership needs their
// markers, nothing more) — another consumer's specs are never held in
// memory here. "" keeps everything.
//
// iso is the Connection's isolation: under Namespace isolation the cache
// watches namespaced objects only in its one provider namespace
// (credentials that hold a Role there and nothing else work), and the
// provider namespaces a consumer may import from (Mapping.ImportsFrom)
// keep the content of unmarked objects.
func (m *Manager) Prepare(connection, hash, namespace, consumerUID string, iso isolation.Mapping, cfg *rest.Config) (s *Session, published bool, err error) {
	m.mu.Lock()
	if cur, ok := m.sessions[connection]; ok && cur.Hash == hash && cur.Isolation == iso {
		m.mu.Unlock()
		return cur, true, nil
	}
	if cand, ok := m.candidates[connection]; ok && cand.Hash == hash && cand.Isolation == iso {
		m.mu.Unlock()
		return cand, false, nil
	}
	m.mu.Unlock()

	s, err = m.build(connection, hash, namespace, consumerUID, iso, cfg)
	if err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	old := m.candidates[connection]
	m.candidates[connection] = s
	m.mu.Unlock()
	if old != nil {
		old.cancel()
	}
	return s, false, nil
}

// Publish makes a verified candidate the Connection's session: Get returns
// it from now on and the session it replaces (old credentials) is stopped.
// Publishing the published session does nothing.
func (m *Manager) Publish(s *Session) {
	m.mu.Lock()
	old := m.sessions[s.Connection]
	if old == s {
		m.mu.Unlock()
		return
	}
	if m.candidates[s.Connection] == s {
		delete(m.candidates, s.Connection)
	}
	m.sessions[s.Connection] = s
	m.mu.Unlock()
	if old != nil {
		old.cancel()
	}
	m.notify(s.Connection)
}

// Unpublish stops the Connection's published session (its cache and
// watches; Get no longer returns it) and keeps any candidate: a Connection
// that cannot use its session must not hold the provider's watches open.
func (m *Manager) Unpublish(connection string) {
	m.mu.Lock()
	s, ok := m.sessions[connection]
	delete(m.sessions, connection)
	m.mu.Unlock()
	if ok {
		s.cancel()
		m.notify(connection)
	}
}

// Stop stops and forgets the Connection's sessions, published and
// candidate, if any.
func (m *Manager) Stop(connection string) {
	m.mu.Lock()
	s, ok := m.sessions[connection]
	cand := m.candidates[connection]
	delete(m.sessions, connection)
	delete(m.candidates, connection)
	m.mu.Unlock()
	if cand != nil {
		cand.cancel()
	}
	if ok {
		s.cancel()
		m.notify(connection)
	}
}

// onlyOurContent is the provider cache's transform: managed fields (and
// kubectl's last-applied annotation on bound objects) are dropped from
// everything, and an object of a bound API (unstructured) that is not this
// consumer's copy keeps only apiVersion, kind and metadata — unless it
// carries no consumer's markers at all and lives in a provider namespace
// this consumer may import from (Mapping.ImportsFrom: its isolation
// namespace, or a namespace of its prefix): a provider's own object there
// may be this consumer's to import (apis[].providerObjects).
func onlyOurContent(consumerUID string, iso isolation.Mapping) toolscache.TransformFunc {
	strip := slim.Transform()
	return func(in any) (any, error) {
		obj, err := strip(in)
		if err != nil || consumerUID == "" {
			return obj, err
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetLabels()[kbindv1alpha1.ConsumerClusterUIDLabel] == consumerUID {
			return obj, nil
		}
		if _, marked := u.GetLabels()[kbindv1alpha1.ConsumerClusterUIDLabel]; !marked && iso.ImportsFrom(u.GetNamespace()) {
			return obj, nil
		}
		for k := range u.Object {
			if k != "apiVersion" && k != "kind" && k != "metadata" {
				delete(u.Object, k)
			}
		}
		return u, nil
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

func (m *Manager) build(connection, hash, namespace, consumerUID string, iso isolation.Mapping, base *rest.Config) (*Session, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = m.opts.QPS, m.opts.Burst
	cfg.DisableCompression = m.opts.DisableCompression
	// One token bucket for every request of the session (controller-runtime
	// builds a REST client per API, each of which would otherwise get its
	// own QPS budget).
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(m.opts.QPS, m.opts.Burst)
	cfg.UserAgent = m.opts.UserAgent
	var token *bearer
	if cfg.BearerToken != "" {
		// Every transport made from the session's configs authenticates
		// through the holder, so that a renewed token reaches all of them.
		token = &bearer{}
		token.set(cfg.BearerToken)
		cfg.BearerToken = ""
		cfg.Wrap(token.wrap)
	}
	// Watches must outlive the request timeout; only one-shot requests get it.
	direct := rest.CopyConfig(cfg)
	direct.Timeout = m.opts.Timeout
	rt, tracked, err := privateTransport(cfg)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: rt}
	directHC := &http.Client{Transport: rt, Timeout: m.opts.Timeout}

	// The bound APIs' informers watch through a client that decodes each
	// event once; the cache selects them by namespace only, as it must.
	watches := &watchjson.Watches{Config: cfg, HTTPClient: hc, Namespace: iso.ConfinedTo()}
	cl, err := cluster.New(cfg, func(o *cluster.Options) {
		o.HTTPClient = hc
		o.Scheme = m.opts.Scheme
		o.Cache.DefaultTransform = onlyOurContent(consumerUID, iso)
		if confinedTo := iso.ConfinedTo(); confinedTo != "" {
			o.Cache.DefaultNamespaces = map[string]cache.Config{confinedTo: {}}
		}
		o.Cache.NewInformer = watches.NewInformer
		o.Logger = log.Log.WithName("provider").WithValues("connection", connection)
		// The mapper's discovery requests are one-shot: give them the
		// request timeout (the cluster's own HTTP client has none, for
		// watches), or a silent provider blocks every client call forever.
		o.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
			return apiutil.NewDynamicRESTMapper(direct, directHC)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("creating provider cache: %w", err)
	}
	watches.Mapper = cl.GetRESTMapper()
	c, err := client.New(direct, client.Options{Scheme: m.opts.Scheme, Mapper: cl.GetRESTMapper(), HTTPClient: directHC})
	if err != nil {
		return nil, fmt.Errorf("creating provider client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(direct, directHC)
	if err != nil {
		return nil, fmt.Errorf("creating provider discovery client: %w", err)
	}
	ctx, cancel := context.WithCancel(log.IntoContext(m.ctx, log.Log.WithValues("connection", connection)))
	crds := NewExportedCRDs(ctx, cfg, hc, c)
	crds.spawn = m.goroutines.Go
	s := &Session{
		Connection: connection, Hash: hash, Namespace: namespace, ConfinedTo: iso.ConfinedTo(), Isolation: iso,
		Config: cfg, Direct: direct, Client: c, Discovery: dc, CRDs: crds,
		HTTPClient: hc, DirectHTTPClient: directHC, token: token,
		spawn: m.goroutines.Go, shutdown: m.ctx.Done(), duplicate: func() heartbeat.Verdict { return m.Duplicate(connection) },
		cluster: cl, ctx: ctx, cancel: cancel, stopped: make(chan struct{}),
	}
	if !s.spawn(func() { s.closeConnectionsWhenStopped(rt, tracked) }) {
		// Born after the Manager stopped: nothing may stay open.
		cancel()
		utilnet.CloseIdleConnectionsFor(rt)
	}
	return s, nil
}

// privateTransport is a transport of the session's own, whose connections
// the returned conns tracks. client-go shares one transport among all
// clients with the same TLS settings, for the life of the process: a
// stopped session's connections would stay open until their idle timeout,
// and a Connection's old and new credentials (or two Connections) would
// share them. A transport with its own dialer is never shared.
func privateTransport(cfg *rest.Config) (http.RoundTripper, *conns, error) {
	own := rest.CopyConfig(cfg)
	tracked := &conns{dial: own.Dial, open: map[*trackedConn]struct{}{}}
	if tracked.dial == nil {
		// client-go's default dialer.
		tracked.dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	own.Dial = tracked.dialContext
	rt, err := rest.TransportFor(own)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the provider transport: %w", err)
	}
	return rt, tracked, nil
}

// conns are the connections one session's transport opened.
type conns struct {
	dial func(ctx context.Context, network, address string) (net.Conn, error)

	mu   sync.Mutex
	open map[*trackedConn]struct{}
}

func (c *conns) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := c.dial(ctx, network, address)
	if err != nil {
		return nil, err
	}
	t := &trackedConn{Conn: conn, owner: c}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open[t] = struct{}{}
	return t, nil
}

// closeAll closes every connection open now. A stopped session's client
// still works (a Connection that stopped being Ready keeps renewing its
// heartbeat through it): a later request dials again.
func (c *conns) closeAll() {
	c.mu.Lock()
	open := c.open
	c.open = map[*trackedConn]struct{}{}
	c.mu.Unlock()
	for t := range open {
		_ = t.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	owner *conns
}

func (t *trackedConn) Close() error {
	t.owner.mu.Lock()
	delete(t.owner.open, t)
	t.owner.mu.Unlock()
	return t.Conn.Close()
}

// connectionsCloseGrace is how long after its cache stopped a stopped
// session's last connections are cut: requests in flight (a Lease deleted
// after the session stopped, say) get that long to finish.
const connectionsCloseGrace = 5 * time.Second

// closeConnectionsWhenStopped closes the session's provider connections
// once it has stopped and its cache with it: the idle ones at once, every
// one left after connectionsCloseGrace — or at once when the Manager
// stops.
func (s *Session) closeConnectionsWhenStopped(rt http.RoundTripper, tracked *conns) {
	<-s.ctx.Done()
	if s.started.Load() {
		<-s.stopped
	}
	utilnet.CloseIdleConnectionsFor(rt)
	timer := time.NewTimer(connectionsCloseGrace)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-s.shutdown:
	}
	tracked.closeAll()
}
