package commands

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
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
	// namespace is -n: the isolation namespace (Namespace), else the
	// ServiceAccount's namespace; "" when not given.
	namespace       string
	prefix          string
	related         []string
	duration        time.Duration
	connection      string
	secretNamespace string
	server          string
	schemaSource    string
}

func newGrant(e *env) *cobra.Command {
	o := grantOptions{}
	cmd := &cobra.Command{
		Use:   "grant NAME --apis <plural>.<group>[,...]",
		Short: "Onboard a consumer: ServiceAccount, least-privilege RBAC, a token, and the consumer bundle",
		Long: `Grant consumer NAME access to exported APIs on this (provider) cluster, idempotently: the
ServiceAccount kbind-consumer-NAME, exactly the permissions its Connection needs for the isolation mode
(docs/isolation.md#permissions), and a token bound to the ServiceAccount (TokenRequest) valid for
--duration.

With --isolation Namespace (the default) everything of the consumer lives in one provider namespace:
-n names it (default kbind-NAME), created if missing, and the ServiceAccount lives there too. With
Prefixed or None the ServiceAccount lives in -n (default kbind). It prints the consumer bundle — the kubeconfig Secret, the
Connection and a ClusterBinding — for kubectl apply -f on the consumer.

Run it again with the same NAME to renew the token: apply the new bundle and the konnector picks it up
without a restart. Only exported APIs can be granted (kubectl kbind export).`,
		Example: `  # one namespace on the provider (kbind-team-a) for all of team-a's objects
  kubectl kbind grant team-a --apis widgets.example.org > team-a.yaml
  kubectl --context consumer apply -f team-a.yaml

  # consumer namespaces kept as <prefix>-<namespace>, cluster-scoped APIs allowed
  kubectl kbind grant team-b --apis widgets.example.org,clusterwidgets.example.org --isolation Prefixed --prefix b

  # related Secrets copied too, a one-week token
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
	f.StringSliceVar(&o.related, "related", nil, "related kinds the consumer copies: secrets, configmaps (Namespace isolation only)")
	f.DurationVar(&o.duration, "duration", 720*time.Hour, "lifetime of the token")
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
	req := access.Request{Consumer: name, Namespace: o.namespace, Related: o.related,
		Isolation: kbindv1alpha1.Isolation{Mode: kbindv1alpha1.IsolationMode(o.isolation)},
		CRDReads:  o.schemaSource != string(kbindv1alpha1.SchemaSourceOpenAPI)}
	switch req.Isolation.Mode {
	case kbindv1alpha1.IsolationNamespace:
		if req.Namespace == "" {
			req.Namespace = "kbind-" + name
		}
		req.Isolation.Namespace = req.Namespace
	case kbindv1alpha1.IsolationPrefixed:
		req.Isolation.Prefix = o.prefix
		if req.Isolation.Prefix == "" {
			req.Isolation.Prefix = name
		}
	}
	if req.Namespace == "" {
		req.Namespace = "kbind"
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
	c, cfg, err := e.client()
	if err != nil {
		return err
	}
	o.namespace = *e.flags.Namespace
	req, err := o.request(ctx, c, name)
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, c, req.Namespace); err != nil {
		return err
	}
	for _, obj := range req.Objects() {
		if err := apply(ctx, c, obj); err != nil {
			return err
		}
	}
	token, err := e.token(ctx, cfg, req.Namespace, access.Name(name), o.duration)
	if err != nil {
		return err
	}
	server := o.server
	if server == "" {
		server = cfg.Host
	}
	ca, err := caData(cfg)
	if err != nil {
		return err
	}
	b := bundle.Bundle{Consumer: name, Connection: o.connection, SecretNamespace: o.secretNamespace, Isolation: req.Isolation,
		APIs: o.apis, Server: server, CAData: ca, Token: token}
	data, err := b.YAML()
	if err != nil {
		return err
	}
	if _, err := e.out.Write(data); err != nil {
		return err
	}
	fmt.Fprintf(e.err, "granted %s (%s isolation) the APIs %s as %s; the token expires in %s.\napply the bundle above on the consumer: kubectl apply -f <file>\n",
		name, req.Isolation.Mode, strings.Join(o.apis, ", "), req.Username(), o.duration)
	return nil
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
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

// token requests a token bound to the ServiceAccount.
func (e *env) token(ctx context.Context, cfg *rest.Config, ns, sa string, d time.Duration) (string, error) {
	c, _, err := e.client()
	if err != nil {
		return "", err
	}
	seconds := int64(d.Seconds())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	owner := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}
	if err := c.SubResource("token").Create(ctx, owner, tr); err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s on %s: %w", ns, sa, cfg.Host, err)
	}
	return tr.Status.Token, nil
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
