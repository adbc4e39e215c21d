package session

import (
	"context"
	"sync"

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

// ExportedCRDs reads the provider's CRDs for schema discovery. A Get of an
// exported CRD (label core.kbind.io/exported=true) is served from a watch
// once that has synced — the periodic schema check of every bound API then
// costs the provider no request. Everything else is read directly, with
// its errors: every Get until the watch has synced (or while the provider
// refuses it), CRDs that are not exported, and every List — discovery's
// periodic list of the exports stays a real read, so a revoked permission
// is reported within one discovery interval (CONN-4) even while an
// established watch would go on delivering. The watch starts on the first
// Get, so a Connection that never reads a CRD schema (source OpenAPI)
// never opens it.
type ExportedCRDs struct {
	direct client.Reader
	cfg    *rest.Config
	ctx    context.Context

	once     sync.Once
	informer toolscache.SharedIndexInformer
}

var exportedSelector = labels.SelectorFromSet(labels.Set{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue})

// NewExportedCRDs returns an ExportedCRDs for the provider cfg points at,
// whose watch lives until ctx ends; direct serves every other read.
func NewExportedCRDs(ctx context.Context, cfg *rest.Config, direct client.Reader) *ExportedCRDs {
	return &ExportedCRDs{direct: direct, cfg: cfg, ctx: ctx}
}

// start runs the watch of the exported CRDs until the session stops.
func (e *ExportedCRDs) start() {
	e.once.Do(func() {
		cs, err := apiextensionsclient.NewForConfig(e.cfg)
		if err != nil {
			log.FromContext(e.ctx).Error(err, "Cannot watch the provider's exported CRDs; reading them directly")
			return
		}
		crds := cs.ApiextensionsV1().CustomResourceDefinitions()
		lw := &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.LabelSelector = exportedSelector.String()
				return crds.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.LabelSelector = exportedSelector.String()
				return crds.Watch(ctx, opts)
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
			log.FromContext(ctx).V(2).Info("Watching the provider's exported CRDs failed; reading them directly meanwhile", "error", err.Error())
		})
		e.informer = inf
		go inf.RunWithContext(e.ctx)
	})
}

func (e *ExportedCRDs) synced() bool {
	e.start()
	return e.informer != nil && e.informer.HasSynced()
}

// Get reads one CRD: from the watch when it is synced and holds the CRD,
// else directly (a CRD that is not exported is not in the watch).
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

// List reads directly (see ExportedCRDs).
func (e *ExportedCRDs) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return e.direct.List(ctx, list, opts...)
}

var _ client.Reader = &ExportedCRDs{}
