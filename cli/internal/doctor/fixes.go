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
	"regexp"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// KonnectorInstall is what the Helm install of the konnector chart needs
// to know of the consumer, for a command that runs as printed.
type KonnectorInstall struct {
	// Groups are the API groups of the APIs bound (else exported) on this
	// consumer: the chart's required rbac.boundResourceGroups.
	Groups []string
	// UnmanagedCRDs are kbind's CRDs that exist on the cluster without
	// Helm's ownership of the release konnector in namespace kbind: Helm
	// refuses to adopt them, so the chart must not install CRDs.
	UnmanagedCRDs []string
	// Context is the consumer's kubeconfig context ("" the current one).
	Context string
}

// The release doctor's Helm commands install: the names docs/installation.md uses.
const (
	releaseName      = "konnector"
	releaseNamespace = "kbind"
	chartPath        = "charts/konnector"
)

// HelmInstallCommand is the helm install of the konnector chart for this
// consumer: rbac.boundResourceGroups from the groups (a placeholder when
// none is known), installCRDs=false when kbind's CRDs exist without Helm.
func (k KonnectorInstall) HelmInstallCommand() string {
	groups := "<the API groups you bind, e.g. example.org>"
	if len(k.Groups) > 0 {
		groups = strings.Join(k.Groups, ",")
	}
	s := fmt.Sprintf("helm install %s %s -n %s --create-namespace --set 'rbac.boundResourceGroups={%s}'", releaseName, chartPath, releaseNamespace, groups)
	if len(k.UnmanagedCRDs) > 0 {
		s += " --set installCRDs=false"
	}
	if k.Context != "" {
		s += " --kube-context=" + k.Context
	}
	return s
}

// chartRefusedGroup reports the groups the chart refuses in
// rbac.boundResourceGroups: Kubernetes' own and kbind's.
func chartRefusedGroup(g string) bool {
	switch g {
	case "", "apps", "batch", "extensions", "policy", "autoscaling", kbindv1alpha1.GroupVersion.Group:
		return true
	}
	return g == "k8s.io" || strings.HasSuffix(g, ".k8s.io")
}

