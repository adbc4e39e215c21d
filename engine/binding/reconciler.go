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

// Package binding reconciles ClusterBindings and Bindings (BIND-1..4,
// SCHEMA-3..6): it checks that the Connection admits a Binding's namespace,
// checks each listed API against the Connection's exports, delivers the
// consumer CRDs through the schema installer, reports what it cannot do on
// the binding, and unbinds in order on deletion — unless its deletion
// protection holds it (protection.go).
//
// Requirement ids in comments (such as BIND-1) refer to docs/requirements.md.
package binding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/admission"
	"github.com/kbind/kbind/engine/index"
	"github.com/kbind/kbind/engine/internal/patch"
	"github.com/kbind/kbind/engine/internal/refusal"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/related"
	"github.com/kbind/kbind/engine/routing"
	kbindschema "github.com/kbind/kbind/engine/schema"
	"github.com/kbind/kbind/engine/session"
	"github.com/kbind/kbind/engine/syncer"
)

// Reconciler reconciles one binding kind: ClusterBinding (Namespaced false)
// or Binding (Namespaced true).
type Reconciler struct {
	Client     client.Client
	Sessions   *session.Manager
	Installer  *kbindschema.Installer
	Namespaced bool
	// Resync is the periodic requeue (BIND-1); required (the engine's
	// Options default it).
	Resync time.Duration
	// Syncers run instance sync for the bound APIs; Results are their
	// per-object outcomes.
	Syncers *syncer.Registry
	Results *syncer.Results
	// Triggers carry Connections whose instance results changed; their
	// bindings are re-counted.
	Triggers <-chan event.GenericEvent
	// Related copies relatedResources (see related.go).
	Related *related.Copier
	// Events records the Warning Events on Bindings whose consumer CRD a
	// ClusterBinding took over (BIND-3).
	Events recorder.EventRecorder
	// Metadata reads the consumer API server directly, metadata only: the
	// objects of a consumer CRD a ClusterBinding would replace are counted
	// there, never in a cache that may lag (replaceCollided).
	Metadata metadata.Interface

	// announced holds the UIDs of the held bindings whose Warning Event
	// this process recorded: the status a reconcile starts from may lag
	// the one it wrote (the cache), so status alone would announce twice.
	announced sync.Map
	// kept counts the provider copies deletion protection kept (kept.go);
	// set by SetupWithManager. keptKnown holds, per binding UID, the total
	// of status.keptCopies this process last wrote (announceKept).
	kept      *syncer.KeptCounter
	keptKnown sync.Map
}

// binding is the ClusterBinding or Binding being reconciled, with its spec
// and status at hand.
type binding struct {
	obj    kbindv1alpha1.BindingObject
	spec   *kbindv1alpha1.BindingSpec
	status *kbindv1alpha1.BindingStatus
}

func (r *Reconciler) newObject() kbindv1alpha1.BindingObject {
	if r.Namespaced {
		return &kbindv1alpha1.Binding{}
	}
	return &kbindv1alpha1.ClusterBinding{}
}

func access(obj kbindv1alpha1.BindingObject) binding {
	return binding{obj: obj, spec: obj.BindingSpec(), status: obj.BindingStatus()}
}

// Reconcile implements reconcile.Reconciler: fetch, the deletion path, the
// finalizer, then the phases in order — read the Connection, deliver the
// consumer CRDs, run the syncers, unbind the APIs no longer listed, copy
// related resources — and one status write at the end, also when a phase
// failed (Ready then says what failed), and only when the status changed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res ctrl.Result, retErr error) {
	obj := r.newObject()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	b := access(obj)
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("binding", req.String(), "connection", b.spec.ConnectionRef.Name))
	held := false
	if !obj.GetDeletionTimestamp().IsZero() {
		// A deletion held by spec.deletionProtection (protection.go) goes
		// on like a live binding: it syncs, and Ready says why it stays.
		var err error
		if held, err = r.holds(ctx, b); err != nil {
			return ctrl.Result{}, err
		}
		if !held {
			r.announced.Delete(obj.GetUID())
			r.keptKnown.Delete(obj.GetUID())
			return r.finalize(ctx, b)
		}
	} else if err := patch.AddFinalizer(ctx, r.Client, obj, kbindv1alpha1.CleanupFinalizer); err != nil {
		return ctrl.Result{}, err
	}

	before := obj.DeepCopyObject().(kbindv1alpha1.BindingObject)
	prior := before.BindingStatus()
	o := &observation{connection: b.spec.ConnectionRef.Name}
	defer func() {
		setStatus(b, o, retErr)
		if held {
			heldReady(b, retErr)
		}
		if err := patch.Status(ctx, r.Client, before, obj); err != nil {
			// Retried with backoff: controller-runtime ignores a
			// RequeueAfter returned with an error (and warns).
			res, retErr = ctrl.Result{}, errors.Join(retErr, err)
		} else {
			r.announce(b, prior, held, retErr == nil && o.keptCopies != nil)
		}
	}()
	if err := r.readConnection(ctx, b, o); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the Connection: %w", err)
	}
	if o.notAdmitted != "" {
		// Stopped, not released: status.boundAPIs still says what its
		// objects' finalizers belong to, so that unbinding drains them.
		o.kept = stillListed(b.spec, prior)
	}
	if err := r.deliverSchemas(ctx, b, o); err != nil {
		return ctrl.Result{}, fmt.Errorf("delivering the consumer CRDs: %w", err)
	}
	if err := r.reconcileSyncers(ctx, b, prior, o); err != nil {
		return ctrl.Result{}, fmt.Errorf("running the syncers: %w", err)
	}
	if err := r.unbindRemoved(ctx, b, prior, o); err != nil {
		return ctrl.Result{}, fmt.Errorf("unbinding APIs no longer listed: %w", err)
	}
	if err := r.reconcileRelated(ctx, b, prior, o); err != nil {
		return ctrl.Result{}, fmt.Errorf("copying related resources: %w", err)
	}
	if err := r.markUnbindDeletesCRD(ctx, b, o.bound); err != nil {
		return ctrl.Result{}, fmt.Errorf("deciding what unbinding would delete: %w", err)
	}
	if err := r.countKept(ctx, b, prior, o); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.Resync}, nil
}

