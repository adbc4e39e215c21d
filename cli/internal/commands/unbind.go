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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	kbindschema "github.com/kbind/kbind/engine/schema"
)

// stdin is where unbind reads its confirmation, and stdinIsTerminal
// whether a person can answer there (tests replace both).
var (
	stdin           io.Reader = os.Stdin
	stdinIsTerminal           = func() bool { return term.IsTerminal(int(os.Stdin.Fd())) }
)

// unbindPollInterval is how often --wait reads the deleting binding.
const unbindPollInterval = 2 * time.Second

type unbindOptions struct {
	yes, wait bool
	timeout   time.Duration
}

func newUnbind(e *env) *cobra.Command {
	o := unbindOptions{}
	cmd := &cobra.Command{
		Use:   "unbind NAME",
		Short: "Delete a ClusterBinding (or with -n a Binding), saying first what goes with it, protected or not",
		Long: `Delete the ClusterBinding NAME — or, with -n NAMESPACE, the Binding NAME of that namespace — on this
(consumer) cluster, after showing what goes with it, per bound API:

  - the consumer objects it covers (counted on this cluster, metadata only; from the binding's
    status when the API is not served here): they stay, no longer synced; its imported copies of
    the provider's objects are deleted;
  - their provider copies (from the binding's status) and what its deletion policy does to them:
    Delete and Foreground delete them before the binding goes, Orphan keeps them;
  - when the binding is the last ClusterBinding of an API (status.boundAPIs[].unbindDeletesCRD),
    the consumer CRD, and with it every object of it on this cluster.

Then it asks (y/N). On yes it turns spec.deletionProtection off when it is set (a patch made only
while the binding's spec is the one shown) and deletes the binding; the konnector does the rest
(docs/sync.md#deletion). It deletes nothing else itself. --yes skips the question, for scripts;
without a terminal to ask on and without --yes it refuses (exit 2). --wait waits until the binding
is gone, printing its progress.`,
		Example: `  # the ClusterBinding a grant bundle made: shows what goes, asks, then deletes
  kubectl kbind unbind provider --context=consumer

  # a Binding of namespace team-a, in a script, waiting until it is gone
  kubectl kbind unbind widgets -n team-a --yes --wait --context=consumer`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.unbind(cmd.Context(), args[0], o)
		},
	}
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "do not ask: unbind at once (for scripts)")
	cmd.Flags().BoolVar(&o.wait, "wait", false, "wait until the binding is gone, printing its progress")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Minute, "with --wait: how long to wait")
	return cmd
}

// apiPlan is what unbinding does to one bound API.
type apiPlan struct {
	// Name is the consumer API, Provider the provider's when projected.
	Name, Provider string
	// Counted says where the consumer counts come from: "" this cluster,
	// else why the binding's status was used.
	Counted string
	// Objects are the consumer objects the binding covers, Imported those
	// of them that are imported copies of the provider's objects.
	Objects, Imported int
	// Overrides count the covered objects (not imported) whose
	// core.kbind.io/deletion-policy annotation names another policy than
	// the binding's, by policy.
	Overrides map[string]int
	// Copies are the provider copies the binding's status counts (synced,
	// not imported); Pending the objects not synced yet (they may have
	// one).
	Copies, Pending int
	// Policy is the binding's deletion policy (Delete when unset).
	Policy string
	// DeletesCRD: the consumer CRD goes, with AllObjects objects (every
	// object of the API on this cluster).
	DeletesCRD bool
	AllObjects int
}

// unbindPlan is what unbinding a binding does.
type unbindPlan struct {
	Kind, Namespace, Name, Connection string
	Protected, Deleting               bool
	APIs                              []apiPlan
	// NotInStatus are APIs of spec.apis the status does not report yet.
	NotInStatus []string
	// RelatedCopies are the related Secret and ConfigMap copies it keeps.
	RelatedCopies int
}

// ref names the binding as kubectl does.
func (p unbindPlan) ref() string {
	if p.Namespace != "" {
		return p.Kind + " " + p.Namespace + "/" + p.Name
	}
	return p.Kind + " " + p.Name
}

