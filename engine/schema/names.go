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
	"fmt"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// NameConflict is one of a new consumer CRD's names that another CRD of
// its group holds on the consumer.
type NameConflict struct {
	// CRD is the CRD that holds the name.
	CRD string
	// Field is which of the new CRD's names it is: plural, singular,
	// short name, kind or list kind.
	Field string
	// Name is the name itself.
	Name string
	// Kbind is true when the holder is a CRD kbind created (for any
	// Connection).
	Kbind bool
	// GoneSince is when kbind first saw the holder gone; zero while it
	// exists (see ReleasedNames).
	GoneSince time.Time
}

// NameConflicts decides which names of desired, a consumer CRD kbind is
// about to create, other CRDs of its group hold (SCHEMA-7), by the rules of the
// consumer API server's naming controller
// (apiextensions-apiserver pkg/controller/status/naming_controller.go):
// within one group, the plural, the singular and each short name must not
// be any other CRD's plural, singular or short name, and the kind and the
// list kind must not be any other CRD's kind or list kind. A CRD whose
// names the API server refuses is never established, and once the holder
// goes it gets them — ahead of the holder created again — so kbind checks
// before it creates instead of leaving that to the API server.
//
// One rule is stricter than the API server's: a holder's names count
// whether the API server accepted them (status.acceptedNames) or they are
// only asked for (spec.names: a CRD created a moment ago, or one refused
// itself), since kbind must not take a name a cluster's own CRD wants.
// Other CRDs named like desired (desired itself, as cached) and of other
// groups are ignored. The result is sorted by holder, in the order of the
// fields above.
func NameConflicts(desired *apiextensionsv1.CustomResourceDefinition, others []apiextensionsv1.CustomResourceDefinition) []NameConflict {
	if desired == nil {
		return nil
	}
	want := defaulted(desired.Spec.Names)
	var out []NameConflict
	for i := range others {
		other := &others[i]
		if other.Name == desired.Name || other.Spec.Group != desired.Spec.Group {
			continue
		}
		resources, kinds := heldNames(other)
		add := func(field, name string, held map[string]bool) {
			if name != "" && held[name] {
				out = append(out, NameConflict{CRD: other.Name, Field: field, Name: name, Kbind: managed(other)})
			}
		}
		add("plural", want.Plural, resources)
		add("singular", want.Singular, resources)
		for _, s := range want.ShortNames {
			add("short name", s, resources)
		}
		add("kind", want.Kind, kinds)
		add("list kind", want.ListKind, kinds)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CRD < out[j].CRD })
	return out
}

// heldNames are the resource names (plural, singular, short names) and
// the kinds (kind, list kind) a CRD holds in its group: accepted or asked
// for.
func heldNames(crd *apiextensionsv1.CustomResourceDefinition) (resources, kinds map[string]bool) {
	resources, kinds = map[string]bool{}, map[string]bool{}
	for _, n := range []apiextensionsv1.CustomResourceDefinitionNames{crd.Status.AcceptedNames, defaulted(crd.Spec.Names)} {
		for _, r := range append([]string{n.Plural, n.Singular}, n.ShortNames...) {
			if r != "" {
				resources[r] = true
			}
		}
		for _, k := range []string{n.Kind, n.ListKind} {
			if k != "" {
				kinds[k] = true
			}
		}
	}
	return resources, kinds
}

// defaulted fills in what the API server defaults in spec.names: the
// singular (the kind in lower case) and the list kind (the kind and
// "List").
func defaulted(n apiextensionsv1.CustomResourceDefinitionNames) apiextensionsv1.CustomResourceDefinitionNames {
	if n.Singular == "" && n.Kind != "" {
		n.Singular = strings.ToLower(n.Kind)
	}
	if n.ListKind == "" && n.Kind != "" {
		n.ListKind = n.Kind + "List"
	}
	return n
}

func managed(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crd.Labels[kbindv1alpha1.ManagedLabel] == kbindv1alpha1.ManagedLabelValue
}

