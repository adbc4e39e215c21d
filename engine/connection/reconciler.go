// Package connection reconciles Connections (CONN-1..8, HB-1): it
// resolves the kubeconfig Secret, reads and pins both cluster identities,
// discovers the provider's exports, keeps the provider session and heartbeat
// running while the Connection is Ready, maintains the autoBind
// ClusterBinding, and tears down in order on deletion.
//
// Requirement ids in comments (such as CONN-7) refer to docs/requirements.md.
package connection

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/identity"
	"github.com/kbind/kbind/engine/index"
	"github.com/kbind/kbind/engine/internal/patch"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/kubeconfig"
	"github.com/kbind/kbind/engine/metrics"
	kbindschema "github.com/kbind/kbind/engine/schema"
	"github.com/kbind/kbind/engine/session"
)

// Reconciler reconciles Connections. Every field is required: the engine
// fills the defaults (engine.Options), this package has none.
type Reconciler struct {
	Client client.Client
	// SecretNamespaces are the namespaces kubeconfig Secrets may live in.
	SecretNamespaces []string
	// DiscoveryInterval is how often the exports are re-read: from the
	// watch of the exported CRDs for the CRD source (no request), through
	// discovery and /openapi/v3 for the OpenAPI source.
	DiscoveryInterval time.Duration
	// RecheckInterval is how often a Connection that is working re-reads
	// the provider's identity and lists its exports directly (the backstop
	// of the watches); a failed or stale heartbeat re-reads the identity at
	// once.
	RecheckInterval time.Duration
	// HeartbeatInterval is how often the Lease is renewed.
	HeartbeatInterval time.Duration
	// ProviderTimeout is the provider request timeout; a renewal is bounded
	// by heartbeat.RenewTimeout of it and the interval.
	ProviderTimeout time.Duration
	// InCluster is true when the konnector runs in a Pod.
	InCluster bool
	Sessions  *session.Manager
	// LocalIdentity reads the consumer cluster's identity.
	LocalIdentity *identity.Reader
	// Installer delivers consumer CRDs (pullPolicy All) and knows which lag.
	Installer *kbindschema.Installer
	// Base bounds the heartbeats' lifetime (the engine's).
	Base context.Context
	// ExpiryWarning is how long before a credential that is not renewed
	// expires CredentialsExpiring turns True (at the latest when a fifth
	// of its lifetime is left).
	ExpiryWarning time.Duration
	// Version is the konnector's, written on status and heartbeat Leases.
	Version string
	// Events records credential renewals and warnings on Connections.
	Events recorder.EventRecorder

	// events re-triggers Connections from outside the watches (heartbeat
	// results, sibling Connections sharing a Secret).
	events chan event.TypedGenericEvent[*kbindv1alpha1.Connection]

	backoff workqueue.TypedRateLimiter[string]

	mu         sync.Mutex
	localUID   string
	probes     map[string]probe
	readers    map[string]sessionReader
	heartbeats map[string]heartbeatState
	// watched is the session whose exported-CRD watch announces changes
	// of each Connection; changed marks a Connection whose exports changed
	// since its last discovery.
	watched map[string]*session.Session
	changed map[string]bool
	// creds is each Connection's token renewal (credentials.go).
	creds map[string]credentialState
	// readyObserved are the Connections (name → UID) whose time to Ready
	// this konnector observed: a reconcile that reads the status from a
	// cache that has not caught up with the Ready write must not observe
	// it again.
	readyObserved map[string]types.UID
}

// sessionReader is the identity reader of one provider session: it asks
// discovery whether the provider is kcp once, through the session's
// connections (a new session, even of the same kubeconfig, gets its own).
type sessionReader struct {
	session *session.Session
	reader  *identity.Reader
}

// probe is the remembered outcome of the last identity read (at) and
// discovery pass (discoveredAt), so that reconciles triggered by unrelated
// events do not hit the provider.
type probe struct {
	hash        string
	at          time.Time
	remoteUID   string
	identityErr error
	// unanswered: identityErr is the heartbeat's renewal that got no
	// answer, not an identity read.
	unanswered   bool
	discoveredAt time.Time
	discovery    *kbindschema.Result
	discovErr    error
}