// policyOf is a deletion policy's name, Delete when unset.
func policyOf(p kbindv1alpha1.DeletionPolicy) string {
	if p == "" {
		return kbindv1alpha1.DeletionPolicyDelete
	}
	return string(p)
}

// copiesEffect says what a deletion policy does to the provider copies.
func copiesEffect(policy string) string {
	switch policy {
	case kbindv1alpha1.DeletionPolicyOrphan:
		return "kept on the provider (labelled " + kbindv1alpha1.KeptLabel + ": " + kbindv1alpha1.KeptOrphan + "); a consumer object of the same name created again later meets OwnedByAnother against its kept copy"
	case kbindv1alpha1.DeletionPolicyForeground:
		return "deleted with foreground propagation before the binding goes: each once the provider's garbage collector has deleted its blocking dependents"
	}
	return "deleted before the binding goes"
}

// noun is "1 object" or "n objects".
func noun(n int, singular, pluralForm string) string {
	if n == 1 {
		return "1 " + singular
	}
	return fmt.Sprintf("%d %s", n, pluralForm)
}

// writePlan writes what unbinding does, API by API.
func writePlan(w io.Writer, p unbindPlan) {
	fmt.Fprintf(w, "%s (Connection %s)", p.ref(), p.Connection)
	switch {
	case p.Deleting && p.Protected:
		fmt.Fprint(w, " is being deleted and held by its deletion protection: unbind turns spec.deletionProtection off, which lets the deletion proceed.\n")
	case p.Deleting:
		fmt.Fprint(w, " is being deleted already.\n")
	case p.Protected:
		fmt.Fprint(w, " is protected from deletion (spec.deletionProtection: true): unbind turns that off, then deletes it.\n")
	default:
		fmt.Fprint(w, " is not protected from deletion: unbind deletes it.\n")
	}
	fmt.Fprintln(w, "What goes with it:")
	if len(p.APIs) == 0 && len(p.NotInStatus) == 0 {
		fmt.Fprintln(w, "  no bound API: nothing but the binding")
	}
	for _, a := range p.APIs {
		writeAPIPlan(w, a)
	}
	for _, api := range p.NotInStatus {
		fmt.Fprintf(w, "  %s: not in the binding's status yet, nothing counted\n", api)
	}
	if p.RelatedCopies > 0 {
		fmt.Fprintf(w, "  related Secrets and ConfigMaps: %s the binding made deleted\n", noun(p.RelatedCopies, "copy", "copies"))
	}
}

// writeAPIPlan writes what unbinding does to one API.
func writeAPIPlan(w io.Writer, a apiPlan) {
	name := a.Name
	if a.Provider != "" {
		name += " (the provider's " + a.Provider + ")"
	}
	fmt.Fprintf(w, "  %s:\n", name)
	counted := ""
	if a.Counted != "" {
		counted = " (" + a.Counted + ")"
	}
	fate := "they stay on this cluster, no longer synced"
	if a.DeletesCRD {
		fate = "released, then deleted with the consumer CRD (below)"
	}
	fmt.Fprintf(w, "    consumer objects: %s it covers%s: %s\n", noun(a.Objects-a.Imported, "object", "objects"), counted, fate)
	if a.Imported > 0 {
		fmt.Fprintf(w, "    imported copies: %s of the provider's objects deleted on this cluster (the provider's objects stay)\n", noun(a.Imported, "copy", "copies"))
	}
	pending := ""
	if a.Pending > 0 {
		pending = fmt.Sprintf(", and %s not synced yet that may have one", noun(a.Pending, "object", "objects"))
	}
	fmt.Fprintf(w, "    provider copies: %s%s, deletionPolicy %s: %s\n", noun(a.Copies, "copy", "copies"), pending, a.Policy, copiesEffect(a.Policy))
	for _, policy := range []string{kbindv1alpha1.DeletionPolicyDelete, kbindv1alpha1.DeletionPolicyOrphan, kbindv1alpha1.DeletionPolicyForeground} {
		if n := a.Overrides[policy]; n > 0 {
			fmt.Fprintf(w, "      but %s annotated %s: %s: %s\n", noun(n, "object", "objects"), kbindv1alpha1.DeletionPolicyAnnotation, policy, copiesEffect(policy))
		}
	}
	if a.DeletesCRD {
		fmt.Fprintf(w, "    the consumer CRD %s is deleted (the last ClusterBinding of the API), and with it every object of it on this cluster: %s\n",
			a.Name, noun(a.AllObjects, "object", "objects"))
	}
}

