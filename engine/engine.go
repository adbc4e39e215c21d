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

// Package engine is kbind's reusable sync engine. It owns no flags or
// environment: a binary (the konnector) turns its configuration into
// Options, configures its manager's cache with ConfigureCache and calls
// Setup.
//
// # Lifecycle
//
// The long-running parts of the engine are added to the manager, as
// controllers or manager.Runnables, and run as long as the manager does:
// mgr.Start returning (SIGTERM cancels the konnector's context) means
// nothing of the engine runs any more. Runnables that write to a cluster
// need leader election (they run only in the elected konnector); the
// others run in every replica.
//
// controller-runtime stops its runnables group by group, each group as a
// whole and waiting for it (manager/runnable_group.go,
// engageStopProcedure), in this order:
//
//  1. The runnables that need no leader election: the binding wake-ups
//     (wake.Coalescer; see wakeups.go) and the result metric sources
//     (metricSources). Producers of wake-ups keep running for a moment and
//     their wake-ups are dropped, which costs nothing: what they would wake
//     is stopping too.
//  2. The leader-election group, together: the controllers (Connection,
//     kubeconfig Secret, ClusterBinding, Binding), the provider sessions
//     (session.Manager, with the heartbeats and export watches it owns:
//     it stops them and waits for their goroutines), the syncer Registry,
//     which stops every Syncer and waits for it (its workers, its provider
//     Events forwarder), and the related Copier, which stops every related
//     informer and waits for it. They stop in no order among themselves, so
//     each is safe against the others: a binding reconcile that runs while
//     they stop starts no Syncer (Registry.StopAll), no informer (the
//     Copier's goroutines refuse new ones) and no live session (one built
//     then is stopped from birth).
//  3. The caches, the consumer informers the Syncers' handlers were on:
//     only now, so that no Syncer sees its informer go while it runs.
//  4. The webhook and HTTP servers (metrics, probes), last, so that the
//     probes and a last scrape answer while the rest stops.
//
// All of it within the manager's GracefulShutdownTimeout (30 s by
// default): mgr.Start returns an error naming the grace period if a group
// has not stopped by then, and the process exits anyway.
//
// A Syncer runs on its provider session and ends with it too; the
// Registry waits for it either way. Nothing waits for the context passed
// to Setup to end (the sessions stop early if it does, as before).
//
// Requirement ids in comments (such as SYNC-R2) refer to docs/requirements.md.
package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/binding"
	"github.com/kbind/kbind/engine/connection"
	"github.com/kbind/kbind/engine/identity"
	"github.com/kbind/kbind/engine/index"
	"github.com/kbind/kbind/engine/internal/slim"
	"github.com/kbind/kbind/engine/internal/watchjson"
	"github.com/kbind/kbind/engine/related"
	kbindschema "github.com/kbind/kbind/engine/schema"
	"github.com/kbind/kbind/engine/session"
	"github.com/kbind/kbind/engine/syncer"
)

// AddToScheme registers every type the engine reads on the consumer.
func AddToScheme(s *runtime.Scheme) error {
	return errors.Join(clientgoscheme.AddToScheme(s), apiextensionsv1.AddToScheme(s), kbindv1alpha1.AddToScheme(s))
}

// ConfigureCache restricts the consumer cache the way the engine needs:
// Secrets are cached only in the allowed Secret namespaces, never
// cluster-wide, Events only when kbind forwarded them, and managed fields
// (and kubectl's last-applied annotation on bound objects) are dropped
// from every cached object. The bound objects' informers watch through a
// client that decodes each event once; cfg is the cache's config.
func ConfigureCache(opts Options, cfg *rest.Config, c *cache.Options) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("creating the consumer watch client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return fmt.Errorf("creating the consumer watch mapper: %w", err)
	}
	// The cache selects bound objects by no namespace, label or field.
	c.NewInformer = (&watchjson.Watches{Config: cfg, HTTPClient: hc, Mapper: mapper}).NewInformer
	if c.ByObject == nil {
		c.ByObject = map[client.Object]cache.ByObject{}
	}
	namespaces := map[string]cache.Config{}
	for _, ns := range opts.SecretNamespaces {
		namespaces[ns] = cache.Config{}
	}
	c.ByObject[&corev1.Secret{}] = cache.ByObject{Namespaces: namespaces}
	// Only the Events kbind forwarded from the provider, read back to
	// update them and to write nothing after a restart.
	c.ByObject[&corev1.Event{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{kbindv1alpha1.ManagedLabel: kbindv1alpha1.ManagedLabelValue})}
	c.DefaultTransform = slim.Transform()
	return nil
}

