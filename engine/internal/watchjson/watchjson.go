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

// Package watchjson gives the caches' informers of unstructured objects a
// watch that reads each event's JSON once.
//
// client-go's dynamic client decodes a watch event in five passes over its
// bytes: the framer finds the event's end, the envelope's apiVersion and
// kind are sniffed with a full parse, the envelope is decoded into a
// metav1.WatchEvent (the object copied out as raw bytes), the object's
// apiVersion and kind are sniffed again, and the object is parsed. The
// API server writes every event as {"type":"<TYPE>","object":<object>}:
// here the framer finds the end, the envelope is taken apart by its
// fixed layout, and the object is parsed once into an Unstructured. An
// event of any other shape is unmarshalled as a whole.
//
// Only the watch changes. The list an informer starts from (when the API
// server does not stream it), the request itself, its errors and the
// reflector's watch lists and bookmarks stay client-go's, and so do its
// retries but one: every informer made here (typed ones too) retries a
// refused connection itself, at most a few seconds apart (refused.go).
package watchjson

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// Watches makes informers for a controller-runtime cache (its
// Options.NewInformer): informers of unstructured objects watch through
// a client that decodes each event once; every other informer is
// client-go's own.
//
// The cache must select unstructured objects by namespace only — by
// Namespace, and by no label or field selector — because the informer's
// watch is built here, from the object's kind, not from the cache's
// options.
type Watches struct {
	// Config and HTTPClient are the cache's.
	Config     *rest.Config
	HTTPClient *http.Client
	// Namespace confines the watches of namespaced resources ("": all),
	// as the cache's DefaultNamespaces does.
	Namespace string
	// Mapper maps a kind to its resource. It is read when an informer is
	// made, so it may be set after the cache is created.
	Mapper meta.RESTMapper
}

// NewInformer is a cache.Options.NewInformer.
// Every informer's watch retries refused connections itself (see
// refusedRetryCap).
func (w *Watches) NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if own, err := w.listerWatcher(lw, u.GroupVersionKind()); err == nil {
			lw = own
		}
		// Else the dynamic client's watch: it decodes the same events,
		// at a higher cost.
	}
	return toolscache.NewSharedIndexInformer(retryingRefused(lw), obj, resync, indexers)
}

// listerWatcher lists with lw (the cache's) and watches gvk's resource
// through a client whose events are decoded once.
func (w *Watches) listerWatcher(lw toolscache.ListerWatcher, gvk schema.GroupVersionKind) (toolscache.ListerWatcher, error) {
	lister, ok := lw.(toolscache.ListerWithContext)
	if !ok || w.Mapper == nil {
		return nil, fmt.Errorf("no way to list %s", gvk)
	}
	mapping, err := w.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	client, err := newClient(w.Config, w.HTTPClient)
	if err != nil {
		return nil, err
	}
	path := resourcePath(mapping.Resource, mapping.Scope.Name() == meta.RESTScopeNameNamespace, w.Namespace)
	return &toolscache.ListWatch{
		ListWithContextFunc: lister.ListWithContext,
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			opts.AllowWatchBookmarks = true
			return client.Get().AbsPath(path...).
				SpecificallyVersionedParams(&opts, metav1.ParameterCodec, schema.GroupVersion{Version: "v1"}).
				Watch(ctx)
		},
	}, nil
}

// resourcePath is the path segments of a resource's collection.
func resourcePath(gvr schema.GroupVersionResource, namespaced bool, namespace string) []string {
	path := []string{"apis", gvr.Group, gvr.Version}
	if gvr.Group == "" {
		path = []string{"api", gvr.Version}
	}
	if namespaced && namespace != "" {
		path = append(path, "namespaces", namespace)
	}
	return append(path, gvr.Resource)
}

