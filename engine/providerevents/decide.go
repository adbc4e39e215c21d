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

package providerevents

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// MaxAge is how old a provider Event's last occurrence may be and still
// be forwarded: the API server's default Event TTL. An older one is about
// to be collected on both sides, and forwarding it would only bring a
// collected consumer copy back.
const MaxAge = time.Hour

// Occurrence is when and how often a provider Event happened, the same for
// the core/v1 form (count, firstTimestamp, lastTimestamp) and the
// events.k8s.io form (eventTime, series) of one Event.
type Occurrence struct {
	Count       int32
	First, Last time.Time
}

// OccurrenceOf normalises e's count and times: at least 1, the latest of
// lastTimestamp, series.lastObservedTime and eventTime, the earliest known
// first time.
func OccurrenceOf(e *corev1.Event) Occurrence {
	o := Occurrence{Count: e.Count, First: e.FirstTimestamp.Time, Last: e.LastTimestamp.Time}
	if e.Series != nil {
		if e.Series.Count > o.Count {
			o.Count = e.Series.Count
		}
		if t := e.Series.LastObservedTime.Time; t.After(o.Last) {
			o.Last = t
		}
	}
	if t := e.EventTime.Time; !t.IsZero() {
		if t.After(o.Last) {
			o.Last = t
		}
		if o.First.IsZero() || t.Before(o.First) {
			o.First = t
		}
	}
	if o.Last.IsZero() {
		o.Last = e.CreationTimestamp.Time
	}
	if o.First.IsZero() || o.First.After(o.Last) {
		o.First = o.Last
	}
	if o.Count < 1 {
		o.Count = 1
	}
	return o
}

// Concerns reports whether the provider Event e is about an object of the
// bound API gk: same group (any version) and kind.
func Concerns(e *corev1.Event, gk schema.GroupKind) bool {
	gv, err := schema.ParseGroupVersion(e.InvolvedObject.APIVersion)
	return err == nil && gv.Group == gk.Group && e.InvolvedObject.Kind == gk.Kind
}

// maxNameLength is the longest Event name (a DNS subdomain).
const maxNameLength = 253

// Name is the consumer Event's name for the provider Event with UID
// providerUID about the consumer object named object: the object's name (cut
// to fit) and 16 hex characters of a hash of the provider Event's UID. The
// same provider Event always maps to the same consumer Event, across
// restarts, so that it is written once and then only updated.
func Name(object string, providerUID types.UID) string {
	sum := sha256.Sum256([]byte(providerUID))
	suffix := "." + hex.EncodeToString(sum[:])[:16]
	if len(object)+len(suffix) > maxNameLength {
		object = object[:maxNameLength-len(suffix)]
	}
	return object + suffix
}

// Namespace is where the Event of a consumer object lives: the object's
// namespace, or "default" for a cluster-scoped object (as Kubernetes
// records them).
func Namespace(object corev1.ObjectReference) string {
	if object.Namespace == "" {
		return metav1.NamespaceDefault
	}
	return object.Namespace
}

// Source names the provider as the Event's source: the provider
// component that reported it, and the Connection it came through.
func Source(e *corev1.Event, connection string) corev1.EventSource {
	component := e.Source.Component
	if component == "" {
		component = e.ReportingController
	}
	if component == "" {
		component = "provider"
	}
	return corev1.EventSource{Component: fmt.Sprintf("%s (provider %s)", component, connection)}
}

// Desired is the consumer Event that re-emits the provider Event e on the
// consumer object: the same type, reason, message, count and times, the
// provider named as the source, and kbind's managed label (the konnector
// watches only those Events on the consumer).
func Desired(e *corev1.Event, object corev1.ObjectReference, connection string) *corev1.Event {
	o := OccurrenceOf(e)
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: Namespace(object),
			Name:      Name(object.Name, e.UID),
			Labels:    map[string]string{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue},
		},
		InvolvedObject: object,
		Type:           e.Type,
		Reason:         e.Reason,
		Message:        e.Message,
		Source:         Source(e, connection),
		Count:          o.Count,
		FirstTimestamp: metav1.NewTime(o.First),
		LastTimestamp:  metav1.NewTime(o.Last),
	}
}

// Action is what to do with a consumer Event.
type Action int

// The actions: nothing (the consumer Event is current), create it, or
// update it with a newer occurrence.
const (
	ActionNone Action = iota
	ActionCreate
	ActionUpdate
)

// Decide compares the desired consumer Event with the existing one (nil:
// none). A provider Event last seen before now-MaxAge is not forwarded.
// An existing one is updated only when the provider Event happened again
// (a higher count or a later last time), never rewound.
func Decide(existing, desired *corev1.Event, now time.Time) Action {
	switch {
	case existing == nil && desired.LastTimestamp.Time.Before(now.Add(-MaxAge)):
		return ActionNone
	case existing == nil:
		return ActionCreate
	case desired.Count > existing.Count || desired.LastTimestamp.After(existing.LastTimestamp.Time):
		return ActionUpdate
	default:
		return ActionNone
	}
}

// Merge returns existing updated to the desired occurrence (count, last
// time, message), for an update.
func Merge(existing, desired *corev1.Event) *corev1.Event {
	out := existing.DeepCopy()
	if desired.Count > out.Count {
		out.Count = desired.Count
	}
	if desired.LastTimestamp.After(out.LastTimestamp.Time) {
		out.LastTimestamp = desired.LastTimestamp
	}
	out.Message = desired.Message
	return out
}