// announce records, once the status is written, the Events it calls for:
// a held deletion's Warning once (announceHeld), and a CopiesKept Event
// when counted is set and the count grew (announceKept).
func (r *Reconciler) announce(b binding, prior *kbindv1alpha1.BindingStatus, held, counted bool) {
	if held && !heldBefore(prior) {
		if _, done := r.announced.LoadOrStore(b.obj.GetUID(), struct{}{}); !done {
			r.announceHeld(b)
		}
	}
	if counted {
		r.announceKept(b, prior.KeptCopies)
	}
}

// setStatus writes what a reconcile learned into the binding's status.
// After a failed phase only Ready changes — False, saying what failed: the
// rest of the observation is partial, and status.boundAPIs is what
// unbinding remembers, so a partial pass never shrinks it.
func setStatus(b binding, o *observation, failed error) {
	if failed != nil {
		patch.SetCondition(&b.status.Conditions, metav1.Condition{
			Type: string(kbindv1alpha1.ConditionReady), Status: metav1.ConditionFalse, Reason: string(kbindv1alpha1.ReasonPending),
			Message: "reconciling failed, retrying with backoff: " + failed.Error(),
		}, b.obj.GetGeneration())
		return
	}
	b.status.BoundAPIs = o.bound
	if len(o.kept) > 0 {
		b.status.BoundAPIs = append(append([]kbindv1alpha1.BoundAPI{}, o.bound...), o.kept...)
		sort.Slice(b.status.BoundAPIs, func(i, j int) bool { return b.status.BoundAPIs[i].Name < b.status.BoundAPIs[j].Name })
	}
	patch.SetConditions(&b.status.Conditions, desiredConditions(*o), b.obj.GetGeneration())
	setKept(b, o)
}

// stillListed is what a Binding its Connection no longer admits keeps of
// status.boundAPIs: the entries of the APIs it still lists, without the
// instance counts of a sync that no longer runs. (The entries of APIs it
// no longer lists are unbound by unbindRemoved as always.)
func stillListed(spec *kbindv1alpha1.BindingSpec, before *kbindv1alpha1.BindingStatus) []kbindv1alpha1.BoundAPI {
	listed := map[string]bool{}
	for _, name := range spec.ConsumerNames() {
		listed[name] = true
	}
	var out []kbindv1alpha1.BoundAPI
	for _, a := range before.BoundAPIs {
		if listed[a.Name] {
			out = append(out, kbindv1alpha1.BoundAPI{Name: a.Name, ProviderAPI: a.ProviderAPI, CRDHash: a.CRDHash})
		}
	}
	return out
}

// reconcileSyncers starts, re-scopes or stops the syncers of every API the
// binding lists or listed, and fills in per-API instance counts.
func (r *Reconciler) reconcileSyncers(ctx context.Context, b binding, before *kbindv1alpha1.BindingStatus, o *observation) error {
	apis := map[string]bool{}
	for _, name := range b.spec.ConsumerNames() {
		apis[name] = true
	}
	for _, a := range before.BoundAPIs {
		apis[a.Name] = true
	}
	for api := range apis {
		if err := r.Syncers.Reconcile(ctx, api); err != nil {
			return fmt.Errorf("reconciling the syncer of %s: %w", api, err)
		}
	}
	for i := range o.bound {
		entry := &o.bound[i]
		crd := &apiextensionsv1.CustomResourceDefinition{}
		rt := syncer.Route{CRD: entry.Name, Connection: o.connection}
		if slices.Contains(o.unrouted, entry.Name) {
			continue // refused or incompatible: the conditions say why
		}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: entry.Name}, crd); err != nil || !r.Syncers.Running(rt) {
			what := entry.Name
			if refused := r.Syncers.Refused(rt); refused != "" {
				o.accessRefused = append(o.accessRefused, entry.Name+": "+refused)
			}
			if failed := r.Syncers.LastError(rt); failed != "" {
				what += " (last attempt failed: " + failed + "; retrying with backoff)"
			}
			o.notSyncing = append(o.notSyncing, what)
			continue
		}
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		total, selected, err := r.countObjects(ctx, rt, b.spec, crd, b.obj.GetNamespace())
		if err != nil {
			return err
		}
		sum := r.Results.Summarize(o.connection, gk, b.obj.GetNamespace(), !r.Namespaced, selected)
		pending := total - sum.Synced - sum.Failed - sum.Conflicts
		if pending < 0 {
			pending = 0
		}
		entry.ConflictCount = sum.Conflicts
		entry.Instances = &kbindv1alpha1.InstanceCounts{Total: total, Synced: sum.Synced, Pending: pending, Failed: sum.Failed + sum.Conflicts, Deleting: sum.Deleting, Imported: sum.Imported}
		o.conflicts += sum.Conflicts
		if sum.ConflictReason == kbindv1alpha1.ReasonOwnedByAnother {
			o.ownedByAnother += sum.Conflicts
		}
		o.instanceForbidden = append(o.instanceForbidden, sum.Forbidden...)
		o.instanceRefused = append(o.instanceRefused, sum.Refused...)
	}
	return nil
}

