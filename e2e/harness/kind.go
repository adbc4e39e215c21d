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

package harness

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
)

// The image the kind path builds with `make image` (the repository's
// Dockerfile) and loads into the consumer cluster (pull policy Never).
const (
	KindImageRepository = "kbind/konnector"
	KindImageTag        = "e2e"
)

// deploymentKonnector is the chart's Deployment on a kind consumer: Kill
// force-deletes the Pod (its ReplicaSet brings a new one), Start waits for
// the rollout, logs come from `kubectl logs`.
type deploymentKonnector struct {
	s    *Suite
	mu   sync.Mutex
	mark time.Time
}

func newDeploymentKonnector(ctx context.Context, s *Suite) (*deploymentKonnector, error) {
	image := KindImageRepository + ":" + KindImageTag
	build := exec.CommandContext(ctx, "make", "image", "REGISTRY=kbind", "VERSION="+KindImageTag)
	build.Dir = s.root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("make image (%s): %v\n%s", image, err, out)
	}
	load := envfuncs.LoadImageToCluster(clusterName(Kind, ConsumerContext), image)
	if _, err := load(ctx, s.Env.EnvConf()); err != nil {
		return nil, fmt.Errorf("kind load %s: %w", image, err)
	}
	return &deploymentKonnector{s: s, mark: time.Now()}, nil
}

func (k *deploymentKonnector) Start(ctx context.Context) error {
	out, err := k.s.Kubectl(ctx, "--context=consumer", "-n", Namespace, "rollout", "status", "deployment/"+Release, "--timeout=3m")
	if err != nil {
		return fmt.Errorf("konnector rollout: %v: %s", err, out)
	}
	return nil
}

func (k *deploymentKonnector) Kill(ctx context.Context) error {
	out, err := k.s.Kubectl(ctx, "--context=consumer", "-n", Namespace, "delete", "pod",
		"-l", "app.kubernetes.io/instance="+Release, "--grace-period=0", "--force", "--wait=false")
	if err != nil {
		return fmt.Errorf("force-deleting the konnector Pod: %v: %s", err, out)
	}
	return nil
}

func (k *deploymentKonnector) Stop(ctx context.Context) {
	_, _ = k.s.Kubectl(ctx, "--context=consumer", "-n", Namespace, "scale", "deployment/"+Release, "--replicas=0")
}

func (k *deploymentKonnector) Mark(string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.mark = time.Now()
}

func (k *deploymentKonnector) LogsSinceMark(ctx context.Context) string {
	k.mu.Lock()
	since := k.mark.UTC().Format(time.RFC3339)
	k.mu.Unlock()
	out, err := k.s.Kubectl(ctx, "--context=consumer", "-n", Namespace, "logs",
		"-l", "app.kubernetes.io/instance="+Release, "-c", "konnector", "--since-time="+since, "--tail=-1")
	if err != nil {
		return fmt.Sprintf("kubectl logs: %v: %s", err, out)
	}
	return out
}
