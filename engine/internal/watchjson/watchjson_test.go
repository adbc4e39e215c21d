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

package watchjson

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
)

func TestSplitEvent(t *testing.T) {
	for _, tc := range []struct {
		name, data, typ, object string
		ok                      bool
	}{
		{"the API server's layout", `{"type":"ADDED","object":{"kind":"Widget","a":1}}`, "ADDED", `{"kind":"Widget","a":1}`, true},
		{"a trailing newline", "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Widget\"}}\n", "MODIFIED", `{"kind":"Widget"}`, true},
		{"a bookmark", `{"type":"BOOKMARK","object":{"kind":"Widget","metadata":{"resourceVersion":"12"}}}`, "BOOKMARK", `{"kind":"Widget","metadata":{"resourceVersion":"12"}}`, true},
		{"the object first", `{"object":{"kind":"Widget"},"type":"ADDED"}`, "", "", false},
		{"spaces between the members", `{"type": "ADDED", "object": {"kind":"Widget"}}`, "", "", false},
		{"an escaped quote in the type", `{"type":"AD\"DED","object":{}}`, "", "", false},
		{"a null object", `{"type":"ADDED","object":null}`, "", "", false},
		{"no object", `{"type":"ADDED"}`, "", "", false},
		{"truncated", `{"type":"ADDED","object":{"kind":"Widget"`, "", "", false},
		{"empty", ``, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, object, ok := splitEvent([]byte(tc.data))
			if ok != tc.ok || typ != tc.typ || string(object) != tc.object {
				t.Errorf("splitEvent(%s) = %q, %s, %v; want %q, %s, %v", tc.data, typ, object, ok, tc.typ, tc.object, tc.ok)
			}
		})
	}
}

// TestDecodesAsTheDynamicClientDoes: a stream of events of every type, in
// the API server's layout and in others, decodes to the same events and
// objects as client-go's dynamic client, and an ERROR event's object is
// still an error the reflector understands.
func TestDecodesAsTheDynamicClientDoes(t *testing.T) {
	stream := strings.Join([]string{
		`{"type":"ADDED","object":{"apiVersion":"example.org/v1","kind":"Widget","metadata":{"name":"a","namespace":"n","resourceVersion":"5","labels":{"x":"y"}},"spec":{"size":3,"ratio":1.5,"tags":["a","b"],"on":true,"none":null}}}`,
		`{"type":"MODIFIED","object":{"apiVersion":"example.org/v1","kind":"Widget","metadata":{"name":"a","namespace":"n","resourceVersion":"6"},"status":{"note":"quote \" and brace } inside"}}}`,
		`{"object":{"apiVersion":"example.org/v1","kind":"Widget","metadata":{"name":"b","resourceVersion":"7"}},"type":"DELETED"}`,
		`{"type":"ADDED","object":{"apiVersion":"example.org/v1","kind":"Widget","metadata":{"name":"d"}},"extra":1}`,
		`{ "type" : "ADDED" , "object" : {"apiVersion":"example.org/v1","kind":"Widget","metadata":{"name":"c"}} }`,
		`{"type":"BOOKMARK","object":{"apiVersion":"example.org/v1","kind":"Widget","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}`,
	}, "\n") + "\n"

	got := decodeAll(t, restclientwatch.NewDecoder(streaming.NewDecoder(json.Framer.NewFrameReader(io.NopCloser(strings.NewReader(stream))), events{}), objects{}))
	want := decodeAll(t, restclientwatch.NewDecoder(streaming.NewDecoder(json.Framer.NewFrameReader(io.NopCloser(strings.NewReader(stream))), dynamicStream()), dynamicObjects()))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%v\nwant\n%v", got, want)
	}
	if err := apierrors.FromObject(got[len(got)-1].Object); !apierrors.IsResourceExpired(err) {
		t.Errorf("the ERROR event: %v, want a resource-expired error", err)
	}
}

func TestRefusesWhatIsNotAnObject(t *testing.T) {
	for _, data := range []string{
		`{"type":"ADDED","object":{"metadata":{"name":"no-kind"}}}`,
		// A member after the object that ends in a brace: no API server
		// writes one (metav1.WatchEvent has two fields, in this order).
		`{"type":"ADDED","object":{"kind":"Widget"},"extra":{}}`,
		`{"type":"ADDED","object":{"kind":"Widget"}`,
	} {
		d := restclientwatch.NewDecoder(streaming.NewDecoder(io.NopCloser(strings.NewReader(data)), events{}), objects{})
		if typ, obj, err := d.Decode(); err == nil {
			t.Errorf("%s decoded to %s %v, want an error", data, typ, obj)
		}
	}
}

func TestResourcePath(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.org", Version: "v1", Resource: "widgets"}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for _, tc := range []struct {
		gvr        schema.GroupVersionResource
		namespaced bool
		namespace  string
		want       string
	}{
		{widgets, true, "", "apis/example.org/v1/widgets"},
		{widgets, true, "tenant-a", "apis/example.org/v1/namespaces/tenant-a/widgets"},
		{widgets, false, "tenant-a", "apis/example.org/v1/widgets"},
		{pods, true, "tenant-a", "api/v1/namespaces/tenant-a/pods"},
	} {
		if got := strings.Join(resourcePath(tc.gvr, tc.namespaced, tc.namespace), "/"); got != tc.want {
			t.Errorf("resourcePath(%v, %v, %q) = %s, want %s", tc.gvr, tc.namespaced, tc.namespace, got, tc.want)
		}
	}
}

func decodeAll(t *testing.T, d *restclientwatch.Decoder) []watch.Event {
	t.Helper()
	var events []watch.Event
	for {
		typ, obj, err := d.Decode()
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, watch.Event{Type: typ, Object: obj})
	}
}

// BenchmarkDecode: one event of a typical bound object, the two paths.
func BenchmarkDecode(b *testing.B) {
	frame := []byte(`{"type":"MODIFIED","object":{"apiVersion":"example.org/v1alpha1","kind":"Widget","metadata":{"name":"w-1","namespace":"bench-3","uid":"6d7c1f0e-0000-4000-8000-000000000001","resourceVersion":"123456","generation":2,"creationTimestamp":"2026-12-06T07:00:00Z","labels":{"core.kbind.io/consumer":"c"},"annotations":{"core.kbind.io/consumer-uid":"u"},"finalizers":["core.kbind.io/syncer"]},"spec":{"size":3,"color":"blue"},"status":{"phase":"Ready","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-12-06T07:00:01Z","reason":"Up","message":""}]}}}` + "\n")
	for name, decoders := range map[string]struct {
		events  runtime.Decoder
		objects runtime.Decoder
	}{
		"once":    {events{}, objects{}},
		"dynamic": {dynamicStream(), dynamicObjects()},
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d := restclientwatch.NewDecoder(streaming.NewDecoder(json.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(frame))), decoders.events), decoders.objects)
				if _, _, err := d.Decode(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// dynamicStream and dynamicObjects are the dynamic client's watch
// decoders: the path this package replaces.
func dynamicStream() runtime.Decoder {
	return dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer.SupportedMediaTypes()[0].StreamSerializer.Serializer
}

func dynamicObjects() runtime.Decoder {
	return dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer.SupportedMediaTypes()[0].Serializer
}