type heartbeatState struct {
	// session is the verified session whose client renews the Lease; the
	// heartbeat outlives the session's watches (see connect).
	session     *session.Session
	cancel      context.CancelFunc
	known       bool
	err         error
	lease       heartbeat.Lease
	lastRenewal time.Time
	// recheckAt is when the heartbeat last failed or found its Lease
	// changed or gone: the provider's identity is read again after it.
	recheckAt time.Time
	// unansweredAt is when a renewal last timed out
	// (heartbeat.Unanswered).
	unansweredAt time.Time
}

// LastRenewals implements metrics.HeartbeatSource.
func (r *Reconciler) LastRenewals() map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]time.Time{}
	for name, hb := range r.heartbeats {
		if !hb.lastRenewal.IsZero() {
			out[name] = hb.lastRenewal
		}
	}
	return out
}

func (r *Reconciler) init() {
	r.events = make(chan event.TypedGenericEvent[*kbindv1alpha1.Connection], 64)
	r.backoff = probeBackoff()
	r.probes = map[string]probe{}
	r.readers = map[string]sessionReader{}
	r.heartbeats = map[string]heartbeatState{}
	r.watched = map[string]*session.Session{}
	r.changed = map[string]bool{}
	r.creds = map[string]credentialState{}
	r.readyObserved = map[string]types.UID{}
}

// validate refuses a Reconciler whose intervals were left unset: the
// engine's Options fill them (engine.Options defaults), this package
// defaults nothing.
func (r *Reconciler) validate() error {
	if r.DiscoveryInterval <= 0 || r.RecheckInterval <= 0 || r.HeartbeatInterval <= 0 || r.ProviderTimeout <= 0 || r.ExpiryWarning <= 0 {
		return errors.New("connection: DiscoveryInterval, RecheckInterval, HeartbeatInterval, ProviderTimeout and ExpiryWarning must be positive")
	}
	return nil
}

// MaxProbeBackoff caps the retry of a Connection whose provider could not
// be reached, read or trusted: a provider that comes back is noticed
// within this long, however long it was gone (a wider cap let a provider
// healed after a minute's outage wait another minute). While it lasts,
// one identity read per retry is all a broken Connection costs.
const MaxProbeBackoff = 10 * time.Second

// probeBackoff is the per-Connection retry: 1 s, doubling, capped at
// MaxProbeBackoff; forgotten after a successful discovery.
func probeBackoff() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, MaxProbeBackoff)
}