// newClient is a REST client that asks for JSON and decodes watch events
// once.
func newClient(base *rest.Config, hc *http.Client) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(base)
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	cfg.NegotiatedSerializer = negotiated{}
	cfg.GroupVersion = &schema.GroupVersion{}
	cfg.APIPath = "/"
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.UnversionedRESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating the watch client: %w", err)
	}
	return client, nil
}

// negotiated offers JSON only.
type negotiated struct{}

func (negotiated) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{{
		MediaType:        "application/json",
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       objects{},
		StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: events{}, Framer: json.Framer},
	}}
}

func (negotiated) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

func (negotiated) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

// events decodes a watch event's envelope: its type, and its object as
// raw bytes for objects to decode.
type events struct{}

var (
	watchEventKind = schema.GroupVersionKind{Version: "v1", Kind: "WatchEvent"}
	statusKind     = schema.GroupVersionKind{Version: "v1", Kind: "Status"}
	eventStart     = []byte(`{"type":"`)
	eventObject    = []byte(`","object":`)
)

func (events) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	event, ok := into.(*metav1.WatchEvent)
	if !ok {
		return nil, nil, fmt.Errorf("watchjson: a watch event decodes into a metav1.WatchEvent, not %T", into)
	}
	if typ, object, ok := splitEvent(data); ok {
		event.Type, event.Object = typ, runtime.RawExtension{Raw: object}
	} else if err := utiljson.Unmarshal(data, event); err != nil {
		return nil, nil, err
	}
	return event, &watchEventKind, nil
}

// splitEvent takes {"type":"<type>","object":<object>} apart without
// parsing the object. ok is false for anything else. A Go string cannot
// hold an unescaped quote, so the type ends at the first one.
func splitEvent(data []byte) (typ string, object []byte, ok bool) {
	rest, found := bytes.CutPrefix(bytes.TrimLeft(data, " \t\r\n"), eventStart)
	if !found {
		return "", nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", nil, false
	}
	typ = string(rest[:end])
	if rest, found = bytes.CutPrefix(rest[end:], eventObject); !found {
		return "", nil, false
	}
	rest = bytes.TrimRight(rest, " \t\r\n")
	if len(rest) < 2 || rest[len(rest)-1] != '}' {
		return "", nil, false
	}
	object = bytes.TrimRight(rest[:len(rest)-1], " \t\r\n")
	// The object is the envelope's last member (metav1.WatchEvent has two
	// fields, and the API server writes them in this order): a JSON
	// object ending where the envelope does. A member after it that ended
	// in a brace would fail the object's parse, never be taken for a
	// field of it.
	if len(object) < 2 || object[0] != '{' || object[len(object)-1] != '}' {
		return "", nil, false
	}
	return typ, object, true
}

func (events) Encode(runtime.Object, io.Writer) error {
	return errors.New("watchjson: the watch client sends no watch events")
}

func (events) Identifier() runtime.Identifier {
	return "kbind-watchjson-events"
}

// objects decodes an object into an Unstructured with one parse.
type objects struct{}

func (objects) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into == nil {
		into = &unstructured.Unstructured{}
	}
	// With a target, the unstructured scheme parses once (no sniffing of
	// the kind, no probing for a list's items); a typed target (the
	// Status of an error response) is unmarshalled as it is.
	obj, gvk, err := unstructured.UnstructuredJSONScheme.Decode(data, defaults, into)
	if err != nil {
		return nil, gvk, err
	}
	// An ERROR event's Status is typed, as the dynamic client's scheme
	// makes it.
	if u, ok := obj.(*unstructured.Unstructured); ok && *gvk == statusKind {
		status := &metav1.Status{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, status); err != nil {
			return nil, gvk, fmt.Errorf("decoding a Status: %w", err)
		}
		return status, gvk, nil
	}
	return obj, gvk, nil
}

func (objects) Encode(obj runtime.Object, w io.Writer) error {
	return unstructured.UnstructuredJSONScheme.Encode(obj, w)
}

func (objects) Identifier() runtime.Identifier {
	return "kbind-watchjson-objects"
}
