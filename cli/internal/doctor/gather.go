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
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
	"github.com/kbind/kbind/engine/admission"
	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/identity"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/kubeconfig"
	kbindschema "github.com/kbind/kbind/engine/schema"
)

// Options configure a doctor run.
type Options struct {
	// Connection limits the run to one Connection and its bindings ("" all).
	Connection string
	// Provider, when set, is an administrator's client of the provider,
	// used to read provider copies the Connection's identity cannot.
	Provider client.Client
	// StuckAfter is how old a deletion must be to be reported as stuck.
	StuckAfter time.Duration
	Commands   Commands
	Now        time.Time
	// Timeout bounds each provider request.
	Timeout time.Duration
	// Version is this kubectl-kbind's version (buildinfo), compared with
	// the konnectors' (docs/versioning.md); "dev" or "" is unknown.
	Version string
}

// Run examines the consumer that c reads and the providers its Connections
// name, and returns the report.
func Run(ctx context.Context, c client.Client, opts Options) *Report {
	r := &Report{}
	defer r.finish()
	conns := &kbindv1alpha1.ConnectionList{}
	if err := c.List(ctx, conns); err != nil {
		if f := wrongClusterFinding(ctx, c); apimeta.IsNoMatchError(err) && f != nil {
			r.Findings = append(r.Findings, *f)
			return r
		}
		r.Unchecked = append(r.Unchecked, "Connections: "+consumerReadError(err))
		return r
	}
	if len(conns.Items) == 0 {
		if f := wrongClusterFinding(ctx, c); f != nil {
			r.Findings = append(r.Findings, *f)
			return r
		}
	}
	inScope := slices.DeleteFunc(slices.Clone(conns.Items), func(conn kbindv1alpha1.Connection) bool {
		return opts.Connection != "" && conn.Name != opts.Connection
	})
	if opts.Connection != "" && len(inScope) == 0 {
		r.Unchecked = append(r.Unchecked, fmt.Sprintf("Connection %q: not found on this cluster (%s get connections lists them)", opts.Connection, opts.Commands.Consumer))
		return r
	}
	bindings, err := listBindings(ctx, c)
	if err != nil {
		r.Unchecked = append(r.Unchecked, "bindings: "+consumerReadError(err))
	}
	opts.Commands.Konnector.Groups = BoundGroups(bindings, conns.Items)
	opts.Commands.Konnector.UnmanagedCRDs = unmanagedKbindCRDs(ctx, c, r)
	checkKonnectorDeployments(ctx, c, r, &opts.Commands)
	served := servedAPIVersions(ctx, c, r)
	probes := map[string]*connectionProbe{}
	for _, conn := range inScope {
		probes[conn.Name] = checkConnectionOf(ctx, c, r, conn, bindings, served, opts)
	}
	checkBindings(ctx, c, r, conns.Items, probes, bindings, opts)
	r.Findings = append(r.Findings, routeFindings(bindings, opts.Commands)...)
	r.Findings = append(r.Findings, importFindings(bindings, opts.Commands)...)
	r.Findings = append(r.Findings, instanceFindings(ctx, c, r, probes, bindings, opts)...)
	return r
}

// checkKonnectorDeployments checks the konnector Deployments c can read.
// It records the Helm release of the first one installed by Helm in cmd.
func checkKonnectorDeployments(ctx context.Context, c client.Client, r *Report, cmd *Commands) {
	deps := &appsv1.DeploymentList{}
	if err := c.List(ctx, deps, client.MatchingLabels{"app.kubernetes.io/name": "konnector"}); err != nil {
		r.Unchecked = append(r.Unchecked, "konnector Deployments: "+consumerReadError(err))
		return
	}
	if ks := konnectors(deps.Items); len(ks) > 0 {
		cmd.KonnectorDeployment = &ks[0]
	}
	for _, d := range deps.Items {
		if name := d.Annotations["meta.helm.sh/release-name"]; name != "" && d.Labels["app.kubernetes.io/managed-by"] == "Helm" {
			cmd.KonnectorRelease = &HelmRelease{Name: name, Namespace: d.Namespace}
			break
		}
	}
	r.Checked = append(r.Checked, "konnector")
	r.Findings = append(r.Findings, checkKonnectors(konnectors(deps.Items), *cmd)...)
}

