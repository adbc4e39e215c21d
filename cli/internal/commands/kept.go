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
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/internal/doctor"
	"github.com/kbind/kbind/engine/isolation"
	"github.com/kbind/kbind/engine/syncer"
)

type keptOptions struct {
	delete, yes bool
	timeout     time.Duration
}

func newKept(e *env) *cobra.Command {
	o := keptOptions{}
	cmd := &cobra.Command{
		Use:   "kept clusterbinding/NAME | binding/NAME -n NAMESPACE",
		Short: "List (--delete: delete) the provider copies a binding's deletion protection kept",
		Long: `List the provider copies that the deletion protection of a binding of this (consumer) cluster kept
instead of deleting (docs/bindings.md#deletion-protection): copies of objects the binding stopped
selecting (their labels, their namespace's labels, a selector edit) and of APIs removed from it.
They are read on the provider with the Connection's own credentials, per API of the binding's
status (boundAPIs and keptCopies): exactly the copies labelled core.kbind.io/kept=DeletionProtection,
annotated core.kbind.io/kept-by with this binding and carrying this consumer cluster's markers
(core.kbind.io/consumer-cluster-uid, label and annotation, is the UID of this cluster's kube-system
namespace). Nothing else is ever listed or deleted: not a copy of another consumer cluster, not a
provider object without kbind's markers, whatever its labels say.

--delete deletes exactly the copies listed, each only while it is the object listed (its UID is the
delete's precondition), after showing them and asking (y/N). --yes skips the question, for scripts;
without a terminal to ask on and without --yes it refuses (exit 2). Deleting a kept copy deletes
provider data for good; the consumer objects, if any, are not touched (an object selected again
later syncs to a new copy).`,
		Example: `  # what the protected ClusterBinding provider kept on the provider
  kubectl kbind kept clusterbinding/provider

  # delete what the Binding widgets of namespace team-a kept, asking first
  kubectl kbind kept binding/widgets -n team-a --delete`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := parseBindingRef(args[0], *e.flags.Namespace)
			if err != nil {
				return err
			}
			return e.kept(cmd.Context(), kind, name, o)
		},
	}
	cmd.Flags().BoolVar(&o.delete, "delete", false, "delete the kept copies listed, after asking")
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "with --delete: do not ask (for scripts)")
	cmd.Flags().DurationVar(&o.timeout, "request-timeout-provider", 10*time.Second, "the timeout of each request to the provider")
	return cmd
}

// parseBindingRef reads "clusterbinding/NAME" or "binding/NAME" (plural
// and .core.kbind.io spellings too) with the -n flag's namespace ns: a
// Binding needs one, a ClusterBinding has none.
func parseBindingRef(arg, ns string) (kind, name string, err error) {
	resource, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", "", usageError{fmt.Errorf("%q: name the binding as clusterbinding/NAME or binding/NAME -n NAMESPACE", arg)}
	}
	switch strings.TrimSuffix(strings.ToLower(resource), "."+kbindv1alpha1.GroupVersion.Group) {
	case "clusterbinding", "clusterbindings":
		if ns != "" {
			return "", "", usageError{fmt.Errorf("%q: a ClusterBinding has no namespace; drop -n %s", arg, ns)}
		}
		return "ClusterBinding", name, nil
	case "binding", "bindings":
		if ns == "" {
			return "", "", usageError{fmt.Errorf("%q: name the Binding's namespace with -n", arg)}
		}
		return "Binding", name, nil
	}
	return "", "", usageError{fmt.Errorf("%q: name the binding as clusterbinding/NAME or binding/NAME -n NAMESPACE", arg)}
}

// keptCopy is one kept provider copy.
type keptCopy struct {
	// API is the consumer API, Provider the provider's it was read as.
	API, Provider   string
	GVK             schema.GroupVersionKind
	Namespace, Name string
	UID             types.UID
	Created         time.Time
}

// keptScope is what makes a provider copy one this binding kept: the kept
// label's value, the binding's kept-by annotation and this consumer
// cluster's UID.
type keptScope struct {
	ClusterUID, KeptBy string
}

// selector is the server-side part of the scope: the kept label and this
// consumer cluster's UID label.
func (s keptScope) selector() client.MatchingLabels {
	return client.MatchingLabels{kbindv1alpha1.KeptLabel: kbindv1alpha1.KeptDeletionProtection, kbindv1alpha1.ConsumerClusterUIDLabel: s.ClusterUID}
}