// confirmation decides how unbind proceeds: at once (--yes), by asking
// (a terminal), or not at all (a usage error: nobody can answer).
// refusal is the usage error's message.
func confirmation(yes, terminal bool, refusal string) (ask bool, err error) {
	switch {
	case yes:
		return false, nil
	case terminal:
		return true, nil
	}
	return false, usageError{errors.New(refusal)}
}

// confirmed reads the answer: y or yes, in any case; anything else
// (nothing included) is no.
func confirmed(r io.Reader) bool {
	line, _ := bufio.NewReader(r).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

func (e *env) unbind(ctx context.Context, name string, o unbindOptions) error {
	c, _, err := e.client()
	if err != nil {
		return err
	}
	ns := *e.flags.Namespace
	var b kbindv1alpha1.BindingObject = &kbindv1alpha1.ClusterBinding{}
	if ns != "" {
		b = &kbindv1alpha1.Binding{}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
		if apierrors.IsNotFound(err) && ns == "" {
			return fmt.Errorf("there is no ClusterBinding %s on this cluster (for a Binding, name its namespace with -n)", name)
		}
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("there is no Binding %s in namespace %s", name, ns)
		}
		return fmt.Errorf("reading %s %s: %w", b.BindingKind(), name, err)
	}
	plan := planOf(ctx, c, b)
	writePlan(e.out, plan)
	ask, err := confirmation(o.yes, stdinIsTerminal(), "unbind asks before it deletes, and there is no terminal to ask on: pass --yes to unbind without asking")
	if err != nil {
		return err
	}
	if ask {
		fmt.Fprintf(e.out, "Unbind %s? [y/N] ", plan.ref())
		if !confirmed(stdin) {
			fmt.Fprintln(e.out)
			return fmt.Errorf("not confirmed: nothing was changed")
		}
	}
	if b.BindingSpec().DeletionProtection {
		if err := unprotect(ctx, c, b, plan.ref()); err != nil {
			return err
		}
		fmt.Fprintf(e.out, "%s: deletion protection turned off\n", plan.ref())
	}
	uid := b.GetUID()
	if err := c.Delete(ctx, b, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", plan.ref(), err)
	}
	fmt.Fprintf(e.out, "%s deleted: the konnector releases its objects", plan.ref())
	if !o.wait {
		fmt.Fprintf(e.out, " (kubectl kbind status shows the progress; --wait waits)\n")
		return nil
	}
	fmt.Fprintln(e.out, "; waiting until it is gone")
	return waitGone(ctx, c, b, plan.ref(), e.out, o.timeout)
}

