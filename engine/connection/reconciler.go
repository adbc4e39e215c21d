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

// Package connection reconciles Connections (CONN-1..8, HB-1): it
// resolves the kubeconfig Secret, reads and pins both cluster identities,
// discovers the provider's exports, keeps the provider session and heartbeat
// running while the Connection is Ready, maintains the autoBind
// ClusterBinding, and tears down in order on deletion.
//
// The reconciler observes, decides and acts; it does not own the
// provider's state. What is known of a provider between reconciles — the
// last identity probe and discovery pass, the heartbeat and its last
// result, the watch of the exported CRDs — is the session layer's
// (session.Manager.Health); the reconciler reads it, records its probes
// there and starts and stops the heartbeat through it, and is woken by its
// one channel, session.Manager.HealthChanges. The decisions are pure
// functions (conditions.go, probe.go's identityDue and discoveryDue).
//
// Requirement ids in comments (such as CONN-7) refer to docs/requirements.md.
package connection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
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
	// HeartbeatInterval is how often the Lease is renewed (each renewal is
	// bounded by heartbeat.RenewTimeout of it and the sessions' request
	// timeout).
	HeartbeatInterval time.Duration
	// InCluster is true when the konnector runs in a Pod.
	InCluster bool
	// Sessions are the provider sessions and each Connection's provider
	// health; they run the heartbeats and the exports watches.
	Sessions *session.Manager
	// LocalIdentity reads the consumer cluster's identity.
	LocalIdentity *identity.Reader
	// Installer delivers consumer CRDs (pullPolicy All) and knows which lag.
	Installer *kbindschema.Installer
	// ExpiryWarning is how long before a credential that is not renewed
	// expires CredentialsExpiring turns True (at the latest when a fifth
	// of its lifetime is left).
	ExpiryWarning time.Duration
	// Version is the konnector's, written on status and heartbeat Leases.
	Version string
	// Events records credential renewals and warnings on Connections.
	Events recorder.EventRecorder

	backoff workqueue.TypedRateLimiter[string]
	// localUID is the consumer cluster's identity, once read.
	localUID consumerUID
	// creds is each Connection's token renewal (credentials.go).
	creds perConnection[credentialState]
	// readyObserved are the Connections (name → UID) whose time to Ready
	// this konnector observed: a reconcile that reads the status from a
	// cache that has not caught up with the Ready write must not observe
	// it again.
	readyObserved perConnection[types.UID]

	// announced holds the UIDs of the held Connections whose Warning Event
	// this process recorded.
	announced sync.Map
}

// validate refuses a Reconciler whose intervals were left unset: the
// engine's Options fill them (engine.Options defaults), this package
// defaults nothing.
func (r *Reconciler) validate() error {
	if r.DiscoveryInterval <= 0 || r.RecheckInterval <= 0 || r.HeartbeatInterval <= 0 || r.ExpiryWarning <= 0 {
		return errors.New("connection: DiscoveryInterval, RecheckInterval, HeartbeatInterval and ExpiryWarning must be positive")
	}
	return nil
}

// MaxProbeBackoff caps the retry of a Connection whose provider could not
// be reached, read or trusted: a provider that comes back is noticed
// within this long, however long it was gone (a wider cap let a provider
// healed after a minute's outage wait another minute). While it lasts,
// one identity read per retry is all a broken Connection costs.
const MaxProbeBackoff = 10 * time.Second

// Spreads of the requeues, so that Connections that fail or start
// together (a provider API server restart fails all of a konnector's
// Connections, and a thousand konnectors', in the same second) do not
// probe the provider in lockstep ever after. A retry comes up to a
// quarter early, never late: a healed provider is still noticed within
// MaxProbeBackoff. A discovery pass comes up to a fifth late, never early
// (an early reconcile would find the pass not yet due and requeue for the
// rest, spreading nothing).
var (
	retrySpread     = [2]float64{0.75, 1}
	discoverySpread = [2]float64{1, 1.2}
)

// spread scales d by a factor in [f[0], f[1]) chosen by r in [0, 1).
func spread(d time.Duration, f [2]float64, r float64) time.Duration {
	return time.Duration(float64(d) * (f[0] + (f[1]-f[0])*r))
}

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
// it, it tears down. A deleting Connection whose spec.deletionProtection is
// true is held (protection.go): it works as a live one, deletes and drains
// nothing, and says Ready=False/DeletionProtected.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	conn := &kbindv1alpha1.Connection{}
	if err := r.Client.Get(ctx, req.NamespacedName, conn); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	path, err := r.deletionPath(ctx, conn)
	if path.done || err != nil {
		return ctrl.Result{}, err
	}
	before := conn.DeepCopy()
	obs, sess, next := r.observe(ctx, conn, path)
	conds := desiredConditions(obs)
	d := decide(obs, works(obs, conds))
	if err := r.act(ctx, before, conn, sess, obs, conds, d); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.requeueAfter(conn.Name, d, obs.creds, next)}, nil
}

