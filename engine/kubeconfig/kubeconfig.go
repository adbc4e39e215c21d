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

// Package kubeconfig turns the bytes of a provider kubeconfig Secret into a
// client configuration, refusing anything that would make the konnector read
// local files or run code (CONN-2), and finding the insecure features
// (skipped TLS verification, proxies, plain HTTP) a Connection must opt in
// to. Errors name the offending field or
// the parse position, never the data: a kubeconfig is a credential.
//
// Requirement ids in comments (such as CONN-2) refer to docs/requirements.md.
package kubeconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// Parsed is a validated provider kubeconfig.
type Parsed struct {
	// Config is the client configuration of the selected context, without
	// QPS, burst or timeout (the session sets those).
	Config *rest.Config
	// Namespace is the context's namespace, "" when unset.
	Namespace string
	// Context is the name of the selected context.
	Context string
	// Hash identifies the kubeconfig data; a change rebuilds the session.
	Hash string
	// Insecure lists the insecure features the kubeconfig uses, in any of
	// its clusters (a later current-context change must not turn one on).
	Insecure []Finding
}

// Finding is one use of an insecure kubeconfig feature.
type Finding struct {
	Feature kbindv1alpha1.InsecureKubeconfigFeature
	// Where names the field, e.g. "clusters[provider].insecure-skip-tls-verify".
	Where string
}

// insecureFindings lists the insecure features every cluster of cfg uses,
// sorted by cluster.
func insecureFindings(cfg *clientcmdapi.Config) []Finding {
	var out []Finding
	for _, name := range sortedKeys(cfg.Clusters) {
		c := cfg.Clusters[name]
		if c.InsecureSkipTLSVerify {
			out = append(out, Finding{kbindv1alpha1.InsecureSkipTLSVerify, fmt.Sprintf("clusters[%s].insecure-skip-tls-verify", name)})
		}
		if c.ProxyURL != "" {
			out = append(out, Finding{kbindv1alpha1.InsecureProxyURL, fmt.Sprintf("clusters[%s].proxy-url", name)})
		}
		if u, err := url.Parse(c.Server); err == nil && strings.EqualFold(u.Scheme, "http") {
			out = append(out, Finding{kbindv1alpha1.InsecurePlainHTTP, fmt.Sprintf("clusters[%s].server (plain http://)", name)})
		}
	}
	return out
}

// Refused returns the findings whose feature allowed does not list.
func Refused(found []Finding, allowed []kbindv1alpha1.InsecureKubeconfigFeature) []Finding {
	var out []Finding
	for _, f := range found {
		if !slices.Contains(allowed, f.Feature) {
			out = append(out, f)
		}
	}
	return out
}

// DescribeRefused is the condition message for refused findings: what the
// kubeconfig does and the exact opt-in that would accept it.
func DescribeRefused(refused []Finding) string {
	where := make([]string, 0, len(refused))
	var features []string
	for _, f := range refused {
		where = append(where, f.Where)
		if !slices.Contains(features, string(f.Feature)) {
			features = append(features, string(f.Feature))
		}
	}
	return fmt.Sprintf("the kubeconfig is insecure (%s); kbind refuses it unless the Connection's spec.allowInsecure lists %s",
		strings.Join(where, ", "), strings.Join(features, ", "))
}

// Features lists the distinct features of findings, in order.
func Features(found []Finding) []string {
	var out []string
	for _, f := range found {
		if !slices.Contains(out, string(f.Feature)) {
			out = append(out, string(f.Feature))
		}
	}
	return out
}

// Hash returns the identity of kubeconfig bytes: "sha256:" and 16 hex
// characters. It reveals nothing usable about the data.
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])[:16]
}

var lineRE = regexp.MustCompile(`line \d+(: column \d+)?`)

