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

package kubeconfig

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// secretMarker stands for credential bytes: it must never reach an error.
const secretMarker = "s3cr3t-T0KEN-value"

const base = `apiVersion: v1
kind: Config
clusters:
- name: p
  cluster: {server: "https://provider.example:6443"%s}
users:
- name: u
  user: {%s}
contexts:
- name: ctx
  context: {cluster: p, user: u%s}
%s`

func kc(clusterExtra, user, ctxExtra, tail string) []byte {
	return []byte(strings.ReplaceAll(
		fmt.Sprintf(base, clusterExtra, user, ctxExtra, tail), "TOKEN", secretMarker))
}

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		data    []byte
		wantErr string // "" means valid
		wantNS  string
	}{
		{"token, current context", kc("", "token: TOKEN", ", namespace: team", "current-context: ctx\n"), "", "team"},
		{"single context without current-context", kc("", "token: TOKEN", "", ""), "", ""},
		{"empty", []byte("  \n"), "the kubeconfig is empty", ""},
		{"garbage", []byte("\x00\x01" + secretMarker + "{{{"), "not valid YAML or JSON kubeconfig", ""},
		{"yaml but not a kubeconfig", []byte("- " + secretMarker + "\n- b\n"), "not valid YAML or JSON kubeconfig", ""},
		{"no contexts", []byte("apiVersion: v1\nkind: Config\nclusters: []\n"), "defines no context", ""},
		{"two contexts, no current", []byte(strings.ReplaceAll(string(kc("", "token: TOKEN", "", "")), "contexts:\n", "contexts:\n- name: other\n  context: {cluster: p, user: u}\n")),
			"defines 2 contexts (ctx, other) and no current-context", ""},
		{"unknown current-context", kc("", "token: TOKEN", "", "current-context: nope\n"), `current-context "nope" is not defined`, ""},
		{"unknown cluster", []byte(strings.Replace(string(kc("", "token: TOKEN", "", "")), "cluster: p,", "cluster: q,", 1)), `refers to cluster "q"`, ""},
		{"no server", []byte(strings.Replace(string(kc("", "token: TOKEN", "", "")), `server: "https://provider.example:6443"`, `server: ""`, 1)), `cluster "p" has no server`, ""},
		{"unknown user", []byte(strings.Replace(string(kc("", "token: TOKEN", "", "")), "user: u}", "user: v}", 1)), `refers to user "v"`, ""},
		{"CA file", kc(", certificate-authority: /etc/ca.crt", "token: TOKEN", "", ""), "clusters[p].certificate-authority references a local file", ""},
		{"client cert file", kc("", "client-certificate: /c.crt, client-key: /c.key", "", ""), "users[u].client-certificate references a local file; use client-certificate-data; users[u].client-key references a local file", ""},
		{"token file", kc("", "tokenFile: /var/run/token", "", ""), "users[u].tokenFile references a local file", ""},
		{"exec plugin", kc("", "exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/steal, args: [TOKEN]}", "", ""), "users[u].exec runs a program", ""},
		{"auth provider", kc("", "auth-provider: {name: gcp, config: {access-token: TOKEN}}", "", ""), "users[u].auth-provider runs a plugin", ""},
		{"unsafe user outside the current context", []byte(strings.Replace(string(kc("", "token: TOKEN", "", "current-context: ctx\n")), "users:\n", "users:\n- name: evil\n  user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: sh}}\n", 1)),
			"users[evil].exec runs a program", ""},
		{"broken CA data", kc(", certificate-authority-data: "+b64("-----BEGIN CERTIFICATE-----\n"+secretMarker+"\n-----END CERTIFICATE-----\n"), "token: TOKEN", "", ""), "not valid PEM", ""},
		{"broken client key data", kc("", "client-certificate-data: "+b64(secretMarker)+", client-key-data: "+b64(secretMarker), "", ""), "not valid PEM", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.data)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if p.Namespace != tc.wantNS || p.Context != "ctx" || p.Config.Host != "https://provider.example:6443" {
					t.Errorf("parsed %+v", p)
				}
				if !strings.HasPrefix(p.Hash, "sha256:") || len(p.Hash) != len("sha256:")+16 {
					t.Errorf("hash %q", p.Hash)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), secretMarker) {
				t.Fatalf("error leaks kubeconfig data: %v", err)
			}
		})
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestHashDiffers(t *testing.T) {
	first, again := Hash([]byte("a")), Hash([]byte("a"))
	if first == Hash([]byte("b")) || first != again {
		t.Error("Hash must identify the data")
	}
}

// FuzzParse: no input panics, and no error quotes the marker planted in
// the input.
func FuzzParse(f *testing.F) {
	f.Add(kc("", "token: TOKEN", "", "current-context: ctx\n"))
	f.Add([]byte("\x00garbage" + secretMarker))
	f.Add(kc(", certificate-authority-data: "+b64(secretMarker), "token: TOKEN", "", ""))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Parse(data)
		if err != nil && strings.Contains(err.Error(), secretMarker) {
			t.Fatalf("error leaks input: %v", err)
		}
	})
}

func TestInsecureFeatures(t *testing.T) {
	all := []kbindv1alpha1.InsecureKubeconfigFeature{kbindv1alpha1.InsecureSkipTLSVerify, kbindv1alpha1.InsecureProxyURL, kbindv1alpha1.InsecurePlainHTTP}
	cases := []struct {
		name    string
		data    []byte
		allowed []kbindv1alpha1.InsecureKubeconfigFeature
		refused string // "" means accepted
	}{
		{"secure", kc("", "token: TOKEN", "", ""), nil, ""},
		{"skip TLS verification", kc(", insecure-skip-tls-verify: true", "token: TOKEN", "", ""), nil,
			"the kubeconfig is insecure (clusters[p].insecure-skip-tls-verify); kbind refuses it unless the Connection's spec.allowInsecure lists SkipTLSVerify"},
		{"skip TLS verification, allowed", kc(", insecure-skip-tls-verify: true", "token: TOKEN", "", ""), []kbindv1alpha1.InsecureKubeconfigFeature{kbindv1alpha1.InsecureSkipTLSVerify}, ""},
		{"proxy", kc(", proxy-url: \"http://proxy.example:3128\"", "token: TOKEN", "", ""), []kbindv1alpha1.InsecureKubeconfigFeature{kbindv1alpha1.InsecureSkipTLSVerify},
			"(clusters[p].proxy-url); kbind refuses it unless the Connection's spec.allowInsecure lists ProxyURL"},
		{"plain http", []byte(strings.Replace(string(kc("", "token: TOKEN", "", "")), "https://", "http://", 1)), nil, "clusters[p].server (plain http://)"},
		{"every feature, each allowed", []byte(strings.Replace(string(kc(", insecure-skip-tls-verify: true, proxy-url: \"http://x:1\"", "token: TOKEN", "", "")), "https://", "http://", 1)), all, ""},
		{"an insecure cluster outside the current context", []byte(strings.Replace(string(kc("", "token: TOKEN", "", "current-context: ctx\n")), "clusters:\n", "clusters:\n- name: other\n  cluster: {server: \"http://other.example\"}\n", 1)), nil,
			"clusters[other].server (plain http://)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			refused := Refused(p.Insecure, tc.allowed)
			if tc.refused == "" {
				if len(refused) > 0 {
					t.Fatalf("refused %v", refused)
				}
				return
			}
			if len(refused) == 0 || !strings.Contains(DescribeRefused(refused), tc.refused) {
				t.Fatalf("refused %v (%q), want %q", refused, DescribeRefused(refused), tc.refused)
			}
		})
	}
}