// unbindRemoved releases every API the binding listed before and lists no
// more (an entry removed, an autoBind export gone) exactly like deleting
// the binding would release it (SYNC-D, SCHEMA-6): objects only this
// binding covered get their provider copies deleted and their syncer
// finalizer released, then — for a ClusterBinding, when no other binding
// lists the API — kbind's consumer CRD goes, unless the ClusterBinding's
// spec.deletionProtection is true and it is not being deleted (BIND-5: the
// CRD stays, with the objects whose provider copies the drain kept). The API stays in
// status.boundAPIs until it is drained, so a konnector restart resumes the
// release instead of forgetting it.
func (r *Reconciler) unbindRemoved(ctx context.Context, b binding, before *kbindv1alpha1.BindingStatus, o *observation) error {
	listed := map[string]bool{}
	for _, name := range b.spec.ConsumerNames() {
		listed[name] = true
	}
	for _, entry := range before.BoundAPIs {
		if listed[entry.Name] {
			continue
		}
		remaining, err := r.Syncers.Drain(ctx, entry.Name, b.spec.ConnectionRef.Name, b.obj.GetNamespace(), !r.Namespaced, b.obj)
		if err != nil {
			return fmt.Errorf("unbinding %s: %w", entry.Name, err)
		}
		if remaining > 0 {
			o.unbinding = append(o.unbinding, fmt.Sprintf("%s (%d object(s) waiting)", entry.Name, remaining))
			o.bound = append(o.bound, *entry.DeepCopy())
			continue
		}
		switch {
		case r.Namespaced:
		case b.spec.DeletionProtection && b.obj.GetDeletionTimestamp().IsZero():
			// BIND-5: an API removed from a protected ClusterBinding keeps
			// its consumer CRD, and with it the objects whose provider
			// copies the drain kept. (A deleting one drains as before.)
			log.FromContext(ctx).Info("Kept the consumer CRD of an API removed from a ClusterBinding under deletion protection", "api", entry.Name)
		default:
			if err := r.unbindCRD(ctx, b, entry.Name); err != nil {
				return err
			}
		}
		if err := r.forgetUnbound(ctx, b, entry.Name); err != nil {
			return err
		}
		log.FromContext(ctx).Info("Unbound an API the binding no longer lists", "api", entry.Name)
	}
	sort.Slice(o.bound, func(i, j int) bool { return o.bound[i].Name < o.bound[j].Name })
	return nil
}

// countObjects counts the consumer objects of a CRD in the binding's scope
// that its filters select, from the cache, and returns which namespaces its
// namespaceSelector selects (for the sync results it summarizes).
func (r *Reconciler) countObjects(ctx context.Context, rt syncer.Route, spec *kbindv1alpha1.BindingSpec, crd *apiextensionsv1.CustomResourceDefinition,
	namespace string) (int32, func(string) bool, error) {
	gvk, _ := kbindschema.StorageGVK(crd)
	objects, namespaces, err := syncer.Filters(*spec, crd.Name)
	if err != nil {
		return 0, func(string) bool { return false }, nil // the binding reports it (Filters); nothing of it syncs
	}
	selected, failed := r.Syncers.NamespacesSelected(ctx, namespaces)
	counted := selected
	if namespaces == nil {
		counted = nil // every namespace
	}
	n, err := r.Syncers.Count(ctx, rt, gvk, namespace, !r.Namespaced, objects, counted, failed)
	return n, selected, err
}

// forgetUnbound releases what the engine holds for an API's route through
// the binding's Connection (syncer, results, informers) once no binding
// through that Connection lists it any more.
func (r *Reconciler) forgetUnbound(ctx context.Context, b binding, api string) error {
	others, err := r.otherBindingsOf(ctx, api, b.obj, b.spec.ConnectionRef.Name)
	if err != nil || others > 0 {
		return err
	}
	r.Syncers.Forget(ctx, api, b.spec.ConnectionRef.Name)
	return nil
}

// observation is what one reconcile learned about a binding; conditions are
// a pure function of it.
type observation struct {
	connection string
	// notAdmitted is why the Connection does not admit the Binding's
	// namespace (BIND-3): the Binding gets nothing.
	notAdmitted string
	// kept are the status.boundAPIs entries a Binding no longer admitted
	// keeps (stillListed).
	kept []kbindv1alpha1.BoundAPI
	// connProblem is why the Connection cannot be used (missing, not Ready).
	connProblem string
	notExported []string
	// misfit names APIs a namespaced Binding cannot activate, with why.
	clusterScoped []string
	// unconfinable names cluster-scoped APIs the Connection's Namespace
	// isolation cannot confine; isolation describes it.
	unconfinable []string
	isolation    string
	overlapped   []string
	forbidden    []string
	problems     []string
	pending      []string
	bound        []kbindv1alpha1.BoundAPI
	// conn, session and clusterUID are the Connection's, when usable.
	conn       *kbindv1alpha1.Connection
	session    *session.Session
	clusterUID string
	// notSyncing lists bound APIs whose syncer does not run (yet).
	notSyncing []string
	// conflicts counts skipped objects; ownedByAnother how many of them
	// are OwnedByAnother.
	conflicts, ownedByAnother int32
	// instanceForbidden lists provider refusals of instance writes.
	instanceForbidden []string
	// relatedRefused lists what kbind refuses to copy of relatedResources.
	relatedRefused []string
	// instanceRefused lists what kbind refuses to do for bound objects (a
	// hand-over the binding would undo).
	instanceRefused []string
	// accessRefused lists the APIs whose syncer either side refuses the
	// list of, with what to grant.
	accessRefused []string
	// unbinding lists APIs no longer listed whose objects still wait for
	// their provider copies to go.
	unbinding []string
	// storageSwitch says, per API, why kbind keeps its consumer CRD at its
	// storage version although the provider moved to another
	// (kbindschema.DecideStorageSwitch); sync goes on at the old one.
	storageSwitch []string
	// reducedVersions says, per API, why its consumer CRD serves fewer
	// versions than the provider (a conversion webhook).
	reducedVersions []string
	// projection lists the entries whose projection is refused (a
	// collision, a reserved group, names another CRD holds), with why;
	// they are not bound.
	projection []string
	// namesTaken lists the unprojected entries whose consumer CRD kbind
	// does not create because other CRDs of its group hold its names, with
	// which; they are not bound.
	namesTaken []string
	// invalidFilters lists the selectors that do not parse, and
	// invalidMutations the mutation rules that do not compile: the binding
	// gives its syncers no scope (nothing syncs, nothing is released).
	invalidFilters, invalidMutations []string
	// overlapping names, per API, the earlier binding through another
	// Connection that could claim the same objects; incompatible, per API,
	// the first difference between this Connection's provider schema and
	// the consumer CRD another Connection supplies. unrouted lists both
	// kinds of API: nothing of them syncs through this binding.
	overlapping, incompatible, unrouted []string
	// importRefused lists the entries that ask to import the provider's
	// objects where kbind cannot tell which are this consumer's, with why;
	// they are not bound.
	importRefused []string
	// keptCopies is what the counts of the provider copies deletion
	// protection kept make of status.keptCopies (kept.go); nil when they
	// were not counted (no usable Connection): the status stays.
	keptCopies *keptOutcome
}

