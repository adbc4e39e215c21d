// Package related copies the Secrets and ConfigMaps a binding's
// relatedResources select between the clusters (spec SYNC-R1..R4): same
// namespace and name, in the declared direction, owned per (binding,
// entry), never overwriting a target that is not the binding's.
package related

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Binding is what the copier needs of a ClusterBinding or Binding.
type Binding struct {
	// Object is the binding, for Events.
	Object client.Object
	// UID identifies the binding in copies' related-binding annotation.
	UID string
	// Namespace scopes a Binding; "" means every namespace.
	Namespace string
	Entries   []kbindv1alpha1.RelatedResource
	// ClusterUID is the consumer cluster's identity.
	ClusterUID string
}

// Sides are the clients of both clusters. Reads are direct (not cached):
// the konnector caches Secrets only in its allowed namespaces.
type Sides struct {
	Consumer, Provider client.Client
}

// Copier copies related resources.
type Copier struct {
	Events recorder.EventRecorder

	mu       sync.Mutex
	reported map[string]bool
}

// reportOnce emits a Warning Event on the binding the first time a problem
// is seen, so that a resync does not write the same Event again and again.
func (c *Copier) reportOnce(b Binding, what, reason, format string, args ...any) {
	key := b.UID + "/" + what
	c.mu.Lock()
	seen := c.reported[key]
	if c.reported == nil {
		c.reported = map[string]bool{}
	}
	c.reported[key] = true
	c.mu.Unlock()
	if !seen {
		c.Events.Eventf(b.Object, nil, corev1.EventTypeWarning, reason, "Copy", format, args...)
	}
}

// EntryID identifies a relatedResources entry by its content, so that an
// entry keeps its copies when others are added or removed before it.
func EntryID(e kbindv1alpha1.RelatedResource) string {
	data, _ := json.Marshal(e)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:10]
}

// Owner is the related-binding annotation value of a copy.
func Owner(bindingUID, entryID string) string { return bindingUID + "/" + entryID }

// Result summarizes one Sync.
type Result struct {
	Status kbindv1alpha1.RelatedStatus
	// Forbidden names refused requests ("create secrets in namespace x").
	Forbidden []string
}

type claim struct {
	entry  string
	target client.Client
	obj    client.Object
}