// observe learns what the decision needs: the Secret, the session, both
// identities and the exports (connect), the heartbeat's last result, and
// the consumer CRDs' schema. It returns the session and when the next
// discovery pass is due. pullPolicy All installs here, once per discovery
// pass rather than on every reconcile (heartbeat results and binding
// changes trigger many): SchemaInSync reports its outcome.
func (r *Reconciler) observe(ctx context.Context, conn *kbindv1alpha1.Connection, path deletion) (observation, *session.Session, time.Duration) {
	obs := observation{draining: path.draining, deleting: !conn.DeletionTimestamp.IsZero() && !path.held,
		held: path.held, autoBinding: path.autoBinding, referencing: path.referencing}
	sess, next := r.connect(ctx, conn, &obs)
	r.observeHeartbeat(conn.Name, &obs)
	if installsAll(obs, conn.Spec.Schema.PullPolicy) {
		r.installAll(ctx, conn, sess, obs.discovery.Source, obs.exports)
	}
	obs.lagging, obs.schemaKnown = r.Installer.Lagging(conn.Name)
	obs.refusedSwitches = r.Installer.RefusedSwitches(conn.Name)
	return obs, sess, next
}

// observeHeartbeat puts the heartbeat's last result into obs, when one
// runs.
func (r *Reconciler) observeHeartbeat(name string, obs *observation) {
	h, _ := r.Sessions.Health(name)
	if !h.Heartbeat.Running {
		return
	}
	obs.heartbeatKnown, obs.heartbeat = h.Heartbeat.Known, h.Heartbeat.Err
	obs.leaseRef = h.Heartbeat.Lease.Namespace + "/" + h.Heartbeat.Lease.Name
	obs.leaseEvery = r.HeartbeatInterval
	obs.duplicate = h.Heartbeat.VerdictAt(time.Now()) == heartbeat.Duplicate
}

// act carries out decision d: the heartbeat and the session through the
// session layer, then the status (one write, only when it changed) and
// the autoBind ClusterBinding of a Ready Connection. An autoBind failure
// is returned after the status is written.
func (r *Reconciler) act(ctx context.Context, before, conn *kbindv1alpha1.Connection, sess *session.Session, obs observation, conds []patch.Condition, d decision) error {
	switch d.heartbeat {
	case heartbeatRun:
		r.Sessions.RunHeartbeat(sess, r.lease(conn, sess, obs.creds), r.HeartbeatInterval)
	case heartbeatStop:
		r.Sessions.StopHeartbeat(conn.Name)
	}
	r.useSession(conn.Name, sess, d.useSession, obs.published)
	r.reportHeartbeat(before, conn, conds)
	patch.SetConditions(&conn.Status.Conditions, conds, conn.Generation)
	r.reportCredentials(conn, obs.creds, time.Now())
	conn.Status.KonnectorVersion = r.Version
	metrics.ConnectionReady.WithLabelValues(conn.Name).Set(map[bool]float64{true: 1, false: 0}[isReady(conds)])
	if d.ready {
		conn.Status.ActiveSchemaSource = obs.discovery.Source
		conn.Status.ExportedAPIs = obs.exports
	}
	var autoBindErr error
	if !obs.deleting {
		autoBindErr = r.reconcileAutoBind(ctx, conn, d.ready)
	}
	if err := patch.Status(ctx, r.Client, before, conn); err != nil {
		return fmt.Errorf("connection %s: %w", conn.Name, err)
	}
	if !obs.held {
		r.announced.Delete(conn.UID)
	} else if _, done := r.announced.LoadOrStore(conn.UID, struct{}{}); !done && !heldBefore(before.Status) {
		// The status this pass started from may lag the one a pass
		// before wrote (the cache): this process announces once.
		r.announceHeld(conn)
	}
	if firstReady(before.Status, d.ready) && r.observeReadyOnce(conn) {
		metrics.ConnectionTimeToReady.Observe(time.Since(conn.CreationTimestamp.Time).Seconds())
	}
	return autoBindErr
}

// useSession publishes and activates the session when the Connection may
// use it, and unpublishes the Connection's session (stopping its watches)
// when not.
func (r *Reconciler) useSession(name string, sess *session.Session, use, published bool) {
	switch {
	case use && !published:
		r.Sessions.Publish(sess)
		sess.Activate()
	case use:
		sess.Activate()
	default:
		r.Sessions.Unpublish(name)
	}
}

// lease is the Connection's heartbeat Lease, renewed through sess.
func (r *Reconciler) lease(conn *kbindv1alpha1.Connection, sess *session.Session, creds credentialView) heartbeat.Lease {
	iso := isolation.For(conn.Spec.IsolationOf())
	lease := heartbeat.For(conn.Name, conn.Status.LocalClusterUID, iso.LeaseNamespace(sess.Namespace))
	lease.Isolation = iso
	lease.Info = r.leaseInfo(creds)
	return lease
}