// importProblem is why an entry's providerObjects: Import is refused
// ("" when it is not asked for, or allowed): only under an isolation
// that gives this consumer a provider place of its own (Namespace,
// Prefixed) can a provider object's place say that it is this
// consumer's, and only for a namespaced API.
func importProblem(api kbindv1alpha1.APIReference, export kbindv1alpha1.ExportedAPI, iso isolation.Mapping) string {
	switch {
	case api.ProviderObjects != kbindv1alpha1.ProviderObjectsImport:
		return ""
	case !iso.Isolated():
		return fmt.Sprintf("%s: providerObjects Import needs a Connection with Namespace or Prefixed isolation (under None any tenant could place objects where this consumer's would be)", api.Name)
	case export.Scope == kbindv1alpha1.APIScopeCluster:
		return fmt.Sprintf("%s: providerObjects Import is for namespaced APIs (a cluster-scoped provider object says nothing of the consumer it is for)", api.Name)
	}
	return ""
}

// readConnection reads the binding's Connection and its session; a
// Connection that cannot be used, or does not admit a Binding's namespace,
// is a condition (connProblem, notAdmitted), not an error. A Binding the
// Connection does not admit gets neither Connection nor session: nothing
// after this phase acts for it (BIND-3).
func (r *Reconciler) readConnection(ctx context.Context, b binding, o *observation) error {
	conn := &kbindv1alpha1.Connection{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: o.connection}, conn); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading connection %s: %w", o.connection, err)
		}
		o.connProblem = fmt.Sprintf("Connection %q not found", o.connection)
		return nil
	}
	if r.Namespaced {
		d, err := admission.Admits(ctx, r.Client, conn, b.obj.GetNamespace())
		if err != nil {
			return err
		}
		if !d.Admitted {
			o.notAdmitted = admission.Message(conn.Name, b.obj.GetNamespace(), d)
			return nil
		}
	}
	if c := meta.FindStatusCondition(conn.Status.Conditions, string(kbindv1alpha1.ConditionReady)); !syncer.ConnectionUsable(conn) {
		why := "no status yet"
		if c != nil {
			why = c.Reason + ": " + c.Message
		}
		o.connProblem = fmt.Sprintf("Connection %q is not Ready (%s)", o.connection, why)
		return nil
	}
	sess, ok := r.Sessions.Get(conn.Name)
	if !ok {
		o.connProblem = fmt.Sprintf("Connection %q has no provider session yet", o.connection)
		return nil
	}
	o.conn, o.session, o.clusterUID = conn, sess, conn.Status.LocalClusterUID
	o.isolation = isolation.For(conn.Spec.IsolationOf()).String()
	return nil
}

// deliverSchemas checks each listed API against the Connection's exports
// and the binding's scope, and installs the consumer CRD of each one the
// binding may use (SCHEMA-3..5); o.bound lists them.
func (r *Reconciler) deliverSchemas(ctx context.Context, b binding, o *observation) error {
	if o.conn == nil {
		return nil // the Connection cannot be used: connProblem says why
	}
	exports := map[string]kbindv1alpha1.ExportedAPI{}
	for _, e := range o.conn.Status.ExportedAPIs {
		exports[e.Name] = e
	}
	discoverer := &kbindschema.Discoverer{Client: o.session.CRDs, Discovery: o.session.Discovery}
	iso := isolation.For(o.conn.Spec.IsolationOf())
	claimed := map[string]string{} // consumer API → the entry (provider API) that has it
	for _, api := range b.spec.APIs {
		export, ok := exports[api.Name]
		consumer := api.ConsumerName()
		switch {
		case claimed[consumer] != "":
			o.projection = append(o.projection, fmt.Sprintf("%s and %s are both listed as the consumer API %s: project one of them onto another group or kind", claimed[consumer], api.Name, consumer))
			continue
		case kbindschema.ProjectionProblem(api, r.Namespaced, o.conn.Spec.Schema.PullPolicy) != "":
			o.projection = append(o.projection, kbindschema.ProjectionProblem(api, r.Namespaced, o.conn.Spec.Schema.PullPolicy))
			continue
		case !ok:
			o.notExported = append(o.notExported, api.Name)
			continue
		case r.Namespaced && export.Scope == kbindv1alpha1.APIScopeCluster:
			o.clusterScoped = append(o.clusterScoped, api.Name)
			continue
		case export.Scope == kbindv1alpha1.APIScopeCluster && !iso.AllowsClusterScoped():
			o.unconfinable = append(o.unconfinable, api.Name)
			continue
		case importProblem(api, export, iso) != "":
			o.importRefused = append(o.importRefused, importProblem(api, export, iso))
			continue
		}
		if routed, err := r.routes(ctx, b, consumer, o); err != nil || !routed {
			if err != nil {
				return err
			}
			continue
		}
		claimed[consumer] = api.Name
		entry := kbindv1alpha1.BoundAPI{Name: consumer}
		if api.Projected() {
			entry.ProviderAPI = api.Name
		}
		outcome, ok := r.deliver(ctx, b, o, discoverer, api, export)
		if outcome.Collision || outcome.NamesTaken || slices.Contains(o.notExported, api.Name) {
			continue // never this entry's CRD, or gone from the provider: as for an API not exported
		}
		if ok {
			entry.CRDHash = outcome.Hash
		}
		o.bound = append(o.bound, entry)
		if _, _, err := syncer.Filters(*b.spec, consumer); err != nil && !slices.Contains(o.invalidFilters, err.Error()) {
			o.invalidFilters = append(o.invalidFilters, err.Error())
		}
		if _, _, err := syncer.Mutations(*b.spec, consumer, syncer.MutationLimits(b.obj)); err != nil {
			o.invalidMutations = append(o.invalidMutations, err.Error())
		}
	}
	sort.Slice(o.bound, func(i, j int) bool { return o.bound[i].Name < o.bound[j].Name })
	return nil
}