// Sync makes the copies of every entry match their sources and deletes
// the copies this binding no longer wants.
func (c *Copier) Sync(ctx context.Context, b Binding, sides Sides) (Result, error) {
	var res Result
	claims := map[string]claim{} // kind/namespace/name on the target side → owner
	for _, e := range b.Entries {
		id := EntryID(e)
		source, target := sides.Consumer, sides.Provider
		if e.Direction == kbindv1alpha1.FromProvider {
			source, target = sides.Provider, sides.Consumer
		}
		sources, err := listSources(ctx, source, e, b.Namespace)
		if err != nil {
			if apierrors.IsForbidden(err) {
				res.Forbidden = append(res.Forbidden, fmt.Sprintf("list %s (%s side)", e.Resource, sourceSide(e)))
				continue
			}
			return res, err
		}
		for _, src := range sources {
			key := string(e.Resource) + "/" + src.GetNamespace() + "/" + src.GetName()
			if _, taken := claims[key]; taken {
				continue // an earlier entry copies it
			}
			if s, ok := src.(*corev1.Secret); ok && s.Type == corev1.SecretTypeServiceAccountToken {
				res.Status.Skipped++
				c.reportOnce(b, "token/"+key, "RelatedSkipped",
					"not copying Secret %s/%s: service-account tokens are never copied", s.Namespace, s.Name)
				continue
			}
			desired := copyOf(src, b, id)
			claims[key] = claim{entry: id, target: target, obj: desired}
			outcome, err := c.apply(ctx, target, desired, b, id)
			var nsErr *namespaceError
			switch {
			case errors.As(err, &nsErr) && apierrors.IsForbidden(err):
				res.Forbidden = append(res.Forbidden, fmt.Sprintf("create namespaces/%s (%s side)", src.GetNamespace(), targetSide(e)))
				res.Status.Skipped++
			case apierrors.IsForbidden(err):
				res.Forbidden = append(res.Forbidden, fmt.Sprintf("write %s in namespace %s (%s side)", e.Resource, src.GetNamespace(), targetSide(e)))
				res.Status.Skipped++
			case err != nil && (apierrors.IsInvalid(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsBadRequest(err)):
				res.Status.Skipped++
				c.reportOnce(b, "rejected/"+key, "RelatedRejected",
					"the %s side refused the copy of %s %s/%s: %v", targetSide(e), e.Resource, src.GetNamespace(), src.GetName(), err)
			case err != nil:
				return res, err
			case outcome == conflict:
				res.Status.Conflicts++
			case outcome == otherEntry:
			default:
				res.Status.Copies++
			}
		}
	}
	if err := c.collect(ctx, b, sides, claims); err != nil {
		return res, err
	}
	sort.Strings(res.Forbidden)
	return res, nil
}

func sourceSide(e kbindv1alpha1.RelatedResource) string {
	if e.Direction == kbindv1alpha1.FromProvider {
		return "provider"
	}
	return "consumer"
}

func targetSide(e kbindv1alpha1.RelatedResource) string {
	if e.Direction == kbindv1alpha1.FromProvider {
		return "consumer"
	}
	return "provider"
}

// listSources lists the entry's matching sources: label selector
// server-side, names client-side; both must match when both are given.
func listSources(ctx context.Context, c client.Client, e kbindv1alpha1.RelatedResource, namespace string) ([]client.Object, error) {
	opts := []client.ListOption{}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if e.Selector.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(e.Selector.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("relatedResources selector: %w", err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	names := map[string]bool{}
	for _, n := range e.Selector.Names {
		names[n] = true
	}
	var out []client.Object
	keep := func(o client.Object) {
		if len(names) == 0 || names[o.GetName()] {
			out = append(out, o)
		}
	}
	switch e.Resource {
	case kbindv1alpha1.RelatedResourceSecrets:
		var list corev1.SecretList
		if err := c.List(ctx, &list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			keep(&list.Items[i])
		}
	default:
		var list corev1.ConfigMapList
		if err := c.List(ctx, &list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			keep(&list.Items[i])
		}
	}
	return out, nil
}

// copyOf is the target object of a source: same namespace and name, the
// payload (data, stringData as data, binaryData, type, immutable) and
// kbind's markers. Source labels are not copied.
func copyOf(src client.Object, b Binding, entry string) client.Object {
	meta := metav1.ObjectMeta{
		Namespace: src.GetNamespace(), Name: src.GetName(),
		Labels: map[string]string{
			kbindv1alpha1.ManagedLabel:            kbindv1alpha1.ManagedLabelValue,
			kbindv1alpha1.ConsumerClusterUIDLabel: b.ClusterUID,
		},
		Annotations: map[string]string{
			kbindv1alpha1.RelatedBindingAnnotation:     Owner(b.UID, entry),
			kbindv1alpha1.ConsumerClusterUIDAnnotation: b.ClusterUID,
		},
	}
	switch s := src.(type) {
	case *corev1.Secret:
		out := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta, Type: s.Type, Immutable: s.Immutable}
		out.Data = map[string][]byte{}
		for k, v := range s.Data {
			out.Data[k] = v
		}
		for k, v := range s.StringData {
			out.Data[k] = []byte(v)
		}
		return out
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta,
			Data: s.Data, BinaryData: s.BinaryData, Immutable: s.Immutable}
	}
	return nil
}

type outcome int

const (
	applied outcome = iota
	conflict
	otherEntry
)

// apply writes desired unless the target belongs to someone else. An
// immutable target whose payload changed is replaced.
func (c *Copier) apply(ctx context.Context, target client.Client, desired client.Object, b Binding, entry string) (outcome, error) {
	existing := desired.DeepCopyObject().(client.Object)
	err := target.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := ensureNamespace(ctx, target, desired.GetNamespace(), b.ClusterUID); err != nil {
			return applied, &namespaceError{err}
		}
	case err != nil:
		return applied, err
	default:
		owner := existing.GetAnnotations()[kbindv1alpha1.RelatedBindingAnnotation]
		if !strings.HasPrefix(owner, b.UID+"/") {
			c.reportOnce(b, "conflict/"+desired.GetObjectKind().GroupVersionKind().Kind+"/"+desired.GetNamespace()+"/"+desired.GetName(), "RelatedConflict",
				"%s %s/%s exists and is not this binding's copy; it was left untouched",
				strings.ToLower(desired.GetObjectKind().GroupVersionKind().Kind), desired.GetNamespace(), desired.GetName())
			return conflict, nil
		}
		if owner != Owner(b.UID, entry) {
			return otherEntry, nil
		}
		if samePayload(existing, desired) {
			return applied, nil
		}
		if immutable(existing) {
			if err := target.Delete(ctx, existing); client.IgnoreNotFound(err) != nil {
				return applied, err
			}
		}
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return applied, err
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetGroupVersionKind(desired.GetObjectKind().GroupVersionKind())
	unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
	if err := target.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
		client.FieldOwner(kbindv1alpha1.RelatedFieldManager), client.ForceOwnership); err != nil {
		return applied, err
	}
	log.FromContext(ctx).V(1).Info("Copied related resource", "kind", obj.GetKind(), "namespace", obj.GetNamespace(), "name", obj.GetName())
	return applied, nil
}

