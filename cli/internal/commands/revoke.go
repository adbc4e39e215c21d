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
		Short: "Take a consumer's access away: its ServiceAccount (and with it every token), RBAC and admission policy",
		Long: `Delete what grant created for consumer NAME: the ServiceAccount kbind-consumer-NAME first, which
invalidates every token issued for it, then its bindings and roles, and the admission policy last (so no
right is ever left without its confinement). The provider objects the consumer synced stay (the backend
reaps them once its heartbeat is stale); the consumer's own namespace stays. The consumer's Connection
then reports the refusal.`,
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
	err = forEachGranted(ctx, c, name, func(kind string, obj *unstructured.Unstructured) error {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", kind, client.ObjectKeyFromObject(obj), err)
		}
		fmt.Fprintf(e.out, "%s %s deleted\n", kind, client.ObjectKeyFromObject(obj))
		deleted++
		return nil
	})
	if err != nil {
		return err
	}
	if deleted == 0 {
		return fmt.Errorf("nothing is granted to consumer %q on this cluster (objects labelled %s=%s)", name, access.ConsumerLabel, name)
	}
	return nil
}