// deliver computes and installs one API's consumer CRD, recording what
// went wrong in o. A ClusterBinding takes over kbind's CRD of another
// Connection that only namespaced Bindings hold (BIND-3).
func (r *Reconciler) deliver(ctx context.Context, b binding, o *observation, d *kbindschema.Discoverer, api kbindv1alpha1.APIReference, export kbindv1alpha1.ExportedAPI) (kbindschema.Outcome, bool) {
	conn, consumer := o.conn, api.ConsumerName()
	owner, err := r.schemaOwner(ctx, consumer)
	if err != nil {
		o.problems = append(o.problems, err.Error())
		return kbindschema.Outcome{}, false
	}
	var desired *apiextensionsv1.CustomResourceDefinition
	if conn.Spec.Schema.PullPolicy != kbindv1alpha1.PullPolicyNone || (owner != "" && owner != conn.Name) {
		var err error
		var reduced string
		desired, reduced, err = kbindschema.Desired(ctx, d, conn, export)
		if reduced != "" {
			o.reducedVersions = append(o.reducedVersions, reduced)
		}
		switch {
		case refusal.IsForbidden(err):
			o.forbidden = append(o.forbidden, err.Error())
			return kbindschema.Outcome{}, false
		case apierrors.IsNotFound(err):
			// The provider deleted the CRD since the Connection's last
			// discovery: it no longer exports the API, as the next
			// discovery will say too (the caller skips the entry).
			o.notExported = append(o.notExported, api.Name)
			return kbindschema.Outcome{}, false
		case err != nil:
			o.problems = append(o.problems, fmt.Sprintf("reading the provider schema of %s: %v", export.Name, err))
			return kbindschema.Outcome{}, false
		}
		desired = kbindschema.Project(desired, api, conn.Name)
	}
	if outcome, handled := r.replaceCollided(ctx, b, o, consumer, desired); handled {
		return outcome, false
	}
	from := ""
	if !r.Namespaced {
		var err error
		if from, err = r.heldByBindingsOnly(ctx, conn.Name, consumer); err != nil {
			o.problems = append(o.problems, err.Error())
			return kbindschema.Outcome{}, false
		}
	}
	if owner != "" && owner != conn.Name && from == "" {
		return r.joinRoute(ctx, o, api, owner, desired)
	}
	outcome, err := r.Installer.EnsureTakingOver(ctx, conn, consumer, desired, from)
	if outcome.TookOverFrom != "" {
		r.announceTakeOver(ctx, b, conn, api, outcome.TookOverFrom)
	}
	switch {
	case outcome.Collision:
		o.projection = append(o.projection, outcome.Problem)
		return outcome, false
	case outcome.NamesTaken:
		o.namesTaken = append(o.namesTaken, outcome.Problem)
		return outcome, false
	case outcome.StorageSwitch:
		o.storageSwitch = append(o.storageSwitch, outcome.Problem)
		return outcome, false
	case err != nil:
		o.problems = append(o.problems, err.Error())
		return outcome, false
	case outcome.Problem != "":
		o.problems = append(o.problems, outcome.Problem)
		return outcome, false
	case !outcome.Established:
		o.pending = append(o.pending, fmt.Sprintf("CRD %s is not established yet", consumer))
	}
	return outcome, true
}

// replaceCollided decides, for a ClusterBinding, an entry whose consumer
// CRD desired collides with kbind's consumer CRD of another provider API
// (docs/shaping.md#projection): when nothing holds that CRD
// (kbindschema.DecideReplace) it is deleted and the entry waits for it to
// go (then deliver creates desired, its names checked as any new CRD's);
// otherwise the entry is refused naming what holds it. handled is false
// when there is no such CRD: deliver goes on as always.
func (r *Reconciler) replaceCollided(ctx context.Context, b binding, o *observation, consumer string,
	desired *apiextensionsv1.CustomResourceDefinition) (kbindschema.Outcome, bool) {
	if r.Namespaced || desired == nil {
		return kbindschema.Outcome{}, false
	}
	existing := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: consumer}, existing); err != nil {
		if apierrors.IsNotFound(err) {
			return kbindschema.Outcome{}, false
		}
		o.problems = append(o.problems, fmt.Sprintf("reading consumer CRD %s: %v", consumer, err))
		return kbindschema.Outcome{}, true
	}
	owner := existing.Annotations[kbindv1alpha1.ConnectionAnnotation]
	if !kbindschema.Replaceable(existing, desired, owner) {
		return kbindschema.Outcome{}, false
	}
	if !existing.DeletionTimestamp.IsZero() {
		o.pending = append(o.pending, fmt.Sprintf("CRD %s, which served the provider's %s, is being deleted; %s is installed in its place once it is gone",
			consumer, kbindschema.ProviderAPI(existing), consumer))
		return kbindschema.Outcome{}, true
	}
	holders, err := r.holders(ctx, b, existing, owner)
	if err != nil {
		// A failed read never replaces: the entry waits.
		o.problems = append(o.problems, err.Error())
		return kbindschema.Outcome{}, true
	}
	if d, _ := kbindschema.DecideReplace(existing, desired, owner, holders); d.Action != kbindschema.ActionReplace {
		o.projection = append(o.projection, d.Problem)
		return kbindschema.Outcome{Collision: true, Problem: d.Problem}, true
	}
	if err := r.replaceCRD(ctx, existing, owner); err != nil {
		o.problems = append(o.problems, err.Error())
		return kbindschema.Outcome{}, true
	}
	o.pending = append(o.pending, fmt.Sprintf("replacing CRD %s, which served the provider's %s and which nothing held: %s is installed in its place once it is gone",
		consumer, kbindschema.ProviderAPI(existing), consumer))
	return kbindschema.Outcome{}, true
}

