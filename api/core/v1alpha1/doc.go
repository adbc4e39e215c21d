// Package v1alpha1 holds the core.kbind.io/v1alpha1 API: Connection,
// ClusterBinding and Binding, and the constants for every well-known label,
// annotation, finalizer, field manager, condition type and reason kbind uses.
// Other modules refer to these constants; they never spell the strings.
//
// +kubebuilder:object:generate=true
// +groupName=core.kbind.io
package v1alpha1