// kbindCRDs are the CRDs the konnector chart installs.
var kbindCRDs = []string{"bindings.core.kbind.io", "clusterbindings.core.kbind.io", "connections.core.kbind.io"}

// unmanagedKbindCRDs are kbind's CRDs on the cluster that Helm would not
// adopt into the release doctor's install command names.
func unmanagedKbindCRDs(ctx context.Context, c client.Client, r *Report) []string {
	var out []string
	for _, name := range kbindCRDs {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			r.Unchecked = append(r.Unchecked, fmt.Sprintf("CRD %s (whether Helm owns it): %s", name, consumerReadError(err)))
		case !HelmOwned(crd.Labels, crd.Annotations):
			out = append(out, name)
		}
	}
	return out
}

// ProviderSigns counts what marks a provider cluster: CRDs exported with
// kubectl kbind export, and consumers' heartbeat Leases. Reads that fail
// count nothing.
func ProviderSigns(ctx context.Context, c client.Client) (exported, leases int) {
	crds := &metav1.PartialObjectMetadataList{}
	crds.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
	if err := c.List(ctx, crds, client.MatchingLabels{kbindv1alpha1.ExportedLabel: kbindv1alpha1.ExportedLabelValue}); err == nil {
		exported = len(crds.Items)
	}
	ls := &metav1.PartialObjectMetadataList{}
	ls.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("LeaseList"))
	if err := c.List(ctx, ls, client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}); err == nil {
		leases = len(ls.Items)
	}
	return exported, leases
}

// WrongCluster says, when c reads a cluster without kbind Connections that
// shows a provider's signs, that doctor and status look at a provider ("" otherwise).
func WrongCluster(ctx context.Context, c client.Client) string {
	exported, leases := ProviderSigns(ctx, c)
	return wrongClusterProblem(exported, leases)
}

func wrongClusterProblem(exported, leases int) string {
	if exported == 0 && leases == 0 {
		return ""
	}
	return fmt.Sprintf("this looks like a provider, not a consumer: no kbind Connections, but %d exported CRD(s) and %d consumer heartbeat Lease(s); "+
		"point doctor and status at the consumer's kubeconfig (--kubeconfig or --context)", exported, leases)
}

func wrongClusterFinding(ctx context.Context, c client.Client) *Finding {
	problem := WrongCluster(ctx, c)
	if problem == "" {
		return nil
	}
	return &Finding{
		Check: "cluster.provider", Severity: SeverityError, Object: Object{Cluster: "consumer", Kind: "Cluster", Name: "current context"},
		Problem:  problem,
		Evidence: "CRDs labelled " + kbindv1alpha1.ExportedLabel + "=true, Leases labelled " + kbindv1alpha1.ManagedLabel + "=true",
		Fix:      "kubectl config get-contexts   # then: kubectl kbind doctor --context=<the consumer's context> (or --kubeconfig <the consumer's kubeconfig>); on this provider: kubectl kbind consumers",
		Doc:      "docs/cli.md#doctor",
	}
}

