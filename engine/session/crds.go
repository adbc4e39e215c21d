package session

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// ExportedCRDs reads the provider's CRDs for schema discovery from a
// watch of the exported ones (label core.kbind.io/exported=true), so that
// an idle Connection costs the provider no discovery request: a Get of an
// exported CRD and the List of the exports are served from the watch once
// it has synced, and a change of an exported CRD (added, changed,
// unlabelled, deleted) is announced to OnChange at once. Everything else is
// read directly, with its errors: every read until the watch has synced or
// while its last list failed (a refused permission shows at once), CRDs
// that are not exported, other lists — and the List of the exports once
// every recheck interval (Recheck), the backstop for a permission revoked
// under an established watch, which would go on delivering. The watch
// starts on first use, so a Connection that never reads a CRD schema
// (source OpenAPI) never opens it.
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
}

// DefaultRecheck is how long the List of the exports is served from the
// watch before it is read directly again.
const DefaultRecheck = 10 * time.Minute

var exportedSelector = labels.SelectorFromSet(labels.Set{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue})

// NewExportedCRDs returns an ExportedCRDs for the provider cfg points at,
// whose watch (through hc; nil: a client of cfg's own) lives until ctx
// ends; direct serves every other read.
func NewExportedCRDs(ctx context.Context, cfg *rest.Config, hc *http.Client, direct client.Reader) *ExportedCRDs {
	return &ExportedCRDs{direct: direct, cfg: cfg, hc: hc, ctx: ctx, recheck: DefaultRecheck, spawn: goPlain}
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

func (e *ExportedCRDs) client() (*apiextensionsclient.Clientset, error) {
	if e.hc == nil {
		return apiextensionsclient.NewForConfig(e.cfg)
	}
	return apiextensionsclient.NewForConfigAndClient(e.cfg, e.hc)
}

// start runs the watch of the exported CRDs until the session stops.
func (e *ExportedCRDs) start() {
	e.once.Do(func() {
		cs, err := e.client()
		if err != nil {
			log.FromContext(e.ctx).Error(err, "Cannot watch the provider's exported CRDs; reading them directly")
			return
		}
		crds := cs.ApiextensionsV1().CustomResourceDefinitions()
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
		inf := toolscache.NewSharedIndexInformer(lw, &apiextensionsv1.CustomResourceDefinition{}, 0, toolscache.Indexers{})
		_ = inf.SetTransform(func(obj any) (any, error) {
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				crd.ManagedFields = nil
			}
			return obj, nil
		})
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *toolscache.Reflector, err error) {
			e.setHealthy(false)
			log.FromContext(ctx).V(2).Info("Watching the provider's exported CRDs failed; reading them directly meanwhile", "error", err.Error())
		})
		e.informer = inf
		e.spawn(func() { inf.RunWithContext(e.ctx) })
	})
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

// Get reads one CRD: from the watch when it is synced, open and holds the
// CRD, else directly (a CRD that is not exported is not in the watch).
func (e *ExportedCRDs) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok || !e.synced() {
		return e.direct.Get(ctx, key, obj, opts...)
	}
	item, exists, err := e.informer.GetStore().GetByKey(key.Name)
	if err != nil || !exists {
		return e.direct.Get(ctx, key, obj, opts...)
	}
	item.(*apiextensionsv1.CustomResourceDefinition).DeepCopyInto(crd)
	return nil
}

// List reads the exported CRDs (exactly the exported label selector) from
// the watch while it is serving, and everything else directly (see
// ExportedCRDs).
func (e *ExportedCRDs) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	crds, ok := list.(*apiextensionsv1.CustomResourceDefinitionList)
	exports := ok && listsExports((&client.ListOptions{}).ApplyOptions(opts))
	if exports && e.serving() {
		items := e.informer.GetStore().List()
		crds.Items = make([]apiextensionsv1.CustomResourceDefinition, 0, len(items))
		for _, item := range items {
			crds.Items = append(crds.Items, *item.(*apiextensionsv1.CustomResourceDefinition).DeepCopy())
		}
		sort.Slice(crds.Items, func(i, j int) bool { return crds.Items[i].Name < crds.Items[j].Name })
		return nil
	}
	err := e.direct.List(ctx, list, opts...)
	if exports && err == nil {
		e.mu.Lock()
		e.listedAt = time.Now()
		e.mu.Unlock()
	}
	return err
}

// listsExports reports whether o lists exactly the exported CRDs.
func listsExports(o *client.ListOptions) bool {
	return o.LabelSelector != nil && o.LabelSelector.String() == exportedSelector.String() &&
		o.FieldSelector == nil && o.Namespace == "" && o.Limit == 0 && o.Continue == ""
}

var _ client.Reader = &ExportedCRDs{}
