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

package syncer

import (
	"context"
	"errors"
	"fmt"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kbind/kbind/engine/internal/refusal"
)

// syncProbeAfter is how long the informers may take to sync before the
// Syncer asks each side whether it may list the API at all (and again
// every as long after): a refused list leaves an informer retrying
// without ever syncing, and the binding would say "starting" for ever.
const syncProbeAfter = 5 * time.Second

// waitForSync waits until both informers have synced or ctx ends; while
// they have not, it probes every syncProbeAfter and returns an
// *AccessRefused when a side refuses the list.
func (s *Syncer) waitForSync(ctx context.Context, synced ...toolscache.InformerSynced) error {
	for {
		window, cancel := context.WithTimeout(ctx, syncProbeAfter)
		ok := toolscache.WaitForCacheSync(window.Done(), synced...)
		cancel()
		switch {
		case ok:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("informers did not sync: %w", ctx.Err())
		}
		if err := s.probeAccess(ctx); err != nil {
			return err
		}
	}
}

// probeAccess lists one object of the API on each side with the clients
// the informers use the credentials of; a refusal is an *AccessRefused.
func (s *Syncer) probeAccess(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.consumer.List(ctx, s.newList(), client.Limit(1)); refusal.IsForbidden(err) {
		return &AccessRefused{Consumer: true, Group: s.target.GVK.Group, Kind: s.target.GVK.Kind}
	}
	var opts []client.ListOption
	if s.session.ConfinedTo != "" && s.target.Namespaced {
		opts = append(opts, client.InNamespace(s.session.ConfinedTo))
	}
	if err := s.session.Client.List(ctx, s.newProviderList(), append(opts, client.Limit(1))...); refusal.IsForbidden(err) {
		return &AccessRefused{Group: s.target.ProviderGVK.Group, Kind: s.target.ProviderGVK.Kind, Namespace: s.session.ConfinedTo}
	}
	return nil
}

// AccessRefused is a side refusing the konnector the list of a bound API:
// its message says what to grant, and where.
type AccessRefused struct {
	// Consumer: the consumer cluster refuses (the konnector's own
	// ServiceAccount); else the provider (the Connection's credentials).
	Consumer    bool
	Group, Kind string
	// Namespace is the provider namespace the Connection is confined to.
	Namespace string
}

func (e *AccessRefused) Error() string {
	what := e.Kind + " objects (API group " + e.Group + ")"
	if e.Consumer {
		return fmt.Sprintf("the consumer cluster refuses the konnector the list of %s: forbidden; grant the konnector's ServiceAccount get, list, watch, create, update, patch and delete on them (create and delete for imported objects) — with the konnector chart, add %q to rbac.boundResourceGroups", what, e.Group)
	}
	where := "on the provider"
	if e.Namespace != "" {
		where = "in the provider namespace " + e.Namespace
	}
	return fmt.Sprintf("the provider refuses this Connection's credentials the list of %s %s: forbidden; the provider's administrator must grant them get, list, watch, create, update, patch and delete on them %s", what, where, where)
}

// Refusal is err's access refusal message, "" when it is none.
func Refusal(err error) string {
	var refused *AccessRefused
	if errors.As(err, &refused) {
		return refused.Error()
	}
	return ""
}