// checkConnectionOf probes conn's provider and checks the Connection, its
// credentials (when its Secret could be read) and the versions of the
// konnector, the provider and this plugin; it returns the probe.
func checkConnectionOf(ctx context.Context, c client.Client, r *Report, conn kbindv1alpha1.Connection, bindings []BindingState, served []string, opts Options) *connectionProbe {
	p := probe(ctx, c, conn, bindings, opts)
	r.Checked = append(r.Checked, "Connection "+conn.Name)
	if p.unchecked != "" {
		r.Unchecked = append(r.Unchecked, p.unchecked)
		return p
	}
	r.Findings = append(r.Findings, checkConnection(p.ConnectionProbe, opts.Now, opts.StuckAfter, opts.Commands)...)
	if p.Secret == SecretOK {
		r.Findings = append(r.Findings, checkCredentials(conn, opts.Now, p.RenewCommand, opts.Commands)...)
	}
	apiVersion := ""
	if p.Lease != nil {
		apiVersion = p.Lease.APIVersion
	}
	findings, checked := checkVersions(conn, opts.Version, apiVersion, served, opts.Commands)
	r.Findings = append(r.Findings, findings...)
	r.Checked = append(r.Checked, checked)
	return p
}

// checkBindings checks each binding of the Connections in scope against
// its Connection (probed, or only read when out of scope), the
// ClusterBindings and the consumer CRDs of its APIs (each read once).
func checkBindings(ctx context.Context, c client.Client, r *Report, conns []kbindv1alpha1.Connection, probes map[string]*connectionProbe, bindings []BindingState, opts Options) {
	consumerCRDs := map[string]ConsumerCRD{}
	nsLabels := map[string]labels.Set{}
	var clusterBindings []BindingState
	for _, b := range bindings {
		if b.Kind == "ClusterBinding" {
			clusterBindings = append(clusterBindings, b)
		}
	}
	for _, b := range bindings {
		if opts.Connection != "" && b.Spec.ConnectionRef.Name != opts.Connection {
			continue
		}
		r.Checked = append(r.Checked, b.Kind+" "+placeString(b.Meta.Namespace, b.Meta.Name))
		bc := bindingContext{ClusterBindings: clusterBindings, ConsumerCRDs: consumerCRDs}
		if b.Kind == "Binding" && slices.ContainsFunc(clusterBindings, func(cb BindingState) bool { return cb.Spec.NamespaceSelector != nil }) {
			bc.NamespaceLabels = namespaceLabels(ctx, c, b.Meta.Namespace, nsLabels, r)
		}
		bc.Conn, bc.ConnBroken = connectionOf(b, conns, probes)
		if p, ok := probes[b.Spec.ConnectionRef.Name]; ok && p.unchecked == "" {
			bc.Probe = &p.ConnectionProbe
		}
		if bc.Conn != nil && b.Kind == "Binding" {
			if d, err := admission.Admits(ctx, c, bc.Conn, b.Meta.Namespace); err != nil {
				r.Unchecked = append(r.Unchecked, fmt.Sprintf("namespace %s (whether Connection %s admits its Bindings): %s", b.Meta.Namespace, bc.Conn.Name, consumerReadError(err)))
			} else {
				bc.Admission = &d
			}
		}
		if bc.Conn != nil && !bc.ConnBroken {
			readConsumerCRDs(ctx, c, b, consumerCRDs, r)
		}
		r.Findings = append(r.Findings, checkBinding(b, bc, opts.Now, opts.StuckAfter, opts.Commands)...)
	}
}

// namespaceLabels reads the labels of namespace ns once (cache), to tell
// which ClusterBindings' namespaceSelectors cover it; nil when the read
// failed, which is reported as unchecked.
func namespaceLabels(ctx context.Context, c client.Client, ns string, cache map[string]labels.Set, r *Report) labels.Set {
	if l, ok := cache[ns]; ok {
		return l
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, obj); err != nil {
		r.Unchecked = append(r.Unchecked, fmt.Sprintf("namespace %s (which ClusterBindings cover its Bindings): %s", ns, consumerReadError(err)))
		cache[ns] = nil
		return nil
	}
	cache[ns] = labels.Set(obj.GetLabels())
	if cache[ns] == nil {
		cache[ns] = labels.Set{}
	}
	return cache[ns]
}

