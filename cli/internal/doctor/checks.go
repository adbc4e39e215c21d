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
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/admission"
)

// The sections of docs/troubleshooting.md findings link to.
const (
	docKonnector  = "docs/troubleshooting.md#the-konnector-is-not-running"
	docConnection = "docs/troubleshooting.md#the-connection-is-not-ready"
	docAPIMissing = "docs/troubleshooting.md#an-api-is-missing-or-the-binding-says-apinotexported"
	docNoSync     = "docs/troubleshooting.md#the-binding-is-ready-but-instances-do-not-sync"
	docConflicts  = "docs/troubleshooting.md#conflicts"
	docHeartbeat  = "docs/troubleshooting.md#no-heartbeat-lease"
	docDeletion   = "docs/troubleshooting.md#deletion-is-stuck"
)

// Commands are the kubectl invocations fixes are written with: Consumer
// and Provider prefix built-in commands ("kubectl --context=consumer");
// kubectl kbind takes the context after its own arguments (kubectl allows
// no flags before a plugin's name), so ProviderPlugin builds those.
type Commands struct {
	Consumer, Provider string
	// ProviderContext names the provider's context ("" unknown).
	ProviderContext string
	// Konnector is what the konnector chart's install needs (Run fills
	// it from the consumer).
	Konnector KonnectorInstall
	// KonnectorRelease is the Helm release of the konnector Deployment
	// found on the consumer (nil: none, or not installed by Helm).
	KonnectorRelease *HelmRelease
	// KonnectorDeployment is the konnector Deployment found on the
	// consumer (nil: it runs outside the cluster, or was not read).
	KonnectorDeployment *Konnector
}

// konnectorLogs reads the konnector's log: its Deployment's, or, when it
// runs outside the cluster, a comment saying where.
func (c Commands) konnectorLogs() string {
	if d := c.KonnectorDeployment; d != nil {
		return fmt.Sprintf("%s -n %s logs deployment/%s -c konnector --tail=200", c.Consumer, d.Namespace, d.Name)
	}
	return "# no konnector Deployment on this cluster: read the log of the konnector process where it runs"
}

// helmUpgrade upgrades the konnector's Helm release with the chart of
// this checkout; a comment when none was found.
func (c Commands) helmUpgrade() string {
	if r := c.KonnectorRelease; r != nil {
		return fmt.Sprintf("helm upgrade %s %s -n %s --reuse-values%s", r.Name, chartPath, r.Namespace, kubeContextFlag(c.Konnector.Context))
	}
	return "# no konnector Helm release on this cluster: upgrade the konnector the way it was installed"
}

// ProviderPlugin is "kubectl kbind <args> --context=<provider>".
func (c Commands) ProviderPlugin(args string) string {
	return "kubectl kbind " + args + " --context=" + orPlaceholder(c.ProviderContext, "<provider>")
}

// Konnector is a konnector Deployment found on the consumer.
type Konnector struct {
	Namespace, Name string
	Desired, Ready  int32
}

// checkKonnectors: at least one konnector Deployment with ready replicas,
// or a note that it runs outside the cluster (the heartbeat then tells
// whether it is alive).
func checkKonnectors(deps []Konnector, cmd Commands) []Finding {
	if len(deps) == 0 {
		return []Finding{{
			Check: "konnector.outside", Severity: SeverityNote,
			Object:  Object{Cluster: "consumer", Kind: "Deployment", Name: "konnector"},
			Problem: "no konnector Deployment (label app.kubernetes.io/name=konnector) on this cluster: it runs outside the cluster, or not at all; the heartbeat checks tell whether it is alive",
			Fix:     cmd.Konnector.HelmInstallCommand() + "   # to run it in the cluster, from a checkout of kbind (docs/installation.md)",
			Doc:     docKonnector,
		}}
	}
	var out []Finding
	for _, d := range deps {
		if d.Ready > 0 {
			continue
		}
		out = append(out, Finding{
			Check: "konnector.notReady", Severity: SeverityError,
			Object:   Object{Cluster: "consumer", Kind: "Deployment", Namespace: d.Namespace, Name: d.Name},
			Field:    "status.readyReplicas",
			Problem:  "the konnector has no ready replica: nothing syncs",
			Evidence: fmt.Sprintf("%d of %d replicas ready", d.Ready, d.Desired),
			Fix: fmt.Sprintf("%s -n %s describe deployment %s\n%s -n %s logs deployment/%s -c konnector --tail=200",
				cmd.Consumer, d.Namespace, d.Name, cmd.Consumer, d.Namespace, d.Name),
			Doc: docKonnector,
		})
	}
	return out
}

// SecretState is what reading a Connection's kubeconfig Secret found.
type SecretState int

// The states of a kubeconfig Secret: usable, missing, without the key (or
// empty), or holding something that is not a kubeconfig kbind accepts.
const (
	SecretOK SecretState = iota
	SecretMissing
	SecretKeyMissing
	SecretInvalid
)

// LeaseState is what reading a Connection's heartbeat Lease found.
type LeaseState struct {
	Namespace, Name string
	Found           bool
	// RenewedAgo is the age of the last renewal (when Found).
	RenewedAgo    time.Duration
	LeaseDuration time.Duration
	// Err is a failed read (not NotFound).
	Err error
	// APIVersion is the core.kbind.io version its konnector serves (its
	// annotation; "" unknown).
	APIVersion string
}

// ConnectionProbe is what was read about one Connection: its Secret and,
// with its credentials, its provider.
type ConnectionProbe struct {
	Connection kbindv1alpha1.Connection
	Secret     SecretState
	// SecretProblem says why the kubeconfig is refused (never its content).
	SecretProblem string
	// Reached is true when the provider's identity was read; else ReachErr.
	Reached   bool
	ReachErr  error
	RemoteUID string
	// Username is the provider identity of the credentials ("" unknown).
	Username string
	Lease    *LeaseState
	// Denied lists the access reviews the provider refused.
	Denied    []authorizationv1.ResourceAttributes
	ReviewErr error
	// GrantCommand renews or widens the grant ("" unknown), e.g.
	// "kubectl kbind grant team-a --apis ... --context=provider".
	GrantCommand string
	// RenewCommand issues a new credential: GrantCommand, or when the
	// provider could not tell the identity, the grant of the subject the
	// konnector reports in status.credentials ("" unknown).
	RenewCommand string
}

// Broken reports whether p has a problem that explains every binding on
// the Connection failing too.
func (p ConnectionProbe) Broken() bool {
	return p.Secret != SecretOK || !p.Reached
}

func connectionObject(c kbindv1alpha1.Connection) Object {
	return Object{Cluster: "consumer", Kind: "Connection", Name: c.Name}
}