// holders reads what holds kbind's consumer CRD crd of Connection owner
// (kbindschema.Holders): the other bindings with an entry it serves — from
// the cache, through the BindingAPI index — its Connection's pullPolicy,
// and its objects, counted on the consumer API server.
func (r *Reconciler) holders(ctx context.Context, b binding, crd *apiextensionsv1.CustomResourceDefinition, owner string) (kbindschema.Holders, error) {
	var h kbindschema.Holders
	all, err := index.ListBindings(ctx, r.Client, index.AllBindings, client.MatchingFields{index.BindingAPI: crd.Name})
	if err != nil {
		return h, fmt.Errorf("the bindings of %s: %w", crd.Name, err)
	}
	for _, other := range all {
		ref, listed := other.BindingSpec().APIFor(crd.Name)
		if other.GetUID() == b.obj.GetUID() || !listed || !kbindschema.Serves(ref, crd) {
			continue
		}
		switch {
		case other.GetNamespace() == "":
			h.ClusterBindings = append(h.ClusterBindings, other.GetName())
		case syncer.Claiming(other):
			h.Bindings = append(h.Bindings, other.GetNamespace()+"/"+other.GetName())
		}
	}
	conn := &kbindv1alpha1.Connection{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: owner}, conn); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return h, fmt.Errorf("reading connection %s: %w", owner, err)
	default:
		h.PullsAll = conn.Spec.Schema.PullPolicy == kbindv1alpha1.PullPolicyAll
	}
	h.Objects, err = r.countAll(ctx, crd)
	return h, err
}

// countAll counts the objects of a consumer CRD on the consumer API
// server: one metadata list of one item, whose remainingItemCount says how
// many follow (paging on when the API server gives no count). A CRD that
// is not established serves nothing, and never did (kbindschema.Established),
// so it holds none.
func (r *Reconciler) countAll(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (int64, error) {
	gvk, ok := kbindschema.StorageGVK(crd)
	if !kbindschema.Established(crd) || !ok {
		return 0, nil
	}
	if r.Metadata == nil {
		return 0, errors.New("binding: no metadata client to count the objects of consumer CRD " + crd.Name)
	}
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: crd.Spec.Names.Plural}
	var n int64
	opts := metav1.ListOptions{Limit: 1}
	for {
		list, err := r.Metadata.Resource(gvr).List(ctx, opts)
		if err != nil {
			return 0, fmt.Errorf("counting the objects of consumer CRD %s: %w", crd.Name, err)
		}
		n += int64(len(list.Items))
		switch {
		case list.GetContinue() == "":
			return n, nil
		case list.GetRemainingItemCount() != nil:
			return n + *list.GetRemainingItemCount(), nil
		}
		opts = metav1.ListOptions{Limit: 500, Continue: list.GetContinue()}
	}
}

// replaceCRD deletes kbind's consumer CRD crd of Connection owner, which
// DecideReplace found nothing holds, so that a ClusterBinding's entry
// installs its own in its place. The delete carries the UID and
// resourceVersion crd was read at: a CRD created again, or changed, since
// is never hit.
func (r *Reconciler) replaceCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, owner string) error {
	err := r.Client.Delete(ctx, crd, client.Preconditions{UID: &crd.UID, ResourceVersion: &crd.ResourceVersion})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting consumer CRD %s to replace it: %w", crd.Name, err)
	}
	r.Installer.Forget(owner, crd.Name)
	log.FromContext(ctx).Info("Deleted a consumer CRD of another provider API that nothing held, to install the ClusterBinding's entry in its place",
		"crd", crd.Name, "providerAPI", kbindschema.ProviderAPI(crd), "from", owner)
	return nil
}

// schemaOwner is the Connection the consumer CRD of api is stamped for,
// its schema owner; "" when there is no such CRD or it carries no stamp.
func (r *Reconciler) schemaOwner(ctx context.Context, api string) (string, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: api}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading consumer CRD %s: %w", api, err)
	}
	return crd.Annotations[kbindv1alpha1.ConnectionAnnotation], nil
}

// joinRoute makes the binding's Connection a second route of an API whose
// consumer CRD another Connection, owner, supplies
// (docs/bindings.md#one-api-several-providers): the CRD is never written
// for it; the Connection's provider schema (desired, the consumer CRD it
// would install) must be compatible with the CRD — else the binding says
// which difference comes first, and nothing syncs through it. The
// verdict is handed to the syncers, which start the route only once it is
// compatible, and re-checked at every reconcile: a provider schema that
// changes into an incompatible one stops the route.
func (r *Reconciler) joinRoute(ctx context.Context, o *observation, api kbindv1alpha1.APIReference, owner string,
	desired *apiextensionsv1.CustomResourceDefinition) (kbindschema.Outcome, bool) {
	consumer := api.ConsumerName()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: consumer}, crd); err != nil {
		o.problems = append(o.problems, fmt.Sprintf("reading consumer CRD %s: %v", consumer, err))
		return kbindschema.Outcome{}, false
	}
	if problem := kbindschema.Collision(crd, desired); problem != "" {
		o.projection = append(o.projection, problem)
		return kbindschema.Outcome{Collision: true, Problem: problem}, false
	}
	why := kbindschema.Incompatibility(crd, desired, owner, o.conn.Name)
	r.Syncers.SetCompatible(consumer, o.conn.Name, why == "")
	if why != "" {
		o.incompatible = append(o.incompatible, fmt.Sprintf("%s: %s", consumer, why))
		o.unrouted = append(o.unrouted, consumer)
		return kbindschema.Outcome{}, false
	}
	outcome := kbindschema.Outcome{Hash: crd.Annotations[kbindv1alpha1.SchemaHashAnnotation], Established: kbindschema.Established(crd)}
	if !outcome.Established {
		o.pending = append(o.pending, fmt.Sprintf("CRD %s is not established yet", consumer))
	}
	return outcome, true
}