// Reconcile implements reconcile.Reconciler in three steps: observe (the
// Secret, the session, both identities, the exports, the heartbeat's last
// result), decide (decide and desiredConditions, pure functions), act
// (heartbeat, session, autoBind, one status write only when it changed).
// A deleting Connection that still has bindings goes through the same steps
// (its bindings drain through its session, which a konnector restart must
// rebuild) with Ready=False/DrainingBindings; once no binding references
// it, it tears down.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	conn := &kbindv1alpha1.Connection{}
	if err := r.Client.Get(ctx, req.NamespacedName, conn); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	draining, done, err := r.deletionPath(ctx, conn)
	if done || err != nil {
		return ctrl.Result{}, err
	}

	// Observe.
	before := conn.DeepCopy()
	obs := observation{draining: draining, deleting: !conn.DeletionTimestamp.IsZero()}
	sess, next := r.connect(ctx, conn, &obs)
	r.heartbeatInto(conn.Name, &obs)
	// pullPolicy All installs once per discovery pass, not on every
	// reconcile (heartbeat results and binding changes trigger many); it
	// comes before the decision because SchemaInSync reports its outcome.
	if installsAll(obs, conn.Spec.Schema.PullPolicy) {
		r.installAll(ctx, conn, sess, obs.discovery.Source, obs.exports)
	}
	obs.lagging, obs.schemaKnown = r.Installer.Lagging(conn.Name)

	// Decide.
	conds := desiredConditions(obs)
	d := decide(obs, isReady(conds))

	// Act.
	switch d.heartbeat {
	case heartbeatRun:
		r.ensureHeartbeat(conn, sess, r.leaseInfo(obs.creds))
	case heartbeatStop:
		r.stopHeartbeat(conn.Name)
	}
	switch {
	case d.useSession && !obs.published:
		r.Sessions.Publish(sess)
		sess.Activate()
	case d.useSession:
		sess.Activate()
	default:
		r.Sessions.Unpublish(conn.Name)
	}
	patch.SetConditions(&conn.Status.Conditions, conds, conn.Generation)
	r.reportCredentials(conn, obs.creds, time.Now())
	conn.Status.KonnectorVersion = r.Version
	metrics.ConnectionReady.WithLabelValues(conn.Name).Set(map[bool]float64{true: 1, false: 0}[d.ready])
	var autoBindErr error
	if d.ready {
		conn.Status.ActiveSchemaSource = obs.discovery.Source
		conn.Status.ExportedAPIs = obs.exports
		autoBindErr = r.reconcileAutoBind(ctx, conn)
	}
	if err := patch.Status(ctx, r.Client, before, conn); err != nil {
		return ctrl.Result{}, fmt.Errorf("connection %s: %w", conn.Name, err)
	}
	if firstReady(before.Status, d.ready) && r.observeReadyOnce(conn) {
		metrics.ConnectionTimeToReady.Observe(time.Since(conn.CreationTimestamp.Time).Seconds())
	}
	if autoBindErr != nil {
		return ctrl.Result{}, autoBindErr
	}
	var after time.Duration
	switch d.requeue {
	case requeueDiscovery:
		r.backoff.Forget(conn.Name)
		after = next
	case requeueSecret:
		after = r.DiscoveryInterval
	default:
		after = r.backoff.When(conn.Name)
	}
	// A renewal, a retry, a warning or an expiry falling due earlier wakes
	// the Connection then.
	if due := credentialsDue(obs.creds, r.ExpiryWarning, time.Now()); due > 0 && due < after {
		after = due
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// deletionPath handles a deleting Connection: done when there is nothing
// more to do (already finalized, or torn down now that no binding
// references it), else the bindings it waits for. A live Connection gets
// its finalizer.
func (r *Reconciler) deletionPath(ctx context.Context, conn *kbindv1alpha1.Connection) (draining []string, done bool, err error) {
	if conn.DeletionTimestamp.IsZero() {
		return nil, false, patch.AddFinalizer(ctx, r.Client, conn, kbindv1alpha1.CleanupFinalizer)
	}
	if !controllerutil.ContainsFinalizer(conn, kbindv1alpha1.CleanupFinalizer) {
		r.forget(conn.Name)
		return nil, true, nil
	}
	if err := r.deleteAutoBinding(ctx, conn); err != nil {
		return nil, true, err
	}
	if draining, err = r.referencingBindings(ctx, conn.Name); err != nil {
		return nil, true, err
	}
	if len(draining) == 0 {
		return nil, true, r.teardown(ctx, conn)
	}
	return draining, false, nil
}

// installsAll reports whether this reconcile installs every export
// (pullPolicy All): on a fresh, successful discovery pass of a live
// Connection.
func installsAll(o observation, pull kbindv1alpha1.PullPolicy) bool {
	return pull == kbindv1alpha1.PullPolicyAll && !o.deleting && o.fresh && o.discovery != nil &&
		o.discoveryErr == nil && o.identityErr == nil && o.identityChanged == ""
}

// connect resolves the kubeconfig, prepares the session for it, reads and
// checks both identities and the exports, and returns the session and when
// the next discovery pass is due. It only reads: Reconcile publishes the
// session once the Connection can use it (a session built from new
// kubeconfig data is never used before its provider identity is verified
// against the pin, so nothing is ever written to an unverified cluster).
func (r *Reconciler) connect(ctx context.Context, conn *kbindv1alpha1.Connection, obs *observation) (*session.Session, time.Duration) {
	parsed, err := r.resolveSecret(ctx, conn)
	if err != nil {
		obs.secretErr = err
		return nil, 0
	}
	obs.insecure = parsed.Insecure
	localUID, _ := r.readLocalUID(ctx) // "" (unknown yet) caches everything; observe reports the error
	confinedTo := isolation.For(conn.Spec.IsolationOf()).ConfinedTo()
	sess, published, err := r.Sessions.Prepare(conn.Name, parsed.Hash, parsed.Namespace, localUID, confinedTo, parsed.Config)
	if err != nil {
		obs.secretErr = fmt.Errorf("the kubeconfig cannot be used: %w", err)
		return nil, 0
	}
	obs.published = published
	// The session carries the credential to use before its first request:
	// after a restart, the renewed token may be the only valid one.
	obs.creds = r.useCredential(ctx, conn, parsed, sess, time.Now())
	next := r.observe(ctx, conn, sess, parsed, obs)
	if obs.verified && !obs.deleting {
		r.renewIfDue(ctx, conn, parsed, sess, &obs.creds, time.Now())
	}
	return sess, next
}

// teardown finishes a deleting Connection no binding references any more
// (CONN-7): its heartbeat Lease and session go, then its own finalizer. The
// kubeconfig Secret's finalizer is released by the Secret controller once
// no Connection needs the Secret.
func (r *Reconciler) teardown(ctx context.Context, conn *kbindv1alpha1.Connection) error {
	r.deleteLease(ctx, conn.Name)
	if err := r.deleteRenewed(ctx, conn); err != nil {
		return fmt.Errorf("connection %s: %w", conn.Name, err)
	}
	r.forget(conn.Name)
	if err := patch.RemoveFinalizer(ctx, r.Client, conn, kbindv1alpha1.CleanupFinalizer); err != nil {
		return fmt.Errorf("connection %s: %w", conn.Name, err)
	}
	return nil
}

// installAll installs every export without a binding (pullPolicy All,
// SCHEMA-3). Failures show in SchemaInSync and the logs; bindings report
// their own APIs.
func (r *Reconciler) installAll(ctx context.Context, conn *kbindv1alpha1.Connection, sess *session.Session, source kbindv1alpha1.ActiveSchemaSource, exports []kbindv1alpha1.ExportedAPI) {
	withStatus := conn.DeepCopy()
	withStatus.Status.ActiveSchemaSource = source
	d := &kbindschema.Discoverer{Client: sess.CRDs, Discovery: sess.Discovery}
	for _, export := range exports {
		// A reduced version set is reported by the bindings that list the API.
		desired, _, err := kbindschema.Desired(ctx, d, withStatus, export)
		if err == nil {
			var outcome kbindschema.Outcome
			outcome, err = r.Installer.Ensure(ctx, withStatus, export.Name, desired)
			if err == nil && outcome.Problem != "" {
				err = errors.New(outcome.Problem)
			}
		}
		if err != nil {
			log.FromContext(ctx).Info("Could not install an exported API (pullPolicy All)", "crd", export.Name, "error", err.Error())
		}
	}
}

// resolveSecret finds and validates the kubeconfig (CONN-1, CONN-2). Its
// errors are condition messages: they name the problem, never the data.
func (r *Reconciler) resolveSecret(ctx context.Context, conn *kbindv1alpha1.Connection) (*kubeconfig.Parsed, error) {
	ref := conn.Spec.KubeconfigSecretRef
	key := ref.Key
	if key == "" {
		key = kbindv1alpha1.DefaultKubeconfigKey
	}
	where := fmt.Sprintf("Secret %s/%s", ref.Namespace, ref.Name)
	if !slices.Contains(r.SecretNamespaces, ref.Namespace) {
		return nil, fmt.Errorf("%s: namespace %q is not one of the konnector's allowed Secret namespaces (%v); move the Secret or add the namespace to --secret-namespaces",
			where, ref.Namespace, r.SecretNamespaces)
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s not found", where)
		}
		return nil, fmt.Errorf("reading %s: %w", where, err)
	}
	if err := patch.AddFinalizer(ctx, r.Client, secret, kbindv1alpha1.CleanupFinalizer); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	data, ok := secret.Data[key]
	if !ok {
		return nil, fmt.Errorf("%s has no key %q", where, key)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%s key %q is empty", where, key)
	}
	parsed, err := kubeconfig.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s key %q: %w", where, key, err)
	}
	if refused := kubeconfig.Refused(parsed.Insecure, conn.Spec.AllowInsecure); len(refused) > 0 {
		return nil, fmt.Errorf("%s key %q: %s", where, key, kubeconfig.DescribeRefused(refused))
	}
	return parsed, nil
}

