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

// Command konnector is kbind's agent. It runs against the consumer cluster
// (in a Pod or as a host process with --kubeconfig) and syncs the APIs that
// provider clusters export. See docs/configuration.md for every option.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/flagconfig/buildinfo"
	"github.com/kbind/kbind/flagconfig/clusterconfig"
	"github.com/kbind/kbind/konnector/internal/config"
	"github.com/kbind/kbind/konnector/internal/memlimit"
)

func main() {
	if err := run(ctrl.SetupSignalHandler()); err != nil {
		if errors.Is(err, config.ErrHelp) || errors.Is(err, config.ErrVersion) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "konnector: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.Load("konnector", os.Args[1:], os.LookupEnv, os.Stdout)
	if err != nil {
		return err
	}
	// zap's levels run the other way: V(1) is zap's -1.
	ctrl.SetLogger(zap.New(zap.Level(zapcore.Level(-cfg.LogVerbosity))))
	build := buildinfo.Get()
	log := ctrl.Log.WithName("konnector")

	restConfig, source, err := clusterconfig.Load("consumer", cfg.Kubeconfig)
	if err != nil {
		return err
	}
	restConfig.QPS, restConfig.Burst = cfg.ConsumerQPS, cfg.ConsumerBurst
	restConfig.UserAgent = "kbind-konnector/" + build.Version
	user, err := clusterconfig.User(ctx, restConfig)
	if err != nil {
		return fmt.Errorf("the consumer cluster (%s): %w", source, err)
	}
	log.Info("consumer cluster", "configuration", source, "user", user)
	scheme := runtime.NewScheme()
	if err := engine.AddToScheme(scheme); err != nil {
		return err
	}
	engineOpts := engine.Options{
		SecretNamespaces:           cfg.SecretNamespaces,
		ProviderQPS:                cfg.ProviderQPS,
		ProviderBurst:              cfg.ProviderBurst,
		ProviderTimeout:            cfg.ProviderTimeout,
		DisableProviderCompression: !cfg.ProviderCompression,
		DiscoveryInterval:          cfg.DiscoveryInterval,
		RecheckInterval:            cfg.RecheckInterval,
		BindingResync:              cfg.BindingResync,
		HeartbeatInterval:          cfg.HeartbeatInterval,
		CredentialExpiryWarning:    cfg.CredentialExpiryWarning,
		Version:                    build.Version,
		Workers:                    cfg.Workers,
		RelatedWatchesPerNamespace: cfg.RelatedWatchesPerNamespace,
		InCluster:                  os.Getenv("KUBERNETES_SERVICE_HOST") != "" && cfg.Kubeconfig == "",
	}
	cacheOpts := cache.Options{}
	if err := engine.ConfigureCache(engineOpts, restConfig, &cacheOpts); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: cfg.MetricsAddr},
		HealthProbeBindAddress: cfg.ProbeAddr,
		PprofBindAddress:       cfg.PprofAddr,
		LeaderElection:         cfg.LeaderElect,
		// The binary exits as soon as the manager stops: hand the Lease
		// over at once so a rolling update's new Pod need not wait it out.
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionID:              kbindv1alpha1.KonnectorLeaderElectionID,
		LeaderElectionNamespace:       cfg.LeaderElectionNamespace,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := metrics.Registry.Register(buildinfo.Collector("konnector")); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informers not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	if _, err := engine.Setup(ctx, mgr, engineOpts); err != nil {
		return err
	}
	log.Info("starting", "version", build.Version, "revision", build.Revision, "namespace", cfg.Namespace, "secretNamespaces", cfg.SecretNamespaces, "goMemoryLimit", memlimit.Apply())
	return mgr.Start(ctx)
}