// heldByBindingsOnly returns the Connection the consumer CRD of api is
// kbind's for when only namespaced Bindings hold it there — no
// ClusterBinding through that Connection lists the API (a deleting one
// still drains through it), and its pullPolicy is not All (which installs
// every export on a cluster admin's word) — and "" otherwise: absent,
// connection's own, not kbind's, or held by a ClusterBinding. A
// ClusterBinding through connection takes such a CRD over (BIND-3).
func (r *Reconciler) heldByBindingsOnly(ctx context.Context, connection, api string) (string, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: api}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading consumer CRD %s: %w", api, err)
	}
	owner := crd.Annotations[kbindv1alpha1.ConnectionAnnotation]
	if owner == "" || owner == connection || !kbindschema.CreatedByKbind(crd, owner) {
		return "", nil
	}
	cbs, err := index.ListBindings(ctx, r.Client, index.ClusterBindings, client.MatchingFields{index.BindingAPI: api})
	if err != nil {
		return "", fmt.Errorf("the bindings of %s: %w", api, err)
	}
	for _, cb := range cbs {
		if cb.BindingSpec().ConnectionRef.Name == owner {
			return "", nil
		}
	}
	conn := &kbindv1alpha1.Connection{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: owner}, conn); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", fmt.Errorf("reading connection %s: %w", owner, err)
	case conn.Spec.Schema.PullPolicy == kbindv1alpha1.PullPolicyAll:
		return "", nil
	}
	return owner, nil
}

// announceTakeOver tells each Binding through Connection from that lists
// api in a namespace the ClusterBinding covers, with a Warning Event, that the ClusterBinding took the API over and
// where the provider copies it made through from are: they stay (kbind
// deletes a copy only by draining it through the Connection that made it,
// and the objects now sync through another).
func (r *Reconciler) announceTakeOver(ctx context.Context, b binding, conn *kbindv1alpha1.Connection, ref kbindv1alpha1.APIReference, from string) {
	api := ref.ConsumerName()
	if r.Events == nil {
		return
	}
	bs, err := index.ListBindings(ctx, r.Client, index.Bindings, client.MatchingFields{index.BindingAPI: api})
	if err != nil {
		log.FromContext(ctx).Error(err, "Listing the Bindings of a taken-over API for their Events", "api", api)
		return
	}
	fromConn := &kbindv1alpha1.Connection{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: from}, fromConn); err != nil {
		fromConn = nil
	}
	for _, nb := range bs {
		if nb.BindingSpec().ConnectionRef.Name != from {
			continue
		}
		// A Binding in a namespace the ClusterBinding does not select keeps
		// syncing through from, a second route of the API.
		if covers, err := syncer.CoversNamespace(ctx, r.Client, b.spec, nb.GetNamespace()); err != nil || !covers {
			continue
		}
		r.Events.Eventf(nb, b.obj, corev1.EventTypeWarning, "ProviderCopiesLeft", "TakeOver",
			"ClusterBinding %q binds %s through Connection %q and took over its consumer CRD from Connection %q, which only namespaced Bindings held: "+
				"the objects of namespace %s sync through %q from now on, and this Binding waits (a ClusterBinding takes precedence). "+
				"The provider copies this Binding made through %q stay on that Connection's provider, untouched: %s",
			b.obj.GetName(), api, conn.Name, from, nb.GetNamespace(), conn.Name, from, findCopies(ref.Name, nb.GetNamespace(), fromConn))
	}
}

// findCopies says how to list on the provider the copies of the provider
// API api a Binding in namespace made through conn (nil when it is gone).
func findCopies(api, namespace string, conn *kbindv1alpha1.Connection) string {
	if conn == nil || conn.Status.LocalClusterUID == "" {
		return fmt.Sprintf("list %s on the provider labelled %s=<this cluster's UID>", api, kbindv1alpha1.ConsumerClusterUIDLabel)
	}
	iso := isolation.For(conn.Spec.IsolationOf())
	selector := kbindv1alpha1.ConsumerClusterUIDLabel + "=" + conn.Status.LocalClusterUID
	if iso.Isolated() {
		selector += "," + kbindv1alpha1.ConsumerNamespaceLabel + "=" + namespace
	}
	return fmt.Sprintf("kubectl get %s -n %s -l %s (against the provider of Connection %q; delete them there once you no longer need them)",
		api, iso.Namespace(namespace), selector, conn.Name)
}

// routes decides whether this binding routes the consumer API api: not
// when a ClusterBinding covering a Binding's namespace takes precedence
// (BIND-2), nor when an earlier binding through another Connection
// refuses it (OverlappingBinding); o records which.
func (r *Reconciler) routes(ctx context.Context, b binding, api string, o *observation) (bool, error) {
	refused, err := r.refusals(ctx, api)
	if err != nil {
		return false, err
	}
	if r.Namespaced {
		covering, err := r.coveringClusterBindings(ctx, api, b.obj.GetNamespace(), refused)
		if err != nil {
			return false, err
		}
		if len(covering) > 0 {
			o.overlapped = append(o.overlapped, fmt.Sprintf("%s (ClusterBinding %s)", api, strings.Join(covering, ", ")))
			return false, nil
		}
	}
	if earlier := refused[syncer.RoutingKey(b.obj)]; earlier != "" {
		o.overlapping = append(o.overlapping, fmt.Sprintf("%s (%s)", api, earlier))
		o.unrouted = append(o.unrouted, api)
		return false, nil
	}
	return true, nil
}

// coveringClusterBindings names the live ClusterBindings of api that
// cover namespace — their namespaceSelector selects it, or they have none
// — and that no earlier binding through another Connection refuses
// (refused, from refusals): they take precedence over a Binding there
// (BIND-2).
func (r *Reconciler) coveringClusterBindings(ctx context.Context, api, namespace string, refused map[routing.ClaimKey]string) ([]string, error) {
	cbs, err := index.ListBindings(ctx, r.Client, index.ClusterBindings, client.MatchingFields{index.BindingAPI: api})
	if err != nil {
		return nil, fmt.Errorf("the bindings of %s: %w", api, err)
	}
	var names []string
	for _, cb := range cbs {
		if _, no := refused[syncer.RoutingKey(cb)]; no || !syncer.Claiming(cb) {
			continue
		}
		covers, err := syncer.CoversNamespace(ctx, r.Client, cb.BindingSpec(), namespace)
		if err != nil {
			return nil, err
		}
		if covers {
			names = append(names, cb.GetName())
		}
	}
	return names, nil
}