// observe reads identities and exports and returns when the next pass is
// due. The provider's identity is read once per recheck interval per
// kubeconfig, and at once after a failure or a failed or stale heartbeat;
// the exports once per discovery interval, and at once when the watch of
// the exported CRDs announces a change (for the CRD source that pass is
// served by the watch: an idle Connection costs the provider its
// heartbeat, one identity read and one list per recheck interval).
func (r *Reconciler) observe(ctx context.Context, conn *kbindv1alpha1.Connection, sess *session.Session, parsed *kubeconfig.Parsed, obs *observation) time.Duration {
	localUID, err := r.readLocalUID(ctx)
	if err != nil {
		obs.probed = true
		obs.identityErr = fmt.Errorf("consumer: %w", err)
		return 0
	}
	r.mu.Lock()
	p, ok := r.probes[conn.Name]
	changed := r.changed[conn.Name]
	delete(r.changed, conn.Name)
	hb := r.heartbeats[conn.Name]
	r.mu.Unlock()
	now := time.Now()
	identityDue := !ok || p.hash != sess.Hash || p.identityErr != nil || now.Sub(p.at) >= r.RecheckInterval || hb.recheckAt.After(p.at)
	switch {
	case ok && p.hash == sess.Hash && heartbeatUnanswered(hb.err, hb.unansweredAt, p.at):
		// Reported at once: an identity read now would wait for the
		// same silence, up to the request timeout. The next pass (the
		// probe backoff) reads the identity.
		p.at, p.unanswered = now, true
		p.remoteUID, p.identityErr = "", fmt.Errorf("its heartbeat Lease renewal got no answer: %w", hb.err)
	case identityDue:
		// The last discovery stays until its own pass is due.
		rctx := ctx
		if ok && p.identityErr != nil {
			var cancel context.CancelFunc
			rctx, cancel = context.WithTimeout(ctx, DisconnectedProbeTimeout)
			defer cancel()
		}
		p.hash, p.at, p.unanswered = sess.Hash, now, false
		p.remoteUID, p.identityErr = r.readIdentity(rctx, conn.Name, sess)
	}
	verified := p.identityErr == nil && identityMismatch(conn, p.remoteUID, localUID) == ""
	if verified && conn.Spec.Schema.Source != kbindv1alpha1.SchemaSourceOpenAPI {
		// Only a verified provider is watched.
		r.watchExports(conn.Name, sess)
	}
	if verified && (identityDue || changed || p.discovErr != nil || now.Sub(p.discoveredAt) >= r.DiscoveryInterval) {
		d := &kbindschema.Discoverer{Client: sess.CRDs, Discovery: sess.Discovery}
		p.discovery, p.discovErr = d.Discover(ctx, conn.Spec.Schema.Source)
		p.discoveredAt = now
		obs.fresh = true
	}
	r.mu.Lock()
	r.probes[conn.Name] = p
	r.mu.Unlock()

	obs.probed = true
	obs.identityErr, obs.unanswered = p.identityErr, p.unanswered
	if p.identityErr != nil {
		obs.loopbackInPod = r.loopbackHint(parsed)
		return 0
	}
	if obs.identityChanged = identityMismatch(conn, p.remoteUID, localUID); obs.identityChanged != "" {
		return 0
	}
	conn.Status.RemoteClusterUID = p.remoteUID
	conn.Status.LocalClusterUID = localUID
	obs.verified = true
	obs.discovery, obs.discoveryErr = p.discovery, p.discovErr
	if p.discovery != nil {
		// A group that could not be read keeps its last known exports:
		// only a successful read that no longer lists an API removes it.
		obs.unreadable = p.discovery.Unreadable
		obs.exports = kbindschema.KeepUnreadable(p.discovery.Exports, p.discovery.Unreadable,
			conn.Status.ExportedAPIs, conn.Status.ActiveSchemaSource, p.discovery.Source)
	}
	return nextPass(now, p.discoveredAt, p.at, r.DiscoveryInterval, r.RecheckInterval)
}