// connectionOf returns the Connection b names (nil when there is none) and
// whether it is broken: a probed Connection is broken when its probe says
// so or could not run; one out of scope was not probed and is taken as is.
func connectionOf(b BindingState, conns []kbindv1alpha1.Connection, probes map[string]*connectionProbe) (*kbindv1alpha1.Connection, bool) {
	name := b.Spec.ConnectionRef.Name
	if p, ok := probes[name]; ok {
		return &p.Connection, p.Broken() || p.unchecked != ""
	}
	if i := slices.IndexFunc(conns, func(c kbindv1alpha1.Connection) bool { return c.Name == name }); i >= 0 {
		return &conns[i], false
	}
	return nil, false
}

// readConsumerCRDs reads the consumer CRD of each API b lists (once per
// name) into crds; a failed read is reported as unchecked.
func readConsumerCRDs(ctx context.Context, c client.Client, b BindingState, crds map[string]ConsumerCRD, r *Report) {
	for _, api := range b.Spec.APIs {
		name := api.ConsumerName()
		if _, done := crds[name]; done || !wellFormedAPIName(name) {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
		switch {
		case apierrors.IsNotFound(err):
			crds[name] = ConsumerCRD{}
		case err != nil:
			r.Unchecked = append(r.Unchecked, fmt.Sprintf("consumer CRD %s: %s", name, consumerReadError(err)))
		default:
			state := ConsumerCRD{Found: true, Managed: crd.Labels[kbindv1alpha1.ManagedLabel] == kbindv1alpha1.ManagedLabelValue,
				Connection: crd.Annotations[kbindv1alpha1.ConnectionAnnotation], ProviderAPI: crd.Annotations[kbindv1alpha1.ProviderAPIAnnotation]}
			if state.ProviderAPI == "" {
				state.ProviderAPI = name
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					state.Established = true
				}
			}
			crds[name] = state
		}
	}
}

// servedAPIVersions are the core.kbind.io versions this cluster's
// Connection CRD serves, e.g. core.kbind.io/v1alpha1 (nil when unknown; a
// failed read is reported as unchecked).
func servedAPIVersions(ctx context.Context, c client.Client, r *Report) []string {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "connections." + kbindv1alpha1.GroupVersion.Group}, crd); err != nil {
		if !apierrors.IsNotFound(err) {
			r.Unchecked = append(r.Unchecked, "the core.kbind.io versions this cluster serves (CRD connections.core.kbind.io): "+consumerReadError(err))
		}
		return nil
	}
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			out = append(out, crd.Spec.Group+"/"+v.Name)
		}
	}
	return out
}

// connectionProbe is a ConnectionProbe with what gather keeps to itself.
type connectionProbe struct {
	ConnectionProbe
	// unchecked says why the Connection could not be examined.
	unchecked string
	provider  client.Client
}

func listBindings(ctx context.Context, c client.Client) ([]BindingState, error) {
	cbs := &kbindv1alpha1.ClusterBindingList{}
	if err := c.List(ctx, cbs); err != nil {
		return nil, err
	}
	bs := &kbindv1alpha1.BindingList{}
	if err := c.List(ctx, bs); err != nil {
		return nil, err
	}
	var out []BindingState
	for _, b := range cbs.Items {
		out = append(out, BindingState{Kind: "ClusterBinding", Meta: b.ObjectMeta, Spec: b.Spec, Status: b.Status})
	}
	for _, b := range bs.Items {
		out = append(out, BindingState{Kind: "Binding", Meta: b.ObjectMeta, Spec: b.Spec, Status: b.Status})
	}
	return out, nil
}

func konnectors(deps []appsv1.Deployment) []Konnector {
	var out []Konnector
	for _, d := range deps {
		desired := int32(1)
		if d.Spec.Replicas != nil {
			desired = *d.Spec.Replicas
		}
		out = append(out, Konnector{Namespace: d.Namespace, Name: d.Name, Desired: desired, Ready: d.Status.ReadyReplicas})
	}
	return out
}