// unprotect turns b's deletion protection off with a patch that holds
// only while b is what was shown: its resourceVersion is the patch's
// precondition; when the konnector wrote its status meanwhile, the patch
// is made again on the binding read anew, as long as its spec and UID are
// the ones shown.
func unprotect(ctx context.Context, c client.Client, b kbindv1alpha1.BindingObject, ref string) error {
	shown := b.BindingSpec().DeepCopy()
	uid := b.GetUID()
	for attempt := 0; ; attempt++ {
		base := b.DeepCopyObject().(client.Object)
		b.BindingSpec().DeletionProtection = false
		err := c.Patch(ctx, b, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return nil
		case !apierrors.IsConflict(err) || attempt == 2:
			return fmt.Errorf("turning the deletion protection of %s off: %w", ref, err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return fmt.Errorf("reading %s again: %w", ref, err)
		}
		if b.GetUID() != uid || !equality.Semantic.DeepEqual(b.BindingSpec(), shown) {
			return fmt.Errorf("%s changed since it was read: nothing was changed; run unbind again to see what goes now", ref)
		}
	}
}

// waitGone polls the binding until it is gone, printing each new state.
func waitGone(ctx context.Context, c client.Client, b kbindv1alpha1.BindingObject, ref string, w io.Writer, timeout time.Duration) error {
	last := ""
	err := wait.PollUntilContextTimeout(ctx, unbindPollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, nil // a failed read is retried until the timeout
		}
		if p := progressOf(b); p != last {
			fmt.Fprintf(w, "  %s\n", p)
			last = p
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s is still there after %s (%s): kubectl kbind doctor says why", ref, timeout, last)
	}
	fmt.Fprintf(w, "%s is gone\n", ref)
	return nil
}

// progressOf is a deleting binding's state: its Ready condition and the
// objects still deleting.
func progressOf(b kbindv1alpha1.BindingObject) string {
	var parts []string
	for _, a := range b.BindingStatus().BoundAPIs {
		if a.Instances != nil {
			parts = append(parts, fmt.Sprintf("%s: %d of %d objects waiting for their provider copies", a.Name, a.Instances.Pending, a.Instances.Total))
		}
	}
	if c := meta.FindStatusCondition(b.BindingStatus().Conditions, string(kbindv1alpha1.ConditionReady)); c != nil && c.Status != metav1.ConditionTrue {
		parts = append(parts, fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message))
	}
	if len(parts) == 0 {
		return "deleting"
	}
	return strings.Join(parts, "; ")
}

// planOf reads what unbinding b does: per bound API its status, and the
// consumer objects counted on this cluster (metadata only).
func planOf(ctx context.Context, c client.Client, b kbindv1alpha1.BindingObject) unbindPlan {
	spec, status := b.BindingSpec(), b.BindingStatus()
	plan := unbindPlan{Kind: b.BindingKind(), Namespace: b.GetNamespace(), Name: b.GetName(), Connection: spec.ConnectionRef.Name,
		Protected: spec.DeletionProtection, Deleting: !b.GetDeletionTimestamp().IsZero()}
	if status.RelatedResources != nil {
		plan.RelatedCopies = int(status.RelatedResources.Copies)
	}
	inStatus := map[string]bool{}
	for _, s := range status.BoundAPIs {
		inStatus[s.Name] = true
		var entry *kbindv1alpha1.APIReference
		if e, ok := spec.APIFor(s.Name); ok {
			entry = &e
		}
		a := apiPlan{Name: s.Name, Provider: s.ProviderAPI, Policy: policyOf(spec.DeletionPolicy),
			DeletesCRD: b.BindingKind() == "ClusterBinding" && (s.UnbindDeletesCRD || crdGoes(ctx, c, b, s.Name))}
		if s.Instances != nil {
			a.Copies = int(s.Instances.Synced - s.Instances.Imported)
			a.Pending = int(s.Instances.Pending)
		}
		objs, err := listAPI(ctx, c, s.Name, b.GetNamespace())
		if err != nil {
			a.Counted = "from the binding's status: " + err.Error()
			if s.Instances != nil {
				a.Objects, a.Imported, a.AllObjects = int(s.Instances.Total), int(s.Instances.Imported), int(s.Instances.Total)
			}
		} else {
			a.AllObjects = len(objs)
			a.Objects, a.Imported, a.Overrides = coverage(objs, covers(ctx, c, spec, entry, b.BindingKind()), a.Policy)
		}
		plan.APIs = append(plan.APIs, a)
	}
	for _, api := range spec.ConsumerNames() {
		if !inStatus[api] {
			plan.NotInStatus = append(plan.NotInStatus, api)
		}
	}
	return plan
}

