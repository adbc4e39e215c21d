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

// Package schema owns what the provider exports and how it becomes consumer
// CRDs: discovery of exported APIs from labelled CRDs or from server
// discovery + /openapi/v3 (CONN-4), CRD derivation and synthesis
// (SCHEMA-1, SCHEMA-2), and the pull and update policies (SCHEMA-3..5).
//
// Requirement ids in comments (such as CONN-4) refer to docs/requirements.md.
package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// CRDs is the provider resource the CRD source lists.
const CRDs = "customresourcedefinitions.apiextensions.k8s.io"

// ListError is a failed provider request, naming the verb and resource so
// that conditions can say what was refused.
type ListError struct {
	Verb     string
	Resource string
	Err      error
}

func (e *ListError) Error() string { return fmt.Sprintf("%s %s: %v", e.Verb, e.Resource, e.Err) }
func (e *ListError) Unwrap() error { return e.Err }

// Result is the outcome of one discovery pass.
type Result struct {
	Source  kbindv1alpha1.ActiveSchemaSource
	Exports []kbindv1alpha1.ExportedAPI
	// Unreadable are the API groups (OpenAPI source) whose discovery or
	// /openapi/v3 document could not be read in this pass: what they export
	// is unknown, not absent, so a caller keeps their last known exports
	// (see KeepUnreadable). Sorted by group.
	Unreadable []GroupError
}

// GroupError is a failed read of one API group's discovery or schema.
type GroupError struct {
	Group string
	Err   error
}

func (e GroupError) Error() string { return e.Err.Error() }

// KeepUnreadable returns fresh exports plus the previous exports of every
// group the pass could not read: an error while reading exports never
// shrinks them; only a successful read that no longer lists an API removes
// it. Previous exports count only when they came from the same source.
func KeepUnreadable(fresh []kbindv1alpha1.ExportedAPI, unreadable []GroupError,
	previous []kbindv1alpha1.ExportedAPI, previousSource, source kbindv1alpha1.ActiveSchemaSource) []kbindv1alpha1.ExportedAPI {
	if len(unreadable) == 0 || previousSource != source {
		return fresh
	}
	groups := map[string]bool{}
	for _, u := range unreadable {
		groups[u.Group] = true
	}
	out := append([]kbindv1alpha1.ExportedAPI{}, fresh...)
	have := map[string]bool{}
	for _, e := range fresh {
		have[e.Name] = true
	}
	for _, e := range previous {
		if groups[e.Group] && !have[e.Name] {
			out = append(out, *e.DeepCopy())
		}
	}
	sortExports(out)
	return out
}

// Discoverer reads a provider's exports.
type Discoverer struct {
	Client    client.Reader                // lists CRDs
	Discovery discovery.DiscoveryInterface // server discovery and /openapi/v3
}

// Discover resolves source and lists the exports (CONN-4). Auto tries
// the labelled CRD list first: one or more exports select CRD, none falls
// through to OpenAPI — unless Auto resolved to CRD before (resolved, the
// Connection's activeSchemaSource), see AutoStaysCRD — and a list error
// (403 included) is returned, not a fallback.
func (d *Discoverer) Discover(ctx context.Context, source kbindv1alpha1.SchemaSource, resolved kbindv1alpha1.ActiveSchemaSource) (*Result, error) {
	if source != kbindv1alpha1.SchemaSourceOpenAPI {
		exports, err := d.ExportedCRDs(ctx)
		if err != nil {
			return nil, err
		}
		if source == kbindv1alpha1.SchemaSourceCRD || len(exports) > 0 || AutoStaysCRD(source, resolved) {
			return &Result{Source: kbindv1alpha1.ActiveSchemaSourceCRD, Exports: exports}, nil
		}
	}
	exports, unreadable, err := d.OpenAPIExports(ctx)
	if err != nil {
		return nil, err
	}
	return &Result{Source: kbindv1alpha1.ActiveSchemaSourceOpenAPI, Exports: exports, Unreadable: unreadable}, nil
}

// AutoStaysCRD reports whether source Auto, resolved to CRD before, stays
// CRD when no CRD is labelled any more: the provider took its last export
// back. Falling through to OpenAPI then would export every non-built-in
// resource of the provider — the unlabelled CRD included, so the label
// removal would never be seen, and every other CRD of the provider with
// it. Only the explicit source OpenAPI switches a Connection to it.
func AutoStaysCRD(source kbindv1alpha1.SchemaSource, resolved kbindv1alpha1.ActiveSchemaSource) bool {
	return (source == "" || source == kbindv1alpha1.SchemaSourceAuto) && resolved == kbindv1alpha1.ActiveSchemaSourceCRD
}