// providerConfig reads a Connection's kubeconfig Secret and returns the
// provider client configuration with the Connection's credentials and the
// kubeconfig context's namespace; otherwise p records why not.
func providerConfig(ctx context.Context, c client.Client, conn kbindv1alpha1.Connection, timeout time.Duration, p *connectionProbe) (*rest.Config, string) {
	ref := conn.Spec.KubeconfigSecretRef
	key := ref.Key
	if key == "" {
		key = kbindv1alpha1.DefaultKubeconfigKey
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			p.Secret = SecretMissing
			return nil, ""
		}
		p.unchecked = fmt.Sprintf("Connection %s: reading Secret %s/%s: %s", conn.Name, ref.Namespace, ref.Name, consumerReadError(err))
		return nil, ""
	}
	data := secret.Data[key]
	if len(data) == 0 {
		p.Secret = SecretKeyMissing
		return nil, ""
	}
	parsed, err := kubeconfig.Parse(data)
	if err != nil {
		p.Secret, p.SecretProblem = SecretInvalid, err.Error()
		return nil, ""
	}
	if refused := kubeconfig.Refused(parsed.Insecure, conn.Spec.AllowInsecure); len(refused) > 0 {
		p.Secret, p.SecretProblem = SecretInvalid, kubeconfig.DescribeRefused(refused)
		return nil, ""
	}
	cfg := rest.CopyConfig(parsed.Config)
	cfg.Timeout, cfg.QPS, cfg.Burst, cfg.UserAgent = timeout, 50, 100, "kubectl-kbind"
	return cfg, parsed.Namespace
}

// readLease reads the Connection's heartbeat Lease, or returns nil when the
// Connection has not recorded its consumer identity yet.
func readLease(ctx context.Context, cs kubernetes.Interface, conn kbindv1alpha1.Connection, contextNamespace string, now time.Time) *LeaseState {
	if conn.Status.LocalClusterUID == "" {
		return nil
	}
	l := heartbeat.For(conn.Name, conn.Status.LocalClusterUID, isolation.For(conn.Spec.IsolationOf()).LeaseNamespace(contextNamespace))
	state := &LeaseState{Namespace: l.Namespace, Name: l.Name, LeaseDuration: heartbeat.DurationSeconds * time.Second}
	lease, err := cs.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		state.Err = err
	default:
		state.Found = true
		if lease.Spec.LeaseDurationSeconds != nil {
			state.LeaseDuration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
		}
		if lease.Spec.RenewTime != nil {
			state.RenewedAgo = now.Sub(lease.Spec.RenewTime.Time)
		}
		state.APIVersion = lease.Annotations[kbindv1alpha1.APIVersionAnnotation]
	}
	return state
}

// probe reads a Connection's Secret and, with its credentials, the
// provider: identity, user name, heartbeat Lease and access reviews.
func probe(ctx context.Context, c client.Client, conn kbindv1alpha1.Connection, bindings []BindingState, opts Options) *connectionProbe {
	p := &connectionProbe{ConnectionProbe: ConnectionProbe{Connection: conn}}
	cfg, contextNamespace := providerConfig(ctx, c, conn, opts.Timeout, p)
	if cfg == nil {
		return p
	}
	req := accessRequest(conn, bindings, contextNamespace)
	if creds := conn.Status.Credentials; creds != nil {
		// What the konnector says the credential is: known even when the
		// provider refuses it (expired).
		p.RenewCommand = grantCommand(creds.Subject, req, conn, opts.Commands)
	}
	reader, err := identity.NewReader(cfg)
	if err == nil {
		p.RemoteUID, err = reader.ClusterUID(ctx)
	}
	if err != nil {
		p.ReachErr = err
		return p
	}
	p.Reached = true
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		p.ReachErr, p.Reached = err, false
		return p
	}
	if review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil {
		p.Username = review.Status.UserInfo.Username
	}
	p.Lease = readLease(ctx, cs, conn, contextNamespace, opts.Now)
	for _, attrs := range req.Reviews() {
		review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			p.ReviewErr = err
			break
		}
		if !review.Status.Allowed {
			p.Denied = append(p.Denied, attrs)
		}
	}
	p.GrantCommand = grantCommand(p.Username, req, conn, opts.Commands)
	if p.GrantCommand != "" {
		p.RenewCommand = p.GrantCommand
	}
	if opts.Provider != nil {
		p.provider = opts.Provider
	} else if pc, err := client.New(cfg, client.Options{}); err == nil {
		p.provider = pc
	}
	return p
}