// Parse validates data and returns the client configuration of its current
// context, or of its only context when no current context is set.
func Parse(data []byte) (*Parsed, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, errors.New("the kubeconfig is empty")
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		// Decoder errors can quote the input; keep only the position.
		where := lineRE.FindString(err.Error())
		if where != "" {
			where = " (at " + where + ")"
		}
		return nil, fmt.Errorf("the kubeconfig is not valid YAML or JSON kubeconfig%s", where)
	}
	if err := refuseUnsafe(cfg); err != nil {
		return nil, err
	}
	name, err := selectContext(cfg)
	if err != nil {
		return nil, err
	}
	kctx := cfg.Contexts[name]
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("context %q refers to cluster %q, which the kubeconfig does not define", name, kctx.Cluster)
	}
	if cluster.Server == "" {
		return nil, fmt.Errorf("cluster %q has no server", kctx.Cluster)
	}
	if kctx.AuthInfo != "" {
		if _, ok := cfg.AuthInfos[kctx.AuthInfo]; !ok {
			return nil, fmt.Errorf("context %q refers to user %q, which the kubeconfig does not define", name, kctx.AuthInfo)
		}
	}
	cfg.CurrentContext = name
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("context %q is not usable: %w", name, scrub(err))
	}
	// Certificates are parsed only when a transport is built; do it now so a
	// broken CA or client certificate is a kubeconfig problem, not a
	// connection failure.
	if _, err := rest.TLSConfigFor(rc); err != nil {
		return nil, fmt.Errorf("context %q: the certificate-authority-data, client-certificate-data or client-key-data is not valid PEM", name)
	}
	return &Parsed{Config: rc, Namespace: kctx.Namespace, Context: name, Hash: Hash(data), Insecure: insecureFindings(cfg)}, nil
}

// selectContext returns the context to use: current-context when set, else
// the only context.
func selectContext(cfg *clientcmdapi.Config) (string, error) {
	if cfg.CurrentContext != "" {
		if _, ok := cfg.Contexts[cfg.CurrentContext]; !ok {
			return "", fmt.Errorf("current-context %q is not defined in the kubeconfig", cfg.CurrentContext)
		}
		return cfg.CurrentContext, nil
	}
	switch len(cfg.Contexts) {
	case 0:
		return "", errors.New("the kubeconfig defines no context")
	case 1:
		for name := range cfg.Contexts {
			return name, nil
		}
	}
	names := make([]string, 0, len(cfg.Contexts))
	for name := range cfg.Contexts {
		names = append(names, name)
	}
	sort.Strings(names)
	return "", fmt.Errorf("the kubeconfig defines %d contexts (%s) and no current-context; set current-context", len(names), strings.Join(names, ", "))
}

// refuseUnsafe rejects file references and code execution anywhere in the
// kubeconfig, not only in the selected context: a Secret is not a place for
// either, and a later current-context change must not turn it on.
func refuseUnsafe(cfg *clientcmdapi.Config) error {
	var problems []string
	for _, name := range sortedKeys(cfg.Clusters) {
		c := cfg.Clusters[name]
		if c.CertificateAuthority != "" {
			problems = append(problems, fmt.Sprintf("clusters[%s].certificate-authority references a local file; use certificate-authority-data", name))
		}
	}
	for _, name := range sortedKeys(cfg.AuthInfos) {
		a := cfg.AuthInfos[name]
		if a.ClientCertificate != "" {
			problems = append(problems, fmt.Sprintf("users[%s].client-certificate references a local file; use client-certificate-data", name))
		}
		if a.ClientKey != "" {
			problems = append(problems, fmt.Sprintf("users[%s].client-key references a local file; use client-key-data", name))
		}
		if a.TokenFile != "" {
			problems = append(problems, fmt.Sprintf("users[%s].tokenFile references a local file; use token", name))
		}
		if a.Exec != nil {
			problems = append(problems, fmt.Sprintf("users[%s].exec runs a program; kbind never runs programs from a kubeconfig Secret, use a token or client certificate", name))
		}
		if a.AuthProvider != nil {
			problems = append(problems, fmt.Sprintf("users[%s].auth-provider runs a plugin; use a token or client certificate", name))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the kubeconfig is not usable by kbind: %s", strings.Join(problems, "; "))
	}
	return nil
}

// scrub keeps an error's message only when it cannot carry input bytes:
// client-go's messages about PEM data can quote it.
func scrub(err error) error {
	msg := err.Error()
	for _, risky := range []string{"PEM", "certificate", "key", "token", "password"} {
		if strings.Contains(msg, risky) {
			return errors.New("credentials in the kubeconfig are not usable")
		}
	}
	return errors.New(lineRE.ReplaceAllString(msg, ""))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
