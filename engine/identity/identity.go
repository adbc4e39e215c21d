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

// Package identity reads a cluster's identity (CONN-3): the UID of the
// kcp LogicalCluster "cluster" when that API is served, else the UID of the
// kube-system Namespace.
//
// Requirement ids in comments (such as CONN-3) refer to docs/requirements.md.
package identity

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// LogicalClusters is kcp's LogicalCluster resource.
var LogicalClusters = schema.GroupVersionResource{Group: "core.kcp.io", Version: "v1alpha1", Resource: "logicalclusters"}

var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

const (
	logicalClusterName = "cluster"
	kubeSystem         = "kube-system"
)

// Error is a failed identity read, naming the request that failed so that
// conditions can say which verb and resource were refused.
type Error struct {
	Verb     string
	Resource string // e.g. "namespaces/kube-system"
	Err      error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Verb, e.Resource, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Reader reads cluster identities. It remembers whether the cluster is a
// kcp workspace once discovery has answered, so reading the identity again
// through the same Reader (one per provider session) is one request.
type Reader struct {
	discovery discovery.DiscoveryInterface
	metadata  metadata.Interface

	mu  sync.Mutex
	kcp *bool
}

// NewReader returns a Reader for the cluster cfg points at.
func NewReader(cfg *rest.Config) (*Reader, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating HTTP client: %w", err)
	}
	return NewReaderForClient(cfg, hc)
}

// NewReaderForClient returns a Reader for the cluster cfg points at whose
// requests go through hc.
func NewReaderForClient(cfg *rest.Config, hc *http.Client) (*Reader, error) {
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	mc, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating metadata client: %w", err)
	}
	return &Reader{discovery: dc, metadata: mc}, nil
}

// ClusterUID returns the cluster's identity.
func (r *Reader) ClusterUID(ctx context.Context) (string, error) {
	kcp, err := r.isKCP()
	if err != nil {
		return "", err
	}
	if kcp {
		return r.uid(ctx, LogicalClusters, logicalClusterName, "logicalclusters.core.kcp.io/"+logicalClusterName)
	}
	return r.uid(ctx, namespaces, kubeSystem, "namespaces/"+kubeSystem)
}

// isKCP is servesLogicalClusters, asked once per Reader.
func (r *Reader) isKCP() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kcp != nil {
		return *r.kcp, nil
	}
	kcp, err := r.servesLogicalClusters()
	if err != nil {
		return false, err
	}
	r.kcp = &kcp
	return kcp, nil
}

func (r *Reader) servesLogicalClusters() (bool, error) {
	list, err := r.discovery.ServerResourcesForGroupVersion(LogicalClusters.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, &Error{Verb: "discover", Resource: LogicalClusters.GroupVersion().String(), Err: err}
	}
	for _, res := range list.APIResources {
		if res.Name == LogicalClusters.Resource {
			return true, nil
		}
	}
	return false, nil
}

func (r *Reader) uid(ctx context.Context, gvr schema.GroupVersionResource, name, what string) (string, error) {
	obj, err := r.metadata.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", &Error{Verb: "get", Resource: what, Err: err}
	}
	if obj.UID == "" {
		return "", &Error{Verb: "get", Resource: what, Err: fmt.Errorf("object has no UID")}
	}
	return string(obj.UID), nil
}