// checkConnection runs the guide's "Connection does not become Ready" and
// "No heartbeat Lease" sections, and the RBAC review.
func checkConnection(p ConnectionProbe, now time.Time, stuckAfter time.Duration, cmd Commands) []Finding {
	c := p.Connection
	obj := connectionObject(c)
	var out []Finding
	if f := deletionProtectedFinding(obj, "connection", c.Status.Conditions, cmd); f != nil {
		out = append(out, *f)
	} else if f := stuckDeleting(obj, c.ObjectMeta, now, stuckAfter,
		"the Connection waits for the bindings that reference it to finish their cleanup (finalizer core.kbind.io/cleanup)",
		fmt.Sprintf("%s get clusterbindings,bindings.core.kbind.io -A   # delete the bindings of Connection %s first, and keep the konnector running", cmd.Consumer, c.Name)); f != nil {
		out = append(out, *f)
	}
	ref := c.Spec.KubeconfigSecretRef
	key := ref.Key
	if key == "" {
		key = kbindv1alpha1.DefaultKubeconfigKey
	}
	if f := secretNamespaceFinding(c, cmd); f != nil {
		// What the konnector says wins: doctor reads with its own rights.
		return append(out, *f)
	}
	createSecret := fmt.Sprintf("%s -n %s create secret generic %s --from-file=%s=<provider kubeconfig file>   # kubectl kbind grant on the provider prints one",
		cmd.Consumer, ref.Namespace, ref.Name, key)
	// The Secret carries kbind's cleanup finalizer while a Connection uses
	// it: deleting it would leave it Terminating, so its data is replaced.
	replaceSecret := fmt.Sprintf("%s -n %s create secret generic %s --from-file=%s=<provider kubeconfig file> --dry-run=client -o yaml | %s apply -f -   # kubectl kbind grant on the provider prints one",
		cmd.Consumer, ref.Namespace, ref.Name, key, cmd.Consumer)
	switch p.Secret {
	case SecretMissing:
		return append(out, Finding{
			Check: "connection.secret", Severity: SeverityError, Object: obj, Field: "spec.kubeconfigSecretRef",
			Problem:  fmt.Sprintf("the kubeconfig Secret %s/%s does not exist", ref.Namespace, ref.Name),
			Evidence: conditionEvidence(c.Status.Conditions, kbindv1alpha1.ConditionSecretValid),
			Fix:      createSecret, Doc: docConnection,
		})
	case SecretKeyMissing:
		return append(out, Finding{
			Check: "connection.secret", Severity: SeverityError, Object: obj, Field: "spec.kubeconfigSecretRef.key",
			Problem:  fmt.Sprintf("the Secret %s/%s has no non-empty key %q", ref.Namespace, ref.Name, key),
			Evidence: conditionEvidence(c.Status.Conditions, kbindv1alpha1.ConditionSecretValid),
			Fix: replaceSecret +
				"\n# spec.kubeconfigSecretRef is immutable: to use another key or Secret, create a new Connection", Doc: docConnection,
		})
	case SecretInvalid:
		return append(out, Finding{
			Check: "connection.kubeconfig", Severity: SeverityError, Object: obj, Field: "spec.kubeconfigSecretRef",
			Problem:  fmt.Sprintf("the Secret %s/%s key %q is not a kubeconfig kbind can use: %s", ref.Namespace, ref.Name, key, p.SecretProblem),
			Evidence: conditionEvidence(c.Status.Conditions, kbindv1alpha1.ConditionSecretValid),
			Fix: replaceSecret +
				"\n# the kubeconfig needs one usable context, the server as the konnector reaches it, its CA, and a token or client certificate (no exec plugins or file paths)",
			Doc: docConnection,
		})
	}
	if !p.Reached {
		return append(out, reachFinding(p, cmd))
	}
	if c.Status.RemoteClusterUID != "" && p.RemoteUID != "" && c.Status.RemoteClusterUID != p.RemoteUID {
		out = append(out, Finding{
			Check: "connection.identity", Severity: SeverityError, Object: obj, Field: "status.remoteClusterUID",
			Problem:  "the Secret now points at a different provider cluster than the one this Connection is pinned to (ClusterIdentityChanged)",
			Evidence: fmt.Sprintf("pinned %s, the Secret's cluster is %s", c.Status.RemoteClusterUID, p.RemoteUID),
			Fix:      fmt.Sprintf("restore the original provider endpoint and credentials in Secret %s/%s, or create a new Connection for the new provider and migrate deliberately", ref.Namespace, ref.Name),
			Doc:      docConnection,
		})
	}
	if cond := meta(c.Status.Conditions, kbindv1alpha1.ConditionReady); cond != nil && cond.Reason == string(kbindv1alpha1.ReasonDuplicateConsumer) {
		out = append(out, Finding{
			Check: "connection.duplicate", Severity: SeverityError, Object: obj, Field: "status.conditions[Ready]",
			Problem: "another konnector renews this Connection's heartbeat Lease with this consumer cluster's identity (DuplicateConsumer), " +
				"as a cluster restored from an etcd snapshot of this one does: sync is paused and no provider copy is deleted, here and there",
			Evidence: conditionEvidence(c.Status.Conditions, kbindv1alpha1.ConditionHeartbeat),
			Fix: fmt.Sprintf("# on the CLONE only (never on production), let go of everything without deleting a provider copy:\n"+
				"%s get clusterbindings,bindings.core.kbind.io -A   # then, for each: kubectl patch ... --type=merge -p '{\"spec\":{\"deletionPolicy\":\"Orphan\"}}'\n"+
				"%s delete clusterbindings,bindings.core.kbind.io --all -A && %s delete connection %s   # or stop the clone's konnector",
				cmd.Consumer, cmd.Consumer, cmd.Consumer, c.Name),
			Doc: "docs/troubleshooting.md#duplicate-consumer",
		})
	}
	out = append(out, rbacFindings(p, cmd)...)
	if f := heartbeatFinding(p, cmd); f != nil {
		out = append(out, *f)
	}
	if c.Status.ActiveSchemaSource != "" && len(c.Status.ExportedAPIs) == 0 {
		out = append(out, Finding{
			Check: "connection.exportedAPIs", Severity: SeverityWarning, Object: obj, Field: "status.exportedAPIs",
			Problem:  "the provider exports no API to this Connection",
			Evidence: "status.activeSchemaSource " + string(c.Status.ActiveSchemaSource) + ", no exported APIs",
			Fix:      cmd.ProviderPlugin("export <plural>.<group>") + "   # kubectl kbind export --list shows what is exported",
			Doc:      docAPIMissing,
		})
	}
	if cond := meta(c.Status.Conditions, kbindv1alpha1.ConditionSchemaInSync); cond != nil && cond.Status == metav1.ConditionFalse {
		out = append(out, Finding{
			Check: "connection.schema", Severity: SeverityWarning, Object: obj, Field: "status.conditions[SchemaInSync]",
			Problem:  "consumer CRDs do not carry the schema the Connection's policies call for",
			Evidence: conditionEvidence(c.Status.Conditions, kbindv1alpha1.ConditionSchemaInSync),
			Fix:      fmt.Sprintf("%s get connection %s -o jsonpath='{.spec.schema}'   # updatePolicy Once pins a schema; pullPolicy None leaves CRDs to you", cmd.Consumer, c.Name),
			Doc:      "docs/troubleshooting.md#schema-or-status-differs-from-the-provider",
		})
	}
	if len(out) == 0 {
		if cond := meta(c.Status.Conditions, kbindv1alpha1.ConditionReady); cond != nil && cond.Status != metav1.ConditionTrue {
			out = append(out, Finding{
				Check: "connection.notReady", Severity: SeverityWarning, Object: obj, Field: "status.conditions[Ready]",
				Problem:  "the Connection is not Ready",
				Evidence: conditionEvidence(c.Status.Conditions, kbindv1alpha1.ConditionReady),
				Fix:      fmt.Sprintf("%s get connection %s -o yaml   # read every condition's reason and message", cmd.Consumer, c.Name),
				Doc:      docConnection,
			})
		}
	}
	return out
}