// ExportedCRDs lists provider CRDs labelled core.kbind.io/exported=true
// (selected server-side) with their served versions.
func (d *Discoverer) ExportedCRDs(ctx context.Context) ([]kbindv1alpha1.ExportedAPI, error) {
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := d.Client.List(ctx, &list, client.MatchingLabels{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}); err != nil {
		return nil, &ListError{Verb: "list", Resource: CRDs, Err: err}
	}
	return ExportsFromCRDs(list.Items), nil
}

// ExportsFromCRDs turns CRDs into exports: served versions only, a CRD
// serving none is skipped; sorted by name.
func ExportsFromCRDs(crds []apiextensionsv1.CustomResourceDefinition) []kbindv1alpha1.ExportedAPI {
	var out []kbindv1alpha1.ExportedAPI
	for _, crd := range crds {
		if crd.Labels[kbindv1alpha1.ExportedLabel] != kbindv1alpha1.ExportedLabelValue {
			continue
		}
		var versions []string
		for _, v := range crd.Spec.Versions {
			if v.Served {
				versions = append(versions, v.Name)
			}
		}
		if len(versions) == 0 {
			continue
		}
		scope := kbindv1alpha1.APIScopeNamespaced
		if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
			scope = kbindv1alpha1.APIScopeCluster
		}
		out = append(out, kbindv1alpha1.ExportedAPI{
			Name: crd.Spec.Names.Plural + "." + crd.Spec.Group, Group: crd.Spec.Group,
			Resource: crd.Spec.Names.Plural, Scope: scope, Versions: versions,
		})
	}
	sortExports(out)
	return out
}

// BuiltInGroup reports whether group is a Kubernetes built-in group, which
// the OpenAPI source never exports.
func BuiltInGroup(group string) bool {
	switch group {
	case "", "apps", "batch", "extensions", "policy", "autoscaling":
		return true
	}
	return group == "k8s.io" || strings.HasSuffix(group, ".k8s.io")
}

// OpenAPIExports lists every resource of a non-built-in group that server
// discovery announces and /openapi/v3 describes. A successful read that does
// not describe a resource (no schema for its kind in its group version's
// document) skips it, with a log line. A group that cannot be read (its
// discovery failed, its document is missing from the /openapi/v3 index,
// could not be fetched or is malformed) is returned in unreadable instead: its exports are unknown, not absent. Only
// a failure of the whole discovery or of the /openapi/v3 index is an error.
func (d *Discoverer) OpenAPIExports(ctx context.Context) (exports []kbindv1alpha1.ExportedAPI, unreadable []GroupError, err error) {
	logger := log.FromContext(ctx)
	lists, unreadable, err := d.preferredResources()
	if err != nil {
		return nil, nil, err
	}
	groups, err := d.Discovery.ServerGroups()
	if err != nil {
		return nil, nil, &ListError{Verb: "discover", Resource: "server API groups", Err: err}
	}
	versionsOf := map[string][]string{}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			versionsOf[g.Name] = append(versionsOf[g.Name], v.Version)
		}
	}
	paths, err := d.Discovery.OpenAPIV3().Paths()
	if err != nil {
		return nil, nil, &ListError{Verb: "get", Resource: "/openapi/v3", Err: err}
	}

	docs := &openAPIDocs{paths: paths, docs: map[schema.GroupVersion]*spec3.OpenAPI{}}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil || BuiltInGroup(gv.Group) {
			continue
		}
		gvExports, err := docs.exports(ctx, gv, list.APIResources, versionsOf[gv.Group])
		if err != nil {
			unreadable = append(unreadable, GroupError{Group: gv.Group, Err: err})
		}
		exports = append(exports, gvExports...)
	}
	sortExports(exports)
	sort.Slice(unreadable, func(i, j int) bool {
		if unreadable[i].Group != unreadable[j].Group {
			return unreadable[i].Group < unreadable[j].Group
		}
		return unreadable[i].Err.Error() < unreadable[j].Err.Error()
	})
	if len(unreadable) > 0 {
		logger.Info("Some API groups could not be read; their last known exports are kept", "groups", len(unreadable))
	}
	return exports, unreadable, nil
}

// preferredResources returns the resources server discovery announces at
// each group's preferred version. A group whose discovery failed is
// returned in unreadable; only a failure of the whole discovery is an
// error.
func (d *Discoverer) preferredResources() (lists []*metav1.APIResourceList, unreadable []GroupError, err error) {
	lists, err = d.Discovery.ServerPreferredResources()
	failed := &discovery.ErrGroupDiscoveryFailed{}
	switch {
	case errors.As(err, &failed):
		for gv, gerr := range failed.Groups {
			unreadable = append(unreadable, GroupError{Group: gv.Group, Err: &ListError{Verb: "discover", Resource: gv.String(), Err: gerr}})
		}
	case err != nil:
		return nil, nil, &ListError{Verb: "discover", Resource: "server API groups", Err: err}
	}
	return lists, unreadable, nil
}