// keeps reports whether provider object o is a copy of this scope: kbind's
// markers of this consumer cluster (the cluster UID as label and
// annotation, an object UID), the kept label and the binding's kept-by
// annotation. Anything else — another cluster's copy, a provider object
// without markers, a copy another binding kept — is never listed, never
// deleted.
func (s keptScope) keeps(o metav1.Object) bool {
	l, a := o.GetLabels(), o.GetAnnotations()
	return s.ClusterUID != "" && s.KeptBy != "" &&
		l[kbindv1alpha1.KeptLabel] == kbindv1alpha1.KeptDeletionProtection &&
		l[kbindv1alpha1.ConsumerClusterUIDLabel] == s.ClusterUID &&
		a[kbindv1alpha1.ConsumerClusterUIDAnnotation] == s.ClusterUID &&
		a[kbindv1alpha1.ConsumerObjectUIDAnnotation] != "" &&
		a[kbindv1alpha1.KeptByAnnotation] == s.KeptBy
}

// keptAPI is one API whose kept copies are looked for: the consumer API
// and the provider's.
type keptAPI struct{ Name, Provider string }

// keptAPIs are the APIs of b's status (boundAPIs, then keptCopies: an API
// removed from spec.apis is only there), each provider API once, sorted.
func keptAPIs(status *kbindv1alpha1.BindingStatus) []keptAPI {
	seen := map[string]bool{}
	var out []keptAPI
	add := func(name, provider string) {
		if provider == "" {
			provider = name
		}
		if name == "" || seen[provider] {
			return
		}
		seen[provider] = true
		out = append(out, keptAPI{Name: name, Provider: provider})
	}
	for _, a := range status.BoundAPIs {
		add(a.Name, a.ProviderAPI)
	}
	for _, k := range status.KeptCopies {
		add(k.Name, k.ProviderAPI)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (e *env) kept(ctx context.Context, kind, name string, o keptOptions) error {
	c, _, err := e.client()
	if err != nil {
		return err
	}
	ns := *e.flags.Namespace
	var b kbindv1alpha1.BindingObject = &kbindv1alpha1.ClusterBinding{}
	if kind == "Binding" {
		b = &kbindv1alpha1.Binding{}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
		if apierrors.IsNotFound(err) && kind == "ClusterBinding" {
			return fmt.Errorf("there is no ClusterBinding %s on this cluster", name)
		}
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("there is no Binding %s in namespace %s", name, ns)
		}
		return fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	ref := kind + " " + name
	if ns != "" {
		ref = kind + " " + ns + "/" + name
	}
	// This consumer cluster's identity: the UID of its kube-system
	// namespace, as the konnector records it in the markers.
	kubeSystem := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: "kube-system"}, kubeSystem); err != nil {
		return fmt.Errorf("reading this cluster's identity (the UID of namespace kube-system): %w", err)
	}
	conn := &kbindv1alpha1.Connection{}
	if err := c.Get(ctx, client.ObjectKey{Name: b.BindingSpec().ConnectionRef.Name}, conn); err != nil {
		return fmt.Errorf("reading Connection %s of %s: %w", b.BindingSpec().ConnectionRef.Name, ref, err)
	}
	cfg, err := doctor.ProviderConfig(ctx, c, *conn, o.timeout)
	if err != nil {
		return err
	}
	provider, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("connecting to the provider of Connection %s: %w", conn.Name, err)
	}
	scope := keptScope{ClusterUID: string(kubeSystem.UID), KeptBy: syncer.KeptBy(b)}
	apis := keptAPIs(b.BindingStatus())
	// Where the copies live: a Binding's in the provider namespace of its
	// own; a ClusterBinding's in the isolation namespace under Namespace
	// isolation, else anywhere.
	mapping := isolation.For(conn.Spec.IsolationOf())
	where := mapping.ConfinedTo()
	if kind == "Binding" {
		where = mapping.Namespace(ns)
	}
	copies, problems := listKept(ctx, provider, scope, where, apis)
	writeKept(e.out, ref, conn.Name, copies, problems, b.BindingStatus().KeptCopies, time.Now())
	if !o.delete {
		if len(problems) > 0 {
			return exitCode(exitFailed)
		}
		return nil
	}
	if len(copies) == 0 {
		fmt.Fprintln(e.out, "Nothing to delete.")
		if len(problems) > 0 {
			return exitCode(exitFailed)
		}
		return nil
	}
	ask, err := confirmation(o.yes, stdinIsTerminal(),
		"kept --delete asks before it deletes, and there is no terminal to ask on: pass --yes to delete without asking")
	if err != nil {
		return err
	}
	if ask {
		fmt.Fprintf(e.out, "Delete these %s on the provider, for good? [y/N] ", noun(len(copies), "copy", "copies"))
		if !confirmed(stdin) {
			fmt.Fprintln(e.out)
			return fmt.Errorf("not confirmed: nothing was deleted")
		}
	}
	return deleteKept(ctx, provider, copies, e.out)
}