func samePayload(existing, desired client.Object) bool {
	if existing.GetLabels()[kbindv1alpha1.ManagedLabel] != kbindv1alpha1.ManagedLabelValue {
		return false
	}
	switch d := desired.(type) {
	case *corev1.Secret:
		e := existing.(*corev1.Secret)
		return equality.Semantic.DeepEqual(e.Data, d.Data) && e.Type == d.Type && equality.Semantic.DeepEqual(e.Immutable, d.Immutable)
	case *corev1.ConfigMap:
		e := existing.(*corev1.ConfigMap)
		return equality.Semantic.DeepEqual(e.Data, d.Data) && equality.Semantic.DeepEqual(e.BinaryData, d.BinaryData) &&
			equality.Semantic.DeepEqual(e.Immutable, d.Immutable)
	}
	return false
}

func immutable(obj client.Object) bool {
	switch o := obj.(type) {
	case *corev1.Secret:
		return o.Immutable != nil && *o.Immutable
	case *corev1.ConfigMap:
		return o.Immutable != nil && *o.Immutable
	}
	return false
}

// namespaceError is a failure to create the target namespace.
type namespaceError struct{ err error }

func (e *namespaceError) Error() string { return "creating the target namespace: " + e.err.Error() }
func (e *namespaceError) Unwrap() error { return e.err }

func ensureNamespace(ctx context.Context, c client.Client, name, clusterUID string) error {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			kbindv1alpha1.ManagedLabel:            kbindv1alpha1.ManagedLabelValue,
			kbindv1alpha1.ConsumerClusterUIDLabel: clusterUID,
		},
		Annotations: map[string]string{kbindv1alpha1.ConsumerClusterUIDAnnotation: clusterUID},
	}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// collect deletes this binding's copies that no entry claims any more: the
// source stopped matching or disappeared, or its entry was removed (SYNC-R4).
func (c *Copier) collect(ctx context.Context, b Binding, sides Sides, claims map[string]claim) error {
	for _, side := range []client.Client{sides.Consumer, sides.Provider} {
		if side == nil {
			continue // no provider session: its side is cleaned up later
		}
		for _, kind := range []kbindv1alpha1.RelatedResourceKind{kbindv1alpha1.RelatedResourceSecrets, kbindv1alpha1.RelatedResourceConfigMaps} {
			copies, err := c.copiesOf(ctx, side, kind, b)
			if err != nil {
				if apierrors.IsForbidden(err) {
					continue
				}
				return err
			}
			for _, obj := range copies {
				key := string(kind) + "/" + obj.GetNamespace() + "/" + obj.GetName()
				cl, ok := claims[key]
				if ok && cl.target == side && Owner(b.UID, cl.entry) == obj.GetAnnotations()[kbindv1alpha1.RelatedBindingAnnotation] {
					continue
				}
				if err := side.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
					return fmt.Errorf("deleting related copy %s: %w", key, err)
				}
				log.FromContext(ctx).V(1).Info("Deleted related copy", "key", key)
			}
		}
	}
	return nil
}

// copiesOf lists a side's copies made by the binding, selected server-side
// by the managed and consumer-cluster labels.
func (c *Copier) copiesOf(ctx context.Context, side client.Client, kind kbindv1alpha1.RelatedResourceKind, b Binding) ([]client.Object, error) {
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{
		kbindv1alpha1.ManagedLabel:            kbindv1alpha1.ManagedLabelValue,
		kbindv1alpha1.ConsumerClusterUIDLabel: b.ClusterUID,
	})}}
	if b.Namespace != "" {
		opts = append(opts, client.InNamespace(b.Namespace))
	}
	var out []client.Object
	mine := func(o client.Object) {
		if strings.HasPrefix(o.GetAnnotations()[kbindv1alpha1.RelatedBindingAnnotation], b.UID+"/") {
			out = append(out, o)
		}
	}
	if kind == kbindv1alpha1.RelatedResourceSecrets {
		var list corev1.SecretList
		if err := side.List(ctx, &list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			mine(&list.Items[i])
		}
		return out, nil
	}
	var list corev1.ConfigMapList
	if err := side.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	for i := range list.Items {
		mine(&list.Items[i])
	}
	return out, nil
}

// Cleanup deletes every copy the binding made (unbind).
func (c *Copier) Cleanup(ctx context.Context, b Binding, sides Sides) error {
	return c.collect(ctx, b, sides, map[string]claim{})
}
