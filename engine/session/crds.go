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

package session

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// ExportedCRDs reads the provider's CRDs for schema discovery so that an
// idle Connection costs the provider no discovery request, and a provider
// restart costs it little per consumer.
//
// It watches the metadata of the exported CRDs (label
// core.kbind.io/exported=true): names and resourceVersions, not schemas,
// so that the watch, and its relist after a provider restart, is small
// whatever the CRDs hold. It keeps what it has read directly, by name, with
// the resourceVersion it was read at; a read whose CRD the watch shows at
// that same resourceVersion is answered from there:
//   - a Get of an exported CRD: the whole CRD, once it has been read;
//   - the List of the exports: summaries of the CRDs (labels, group, names,
//     scope, version names and whether each is served: what discovery
//     reads), the stale ones read again directly (one by one when few, by
//     one List otherwise).
//
// A change of an exported CRD (added, changed, unlabelled, deleted) is
// announced to OnChange at once. Everything else is read directly, with
// its errors: every read until the watch has synced or while its last list
// failed (a refused permission shows at once), CRDs that are not exported,
// other lists — and the List of the exports once every recheck interval
// (Recheck), the backstop for a permission revoked under an established
// watch, which would go on delivering. The watch starts on first use, so a
// Connection that never reads a CRD schema (source OpenAPI) never opens it.
type ExportedCRDs struct {
	direct client.Reader
	cfg    *rest.Config
	hc     *http.Client
	ctx    context.Context
	// spawn runs the watch's goroutine (the Manager's tracked ones when
	// the session's, a plain goroutine otherwise).
	spawn func(func()) bool

	once     sync.Once
	informer toolscache.SharedIndexInformer

	mu sync.Mutex
	// healthy: the watch is open (its last list and watch succeeded and it
	// has not failed since).
	healthy bool
	// listedAt is the last direct List of the exports that succeeded.
	listedAt time.Time
	recheck  time.Duration
	// read holds the exported CRDs read directly, by name.
	read map[string]readCRD
}

// readCRD is an exported CRD as read directly: whole (read by a Get) or
// its summary (read by a List).
type readCRD struct {
	crd   *apiextensionsv1.CustomResourceDefinition
	whole bool
}

// DefaultRecheck is how long the List of the exports is served from the
// watch before it is read directly again.
const DefaultRecheck = 10 * time.Minute

// staleGets is how many changed exports the List of the exports reads one
// by one; more are read by one List.
const staleGets = 4

var (
	exportedSelector = labels.SelectorFromSet(labels.Set{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue})
	crdResource      = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
)

// NewExportedCRDs returns an ExportedCRDs for the provider cfg points at,
// whose watch (through hc; nil: a client of cfg's own) lives until ctx
// ends; direct serves every other read.
func NewExportedCRDs(ctx context.Context, cfg *rest.Config, hc *http.Client, direct client.Reader) *ExportedCRDs {
	return &ExportedCRDs{direct: direct, cfg: cfg, hc: hc, ctx: ctx, recheck: DefaultRecheck, spawn: goPlain,
		read: map[string]readCRD{}}
}

// Recheck sets how often the List of the exports is read directly (the
// backstop; DefaultRecheck when d <= 0).
func (e *ExportedCRDs) Recheck(d time.Duration) {
	if d <= 0 {
		d = DefaultRecheck
	}
	e.mu.Lock()
	e.recheck = d
	e.mu.Unlock()
}

func (e *ExportedCRDs) setHealthy(ok bool) {
	e.mu.Lock()
	e.healthy = ok
	e.mu.Unlock()
}

func (e *ExportedCRDs) client() (metadata.Interface, error) {
	if e.hc == nil {
		return metadata.NewForConfig(e.cfg)
	}
	return metadata.NewForConfigAndClient(e.cfg, e.hc)
}