// Engine is the running engine's handle.
type Engine struct {
	// Sessions are the provider sessions; later components hang their
	// provider watches on them.
	Sessions *session.Manager
}

// Setup registers the engine's indexes and controllers with mgr.
func Setup(ctx context.Context, mgr manager.Manager, opts Options) (*Engine, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	providerScheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(providerScheme), apiextensionsv1.AddToScheme(providerScheme)); err != nil {
		return nil, err
	}
	sessions := session.NewManager(ctx, session.Options{
		QPS: opts.ProviderQPS, Burst: opts.ProviderBurst, Timeout: opts.ProviderTimeout,
		Scheme: providerScheme, UserAgent: "kbind-konnector",
		DisableCompression: opts.DisableProviderCompression,
	})
	if err := mgr.Add(sessions); err != nil {
		return nil, fmt.Errorf("adding the provider sessions: %w", err)
	}
	local, err := identity.NewReader(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("consumer identity reader: %w", err)
	}
	installer := &kbindschema.Installer{Client: mgr.GetClient()}
	if err := (&connection.Reconciler{
		Installer:         installer,
		Client:            mgr.GetClient(),
		SecretNamespaces:  opts.SecretNamespaces,
		DiscoveryInterval: opts.DiscoveryInterval,
		RecheckInterval:   opts.RecheckInterval,
		HeartbeatInterval: opts.HeartbeatInterval,
		InCluster:         opts.InCluster,
		Sessions:          sessions,
		LocalIdentity:     local,
		ExpiryWarning:     opts.CredentialExpiryWarning,
		Version:           opts.Version,
		Events:            mgr.GetEventRecorder("kbind-konnector"),
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the connection controller: %w", err)
	}
	if err := (&connection.SecretReconciler{Client: mgr.GetClient(), SecretNamespaces: opts.SecretNamespaces}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the kubeconfig Secret controller: %w", err)
	}
	wakeups := newWakeups(2)
	if err := mgr.Add(wakeups.bindings); err != nil {
		return nil, fmt.Errorf("adding the binding wake-ups: %w", err)
	}
	results := syncer.NewResults(wakeups.resultsChanged)
	sessions.Subscribe(wakeups.sessionChanged)
	if err := mgr.Add(metricSources{results: results}); err != nil {
		return nil, fmt.Errorf("adding the result metrics: %w", err)
	}
	registry := &syncer.Registry{
		Consumer: mgr.GetClient(), Cache: mgr.GetCache(), Sessions: sessions,
		Events: mgr.GetEventRecorder("kbind-konnector"), Results: results, Workers: opts.Workers,
		Notify: wakeups.syncerChanged,
		// A provider object of an imported copy must stay gone one binding
		// resync before the copy goes (issue #52).
		ImportAbsenceWindow: opts.BindingResync,
		// Every binding recomputes its claims at least once in it.
		DeselectionGrace: 2 * opts.BindingResync,
	}
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("consumer client: %w", err)
	}
	copier, err := related.NewCopier(ctx, related.Options{
		Consumer: mgr.GetConfig(), ConsumerClient: direct, ConsumerCache: mgr.GetCache(), Events: mgr.GetEventRecorder("kbind-konnector"),
		SecretNamespaces: opts.SecretNamespaces, WatchesPerNamespace: opts.RelatedWatchesPerNamespace,
		Trigger: wakeups.relatedChanged,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(copier); err != nil {
		return nil, fmt.Errorf("adding the related copier: %w", err)
	}
	registry.ReleaseOrphaned = releaseOrphanedThrough(copier)
	if err := mgr.Add(registry); err != nil {
		return nil, fmt.Errorf("adding the syncer registry: %w", err)
	}
	objects, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("consumer metadata client: %w", err)
	}
	for i, namespaced := range []bool{false, true} {
		if err := (&binding.Reconciler{
			Client: mgr.GetClient(), Sessions: sessions, Installer: installer,
			Namespaced: namespaced, Resync: opts.BindingResync,
			Syncers: registry, Results: results, Triggers: wakeups.bindingTriggers(i),
			Related: copier, Events: mgr.GetEventRecorder("kbind-konnector"), Metadata: objects,
		}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up the binding controllers: %w", err)
		}
	}
	return &Engine{Sessions: sessions}, nil
}