// requeueAfter is when the Connection is reconciled again: at the next
// discovery pass (next), the discovery interval or the backoff, as d
// says — or earlier when a credential renewal, retry, warning or expiry
// falls due.
func (r *Reconciler) requeueAfter(name string, d decision, creds credentialView, next time.Duration) time.Duration {
	var after time.Duration
	switch d.requeue {
	case requeueDiscovery:
		r.backoff.Forget(name)
		after = spread(next, discoverySpread, rand.Float64())
	case requeueSecret:
		after = r.DiscoveryInterval
	default:
		after = spread(r.backoff.When(name), retrySpread, rand.Float64())
	}
	if due := credentialsDue(creds, r.ExpiryWarning, time.Now()); due > 0 && due < after {
		after = due
	}
	return after
}

// deletion is what deletionPath found of a Connection's deletion.
type deletion struct {
	// done: nothing more to do (already finalized, or torn down now).
	done bool
	// draining lists the bindings a deleting Connection waits for.
	draining []string
	// held: the deletion is held by spec.deletionProtection
	// (holdDeletion); autoBinding names the autoBind ClusterBinding its
	// deletion would delete ("" for none) and referencing the bindings it
	// would wait for.
	held        bool
	autoBinding string
	referencing []string
}

// deletionPath handles a deleting Connection: done when there is nothing
// more to do (already finalized, or torn down now that no binding
// references it), else the bindings it waits for — or, when its deletion
// is held, what the deletion would take: nothing is deleted, drained or
// retired then. A live Connection gets its finalizer.
func (r *Reconciler) deletionPath(ctx context.Context, conn *kbindv1alpha1.Connection) (deletion, error) {
	if conn.DeletionTimestamp.IsZero() {
		return deletion{}, patch.AddFinalizer(ctx, r.Client, conn, kbindv1alpha1.CleanupFinalizer)
	}
	if !controllerutil.ContainsFinalizer(conn, kbindv1alpha1.CleanupFinalizer) {
		r.forget(conn.Name)
		return deletion{done: true}, nil
	}
	if holdDeletion(!conn.DeletionTimestamp.IsZero(), conn.Spec.DeletionProtection, true) {
		referencing, err := r.referencingBindings(ctx, conn)
		if err != nil {
			return deletion{done: true}, err
		}
		auto, err := r.autoBindingOf(ctx, conn)
		return deletion{held: true, autoBinding: auto, referencing: referencing}, err
	}
	if err := r.deleteAutoBinding(ctx, conn); err != nil {
		return deletion{done: true}, err
	}
	draining, err := r.referencingBindings(ctx, conn)
	if err != nil {
		return deletion{done: true}, err
	}
	if len(draining) == 0 {
		return deletion{done: true}, r.teardown(ctx, conn)
	}
	return deletion{draining: draining}, nil
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
	localUID, _ := r.localUID.read(ctx, r.LocalIdentity, conn.Name) // "" (unknown yet) caches everything; probe reports the error
	sess, published, err := r.Sessions.Prepare(conn.Name, parsed.Hash, parsed.Namespace, localUID, isolation.For(conn.Spec.IsolationOf()), parsed.Config)
	if err != nil {
		obs.secretErr = fmt.Errorf("the kubeconfig cannot be used: %w", err)
		return nil, 0
	}
	obs.published = published
	// The session carries the credential to use before its first request:
	// after a restart, the renewed token may be the only valid one.
	obs.creds = r.useCredential(ctx, conn, parsed, sess, time.Now())
	next := r.probe(ctx, conn, sess, parsed, obs)
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
	r.Sessions.Retire(ctx, conn.Name)
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

// forget drops everything held for a Connection that is gone: the session
// layer's sessions, heartbeat and health, and this reconciler's own.
func (r *Reconciler) forget(name string) {
	r.Sessions.Forget(name)
	r.readyObserved.delete(name)
	r.creds.delete(name)
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
	return r.readyObserved.swap(conn.Name, conn.UID) != conn.UID
}

// referencingBindings lists the bindings naming the Connection, through
// the cache index; a protected one says how to let it go (a Connection
// never deletes nor drains a binding other than its autoBind one, whose
// protection is the Connection's: it waits for them).
func (r *Reconciler) referencingBindings(ctx context.Context, conn *kbindv1alpha1.Connection) ([]string, error) {
	all, err := index.ListBindings(ctx, r.Client, index.AllBindings, client.MatchingFields{index.BindingConnection: conn.Name})
	if err != nil {
		return nil, fmt.Errorf("the bindings of connection %s: %w", conn.Name, err)
	}
	out := make([]string, 0, len(all))
	for _, b := range all {
		name := b.GetName()
		if ns := b.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		note := protectionNote(b)
		if conn.Spec.AutoBind && b.GetNamespace() == "" && metav1.IsControlledBy(b, conn) {
			note = "" // the autoBind ClusterBinding carries the Connection's protection
		}
		out = append(out, b.BindingKind()+" "+name+note)
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
