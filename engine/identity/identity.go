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
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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
	verbDiscover       = "discover"
)

// Error is a failed identity read, naming the request that failed so that
// conditions can say which verb and resource were refused.
type Error struct {
	Verb     string // "get", or "discover" for the check whether the cluster is kcp
	Resource string // e.g. "namespaces/kube-system"
	// Server is the API server asked (its scheme, host and port; never
	// credentials), "" when unknown.
	Server string
	Err    error
}

// Error says what failed in kbind's words: a credential the provider
// refused (401) as such, whatever was asked; a failed discovery as the
// provider's API discovery (the kcp check asks discovery for kcp's
// group, which says nothing to whom it fails); a request that got no
// answer with what the network said, without the request URL. The API
// server's own message follows an answer it refused (403 names the user
// and path RBAC refuses).
func (e *Error) Error() string {
	at := ""
	if e.Server != "" {
		at = " at " + e.Server
	}
	if apierrors.IsUnauthorized(e.Err) {
		return fmt.Sprintf("the provider%s refused the credential (401 Unauthorized): it is expired, revoked or not one this cluster accepts", at)
	}
	cause := e.Err
	var ue *url.Error
	unanswered := errors.As(cause, &ue) && ue.Err != nil
	if unanswered {
		cause = ue.Err // the URL is the kbind request's, not the user's words
	}
	switch {
	case e.Verb == verbDiscover:
		return fmt.Sprintf("reading the provider's API discovery%s: %v", at, cause)
	case unanswered:
		return fmt.Sprintf("%s %s%s: %v", e.Verb, e.Resource, at, cause)
	}
	return fmt.Sprintf("%s %s: %v", e.Verb, e.Resource, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Reader reads cluster identities. It remembers whether the cluster is a
// kcp workspace once discovery has answered, so reading the identity again
// through the same Reader (one per provider session) is one request.
type Reader struct {
	discovery discovery.DiscoveryInterface
	metadata  metadata.Interface
	// server is the API server's address for errors (Error.Server).
	server string

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
	return &Reader{discovery: dc, metadata: mc, server: serverOf(cfg.Host)}, nil
}

// serverOf is host, an API server address, as errors show it: its scheme,
// host and port, and path — never a user name or password a URL may carry.
func serverOf(host string) string {
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return strings.TrimSuffix(u.String(), "/")
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
		return false, &Error{Verb: verbDiscover, Resource: LogicalClusters.GroupVersion().String(), Server: r.server, Err: err}
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
		return "", &Error{Verb: "get", Resource: what, Server: r.server, Err: err}
	}
	if obj.UID == "" {
		return "", &Error{Verb: "get", Resource: what, Server: r.server, Err: fmt.Errorf("object has no UID")}
	}
	return string(obj.UID), nil
}
