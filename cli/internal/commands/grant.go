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

package commands

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
	"github.com/kbind/kbind/cli/internal/bundle"
)

// fieldManager owns what grant applies.
const fieldManager = "kubectl-kbind"

// grantOptions are grant's flags.
type grantOptions struct {
	apis      []string
	isolation string
	// namespace is -n: the consumer's own provider namespace (the
	// isolation namespace, or the None Lease namespace); "" when not given.
	namespace               string
	serviceAccountNamespace string
	prefix                  string
	related                 []string
	providerEvents          bool
	duration                time.Duration
	confineTimeout          time.Duration
	connection              string
	secretNamespace         string
	server                  string
	schemaSource            string
}

func newGrant(e *env) *cobra.Command {
	o := grantOptions{}
	cmd := &cobra.Command{
		Use:   "grant NAME --apis <plural>.<group>[,...]",
		Short: "Onboard a consumer: ServiceAccount, least-privilege RBAC, a token, and the consumer bundle",
		Long: `Grant consumer NAME access to exported APIs on this (provider) cluster: the ServiceAccount
kbind-consumer-NAME (in --service-account-namespace, where the consumer may create nothing), the
consumer's own provider namespace (its heartbeat Lease lives there), exactly the permissions its
Connection needs for the isolation mode (docs/isolation.md#permissions) and, for Prefixed and None, the
admission policy that keeps its writes out of every other tenant's namespaces (for Namespace with
--related secrets, the one that refuses it service-account token Secrets); the right to mint tokens
for its own ServiceAccount, which an admission policy bounds to the API server's audiences and to
--duration; then a token bound to the ServiceAccount (TokenRequest) valid for --duration, printed only
once the policies are seen in force. The konnector renews its token itself before it expires
(docs/connections.md#credentials): access lasts until revoke.

With --isolation Namespace (the default) everything of the consumer lives in one provider namespace:
-n names it (default kbind-NAME). With None, -n names its Lease namespace (default kbind-NAME). With
Prefixed, the prefix (default NAME) is its namespace and the first segment of all the others. It prints
the consumer bundle — the kubeconfig Secret, the Connection and a ClusterBinding — for kubectl apply -f
on the consumer.

grant refuses what would let this consumer meet another or the provider's own objects: a prefix that
equals or extends another consumer's or a reserved one (kube, kbind, default, openshift, system), a
namespace that exists and is not this consumer's, and any change of isolation for a consumer granted
before (revoke it first).

Run it again with the same NAME and isolation for a new token (needed only when the konnector could not
renew its own in time, e.g. it was stopped for longer than --duration): apply the new bundle and the
konnector picks it up without a restart. Earlier tokens stay valid until they expire (revoke invalidates
them all). Only exported APIs can be granted (kubectl kbind export).`,
		Example: `  # one namespace on the provider (kbind-team-a) for all of team-a's objects
  kubectl kbind grant team-a --apis widgets.example.org > team-a.yaml
  kubectl --context consumer apply -f team-a.yaml

  # consumer namespaces kept as <prefix>-<namespace>, cluster-scoped APIs allowed
  kubectl kbind grant team-b --apis widgets.example.org,clusterwidgets.example.org --isolation Prefixed --prefix b

  # related Secrets copied too, each token valid for a week
  kubectl kbind grant team-c --apis widgets.example.org --related secrets --duration 168h`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.grant(cmd.Context(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.apis, "apis", nil, "exported APIs to grant, as <plural>.<group> (required)")
	f.StringVar(&o.isolation, "isolation", string(kbindv1alpha1.IsolationNamespace), "isolation mode: Namespace, Prefixed or None (docs/isolation.md)")
	f.StringVar(&o.prefix, "prefix", "", "with --isolation Prefixed: the prefix (default NAME)")
	f.StringVar(&o.serviceAccountNamespace, "service-account-namespace", access.DefaultServiceAccountNamespace, "the namespace of the consumer's ServiceAccount; never one the consumer may write in")
	f.StringSliceVar(&o.related, "related", nil, "related kinds the consumer copies: secrets, configmaps (Namespace isolation only)")
	f.BoolVar(&o.providerEvents, "provider-events", false, "with --isolation Prefixed or None: let the consumer read every Event of this cluster, of every namespace and tenant, "+
		"to forward the provider's Events to its objects (RBAC cannot confine the read; Namespace isolation reads its own namespace's Events always)")
	f.DurationVar(&o.duration, "duration", 720*time.Hour, "lifetime of each token (at least 10m): the printed one, and each the konnector mints itself to renew it; access lasts until revoke")
	f.DurationVar(&o.confineTimeout, "confine-timeout", time.Minute, "how long to wait for the admission policies to be in force before giving up without printing the token")
	f.StringVar(&o.connection, "connection", "provider", "name of the consumer's Connection (and of its Secret <connection>-kubeconfig and ClusterBinding)")
	f.StringVar(&o.secretNamespace, "secret-namespace", "kbind", "consumer namespace of the kubeconfig Secret (one of the konnector's --secret-namespaces)")
	f.StringVar(&o.server, "server", "", "the provider address the consumer reaches (default: this kubeconfig's server)")
	f.StringVar(&o.schemaSource, "schema-source", string(kbindv1alpha1.SchemaSourceAuto), "the Connection's schema source: Auto, CRD or OpenAPI (OpenAPI needs no CRD reads)")
	_ = cmd.MarkFlagRequired("apis")
	return cmd
}

// request turns the flags into an access request, reading each API's CRD:
// it must exist and be exported.
func (o grantOptions) request(ctx context.Context, c client.Client, name string) (access.Request, error) {
	req := access.Request{Consumer: name, ServiceAccountNamespace: o.serviceAccountNamespace, Related: o.related,
		Isolation:         kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationMode(o.isolation)},
		CRDReads:          o.schemaSource != string(kbindv1alpha1.SchemaSourceOpenAPI),
		ClusterWideEvents: o.providerEvents}
	switch req.Isolation.Mode {
	case kbindv1alpha1.IsolationNamespace:
		req.Isolation.Namespace = cmp.Or(o.namespace, access.DefaultNamespace(name))
		if o.providerEvents {
			return req, usageError{fmt.Errorf("--provider-events goes with --isolation Prefixed or None: Namespace isolation reads the Events of its own namespace always")}
		}
	case kbindv1alpha1.IsolationPrefixed:
		req.Isolation.Prefix = cmp.Or(o.prefix, name)
		if o.namespace != "" {
			return req, usageError{fmt.Errorf("-n goes with --isolation Namespace or None: with Prefixed the prefix is the consumer's namespace (--prefix)")}
		}
	default:
		req.LeaseNamespace = cmp.Or(o.namespace, access.DefaultNamespace(name))
	}
	if o.prefix != "" && req.Isolation.Mode != kbindv1alpha1.IsolationPrefixed {
		return req, usageError{fmt.Errorf("--prefix goes with --isolation Prefixed")}
	}
	for _, api := range o.apis {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: api}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				return req, fmt.Errorf("cannot grant %s: there is no such CRD on this cluster (APIs are named <plural>.<group>, e.g. widgets.example.org)", api)
			}
			return req, fmt.Errorf("reading CRD %s: %w", api, err)
		}
		if crd.Labels[kbindv1alpha1.ExportedLabel] != kbindv1alpha1.ExportedLabelValue {
			return req, fmt.Errorf("cannot grant %s: it is not exported; export it first with: kubectl kbind export %s", api, api)
		}
		req.APIs = append(req.APIs, access.API{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural, Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped})
	}
	return req, req.Validate()
}

