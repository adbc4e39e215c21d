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

package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// ConnectionSummary is one Connection in kubectl kbind status.
type ConnectionSummary struct {
	Name      string `json:"name"`
	Ready     string `json:"ready"`
	Reason    string `json:"reason,omitempty"`
	Isolation string `json:"isolation"`
	// Heartbeat is the age of the last Lease renewal, e.g. "4s", or why it
	// is unknown.
	Heartbeat string           `json:"heartbeat"`
	Exported  int              `json:"exportedAPIs"`
	Bindings  []BindingSummary `json:"bindings"`
}

// BindingSummary is one binding of a Connection.
type BindingSummary struct {
	Kind      string       `json:"kind"`
	Namespace string       `json:"namespace,omitempty"`
	Name      string       `json:"name"`
	Ready     string       `json:"ready"`
	Reason    string       `json:"reason,omitempty"`
	APIs      []APISummary `json:"apis"`
	// Kept are the provider copies its deletion protection kept instead
	// of deleting, per API (status.keptCopies; docs/bindings.md#deletion-protection).
	Kept []kbindv1alpha1.KeptCopies `json:"keptCopies,omitempty"`
}

// APISummary is one API of a binding with its instance counts.
type APISummary struct {
	// Name is the consumer API ("<plural>.<group>"); Provider the
	// provider's when the API is projected onto another name.
	Name     string `json:"name"`
	Provider string `json:"provider,omitempty"`
	// Routes says which of the API's objects the binding routes through
	// its Connection (docs/bindings.md#one-api-several-providers): "every
	// namespace", "namespaces region=east", "namespace team-a", with
	// ", objects tier=gold" when the entry selects objects.
	Routes    string `json:"routes"`
	Total     int32  `json:"total"`
	Synced    int32  `json:"synced"`
	Pending   int32  `json:"pending"`
	Failed    int32  `json:"failed"`
	Conflicts int32  `json:"conflicts"`
	// Deleting counts the objects whose deletion waits for their provider
	// copy (docs/sync.md#deletion).
	Deleting int32 `json:"deleting"`
	// Imported counts the imported copies of the provider's own objects
	// (docs/import.md); they count as synced too.
	Imported int32 `json:"imported"`
}

// Status summarises every Connection of the consumer c reads, with each
// heartbeat read from the provider with the Connection's own credentials.
func Status(ctx context.Context, c client.Client, timeout time.Duration, now time.Time) ([]ConnectionSummary, error) {
	conns, err := listConnections(ctx, c)
	if err != nil {
		return nil, err
	}
	bindings, err := listBindings(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("listing bindings: %s", consumerReadError(err))
	}
	out := make([]ConnectionSummary, 0, len(conns.Items))
	for _, conn := range conns.Items {
		s := ConnectionSummary{Name: conn.Name, Isolation: isolationString(conn.Spec.IsolationOf()), Exported: len(conn.Status.ExportedAPIs),
			Heartbeat: heartbeatAge(ctx, c, conn, timeout, now), Bindings: []BindingSummary{}}
		s.Ready, s.Reason = readiness(conn.Status.Conditions)
		for _, b := range bindings {
			if b.Spec.ConnectionRef.Name != conn.Name {
				continue
			}
			bs := BindingSummary{Kind: b.Kind, Namespace: b.Meta.Namespace, Name: b.Meta.Name, APIs: []APISummary{}, Kept: b.Status.KeptCopies}
			bs.Ready, bs.Reason = readiness(b.Status.Conditions)
			for _, api := range b.Spec.APIs {
				as := APISummary{Name: api.ConsumerName(), Routes: Routes(b.Kind, b.Meta.Namespace, b.Spec, api)}
				if as.Name != api.Name {
					as.Provider = api.Name
				}
				for _, bound := range b.Status.BoundAPIs {
					if bound.Name != as.Name {
						continue
					}
					as.Conflicts = bound.ConflictCount
					if bound.Instances != nil {
						as.Total, as.Synced, as.Pending, as.Failed = bound.Instances.Total, bound.Instances.Synced, bound.Instances.Pending, bound.Instances.Failed
						as.Deleting, as.Imported = bound.Instances.Deleting, bound.Instances.Imported
					}
				}
				bs.APIs = append(bs.APIs, as)
			}
			s.Bindings = append(s.Bindings, bs)
		}
		out = append(out, s)
	}
	return out, nil
}

// Routes describes which objects of the API entry api a binding of kind
// (in namespace, for a Binding) with spec routes through its Connection:
// a Binding its namespace, a ClusterBinding the namespaces its
// namespaceSelector selects (every one without), narrowed to the objects
// the entry's objectSelector selects.
func Routes(kind, namespace string, spec kbindv1alpha1.BindingSpec, api kbindv1alpha1.APIReference) string {
	out := "namespace " + namespace
	if kind != "Binding" {
		out = "every namespace"
		if spec.NamespaceSelector != nil {
			out = "namespaces " + selectorString(spec.NamespaceSelector)
		}
	}
	if api.ObjectSelector != nil {
		out += ", objects " + selectorString(api.ObjectSelector)
	}
	return out
}

// selectorString is a label selector in kubectl's -l form; "<everything>"
// for an empty one.
func selectorString(sel *metav1.LabelSelector) string {
	if s := metav1.FormatLabelSelector(sel); s != "" && s != "<none>" {
		return s
	}
	return "<everything>"
}

func heartbeatAge(ctx context.Context, c client.Client, conn kbindv1alpha1.Connection, timeout time.Duration, now time.Time) string {
	p := &connectionProbe{}
	cfg, contextNamespace := providerConfig(ctx, c, conn, timeout, p)
	if cfg == nil {
		return "unknown (kubeconfig Secret unusable)"
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "unknown"
	}
	l := readLease(ctx, cs, conn, contextNamespace, now)
	switch {
	case l == nil:
		return "unknown (not connected yet)"
	case l.Err != nil:
		return "unknown (provider: " + shortReason(l.Err) + ")"
	case !l.Found:
		return "none"
	case l.RenewedAgo > l.LeaseDuration:
		return fmt.Sprintf("%s (stale)", l.RenewedAgo.Round(time.Second))
	}
	return l.RenewedAgo.Round(time.Second).String()
}

func shortReason(err error) string {
	if s, ok := err.(interface{ Status() metav1.Status }); ok && s.Status().Reason != "" {
		return string(s.Status().Reason)
	}
	return "unreachable"
}

func readiness(conds []metav1.Condition) (status, reason string) {
	c := meta(conds, kbindv1alpha1.ConditionReady)
	if c == nil {
		return "Unknown", ""
	}
	if c.Status == metav1.ConditionTrue {
		return string(c.Status), ""
	}
	return string(c.Status), c.Reason
}

func isolationString(iso kbindv1alpha1.Isolation) string {
	switch iso.Mode {
	case kbindv1alpha1.IsolationNamespace:
		return "Namespace " + iso.Namespace
	case kbindv1alpha1.IsolationPrefixed:
		return "Prefixed " + iso.Prefix
	}
	return string(iso.Mode)
}

// listConnections lists the Connections; on a cluster without kbind's CRDs
// that looks like a provider, the error says so.
func listConnections(ctx context.Context, c client.Client) (*kbindv1alpha1.ConnectionList, error) {
	conns := &kbindv1alpha1.ConnectionList{}
	if err := c.List(ctx, conns); err != nil {
		if problem := WrongCluster(ctx, c); problem != "" && apimeta.IsNoMatchError(err) {
			return nil, errors.New(problem)
		}
		return nil, fmt.Errorf("listing Connections: %s", consumerReadError(err))
	}
	return conns, nil
}