// listKept lists, metadata only, the copies of scope of each API on the
// provider (of a namespaced API in namespace ns when not ""); problems say
// which APIs could not be read.
func listKept(ctx context.Context, provider client.Client, scope keptScope, ns string, apis []keptAPI) (copies []keptCopy, problems []string) {
	for _, a := range apis {
		resource, group, _ := strings.Cut(a.Provider, ".")
		gvk, err := provider.RESTMapper().KindFor(schema.GroupVersionResource{Group: group, Resource: resource})
		var mapping *meta.RESTMapping
		if err == nil {
			mapping, err = provider.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: the provider does not serve %s", a.Name, a.Provider))
			continue
		}
		in := ns
		if mapping.Scope.Name() == meta.RESTScopeNameRoot {
			in = ""
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := provider.List(ctx, list, client.InNamespace(in), scope.selector()); err != nil {
			problems = append(problems, fmt.Sprintf("%s: listing its kept copies on the provider: %v", a.Name, err))
			continue
		}
		for i := range list.Items {
			o := &list.Items[i]
			if !scope.keeps(o) {
				continue
			}
			copies = append(copies, keptCopy{API: a.Name, Provider: a.Provider, GVK: gvk, Namespace: o.Namespace, Name: o.Name, UID: o.UID, Created: o.CreationTimestamp.Time})
		}
	}
	sort.SliceStable(copies, func(i, j int) bool {
		if copies[i].API != copies[j].API {
			return copies[i].API < copies[j].API
		}
		return copies[i].Namespace+"/"+copies[i].Name < copies[j].Namespace+"/"+copies[j].Name
	})
	return copies, problems
}

// writeKept writes the kept copies as a table, with what the binding's
// status counts and the APIs that could not be read.
func writeKept(w io.Writer, ref, connection string, copies []keptCopy, problems []string, counted []kbindv1alpha1.KeptCopies, now time.Time) {
	total := 0
	for _, k := range counted {
		total += int(k.Count)
	}
	fmt.Fprintf(w, "%s (Connection %s): %s kept on the provider by its deletion protection (its status counts %d).\n",
		ref, connection, noun(len(copies), "copy", "copies"), total)
	if len(copies) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "API\tPROVIDER COPY\tAGE")
		for _, k := range copies {
			api := k.API
			if k.Provider != k.API {
				api += "←" + k.Provider
			}
			place := k.Name
			if k.Namespace != "" {
				place = k.Namespace + "/" + k.Name
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", api, place, duration.HumanDuration(now.Sub(k.Created)))
		}
		_ = tw.Flush()
	}
	for _, p := range problems {
		fmt.Fprintf(w, "not read: %s\n", p)
	}
}

// deleteKept deletes each copy, only while it is the object listed (its
// UID the precondition).
func deleteKept(ctx context.Context, provider client.Client, copies []keptCopy, w io.Writer) error {
	failed := 0
	for _, k := range copies {
		o := &metav1.PartialObjectMetadata{}
		o.SetGroupVersionKind(k.GVK)
		o.SetNamespace(k.Namespace)
		o.SetName(k.Name)
		uid := k.UID
		place := k.Name
		if k.Namespace != "" {
			place = k.Namespace + "/" + k.Name
		}
		err := provider.Delete(ctx, o, client.Preconditions{UID: &uid})
		switch {
		case err == nil:
			fmt.Fprintf(w, "%s %s deleted\n", k.API, place)
		case apierrors.IsNotFound(err):
			fmt.Fprintf(w, "%s %s: gone already\n", k.API, place)
		case apierrors.IsConflict(err):
			failed++
			fmt.Fprintf(w, "%s %s: replaced since it was listed (another UID): left alone\n", k.API, place)
		default:
			failed++
			fmt.Fprintf(w, "%s %s: not deleted: %v\n", k.API, place, err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s not deleted", noun(failed, "kept copy", "kept copies"))
	}
	return nil
}