// reachFinding classifies a failed identity read.
func reachFinding(p ConnectionProbe, cmd Commands) Finding {
	c := p.Connection
	ref := c.Spec.KubeconfigSecretRef
	f := Finding{Object: connectionObject(c), Severity: SeverityError, Field: "status.conditions[Connected]", Doc: docConnection,
		Evidence: "reading the provider's identity with the Connection's credentials: " + errString(p.ReachErr)}
	renew := p.GrantCommand
	if renew == "" {
		renew = p.RenewCommand
	}
	if renew == "" {
		renew = fmt.Sprintf("# on the provider, issue a new token for the consumer's identity (kubectl kbind grant NAME ... prints a bundle), then on the consumer:\n%s apply -f <bundle>", cmd.Consumer)
	} else {
		renew += " > bundle.yaml\n" + cmd.Consumer + " apply -f bundle.yaml"
	}
	switch {
	case apierrors.IsUnauthorized(p.ReachErr):
		f.Check = "connection.credentials"
		f.Problem = "the provider refuses the Connection's credentials (Unauthorized): the token expired, or its ServiceAccount was revoked"
		f.Fix = renew
	case apierrors.IsForbidden(p.ReachErr):
		f.Check = "connection.permissions"
		f.Problem = "the provider authenticates the Connection's credentials but forbids reading its identity (get namespace kube-system)"
		f.Fix = renew
	default:
		f.Check = "connection.unreachable"
		f.Problem = fmt.Sprintf("the provider in Secret %s/%s cannot be reached", ref.Namespace, ref.Name)
		f.Fix = "# check that the kubeconfig's server is the provider's address as the konnector reaches it (not 127.0.0.1 from a Pod), its CA, and the network path; then:\n" +
			fmt.Sprintf("%s wait --for=condition=Connected connection/%s --timeout=5m", cmd.Consumer, c.Name)
	}
	return f
}

// rbacFindings: one finding per resource and namespace with refused verbs.
func rbacFindings(p ConnectionProbe, cmd Commands) []Finding {
	c := p.Connection
	if p.ReviewErr != nil {
		return []Finding{{
			Check: "connection.rbac", Severity: SeverityWarning, Object: connectionObject(c),
			Problem: "could not review the Connection's provider permissions", Evidence: errString(p.ReviewErr),
			Fix: fmt.Sprintf("%s auth can-i --list --as=%s   # with an administrator context", cmd.Provider, orPlaceholder(p.Username, "<identity>")),
			Doc: docConnection,
		}}
	}
	type where struct{ group, resource, namespace, name string }
	verbs := map[where][]string{}
	var order []where
	for _, d := range p.Denied {
		w := where{d.Group, d.Resource, d.Namespace, d.Name}
		if _, ok := verbs[w]; !ok {
			order = append(order, w)
		}
		verbs[w] = append(verbs[w], d.Verb)
	}
	var out []Finding
	for _, w := range order {
		res := w.resource
		if w.group != "" {
			res += "." + w.group
		}
		if w.name != "" {
			res += "/" + w.name
		}
		scope := "cluster-wide"
		nsFlag := ""
		if w.namespace != "" {
			scope, nsFlag = "in namespace "+w.namespace, " -n "+w.namespace
		}
		who := orPlaceholder(p.Username, "the Connection's identity")
		fix := p.GrantCommand
		if fix == "" {
			fix = fmt.Sprintf("# give %s these verbs on the provider, e.g.:\n%s%s create role kbind-extra --verb=%s --resource=%s", who, cmd.Provider, nsFlag, strings.Join(verbs[w], ","), res)
		} else {
			fix += " > bundle.yaml   # re-grants the full least-privilege access"
		}
		out = append(out, Finding{
			Check: "connection.rbac", Severity: SeverityError, Object: connectionObject(c),
			Problem:  fmt.Sprintf("the provider does not allow %s to %s %s %s", who, strings.Join(verbs[w], ", "), res, scope),
			Evidence: fmt.Sprintf("SelfSubjectAccessReview with the Connection's credentials: %s %s %s denied", strings.Join(verbs[w], ","), res, scope),
			Fix:      fix + fmt.Sprintf("\n%s auth can-i %s %s%s --as=%s   # check", cmd.Provider, verbs[w][0], res, nsFlag, orPlaceholder(p.Username, "<identity>")),
			Doc:      docConnection,
		})
	}
	return out
}

// heartbeatFinding: the Lease exists and was renewed within its duration.
func heartbeatFinding(p ConnectionProbe, cmd Commands) *Finding {
	l := p.Lease
	if l == nil {
		return nil
	}
	f := Finding{Check: "connection.heartbeat", Severity: SeverityError, Object: Object{Cluster: "provider", Kind: "Lease", Namespace: l.Namespace, Name: l.Name},
		Field: "spec.renewTime", Doc: docHeartbeat,
		Fix: fmt.Sprintf("# the konnector serving Connection %s is not running, or cannot write its Lease:\n%s get connection %s -o jsonpath='{.status.conditions[?(@.type==\"Heartbeat\")]}'\n%s",
			p.Connection.Name, cmd.Consumer, p.Connection.Name, cmd.konnectorLogs())}
	switch {
	case l.Err != nil:
		f.Severity = SeverityWarning
		f.Problem = "the heartbeat Lease could not be read with the Connection's credentials"
		f.Evidence = errString(l.Err)
	case !l.Found:
		f.Problem = "there is no heartbeat Lease on the provider: no konnector serves this Connection"
		f.Evidence = "Lease " + l.Namespace + "/" + l.Name + " not found"
	case l.RenewedAgo > l.LeaseDuration:
		f.Problem = fmt.Sprintf("the heartbeat is stale: the Lease was last renewed %s ago (its duration is %s), so the konnector is not running or cannot reach the provider", l.RenewedAgo.Round(time.Second), l.LeaseDuration)
		f.Evidence = "renewTime " + l.RenewedAgo.Round(time.Second).String() + " ago"
	default:
		return nil
	}
	return &f
}

