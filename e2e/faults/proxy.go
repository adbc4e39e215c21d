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

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/client-go/tools/clientcmd"
)

// Proxy is an in-process toxiproxy TCP proxy in front of an API server.
// TLS passes through unchanged: the address it listens on is 127.0.0.1 at
// another port, which the envtest serving certificate (an IP SAN for
// 127.0.0.1) still matches.
type Proxy struct {
	p *toxiproxy.Proxy
}

// NewProxy starts a proxy to upstream (host:port) on a free loopback port.
func NewProxy(name, upstream string) (*Proxy, error) {
	// The toxics log through zerolog's global logger (a trace line per
	// interrupted bandwidth toxic); the suite's output is the test's.
	zerolog.SetGlobalLevel(zerolog.WarnLevel)
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(server, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s proxy: %w", name, err)
	}
	return &Proxy{p: p}, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.p.Listen }

// Toxic is one toxiproxy toxic: Type is latency, bandwidth, timeout,
// reset_peer, ...; Stream upstream (to the API server) or downstream.
type Toxic struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream"`
	Toxicity   float32        `json:"toxicity"`
	Attributes map[string]any `json:"attributes"`
}

// Add adds toxics; they apply to open connections too.
func (p *Proxy) Add(toxics ...Toxic) error {
	for _, t := range toxics {
		if t.Toxicity == 0 {
			t.Toxicity = 1
		}
		data, err := json.Marshal(t)
		if err != nil {
			return err
		}
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(string(data))); err != nil {
			return fmt.Errorf("adding toxic %s: %w", t.Name, err)
		}
	}
	return nil
}

// Heal removes every toxic.
func (p *Proxy) Heal() { p.p.Toxics.ResetToxics(context.Background()) }

// Disable closes every connection and refuses new ones; Enable listens on
// the same address again.
func (p *Proxy) Disable() { p.p.Stop() }

// Enable undoes Disable.
func (p *Proxy) Enable() error { return p.p.Start() }

// Close stops the proxy.
func (p *Proxy) Close() { p.p.Stop() }

// Both is a toxic in each direction, named name-up and name-down.
func Both(name, typ string, attrs map[string]any) []Toxic {
	return []Toxic{
		{Name: name + "-up", Type: typ, Stream: "upstream", Attributes: attrs},
		{Name: name + "-down", Type: typ, Stream: "downstream", Attributes: attrs},
	}
}

// Through rewrites a kubeconfig so that every cluster's server is reached
// through addr (host:port), keeping its scheme and CA.
func Through(kubeconfig []byte, addr string) ([]byte, error) {
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	for name, c := range kc.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			return nil, fmt.Errorf("server of cluster %s: %w", name, err)
		}
		u.Host = addr
		c.Server = u.String()
	}
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return out, nil
}
