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

// Command backend is kbind's optional provider-side component. It runs
// against the provider cluster, judges the konnectors' heartbeat Leases by
// its own clock, marks and reports stale consumers and, with --reap, deletes
// what they left behind. See docs/backend.md for every option.
//
// Requirement ids in comments (such as HB-1) refer to docs/requirements.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/backend"
	"github.com/kbind/kbind/backend/internal/config"
	"github.com/kbind/kbind/flagconfig/buildinfo"
	"github.com/kbind/kbind/flagconfig/clusterconfig"
)

func main() {
	if err := run(ctrl.SetupSignalHandler()); err != nil {
		if errors.Is(err, config.ErrHelp) || errors.Is(err, config.ErrVersion) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "backend: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.Load("backend", os.Args[1:], os.LookupEnv, os.Stdout)
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New())
	build := buildinfo.Get()
	logger := ctrl.Log.WithName("backend")

	restConfig, source, err := clusterconfig.Load("provider", cfg.Kubeconfig)
	if err != nil {
		return err
	}
	restConfig.QPS, restConfig.Burst, restConfig.Timeout = cfg.QPS, cfg.Burst, cfg.Timeout
	restConfig.UserAgent = "kbind-backend/" + build.Version
	user, err := clusterconfig.User(ctx, restConfig)
	if err != nil {
		return fmt.Errorf("the provider cluster (%s): %w", source, err)
	}
	logger.Info("provider cluster", "configuration", source, "user", user)
	opts := backend.Options{StaleAfter: cfg.StaleAfter, Reap: cfg.Reap, ReapInterval: cfg.ReapInterval, ReapGrace: cfg.ReapGrace}
	if cfg.StaleAfter < 2*heartbeatInterval {
		logger.Info("WARNING: --stale-after is shorter than two konnector heartbeat intervals; live consumers may be judged stale",
			"staleAfter", cfg.StaleAfter.String(), "heartbeatInterval", heartbeatInterval.String())
	}
	if cfg.DryRun {
		// Logs go to stderr; the list of objects to stdout.
		return backend.DryRun(log.IntoContext(ctx, logger.WithName("dry-run")), restConfig, opts, os.Stdout)
	}

	scheme := runtime.NewScheme()
	if err := backend.AddToScheme(scheme); err != nil {
		return err
	}
	cacheOpts := cache.Options{}
	backend.ConfigureCache(&cacheOpts)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: cfg.MetricsAddr},
		HealthProbeBindAddress: cfg.ProbeAddr,
		LeaderElection:         cfg.LeaderElect,
		// The binary exits as soon as the manager stops: hand the Lease
		// over at once so a rolling update's new Pod need not wait it out.
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionID:              kbindv1alpha1.BackendLeaderElectionID,
		LeaderElectionNamespace:       cfg.LeaderElectionNamespace,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := metrics.Registry.Register(buildinfo.Collector("backend")); err != nil {
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
	if _, err := backend.Setup(mgr, opts); err != nil {
		return err
	}
	logger.Info("starting", "version", build.Version, "revision", build.Revision, "staleAfter", cfg.StaleAfter.String(), "reap", cfg.Reap, "leaderElect", cfg.LeaderElect)
	return mgr.Start(ctx)
}

// heartbeatInterval is how often the konnector renews its Lease (HB-1).
const heartbeatInterval = 30 * time.Second