// refusals decides which bindings of api an earlier binding through
// another Connection refuses (syncer.Refusals), from every binding that
// lists it.
func (r *Reconciler) refusals(ctx context.Context, api string) (map[routing.ClaimKey]string, error) {
	all, err := index.ListBindings(ctx, r.Client, index.AllBindings, client.MatchingFields{index.BindingAPI: api})
	if err != nil {
		return nil, fmt.Errorf("the bindings of %s: %w", api, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: api}, crd); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading consumer CRD %s: %w", api, err)
		}
		crd = nil
	}
	return syncer.Refusals(api, crd, all), nil
}

// finalize unbinds (SCHEMA-6): a ClusterBinding that is the last binding
// listing an API deletes the consumer CRD, if kbind created it for this
// Connection and pullPolicy is not All. A Binding never deletes a CRD, nor
// is a CRD kbind did not create ever deleted.
func (r *Reconciler) finalize(ctx context.Context, b binding) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b.obj, kbindv1alpha1.CleanupFinalizer) {
		return ctrl.Result{}, nil
	}
	remaining, err := r.drain(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if remaining > 0 {
		return r.waitDeleting(ctx, b, fmt.Sprintf("waiting for %d object(s) to release their provider copies (an unreachable provider is waited for, never guessed)", remaining))
	}
	if waiting, err := r.cleanupRelated(ctx, b); err != nil {
		return ctrl.Result{}, fmt.Errorf("deleting related copies: %w", err)
	} else if waiting != "" {
		return r.waitDeleting(ctx, b, waiting)
	}
	if !r.Namespaced {
		if err := r.unbindCRDs(ctx, b); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, api := range apisOf(b) {
		if err := r.forgetUnbound(ctx, b, api); err != nil {
			return ctrl.Result{}, err
		}
	}
	if r.kept != nil {
		r.kept.ForgetKept(syncer.KeptBy(b.obj))
	}
	return ctrl.Result{}, patch.RemoveFinalizer(ctx, r.Client, b.obj, kbindv1alpha1.CleanupFinalizer)
}

// waitDeleting keeps a deleting binding, saying in Ready why, and looks
// again shortly.
func (r *Reconciler) waitDeleting(ctx context.Context, b binding, why string) (ctrl.Result, error) {
	before := b.obj.DeepCopyObject().(client.Object)
	patch.SetCondition(&b.status.Conditions, metav1.Condition{
		Type: string(kbindv1alpha1.ConditionReady), Status: metav1.ConditionFalse, Reason: string(kbindv1alpha1.ReasonPending),
		Message: "deleting: " + why,
	}, b.obj.GetGeneration())
	if err := patch.Status(ctx, r.Client, before, b.obj); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
}

// drain takes the deleting binding out of every syncer's scope and releases
// the objects only it covered (SYNC-D). It returns how many still wait.
func (r *Reconciler) drain(ctx context.Context, b binding) (int, error) {
	remaining := 0
	for _, api := range apisOf(b) {
		if err := r.Syncers.Reconcile(ctx, api); err != nil {
			return 0, err
		}
		n, err := r.Syncers.Drain(ctx, api, b.spec.ConnectionRef.Name, b.obj.GetNamespace(), !r.Namespaced, b.obj)
		if err != nil {
			return 0, fmt.Errorf("draining %s: %w", api, err)
		}
		remaining += n
	}
	return remaining, nil
}

// apisOf lists the APIs a binding lists or still holds in its status (an
// API removed from the list that has not finished unbinding), sorted.
func apisOf(b binding) []string {
	set := map[string]bool{}
	for _, name := range b.spec.ConsumerNames() {
		set[name] = true
	}
	for _, a := range b.status.BoundAPIs {
		set[a.Name] = true
	}
	out := make([]string, 0, len(set))
	for name := range set {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func (r *Reconciler) unbindCRDs(ctx context.Context, b binding) error {
	for _, api := range apisOf(b) {
		if err := r.unbindCRD(ctx, b, api); err != nil {
			return err
		}
	}
	return nil
}

// unbindCRD deletes the consumer CRD of an API the ClusterBinding unbinds
// (SCHEMA-6) when unbindDeletesCRD says so: no other binding lists it,
// kbind created it for this Connection and pullPolicy is neither All nor
// None. Without its Connection the policy is unknown: the CRD is kept.
func (r *Reconciler) unbindCRD(ctx context.Context, b binding, api string) error {
	f, crd, err := r.crdFateOf(ctx, b, api)
	if err != nil || !kbindschema.UnbindDeletesCRD(f) {
		return err
	}
	if err := r.Client.Delete(ctx, crd, client.Preconditions{UID: &crd.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting consumer CRD %s: %w", api, err)
	}
	r.Installer.Forget(b.spec.ConnectionRef.Name, api)
	log.FromContext(ctx).Info("Deleted consumer CRD: no binding lists it any more", "crd", api)
	return nil
}

// otherBindingsOf counts the bindings other than self — a ClusterBinding
// or a Binding — that list api, through connection when it is not "".
func (r *Reconciler) otherBindingsOf(ctx context.Context, api string, self client.Object, connection string) (int, error) {
	all, err := index.ListBindings(ctx, r.Client, index.AllBindings, client.MatchingFields{index.BindingAPI: api})
	if err != nil {
		return 0, fmt.Errorf("the bindings of %s: %w", api, err)
	}
	n := 0
	for _, other := range all {
		if other.GetUID() != self.GetUID() && (connection == "" || other.BindingSpec().ConnectionRef.Name == connection) {
			n++
		}
	}
	return n, nil
}