// identityMismatch says why the identities read differ from those the
// Connection is pinned to, "" when they match (or nothing is pinned yet).
func identityMismatch(conn *kbindv1alpha1.Connection, remoteUID, localUID string) string {
	if pinned := conn.Status.RemoteClusterUID; pinned != "" && pinned != remoteUID {
		return fmt.Sprintf("the provider cluster identity is %s, but this Connection is pinned to %s: the Secret now points at a different cluster; restore the original endpoint and credentials, or create a new Connection for a deliberate migration", remoteUID, pinned)
	}
	if pinned := conn.Status.LocalClusterUID; pinned != "" && pinned != localUID {
		return fmt.Sprintf("the consumer cluster identity is %s, but this Connection is pinned to %s", localUID, pinned)
	}
	return ""
}

// DisconnectedProbeTimeout bounds the identity read of a Connection whose
// last one failed: with MaxProbeBackoff between reads, a provider that
// answers again is noticed within their sum (15 s), even when the read in
// flight at the heal waits for an answer that never comes. A provider
// that needs longer to answer one request is not connected to meanwhile.
const DisconnectedProbeTimeout = 5 * time.Second

// heartbeatUnanswered says whether the heartbeat's last renewal got no
// answer from the provider (err, at) since the identity was last read
// (identityAt): the provider is then reported unreachable without
// another request.
func heartbeatUnanswered(err error, at, identityAt time.Time) bool {
	return heartbeat.Unanswered(err) && at.After(identityAt)
}