// accessRequest is what the Connection's bindings need on the provider:
// the request kubectl kbind grant would make for them. contextNamespace
// is the provider kubeconfig's, where a None Connection's Lease lives.
func accessRequest(conn kbindv1alpha1.Connection, bindings []BindingState, contextNamespace string) access.Request {
	iso := conn.Spec.IsolationOf()
	req := access.Request{Consumer: "doctor", Isolation: iso, CRDReads: conn.Spec.Schema.Source != kbindv1alpha1.SchemaSourceOpenAPI,
		LeaseNamespace: isolation.For(iso).LeaseNamespace(contextNamespace)}
	for _, b := range bindings {
		if b.Spec.ConnectionRef.Name != conn.Name || b.Meta.DeletionTimestamp != nil {
			continue
		}
		for _, api := range b.Spec.APIs {
			if e := findExported(conn.Status.ExportedAPIs, api.Name); e != nil && !slices.ContainsFunc(req.APIs, func(a access.API) bool { return a.Group == e.Group && a.Resource == e.Resource }) {
				req.APIs = append(req.APIs, access.API{Group: e.Group, Resource: e.Resource, Namespaced: e.Scope != kbindv1alpha1.APIScopeCluster})
			}
		}
		for _, rel := range b.Spec.RelatedResources {
			if !slices.Contains(req.Related, string(rel.Resource)) {
				req.Related = append(req.Related, string(rel.Resource))
			}
		}
		// Forwarding the provider's Events reads them cluster-wide under
		// Prefixed and None (a grant's --provider-events).
		if b.Spec.ProviderEvents != kbindv1alpha1.ProviderEventsIgnore {
			req.ClusterWideEvents = true
		}
	}
	sort.Strings(req.Related)
	return req
}

var grantedSA = regexp.MustCompile(`^system:serviceaccount:([^:]+):kbind-consumer-([^:]+)$`)

// grantCommand is the kubectl kbind grant that renews the access of a
// granted identity, or "" when the identity was not made by grant.
func grantCommand(username string, req access.Request, conn kbindv1alpha1.Connection, cmd Commands) string {
	m := grantedSA.FindStringSubmatch(username)
	if m == nil || len(req.APIs) == 0 {
		return ""
	}
	apis := make([]string, 0, len(req.APIs))
	for _, a := range req.APIs {
		apis = append(apis, a.Resource+"."+a.Group)
	}
	consumer := m[2]
	args := []string{"grant", consumer, "--apis", strings.Join(apis, ","), "--isolation", string(req.Isolation.Mode)}
	if m[1] != access.DefaultServiceAccountNamespace {
		args = append(args, "--service-account-namespace", m[1])
	}
	switch {
	case req.Isolation.Mode == kbindv1alpha1.IsolationPrefixed:
		args = append(args, "--prefix", req.Isolation.Prefix)
	case req.Namespace() != access.DefaultNamespace(consumer):
		args = append(args, "-n", req.Namespace())
	}
	if len(req.Related) > 0 {
		args = append(args, "--related", strings.Join(req.Related, ","))
	}
	if req.ClusterWideEvents && req.Isolation.Mode != kbindv1alpha1.IsolationNamespace {
		args = append(args, "--provider-events")
	}
	args = append(args, "--connection", conn.Name, "--secret-namespace", conn.Spec.KubeconfigSecretRef.Namespace)
	return cmd.ProviderPlugin(strings.Join(args, " "))
}

