package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupName is the API group of every kbind kind.
const GroupName = "core.kbind.io"

var (
	// GroupVersion is the group and version of this package's kinds.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns the GroupResource of a resource of this group.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

// Compile-time checks that the kinds are runtime.Objects.
var (
	_ runtime.Object = &Connection{}
	_ runtime.Object = &ClusterBinding{}
	_ runtime.Object = &Binding{}
)