// start runs the watch of the exported CRDs' metadata until the session
// stops.
func (e *ExportedCRDs) start() {
	e.once.Do(func() {
		mc, err := e.client()
		if err != nil {
			log.FromContext(e.ctx).Error(err, "Cannot watch the provider's exported CRDs; reading them directly")
			return
		}
		crds := mc.Resource(crdResource)
		lw := &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.LabelSelector = exportedSelector.String()
				list, err := crds.List(ctx, opts)
				if err != nil {
					e.setHealthy(false)
				}
				return list, err
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.LabelSelector = exportedSelector.String()
				w, err := crds.Watch(ctx, opts)
				// Healthy only while a watch is open: credentials that may
				// list but not watch get direct reads and their errors.
				e.setHealthy(err == nil)
				return w, err
			},
		}
		inf := toolscache.NewSharedIndexInformer(lw, &metav1.PartialObjectMetadata{}, 0, toolscache.Indexers{})
		_ = inf.SetTransform(versionOnly)
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *toolscache.Reflector, err error) {
			e.setHealthy(false)
			log.FromContext(ctx).V(2).Info("Watching the provider's exported CRDs failed; reading them directly meanwhile", "error", err.Error())
		})
		e.informer = inf
		e.spawn(func() { inf.RunWithContext(e.ctx) })
	})
}

// versionOnly keeps of a watched CRD's metadata what the reads compare:
// its name and resourceVersion.
func versionOnly(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, ResourceVersion: m.ResourceVersion}}, nil
}

// goPlain runs fn in an untracked goroutine.
func goPlain(fn func()) bool {
	go fn()
	return true
}

// synced reports whether the watch may answer reads: it has synced and
// is open.
func (e *ExportedCRDs) synced() bool {
	e.start()
	if e.informer == nil || !e.informer.HasSynced() {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.healthy
}

// serving reports whether the watch may answer the List of the exports:
// synced and open, and read directly within the recheck interval.
func (e *ExportedCRDs) serving() bool {
	if !e.synced() {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Since(e.listedAt) < e.recheck
}

// OnChange calls fn (from the watch's goroutine; it must not block) when
// an exported CRD is added, changed, unlabelled or deleted, including for
// each one the watch lists when it starts. It starts the watch.
func (e *ExportedCRDs) OnChange(fn func()) {
	e.start()
	if e.informer == nil {
		return
	}
	_, _ = e.informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { fn() },
		UpdateFunc: func(_, _ any) { fn() },
		DeleteFunc: func(any) { fn() },
	})
}

// watched returns the resourceVersion at which the watch shows the
// exported CRD name, and whether it shows it.
func (e *ExportedCRDs) watched(name string) (string, bool) {
	item, exists, err := e.informer.GetStore().GetByKey(name)
	if err != nil || !exists {
		return "", false
	}
	return item.(*metav1.PartialObjectMetadata).ResourceVersion, true
}

// current returns what was read of the CRD name at resourceVersion rv
// (nil if nothing, or at another version); whole asks for the whole CRD.
func (e *ExportedCRDs) current(name, rv string, whole bool) *apiextensionsv1.CustomResourceDefinition {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.read[name]
	if !ok || r.crd.ResourceVersion != rv || (whole && !r.whole) {
		return nil
	}
	return r.crd
}

// remember keeps crd as read directly: whole, or its summary (unless the
// whole CRD at that version is kept already).
func (e *ExportedCRDs) remember(crd *apiextensionsv1.CustomResourceDefinition, whole bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.read[crd.Name]; ok && r.whole && !whole && r.crd.ResourceVersion == crd.ResourceVersion {
		return
	}
	if whole {
		kept := crd.DeepCopy()
		kept.ManagedFields = nil
		e.read[crd.Name] = readCRD{crd: kept, whole: true}
		return
	}
	e.read[crd.Name] = readCRD{crd: summary(crd)}
}

// Get reads one CRD: an exported one from what was read of it when the
// watch is synced, open and shows it at the version read, else directly (a
// CRD that is not exported is not in the watch).
func (e *ExportedCRDs) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok || !e.synced() {
		return e.direct.Get(ctx, key, obj, opts...)
	}
	rv, exported := e.watched(key.Name)
	if !exported {
		return e.direct.Get(ctx, key, obj, opts...)
	}
	if kept := e.current(key.Name, rv, true); kept != nil {
		kept.DeepCopyInto(crd)
		return nil
	}
	if err := e.direct.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if crd.Labels[kbindv1alpha1.ExportedLabel] == kbindv1alpha1.ExportedLabelValue {
		e.remember(crd, true)
	}
	return nil
}