// instanceFindings lists the bound objects of every managed consumer CRD in
// scope (metadata only, one LIST per API) and checks those with a conflict
// or a deletion in progress.
func instanceFindings(ctx context.Context, c client.Client, r *Report, probes map[string]*connectionProbe, bindings []BindingState, opts Options) []Finding {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.MatchingLabels{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue}); err != nil {
		r.Unchecked = append(r.Unchecked, "bound objects: listing the consumer CRDs kbind manages: "+consumerReadError(err))
		return nil
	}
	var out []Finding
	for _, crd := range crds.Items {
		if _, ok := probes[crd.Annotations[kbindv1alpha1.ConnectionAnnotation]]; !ok {
			continue
		}
		version := storageVersion(&crd)
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(crdGVK(crd, version, crd.Spec.Names.ListKind))
		if err := c.List(ctx, list); err != nil {
			r.Unchecked = append(r.Unchecked, fmt.Sprintf("%s objects: %s", crd.Name, consumerReadError(err)))
			continue
		}
		r.Checked = append(r.Checked, fmt.Sprintf("%d %s", len(list.Items), crd.Name))
		for _, item := range list.Items {
			_, conflict := item.Annotations[kbindv1alpha1.ConflictAnnotation]
			if !conflict && item.DeletionTimestamp == nil {
				continue
			}
			connName := RouteOf(item.Annotations, crd.Annotations[kbindv1alpha1.ConnectionAnnotation])
			p, ok := probes[connName]
			if !ok {
				continue
			}
			in := Instance{API: crd.Name, Kind: crd.Spec.Names.Kind, Meta: item.ObjectMeta, Connection: connName,
				Binding: coveringBinding(bindings, connName, crd.Name, item.Namespace)}
			readCopy(ctx, &in, p, crdGVK(crd, version, crd.Spec.Names.Kind), conflict, stuck(item.ObjectMeta, opts.Now, opts.StuckAfter))
			out = append(out, checkInstance(in, p.problem(), opts.Now, opts.StuckAfter, opts.Commands)...)
		}
	}
	return out
}

// problem is why the Connection cannot reach its provider ("" when it
// can).
func (p *connectionProbe) problem() string {
	if !p.Broken() {
		return ""
	}
	if msg := errString(p.ReachErr); msg != "" {
		return msg
	}
	return "its kubeconfig Secret is unusable"
}

// readCopy places the provider copy of the object in describes, and reads
// from the provider what the checks need: who owns it for a conflict, its
// deletion state for a stuck deletion (one metadata GET each).
func readCopy(ctx context.Context, in *Instance, p *connectionProbe, gvk schemaGVK, conflict, stuck bool) {
	place, err := isolation.For(p.Connection.Spec.IsolationOf()).Object(types.NamespacedName{Namespace: in.Meta.Namespace, Name: in.Meta.Name})
	if err != nil {
		return
	}
	in.CopyNamespace, in.CopyName = place.Namespace, place.Name
	if p.provider == nil {
		return
	}
	if conflict {
		in.Owner = owner(ctx, p.provider, gvk, place, p.Connection.Status.LocalClusterUID, string(in.Meta.UID))
	}
	if stuck {
		in.Copy = providerCopyState(ctx, p.provider, gvk, place)
	}
}

// RouteOf is the Connection a consumer object syncs through: the one its
// route annotation names (docs/bindings.md#one-api-several-providers),
// else — an object synced before the annotation existed, or never synced
// — its consumer CRD's, owner.
func RouteOf(objectAnnotations map[string]string, owner string) string {
	if route := objectAnnotations[kbindv1alpha1.ConnectionAnnotation]; route != "" {
		return route
	}
	return owner
}