// DescribeNameConflicts is the binding's message for a consumer CRD kbind
// does not create because other CRDs hold its names (NameConflicts, not
// empty): which CRD holds which name, and what to do — project the API
// onto another kind and plural (a cluster admin's ClusterBinding can).
func DescribeNameConflicts(desired *apiextensionsv1.CustomResourceDefinition, conflicts []NameConflict, now time.Time) string {
	var held []string
	for i := 0; i < len(conflicts); {
		c := conflicts[i]
		var names []string
		for ; i < len(conflicts) && conflicts[i].CRD == c.CRD; i++ {
			names = append(names, conflicts[i].Field+" "+conflicts[i].Name)
		}
		whose := "which kbind did not create"
		if c.Kbind {
			whose = "which kbind installed for another API"
		}
		what := fmt.Sprintf("%s of the CRD %s (%s)", strings.Join(names, ", "), c.CRD, whose)
		if !c.GoneSince.IsZero() {
			what += fmt.Sprintf(", deleted %s ago: kbind leaves the names a CRD of the cluster released alone for %s, so that a CRD deleted and created again (as an operator upgrade does) gets them back",
				now.Sub(c.GoneSince).Round(time.Second), NamesHold)
		}
		held = append(held, what)
	}
	fix := fmt.Sprintf("a cluster admin can bind %s with a ClusterBinding that projects it onto another kind and plural (docs/shaping.md#projection)", ProviderAPI(desired))
	if Projected(desired) {
		fix = fmt.Sprintf("project %s onto another kind and plural", ProviderAPI(desired))
	}
	return fmt.Sprintf("the consumer API %s is not installed: the consumer cluster's group %s already has the %s, and the consumer API server refuses names another CRD of the group holds; %s",
		desired.Name, desired.Spec.Group, strings.Join(held, "; the "), fix)
}

// NamesHold is how long kbind leaves alone the names a CRD it did not
// create released (ReleasedNames): an operator upgrade that deletes its CRD
// and creates it again must get its names back, not lose them to a
// binding that waited for them.
const NamesHold = time.Minute

// ReleasedNames remembers the CRDs kbind did not create that held names a
// consumer CRD kbind meant to create, so that for NamesHold after kbind
// first sees one gone its names stay taken. It is memory, not state: a
// konnector restart forgets it (and meanwhile the holder is usually back).
type ReleasedNames struct {
	crds map[string]releasedCRD
}

type releasedCRD struct {
	crd       *apiextensionsv1.CustomResourceDefinition
	goneSince time.Time
}

// Observe records the holders of conflicts that kbind did not create
// (from live, the group's CRDs as read now) and, for every remembered
// holder of group not among live, when it was first seen gone; it forgets
// those gone for NamesHold or longer.
func (r *ReleasedNames) Observe(group string, live []apiextensionsv1.CustomResourceDefinition, conflicts []NameConflict, now time.Time) {
	if r.crds == nil {
		r.crds = map[string]releasedCRD{}
	}
	present := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for i := range live {
		present[live[i].Name] = &live[i]
	}
	for _, c := range conflicts {
		if crd := present[c.CRD]; crd != nil && !c.Kbind {
			r.crds[c.CRD] = releasedCRD{crd: names(crd)}
		}
	}
	for name, rc := range r.crds {
		switch {
		case rc.crd.Spec.Group != group:
		case present[name] != nil:
			rc.goneSince = time.Time{}
			r.crds[name] = rc
		case rc.goneSince.IsZero():
			rc.goneSince = now
			r.crds[name] = rc
		case now.Sub(rc.goneSince) >= NamesHold:
			delete(r.crds, name)
		}
	}
}

// Conflicts are the names of desired that CRDs remembered gone (Observe)
// still hold, marked with when they went.
func (r *ReleasedNames) Conflicts(desired *apiextensionsv1.CustomResourceDefinition) []NameConflict {
	var gone []apiextensionsv1.CustomResourceDefinition
	since := map[string]time.Time{}
	for name, rc := range r.crds {
		if !rc.goneSince.IsZero() {
			gone = append(gone, *rc.crd)
			since[name] = rc.goneSince
		}
	}
	out := NameConflicts(desired, gone)
	for i := range out {
		out[i].GoneSince = since[out[i].CRD]
	}
	return out
}

// names is what ReleasedNames keeps of a CRD: its name, group and names.
func names(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	out := &apiextensionsv1.CustomResourceDefinition{}
	out.Name, out.Labels = crd.Name, crd.Labels
	out.Spec.Group, out.Spec.Names = crd.Spec.Group, *crd.Spec.Names.DeepCopy()
	out.Status.AcceptedNames = *crd.Status.AcceptedNames.DeepCopy()
	return out
}