func (e *env) grant(ctx context.Context, name string, o grantOptions) error {
	if o.duration < access.MinTokenLifetime {
		return usageError{fmt.Errorf("--duration %s: a token lives at least %s (the API server's minimum)", o.duration, access.MinTokenLifetime)}
	}
	c, cfg, err := e.client()
	if err != nil {
		return err
	}
	o.namespace = *e.flags.Namespace
	req, err := o.request(ctx, c, name)
	if err != nil {
		return err
	}
	provider, err := readProvider(ctx, c)
	if err != nil {
		return err
	}
	if err := req.Check(provider); err != nil {
		return fmt.Errorf("refusing to grant %s:\n%w", name, err)
	}
	renewal := slices.ContainsFunc(provider.Grants, func(g access.Grant) bool { return g.Consumer == name })
	if err := ensureNamespace(ctx, c, req.ServiceAccountNamespace); err != nil {
		return err
	}
	// The token first: its aud claim names the API server's audiences, the
	// only ones the token policy lets the consumer mint for. The
	// ServiceAccount alone grants nothing, and the token is printed only
	// once every policy is seen in force.
	token, err := mintToken(ctx, c, cfg, &req, o.duration)
	if err != nil {
		return err
	}
	objs := req.Objects()
	for _, obj := range objs {
		if err := apply(ctx, c, obj); err != nil {
			return err
		}
	}
	if err := prune(ctx, c, req, objs, e.err, o.confineTimeout); err != nil {
		return err
	}
	if err := confined(ctx, cfg, token, req, o.confineTimeout); err != nil {
		return fmt.Errorf("%w\nthe token was not printed; `kubectl kbind revoke %s` removes what this grant created", err, name)
	}
	server := o.server
	if server == "" {
		server = cfg.Host
	}
	ca, err := caData(cfg)
	if err != nil {
		return err
	}
	b := bundle.Bundle{Consumer: name, Connection: o.connection, SecretNamespace: o.secretNamespace, Isolation: req.Isolation, Namespace: req.Namespace(),
		APIs: o.apis, Server: server, CAData: ca, Token: token, IgnoreProviderEvents: req.Isolation.Mode != kbindv1alpha1.IsolationNamespace && !req.ClusterWideEvents}
	data, err := b.YAML()
	if err != nil {
		return err
	}
	if _, err := e.out.Write(data); err != nil {
		return err
	}
	fmt.Fprintf(e.err, "granted %s (%s isolation, namespace %s) the APIs %s as %s until kubectl kbind revoke %s; each token lives %s (the konnector renews it before it expires).\n",
		name, req.Isolation.Mode, req.Namespace(), strings.Join(o.apis, ", "), req.Username(), name, o.duration)
	if renewal {
		fmt.Fprintf(e.err, "%s was granted before: its earlier tokens stay valid until they expire (kubectl kbind revoke %s invalidates them all).\n", name, name)
	}
	if b.IgnoreProviderEvents {
		fmt.Fprintf(e.err, "the provider's Events are not forwarded (the bundle's ClusterBinding says providerEvents: Ignore): with %s isolation reading them means reading every Event of this cluster; --provider-events grants that.\n", req.Isolation.Mode)
	}
	if loopback(server) {
		fmt.Fprintf(e.err, "warning: the provider address in the bundle, %s, is a loopback address: a konnector running as a Pod on the consumer reaches its own Pod there, not this provider. "+
			"Grant again with --server set to an address the consumer's Pods reach (a konnector running as a process on this machine reaches it).\n", server)
	}
	fmt.Fprintln(e.err, "the bundle's Connection and ClusterBinding are protected from deletion (spec.deletionProtection), its Secret too (label "+kbindv1alpha1.DeletionProtectionLabel+"): kubectl kbind unbind deletes a binding, saying what goes")
	fmt.Fprintln(e.err, "apply the bundle above on the consumer: kubectl apply -f <file>")
	return nil
}