// openAPIDocs reads each group version's /openapi/v3 document once, from
// the index paths.
type openAPIDocs struct {
	paths map[string]openapi.GroupVersion
	// docs holds each document read; nil for a group version without one
	// or whose document could not be read.
	docs map[schema.GroupVersion]*spec3.OpenAPI
}

// exports lists the resources (not subresources) of group version gv that
// its document describes, served at versions. A group version whose
// document is missing from the index or cannot be read is an error (its
// exports are unknown), returned on the first read only.
func (o *openAPIDocs) exports(ctx context.Context, gv schema.GroupVersion, resources []metav1.APIResource, versions []string) ([]kbindv1alpha1.ExportedAPI, error) {
	logger := log.FromContext(ctx)
	var out []kbindv1alpha1.ExportedAPI
	for _, res := range resources {
		if strings.Contains(res.Name, "/") {
			continue // subresource
		}
		doc, err := o.doc(gv)
		if err != nil || doc == nil {
			return out, err // unreadable (reported on the first read): nothing of this group version
		}
		if FindSchema(doc, gv.WithKind(res.Kind)) == "" {
			logger.Info("Skipping resource without a usable OpenAPI schema", "resource", res.Name, "groupVersion", gv.String())
			continue
		}
		scope := kbindv1alpha1.APIScopeCluster
		if res.Namespaced {
			scope = kbindv1alpha1.APIScopeNamespaced
		}
		out = append(out, kbindv1alpha1.ExportedAPI{
			Name: res.Name + "." + gv.Group, Group: gv.Group, Resource: res.Name,
			Scope: scope, Versions: versions,
		})
	}
	return out, nil
}

// doc returns gv's document, reading it the first time (and returning the
// read error then only); nil when it could not be read.
func (o *openAPIDocs) doc(gv schema.GroupVersion) (*spec3.OpenAPI, error) {
	if doc, ok := o.docs[gv]; ok {
		return doc, nil
	}
	doc, err := readGVSpec(o.paths, gv)
	o.docs[gv] = doc
	return doc, err
}

// readGVSpec reads one group version's /openapi/v3 document from the index.
// A group version the index does not list is an error like a fetch failure
// or an undecodable document: discovery announces it, so its document is
// missing only for now (an aggregated API restarting, a CRD's document
// being rebuilt) and the group's exports are unknown, not absent.
func readGVSpec(paths map[string]openapi.GroupVersion, gv schema.GroupVersion) (*spec3.OpenAPI, error) {
	path := "apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		path = "api/" + gv.Version
	}
	entry, ok := paths[path]
	if !ok {
		return nil, &ListError{Verb: "get", Resource: "/openapi/v3/" + path,
			Err: errors.New("the /openapi/v3 index does not list the document of a group version server discovery announces")}
	}
	data, err := entry.Schema(runtime.ContentTypeJSON)
	if err != nil {
		return nil, &ListError{Verb: "get", Resource: "/openapi/v3/" + path, Err: err}
	}
	doc := &spec3.OpenAPI{}
	if err := json.Unmarshal(data, doc); err != nil {
		return nil, &ListError{Verb: "decode", Resource: "/openapi/v3/" + path, Err: errors.New("the document is not valid OpenAPI v3 JSON")}
	}
	return doc, nil
}

// FindSchema returns the name of the component schema of gvk in doc, "" if
// none carries it in x-kubernetes-group-version-kind.
func FindSchema(doc *spec3.OpenAPI, gvk schema.GroupVersionKind) string {
	if doc.Components == nil {
		return ""
	}
	names := make([]string, 0, len(doc.Components.Schemas))
	for name := range doc.Components.Schemas {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := doc.Components.Schemas[name]
		if s == nil {
			continue // "name": null in the document
		}
		raw, ok := s.Extensions["x-kubernetes-group-version-kind"]
		if !ok {
			continue
		}
		entries, _ := raw.([]any)
		for _, e := range entries {
			m, _ := e.(map[string]any)
			if m["group"] == gvk.Group && m["version"] == gvk.Version && m["kind"] == gvk.Kind {
				return name
			}
		}
	}
	return ""
}

func sortExports(exports []kbindv1alpha1.ExportedAPI) {
	sort.Slice(exports, func(i, j int) bool { return exports[i].Name < exports[j].Name })
}