// BindingState is a ClusterBinding or a Binding as doctor sees it.
type BindingState struct {
	Kind   string // ClusterBinding or Binding
	Meta   metav1.ObjectMeta
	Spec   kbindv1alpha1.BindingSpec
	Status kbindv1alpha1.BindingStatus
}

func (b BindingState) object() Object {
	return Object{Cluster: "consumer", Kind: b.Kind, Namespace: b.Meta.Namespace, Name: b.Meta.Name}
}

func (b BindingState) resource() string {
	if b.Kind == "Binding" {
		return "bindings.core.kbind.io -n " + b.Meta.Namespace
	}
	return "clusterbinding"
}

// ConsumerCRD is what the consumer has for a bound API.
type ConsumerCRD struct {
	Found, Established bool
	// Managed: the core.kbind.io/managed label; Connection: the
	// core.kbind.io/connection annotation.
	Managed    bool
	Connection string
	// ProviderAPI is the provider API its objects sync to: the
	// core.kbind.io/provider-api annotation of a projected CRD, else its
	// own name.
	ProviderAPI string
}

// bindingContext is what a binding is checked against.
type bindingContext struct {
	// Conn is nil when the Connection does not exist.
	Conn *kbindv1alpha1.Connection
	// ConnBroken suppresses what a broken Connection already explains.
	ConnBroken      bool
	ClusterBindings []BindingState
	// ConsumerCRDs by API name; nil when they were not read.
	ConsumerCRDs map[string]ConsumerCRD
	// NamespaceLabels are a Binding's namespace's labels, read when a
	// ClusterBinding has a namespaceSelector; nil when not read.
	NamespaceLabels labels.Set
	// Admission is whether the Connection admits a Binding's namespace
	// (spec.namespacedBindings); nil when unknown or a ClusterBinding.
	Admission *admission.Decision
	// Probe is what was read of the Connection's provider (nil: not
	// probed).
	Probe *ConnectionProbe
}

// checkBinding runs the guide's "An API is missing" and "Binding is Ready
// but instances do not sync" sections for one binding, and notes the
// provider copies its deletion protection kept.
func checkBinding(b BindingState, bc bindingContext, now time.Time, stuckAfter time.Duration, cmd Commands) []Finding {
	out := checkBindingHealth(b, bc, now, stuckAfter, cmd)
	if f := copiesKeptFinding(b); f != nil {
		out = append(out, *f)
	}
	return out
}

// copiesKeptFinding notes a binding whose deletion protection kept
// provider copies instead of deleting them (CopiesKept, BIND-5): nothing
// is wrong, but they stay on the provider until deleted on purpose.
func copiesKeptFinding(b BindingState) *Finding {
	cond := meta(b.Status.Conditions, kbindv1alpha1.ConditionCopiesKept)
	if cond == nil || cond.Status != metav1.ConditionTrue {
		return nil
	}
	total, apis := int32(0), []string{}
	for _, k := range b.Status.KeptCopies {
		total += k.Count
		apis = append(apis, fmt.Sprintf("%s: %d", k.Name, k.Count))
	}
	ref := "clusterbinding/" + b.Meta.Name
	if b.Kind == "Binding" {
		ref = "binding/" + b.Meta.Name + " -n " + b.Meta.Namespace
	}
	problem := "the binding's deletion protection kept provider copies of objects it no longer syncs (no longer selected, or of an API removed from it) instead of deleting them: they stay on the provider, unsynced, until deleted on purpose or selected again"
	if total > 0 {
		problem = fmt.Sprintf("the binding's deletion protection kept %d provider copies (%s) of objects it no longer syncs (no longer selected, or of an API removed from it) instead of deleting them: they stay on the provider, unsynced, until deleted on purpose or selected again",
			total, strings.Join(apis, ", "))
	}
	return &Finding{
		Check: "binding.copiesKept", Severity: SeverityNote, Object: b.object(), Field: "status.keptCopies",
		Problem:  problem,
		Evidence: conditionEvidence(b.Status.Conditions, kbindv1alpha1.ConditionCopiesKept),
		Fix:      fmt.Sprintf("kubectl kbind kept %s   # lists them on the provider\nkubectl kbind kept %s --delete   # deletes them, after showing them and asking", ref, ref),
		Doc:      "docs/bindings.md#deletion-protection",
	}
}

// checkBindingHealth is checkBinding without the notes on kept copies.
func checkBindingHealth(b BindingState, bc bindingContext, now time.Time, stuckAfter time.Duration, cmd Commands) []Finding {
	conn := bc.Conn
	obj := b.object()
	var out []Finding
	if f := deletionProtectedFinding(obj, b.resource(), b.Status.Conditions, cmd); f != nil {
		out = append(out, *f)
	} else if stuck(b.Meta, now, stuckAfter) && providerGoneForGood(bc.Probe) {
		out = append(out, orphanWayOut(b, bc.Probe, cmd))
	} else if f := stuckDeleting(obj, b.Meta, now, stuckAfter,
		"the binding waits for the konnector to clean up its objects' provider copies (finalizer core.kbind.io/cleanup)",
		"# keep the konnector running and its Connection Ready; the findings on the Connection and on objects say what blocks it"); f != nil {
		out = append(out, *f)
	}
	if conn == nil {
		fix := fmt.Sprintf("%s get connections   # the Connections that exist\n", cmd.Consumer)
		if b.Meta.DeletionTimestamp == nil {
			fix += fmt.Sprintf("%s delete %s %s   # spec.connectionRef is immutable: then create the binding again naming one of them", cmd.Consumer, b.resource(), b.Meta.Name)
		} else {
			fix += "# spec.connectionRef is immutable: create a new binding naming one of them"
		}
		return append(out, Finding{
			Check: "binding.connection", Severity: SeverityError, Object: obj, Field: "spec.connectionRef.name",
			Problem: fmt.Sprintf("the binding names Connection %q, which does not exist", b.Spec.ConnectionRef.Name),
			Fix:     fix, Doc: docAPIMissing,
		})
	}
	if b.Kind == "Binding" && bc.Admission != nil && !bc.Admission.Admitted {
		// Nothing else matters: the konnector gives this Binding nothing.
		return append(out, notAdmittedFinding(b, conn, *bc.Admission, cmd))
	}
	for i, api := range b.Spec.APIs {
		out = append(out, checkBindingAPI(b, i, api, bc, cmd)...)
	}
	if len(out) > 0 || bc.ConnBroken {
		return out
	}
	return append(out, bindingStatusFindings(b, cmd)...)
}

