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

package schema

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/index"
	"github.com/kbind/kbind/engine/internal/storage"
)

// Desired computes the consumer CRD an export should have, from the
// provider through d. reduced is "" when the consumer CRD serves every
// version the provider serves, else a sentence saying what it serves
// instead and why (see PlanVersions).
func Desired(ctx context.Context, d *Discoverer, conn *kbindv1alpha1.Connection, export kbindv1alpha1.ExportedAPI) (crd *apiextensionsv1.CustomResourceDefinition, reduced string, err error) {
	switch conn.Status.ActiveSchemaSource {
	case kbindv1alpha1.ActiveSchemaSourceOpenAPI:
		api, err := d.ReadOpenAPI(ctx, export)
		if err != nil {
			return nil, "", err
		}
		crd, err := FromOpenAPI(api, conn.Name)
		return crd, "", err
	default:
		provider := &apiextensionsv1.CustomResourceDefinition{}
		if err := d.Client.Get(ctx, client.ObjectKey{Name: export.Name}, provider); err != nil {
			return nil, "", &ListError{Verb: "get", Resource: CRDs + "/" + export.Name, Err: err}
		}
		if provider.Labels[kbindv1alpha1.ExportedLabel] != kbindv1alpha1.ExportedLabelValue {
			return nil, "", fmt.Errorf("provider CRD %s is no longer labelled %s=%s", export.Name, kbindv1alpha1.ExportedLabel, kbindv1alpha1.ExportedLabelValue)
		}
		return FromCRD(provider, conn.Name)
	}
}

// Outcome is the state of one consumer CRD after Ensure.
type Outcome struct {
	// Hash is the consumer CRD's schema-hash annotation.
	Hash string
	// Established is true once the API server serves the CRD.
	Established bool
	// Problem is a condition message when the CRD cannot be what the
	// policy wants, or the API server cannot serve it; the binding
	// reports it.
	Problem string
	// TookOverFrom names the Connection the CRD was taken over from by
	// this call (EnsureTakingOver), "" otherwise.
	TookOverFrom string
	// Collision is set with Problem when the CRD serves another provider
	// API, or the same one projected otherwise (see Collision), and when a
	// projected CRD's names are taken (NamesTaken).
	Collision bool
	// NamesTaken is set with Problem when other CRDs of the group hold the
	// CRD's names (NameConflicts): nothing was created, or kbind deleted
	// its CRD whose names the API server refused (RefusedNeverServed). The
	// entry is not bound.
	NamesTaken bool
	// StorageSwitch is set with Problem when kbind refuses the provider's
	// storage-version switch (DecideStorageSwitch): the CRD keeps its
	// storage version and schema, and sync goes on at that version.
	StorageSwitch bool
}

// Installer applies schema decisions to consumer CRDs and remembers, per
// Connection, which CRDs lag behind the policy (SchemaInSync).
type Installer struct {
	// Client reads through the manager's cache, with the index.CRDGroup
	// field index on CRDs.
	Client client.Client

	mu       sync.Mutex
	status   map[string]map[string]bool   // connection → CRD name → in sync
	switches map[string]map[string]string // connection → CRD name → refused storage switch
	released ReleasedNames
}

// Ensure makes the consumer CRD name what the Connection's policy calls
// for, given desired (nil when it could not be computed). It installs an
// export no binding lists (pullPolicy All): an export whose names another
// CRD holds lags (SchemaInSync), since no binding reports it.
func (i *Installer) Ensure(ctx context.Context, conn *kbindv1alpha1.Connection, name string, desired *apiextensionsv1.CustomResourceDefinition) (Outcome, error) {
	return i.ensure(ctx, conn, name, desired, "", false)
}

// EnsureTakingOver is Ensure for a binding's entry, through a Connection
// that may take the CRD over from Connection from, which the caller found
// held by namespaced Bindings only (see DecideTakeOver; "" for none). The
// write is guarded by the CRD's resourceVersion: a CRD changed meanwhile
// is decided again on the next reconcile. An entry refused for its names
// (Outcome.NamesTaken, Outcome.Collision) is the binding's to report: the
// Connection supplies no CRD for it, so its SchemaInSync stays what its
// other CRDs make it.
func (i *Installer) EnsureTakingOver(ctx context.Context, conn *kbindv1alpha1.Connection, name string, desired *apiextensionsv1.CustomResourceDefinition, from string) (Outcome, error) {
	return i.ensure(ctx, conn, name, desired, from, true)
}