// nextPass is how long until the next discovery pass or identity read is
// due (at least a second).
func nextPass(now, discoveredAt, identityAt time.Time, discovery, recheck time.Duration) time.Duration {
	due := min(discoveredAt.Add(discovery).Sub(now), identityAt.Add(recheck).Sub(now))
	return max(due, time.Second)
}

// readIdentity reads the provider's cluster identity through the session.
func (r *Reconciler) readIdentity(ctx context.Context, name string, sess *session.Session) (string, error) {
	reader, err := r.identityReader(name, sess)
	if err != nil {
		return "", err
	}
	return reader.ClusterUID(ctx)
}

// watchExports makes the session's watch of the exported CRDs re-queue the
// Connection, marked changed, whenever an exported CRD changes: a new or
// changed export is discovered at once, not at the next pass.
func (r *Reconciler) watchExports(name string, sess *session.Session) {
	r.mu.Lock()
	if r.watched[name] == sess {
		r.mu.Unlock()
		return
	}
	r.watched[name] = sess
	r.mu.Unlock()
	sess.CRDs.Recheck(r.RecheckInterval)
	sess.CRDs.OnChange(func() {
		r.mu.Lock()
		current := r.watched[name] == sess
		if current {
			r.changed[name] = true
		}
		r.mu.Unlock()
		if current {
			r.trigger(name)
		}
	})
}

// identityReader returns the session's identity reader, made on first use.
func (r *Reconciler) identityReader(name string, sess *session.Session) (*identity.Reader, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sr, ok := r.readers[name]; ok && sr.session == sess {
		return sr.reader, nil
	}
	// Direct: every identity request carries the request timeout.
	reader, err := identity.NewReaderForClient(sess.Direct, sess.DirectHTTPClient)
	if err != nil {
		return nil, err
	}
	r.readers[name] = sessionReader{session: sess, reader: reader}
	return reader, nil
}

func (r *Reconciler) readLocalUID(ctx context.Context) (string, error) {
	r.mu.Lock()
	uid := r.localUID
	r.mu.Unlock()
	if uid != "" {
		return uid, nil
	}
	uid, err := r.LocalIdentity.ClusterUID(ctx)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.localUID = uid
	r.mu.Unlock()
	return uid, nil
}

// loopbackHint explains a loopback provider address seen from a Pod
// (CONN-3, beyond).
func (r *Reconciler) loopbackHint(parsed *kubeconfig.Parsed) string {
	if !r.InCluster || parsed == nil {
		return ""
	}
	u, err := url.Parse(parsed.Config.Host)
	if err != nil {
		return ""
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return fmt.Sprintf("; the provider address %s is a loopback address, which from inside the konnector Pod points at the Pod itself, not at your workstation or a kind node: use an address reachable from the consumer cluster's network", u.Host)
	}
	return ""
}

// ensureHeartbeat renews the Connection's Lease through the client of a
// verified session, starting (or moving) the renewal loop when the session
// or the Lease changed. The loop runs until stopHeartbeat — not with the
// session's watches: a Connection that is not Ready keeps its heartbeat.
func (r *Reconciler) ensureHeartbeat(conn *kbindv1alpha1.Connection, sess *session.Session, info heartbeat.Info) {
	iso := isolation.For(conn.Spec.IsolationOf())
	lease := heartbeat.For(conn.Name, conn.Status.LocalClusterUID, iso.LeaseNamespace(sess.Namespace))
	lease.Isolation = iso
	lease.Info = info
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.heartbeats[conn.Name]
	if ok && prev.session == sess && prev.lease == lease {
		return
	}
	if prev.cancel != nil {
		prev.cancel()
	}
	base := r.Base
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithCancel(log.IntoContext(base, log.Log.WithValues("connection", conn.Name)))
	r.heartbeats[conn.Name] = heartbeatState{session: sess, cancel: cancel, lease: lease, known: prev.known, err: prev.err, lastRenewal: prev.lastRenewal}
	name := conn.Name
	go heartbeat.Run(ctx, sess.Client, lease, r.HeartbeatInterval, heartbeat.RenewTimeout(r.HeartbeatInterval, r.ProviderTimeout), func(err error, reread bool) {
		r.mu.Lock()
		hb := r.heartbeats[name]
		if hb.session != sess {
			r.mu.Unlock()
			return
		}
		changed := !hb.known || errString(hb.err) != errString(err)
		hb.known, hb.err = true, err
		if err == nil {
			hb.lastRenewal = time.Now()
		}
		if heartbeat.Unanswered(err) {
			hb.unansweredAt = time.Now()
		}
		if (err != nil && changed) || reread {
			// The provider may be gone, or not the cluster it was: read
			// its identity again now rather than at the next recheck.
			hb.recheckAt, changed = time.Now(), true
		}
		r.heartbeats[name] = hb
		r.mu.Unlock()
		if changed {
			r.trigger(name)
		}
	})
}