// checkBindingAPI checks the API b lists at spec.apis[i]: its name, that
// the provider exports it (once discovery ran), that its scope fits the
// binding and the Connection, its consumer CRD (unless the Connection is
// broken) and, for a Binding, a ClusterBinding that binds it too.
func checkBindingAPI(b BindingState, i int, api kbindv1alpha1.APIReference, bc bindingContext, cmd Commands) []Finding {
	conn, obj, name, consumer := bc.Conn, b.object(), api.Name, api.ConsumerName()
	field := fmt.Sprintf("spec.apis[%d].name", i)
	if !wellFormedAPIName(name) {
		fix := fmt.Sprintf("%s patch %s %s --type=json -p '[{\"op\":\"replace\",\"path\":\"/spec/apis/%d/name\",\"value\":\"%s\"}]'",
			cmd.Consumer, b.resource(), b.Meta.Name, i, orPlaceholder(suggestAPI(name, conn.Status.ExportedAPIs), "<plural>.<group>"))
		return []Finding{{
			Check: "binding.apiName", Severity: SeverityError, Object: obj, Field: field,
			Problem:  fmt.Sprintf("%q is not an API name: name APIs as <plural>.<group>, e.g. widgets.example.org, not a Kind or group/version", name),
			Evidence: exportedEvidence(conn.Status.ExportedAPIs),
			Fix:      fix, Doc: docAPIMissing,
		}}
	}
	if conn.Status.ActiveSchemaSource == "" {
		return nil // not discovered yet: what is exported is unknown
	}
	var out []Finding
	exp := findExported(conn.Status.ExportedAPIs, name)
	if f := exportFinding(b, name, field, exp, conn, cmd); f != nil {
		out = append(out, *f)
	}
	if exp != nil && !bc.ConnBroken {
		if f := consumerCRDFinding(b, consumer, field, conn, bc.ConsumerCRDs, cmd); f != nil {
			out = append(out, *f)
		} else if f := projectionFinding(b, api, field, bc.ConsumerCRDs, cmd); f != nil {
			out = append(out, *f)
		}
	}
	if b.Kind == "Binding" {
		out = append(out, overlapFindings(b, consumer, field, bc.ClusterBindings, bc.NamespaceLabels, cmd)...)
	}
	return out
}

// exportFinding says what is wrong with how the provider exports the API
// name (exp, nil when it does not): not at all, or cluster-scoped where a
// Binding or a Connection with Namespace isolation cannot take it.
func exportFinding(b BindingState, name, field string, exp *kbindv1alpha1.ExportedAPI, conn *kbindv1alpha1.Connection, cmd Commands) *Finding {
	obj := b.object()
	switch {
	case exp == nil:
		return &Finding{
			Check: "binding.notExported", Severity: SeverityError, Object: obj, Field: field,
			Problem:  fmt.Sprintf("%s is not exported by the provider of Connection %s", name, conn.Name),
			Evidence: exportedEvidence(conn.Status.ExportedAPIs),
			Fix:      cmd.ProviderPlugin("export "+name) + "   # on the provider; discovery picks it up within its interval",
			Doc:      docAPIMissing,
		}
	case exp.Scope == kbindv1alpha1.APIScopeCluster && b.Kind == "Binding":
		return &Finding{
			Check: "binding.scope", Severity: SeverityError, Object: obj, Field: field,
			Problem: fmt.Sprintf("%s is cluster-scoped, which a namespaced Binding cannot activate", name),
			Fix:     "# list it in a ClusterBinding instead: " + cmd.Consumer + " edit clusterbinding <name>",
			Doc:     docAPIMissing,
		}
	case exp.Scope == kbindv1alpha1.APIScopeCluster && conn.Spec.IsolationOf().Mode == kbindv1alpha1.IsolationNamespace:
		return &Finding{
			Check: "binding.scope", Severity: SeverityError, Object: obj, Field: field,
			Problem: fmt.Sprintf("%s is cluster-scoped, which Connection %s cannot confine to its isolation namespace %s", name, conn.Name, conn.Spec.Isolation.Namespace),
			Fix:     "# bind it through a Connection with Prefixed isolation: on the provider, kubectl kbind grant NAME --isolation Prefixed --apis " + name,
			Doc:     "docs/troubleshooting.md#isolated-connections",
		}
	}
	return nil
}

// overlapFindings warns of each ClusterBinding of the same Connection that
// binds the consumer API name too: it takes precedence over the Binding b.
func overlapFindings(b BindingState, name, field string, clusterBindings []BindingState, nsLabels labels.Set, cmd Commands) []Finding {
	var out []Finding
	for _, cb := range clusterBindings {
		if coversNamespace(cb, name, nsLabels) {
			through := ""
			if cb.Spec.ConnectionRef.Name != b.Spec.ConnectionRef.Name {
				through = " through Connection " + cb.Spec.ConnectionRef.Name
			}
			out = append(out, Finding{
				Check: "binding.overlap", Severity: SeverityWarning, Object: b.object(), Field: field,
				Problem: fmt.Sprintf("ClusterBinding %s already binds %s in namespace %s%s: it takes precedence, and this Binding waits until it goes or stops selecting the namespace",
					cb.Meta.Name, name, b.Meta.Namespace, through),
				Fix: fmt.Sprintf("%s delete bindings.core.kbind.io -n %s %s   # or remove %s from ClusterBinding %s", cmd.Consumer, b.Meta.Namespace, b.Meta.Name, name, cb.Meta.Name),
				Doc: docNoSync,
			})
		}
	}
	return out
}

// shapingFinding reports a binding its own shaping stops (Ready=False
// InvalidFilter or InvalidMutation): nothing it covers syncs, and nothing
// is released, until the field the message names is fixed.
func shapingFinding(b BindingState, cmd Commands) *Finding {
	cond := meta(b.Status.Conditions, kbindv1alpha1.ConditionReady)
	if cond == nil || cond.Status == metav1.ConditionTrue {
		return nil
	}
	f := &Finding{Severity: SeverityError, Object: b.object(), Evidence: conditionEvidence(b.Status.Conditions, kbindv1alpha1.ConditionReady),
		Fix: fmt.Sprintf("%s edit %s %s   # fix the field the message names", cmd.Consumer, b.resource(), b.Meta.Name)}
	switch kbindv1alpha1.Reason(cond.Reason) {
	case kbindv1alpha1.ReasonInvalidFilter:
		f.Check, f.Field, f.Doc = "binding.invalidFilter", "spec.namespaceSelector, spec.apis[].objectSelector", "docs/shaping.md#filters"
		f.Problem = "a selector of the binding does not parse: none of its objects sync, and none is released, until it is fixed"
	case kbindv1alpha1.ReasonInvalidMutation:
		f.Check, f.Field, f.Doc = "binding.invalidMutation", "spec.apis[].mutations", "docs/shaping.md#mutations"
		f.Problem = "a mutation rule of the binding does not compile: none of its objects sync, and none is released, until it is fixed"
	default:
		return nil
	}
	return f
}

