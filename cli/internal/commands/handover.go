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
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
)

// newHandOver is adopt's and release's shared shape: to is who owns the
// object afterwards (kbindv1alpha1.HandOverConsumer or HandOverProvider).
func newHandOver(e *env, use, to, short, long, example string) *cobra.Command {
	var timeout time.Duration
	var noWait bool
	cmd := &cobra.Command{
		Use: use + " <resource>/<name>", Short: short, Long: long, Example: example,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.handOver(cmd.Context(), args[0], to, !noWait, timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the konnector to finish the hand-over")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "ask for the hand-over and return without waiting")
	return cmd
}

func newAdopt(e *env) *cobra.Command {
	return newHandOver(e, "adopt", kbindv1alpha1.HandOverConsumer,
		"Make an object imported from the provider the consumer's own",
		`Hand an imported object (core.kbind.io/owner: provider, docs/import.md) over to the consumer: from
then on it is a normal consumer object whose spec goes up to the provider, and the provider's
changes to it are reverted. The konnector does it (annotation core.kbind.io/hand-over: consumer);
this command asks and waits. At no moment do both sides, or neither, own it.`,
		`  kubectl kbind adopt widgets.example.org/db -n team-a`)
}

func newRelease(e *env) *cobra.Command {
	return newHandOver(e, "release", kbindv1alpha1.HandOverProvider,
		"Make a consumer object the provider's (imported from then on)",
		`Hand a consumer-owned object over to the provider: from then on it is imported (core.kbind.io/owner:
provider, docs/import.md), its spec and status follow the provider object, and consumer edits are
reverted. The binding covering it must import the provider's objects (providerObjects: Import).
The konnector does it (annotation core.kbind.io/hand-over: provider); this command asks and waits.`,
		`  kubectl kbind release widgets.example.org/db -n team-a`)
}

// handOver asks the konnector to hand the object arg over to to, and waits
// until it says done (or refused) unless wait is false.
func (e *env) handOver(ctx context.Context, arg, to string, waitDone bool, timeout time.Duration) error {
	resource, name, ok := strings.Cut(arg, "/")
	if !ok || resource == "" || name == "" {
		return usageError{fmt.Errorf("%q: want <resource>/<name>, such as widgets.example.org/db", arg)}
	}
	c, _, err := e.client()
	if err != nil {
		return err
	}
	gvk, err := kindFor(c, resource)
	if err != nil {
		return err
	}
	ns, _, err := e.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	key := types.NamespacedName{Namespace: ns, Name: name}
	if err := c.Get(ctx, key, obj); err != nil {
		return fmt.Errorf("reading %s %s: %w", resource, key, err)
	}
	if problem := handOverProblem(obj, to); problem != "" {
		return fmt.Errorf("%s %s %s", resource, key, problem)
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, kbindv1alpha1.HandOverAnnotation, to))
	if err := c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("asking for the hand-over: %w", err)
	}
	if !waitDone {
		fmt.Fprintf(e.out, "%s %s: hand-over to the %s asked for\n", resource, key, to)
		return nil
	}
	asked := time.Now().Add(-time.Second)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, obj); err != nil {
			return false, err
		}
		if handedOver(obj, to) {
			return true, nil
		}
		if why := refusal(ctx, c, obj, asked); why != "" {
			return false, fmt.Errorf("the konnector refuses: %s", why)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s %s: hand-over to the %s not done: %w (kubectl describe shows the object's Events; kubectl kbind doctor checks the konnector)", resource, key, to, err)
	}
	fmt.Fprintf(e.out, "%s %s is the %s's now\n", resource, key, to)
	return nil
}

// handOverProblem is why obj cannot be handed over to to ("" when it can).
func handOverProblem(obj *unstructured.Unstructured, to string) string {
	imported := obj.GetAnnotations()[kbindv1alpha1.OwnerAnnotation] == kbindv1alpha1.OwnerProvider
	switch {
	case !obj.GetDeletionTimestamp().IsZero():
		return "is being deleted"
	case to == kbindv1alpha1.HandOverConsumer && !imported:
		return "is not imported from the provider (it has no " + kbindv1alpha1.OwnerAnnotation + ": " + kbindv1alpha1.OwnerProvider + "): it is the consumer's already"
	case to == kbindv1alpha1.HandOverProvider && imported:
		return "is the provider's already (" + kbindv1alpha1.OwnerAnnotation + ": " + kbindv1alpha1.OwnerProvider + ")"
	case to == kbindv1alpha1.HandOverProvider && !slices.Contains(obj.GetFinalizers(), kbindv1alpha1.SyncerFinalizer):
		return "is not synced by kbind (no " + kbindv1alpha1.SyncerFinalizer + " finalizer): there is no provider copy to hand over"
	}
	return ""
}

// handedOver reports whether obj is owned by to, the request gone.
func handedOver(obj *unstructured.Unstructured, to string) bool {
	ann := obj.GetAnnotations()
	if _, asked := ann[kbindv1alpha1.HandOverAnnotation]; asked {
		return false
	}
	imported := ann[kbindv1alpha1.OwnerAnnotation] == kbindv1alpha1.OwnerProvider
	return imported == (to == kbindv1alpha1.HandOverProvider)
}

// refusal is the message of the konnector's latest HandOverRefused Event on
// obj since asked, "" when none.
func refusal(ctx context.Context, c client.Client, obj *unstructured.Unstructured, asked time.Time) string {
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(obj.GetNamespace()), client.MatchingFields{"involvedObject.uid": string(obj.GetUID())}); err != nil {
		return ""
	}
	msg, at := "", time.Time{}
	for _, ev := range events.Items {
		if last := lastSeen(ev); ev.Reason == "HandOverRefused" && last.After(asked) && !last.Before(at) {
			msg, at = ev.Message, last
		}
	}
	return msg
}

// lastSeen is when an Event was last observed, whichever API wrote it.
func lastSeen(ev corev1.Event) time.Time {
	last := ev.LastTimestamp.Time
	if ev.EventTime.After(last) {
		last = ev.EventTime.Time
	}
	if ev.Series != nil && ev.Series.LastObservedTime.After(last) {
		last = ev.Series.LastObservedTime.Time
	}
	return last
}

// kindFor resolves a resource argument (widgets, widgets.example.org) to
// its kind through the cluster's discovery.
func kindFor(c client.Client, resource string) (schema.GroupVersionKind, error) {
	gvr := schema.ParseGroupResource(resource).WithVersion("")
	gvk, err := c.RESTMapper().KindFor(gvr)
	if err != nil {
		return schema.GroupVersionKind{}, usageError{fmt.Errorf("resource %q: %w", resource, err)}
	}
	return gvk, nil
}