// owner says what the provider copy's markers say about who made it.
func owner(ctx context.Context, c client.Client, gvk schemaGVK, key types.NamespacedName, localClusterUID, objectUID string) string {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return "it no longer exists; the conflict clears on the next sync"
		}
		return "its markers could not be read: " + err.Error()
	}
	ann := obj.GetAnnotations()
	cluster, object := ann[kbindv1alpha1.ConsumerClusterUIDAnnotation], ann[kbindv1alpha1.ConsumerObjectUIDAnnotation]
	switch {
	case cluster == "" && object == "":
		return "it has no kbind markers: something other than kbind created it"
	case cluster == localClusterUID && object != objectUID:
		return fmt.Sprintf("marked for an earlier object of the same name on this consumer cluster (object UID %s; this one is %s)", object, objectUID)
	case cluster != localClusterUID:
		return fmt.Sprintf("marked by another consumer cluster (UID %s)", cluster)
	default:
		return "marked for this object"
	}
}

// providerCopyState reads the provider copy of a deleting object (its
// metadata, one GET): whether it exists, is being deleted, and which
// finalizers keep it.
func providerCopyState(ctx context.Context, c client.Client, gvk schemaGVK, key types.NamespacedName) *CopyState {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return &CopyState{}
		}
		return &CopyState{ReadError: err.Error()}
	}
	return &CopyState{Exists: true, Deleting: obj.DeletionTimestamp != nil, Finalizers: obj.Finalizers}
}

func coveringBinding(bindings []BindingState, conn, api, namespace string) *BindingState {
	var found *BindingState
	for i := range bindings {
		b := &bindings[i]
		if b.Spec.ConnectionRef.Name != conn || !slices.Contains(b.Spec.ConsumerNames(), api) {
			continue
		}
		if b.Kind == "ClusterBinding" {
			return b
		}
		if b.Meta.Namespace == namespace {
			found = b
		}
	}
	return found
}

// storageVersion is the version crd's objects are listed at: its storage
// version, else (never so for a CRD the API server accepted) its first.
func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	if v := kbindschema.StorageVersion(crd); v != nil {
		return v.Name
	}
	return crd.Spec.Versions[0].Name
}

// consumerReadError says what a failed read of the consumer means.
func consumerReadError(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden: run doctor with a context that may read kbind's objects, Secrets and CRDs on the consumer (" + err.Error() + ")"
	case apimeta.IsNoMatchError(err):
		return "kbind's CRDs are not installed on this cluster: if it is the consumer, " + KonnectorInstall{}.HelmInstallCommand() + " installs them (docs/installation.md)"
	}
	return err.Error()
}

type schemaGVK = schema.GroupVersionKind

func crdGVK(crd apiextensionsv1.CustomResourceDefinition, version, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: kind}
}

// ProviderConfig is the provider client configuration of Connection conn
// with the Connection's own credentials: its kubeconfig Secret read on the
// consumer c reads, as status and doctor read it. The error says why
// there is none, never what the Secret holds.
func ProviderConfig(ctx context.Context, c client.Client, conn kbindv1alpha1.Connection, timeout time.Duration) (*rest.Config, error) {
	p := &connectionProbe{}
	if cfg, _ := providerConfig(ctx, c, conn, timeout, p); cfg != nil {
		return cfg, nil
	}
	ref := conn.Spec.KubeconfigSecretRef
	switch {
	case p.unchecked != "":
		return nil, errors.New(p.unchecked)
	case p.Secret == SecretMissing:
		return nil, fmt.Errorf("the kubeconfig Secret %s/%s of Connection %s does not exist", ref.Namespace, ref.Name, conn.Name)
	case p.Secret == SecretKeyMissing:
		return nil, fmt.Errorf("the kubeconfig Secret %s/%s of Connection %s has no kubeconfig under its key", ref.Namespace, ref.Name, conn.Name)
	}
	return nil, fmt.Errorf("the kubeconfig Secret %s/%s of Connection %s is unusable: %s", ref.Namespace, ref.Name, conn.Name, p.SecretProblem)
}
