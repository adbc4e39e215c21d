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

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine"
	"github.com/kbind/kbind/konnector/internal/config"
	"github.com/kbind/kbind/konnector/internal/memlimit"
)

func main() {
	if err := run(ctrl.SetupSignalHandler()); err != nil {
		if errors.Is(err, config.ErrHelp) {
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
	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("konnector")

	restConfig, err := consumerConfig(cfg)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := engine.AddToScheme(scheme); err != nil {
		return err
	}
	engineOpts := engine.Options{
		SecretNamespaces:  cfg.SecretNamespaces,
		ProviderQPS:       cfg.ProviderQPS,
		ProviderBurst:     cfg.ProviderBurst,
		ProviderTimeout:   cfg.ProviderTimeout,
		DiscoveryInterval: cfg.DiscoveryInterval,
		RecheckInterval:   cfg.RecheckInterval,
		BindingResync:     cfg.BindingResync,
		HeartbeatInterval: cfg.HeartbeatInterval,
		Workers:           cfg.Workers,
		InCluster:         os.Getenv("KUBERNETES_SERVICE_HOST") != "" && cfg.Kubeconfig == "",
	}
	cacheOpts := cache.Options{}
	engine.ConfigureCache(engineOpts, &cacheOpts)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: cfg.MetricsAddr},
		HealthProbeBindAddress:  cfg.ProbeAddr,
		PprofBindAddress:        cfg.PprofAddr,
		LeaderElection:          cfg.LeaderElect,
		LeaderElectionID:        kbindv1alpha1.KonnectorLeaderElectionID,
		LeaderElectionNamespace: cfg.LeaderElectionNamespace,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
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
	log.Info("starting", "namespace", cfg.Namespace, "secretNamespaces", cfg.SecretNamespaces, "goMemoryLimit", memlimit.Apply())
	return mgr.Start(ctx)
}

// consumerConfig is the consumer cluster's client configuration with the
// configured QPS and burst: --kubeconfig, else in-cluster.
func consumerConfig(cfg *config.Config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading the consumer cluster configuration (set --kubeconfig when running outside a Pod): %w", err)
	}
	rc.QPS, rc.Burst = cfg.ConsumerQPS, cfg.ConsumerBurst
	rc.UserAgent = "kbind-konnector"
	return rc, nil
}