// loopback reports whether server (a URL, or host[:port]) names a
// loopback address: localhost (and *.localhost), 127.0.0.0/8 or ::1.
func loopback(server string) bool {
	host := server
	if u, err := url.Parse(server); err == nil && u.Host != "" {
		host = u.Hostname()
	} else if h, _, err := net.SplitHostPort(server); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readProvider reads every grant (by its ServiceAccount) and every
// namespace of the provider, for Check.
func readProvider(ctx context.Context, c client.Client) (access.Provider, error) {
	var p access.Provider
	sas := &metav1.PartialObjectMetadataList{}
	sas.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccountList"))
	if err := c.List(ctx, sas, client.HasLabels{access.ConsumerLabel}); err != nil {
		return p, fmt.Errorf("listing the ServiceAccounts of earlier grants: %w", err)
	}
	for _, sa := range sas.Items {
		p.Grants = append(p.Grants, access.GrantOf(sa.Namespace, sa.Labels, sa.Annotations))
	}
	nss := &metav1.PartialObjectMetadataList{}
	nss.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := c.List(ctx, nss); err != nil {
		return p, fmt.Errorf("listing namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		p.Namespaces = append(p.Namespaces, access.Namespace{Name: ns.Name, Labels: ns.Labels})
	}
	return p, nil
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// prune deletes what an earlier grant of the consumer created and this one
// does not (objects labelled for it that are not among objs): a re-grant
// leaves no right of the earlier one in place.
//
// The one admission policy a re-grant can drop (isolation never changes,
// and token renewal is always granted) is the Secrets policy of a
// Namespace grant no longer granting related Secrets: it goes only once
// the API server denies the consumer writing Secrets in its namespace
// (the updated Role takes effect when the authorizer has seen it), so that
// the earlier tokens, valid until they expire, never write them
// unconfined.
func prune(ctx context.Context, c client.Client, req access.Request, objs []client.Object, log io.Writer, timeout time.Duration) error {
	want := map[string]bool{}
	for _, o := range objs {
		want[access.Key(o)] = true
	}
	secretWrites := revokedAccess{users: []string{req.Username()}}
	for _, verb := range []string{"create", "update"} {
		secretWrites.writes = append(secretWrites.writes, authorizationv1.ResourceAttributes{Namespace: req.Namespace(), Verb: verb, Resource: "secrets"})
	}
	return forEachGranted(ctx, c, req.Consumer, func(kind string, obj *unstructured.Unstructured) error {
		if want[kind+" "+client.ObjectKeyFromObject(obj).String()] {
			return nil
		}
		if strings.HasPrefix(kind, "ValidatingAdmissionPolicy") && obj.GetName() == access.Name(req.Consumer) && !secretWrites.denied {
			if err := secretWrites.waitDenied(ctx, c, timeout); err != nil {
				return fmt.Errorf("%w; the earlier grant's %s %s is kept: run grant again", err, kind, obj.GetName())
			}
		}
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s, which the earlier grant made: %w", kind, client.ObjectKeyFromObject(obj), err)
		}
		fmt.Fprintf(log, "deleted %s %s, which the earlier grant made\n", kind, client.ObjectKeyFromObject(obj))
		return nil
	})
}

// forEachGranted calls fn with every object of access.Kinds labelled for
// the consumer, in the order of access.Kinds.
func forEachGranted(ctx context.Context, c client.Client, name string, fn func(kind string, obj *unstructured.Unstructured) error) error {
	for _, kind := range access.Kinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(kind.APIVersion)
		list.SetKind(kind.Kind + "List")
		if err := c.List(ctx, list, client.MatchingLabels{access.ConsumerLabel: name}); err != nil {
			return fmt.Errorf("listing %ss of consumer %s: %w", kind.Kind, name, err)
		}
		for i := range list.Items {
			if err := fn(kind.Kind, &list.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// apply server-side applies obj as kubectl-kbind, taking the fields back.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	un := &unstructured.Unstructured{Object: u}
	unstructured.RemoveNestedField(un.Object, "metadata", "creationTimestamp")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(un), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", un.GetKind(), client.ObjectKeyFromObject(un), err)
	}
	return nil
}

// mintToken applies the consumer's ServiceAccount, requests a token for
// it valid for d — without audiences, so the API server gives it its own —
// and sets req's token renewal: those audiences, and d as the longest
// lifetime the consumer may mint.
func mintToken(ctx context.Context, c client.Client, cfg *rest.Config, req *access.Request, d time.Duration) (string, error) {
	for _, obj := range req.Objects() {
		if sa, ok := obj.(*corev1.ServiceAccount); ok {
			if err := apply(ctx, c, sa); err != nil {
				return "", err
			}
		}
	}
	seconds := int64(d.Seconds())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	owner := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: req.ServiceAccountNamespace, Name: access.Name(req.Consumer)}}
	if err := c.SubResource("token").Create(ctx, owner, tr); err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s on %s: %w", owner.Namespace, owner.Name, cfg.Host, err)
	}
	auds, err := access.TokenAudiences(tr.Status.Token)
	if err != nil {
		return "", err
	}
	req.TokenRenewal = &access.TokenRenewal{Audiences: auds, MaxLifetimeSeconds: seconds}
	return tr.Status.Token, req.Validate()
}

// caData is the CA the consumer checks the provider with: this
// kubeconfig's.
func caData(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 || cfg.CAFile == "" {
		return cfg.CAData, nil
	}
	data, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig's certificate authority %s: %w", cfg.CAFile, err)
	}
	return data, nil
}
