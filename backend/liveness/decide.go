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

package liveness

import (
	"fmt"
	"time"

	"k8s.io/utils/ptr"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// ConsumerUID returns the consumer cluster UID a heartbeat Lease belongs to,
// or a reason why the Lease cannot be attributed: the label (used for
// server-side selection) and the annotation (ownership marker 1) must both
// be present and equal.
func ConsumerUID(labels, annotations map[string]string) (string, error) {
	label := labels[kbindv1alpha1.ConsumerClusterUIDLabel]
	annotation := annotations[kbindv1alpha1.ConsumerClusterUIDAnnotation]
	switch {
	case label == "" && annotation == "":
		return "", fmt.Errorf("no %s label or annotation", kbindv1alpha1.ConsumerClusterUIDLabel)
	case label == "":
		return "", fmt.Errorf("no %s label", kbindv1alpha1.ConsumerClusterUIDLabel)
	case annotation == "":
		return "", fmt.Errorf("no %s annotation", kbindv1alpha1.ConsumerClusterUIDAnnotation)
	case label != annotation:
		return "", fmt.Errorf("%s label %q and annotation %q differ", kbindv1alpha1.ConsumerClusterUIDLabel, label, annotation)
	}
	return label, nil
}

// TakenOver is a heartbeat Lease whose markers name a consumer cluster but
// whose spec.holderIdentity is not that consumer: someone rewrote the
// holder. The konnector never renews a Lease held by another (it leaves it
// alone and reports Heartbeat=False), so such a Lease says nothing about
// the consumer's liveness: counting it would let whoever took it over make
// a live consumer look stale and get its objects reaped.
type TakenOver struct {
	// Consumer is the consumer cluster UID on the Lease's markers.
	Consumer string
	// Holder is spec.holderIdentity ("" when unset).
	Holder string
}

func (e *TakenOver) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("has no spec.holderIdentity, though its markers name consumer cluster %s", e.Consumer)
	}
	return fmt.Sprintf("is held by %q, not by consumer cluster %s its markers name", e.Holder, e.Consumer)
}

// Attribute returns the consumer cluster a heartbeat Lease counts for: its
// markers must name it (ConsumerUID) and it must hold the Lease
// (spec.holderIdentity, which the konnector sets to its consumer cluster
// UID). A Lease held by anyone else is *TakenOver and counts for no
// consumer.
func Attribute(labels, annotations map[string]string, holderIdentity *string) (string, error) {
	uid, err := ConsumerUID(labels, annotations)
	if err != nil {
		return "", err
	}
	if holder := ptr.Deref(holderIdentity, ""); holder != uid {
		return "", &TakenOver{Consumer: uid, Holder: holder}
	}
	return uid, nil
}

// Action is what to do with a Lease's stale-since annotation.
type Action int

const (
	// Keep leaves the annotation as it is.
	Keep Action = iota
	// Mark sets the annotation (the Lease turned stale).
	Mark
	// Clear removes the annotation (the Lease was seen renewing).
	Clear
)

// StaleSinceAction decides the stale-since annotation (BE-2) from its
// current value (present reports whether it exists) and the Lease's state.
// An annotation is cleared only after the backend has seen the Lease renew:
// a restarted backend that finds an annotation written before its restart
// keeps it, since a fresh clock proves nothing about the holder.
func StaleSinceAction(current string, present bool, s State) Action {
	switch {
	case !s.Known:
		return Keep
	case s.Stale:
		if !present {
			return Mark
		}
		if _, err := time.Parse(time.RFC3339, current); err != nil {
			return Mark // not a time: replace with ours
		}
		return Keep
	case present && s.Renewed:
		return Clear
	}
	return Keep
}

// StaleSinceValue is the annotation value for a Lease that became stale at
// t on the backend's clock.
func StaleSinceValue(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// NextTransition is the shortest positive wait until one of the given Leases
// turns stale (now on the backend's clock), and false when none will (all
// stale or unknown): the controller requeues exactly then, never polls.
func NextTransition(states []State, now time.Time) (time.Duration, bool) {
	var next time.Duration
	found := false
	for _, s := range states {
		if !s.Known || s.Stale {
			continue
		}
		d := s.StaleSince.Sub(now)
		if d <= 0 {
			d = time.Millisecond
		}
		if !found || d < next {
			next, found = d, true
		}
	}
	return next, found
}

// Live reports whether a consumer with these Lease states is live: any
// Lease live (or not yet judged) keeps it live, so one stale and one live
// Lease mean a live consumer. A consumer without Leases is not live.
func Live(states []State) bool {
	for _, s := range states {
		if !s.Known || !s.Stale {
			return true
		}
	}
	return false
}