// crdGoes reads on this cluster what status.boundAPIs[].unbindDeletesCRD
// says (a konnector older than the field leaves it false) and decides with
// the konnector's own rule (kbindschema.UnbindDeletesCRD, SCHEMA-6):
// whether deleting the ClusterBinding b deletes the consumer CRD of api. A
// read that fails says no.
func crdGoes(ctx context.Context, c client.Client, b kbindv1alpha1.BindingObject, api string) bool {
	connection := b.BindingSpec().ConnectionRef.Name
	conn := &kbindv1alpha1.Connection{}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	cbs, bs := &kbindv1alpha1.ClusterBindingList{}, &kbindv1alpha1.BindingList{}
	if c.Get(ctx, client.ObjectKey{Name: connection}, conn) != nil || c.Get(ctx, client.ObjectKey{Name: api}, crd) != nil ||
		c.List(ctx, cbs) != nil || c.List(ctx, bs) != nil {
		return false
	}
	fate := kbindschema.UnbindFate{
		Connection: true, PullPolicy: conn.Spec.Schema.PullPolicy,
		CRD: true, CreatedForConnection: kbindschema.CreatedByKbind(crd, connection), CRDDeleting: !crd.DeletionTimestamp.IsZero(),
	}
	for _, o := range cbs.Items {
		if o.UID != b.GetUID() && slices.Contains(o.Spec.ConsumerNames(), api) {
			fate.OtherBindings++
		}
	}
	for _, o := range bs.Items {
		if slices.Contains(o.Spec.ConsumerNames(), api) {
			fate.OtherBindings++
		}
	}
	return kbindschema.UnbindDeletesCRD(fate)
}

// coverage counts the objects covered: all, imported, and those whose
// annotation names another deletion policy than the binding's.
func coverage(objs []metav1.PartialObjectMetadata, covered func(metav1.PartialObjectMetadata) bool, policy string) (total, imported int, overrides map[string]int) {
	overrides = map[string]int{}
	for _, o := range objs {
		if !covered(o) {
			continue
		}
		total++
		if o.Annotations[kbindv1alpha1.OwnerAnnotation] == kbindv1alpha1.OwnerProvider {
			imported++
			continue
		}
		if p := o.Annotations[kbindv1alpha1.DeletionPolicyAnnotation]; p != "" && p != policy {
			overrides[p]++
		}
	}
	return total, imported, overrides
}

// covers returns whether the binding covers an object: in its namespace
// (listAPI read only that one for a Binding) or one its namespaceSelector
// selects, and selected by the entry's objectSelector. A selector that
// does not parse, or namespaces that cannot be read, cover everything
// (the count is then an upper bound).
func covers(ctx context.Context, c client.Client, spec *kbindv1alpha1.BindingSpec, entry *kbindv1alpha1.APIReference, kind string) func(metav1.PartialObjectMetadata) bool {
	objects := labels.Everything()
	if entry != nil && entry.ObjectSelector != nil {
		if s, err := metav1.LabelSelectorAsSelector(entry.ObjectSelector); err == nil {
			objects = s
		}
	}
	var namespaces map[string]bool
	if kind == "ClusterBinding" && spec.NamespaceSelector != nil {
		if s, err := metav1.LabelSelectorAsSelector(spec.NamespaceSelector); err == nil {
			nss := &metav1.PartialObjectMetadataList{}
			nss.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "NamespaceList"})
			if err := c.List(ctx, nss, client.MatchingLabelsSelector{Selector: s}); err == nil {
				namespaces = map[string]bool{}
				for _, ns := range nss.Items {
					namespaces[ns.Name] = true
				}
			}
		}
	}
	return func(o metav1.PartialObjectMetadata) bool {
		if namespaces != nil && o.Namespace != "" && !namespaces[o.Namespace] {
			return false
		}
		return objects.Matches(labels.Set(o.Labels))
	}
}

// listAPI lists, metadata only, the objects of api (<plural>.<group>) on
// this cluster: of namespace ns when not "", else all.
func listAPI(ctx context.Context, c client.Client, api, ns string) ([]metav1.PartialObjectMetadata, error) {
	resource, group, _ := strings.Cut(api, ".")
	gvk, err := c.RESTMapper().KindFor(schema.GroupVersionResource{Group: group, Resource: resource})
	if err != nil {
		return nil, errors.New("the API is not served on this cluster")
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing its objects: %v", err)
	}
	return list.Items, nil
}