// stopHeartbeat ends the Connection's Lease renewal.
func (r *Reconciler) stopHeartbeat(name string) heartbeatState {
	r.mu.Lock()
	hb := r.heartbeats[name]
	delete(r.heartbeats, name)
	r.mu.Unlock()
	if hb.cancel != nil {
		hb.cancel()
	}
	return hb
}

func (r *Reconciler) heartbeatInto(name string, obs *observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hb, ok := r.heartbeats[name]
	if !ok {
		return
	}
	obs.heartbeatKnown, obs.heartbeat = hb.known, hb.err
	obs.leaseRef = hb.lease.Namespace + "/" + hb.lease.Name
	obs.leaseEvery = r.HeartbeatInterval
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// trigger re-queues a Connection from outside the watches.
func (r *Reconciler) trigger(name string) {
	obj := &kbindv1alpha1.Connection{ObjectMeta: metav1.ObjectMeta{Name: name}}
	select {
	case r.events <- event.TypedGenericEvent[*kbindv1alpha1.Connection]{Object: obj}:
	default:
		// The queue is full of triggers already; the periodic resync covers it.
	}
}

// deleteLease stops the heartbeat of a Connection being deleted and
// removes its Lease from the provider, so that a consumer that left on
// purpose does not look stale to the backend. A failure (provider
// unreachable or refusing) is logged and never blocks the deletion: the
// backend reaps that Lease once it is stale.
func (r *Reconciler) deleteLease(ctx context.Context, name string) {
	hb := r.stopHeartbeat(name)
	r.Sessions.Stop(name)
	if hb.session == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, leaseDeleteTimeout)
	defer cancel()
	logger := log.FromContext(ctx).WithValues("lease", hb.lease.Namespace+"/"+hb.lease.Name)
	if err := heartbeat.Delete(ctx, hb.session.Client, hb.lease); err != nil {
		logger.Info("Heartbeat Lease not deleted; the backend reaps it once stale", "error", err.Error())
		return
	}
	logger.V(1).Info("Deleted heartbeat Lease")
}

// leaseDeleteTimeout bounds the Lease deletion of a deleting Connection.
const leaseDeleteTimeout = 10 * time.Second

// forget drops everything held for a Connection that is gone.
func (r *Reconciler) forget(name string) {
	r.stopHeartbeat(name)
	r.Sessions.Stop(name)
	r.mu.Lock()
	delete(r.readyObserved, name)
	delete(r.probes, name)
	delete(r.readers, name)
	delete(r.watched, name)
	delete(r.changed, name)
	delete(r.creds, name)
	r.mu.Unlock()
	metrics.CredentialsExpiry.DeleteLabelValues(name)
	metrics.CredentialsExpiring.DeleteLabelValues(name)
	metrics.CredentialRenewals.DeletePartialMatch(map[string]string{"connection": name})
	r.backoff.Forget(name)
	r.Installer.Forget(name, "")
	metrics.ConnectionReady.DeleteLabelValues(name)
	metrics.SyncLatency.DeletePartialMatch(map[string]string{"connection": name})
}

// observeReadyOnce reports whether the time to Ready of conn is still to
// be observed by this konnector, and records that it is now.
func (r *Reconciler) observeReadyOnce(conn *kbindv1alpha1.Connection) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.readyObserved[conn.Name] == conn.UID {
		return false
	}
	r.readyObserved[conn.Name] = conn.UID
	return true
}