// bindingStatusFindings reads what the konnector reported on a binding
// whose spec is sound: a refused request or not Ready, fewer versions
// served than on the provider, and instances that failed to sync.
func bindingStatusFindings(b BindingState, cmd Commands) []Finding {
	obj := b.object()
	var out []Finding
	if cond := meta(b.Status.Conditions, kbindv1alpha1.ConditionPermissionDenied); cond != nil && cond.Status == metav1.ConditionTrue {
		out = append(out, Finding{
			Check: "binding.forbidden", Severity: SeverityError, Object: obj, Field: "status.conditions[PermissionDenied]",
			Problem:  "the provider refuses a request this binding needs",
			Evidence: conditionEvidence(b.Status.Conditions, kbindv1alpha1.ConditionPermissionDenied),
			Fix:      fmt.Sprintf("# grant the verb the message names to the Connection's identity on the provider; kubectl kbind doctor %s lists every missing one", b.Spec.ConnectionRef.Name),
			Doc:      docConnection,
		})
	} else if f := shapingFinding(b, cmd); f != nil {
		out = append(out, *f)
	} else if cond := meta(b.Status.Conditions, kbindv1alpha1.ConditionReady); cond != nil && cond.Status != metav1.ConditionTrue {
		out = append(out, Finding{
			Check: "binding.notReady", Severity: SeverityWarning, Object: obj, Field: "status.conditions[Ready]",
			Problem:  "the binding is not Ready",
			Evidence: conditionEvidence(b.Status.Conditions, kbindv1alpha1.ConditionReady),
			Fix:      fmt.Sprintf("%s get %s %s -o yaml   # read each condition's reason and message", cmd.Consumer, b.resource(), b.Meta.Name),
			Doc:      docNoSync,
		})
	}
	if cond := meta(b.Status.Conditions, kbindv1alpha1.ConditionAllVersionsServed); cond != nil && cond.Status == metav1.ConditionFalse {
		out = append(out, Finding{
			Check: "binding.versions", Severity: SeverityNote, Object: obj, Field: "status.conditions[AllVersionsServed]",
			Problem:  "an API is served on the consumer at fewer versions than on the provider: the provider converts between them with a webhook, which kbind cannot run; write objects at the version the consumer serves",
			Evidence: conditionEvidence(b.Status.Conditions, kbindv1alpha1.ConditionAllVersionsServed),
			Fix:      fmt.Sprintf("%s get crd -l core.kbind.io/managed=true -o custom-columns=NAME:.metadata.name,VERSIONS:.spec.versions[*].name", cmd.Consumer),
			Doc:      "docs/bindings.md#conditions",
		})
	}
	for _, api := range b.Status.BoundAPIs {
		if api.Instances != nil && api.Instances.Failed > 0 {
			out = append(out, Finding{
				Check: "binding.failedInstances", Severity: SeverityWarning, Object: obj, Field: "status.boundAPIs[" + api.Name + "].instances.failed",
				Problem:  fmt.Sprintf("%d of %d %s objects failed to sync", api.Instances.Failed, api.Instances.Total, api.Name),
				Evidence: fmt.Sprintf("instances: total %d, synced %d, pending %d, failed %d", api.Instances.Total, api.Instances.Synced, api.Instances.Pending, api.Instances.Failed),
				Fix:      fmt.Sprintf("%s get events -A --field-selector type=Warning   # the konnector's Events on the failed objects say why", cmd.Consumer),
				Doc:      docNoSync,
			})
		}
	}
	return out
}

// notAdmittedFinding: a Binding in a namespace its Connection does not
// admit gets nothing; only a cluster admin changes that (BIND-3).
func notAdmittedFinding(b BindingState, conn *kbindv1alpha1.Connection, d admission.Decision, cmd Commands) Finding {
	fix := fmt.Sprintf("# a cluster admin admits the namespace in the Connection's %s, e.g. by name:\n"+
		"%s patch connection %s --type=merge -p '{\"spec\":{\"namespacedBindings\":{\"from\":\"Selector\",\"selector\":{\"matchLabels\":{\"kubernetes.io/metadata.name\":\"%s\"}}}}}'\n"+
		"# or binds the API with a ClusterBinding instead", admission.Field, cmd.Consumer, conn.Name, b.Meta.Namespace)
	if conn.Spec.NamespacedBindingsOf().From != kbindv1alpha1.FromNamespacesNone {
		// Replacing a selector would drop the namespaces it admits.
		fix = fmt.Sprintf("%s edit connection %s   # a cluster admin: make %s admit namespace %s (or label the namespace to match its selector)",
			cmd.Consumer, conn.Name, admission.Field, b.Meta.Namespace)
	}
	return Finding{
		Check: "binding.notAdmitted", Severity: SeverityError, Object: b.object(), Field: "spec.connectionRef.name",
		Problem: admission.Message(conn.Name, b.Meta.Namespace, d) + ": nothing of this Binding is installed or synced",
		Fix:     fix, Doc: docNoSync,
	}
}

// consumerCRDFinding: the guide's first checks for "Ready but nothing
// syncs" — the consumer CRD exists, is Established, and is kbind's for
// this Connection.
func consumerCRDFinding(b BindingState, api, field string, conn *kbindv1alpha1.Connection, crds map[string]ConsumerCRD, cmd Commands) *Finding {
	crd, read := crds[api]
	if crds == nil || !read {
		return nil
	}
	f := Finding{Check: "binding.consumerCRD", Severity: SeverityError, Object: b.object(), Field: field, Doc: docNoSync,
		Evidence: conditionEvidence(b.Status.Conditions, kbindv1alpha1.ConditionSynced)}
	switch {
	case !crd.Found && conn.Spec.Schema.PullPolicy == kbindv1alpha1.PullPolicyNone:
		f.Problem = fmt.Sprintf("there is no consumer CRD %s, and Connection %s has pullPolicy None: kbind does not install it", api, conn.Name)
		f.Fix = fmt.Sprintf("# install the CRD yourself, then mark it as this Connection's:\n%s label crd %s %s=%s\n%s annotate crd %s %s=%s",
			cmd.Consumer, api, kbindv1alpha1.ManagedLabel, kbindv1alpha1.ManagedLabelValue, cmd.Consumer, api, kbindv1alpha1.ConnectionAnnotation, conn.Name)
	case !crd.Found:
		f.Problem = fmt.Sprintf("there is no consumer CRD %s yet: kbind has not installed it", api)
		f.Fix = fmt.Sprintf("%s get %s %s -o yaml   # the Synced condition says what holds the install", cmd.Consumer, b.resource(), b.Meta.Name)
	case !crd.Established:
		f.Problem = fmt.Sprintf("the consumer CRD %s is not Established: the API server does not serve it", api)
		f.Fix = fmt.Sprintf("%s get crd %s -o jsonpath='{.status.conditions}'", cmd.Consumer, api)
	case crd.Managed && crd.Connection != conn.Name && (isReady(b) || refusedRoute(b) != ""):
		// A second route of the API, or one refused as a route
		// (api.routes and binding.notReady say which and why).
		return nil
	case crd.Connection != "" && crd.Connection != conn.Name:
		// Another Connection's CRD: never taken over (its schema, its objects).
		f.Problem = fmt.Sprintf("the consumer CRD %s belongs to Connection %s (annotation %s), not to Connection %s: this binding's entry cannot use it",
			api, crd.Connection, kbindv1alpha1.ConnectionAnnotation, conn.Name)
		f.Fix = removeEntryFix(b, field, cmd) + fmt.Sprintf("\n# to use %s through Connection %s instead, bind it in a binding of that Connection", api, crd.Connection)
	case !crd.Managed || crd.Connection != conn.Name:
		f.Problem = fmt.Sprintf("the consumer CRD %s is not kbind's for Connection %s (label %s=%t, annotation %s=%q): no objects of it sync", api, conn.Name,
			kbindv1alpha1.ManagedLabel, crd.Managed, kbindv1alpha1.ConnectionAnnotation, crd.Connection)
		f.Fix = fmt.Sprintf("# if this Connection should supply it (kbind then replaces its schema with the provider's):\n%s label crd %s %s=%s\n%s annotate crd %s %s=%s",
			cmd.Consumer, api, kbindv1alpha1.ManagedLabel, kbindv1alpha1.ManagedLabelValue, cmd.Consumer, api, kbindv1alpha1.ConnectionAnnotation, conn.Name)
	default:
		return nil
	}
	return &f
}

