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

// Package clusterconfig loads the client configuration of the cluster a
// kbind binary runs against — the consumer for the konnector, the provider
// for the backend — from --kubeconfig or, in a Pod, from the mounted
// ServiceAccount token, and tells who the API server says the binary is.
package clusterconfig

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Load returns the configuration of the cluster (named in errors, e.g.
// "consumer"): the kubeconfig file when one is given, else the in-cluster
// configuration. source says which, for the startup log: the file, or the
// API server address and the token file (never the token).
//
// Responses are not compressed: this is the cluster the binary runs in,
// and the API server would gzip every event of a streamed watch list —
// CPU on both sides for bandwidth nobody is short of.
func Load(cluster, kubeconfig string) (cfg *rest.Config, source string, err error) {
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, "", fmt.Errorf("loading the %s cluster configuration from %s: %w", cluster, kubeconfig, err)
		}
		cfg.DisableCompression = true
		return cfg, "kubeconfig " + kubeconfig, nil
	}
	cfg, err = rest.InClusterConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading the %s cluster configuration (set --kubeconfig when running outside a Pod): %w", cluster, err)
	}
	cfg.DisableCompression = true
	return cfg, fmt.Sprintf("in-cluster: API server %s, ServiceAccount token %s", cfg.Host, cfg.BearerTokenFile), nil
}

// User asks the API server who cfg authenticates as (a SelfSubjectReview,
// which every authenticated user may create): the user name, e.g.
// system:serviceaccount:kbind:konnector.
func User(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("creating a client: %w", err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("asking the API server who this is (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo.Username, nil
}