func (i *Installer) ensure(ctx context.Context, conn *kbindv1alpha1.Connection, name string, desired *apiextensionsv1.CustomResourceDefinition, takeOverFrom string, entry bool) (Outcome, error) {
	existing := &apiextensionsv1.CustomResourceDefinition{}
	if err := i.Client.Get(ctx, client.ObjectKey{Name: name}, existing); err != nil {
		if !apierrors.IsNotFound(err) {
			return Outcome{}, fmt.Errorf("reading consumer CRD %s: %w", name, err)
		}
		existing = nil
	}
	if problem := Collision(existing, desired); problem != "" {
		// The CRD of that name serves another API (or is not kbind's):
		// whether it is in sync is for whoever supplies it, not for this
		// refused entry or export.
		return Outcome{Problem: problem, Collision: true}, nil
	}
	if refused := RefusedNeverServed(existing, conn.Name); refused != "" {
		i.refused(conn.Name, name, entry)
		return i.deleteRefused(ctx, existing, desired, refused)
	}
	d, takeOver := DecideTakeOver(existing, desired, name, conn.Name, takeOverFrom, conn.Spec.Schema)
	if !takeOver {
		d = Decide(existing, desired, name, conn.Name, conn.Spec.Schema, conn.Status.ActiveSchemaSource)
	}
	tookOver := ""
	logger := log.FromContext(ctx).WithValues("crd", name)
	if refused, ok := i.refuseSwitch(ctx, conn.Name, existing, desired, d.Action); ok {
		return refused, nil
	}
	switch d.Action {
	case ActionReport:
		i.record(conn.Name, name, false)
		return Outcome{Problem: d.Problem}, nil
	case ActionCreate:
		if desired == nil {
			i.record(conn.Name, name, false)
			return Outcome{}, fmt.Errorf("no schema for CRD %s", name)
		}
		problem, err := i.namesTaken(ctx, desired)
		switch {
		case err == nil && problem != "":
			i.refused(conn.Name, name, entry)
			return Outcome{Problem: problem, NamesTaken: true, Collision: Projected(desired)}, nil
		case err != nil:
			i.record(conn.Name, name, false)
			return Outcome{}, err
		}
		created := desired.DeepCopy()
		if err := i.Client.Create(ctx, created); err != nil {
			i.record(conn.Name, name, false)
			return Outcome{}, writeError("creating", name, created, err)
		}
		logger.Info("Installed consumer CRD", "schemaHash", created.Annotations[kbindv1alpha1.SchemaHashAnnotation])
		existing = created
	case ActionUpdate:
		patch := client.MergeFromWithOptions(existing.DeepCopy(), client.MergeFromWithOptimisticLock{})
		existing = Updated(existing, desired)
		if err := i.Client.Patch(ctx, existing, patch); err != nil {
			i.record(conn.Name, name, false)
			return Outcome{}, writeError("updating", name, existing, err)
		}
		logger.Info("Updated consumer CRD to the provider's schema", "schemaHash", existing.Annotations[kbindv1alpha1.SchemaHashAnnotation])
	case ActionTakeOver, ActionRestamp:
		patch := client.MergeFromWithOptions(existing.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if d.Action == ActionTakeOver {
			existing = Updated(existing, desired)
		} else {
			existing = existing.DeepCopy()
			existing.Annotations[kbindv1alpha1.ConnectionAnnotation] = conn.Name
		}
		if err := i.Client.Patch(ctx, existing, patch); err != nil {
			i.record(conn.Name, name, false)
			return Outcome{}, writeError("taking over", name, existing, err)
		}
		i.Forget(takeOverFrom, name)
		tookOver = takeOverFrom
		logger.Info("Took over a consumer CRD only namespaced Bindings of another Connection held", "from", takeOverFrom,
			"schemaHash", existing.Annotations[kbindv1alpha1.SchemaHashAnnotation])
	case ActionStamp:
		patch := client.MergeFromWithOptions(existing.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if existing.Labels == nil {
			existing.Labels = map[string]string{}
		}
		if existing.Annotations == nil {
			existing.Annotations = map[string]string{}
		}
		existing.Labels[kbindv1alpha1.ManagedLabel] = kbindv1alpha1.ManagedLabelValue
		existing.Annotations[kbindv1alpha1.ConnectionAnnotation] = conn.Name
		if err := i.Client.Patch(ctx, existing, patch); err != nil {
			i.record(conn.Name, name, false)
			return Outcome{}, fmt.Errorf("stamping consumer CRD %s: %w", name, err)
		}
	}
	i.record(conn.Name, name, InSync(existing, desired, conn.Name, conn.Spec.Schema))
	return Outcome{Hash: existing.Annotations[kbindv1alpha1.SchemaHashAnnotation], Established: Established(existing),
		Problem: Unestablished(existing, time.Now()), TookOverFrom: tookOver}, nil
}

// refuseSwitch is the outcome of an update (or take-over) of existing to
// desired that would switch the storage version and that
// DecideStorageSwitch refuses, with ok true; the CRD is left as it is.
// Every other action, and a switch that may proceed (logged), gives ok
// false.
func (i *Installer) refuseSwitch(ctx context.Context, connection string, existing, desired *apiextensionsv1.CustomResourceDefinition, action Action) (Outcome, bool) {
	if action != ActionUpdate && action != ActionTakeOver {
		return Outcome{}, false
	}
	logger := log.FromContext(ctx).WithValues("crd", existing.Name)
	sw := DecideStorageSwitch(existing, desired)
	switch {
	case sw.Refused:
		i.recordRefused(connection, existing.Name, sw)
		logger.Info("Refused the provider's storage-version switch", "from", sw.From, "to", sw.To, "webhook", sw.Webhook, "pruned", sw.Pruned)
		return Outcome{Problem: sw.Problem, StorageSwitch: true}, true
	case sw.From != sw.To:
		logger.Info("Following the provider's storage-version switch", "from", sw.From, "to", sw.To,
			"accepted", existing.Annotations[kbindv1alpha1.AcceptStorageVersionAnnotation] == sw.To, "pruned", sw.Pruned)
	}
	return Outcome{}, false
}

// namesTaken is why desired, a consumer CRD kbind is about to create,
// must not be (DescribeNameConflicts), "" when its names are free: the
// other CRDs of its group, read through the cache's index.CRDGroup index
// (no API LIST), and those of them kbind did not create that went less
// than NamesHold ago.
func (i *Installer) namesTaken(ctx context.Context, desired *apiextensionsv1.CustomResourceDefinition) (string, error) {
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := i.Client.List(ctx, &list, client.MatchingFields{index.CRDGroup: desired.Spec.Group}); err != nil {
		return "", fmt.Errorf("reading the consumer CRDs of group %s: %w", desired.Spec.Group, err)
	}
	now := time.Now()
	conflicts := NameConflicts(desired, list.Items)
	i.mu.Lock()
	i.released.Observe(desired.Spec.Group, list.Items, conflicts, now)
	conflicts = append(conflicts, i.released.Conflicts(desired)...)
	i.mu.Unlock()
	if len(conflicts) == 0 {
		return "", nil
	}
	return DescribeNameConflicts(desired, conflicts, now), nil
}

// deleteRefused deletes kbind's consumer CRD existing, whose names the
// consumer API server refused and which never served (RefusedNeverServed:
// another CRD took the names between namesTaken and the create). The
// delete carries existing's UID and resourceVersion: a CRD created again
// meanwhile, or established since it was read, is never hit. The entry is
// reported; the next reconcile finds the names taken and creates nothing.
func (i *Installer) deleteRefused(ctx context.Context, existing, desired *apiextensionsv1.CustomResourceDefinition, refused string) (Outcome, error) {
	problem := fmt.Sprintf("the consumer API server refused the names of CRD %s (%s); kbind deleted it, since it never served (no object was stored in it) "+
		"and would otherwise take the names once the CRD holding them goes", existing.Name, refused)
	err := i.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID, ResourceVersion: &existing.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) {
		return Outcome{}, fmt.Errorf("deleting consumer CRD %s, whose names the API server refused: %w", existing.Name, err)
	}
	log.FromContext(ctx).Info("Deleted a consumer CRD whose names the API server refused and that never served", "crd", existing.Name, "refused", refused)
	return Outcome{Problem: problem, NamesTaken: true, Collision: Projected(desired) || Projected(existing)}, nil
}

// writeError wraps the consumer API server's refusal to write CRD name;
// one too large to store says so and what helps, since the API server's
// own words ("etcdserver: request is too large") name neither the CRD nor
// the limit.
func writeError(verb, name string, crd *apiextensionsv1.CustomResourceDefinition, err error) error {
	if !storage.TooLarge(err) {
		return fmt.Errorf("%s consumer CRD %s: %w", verb, name, err)
	}
	return fmt.Errorf("%s consumer CRD %s: the consumer API server cannot store it (%s with kbind's markers): it is too large "+
		"(etcd's --max-request-bytes, 1.5 MiB by default); make the provider's schema smaller or raise the consumer etcd's limit: %w", verb, name, encodedSize(crd), err)
}

// Updated is existing carrying desired's spec, labels and annotations —
// except that every version still listed in existing's status.storedVersions
// stays in spec.versions, unserved and not the storage version: the API
// server refuses to drop a stored version (objects in etcd are still
// encoded in it), so without this a provider's storage-version change
// could never reach the consumer. Objects stored in the old version stay
// readable; new writes are stored in the new one.
func Updated(existing, desired *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	out := existing.DeepCopy()
	out.Spec = *desired.Spec.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	for k, v := range desired.Labels {
		out.Labels[k] = v
	}
	for k, v := range desired.Annotations {
		out.Annotations[k] = v
	}
	kept := map[string]bool{}
	for _, v := range out.Spec.Versions {
		kept[v.Name] = true
	}
	for _, stored := range existing.Status.StoredVersions {
		if kept[stored] {
			continue
		}
		kept[stored] = true
		version := storedVersion(existing, desired, stored)
		version.Served, version.Storage = false, false
		out.Spec.Versions = append(out.Spec.Versions, version)
	}
	return out
}

// storedVersion is the definition of a stored version to keep: the one the
// existing CRD has, else (it was removed by hand) desired's storage version
// under that name, so that a schema is always present.
func storedVersion(existing, desired *apiextensionsv1.CustomResourceDefinition, name string) apiextensionsv1.CustomResourceDefinitionVersion {
	for _, v := range existing.Spec.Versions {
		if v.Name == name {
			return *v.DeepCopy()
		}
	}
	if v := StorageVersion(desired); v != nil {
		out := *v.DeepCopy()
		out.Name = name
		return out
	}
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Schema: &apiextensionsv1.CustomResourceValidation{
		OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTrue()}}}
}