// reconcileAutoBind maintains the ClusterBinding named after the
// Connection while autoBind is on (CONN-6): every exported API, Fail,
// controlled by the Connection; deleted when nothing is exported. Turning
// autoBind off leaves it.
func (r *Reconciler) reconcileAutoBind(ctx context.Context, conn *kbindv1alpha1.Connection) error {
	if !conn.Spec.AutoBind {
		return nil
	}
	cb := &kbindv1alpha1.ClusterBinding{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: conn.Name}, cb)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading autoBind ClusterBinding %s: %w", conn.Name, err)
	}
	if exists && !metav1.IsControlledBy(cb, conn) {
		log.FromContext(ctx).Info("Not managing autoBind ClusterBinding: an object of that name exists and is not controlled by this Connection", "clusterBinding", conn.Name)
		return nil
	}
	if len(conn.Status.ExportedAPIs) == 0 {
		if exists && cb.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, cb); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting autoBind ClusterBinding %s: %w", conn.Name, err)
			}
		}
		return nil
	}
	desired := desiredAutoBinding(conn)
	if !exists {
		if err := controllerutil.SetControllerReference(conn, desired, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating autoBind ClusterBinding %s: %w", conn.Name, err)
		}
		return nil
	}
	if equality.Semantic.DeepEqual(cb.Spec, desired.Spec) && cb.Labels[kbindv1alpha1.ManagedLabel] == kbindv1alpha1.ManagedLabelValue {
		return nil
	}
	base := client.MergeFrom(cb.DeepCopy())
	cb.Spec = desired.Spec
	if cb.Labels == nil {
		cb.Labels = map[string]string{}
	}
	cb.Labels[kbindv1alpha1.ManagedLabel] = kbindv1alpha1.ManagedLabelValue
	if err := r.Client.Patch(ctx, cb, base); err != nil {
		return fmt.Errorf("updating autoBind ClusterBinding %s: %w", conn.Name, err)
	}
	return nil
}

// desiredAutoBinding is the autoBind ClusterBinding of a Connection.
func desiredAutoBinding(conn *kbindv1alpha1.Connection) *kbindv1alpha1.ClusterBinding {
	apis := make([]kbindv1alpha1.APIReference, 0, len(conn.Status.ExportedAPIs))
	for _, e := range conn.Status.ExportedAPIs {
		apis = append(apis, kbindv1alpha1.APIReference{Name: e.Name})
	}
	return &kbindv1alpha1.ClusterBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name:   conn.Name,
			Labels: map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue},
		},
		Spec: kbindv1alpha1.BindingSpec{
			ConnectionRef:  kbindv1alpha1.ConnectionReference{Name: conn.Name},
			APIs:           apis,
			ConflictPolicy: kbindv1alpha1.ConflictPolicyFail,
		},
	}
}

// deleteAutoBinding deletes the autoBind ClusterBinding of a deleting
// Connection (CONN-7); it drains like any other binding.
func (r *Reconciler) deleteAutoBinding(ctx context.Context, conn *kbindv1alpha1.Connection) error {
	if !conn.Spec.AutoBind {
		return nil
	}
	cb := &kbindv1alpha1.ClusterBinding{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: conn.Name}, cb); err != nil || !metav1.IsControlledBy(cb, conn) || !cb.DeletionTimestamp.IsZero() {
		return client.IgnoreNotFound(err)
	}
	if err := r.Client.Delete(ctx, cb); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting autoBind ClusterBinding %s: %w", conn.Name, err)
	}
	return nil
}

// referencingBindings lists the bindings naming the Connection, through
// the cache index.
func (r *Reconciler) referencingBindings(ctx context.Context, name string) ([]string, error) {
	all, err := index.ListBindings(ctx, r.Client, index.AllBindings, client.MatchingFields{index.BindingConnection: name})
	if err != nil {
		return nil, fmt.Errorf("the bindings of connection %s: %w", name, err)
	}
	out := make([]string, 0, len(all))
	for _, b := range all {
		name := b.GetName()
		if ns := b.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		out = append(out, b.BindingKind()+" "+name)
	}
	return out, nil
}

func (r *Reconciler) connectionsOfSecret(ctx context.Context, ref kbindv1alpha1.SecretKeyReference) ([]kbindv1alpha1.Connection, error) {
	var list kbindv1alpha1.ConnectionList
	if err := r.Client.List(ctx, &list, client.MatchingFields{index.ConnectionSecret: index.SecretKey(ref.Namespace, ref.Name)}); err != nil {
		return nil, fmt.Errorf("listing connections of secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return list.Items, nil
}

// requestsFor maps an object to the Connection requests named by fn.
func requestsFor(names ...string) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(names))
	for _, n := range names {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	return out
}