// BoundGroups are the API groups of the consumer APIs the bindings list,
// or, when no binding lists one, of the APIs the Connections' providers
// export; sorted, without the groups the chart refuses.
func BoundGroups(bindings []BindingState, conns []kbindv1alpha1.Connection) []string {
	var out []string
	add := func(g string) {
		if !chartRefusedGroup(g) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	for _, b := range bindings {
		for _, api := range b.Spec.APIs {
			if name := api.ConsumerName(); wellFormedAPIName(name) {
				add(name[strings.Index(name, ".")+1:])
			}
		}
	}
	if len(out) == 0 {
		for _, c := range conns {
			for _, e := range c.Status.ExportedAPIs {
				add(e.Group)
			}
		}
	}
	slices.Sort(out)
	return out
}

// HelmOwned reports whether an object with these labels and annotations
// belongs to the release Helm would install: Helm adopts nothing else.
func HelmOwned(objLabels, annotations map[string]string) bool {
	return objLabels["app.kubernetes.io/managed-by"] == "Helm" &&
		annotations["meta.helm.sh/release-name"] == releaseName &&
		annotations["meta.helm.sh/release-namespace"] == releaseNamespace
}

// allowedNamespacesMessage is how the konnector says a Connection's Secret
// is in a namespace it may not read (engine/connection resolveSecret).
var allowedNamespacesMessage = regexp.MustCompile(`namespace "([^"]*)" is not one of the konnector's allowed Secret namespaces \(\[([^\]]*)\]\)`)

// secretNamespaceFinding: the Connection's SecretValid condition says the
// konnector may not read the Secret's namespace (reason SecretNotFound,
// as for every Secret problem); doctor, reading with its own rights,
// cannot tell, so it reports what the condition says.
func secretNamespaceFinding(c kbindv1alpha1.Connection, cmd Commands) *Finding {
	cond := meta(c.Status.Conditions, kbindv1alpha1.ConditionSecretValid)
	if cond == nil || cond.Status != metav1.ConditionFalse {
		return nil
	}
	m := allowedNamespacesMessage.FindStringSubmatch(cond.Message)
	if m == nil {
		return nil
	}
	ns, allowed := m[1], strings.Fields(m[2])
	ref := c.Spec.KubeconfigSecretRef
	fix := fmt.Sprintf("# spec.kubeconfigSecretRef is immutable: let the konnector read namespace %s — its flag --secret-namespaces=%s (config key secret-namespaces), or with the chart:\n",
		ns, strings.Join(append(slices.Clone(allowed), ns), ","))
	if k := cmd.KonnectorRelease; k != nil {
		fix += fmt.Sprintf("helm upgrade %s %s -n %s --reuse-values --set 'secretNamespaces={%s}'%s", k.Name, chartPath, k.Namespace,
			strings.Join(append(slices.Clone(allowed), ns), ","), kubeContextFlag(cmd.Konnector.Context))
	} else {
		fix += fmt.Sprintf("# helm upgrade konnector %s -n kbind --reuse-values --set 'secretNamespaces={%s}'", chartPath, strings.Join(append(slices.Clone(allowed), ns), ","))
	}
	if len(allowed) > 0 {
		fix += fmt.Sprintf("\n# or create a new Connection whose Secret is in namespace %s (kubectl kbind grant on the provider prints one)", allowed[0])
	}
	return &Finding{
		Check: "connection.secret", Severity: SeverityError, Object: connectionObject(c), Field: "spec.kubeconfigSecretRef.namespace",
		Problem: fmt.Sprintf("the konnector may not read Secret %s/%s: namespace %s is not one of its allowed Secret namespaces (%s)",
			ref.Namespace, ref.Name, ns, strings.Join(allowed, ", ")),
		Evidence: conditionEvidence(c.Status.Conditions, kbindv1alpha1.ConditionSecretValid),
		Fix:      fix, Doc: docConnection,
	}
}

func kubeContextFlag(context string) string {
	if context == "" {
		return ""
	}
	return " --kube-context=" + context
}

// HelmRelease is the Helm release of a konnector Deployment found.
type HelmRelease struct{ Name, Namespace string }

// deletionProtectedFinding: a deleting Connection or binding that is
// protected (Ready=False DeletionProtected) waits, draining nothing, until
// protection is turned off; a Terminating object cannot be revived.
func deletionProtectedFinding(obj Object, resource string, conds []metav1.Condition, cmd Commands) *Finding {
	cond := meta(conds, kbindv1alpha1.ConditionReady)
	if cond == nil || cond.Status == metav1.ConditionTrue || cond.Reason != string(kbindv1alpha1.ReasonDeletionProtected) {
		return nil
	}
	fix := fmt.Sprintf("%s patch %s %s --type=merge -p '{\"spec\":{\"deletionProtection\":false}}'   # the deletion you asked for then proceeds", cmd.Consumer, resource, obj.Name)
	if obj.Kind != "Connection" {
		fix += fmt.Sprintf("\n# or, showing what goes on both sides first: kubectl kbind unbind %s", obj.Name)
		if obj.Namespace != "" {
			fix += " -n " + obj.Namespace
		}
		fix += "\n# to keep the provider copies, first: " + fmt.Sprintf("%s patch %s %s --type=merge -p '{\"spec\":{\"deletionPolicy\":\"Orphan\"}}'", cmd.Consumer, resource, obj.Name)
	}
	return &Finding{
		Check: strings.ToLower(obj.Kind[:1]) + obj.Kind[1:] + ".deletionProtected", Severity: SeverityWarning, Object: obj, Field: "spec.deletionProtection",
		Problem:  fmt.Sprintf("the %s is being deleted but is protected (spec.deletionProtection): it drains nothing and waits; a Terminating object cannot be revived, only its deletion let proceed", obj.Kind),
		Evidence: conditionEvidence(conds, kbindv1alpha1.ConditionReady),
		Fix:      fix, Doc: "docs/troubleshooting.md#deletion-is-stuck",
	}
}

// providerGoneForGood reports whether the Connection's provider refuses
// its credentials or cannot be reached: a deleting binding then waits
// for ever unless its objects are orphaned.
func providerGoneForGood(p *ConnectionProbe) bool {
	return p != nil && p.Secret == SecretOK && !p.Reached && !apierrors.IsForbidden(p.ReachErr)
}

// orphanWayOut is the fix of a binding stuck deleting behind a provider
// that refuses its credentials or cannot be reached (after kubectl kbind
// revoke, or a provider gone): the Orphan deletion policy releases its
// objects without the provider (docs/sync.md#deletion).
func orphanWayOut(b BindingState, p *ConnectionProbe, cmd Commands) Finding {
	why := "cannot be reached"
	if apierrors.IsUnauthorized(p.ReachErr) {
		why = "refuses the Connection's credentials (Unauthorized: revoked, or expired)"
	}
	return Finding{
		Check: strings.ToLower(b.Kind[:1]) + b.Kind[1:] + ".stuckDeleting", Severity: SeverityError, Object: b.object(), Field: "metadata.finalizers",
		Problem: fmt.Sprintf("the binding waits to delete its objects' provider copies, but the provider of Connection %s %s: "+
			"it waits for ever unless the Connection works again, or its objects are released with the Orphan deletion policy", b.Spec.ConnectionRef.Name, why),
		Evidence: fmt.Sprintf("deletionTimestamp set, finalizers %v; reading the provider's identity: %s", b.Meta.Finalizers, errString(p.ReachErr)),
		Fix: fmt.Sprintf("%s patch %s %s --type=merge -p '{\"spec\":{\"deletionPolicy\":\"Orphan\"}}'\n"+
			"# releases every object of the binding without the provider: their provider copies STAY on the provider (labelled core.kbind.io/kept=Orphan), delete them there once nothing needs them;\n"+
			"# an object annotated %s: Delete or Foreground overrides this: set it to Orphan too. A ClusterBinding that is the last of an API still deletes the consumer CRD with its objects.\n"+
			"# or renew the credentials (kubectl kbind grant on the provider) and the binding drains normally",
			cmd.Consumer, b.resource(), b.Meta.Name, kbindv1alpha1.DeletionPolicyAnnotation),
		Doc: docDeletion,
	}
}

// removeEntryFix removes the binding's spec.apis entry at field
// ("spec.apis[i].name"), or deletes the binding when it is its only one
// (a binding lists at least one API).
func removeEntryFix(b BindingState, field string, cmd Commands) string {
	if len(b.Spec.APIs) <= 1 {
		return fmt.Sprintf("%s delete %s %s   # its only entry: create a binding of the right Connection instead", cmd.Consumer, b.resource(), b.Meta.Name)
	}
	var i int
	if _, err := fmt.Sscanf(field, "spec.apis[%d]", &i); err != nil {
		return fmt.Sprintf("%s edit %s %s   # remove the entry %s", cmd.Consumer, b.resource(), b.Meta.Name, field)
	}
	return fmt.Sprintf("%s patch %s %s --type=json -p '[{\"op\":\"test\",\"path\":\"/spec/apis/%d/name\",\"value\":\"%s\"},{\"op\":\"remove\",\"path\":\"/spec/apis/%d\"}]'   # removes the entry (it unbinds)",
		cmd.Consumer, b.resource(), b.Meta.Name, i, b.Spec.APIs[i].Name, i)
}