func (i *Installer) record(connection, crd string, inSync bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.status == nil {
		i.status = map[string]map[string]bool{}
	}
	if i.status[connection] == nil {
		i.status[connection] = map[string]bool{}
	}
	i.status[connection][crd] = inSync
	delete(i.switches[connection], crd)
}

// refused forgets a CRD kbind refused to install for its names: a
// binding's entry (entry) says so on the binding only; an export installed
// for pullPolicy All lags.
func (i *Installer) refused(connection, crd string, entry bool) {
	if entry {
		i.Forget(connection, crd)
		return
	}
	i.record(connection, crd, false)
}

// recordRefused remembers that kbind refused the storage switch sw of a
// CRD: it lags, and the Connection's SchemaInSync says why.
func (i *Installer) recordRefused(connection, crd string, sw StorageSwitch) {
	i.record(connection, crd, false)
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.switches == nil {
		i.switches = map[string]map[string]string{}
	}
	if i.switches[connection] == nil {
		i.switches[connection] = map[string]string{}
	}
	i.switches[connection][crd] = fmt.Sprintf("%s keeps storage version %s (the provider stores %s)", crd, sw.From, sw.To)
}

// RefusedSwitches lists, sorted, a sentence per CRD of a Connection whose
// provider storage-version switch kbind refused (DecideStorageSwitch).
func (i *Installer) RefusedSwitches(connection string) []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	var out []string
	for _, s := range i.switches[connection] {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Forget drops what is remembered of a CRD (unbound) or, with crd "", of a
// whole Connection.
func (i *Installer) Forget(connection, crd string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if crd == "" {
		delete(i.status, connection)
		delete(i.switches, connection)
		return
	}
	delete(i.status[connection], crd)
	delete(i.switches[connection], crd)
}

// Lagging lists the CRDs of a Connection that do not carry the schema its
// policy calls for, sorted; known is false before any CRD was handled.
func (i *Installer) Lagging(connection string) (lagging []string, known bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	m, ok := i.status[connection]
	if !ok || len(m) == 0 {
		return nil, false
	}
	for crd, inSync := range m {
		if !inSync {
			lagging = append(lagging, crd)
		}
	}
	sort.Strings(lagging)
	return lagging, true
}
