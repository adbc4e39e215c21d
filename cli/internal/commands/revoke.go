package commands

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kbind/kbind/cli/access"
)

func newRevoke(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Take a consumer's access away: its ServiceAccount (and with it every token) and RBAC",
		Long: `Delete what grant created for consumer NAME: the ServiceAccount kbind-consumer-NAME, which
invalidates every token issued for it, its roles and bindings and the admission policy. The provider
objects the consumer synced stay (the backend reaps them once its heartbeat is stale); the isolation
namespace stays. The consumer's Connection then reports the refusal.`,
		Example: `  kubectl kbind revoke team-a`,
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.revoke(cmd.Context(), args[0])
		},
	}
}

func (e *env) revoke(ctx context.Context, name string) error {
	c, _, err := e.client()
	if err != nil {
		return err
	}
	deleted := 0
	for _, kind := range access.Kinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(kind.APIVersion)
		list.SetKind(kind.Kind + "List")
		if err := c.List(ctx, list, client.MatchingLabels{access.ConsumerLabel: name}); err != nil {
			return fmt.Errorf("listing %ss of consumer %s: %w", kind.Kind, name, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting %s %s: %w", kind.Kind, client.ObjectKeyFromObject(obj), err)
			}
			fmt.Fprintf(e.out, "%s %s deleted\n", kind.Kind, client.ObjectKeyFromObject(obj))
			deleted++
		}
	}
	if deleted == 0 {
		return fmt.Errorf("nothing is granted to consumer %q on this cluster (objects labelled %s=%s)", name, access.ConsumerLabel, name)
	}
	return nil
}