// projectionFinding: the consumer CRD of the entry's consumer API serves
// another provider API (another binding binds or projects it there), so
// the entry is refused (docs/shaping.md#rules).
func projectionFinding(b BindingState, api kbindv1alpha1.APIReference, field string, crds map[string]ConsumerCRD, cmd Commands) *Finding {
	consumer := api.ConsumerName()
	crd, read := crds[consumer]
	if !read || !crd.Found || crd.ProviderAPI == "" || crd.ProviderAPI == api.Name {
		return nil
	}
	return &Finding{
		Check: "binding.projection", Severity: SeverityError, Object: b.object(), Field: field,
		Problem:  fmt.Sprintf("the consumer API %s serves the provider's %s, and this entry binds %s there: it is refused (ProjectionRefused)", consumer, crd.ProviderAPI, api.Name),
		Evidence: conditionEvidence(b.Status.Conditions, kbindv1alpha1.ConditionReady),
		Fix: fmt.Sprintf("# remove the entry and add it again with a projection onto another group or kind:\n%s edit %s %s",
			cmd.Consumer, b.resource(), b.Meta.Name),
		Doc: "docs/troubleshooting.md#the-binding-says-projectionrefused",
	}
}

// wellFormedAPIName: <plural>.<group>, lowercase, no slash.
func wellFormedAPIName(name string) bool {
	return strings.Contains(name, ".") && !strings.Contains(name, "/") && strings.ToLower(name) == name && !strings.HasPrefix(name, ".")
}

// suggestAPI guesses the exported API meant by a Kind-like or
// group/version-like name: the exported API whose resource is the name's
// lowercase (plural) form, or, for group/version, the only API of the group.
func suggestAPI(name string, exported []kbindv1alpha1.ExportedAPI) string {
	lower := strings.ToLower(name)
	group := strings.SplitN(lower, "/", 2)[0]
	var ofGroup []string
	for _, e := range exported {
		if e.Resource == lower || e.Resource == lower+"s" || e.Resource == lower+"es" || strings.TrimSuffix(e.Resource, "s") == lower {
			return e.Name
		}
		if e.Group == group {
			ofGroup = append(ofGroup, e.Name)
		}
	}
	if len(ofGroup) == 1 {
		return ofGroup[0]
	}
	return ""
}

func findExported(exported []kbindv1alpha1.ExportedAPI, name string) *kbindv1alpha1.ExportedAPI {
	for i := range exported {
		if exported[i].Name == name {
			return &exported[i]
		}
	}
	return nil
}

func exportedEvidence(exported []kbindv1alpha1.ExportedAPI) string {
	if len(exported) == 0 {
		return "the Connection lists no exported APIs"
	}
	names := make([]string, 0, len(exported))
	for _, e := range exported {
		names = append(names, e.Name)
	}
	sort.Strings(names)
	return "exported: " + strings.Join(names, ", ")
}

// Instance is a bound object on the consumer that needs attention: it has
// a conflict annotation or is being deleted.
type Instance struct {
	// API is <plural>.<group>; Kind its kind.
	API, Kind  string
	Meta       metav1.ObjectMeta
	Connection string
	// Binding is the binding that covers it, when known.
	Binding *BindingState
	// Copy is the provider copy's place, and Owner what its markers say
	// ("" when it was not read).
	CopyNamespace, CopyName string
	Owner                   string
	// Copy is the provider copy's state, read for an object whose
	// deletion is stuck (nil: not read).
	Copy *CopyState
}

// CopyState is what the provider says of a deleting object's copy.
type CopyState struct {
	Exists, Deleting bool
	Finalizers       []string
	// ReadError is why the copy could not be read ("" when it was).
	ReadError string
}

// String is the copy's state as evidence.
func (c CopyState) String() string {
	switch {
	case c.ReadError != "":
		return "could not be read: " + c.ReadError
	case !c.Exists:
		return "gone"
	case !c.Deleting:
		return "exists, not being deleted"
	default:
		return fmt.Sprintf("being deleted, finalizers %v", c.Finalizers)
	}
}

// stuck is whether an object's deletion is older than stuckAfter.
func stuck(m metav1.ObjectMeta, now time.Time, stuckAfter time.Duration) bool {
	return m.DeletionTimestamp != nil && now.Sub(m.DeletionTimestamp.Time) >= stuckAfter
}

