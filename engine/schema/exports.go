// Package schema owns what the provider exports and how it becomes consumer
// CRDs: discovery of exported APIs from labelled CRDs or from server
// discovery + /openapi/v3 (spec CONN-4), and (later) CRD derivation and
// synthesis (SCHEMA-*).
package schema

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
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
}

// Discoverer reads a provider's exports.
type Discoverer struct {
	Client    client.Reader                // lists CRDs
	Discovery discovery.DiscoveryInterface // server discovery and /openapi/v3
}

// Discover resolves source and lists the exports (spec CONN-4). Auto tries
// the labelled CRD list first: one or more exports select CRD, none falls
// through to OpenAPI, and a list error (403 included) is returned, not a
// fallback.
func (d *Discoverer) Discover(ctx context.Context, source kbindv1alpha1.SchemaSource) (*Result, error) {
	if source != kbindv1alpha1.SchemaSourceOpenAPI {
		exports, err := d.ExportedCRDs(ctx)
		if err != nil {
			return nil, err
		}
		if source == kbindv1alpha1.SchemaSourceCRD || len(exports) > 0 {
			return &Result{Source: kbindv1alpha1.ActiveSchemaSourceCRD, Exports: exports}, nil
		}
	}
	exports, err := d.OpenAPIExports(ctx)
	if err != nil {
		return nil, err
	}
	return &Result{Source: kbindv1alpha1.ActiveSchemaSourceOpenAPI, Exports: exports}, nil
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
// discovery announces and /openapi/v3 describes. Resources without a usable
// schema, and groups whose document is missing or malformed, are skipped
// and logged; the rest are returned.
func (d *Discoverer) OpenAPIExports(ctx context.Context) ([]kbindv1alpha1.ExportedAPI, error) {
	logger := log.FromContext(ctx)
	lists, err := d.Discovery.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, &ListError{Verb: "discover", Resource: "server API groups", Err: err}
	}
	if err != nil {
		logger.Info("Some API groups could not be discovered; skipping them", "error", err.Error())
	}
	groups, err := d.Discovery.ServerGroups()
	if err != nil {
		return nil, &ListError{Verb: "discover", Resource: "server API groups", Err: err}
	}
	versionsOf := map[string][]string{}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			versionsOf[g.Name] = append(versionsOf[g.Name], v.Version)
		}
	}

	root := openapi3.NewRoot(d.Discovery.OpenAPIV3())
	docs := map[schema.GroupVersion]*spec3.OpenAPI{}
	var out []kbindv1alpha1.ExportedAPI
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil || BuiltInGroup(gv.Group) {
			continue
		}
		for _, res := range list.APIResources {
			if strings.Contains(res.Name, "/") {
				continue // subresource
			}
			doc, ok := docs[gv]
			if !ok {
				doc, err = root.GVSpec(gv)
				if err != nil {
					logger.Info("Skipping API group version: its /openapi/v3 document is missing or malformed", "groupVersion", gv.String(), "error", err.Error())
				}
				docs[gv] = doc
			}
			if doc == nil || FindSchema(doc, gv.WithKind(res.Kind)) == "" {
				logger.Info("Skipping resource without a usable OpenAPI schema", "resource", res.Name, "groupVersion", gv.String())
				continue
			}
			scope := kbindv1alpha1.APIScopeCluster
			if res.Namespaced {
				scope = kbindv1alpha1.APIScopeNamespaced
			}
			out = append(out, kbindv1alpha1.ExportedAPI{
				Name: res.Name + "." + gv.Group, Group: gv.Group, Resource: res.Name,
				Scope: scope, Versions: versionsOf[gv.Group],
			})
		}
	}
	sortExports(out)
	return out, nil
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