// List reads the exported CRDs (exactly the exported label selector) as
// summaries (see summary) while the watch is serving, and everything else
// directly (see ExportedCRDs).
func (e *ExportedCRDs) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	crds, ok := list.(*apiextensionsv1.CustomResourceDefinitionList)
	exports := ok && listsExports((&client.ListOptions{}).ApplyOptions(opts))
	if exports && e.serving() {
		if served, err := e.listExports(ctx); err != nil || served != nil {
			if served != nil {
				crds.Items = served
			}
			return err
		}
	}
	return e.listDirectly(ctx, list, exports, opts...)
}

// listDirectly lists directly; a List of the exports that succeeds is
// remembered, and restarts the recheck interval.
func (e *ExportedCRDs) listDirectly(ctx context.Context, list client.ObjectList, exports bool, opts ...client.ListOption) error {
	if err := e.direct.List(ctx, list, opts...); err != nil || !exports {
		return err
	}
	crds := list.(*apiextensionsv1.CustomResourceDefinitionList)
	for i := range crds.Items {
		e.remember(&crds.Items[i], false)
	}
	e.mu.Lock()
	e.listedAt = time.Now()
	e.mu.Unlock()
	return nil
}

// listExports answers the List of the exports from what was read, reading
// the stale ones again one by one when they are few; it returns nil
// without an error when a List must read them all.
func (e *ExportedCRDs) listExports(ctx context.Context) ([]apiextensionsv1.CustomResourceDefinition, error) {
	watched := e.informer.GetStore().List()
	items := make([]apiextensionsv1.CustomResourceDefinition, 0, len(watched))
	var stale []string
	names := make(map[string]bool, len(watched))
	for _, w := range watched {
		m := w.(*metav1.PartialObjectMetadata)
		names[m.Name] = true
		kept := e.current(m.Name, m.ResourceVersion, false)
		if kept == nil {
			stale = append(stale, m.Name)
			continue
		}
		items = append(items, *summary(kept))
	}
	e.forgetAllBut(names)
	if len(stale) > staleGets {
		return nil, nil
	}
	for _, name := range stale {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := e.direct.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue // deleted since the watch showed it
			}
			return nil, err
		}
		if crd.Labels[kbindv1alpha1.ExportedLabel] != kbindv1alpha1.ExportedLabelValue {
			continue // unlabelled since the watch showed it
		}
		e.remember(crd, false)
		items = append(items, *summary(crd))
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	return items, nil
}

// forgetAllBut drops what was read of CRDs the watch no longer shows as
// exported.
func (e *ExportedCRDs) forgetAllBut(names map[string]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name := range e.read {
		if !names[name] {
			delete(e.read, name)
		}
	}
}

// summary returns a new CRD with what discovery reads of crd (see
// schema.ExportsFromCRDs): its name, resourceVersion and labels, group,
// names, scope, and its versions' names and whether each is served and
// stored; no schema.
func summary(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	out := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: crd.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: crd.Name, ResourceVersion: crd.ResourceVersion,
			Labels: make(map[string]string, len(crd.Labels))},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: crd.Spec.Group, Names: *crd.Spec.Names.DeepCopy(), Scope: crd.Spec.Scope},
	}
	for k, v := range crd.Labels {
		out.Labels[k] = v
	}
	for _, v := range crd.Spec.Versions {
		out.Spec.Versions = append(out.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v.Name, Served: v.Served, Storage: v.Storage})
	}
	return out
}

// listsExports reports whether o lists exactly the exported CRDs.
func listsExports(o *client.ListOptions) bool {
	return o.LabelSelector != nil && o.LabelSelector.String() == exportedSelector.String() &&
		o.FieldSelector == nil && o.Namespace == "" && o.Limit == 0 && o.Continue == ""
}

var _ client.Reader = &ExportedCRDs{}