// checkInstance runs the guide's "Conflicts" and "Deletion is stuck"
// sections for one object. reachErr is its Connection's problem, if any.
func checkInstance(in Instance, connProblem string, now time.Time, stuckAfter time.Duration, cmd Commands) []Finding {
	obj := Object{Cluster: "consumer", Kind: in.Kind, Namespace: in.Meta.Namespace, Name: in.Meta.Name}
	nsFlag := ""
	if in.Meta.Namespace != "" {
		nsFlag = " -n " + in.Meta.Namespace
	}
	copyNS := ""
	if in.CopyNamespace != "" {
		copyNS = " -n " + in.CopyNamespace
	}
	var out []Finding
	if reason := in.Meta.Annotations[kbindv1alpha1.ConflictAnnotation]; reason != "" {
		f := Finding{
			Check: "object.conflict", Severity: SeverityError, Object: obj, Field: "metadata.annotations[" + kbindv1alpha1.ConflictAnnotation + "]",
			Evidence: fmt.Sprintf("%s; provider copy %s %s%s%s", reason, in.API, placeString(in.CopyNamespace, in.CopyName), ownerString(in.Owner), routeString(in)),
			Doc:      docConflicts,
		}
		inspect := fmt.Sprintf("%s%s get %s %s -o yaml   # decide who owns it", cmd.Provider, copyNS, in.API, in.CopyName)
		switch kbindv1alpha1.Reason(reason) {
		case kbindv1alpha1.ReasonForeignObjectExists:
			f.Problem = fmt.Sprintf("the provider already has %s %s, which kbind did not create: it is left untouched and this object does not sync", in.API, placeString(in.CopyNamespace, in.CopyName))
			adopt := "# if this object should take it over (its fields will be overwritten), set conflictPolicy: Adopt on the binding"
			if in.Binding != nil {
				adopt = fmt.Sprintf("%s patch %s %s --type=merge -p '{\"spec\":{\"conflictPolicy\":\"Adopt\"}}'   # only if this object should take it over", cmd.Consumer, in.Binding.resource(), in.Binding.Meta.Name)
			}
			f.Fix = inspect + "\n" + adopt + "\n# otherwise rename this object, or remove the provider object if nothing uses it"
		case kbindv1alpha1.ReasonConsumerObjectExists:
			f.Problem = fmt.Sprintf("the binding imports the provider's own objects, and %s %s on the provider is imported at this object's name: this object, which kbind did not import, holds the name; neither is touched and this object does not sync",
				in.API, placeString(in.CopyNamespace, in.CopyName))
			f.Fix = inspect + fmt.Sprintf("\n# to see the provider's object here, rename this object (or delete it, if nothing uses it):\n%s%s get %s %s -o yaml > mine.yaml   # re-create it under another name", cmd.Consumer, nsFlag, in.API, in.Meta.Name)
		default:
			f.Problem = fmt.Sprintf("the provider copy %s %s belongs to another kbind consumer object: it is left untouched and this object does not sync", in.API, placeString(in.CopyNamespace, in.CopyName))
			f.Fix = inspect + "\n# rename this object; if the owning consumer is gone, its copies are reaped by the backend (docs/backend.md). Adopt never steals a marked object."
		}
		out = append(out, f)
	}
	if stuck(in.Meta, now, stuckAfter) {
		age := now.Sub(in.Meta.DeletionTimestamp.Time).Round(time.Second)
		f := Finding{
			Check: "object.stuckDeleting", Severity: SeverityError, Object: obj, Field: "metadata.finalizers",
			Evidence: fmt.Sprintf("deletionTimestamp %s ago, finalizers %v%s", age, in.Meta.Finalizers, routeString(in)),
			Doc:      docDeletion,
		}
		if in.Copy != nil {
			f.Evidence += fmt.Sprintf("; provider copy %s %s: %s", in.API, placeString(in.CopyNamespace, in.CopyName), in.Copy)
		}
		switch {
		case slices.Contains(in.Meta.Finalizers, kbindv1alpha1.SyncerFinalizer) && in.Copy != nil && in.Copy.Deleting && len(in.Copy.Finalizers) > 0:
			f.Problem = fmt.Sprintf("deletion waits for the provider copy %s %s, which is being deleted and kept by its finalizers %v",
				in.API, placeString(in.CopyNamespace, in.CopyName), in.Copy.Finalizers)
			gc := ""
			if slices.Contains(in.Copy.Finalizers, metav1.FinalizerDeleteDependents) {
				gc = "\n# " + metav1.FinalizerDeleteDependents + " (deletion policy Foreground): the provider's garbage collector removes it once the copy's dependents whose ownerReferences set blockOwnerDeletion are gone"
			}
			f.Fix = fmt.Sprintf("%s%s get %s %s -o yaml   # the provider's controllers owning these finalizers must finish%s\n# To stop waiting and keep the provider copy:\n%s%s annotate %s %s %s=%s --overwrite",
				cmd.Provider, copyNS, in.API, in.CopyName, gc, cmd.Consumer, nsFlag, in.API, in.Meta.Name, kbindv1alpha1.DeletionPolicyAnnotation, kbindv1alpha1.DeletionPolicyOrphan)
		case slices.Contains(in.Meta.Finalizers, kbindv1alpha1.SyncerFinalizer):
			f.Problem = fmt.Sprintf("deletion waits for the konnector to delete the provider copy %s %s (finalizer %s)", in.API, placeString(in.CopyNamespace, in.CopyName), kbindv1alpha1.SyncerFinalizer)
			if connProblem != "" {
				f.Problem += ", and Connection " + in.Connection + " cannot reach the provider: " + connProblem
			}
			f.Fix = fmt.Sprintf("# restore Connection %s (see its finding) and keep the konnector running; do not remove the finalizer.\n# To keep the provider copy instead:\n%s%s annotate %s %s %s=%s",
				in.Connection, cmd.Consumer, nsFlag, in.API, in.Meta.Name, kbindv1alpha1.DeletionPolicyAnnotation, kbindv1alpha1.DeletionPolicyOrphan)
		default:
			f.Problem = fmt.Sprintf("deletion waits on finalizers %v, which kbind does not own", in.Meta.Finalizers)
			f.Fix = fmt.Sprintf("%s%s get events --field-selector involvedObject.name=%s   # the controller owning the finalizer must finish", cmd.Consumer, nsFlag, in.Meta.Name)
		}
		out = append(out, f)
	}
	return out
}

// stuckDeleting reports an object whose deletion is older than stuckAfter.
func stuckDeleting(obj Object, m metav1.ObjectMeta, now time.Time, stuckAfter time.Duration, problem, fix string) *Finding {
	if !stuck(m, now, stuckAfter) {
		return nil
	}
	return &Finding{
		Check: strings.ToLower(obj.Kind[:1]) + obj.Kind[1:] + ".stuckDeleting", Severity: SeverityError, Object: obj, Field: "metadata.finalizers",
		Problem:  problem,
		Evidence: fmt.Sprintf("deletionTimestamp %s ago, finalizers %v", now.Sub(m.DeletionTimestamp.Time).Round(time.Second), m.Finalizers),
		Fix:      fix, Doc: docDeletion,
	}
}

func meta(conds []metav1.Condition, t kbindv1alpha1.ConditionType) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == string(t) {
			return &conds[i]
		}
	}
	return nil
}

func conditionEvidence(conds []metav1.Condition, t kbindv1alpha1.ConditionType) string {
	c := meta(conds, t)
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%s=%s reason %s: %s", c.Type, c.Status, c.Reason, c.Message)
}

func placeString(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func ownerString(owner string) string {
	if owner == "" {
		return ""
	}
	return " (" + owner + ")"
}

func orPlaceholder(s, placeholder string) string {
	if s == "" {
		return placeholder
	}
	return s
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
